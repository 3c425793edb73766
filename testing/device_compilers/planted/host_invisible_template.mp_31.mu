// Planted bug (a test of the device-compiler check, testing/test_device_compilers.py): a device template declared
// only under __MUSA_ARCH__, which the device pass defines and the host pass does not, called from a kernel body,
// which both passes parse. The simulator defines __MUSA_ARCH__ in its single pass and never notices.
#include "tl_templates/musa/common.h"
#include <cstdio>

namespace tl {
#if defined(__MUSA_ARCH__)
template <int Factor>
TL_DEVICE float scaled(float x) {
  return x * Factor;
}
#endif
}  // namespace tl

extern "C" __global__ void __launch_bounds__(128, 1) scale_kernel(float* __restrict__ A, float* __restrict__ B) {
  B[((int)blockIdx.x) * 128 + ((int)threadIdx.x)] = tl::scaled<2>(A[((int)blockIdx.x) * 128 + ((int)threadIdx.x)]);
}

extern "C" int call(float* A, float* B, musaStream_t stream) {
  void* args[] = {&A, &B};
  return musaLaunchKernel(scale_kernel, dim3(4, 1, 1), dim3(128, 1, 1), args, 0, stream) == musaSuccess ? 0 : -1;
}
