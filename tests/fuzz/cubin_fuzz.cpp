// libFuzzer target: the cubin reader (pruner/cubin.h): the ELF headers, the section table, the
// .nv.info attributes of each kernel, and a ptxas -v log. The input is a cubin's bytes (and, read
// as text, a ptxas log). CubinError is the documented refusal; anything else is a finding, as is
// a kernel that cubin_kernels lists and read_cubin_resources cannot find.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "pruner/cubin.h"

using namespace gputune::pruner;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view cubin = gputune::fuzz::text(data, size);
  std::vector<std::string> kernels;
  try {
    kernels = cubin_kernels(cubin);
  } catch (const CubinError&) {
  }
  for (size_t i = 0; i < kernels.size() && i < 4; ++i) {
    try {
      Resources r = read_cubin_resources(cubin, kernels[i]);
      apply_ptxas_log(r, std::string(cubin), kernels[i]);
    } catch (const CubinError& e) {
      // A malformed .nv.info of a kernel present is refused; a kernel present must be found.
      // The message is matched from its start, the name included: a fuzzed kernel name may hold
      // any phrase of it (libFuzzer learns the strings a target compares against).
      const std::string not_found = "kernel '" + kernels[i] + "' is not in the cubin (it has: ";
      if (std::string(e.what()).rfind(not_found, 0) == 0)
        gputune::fuzz::finding("listed kernel '" + kernels[i] + "' not found: " + e.what());
    }
  }
  try {
    Resources r = read_cubin_resources(cubin, "k");
    apply_ptxas_log(r, std::string(cubin), "k");
  } catch (const CubinError&) {
  }
  Resources r;
  apply_ptxas_log(r, std::string(cubin), "k");
  return 0;
}
