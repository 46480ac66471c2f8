// The C++ source of the CPU emulator's libraries: see cpu_module_source.h.
#include "tuner/emulator/cpu_module_source.h"

#include <algorithm>
#include <cctype>
#include <ostream>
#include <regex>

namespace gputune::tuner {

namespace {

// A misaligned vector access stops the launch with the kernel's line, as it faults on a GPU:
// __ldg's vector loads report it themselves; a plain `*reinterpret_cast<const float4*>(p)` or
// `((float4*)p)[i]` (a vector access to shared memory) is checked by the compiler's alignment
// sanitizer, turned on for the kernels that cast pointers (it costs a quarter more compile time),
// whose report the prelude's handler turns into the launch's fault (gt::type_mismatch).
bool casts_pointers(const std::string& source) {
  // reinterpret_cast<T*>(p) however it is used (*, ->, []), or a C cast to a vector pointer;
  // not __ldg(reinterpret_cast<...>(p)), whose load checks itself.
  static const std::regex ldg(R"(__ldg\s*\(\s*reinterpret_cast)");
  static const std::regex cast(
      R"(reinterpret_cast\s*<|\(\s*(?:const\s+)?(?:volatile\s+)?[A-Za-z_]\w*[234]\s*\*\s*\))");
  return std::regex_search(std::regex_replace(source, ldg, "__ldg("), cast);
}

/// Drops `extern "C"`, and the braces of an `extern "C" { ... }` block with it (its contents
/// stay, at the same lines).
std::string strip_extern_c(std::string s) {
  for (size_t p; (p = s.find("extern \"C\"")) != std::string::npos;) {
    s.replace(p, 10, 10, ' ');
    size_t b = p + 10;
    while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    if (b >= s.size() || s[b] != '{') continue;
    // The matching brace, past comments, strings and character literals.
    int depth = 0;
    for (size_t i = b; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
        i = s.find('\n', i);
        if (i == std::string::npos) break;
      } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
        i = s.find("*/", i + 2);
        if (i == std::string::npos) break;
        ++i;
      } else if (c == '"' || c == '\'') {
        for (++i; i < s.size() && s[i] != c; ++i)
          if (s[i] == '\\') ++i;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        s[b] = ' ', s[i] = ' ';
        break;
      }
    }
  }
  return s;
}

/// `extern __shared__ T a[];` becomes a macro for the launch's dynamic shared memory (valid at
/// namespace and at function scope); returns the names, to be #undef'd after the kernel.
std::string dynamic_shared(std::string s, std::vector<std::string>& names) {
  static const std::regex decl(
      R"(extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_][\w:]*(?:\s+[A-Za-z_]\w*)?)\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_]\w*)\s*\[\s*\]\s*;)");
  std::string out;
  auto it = std::sregex_iterator(s.begin(), s.end(), decl);
  size_t last = 0;
  for (; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out += s.substr(last, static_cast<size_t>(m.position(0)) - last);
    names.push_back(m[2]);
    out += "\n#undef " + m[2].str() + "\n#define " + m[2].str() + " (reinterpret_cast<" +
           m[1].str() + "*>(::gt::dyn_smem))\n";
    last = static_cast<size_t>(m.position(0) + m.length(0));
  }
  return out + s.substr(last);
}

/// `s` as a C string literal (for #line).
std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c == '\n' ? ' ' : c;
  }
  return q + "\"";
}

}  // namespace

std::vector<std::vector<size_t>> chunk_kernels(const std::vector<CpuKernel>& kernels, int jobs) {
  static const std::regex include_line(R"((^|\n)[ \t]*#[ \t]*include\b)");
  std::vector<std::vector<size_t>> chunks;
  std::vector<size_t> plain;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (std::regex_search(kernels[i].source, include_line))
      chunks.push_back({i});
    else
      plain.push_back(i);
  }
  const size_t per = (plain.size() + static_cast<size_t>(jobs) - 1) / static_cast<size_t>(jobs);
  for (size_t from = 0; from < plain.size(); from += per)
    chunks.emplace_back(
        plain.begin() + static_cast<std::ptrdiff_t>(from),
        plain.begin() + static_cast<std::ptrdiff_t>(std::min(plain.size(), from + per)));
  return chunks;
}

bool write_chunk(std::ostream& o, const std::vector<CpuKernel>& kernels,
                 const std::vector<size_t>& chunk) {
  bool check_alignment = false;
  o << "#include \"gt_cpu_cuda.h\"\n";
  for (size_t i : chunk) {
    const CpuKernel& k = kernels[i];
    check_alignment |= casts_pointers(k.source);
    std::vector<std::string> dyn;
    const std::string text = dynamic_shared(strip_extern_c(k.source), dyn);
    for (const auto& [name, value] : k.defines) o << "#define " << name << " " << value << "\n";
    const std::string file =
        k.file_name.empty() ? "kernel" + std::to_string(i) + ".cu" : k.file_name;
    o << "namespace gt_k" << i
      << " {\nusing ::gt::device_api::printf;\nusing ::gt::device_api::malloc;\n"
         "using ::gt::device_api::free;\n#line 1 "
      << quoted(file) << "\n"
      << text << "\n}\n";
    for (const std::string& n : dyn) o << "#undef " << n << "\n";
    for (const auto& d : k.defines) o << "#undef " << d.first << "\n";
    const std::string fn = "&gt_k" + std::to_string(i) + "::" + k.name;
    o << "extern \"C\" const char* gt_launch_" << i
      << "(const unsigned* g, const unsigned* b, void** a, unsigned long long smem) {\n"
         "  return ::gt::launch(g, b, smem, [&] { ::gt::call("
      << fn << ", a); });\n}\n"
      << "extern \"C\" const ::gt::Param* gt_params_" << i
      << "(std::size_t* n) { return ::gt::signature(" << fn << ", n); }\n";
  }
  o << "extern \"C\" unsigned long long gt_vector_loads() { return ::gt::vector_loads; }\n"
       "extern \"C\" const void* gt_ldg_log(unsigned long long* n) {\n"
       "  *n = ::gt::ldg_log.size();\n  return ::gt::ldg_log.data();\n}\n"
       "extern \"C\" const void* gt_dyn_smem(unsigned long long* n) {\n"
       "  *n = ::gt::dyn_bytes;\n  return ::gt::dyn_smem;\n}\n"
       "extern \"C\" const char* gt_pending_fault() { return ::gt::fault; }\n"
       "extern \"C\" ::gt::Deferral* gt_deferral() { return &::gt::deferral; }\n"
       "extern \"C\" int gt_stack_overflow(const void* a) {\n"
       "  for (const auto& f : ::gt::pool) if (f.stack.in_guard(a)) return 1;\n"
       "  return 0;\n}\n";
  return check_alignment;
}

}  // namespace gputune::tuner
