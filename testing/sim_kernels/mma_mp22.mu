// mp_22 warp MMA on 128-lane warps: every lane loads its A, B and C register images (prepared by the test from the
// layouts of MUSA_LAYOUTS.md section 2), runs one m32n32 built-in and stores its D registers. A block holds several
// warps, each with its own problem. Built for arch 220; building it for 310 must fail (the built-ins are mp_22's).
#include <musa_runtime.h>

#include <cstdint>
#include <cstdio>

// params: kind (0 fmma, 1 bfmma, 2 tfmma, 3 imma), arg5..arg9, layout, odd_lane, odd_layout, exiting_lane
enum Param { kKind, kArg5, kArg6, kArg7, kArg8, kArg9, kLayout, kOddLane, kOddLayout, kExitingLane, kNumParams };

extern "C" __global__ void mp22_kernel(const int* __restrict__ a_img, const int* __restrict__ b_img,
                                       const int* __restrict__ c_img, int* __restrict__ d_img,
                                       const int* __restrict__ params) {
  const int t = threadIdx.x;
  if (t == params[kExitingLane]) return;
  int32_t a[2], b[2], acc[8];
  for (int i = 0; i < 2; ++i) a[i] = a_img[t * 2 + i];
  for (int i = 0; i < 2; ++i) b[i] = b_img[t * 2 + i];
  for (int i = 0; i < 8; ++i) acc[i] = c_img[t * 8 + i];
  const int layout = t == params[kOddLane] ? params[kOddLayout] : params[kLayout];
  const int r5 = params[kArg5], r6 = params[kArg6], r7 = params[kArg7], r8 = params[kArg8], r9 = params[kArg9];
  switch (params[kKind]) {  // d aliases c, as mutlass's atoms use them
    case 0: __musa_fmma_m32n32k16_mma(acc, a, b, acc, r5, r6, r7, r8, r9, layout); break;
    case 1: __musa_bfmma_m32n32k16_mma(acc, a, b, acc, r5, r6, r7, r8, r9, layout); break;
    case 2: __musa_tfmma_m32n32k8_mma(acc, a, b, acc, r5, r6, r7, r8, r9, layout); break;
    case 3: __musa_imma_m32n32k32_mma(acc, a, b, acc, r5, r6, r7, r8, r9, layout); break;
  }
  for (int i = 0; i < 8; ++i) d_img[t * 8 + i] = acc[i];
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

// Returns 0, or the failing musaError_t with its message in get_last_error().
extern "C" int run(const int* a, const int* b, const int* c, int* d, const int* params, int threads) {
  void* args[] = {&a, &b, &c, &d, &params};
  musaError_t err = musaLaunchKernel(mp22_kernel, dim3(1), dim3(threads), args, 0, nullptr);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
