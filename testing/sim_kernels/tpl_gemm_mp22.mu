// tl::gemm_ss_mp22_mma (tl_templates/musa/gemm_mp22_mma.h) through the harness of tpl_gemm_harness.mu; built for
// mp_22 (128-lane warps).
#include "tpl_gemm_harness.mu"

using half_t = tl::half_t;
using bfloat16_t = tl::bfloat16_t;

struct Mp22Path {
  static constexpr int kVariant = 0;
  static constexpr int kGroup = 128;
  template <int M, int N, int K, int GM, int GN, bool TA, bool TB, bool Clear, class T>
  static __device__ void run(const T* a, const T* b, const T*, const T*, float* c) {
    tl::gemm_ss_mp22_mma<M, N, K, GM, GN, TA, TB, Clear>(a, b, c);
  }
};

// (M, N, K, GM, GN, TransA, TransB): one atom; every transpose combination on 2 x 2 warps with several atoms and
// k steps per warp; tall and wide warp grids.
static const GemmCase kCases[] = {
    TPL_GEMM_CASE(Mp22Path, 32, 32, 16, 1, 1, 0, 0),  TPL_GEMM_CASE(Mp22Path, 64, 128, 32, 2, 2, 0, 0),
    TPL_GEMM_CASE(Mp22Path, 64, 128, 32, 2, 2, 0, 1), TPL_GEMM_CASE(Mp22Path, 64, 128, 32, 2, 2, 1, 0),
    TPL_GEMM_CASE(Mp22Path, 64, 128, 32, 2, 2, 1, 1), TPL_GEMM_CASE(Mp22Path, 128, 64, 48, 2, 1, 0, 1),
    TPL_GEMM_CASE(Mp22Path, 32, 96, 16, 1, 3, 1, 0),
};

extern "C" int run(int variant, int m, int n, int k, int gm, int gn, int trans_a, int trans_b, int dtype,
                   const void* a, const void* b, const void* a_frag, const void* b_frag, const float* c0,
                   float* out) {
  return run_case(kCases, variant, m, n, k, gm, gn, trans_a, trans_b, dtype, a, b, a_frag, b_frag, c0, out);
}
