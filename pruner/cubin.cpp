#include "pruner/cubin.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <regex>

namespace gputune::pruner {

namespace {

// ELF64 little-endian structures, read field by field (no <elf.h> needed, no alignment games).
template <typename T>
T rd(std::string_view b, size_t off) {
  if (off > b.size() || b.size() - off < sizeof(T))  // off + sizeof(T) may wrap around
    throw CubinError("cubin truncated (offset " + std::to_string(off) + ")");
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

struct Section {
  std::string name;
  std::uint32_t type, info, link;
  std::uint64_t flags, offset, size;
};

// EIATTR codes of the .nv.info sections (from NVIDIA's cubin layout, as cuobjdump prints them).
constexpr std::uint8_t EIATTR_MAX_THREADS = 0x05;
constexpr std::uint8_t EIATTR_FRAME_SIZE = 0x11;
constexpr std::uint8_t EIATTR_KPARAM_INFO = 0x17;
constexpr std::uint8_t EIATTR_PARAM_CBANK_SIZE = 0x19;
constexpr std::uint8_t EIATTR_REGCOUNT = 0x2f;
constexpr std::uint8_t EIATTR_NUM_BARRIERS = 0x4c;  // a byte: barriers 0..N-1 in use
constexpr std::uint8_t EIFMT_NVAL = 0x01, EIFMT_BVAL = 0x02, EIFMT_HVAL = 0x03, EIFMT_SVAL = 0x04;

struct Elf {
  std::vector<Section> sections;
  std::vector<std::string> symbols;  // by index
};

Elf parse_elf(std::string_view b) {
  if (b.size() < 64 || std::memcmp(b.data(),
                                   "\x7f"
                                   "ELF",
                                   4) != 0)
    throw CubinError("not an ELF file (a cubin starts with \\x7fELF)");
  if (b[4] != 2 || b[5] != 1) throw CubinError("not a 64-bit little-endian ELF");
  if (rd<std::uint16_t>(b, 0x12) != 190) throw CubinError("ELF machine is not NVIDIA CUDA (190)");
  auto shoff = rd<std::uint64_t>(b, 0x28);
  auto shentsize = rd<std::uint16_t>(b, 0x3a);
  auto shnum = rd<std::uint16_t>(b, 0x3c);
  auto shstrndx = rd<std::uint16_t>(b, 0x3e);
  Elf e;
  std::vector<std::uint32_t> name_off;
  for (std::uint16_t i = 0; i < shnum; ++i) {
    size_t h = shoff + static_cast<size_t>(i) * shentsize;
    Section s;
    name_off.push_back(rd<std::uint32_t>(b, h));
    s.type = rd<std::uint32_t>(b, h + 4);
    s.flags = rd<std::uint64_t>(b, h + 8);
    s.offset = rd<std::uint64_t>(b, h + 24);
    s.size = rd<std::uint64_t>(b, h + 32);
    s.link = rd<std::uint32_t>(b, h + 40);
    s.info = rd<std::uint32_t>(b, h + 44);
    e.sections.push_back(s);
  }
  if (shstrndx >= e.sections.size()) throw CubinError("bad section name table index");
  auto cstr = [&](size_t off) {
    if (off >= b.size()) throw CubinError("string offset out of range");
    size_t end = b.find('\0', off);
    return std::string(b.substr(off, end == std::string_view::npos ? b.size() - off : end - off));
  };
  const Section& shstr = e.sections[shstrndx];
  for (size_t i = 0; i < e.sections.size(); ++i)
    e.sections[i].name = cstr(shstr.offset + name_off[i]);
  for (auto& s : e.sections) {
    if (s.type != 2) continue;  // SHT_SYMTAB
    if (s.link >= e.sections.size()) throw CubinError("bad string table index of a symbol table");
    const Section& strtab = e.sections[s.link];
    for (std::uint64_t off = 0; off + 24 <= s.size; off += 24)
      e.symbols.push_back(cstr(strtab.offset + rd<std::uint32_t>(b, s.offset + off)));
  }
  return e;
}

// Calls f(attr, payload, payload_size) for each attribute of an .nv.info section.
template <typename F>
void for_each_attr(std::string_view b, const Section& s, F f) {
  if (s.offset > b.size() || s.size > b.size() - s.offset)
    throw CubinError("section " + s.name + " lies beyond the end of the cubin");
  size_t p = s.offset, end = s.offset + s.size;
  while (p + 2 <= end) {
    auto fmt = static_cast<std::uint8_t>(b[p]);
    auto attr = static_cast<std::uint8_t>(b[p + 1]);
    if (fmt == EIFMT_SVAL) {
      auto sz = rd<std::uint16_t>(b, p + 2);
      f(attr, p + 4, sz);
      p += 4 + sz;
    } else if (fmt == EIFMT_HVAL || fmt == EIFMT_BVAL) {
      f(attr, p + 2, 2);
      p += 4;
    } else if (fmt == EIFMT_NVAL) {
      p += 4;  // no value, but records stay 4-byte aligned (seen as 01 35 00 00 in sm_80 cubins)
    } else {
      throw CubinError("unknown .nv.info attribute format " + std::to_string(fmt));
    }
  }
}

}  // namespace

std::vector<std::string> cubin_kernels(std::string_view cubin) {
  std::vector<std::string> out;
  for (auto& s : parse_elf(cubin).sections)
    if (s.name.rfind(".text.", 0) == 0) out.push_back(s.name.substr(6));
  return out;
}

Resources read_cubin_resources(std::string_view b, const std::string& kernel) {
  Elf e = parse_elf(b);
  Resources r;
  int sym = -1;
  for (size_t i = 0; i < e.symbols.size(); ++i)
    if (e.symbols[i] == kernel) sym = static_cast<int>(i);
  const Section* text = nullptr;
  for (auto& s : e.sections)
    if (s.name == ".text." + kernel) text = &s;
  if (text && sym < 0)
    throw CubinError("kernel '" + kernel +
                     "' has a .text section but no symbol in the symbol table (a damaged cubin)");
  if (!text) {
    std::string have;
    for (auto& k : cubin_kernels(b)) have += (have.empty() ? "" : ", ") + k;
    throw CubinError("kernel '" + kernel + "' is not in the cubin (it has: " + have + ")");
  }
  bool reserved = false;
  for (auto& n : e.symbols) reserved = reserved || n == ".nv.reservedSmem.offset0";
  for (auto& s : e.sections) {
    if (s.name == ".nv.info") {
      for_each_attr(b, s, [&](std::uint8_t attr, size_t off, size_t sz) {
        if (sz < 8 || static_cast<int>(rd<std::uint32_t>(b, off)) != sym) return;
        auto val = static_cast<int>(rd<std::uint32_t>(b, off + 4));
        if (attr == EIATTR_REGCOUNT) r.registers = val;
        if (attr == EIATTR_FRAME_SIZE) r.local_bytes = val;
      });
    } else if (s.name == ".nv.info." + kernel) {
      for_each_attr(b, s, [&](std::uint8_t attr, size_t off, size_t sz) {
        if (attr == EIATTR_MAX_THREADS && sz >= 12)
          r.max_threads =
              static_cast<int>(rd<std::uint32_t>(b, off) * rd<std::uint32_t>(b, off + 4) *
                               rd<std::uint32_t>(b, off + 8));
        if (attr == EIATTR_PARAM_CBANK_SIZE && sz >= 2) r.param_bytes = rd<std::uint16_t>(b, off);
        if (attr == EIATTR_NUM_BARRIERS && sz >= 1) r.barriers = rd<std::uint8_t>(b, off);
        // index (4 bytes), ordinal (2), offset (2), then a word whose top 14 bits are the size.
        if (attr == EIATTR_KPARAM_INFO && sz >= 12) {
          const size_t ordinal = rd<std::uint16_t>(b, off + 4);
          if (ordinal >= 4096) throw CubinError("parameter ordinal out of range in .nv.info");
          if (r.param_sizes.size() <= ordinal) r.param_sizes.resize(ordinal + 1, 0);
          r.param_sizes[ordinal] = static_cast<int>(rd<std::uint32_t>(b, off + 8) >> 18);
        }
      });
    } else if (s.name == ".nv.shared." + kernel) {
      // On sm_90 the section includes the 1 KiB the system reserves per block (the cubin then
      // carries the .nv.reservedSmem.offset0 symbol); ptxas and the driver report it apart.
      int size = static_cast<int>(s.size);
      r.reserved_smem = reserved ? std::min(size, 1024) : 0;
      r.static_smem = size - r.reserved_smem;
    }
  }
  if (r.registers == 0) r.registers = static_cast<int>(text->info >> 24);  // older cubins
  return r;
}

void apply_ptxas_log(Resources& r, const std::string& log, const std::string& kernel) {
  // ptxas info    : Function properties for NAME
  //     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  auto pos = log.find("Function properties for " + kernel + "\n");
  if (pos == std::string::npos) pos = log.find("Function properties for " + kernel + "\r");
  if (pos == std::string::npos) return;
  // A count of more than 9 digits (ptxas never writes one) stays unknown: std::stoi would throw.
  auto count = [](const std::string& digits) { return digits.size() > 9 ? -1 : std::stoi(digits); };
  static const std::regex spills(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  std::smatch m;
  std::string rest = log.substr(pos, 400);
  if (std::regex_search(rest, m, spills) && count(m[1]) >= 0 && count(m[2]) >= 0) {
    r.spill_stores = count(m[1]);
    r.spill_loads = count(m[2]);
  }
  static const std::regex regs(R"(Used (\d+) registers)");
  if (r.registers == 0 && std::regex_search(rest, m, regs)) r.registers = std::max(0, count(m[1]));
}

}  // namespace gputune::pruner
