// mp_31 warp WMMA: every lane loads its A, B and C register images (prepared by the test from the layouts of
// MUSA_LAYOUTS.md section 1), runs one __musa_wmma_* built-in and stores its D registers. A block holds several
// warps, each with its own problem. Built for arch 310; building it for 220 must fail (the built-ins are mp_31's).
#include <musa_runtime.h>

#include <cstdint>
#include <cstdio>

// params: shape, a_words, b_words, c_words, arg5, arg6, arg7, sat, is_signed, layout_num, mma_type, d_aliases_c,
//         odd_lane, odd_layout_num, exiting_lane
enum Param { kShape, kAWords, kBWords, kCWords, kArg5, kArg6, kArg7, kSat, kSigned, kLayout, kType, kAlias,
             kOddLane, kOddLayout, kExitingLane, kNumParams };

extern "C" __global__ void wmma_kernel(const int* __restrict__ a_img, const int* __restrict__ b_img,
                                       const int* __restrict__ c_img, int* __restrict__ d_img,
                                       const int* __restrict__ params) {
  const int t = threadIdx.x;
  if (t == params[kExitingLane]) return;
  int32_t a[8], b[8], c[8], d[8];
  for (int i = 0; i < params[kAWords]; ++i) a[i] = a_img[t * params[kAWords] + i];
  for (int i = 0; i < params[kBWords]; ++i) b[i] = b_img[t * params[kBWords] + i];
  for (int i = 0; i < params[kCWords]; ++i) c[i] = c_img[t * params[kCWords] + i];
  int32_t* out = params[kAlias] ? c : d;
  const int layout = t == params[kOddLane] ? params[kOddLayout] : params[kLayout];
  const int r5 = params[kArg5], r6 = params[kArg6], r7 = params[kArg7], sat = params[kSat], sgn = params[kSigned];
  const int type = params[kType];
  switch (params[kShape]) {
    case 0: __musa_wmma_m16n8k4_mma(out, a, b, c, r5, r6, r7, sat, sgn, layout, type); break;
    case 1: __musa_wmma_m16n8k8_mma(out, a, b, c, r5, r6, r7, sat, sgn, layout, type); break;
    case 2: __musa_wmma_m16n8k16_mma(out, a, b, c, r5, r6, r7, sat, sgn, layout, type); break;
    case 3: __musa_wmma_m8n16k16_mma(out, a, b, c, r5, r6, r7, sat, sgn, layout, type); break;
    case 4: __musa_wmma_m16n16k16_mma(out, a, b, c, r5, r6, r7, sat, sgn, layout, type); break;
    case 5: __musa_wmma_m16n16k32_mma(out, a, b, c, r5, r6, r7, sat, sgn, layout, type); break;
    case 6: __musa_wmma_m16n16k64_mma(out, a, b, c, r5, r6, r7, sat, sgn, layout, type); break;
  }
  for (int i = 0; i < params[kCWords]; ++i) d_img[t * params[kCWords] + i] = out[i];
}

static char tl_error_buf[1024];
extern "C" const char* get_last_error() { return tl_error_buf; }

// Returns 0, or the failing musaError_t with its message in get_last_error().
extern "C" int run(const int* a, const int* b, const int* c, int* d, const int* params, int threads) {
  void* args[] = {&a, &b, &c, &d, &params};
  musaError_t err = musaLaunchKernel(wmma_kernel, dim3(1), dim3(threads), args, 0, nullptr);
  if (err != musaSuccess) snprintf(tl_error_buf, sizeof(tl_error_buf), "%s", musaGetErrorString(err));
  return err;
}
