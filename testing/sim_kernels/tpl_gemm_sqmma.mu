// tl::gemm_ss_mp31_sqmma and tl::gemm_ss_mp31_sqmma_nowait + tl::sqmma_wait (tl_templates/musa/gemm_mp31_sqmma.h)
// through the harness of tpl_gemm_harness.mu; built for mp_31 (squads of 4 x 32 threads).
#include "tpl_gemm_harness.mu"

using half_t = tl::half_t;
using bfloat16_t = tl::bfloat16_t;

struct SqmmaPath {
  static constexpr int kVariant = 0;
  static constexpr int kGroup = 128;
  template <int M, int N, int K, int GM, int GN, bool TA, bool TB, bool Clear, class T>
  static __device__ void run(const T* a, const T* b, const T*, const T*, float* c) {
    tl::gemm_ss_mp31_sqmma<M, N, K, GM, GN, TA, TB, Clear>(a, b, c);
  }
};

// Issue without waiting, then wait: C_frag must be complete only after tl::sqmma_wait.
struct SqmmaNoWaitPath {
  static constexpr int kVariant = 1;
  static constexpr int kGroup = 128;
  template <int M, int N, int K, int GM, int GN, bool TA, bool TB, bool Clear, class T>
  static __device__ void run(const T* a, const T* b, const T*, const T*, float* c) {
    tl::gemm_ss_mp31_sqmma_nowait<M, N, K, GM, GN, TA, TB, Clear>(a, b, c);
    tl::sqmma_wait<0>();
  }
};

// (M, N, K, GM, GN, TransA, TransB), with the instruction SqmmaAtom picks for the squad tile: one m64n64 atom;
// m64n128 on 2 squads; every transpose combination with two k = 64 steps on 1 x 2 squads; three k = 16 steps on
// 2 x 1 squads of m32n32; atoms along N (m16n64 x 2) and along M (m32n32 x 3).
static const GemmCase kCases[] = {
    TPL_GEMM_CASE(SqmmaPath, 64, 64, 64, 1, 1, 0, 0),        TPL_GEMM_CASE(SqmmaPath, 128, 128, 32, 2, 1, 0, 0),
    TPL_GEMM_CASE(SqmmaPath, 64, 128, 128, 1, 2, 0, 0),      TPL_GEMM_CASE(SqmmaPath, 64, 128, 128, 1, 2, 0, 1),
    TPL_GEMM_CASE(SqmmaPath, 64, 128, 128, 1, 2, 1, 0),      TPL_GEMM_CASE(SqmmaPath, 64, 128, 128, 1, 2, 1, 1),
    TPL_GEMM_CASE(SqmmaPath, 64, 32, 48, 2, 1, 1, 0),        TPL_GEMM_CASE(SqmmaPath, 16, 128, 64, 1, 1, 0, 0),
    TPL_GEMM_CASE(SqmmaPath, 96, 32, 64, 1, 1, 0, 1),        TPL_GEMM_CASE(SqmmaNoWaitPath, 64, 128, 128, 1, 2, 1, 1),
    TPL_GEMM_CASE(SqmmaNoWaitPath, 96, 32, 64, 1, 1, 0, 1),
};

extern "C" int run(int variant, int m, int n, int k, int gm, int gn, int trans_a, int trans_b, int dtype,
                   const void* a, const void* b, const void* a_frag, const void* b_frag, const float* c0,
                   float* out) {
  return run_case(kCases, variant, m, n, k, gm, gn, trans_a, trans_b, dtype, a, b, a_frag, b_frag, c0, out);
}
