// libFuzzer target: the naive-kernel analysis front end (variants/naive/naive.h analyse_naive,
// clang libTooling) and the plain C++ that reads its result (the loop split, each array's and
// output's options). The input is "KERNEL\nSOURCE": the kernel's name on the first line, then
// any CUDA text. Arbitrary text must give an error (NaiveError, NaiveSourceError) or a result,
// never a crash; anything else escaping is a finding.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "variants/naive/naive.h"

using namespace gputune;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in = fuzz::text(data, size);
  const size_t nl = in.find('\n');
  if (nl == std::string_view::npos || nl == 0 || nl > 200) return 0;
  const std::string kernel(in.substr(0, nl)), source(in.substr(nl + 1));
  try {
    naive::NaiveKernel k = naive::analyse_naive(source, kernel, "fuzz.cu", {"-std=c++17"});
    (void)naive::split_loop(k);
    (void)naive::array_options(k);
    (void)naive::output_options(k);
    (void)naive::halo_windows(k);
  } catch (const naive::NaiveError&) {
  }
  return 0;
}
