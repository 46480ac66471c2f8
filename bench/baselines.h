/** \file bench/baselines.h
 * Reference points for the GPU figures: cuBLAS SGEMM and SGEMV (loaded at run time like the
 * driver, pedantic fp32 math: no tensor cores) and a device-to-device copy, each timed with CUDA
 * events (three warm-up calls, then the median of `reps`). Needs a current CUDA context.
 * Only bench programs include it. */
#pragma once

#include <cublas_v2.h>
#include <dlfcn.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/driver.h"
#include "tuner/measure/measure.h"

namespace gputune::bench {

/// Median time of `run()` in ms over `reps` event-timed calls, after three untimed ones.
template <class F>
double event_median_ms(int reps, F run) {
  const auto& d = cuda::Driver::instance();
  for (int i = 0; i < 3; ++i) run();
  cuda::Event start, stop;
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) {
    d.check(d.cuEventRecord(start.get(), nullptr), "cuEventRecord");
    run();
    d.check(d.cuEventRecord(stop.get(), nullptr), "cuEventRecord");
    d.check(d.cuEventSynchronize(stop.get()), "cuEventSynchronize");
    float ms = 0;
    d.check(d.cuEventElapsedTime(&ms, start.get(), stop.get()), "cuEventElapsedTime");
    samples.push_back(ms);
  }
  return tuner::median(samples);
}

/// A device buffer of `count` floats filled with uniform [0, 1) values.
inline cuda::DeviceBuffer random_floats(size_t count, unsigned seed = 1) {
  std::vector<float> host(count);
  std::mt19937 rng(seed);
  for (auto& x : host) x = std::uniform_real_distribution<float>(0, 1)(rng);
  cuda::DeviceBuffer b(count * sizeof(float));
  b.upload(host.data(), count * sizeof(float));
  return b;
}

/// cuBLAS, opened with dlopen; throws with the reason when it is not installed.
class Cublas {
 public:
  Cublas() {
    lib_ = dlopen("libcublas.so.13", RTLD_NOW);
    if (!lib_) lib_ = dlopen("libcublas.so", RTLD_NOW);
    if (!lib_) throw std::runtime_error(std::string("cuBLAS not found: ") + dlerror());
    create_ = sym<decltype(&cublasCreate_v2)>("cublasCreate_v2");
    destroy_ = sym<decltype(&cublasDestroy_v2)>("cublasDestroy_v2");
    math_ = sym<decltype(&cublasSetMathMode)>("cublasSetMathMode");
    sgemm_ = sym<decltype(&cublasSgemm_v2)>("cublasSgemm_v2");
    sgemv_ = sym<decltype(&cublasSgemv_v2)>("cublasSgemv_v2");
    if (create_(&h_) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate failed");
    math_(h_, CUBLAS_PEDANTIC_MATH);
  }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  ~Cublas() {
    if (h_) destroy_(h_);
  }

  /// C = A B for n x n matrices (fp32).
  double sgemm_ms(int n, int reps) {
    const size_t count = static_cast<size_t>(n) * n;
    cuda::DeviceBuffer a = random_floats(count), b = random_floats(count, 2), c(count * 4);
    const float alpha = 1, beta = 0;
    return event_median_ms(reps, [&] {
      check(sgemm_(h_, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, f(a), n, f(b), n, &beta, f(c), n),
            "cublasSgemm");
    });
  }

  /// y = A x with A `rows` x `cols` row-major (mv's a[idx * n + i]) or, `transposed`, y = A^T x
  /// with A `cols` x `rows` row-major (tmv's a[i * m + idx]); y has `rows` elements.
  double sgemv_ms(int rows, int cols, bool transposed, int reps) {
    const size_t count = static_cast<size_t>(rows) * cols;
    cuda::DeviceBuffer a = random_floats(count), x = random_floats(cols, 2), y(rows * 4ull);
    const float alpha = 1, beta = 0;
    // Column-major view: row-major A (rows x cols) is a cols x rows matrix M, lda = cols, and
    // A x = M^T x. Row-major A (cols x rows) is a rows x cols matrix, lda = rows: A^T x = M x.
    return event_median_ms(reps, [&] {
      if (transposed)
        check(sgemv_(h_, CUBLAS_OP_N, rows, cols, &alpha, f(a), rows, f(x), 1, &beta, f(y), 1),
              "cublasSgemv");
      else
        check(sgemv_(h_, CUBLAS_OP_T, cols, rows, &alpha, f(a), cols, f(x), 1, &beta, f(y), 1),
              "cublasSgemv");
    });
  }

 private:
  template <class T>
  T sym(const char* name) {
    auto p = reinterpret_cast<T>(dlsym(lib_, name));
    if (!p) throw std::runtime_error(std::string("cuBLAS lacks ") + name);
    return p;
  }
  static float* f(const cuda::DeviceBuffer& b) { return reinterpret_cast<float*>(b.get()); }
  static void check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error(std::string(what) + " failed: status " + std::to_string(s));
  }
  void* lib_ = nullptr;
  cublasHandle_t h_ = nullptr;
  decltype(&cublasCreate_v2) create_ = nullptr;
  decltype(&cublasDestroy_v2) destroy_ = nullptr;
  decltype(&cublasSetMathMode) math_ = nullptr;
  decltype(&cublasSgemm_v2) sgemm_ = nullptr;
  decltype(&cublasSgemv_v2) sgemv_ = nullptr;
};

/// A device-to-device copy of `bytes` (cuMemcpyDtoD): it reads and writes `bytes` each.
inline double copy_ms(size_t bytes, int reps) {
  const auto& d = cuda::Driver::instance();
  cuda::DeviceBuffer src = random_floats(bytes / 4), dst(bytes);
  return event_median_ms(
      reps, [&] { d.check(d.cuMemcpyDtoD(dst.get(), src.get(), bytes), "cuMemcpyDtoD"); });
}

}  // namespace gputune::bench
