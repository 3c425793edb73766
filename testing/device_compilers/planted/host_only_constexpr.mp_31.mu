// Planted bug (a test of the device-compiler check, testing/test_device_compilers.py): device code calls a plain
// constexpr helper, which CUDA-dialect compilers treat as host-only. nvcc rejects the call (without its
// relaxed-constexpr flag, which the check never passes); clang and g++ accept it.
#include "tl_templates/musa/common.h"
#include <cstdio>

namespace tl {
constexpr bool is_power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

template <int Width>
TL_DEVICE float scaled(float x) {
  static_assert(is_power_of_two(Width), "Width must be a power of two");
  return x * Width;
}
}  // namespace tl

extern "C" __global__ void __launch_bounds__(128, 1) scale_kernel(float* __restrict__ A, float* __restrict__ B) {
  B[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] = tl::scaled<2>(A[((int)blockIdx.x) * 128 + ((int)threadIdx.x)]);
}

extern "C" int call(float* A, float* B, musaStream_t stream) {
  void* args[] = {&A, &B};
  return musaLaunchKernel(scale_kernel, dim3(4, 1, 1), dim3(128, 1, 1), args, 0, stream) == musaSuccess ? 0 : -1;
}
