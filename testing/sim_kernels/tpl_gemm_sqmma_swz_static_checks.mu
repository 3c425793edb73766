// Instantiations of tl::gemm_ss_mp31_sqmma_swizzled that must not compile: one kernel per rule, each breaking only
// that rule (the rest is the valid 128 x 128 x 64 tile on 1 squad, m128n128 atoms, k = 64). test_templates_gemm_
// swizzled.py compiles the file with -fsyntax-only for mp_31 and checks that each rule's message appears.
#include <musa_runtime.h>

#include "tl_templates/musa/gemm_mp31_sqmma.h"

using half_t = tl::half_t;

// <M, N, K, GM, GN, TransA, TransB, ClearAccum, ContA, SwzA, ContB, SwzB>
// N-major B in column blocks of 64: an m128n128 atom's 128 columns straddle two blocks.
__global__ void b_atom_straddles_blocks(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_sqmma_swizzled<128, 128, 64, 1, 1, false, false, true, 64, 16, 64, 32>(a, b, c);
}
// M-major A in column blocks of 64: the atom's 128 rows of A straddle two blocks.
__global__ void a_atom_straddles_blocks(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_sqmma_swizzled<128, 128, 64, 1, 1, true, false, true, 64, 32, 128, 32>(a, b, c);
}
// K-major A in column blocks of 8 halves (16-byte rows): even a k = 16 step straddles two blocks.
__global__ void a_k_step_straddles_blocks(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_sqmma_swizzled<128, 128, 64, 1, 1, false, false, true, 8, 16, 128, 32>(a, b, c);
}
// The same for a K-major B.
__global__ void b_k_step_straddles_blocks(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_sqmma_swizzled<128, 128, 64, 1, 1, false, true, true, 64, 16, 8, 16>(a, b, c);
}
// A continuity of 48 does not divide A's stored rows of 64.
__global__ void continuity_not_divisor(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_sqmma_swizzled<128, 128, 64, 1, 1, false, false, true, 48, 16, 128, 32>(a, b, c);
}
// 8 bytes is not an SQMMA swizzle granularity.
__global__ void bad_granularity(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_sqmma_swizzled<128, 128, 64, 1, 1, false, false, true, 64, 8, 128, 32>(a, b, c);
}
// A single column block of 256 halves (512-byte rows): not a descriptor leading stride.
__global__ void pitch_too_long(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_sqmma_swizzled<128, 256, 64, 1, 2, false, false, true, 64, 16, 256, 32>(a, b, c);
}
