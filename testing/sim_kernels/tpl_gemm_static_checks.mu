// Instantiations of the block-GEMM templates that must not compile: one kernel per rule, each breaking only that
// rule. test_templates_gemm.py compiles the file with -fsyntax-only for mp_22 and for mp_31 (g++ reports every
// failed instantiation) and checks that each rule's static_assert message appears.
#include <musa_runtime.h>

#include "tl_templates/musa/gemm_mp22_mma.h"
#include "tl_templates/musa/gemm_mp31_sqmma.h"
#include "tl_templates/musa/gemm_mp31_wmma.h"

using half_t = tl::half_t;
using bfloat16_t = tl::bfloat16_t;

#if __MUSA_ARCH__ == 220
// M = 48 is not a multiple of GM x 32.
__global__ void m_not_multiple(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp22_mma<48, 32, 16, 1, 1, false, false, true>(a, b, c);
}
// The templates of other archs are declared in every pass; instantiating their instructions here fails.
__global__ void wmma_on_mp22(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_wmma<16, 8, 16, 1, 1, false, false, true>(a, b, c);
}
__global__ void sqmma_on_mp22(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_sqmma<64, 64, 16, 1, 1, false, false, true>(a, b, c);
}
#else
__global__ void mp22_mma_on_mp31(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp22_mma<32, 32, 16, 1, 1, false, false, true>(a, b, c);
}
// K = 8 is not a multiple of 16.
__global__ void k_not_multiple(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_wmma<16, 8, 8, 1, 1, false, false, true>(a, b, c);
}
__global__ void float_operands(const float* a, const float* b, float* c) {
  tl::gemm_ss_mp31_wmma<16, 8, 16, 1, 1, false, false, true>(a, b, c);
}
__global__ void half_accumulator(const half_t* a, const half_t* b, half_t* c) {
  tl::gemm_ss_mp31_wmma<16, 8, 16, 1, 1, false, false, true>(a, b, c);
}
__global__ void mixed_operands(const half_t* a, const bfloat16_t* b, float* c) {
  tl::gemm_ss_mp31_wmma<16, 8, 16, 1, 1, false, false, true>(a, b, c);
}
// A's stored rows are K = 256 halves = 512 bytes: not a descriptor leading stride.
__global__ void stride_too_long(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_sqmma<64, 64, 256, 1, 1, false, false, true>(a, b, c);
}
// A 48 x 48 squad tile (stored rows of 16 halves): no SQMMA shape divides it.
__global__ void no_sqmma_shape(const half_t* a, const half_t* b, float* c) {
  tl::gemm_ss_mp31_sqmma<48, 48, 16, 1, 1, false, true, true>(a, b, c);
}
#endif
