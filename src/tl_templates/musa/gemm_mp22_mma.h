/*!
 * \file tl_templates/musa/gemm_mp22_mma.h
 * \brief Block GEMM on mp_22 (MTT S4000) with the 128-lane warp MMA m32n32k16 (`__musa_fmma_m32n32k16_mma`,
 *        `__musa_bfmma_m32n32k16_mma`), each operand in shared memory or in registers.
 *
 *   template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum,
 *             class A_t, class B_t, class C_t>
 *   __device__ void tl::gemm_ss_mp22_mma(const A_t* A_smem, const B_t* B_smem, C_t* C_frag);
 *
 * C (M x N) += A (M x K) * B (K x N); with ClearAccum, C = A * B. A is stored M x K row-major, or K x M if
 * TransA; B is K x N row-major, or N x K if TransB; dense (leading dimension = stored row length), no swizzle,
 * 4-byte aligned. A_t = B_t = half_t or bfloat16_t, C_t = float (fp32 accumulation).
 * Threads: the block must have exactly GM * GN * 128 threads (every warp runs the warp-collective MMA), all
 * calling with the same arguments. Warp g = threadIdx.x / 128 = gm + GM * gn owns the (M/GM) x (N/GN) sub-tile
 * (gm, gn) as atoms_m x atoms_n 32x32 atoms. C_frag is the thread's accumulator: (M/GM/32) * (N/GN/32) * 8 floats
 * in the slot order of make_gemm_accumulator_fragment("mp_22.mma.m32n32k16", M, N, GM, GN)
 * (tilelang_musa/layout/mma_layouts.py), slot (ai * atoms_n + aj) * 8 + v.
 * Operand registers are loaded straight from shared memory each k step. The register layout of each operand is
 * the one whose 32-bit registers are contiguous pairs in the stored tile: A K-major ("Row") unless TransA,
 * B MN-major ("Col") unless TransB, i.e. the instruction's layout code (TransA << 1) | TransB
 * (MUSA_LAYOUTS.md sections 0 and 2).
 *
 * Register-operand forms (same template parameters; "_rs": A from registers, "_sr": B, "_rr": both):
 *   __device__ void tl::gemm_rs_mp22_mma(const A_t* A_frag, const B_t* B_smem, C_t* C_frag);
 *   __device__ void tl::gemm_sr_mp22_mma(const A_t* A_smem, const B_t* B_frag, C_t* C_frag);
 *   __device__ void tl::gemm_rr_mp22_mma(const A_t* A_frag, const B_t* B_frag, C_t* C_frag);
 * A_frag / B_frag are the thread's operand fragments in the K-major ("Row") register layout, in the slot order of
 * make_gemm_a_fragment("mp_22.mma.m32n32k16", M, K, GM, GN, transposed=TransA) and make_gemm_b_fragment(..., N, K,
 * GM, GN, transposed=TransB): A slot (ai * atoms_k + ak) * 4 + v ((M/GM/32) * (K/16) * 4 values), B slot
 * (aj * atoms_k + ak) * 4 + v, 4-byte aligned; the 4 values of an atom are its 2 registers, low half first.
 * TransA / TransB only describe the logical order of those buffers, which the slots already encode.
 * The caller synchronises: the shared tiles must be complete (e.g. __syncthreads) before the call, and must not
 * be overwritten by other threads until every thread has returned.
 */
#pragma once

#include "common.h"
#include "gemm_common.h"
#include "gemm_register_mma.h"

namespace tl {
namespace gemm_detail {

// Lane formulas of the m32n32k16 16-bit operand (32 rows x 16 k), for the first element of register w (w = 0, 1);
// the register's second element is the next k (K-major) or the next row (MN-major).
TL_DEVICE void mp22_k_major(int t, int w, int* r, int* k) {
  *r = ((t >> 2) & 15) + 16 * w;
  *k = 2 * (t & 3) + 8 * (t >> 6);
}
TL_DEVICE void mp22_mn_major(int t, int w, int* r, int* k) {
  *r = 2 * (t & 7) + 16 * w;
  *k = t >> 3;
}

// The two registers of one 32 x 16 operand atom whose rows start at `row0` and k at `k0`. `RowsContiguous`: the
// stored tile is (k, row) row-major with leading dimension `ld` (MN-major registers); otherwise (row, k).
template <bool RowsContiguous, int ld, typename T>
TL_DEVICE void mp22_load_operand(const T* smem, int t, int row0, int k0, int32_t* regs) {
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    int r, k;
    if constexpr (RowsContiguous) {
      mp22_mn_major(t, w, &r, &k);
      regs[w] = load_pair(smem + (k0 + k) * ld + row0 + r);
    } else {
      mp22_k_major(t, w, &r, &k);
      regs[w] = load_pair(smem + (row0 + r) * ld + k0 + k);
    }
  }
}

template <typename T>
TL_DEVICE void mp22_mma([[maybe_unused]] int32_t* acc, [[maybe_unused]] const int32_t* a,
                        [[maybe_unused]] const int32_t* b, [[maybe_unused]] int layout) {
#if defined(__MUSA_ARCH__)  // device pass only (gemm_common.h)
#if __MUSA_ARCH__ == 220
  if constexpr (std::is_same<T, half_t>::value) {
    __musa_fmma_m32n32k16_mma(acc, a, b, acc, 0, 0, 0, 0, 1, layout);
  } else {
    __musa_bfmma_m32n32k16_mma(acc, a, b, acc, 0, 0, 0, 0, 1, layout);
  }
#else
  static_assert(dependent_false<sizeof(T)>, "tl::gemm_ss_mp22_mma: the m32n32k16 warp MMA exists on mp_22 only");
#endif
#endif
}

// The instruction, for the block GEMM of gemm_register_mma.h.
struct Mp22MmaAtom {
  static constexpr int kM = 32, kN = 32, kK = 16, kGroup = 128;
  static constexpr int kRegsA = 2, kRegsB = 2;  // 32 x 16 16-bit values over 128 lanes
  template <int Rows, bool RowsContiguous, int ld, typename T>
  TL_DEVICE static void load(const T* smem, int t, int row0, int k0, int32_t* regs) {
    static_assert(Rows == 32, "both m32n32k16 operands have 32 rows");
    mp22_load_operand<RowsContiguous, ld>(smem, t, row0, k0, regs);
  }
  // The instruction's layout code: bit 1 A M-major, bit 0 B K-major.
  template <typename T, bool AMMajor, bool BKMajor>
  TL_DEVICE static void mma(int32_t* acc, const int32_t* a, const int32_t* b) {
    mp22_mma<T>(acc, a, b, (AMMajor ? 2 : 0) | (BKMajor ? 1 : 0));
  }
};

}  // namespace gemm_detail
}  // namespace tl

TL_GEMM_REGISTER_MMA_FORMS(mp22_mma, gemm_detail::Mp22MmaAtom)
