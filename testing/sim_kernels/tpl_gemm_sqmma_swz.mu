// tl::gemm_ss_mp31_sqmma_swizzled and its _nowait form (tl_templates/musa/gemm_mp31_sqmma.h) through the harness of
// tpl_gemm_harness.mu; built for mp_31 (squads of 4 x 32 threads). The test uploads A and B already permuted into
// the swizzled layout, so the harness's plain copies put every element at its physical offset; B follows A in the
// dynamic shared buffer, and the test asserts that A's size keeps B on its swizzle period.
#include "tpl_gemm_harness.mu"

using half_t = tl::half_t;
using bfloat16_t = tl::bfloat16_t;

// The layout's default continuity (make_sqmma_swizzled_layout): the whole stored row if it spans <= 256 bytes,
// else 256 bytes of it; `narrow` caps it instead at kNarrowK (K-major) / kNarrowMN (MN-major) elements.
constexpr int kNarrowK = 32, kNarrowMN = 64;
constexpr int continuity(int stored_cols, int elem, bool k_major, bool narrow) {
  const int cap = narrow ? (k_major ? kNarrowK : kNarrowMN) : 256 / elem;
  return stored_cols < cap ? stored_cols : cap;
}

// Operand storage of variant V: 0 canonical (default continuity, SG16 K-major / SG32 MN-major, the compiler's
// choice), 1 narrow column blocks with canonical swizzles, 2 default continuity with SG64 on both (issued with
// the _nowait form, then tl::sqmma_wait<0>()).
template <int V, int M, int N, int K, bool TA, bool TB, class T>
struct Storage {
  static constexpr int e = static_cast<int>(sizeof(T));
  static constexpr bool kAKMajor = !TA, kBKMajor = TB;
  static constexpr int kContA = continuity(TA ? M : K, e, kAKMajor, V == 1);
  static constexpr int kContB = continuity(TB ? K : N, e, kBKMajor, V == 1);
  static constexpr int kSwzA = V == 2 ? 64 : kAKMajor ? 16 : 32;
  static constexpr int kSwzB = V == 2 ? 64 : kBKMajor ? 16 : 32;
};

template <int V>
struct SwizzledPath {
  static constexpr int kVariant = V;
  static constexpr int kGroup = 128;
  template <int M, int N, int K, int GM, int GN, bool TA, bool TB, bool Clear, class T>
  static __device__ void run(const T* a, const T* b, const T*, const T*, float* c) {
    using S = Storage<V, M, N, K, TA, TB, T>;
    if constexpr (V == 2) {
      tl::gemm_ss_mp31_sqmma_swizzled_nowait<M, N, K, GM, GN, TA, TB, Clear, S::kContA, S::kSwzA, S::kContB,
                                             S::kSwzB>(a, b, c);
      tl::sqmma_wait<0>();
    } else {
      tl::gemm_ss_mp31_sqmma_swizzled<M, N, K, GM, GN, TA, TB, Clear, S::kContA, S::kSwzA, S::kContB, S::kSwzB>(
          a, b, c);
    }
  }
};
using Canonical = SwizzledPath<0>;
using Narrow = SwizzledPath<1>;
using Swizzle64NoWait = SwizzledPath<2>;

// (M, N, K, GM, GN, TransA, TransB). Canonical: the seed tile 256 x 256 x 64 on 4 squads (A 256 x 64 K-major in
// one 128-byte block, B 64 x 256 N-major in 2 blocks of 128) in every transpose combination and 3 squad grids, a
// single squad, and K = 128 (K-major rows of 256 bytes, two k steps). Narrow: blocks of 32 (K-major: the k steps of
// 32 alternate blocks) and 64 (MN-major: each m64n64 atom in its own block). SG64: one m128n64 atom, M-major A.
static const GemmCase kCases[] = {
    TPL_GEMM_CASE(Canonical, 256, 256, 64, 2, 2, 0, 0),  TPL_GEMM_CASE(Canonical, 256, 256, 64, 2, 2, 1, 1),
    TPL_GEMM_CASE(Canonical, 256, 256, 64, 4, 1, 1, 0),  TPL_GEMM_CASE(Canonical, 256, 256, 64, 1, 4, 0, 1),
    TPL_GEMM_CASE(Canonical, 64, 64, 64, 1, 1, 0, 0),    TPL_GEMM_CASE(Canonical, 128, 64, 128, 2, 1, 1, 1),
    TPL_GEMM_CASE(Canonical, 64, 128, 128, 1, 2, 0, 1),  TPL_GEMM_CASE(Narrow, 128, 128, 64, 2, 2, 0, 0),
    TPL_GEMM_CASE(Narrow, 128, 128, 64, 2, 2, 1, 1),     TPL_GEMM_CASE(Swizzle64NoWait, 128, 64, 64, 1, 1, 1, 0),
};

extern "C" int run(int variant, int m, int n, int k, int gm, int gn, int trans_a, int trans_b, int dtype,
                   const void* a, const void* b, const void* a_frag, const void* b_frag, const float* c0,
                   float* out) {
  return run_case(kCases, variant, m, n, k, gm, gn, trans_a, trans_b, dtype, a, b, a_frag, b_frag, c0, out);
}
