// libFuzzer target: the expression evaluator (variants/expr.h). The input is expression text,
// parsed and evaluated with the names a job's expressions see (ProblemSize, tuning parameters).
// ExprError is the documented refusal; anything else is a finding.
#include <cstdint>

#include "fuzz_util.h"
#include "variants/expr.h"

using namespace gputune;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    Symbols symbols;
    Expr e = Expr::parse(fuzz::text(data, size), symbols);
    Env env(symbols);
    const std::pair<const char*, Value> names[] = {
        {"ProblemSize",
         Value(List{Value(std::int64_t{4096}), Value(std::int64_t{1000}), Value(std::int64_t{1})})},
        {"block_size_x", Value(std::int64_t{128})},
        {"tile_size_x", Value(std::int64_t{4})},
        {"x", Value(3.5)},
        {"n", Value(INT64_MAX)},
        {"s", Value(std::string("float"))},
        {"b", Value(true)}};
    for (const auto& [name, value] : names)
      if (int slot = symbols.find(name); slot >= 0) env.set(slot, value);
    e.eval(env);
    e.eval(env);  // a second evaluation sees what the first left (comprehensions restore the Env)
  } catch (const ExprError&) {
  }
  return 0;
}
