// Planted bug (a test of the device-compiler check, testing/test_device_compilers.py): the host wrapper takes the
// address of a restrict-qualified pointer parameter into `void* args[]`. g++ converts `float* __restrict__*` to
// `void*` implicitly; clang (and so mcc) and nvcc do not.
#include "tl_templates/musa/common.h"
#include <cstdio>

extern "C" __global__ void __launch_bounds__(128, 1) scale_kernel(float* __restrict__ A, float* __restrict__ B) {
  B[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] = A[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] * 2.0f;
}

extern "C" int call(float* __restrict__ A, float* __restrict__ B, musaStream_t stream) {
  void* args[] = {&A, &B};
  return musaLaunchKernel(scale_kernel, dim3(4, 1, 1), dim3(128, 1, 1), args, 0, stream) == musaSuccess ? 0 : -1;
}
