// matmul through gputune::select: the tuned configuration for three sizes (1000 and 4096 were
// tuned, 2048 never was), each launched on the GPU and one element checked against the CPU.
//   matmul_app <decision file or gputune database> [matmul.cu, when the table has no source]
#include <select/kernel.h>
#include <select/select.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace sel = gputune::select;

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: %s DECISIONS [KERNEL.cu]\n", argv[0]), 2;
  auto table = sel::Table::open(argv[1]);
  if (!table) return std::fprintf(stderr, "%s\n", table.error().message.c_str()), 1;
  auto gpu = sel::gpu_device();
  sel::Device device = gpu ? *gpu : sel::Device{};
  if (!gpu) {  // choose for the first device the table has, and launch nothing
    for (const auto& k : table->data().kernels)
      if (k.name == "matmul" && !k.devices.empty()) device = {k.devices[0].name, k.devices[0].arch};
    if (device.name.empty()) return std::fprintf(stderr, "%s has no tuned matmul\n", argv[1]), 1;
    std::printf("no GPU (%s): choosing for %s, skipping the launches\n",
                gpu.error().message.c_str(), device.name.c_str());
  }
  sel::KernelOptions options;
  if (argc > 2) options.source_file = argv[2];
  for (int n : {1000, 2048, 4096}) {
    auto choice = table->choose("matmul", device, {{n}});
    if (!choice) return std::fprintf(stderr, "n=%d: %s\n", n, choice.error().message.c_str()), 1;
    std::printf("n=%d: %s\n", n, choice->explain().c_str());
    if (!gpu) {
      std::printf("n=%d: skipped the launch (no GPU)\n", n);
      continue;
    }
    auto kernel = sel::Kernel::load(*table, "matmul", {{n}}, options);
    if (!kernel) return std::fprintf(stderr, "n=%d: %s\n", n, kernel.error().message.c_str()), 1;
    std::vector<float> a(size_t(n) * n), b(a.size()), c(a.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 7) - 3, b[i] = float(i % 5) * 0.25f;
    auto A = sel::Buffer::from(a), B = sel::Buffer::from(b);
    auto C = sel::Buffer::allocate(c.size() * sizeof(float));
    if (!A || !B || !C) return std::fprintf(stderr, "n=%d: no device memory\n", n), 1;
    auto done = kernel->launch(*C, *A, *B, n);
    if (done) done = C->download(c);
    if (!done) return std::fprintf(stderr, "n=%d: %s\n", n, done.error().message.c_str()), 1;
    const int r = n / 3, col = n / 2;
    double want = 0;
    for (int k = 0; k < n; ++k) want += double(a[size_t(r) * n + k]) * b[size_t(k) * n + col];
    const float got = c[size_t(r) * n + col];
    const bool ok = std::abs(got - want) <= 1e-3 + 1e-4 * std::abs(want);
    std::printf("n=%d: launched %s: C[%d][%d] = %g, CPU %g: %s\n", n,
                kernel->choice().config.c_str(), r, col, got, want, ok ? "ok" : "WRONG");
    if (!ok) return 1;
  }
  return 0;
}
