// Compile-time checks of the reduction, scan and atomic templates. Built with -DTPL_MISUSE (for mp_22, whose
// 128-lane warps make WarpSize 32 a mismatch) every kernel below must fail with its template's message; without
// it only the correct uses are compiled and the file builds.
#include <musa_runtime.h>

#include "tl_templates/musa/atomic.h"
#include "tl_templates/musa/scan.h"
#include "tl_templates/musa/reduce.h"

constexpr int kWarpSize = __MUSA_ARCH__ < 300 ? 128 : 32;

extern "C" __global__ void correct_uses(float* x, float* red_buf) {
  x[0] = tl::AllReduce<tl::SumOp, 64, 2, kWarpSize>(x[0], red_buf);
  tl::Scan2D<128, 1, tl::SumOp, true>::run(x, x, 4, 4);
  tl::AtomicAdd(x, 1);
}

#if defined(TPL_MISUSE)
extern "C" __global__ void threads_not_pow2(float* x, float* red_buf) {
  x[0] = tl::AllReduce<tl::SumOp, 3, 1, kWarpSize>(x[0], red_buf);
}
extern "C" __global__ void scale_not_pow2(float* x, float* red_buf) {
  x[0] = tl::AllReduce<tl::SumOp, 4, 6, kWarpSize>(x[0], red_buf);
}
extern "C" __global__ void span_too_wide(float* x, float* red_buf) {
  x[0] = tl::AllReduce<tl::SumOp, 512, 4, kWarpSize>(x[0], red_buf);
}
extern "C" __global__ void warp_size_mismatch(float* x, float* red_buf) {
  x[0] = tl::AllReduce<tl::SumOp, 64, 1, 32>(x[0], red_buf);
}
extern "C" __global__ void scan_bad_axis(float* x) { tl::Scan2D<128, 2, tl::SumOp>::run(x, x, 4, 4); }
extern "C" __global__ void scan_too_many_threads(float* x) { tl::Scan1D<2048, tl::MaxOp>::run(x, x, 4); }
extern "C" __global__ void atomic_bad_type(short* s) { tl::AtomicAdd(s, 1); }
#endif
