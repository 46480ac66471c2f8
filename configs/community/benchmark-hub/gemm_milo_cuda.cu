// The benchmark hub's gemm (CLBlast's Xgemm, written in OpenCL C) compiled as CUDA, as the hub's
// own tuning script gemm_milo.py does for lang="CUDA": CLTune's cl_to_cuda.h shim first, then the
// five sources in the script's order. The sources are the hub's, unchanged (gemm_milo/, MIT; the
// kernel is CLBlast's, Apache-2.0). gemm_milo_cuda.json tunes it.
#include "gemm_milo/cl_to_cuda.h"
#include "gemm_milo/common.opencl"
#include "gemm_milo/xgemm_part1.opencl"
#include "gemm_milo/xgemm_part2.opencl"
#include "gemm_milo/xgemm_part3.opencl"
#include "gemm_milo/xgemm_part4.opencl"
