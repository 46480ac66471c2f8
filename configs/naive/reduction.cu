// Naive sum reduction: every thread adds one element to *sum.
__global__ void reduction(float* sum, const float* in, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < n) atomicAdd(sum, in[idx]);
}
