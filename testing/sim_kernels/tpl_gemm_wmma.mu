// tl::gemm_{ss,rs,sr,rr}_mp31_wmma (tl_templates/musa/gemm_mp31_wmma.h) through the harness of
// tpl_gemm_harness.mu; built for mp_31 (32-lane warps). Variants 1-3 read A, B or both from the thread's fragments.
#include "tpl_gemm_harness.mu"

using half_t = tl::half_t;
using bfloat16_t = tl::bfloat16_t;

struct WmmaPath {
  static constexpr int kVariant = 0;
  static constexpr int kGroup = 32;
  template <int M, int N, int K, int GM, int GN, bool TA, bool TB, bool Clear, class T>
  static __device__ void run(const T* a, const T* b, const T*, const T*, float* c) {
    tl::gemm_ss_mp31_wmma<M, N, K, GM, GN, TA, TB, Clear>(a, b, c);
  }
};

struct WmmaRsPath {
  static constexpr int kVariant = 1;
  static constexpr int kGroup = 32;
  template <int M, int N, int K, int GM, int GN, bool TA, bool TB, bool Clear, class T>
  static __device__ void run(const T*, const T* b, const T* fa, const T*, float* c) {
    tl::gemm_rs_mp31_wmma<M, N, K, GM, GN, TA, TB, Clear>(fa, b, c);
  }
};

struct WmmaSrPath {
  static constexpr int kVariant = 2;
  static constexpr int kGroup = 32;
  template <int M, int N, int K, int GM, int GN, bool TA, bool TB, bool Clear, class T>
  static __device__ void run(const T* a, const T*, const T*, const T* fb, float* c) {
    tl::gemm_sr_mp31_wmma<M, N, K, GM, GN, TA, TB, Clear>(a, fb, c);
  }
};

struct WmmaRrPath {
  static constexpr int kVariant = 3;
  static constexpr int kGroup = 32;
  template <int M, int N, int K, int GM, int GN, bool TA, bool TB, bool Clear, class T>
  static __device__ void run(const T*, const T*, const T* fa, const T* fb, float* c) {
    tl::gemm_rr_mp31_wmma<M, N, K, GM, GN, TA, TB, Clear>(fa, fb, c);
  }
};

// (M, N, K, GM, GN, TransA, TransB): one atom; every transpose combination on 2 x 2 warps with 2 x 4 atoms and
// two k steps per warp; tall and wide warp grids.
static const GemmCase kCases[] = {
    TPL_GEMM_CASE(WmmaPath, 16, 8, 16, 1, 1, 0, 0),   TPL_GEMM_CASE(WmmaPath, 64, 64, 32, 2, 2, 0, 0),
    TPL_GEMM_CASE(WmmaPath, 64, 64, 32, 2, 2, 0, 1),  TPL_GEMM_CASE(WmmaPath, 64, 64, 32, 2, 2, 1, 0),
    TPL_GEMM_CASE(WmmaPath, 64, 64, 32, 2, 2, 1, 1),  TPL_GEMM_CASE(WmmaPath, 128, 32, 48, 4, 1, 0, 1),
    TPL_GEMM_CASE(WmmaPath, 16, 64, 16, 1, 4, 1, 0),
    // register operands (replicated across the other group axis) with the shared one in either order
    TPL_GEMM_CASE(WmmaRsPath, 64, 64, 32, 2, 2, 0, 0),  TPL_GEMM_CASE(WmmaRsPath, 64, 64, 32, 2, 2, 1, 1),
    TPL_GEMM_CASE(WmmaSrPath, 64, 64, 32, 2, 2, 0, 0),  TPL_GEMM_CASE(WmmaSrPath, 64, 64, 32, 2, 2, 1, 1),
    TPL_GEMM_CASE(WmmaRrPath, 64, 64, 32, 2, 2, 0, 1),  TPL_GEMM_CASE(WmmaRrPath, 32, 32, 48, 1, 2, 1, 0),
};

extern "C" int run(int variant, int m, int n, int k, int gm, int gn, int trans_a, int trans_b, int dtype,
                   const void* a, const void* b, const void* a_frag, const void* b_frag, const float* c0,
                   float* out) {
  return run_case(kCases, variant, m, n, k, gm, gn, trans_a, trans_b, dtype, a, b, a_frag, b_frag, c0, out);
}
