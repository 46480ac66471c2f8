// Clang front end for CUDA device code: see cuda_parse.h. Compiled with -fno-rtti (LLVM 14).
#include "variants/cuda_parse.h"

#include <clang/AST/ASTContext.h>
#include <clang/AST/Attr.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticSema.h>
#include <clang/Tooling/Tooling.h>

#include <cctype>
#include <cstdlib>
#include <functional>

#ifndef GPUTUNE_CLANG_RESOURCE_DIR
#define GPUTUNE_CLANG_RESOURCE_DIR ""
#endif

namespace gputune {

using namespace clang;

std::string clang_resource_dir() {
  if (const char* d = std::getenv("GPUTUNE_CLANG_RESOURCE_DIR"); d && *d) return d;
  return GPUTUNE_CLANG_RESOURCE_DIR;
}

namespace {

// What NVRTC provides without any include: the CUDA keywords, the builtin index variables, the
// vector types and the device functions kernels commonly call. Only declarations: nothing here
// is executed, it only has to parse. `#line 1` keeps the user's line numbers.
constexpr const char* kPrelude = R"(
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __align__(n) __attribute__((aligned(n)))
#define __CUDACC_RTC__ 1
struct __gt_uint3 { unsigned int x, y, z; };
extern const __device__ __gt_uint3 threadIdx, blockIdx, blockDim, gridDim;
extern const __device__ int warpSize;
#define __GT_V1(T, A) struct __attribute__((aligned(A))) T##1 { T x; };
#define __GT_V2(T, A) struct __attribute__((aligned(A))) T##2 { T x, y; };
#define __GT_V3(T) struct T##3 { T x, y, z; };
#define __GT_V4(T, A) struct __attribute__((aligned(A))) T##4 { T x, y, z, w; };
typedef unsigned char uchar; typedef unsigned short ushort; typedef unsigned int uint;
typedef unsigned long ulong; typedef long long longlong; typedef unsigned long long ulonglong;
__GT_V1(char, 1) __GT_V2(char, 2) __GT_V3(char) __GT_V4(char, 4)
__GT_V1(uchar, 1) __GT_V2(uchar, 2) __GT_V3(uchar) __GT_V4(uchar, 4)
__GT_V1(short, 2) __GT_V2(short, 4) __GT_V3(short) __GT_V4(short, 8)
__GT_V1(ushort, 2) __GT_V2(ushort, 4) __GT_V3(ushort) __GT_V4(ushort, 8)
__GT_V1(int, 4) __GT_V2(int, 8) __GT_V3(int) __GT_V4(int, 16)
__GT_V1(uint, 4) __GT_V2(uint, 8) __GT_V3(uint) __GT_V4(uint, 16)
__GT_V1(float, 4) __GT_V2(float, 8) __GT_V3(float) __GT_V4(float, 16)
__GT_V1(double, 8) __GT_V2(double, 16) __GT_V3(double) __GT_V4(double, 16)
__GT_V1(longlong, 8) __GT_V2(longlong, 16)
typedef struct uint3 dim3;
typedef unsigned short __half_raw_gt;
__device__ float2 make_float2(float, float); __device__ float3 make_float3(float, float, float);
__device__ float4 make_float4(float, float, float, float); __device__ int2 make_int2(int, int);
__device__ int4 make_int4(int, int, int, int); __device__ double2 make_double2(double, double);
__device__ uint3 make_uint3(uint, uint, uint);
__device__ void __syncthreads(); __device__ void __syncwarp(unsigned = 0xffffffff);
__device__ int __syncthreads_count(int); __device__ int __syncthreads_or(int);
__device__ int __syncthreads_and(int);
__device__ void __threadfence(); __device__ void __threadfence_block();
template <class T> __device__ T __ldg(const T*);
template <class T> __device__ T __ldcg(const T*);
template <class T> __device__ T __ldca(const T*);
template <class T> __device__ T __ldcs(const T*);
template <class T> __device__ void __stcg(T*, T);
template <class T> __device__ void __stcs(T*, T);
template <class T> __device__ T __shfl_sync(unsigned, T, int, int = 32);
template <class T> __device__ T __shfl_up_sync(unsigned, T, unsigned, int = 32);
template <class T> __device__ T __shfl_down_sync(unsigned, T, unsigned, int = 32);
template <class T> __device__ T __shfl_xor_sync(unsigned, T, int, int = 32);
__device__ unsigned __ballot_sync(unsigned, int); __device__ int __any_sync(unsigned, int);
__device__ int __all_sync(unsigned, int); __device__ unsigned __activemask();
__device__ int __popc(unsigned); __device__ int __popcll(unsigned long long);
__device__ int __clz(int); __device__ int __ffs(int);
__device__ int __mul24(int, int); __device__ unsigned __umul24(unsigned, unsigned);
__device__ int __float2int_rn(float); __device__ int __float2int_rz(float);
__device__ int __float2int_rd(float); __device__ int __float2int_ru(float);
__device__ float __int2float_rn(int); __device__ float __int2float_rz(int);
__device__ unsigned __float_as_uint(float); __device__ float __uint_as_float(unsigned);
__device__ int __float_as_int(float); __device__ float __int_as_float(int);
__device__ float __fdividef(float, float); __device__ float __expf(float);
__device__ float __logf(float); __device__ float __sinf(float); __device__ float __cosf(float);
__device__ float __powf(float, float); __device__ float __saturatef(float);
__device__ float __fmaf_rn(float, float, float); __device__ float __fmul_rn(float, float);
__device__ float __fadd_rn(float, float); __device__ double __fma_rn(double, double, double);
__device__ int atomicAdd(int*, int); __device__ unsigned atomicAdd(unsigned*, unsigned);
__device__ float atomicAdd(float*, float); __device__ double atomicAdd(double*, double);
__device__ unsigned long long atomicAdd(unsigned long long*, unsigned long long);
__device__ int atomicSub(int*, int); __device__ int atomicExch(int*, int);
__device__ float atomicExch(float*, float); __device__ int atomicMin(int*, int);
__device__ int atomicMax(int*, int); __device__ unsigned atomicInc(unsigned*, unsigned);
__device__ int atomicCAS(int*, int, int); __device__ unsigned atomicCAS(unsigned*, unsigned, unsigned);
__device__ unsigned long long atomicCAS(unsigned long long*, unsigned long long, unsigned long long);
__device__ int atomicAnd(int*, int); __device__ int atomicOr(int*, int); __device__ int atomicXor(int*, int);
__device__ int min(int, int); __device__ unsigned min(unsigned, unsigned);
__device__ long long min(long long, long long); __device__ float min(float, float);
__device__ double min(double, double); __device__ int max(int, int);
__device__ unsigned max(unsigned, unsigned); __device__ long long max(long long, long long);
__device__ float max(float, float); __device__ double max(double, double);
__device__ int abs(int); __device__ long long llabs(long long); __device__ unsigned umin(unsigned, unsigned);
__device__ unsigned umax(unsigned, unsigned);
#define __GT_F1(f) __device__ float f##f(float); __device__ double f(double);
#define __GT_F2(f) __device__ float f##f(float, float); __device__ double f(double, double);
__GT_F1(sqrt) __GT_F1(rsqrt) __GT_F1(cbrt) __GT_F1(exp) __GT_F1(exp2) __GT_F1(exp10) __GT_F1(expm1)
__GT_F1(log) __GT_F1(log2) __GT_F1(log10) __GT_F1(log1p) __GT_F1(sin) __GT_F1(cos) __GT_F1(tan)
__GT_F1(asin) __GT_F1(acos) __GT_F1(atan) __GT_F1(sinh) __GT_F1(cosh) __GT_F1(tanh) __GT_F1(fabs)
__GT_F1(floor) __GT_F1(ceil) __GT_F1(round) __GT_F1(trunc) __GT_F1(rint) __GT_F1(erf) __GT_F1(erfc)
__GT_F1(lgamma) __GT_F1(tgamma) __GT_F1(rcbrt) __GT_F1(sinpi) __GT_F1(cospi)
__GT_F2(pow) __GT_F2(fmin) __GT_F2(fmax) __GT_F2(atan2) __GT_F2(fmod) __GT_F2(hypot) __GT_F2(copysign)
__GT_F2(fdim) __GT_F2(remainder)
__device__ float fmaf(float, float, float); __device__ double fma(double, double, double);
__device__ void sincosf(float, float*, float*); __device__ int isnan(float); __device__ int isinf(float);
__device__ int isfinite(float);
)";

class DiagCollector : public DiagnosticConsumer {
 public:
  void HandleDiagnostic(DiagnosticsEngine::Level level, const Diagnostic& info) override {
    if (info.getID() == diag::err_pragma_loop_invalid_argument_value) {
      // nvcc: "warning #20168-D: the unroll value cannot be zero or negative, ignoring pragma
      // for this loop". clang drops the attribute and goes on; not counted as an error.
      notes.push_back(where(info) + "#pragma unroll " + format(info) +
                      ": the pragma is ignored, as nvcc and NVRTC ignore it");
      return;
    }
    DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level < DiagnosticsEngine::Error || !first.empty()) return;
    first = where(info) + format(info);
  }
  static std::string format(const Diagnostic& info) {
    SmallString<256> text;
    info.FormatDiagnostic(text);
    return std::string(text.str());
  }
  static std::string where(const Diagnostic& info) {
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      PresumedLoc p = info.getSourceManager().getPresumedLoc(info.getLocation());
      if (p.isValid())
        return std::string(p.getFilename()) + ":" + std::to_string(p.getLine()) + ":" +
               std::to_string(p.getColumn()) + ": ";
    }
    return "";
  }
  std::string first;
  std::vector<std::string> notes;
};

void walk_kernels(const DeclContext* dc, const std::function<bool(const FunctionDecl*)>& visit) {
  for (const Decl* d : dc->decls()) {
    if (auto* f = dyn_cast<FunctionDecl>(d)) {
      if (f->hasAttr<CUDAGlobalAttr>() && f->doesThisDeclarationHaveABody() && !visit(f)) return;
    } else if (auto* inner = dyn_cast<DeclContext>(d)) {
      if (isa<NamespaceDecl>(d) || isa<LinkageSpecDecl>(d)) walk_kernels(inner, visit);
    }
  }
}

}  // namespace

const std::string& cuda_prelude() {
  static const std::string p = kPrelude;
  return p;
}

ParsedCuda parse_cuda(const std::string& source, const std::vector<std::string>& options,
                      const std::string& file_name, const std::string& tool_name) {
  ParsedCuda out;
  std::vector<std::string> args = {
      "-xcuda", "--cuda-device-only", "--cuda-gpu-arch=sm_70",    "-nocudainc", "-nocudalib",
      "-w",     "-std=c++17",         "-Wno-unknown-cuda-version"};
  if (!clang_resource_dir().empty()) {
    args.push_back("-resource-dir");
    args.push_back(clang_resource_dir());
  }
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string& o = options[i];
    if (o.rfind("-D", 0) == 0 || o.rfind("-U", 0) == 0 || o.rfind("-I", 0) == 0 ||
        o.rfind("-std=", 0) == 0 || o.rfind("--std=", 0) == 0) {
      args.push_back(o.rfind("--std=", 0) == 0 ? o.substr(1) : o);
      if ((o == "-D" || o == "-I" || o == "-U") && i + 1 < options.size())
        args.push_back(options[++i]);
    }
  }
  DiagCollector diags;
  std::string text = cuda_prelude() + "#line 1 \"" + file_name + "\"\n" + source;
  std::unique_ptr<ASTUnit> ast = tooling::buildASTFromCodeWithArgs(
      text, args, file_name, tool_name, std::make_shared<PCHContainerOperations>(),
      tooling::getClangStripDependencyFileAdjuster(), tooling::FileContentMappings(), &diags);
  out.notes = std::move(diags.notes);
  if (!ast || !diags.first.empty() || diags.getNumErrors() > 0) {
    out.error = diags.first.empty() ? std::string("unknown error") : diags.first;
    return out;
  }
  out.ast = std::move(ast);
  return out;
}

namespace {

std::string without_spaces(const std::string& s) {
  std::string out;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  return out;
}

/// The instance `name` ("reduce<float>", spaces ignored) of a __global__ function template, if
/// the translation unit instantiated it (instance_reference makes it do so).
const FunctionDecl* find_instance(const DeclContext* dc, const std::string& name) {
  const std::string want = without_spaces(name);
  const std::string base = want.substr(0, want.find('<'));
  const bool qualified = base.find("::") != std::string::npos;  // "ns::f<float>"
  for (const Decl* d : dc->decls()) {
    auto* ft = dyn_cast<FunctionTemplateDecl>(d);
    if (ft && (qualified ? ft->getQualifiedNameAsString() : ft->getNameAsString()) == base) {
      for (const FunctionDecl* spec : ft->specializations()) {
        std::string text;
        llvm::raw_string_ostream os(text);
        spec->getNameForDiagnostic(os, ft->getASTContext().getPrintingPolicy(), qualified);
        os.flush();
        if (spec->hasAttr<CUDAGlobalAttr>() && spec->hasBody() && without_spaces(text) == want)
          return spec;
      }
    } else if (isa<NamespaceDecl>(d) || isa<LinkageSpecDecl>(d)) {
      if (const FunctionDecl* f = find_instance(cast<DeclContext>(d), name)) return f;
    }
  }
  return nullptr;
}

}  // namespace

std::string instance_reference(const std::string& name) {
  if (name.find('<') == std::string::npos) return "";
  return "\nstatic void* const gputune_instance_ = reinterpret_cast<void*>(&" + name + ");\n";
}

const FunctionDecl* find_kernel(ASTContext& ctx, const std::string& name) {
  if (name.find('<') != std::string::npos) return find_instance(ctx.getTranslationUnitDecl(), name);
  const FunctionDecl* found = nullptr;
  walk_kernels(ctx.getTranslationUnitDecl(), [&](const FunctionDecl* f) {
    if (f->getNameAsString() == name) found = f;
    return found == nullptr;
  });
  return found;
}

std::vector<std::string> kernel_names(ASTContext& ctx) {
  std::vector<std::string> names;
  walk_kernels(ctx.getTranslationUnitDecl(), [&](const FunctionDecl* f) {
    names.push_back(f->getNameAsString());
    return true;
  });
  return names;
}

}  // namespace gputune
