// One variant's public entry points (naive.h): its source (emit_variant: the Emitter's kernel,
// drop_unused_bindings, the file's own text around it), its label, its launched block and its
// shared memory; and NaiveError's out-of-line destructors (naive.h: built here, with RTTI).
// Must not: write kernel code itself (the Emitter does) or build the space (space.cpp).
#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "variants/naive/internal.h"

namespace gputune::naive {

NaiveError::~NaiveError() = default;
NaiveSourceError::~NaiveSourceError() = default;

long long shared_bytes(const NaiveKernel& k, const Choice& c) {
  return Emitter(k, c).shared_bytes();
}

long long dynamic_shared_bytes(const NaiveKernel& k, const Choice& c,
                               const std::map<std::string, double>& scalars) {
  return Emitter(k, c).dynamic_bytes(scalars);
}

namespace {

bool ident_char(char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; }

/// Whether `name` occurs as a whole identifier in `text`.
bool mentions(const std::string& text, const std::string& name) {
  for (size_t p = text.find(name); p != std::string::npos; p = text.find(name, p + 1)) {
    const bool start = p == 0 || !ident_char(text[p - 1]);
    const bool end = p + name.size() >= text.size() || !ident_char(text[p + name.size()]);
    if (start && end) return true;
  }
  return false;
}

/// The code of a line, without its `//` comment.
std::string code_of(const std::string& l) {
  const size_t c = l.find("//");
  return c == std::string::npos ? l : l.substr(0, c);
}

/// `const int NAME = EXPR;` alone on a line (a comment may follow), EXPR without calls,
/// assignments or increments: NAME, or "" for any other line.
std::string pure_binding(const std::string& l) {
  static const std::string kConst = "const int ";
  size_t p = l.find_first_not_of(' ');
  if (p == std::string::npos || l.compare(p, kConst.size(), kConst) != 0) return "";
  p += kConst.size();
  size_t e = p;
  while (e < l.size() && ident_char(l[e])) ++e;
  if (e == p || std::isdigit(static_cast<unsigned char>(l[p])) || l.compare(e, 3, " = ") != 0)
    return "";
  const size_t semi = l.find(';', e);
  if (semi == std::string::npos) return "";
  const std::string rest = code_of(l.substr(semi + 1));
  if (rest.find_first_not_of(' ') != std::string::npos) return "";
  const std::string expr = l.substr(e + 3, semi - e - 3);
  for (size_t i = 0; i < expr.size(); ++i) {
    const char ch = expr[i], prev = i ? expr[i - 1] : ' ',
               next = i + 1 < expr.size() ? expr[i + 1] : ' ';
    if ((ch == '+' || ch == '-') && next == ch) return "";
    if (ch == '=' && next != '=' && prev != '=' && prev != '<' && prev != '>' && prev != '!')
      return "";
    if (ch == '(') {  // a call: an identifier just before the parenthesis
      size_t j = i;
      while (j > 0 && expr[j - 1] == ' ') --j;
      if (j > 0 && ident_char(expr[j - 1])) return "";
    }
  }
  return l.substr(p, e - p);
}

}  // namespace

std::string drop_unused_bindings(const std::string& src) {
  std::vector<std::string> lines;
  {
    std::istringstream in(src);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  std::string macros;  // a name a macro mentions is kept: its uses are hidden in the macro
  for (const std::string& l : lines) {
    const size_t first = l.find_first_not_of(' ');
    if (first != std::string::npos && l[first] == '#') macros += l + "\n";
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string name = pure_binding(lines[i]);
      if (name.empty() || mentions(macros, name)) continue;
      bool used = false;
      int depth = 0;
      for (size_t j = i + 1; j < lines.size() && depth >= 0 && !used; ++j) {
        std::string code = code_of(lines[j]);
        for (size_t c = 0; c < code.size(); ++c) {
          if (code[c] == '{') ++depth;
          if (code[c] == '}' && --depth < 0) {
            code.resize(c);  // the enclosing block ends here
            break;
          }
        }
        used = mentions(code, name);
      }
      if (!used) {
        lines.erase(lines.begin() + static_cast<long>(i));
        changed = true;
        --i;
      }
    }
  }
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  if (!src.empty() && src.back() != '\n') out.pop_back();
  return out;
}

std::string emit_variant(const NaiveKernel& k, const Choice& c) {
  const std::string v = drop_unused_bindings(Emitter(k, c).run());
  if (k.before.empty() && k.after.find_first_not_of(" \t\r\n") == std::string::npos) return v;
  // The file's own text around the generated kernel: after gputune's header comment and helpers,
  // so that the file's macros (`#define N 64`) cannot reach into those.
  size_t at = v.find("\nextern \"C\" __global__ void ");
  at = at == std::string::npos ? 0 : at + 1;
  std::string out = v.substr(0, at) + k.before;
  if (!k.before.empty() && k.before.back() != '\n') out += "\n";
  out += v.substr(at);
  if (k.after.find_first_not_of(" \t\r\n") != std::string::npos) out += k.after;
  return out;
}

std::string choice_label(const NaiveKernel& k, const Choice& c) {
  std::string s = "bx" + std::to_string(c.block_x);
  if (k.dims == 2) s += "_by" + std::to_string(c.block_y);
  s += "_mx" + std::to_string(c.merge_x);
  if (k.dims == 2) s += "_my" + std::to_string(c.merge_y);
  if (k.loops) s += "_u" + std::to_string(c.unroll);
  if (c.split > 1) s += "_s" + std::to_string(c.split);
  bool shared = false, halo = false;
  const std::map<int, HaloPlan> halos = halo_plans(k);
  for (const ArrayOptions& a : array_options(k)) {
    if (a.allowed.size() < 2) continue;
    auto it = c.cache.find(a.array);
    Cache ch = it == c.cache.end() ? Cache::Global : it->second;
    const bool window = std::any_of(halos.begin(), halos.end(), [&](const auto& h) {
      return h.second.ok && k.params[static_cast<size_t>(h.first)].name == a.array;
    });
    (window ? halo : shared) |= ch == Cache::Shared;
    s += "_" + a.array + "-" + cache_name(ch);
  }
  bool staged = false;
  for (const OutputOptions& o : output_options(k)) {
    if (o.stage) {
      staged |= c.stage_store.count(o.array) > 0;
      s += "_w" + o.array + "-" + (c.stage_store.count(o.array) ? "shared" : "direct");
    }
    if (o.reduce) s += "_r" + o.array + "-" + (c.block_reduce.count(o.array) ? "block" : "atomic");
  }
  if (shared) s += "_tk" + std::to_string(c.tile_k);
  if (shared && c.stages > 1) s += "_st" + std::to_string(c.stages);
  if (c.vector > 1) s += "_v" + std::to_string(c.vector);
  if (c.transpose) s += "_tr";
  if (c.warp_x > 0) s += "_w" + std::to_string(c.warp_x) + "x" + std::to_string(32 / c.warp_x);
  if ((shared || staged || halo) && c.pad) s += "_pad";
  if (c.bounds != LaunchBounds::Threads) s += "_lb-" + launch_bounds_name(c.bounds);
  return s;
}

std::array<int, 2> launch_block(const NaiveKernel& k, const Choice& c) {
  std::array<int, 2> b{c.block_x, k.dims == 2 ? c.block_y : 1};
  if (c.split > 1) b[split_loop(k).across_warps ? 1 : 0] *= c.split;
  return b;
}

}  // namespace gputune::naive
