/*!
 * \file tl_templates/musa/gemm_mp31_wmma.h
 * \brief Block GEMM on mp_31 (MTT S5000) with the 32-lane warp WMMA m16n8k16 (`__musa_wmma_m16n8k16_mma`),
 *        both operands in shared memory.
 *
 *   template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum,
 *             class A_t, class B_t, class C_t>
 *   __device__ void tl::gemm_ss_mp31_wmma(const A_t* A_smem, const B_t* B_smem, C_t* C_frag);
 *
 * C (M x N) += A (M x K) * B (K x N); with ClearAccum, C = A * B. A is stored M x K row-major, or K x M if
 * TransA; B is K x N row-major, or N x K if TransB; dense (leading dimension = stored row length), no swizzle,
 * 4-byte aligned. A_t = B_t = half_t or bfloat16_t, C_t = float (fp32 accumulation).
 * Threads: the block must have exactly GM * GN * 32 threads (every warp runs the warp-collective WMMA), all calling
 * with the same arguments. Warp g = threadIdx.x / 32 = gm + GM * gn owns the (M/GM) x (N/GN) sub-tile (gm, gn)
 * as atoms_m x atoms_n 16x8 atoms. C_frag is the thread's accumulator: (M/GM/16) * (N/GN/8) * 4 floats in the
 * slot order of make_gemm_accumulator_fragment("mp_31.wmma.m16n8k16", M, N, GM, GN)
 * (tilelang_musa/layout/mma_layouts.py), slot (ai * atoms_n + aj) * 4 + v.
 * Operand registers are loaded straight from shared memory each k step, in the register layout whose 32-bit
 * registers are contiguous pairs in the stored tile: A K-major unless TransA, B N-major unless TransB, i.e.
 * layout_num = ((tnspA << 1) | tnspB) ^ 1 = (TransA << 1) | TransB (MUSA_LAYOUTS.md sections 0 and 1).
 *
 * Register-operand forms (same template parameters; "_rs": A from registers, "_sr": B, "_rr": both):
 *   __device__ void tl::gemm_rs_mp31_wmma(const A_t* A_frag, const B_t* B_smem, C_t* C_frag);
 *   __device__ void tl::gemm_sr_mp31_wmma(const A_t* A_smem, const B_t* B_frag, C_t* C_frag);
 *   __device__ void tl::gemm_rr_mp31_wmma(const A_t* A_frag, const B_t* B_frag, C_t* C_frag);
 * A_frag / B_frag are the thread's operand fragments in the K-major register layout, in the slot order of
 * make_gemm_a_fragment("mp_31.wmma.m16n8k16", M, K, GM, GN, bits=16, k_major=True, transposed=TransA) and
 * make_gemm_b_fragment(..., N, K, GM, GN, bits=16, k_major=True, transposed=TransB): A slot (ai * atoms_k + ak) * 8
 * + v ((M/GM/16) * (K/16) * 8 values), B slot (aj * atoms_k + ak) * 4 + v ((N/GN/8) * (K/16) * 4 values), 4-byte
 * aligned. TransA / TransB only describe the logical order of those buffers, which the slots already encode.
 * The caller synchronises: the shared tiles must be complete (e.g. __syncthreads) before the call, and must not
 * be overwritten by other threads until every thread has returned.
 */
#pragma once

#include "common.h"
#include "gemm_common.h"
#include "gemm_register_mma.h"

namespace tl {
namespace gemm_detail {

// Lane formulas of a 16-bit m16n8k16 operand with `Rows` rows (16 for A, 8 for B) and k = 16 (p = 2 elements per
// register), for the first element of register w; the second element is the next k (K-major) or the next row
// (MN-major). K-major: v = v0 + 2 v1 + 4 v2, r = t/4 + 8 v2, k = 2 (t%4) + v0 + 8 v1.
// MN-major: t = t0 + 4 t1, v = v0 + 2 v1 + 2 (Rows/8) v2, r = 2 t0 + v0 + 8 v1, k = t1 + 8 v2.
template <int Rows, bool KMajor>
TL_DEVICE void wmma_operand_lane(int t, int w, int* r, int* k) {
  if constexpr (KMajor) {
    *r = t / 4 + 8 * (w / 2);
    *k = 2 * (t % 4) + 8 * (w % 2);
  } else {
    *r = 2 * (t % 4) + 8 * (w % (Rows / 8));
    *k = t / 4 + 8 * (w / (Rows / 8));
  }
}

// The Rows * 16 / 64 registers of one Rows x 16 operand atom whose rows start at `row0` and k at `k0`.
// `RowsContiguous`: the stored tile is (k, row) row-major with leading dimension `ld` (MN-major registers);
// otherwise (row, k).
template <int Rows, bool RowsContiguous, int ld, typename T>
TL_DEVICE void wmma_load_operand(const T* smem, int t, int row0, int k0, int32_t* regs) {
#pragma unroll
  for (int w = 0; w < Rows / 4; ++w) {
    int r, k;
    wmma_operand_lane<Rows, !RowsContiguous>(t, w, &r, &k);
    regs[w] = RowsContiguous ? load_pair(smem + (k0 + k) * ld + row0 + r) : load_pair(smem + (row0 + r) * ld + k0 + k);
  }
}

// One m16n8k16 WMMA, C += A * B, into the warp's registers `c`.
template <int LayoutNum, int MmaType>
TL_DEVICE void wmma_m16n8k16([[maybe_unused]] int32_t* c, [[maybe_unused]] const int32_t* a,
                             [[maybe_unused]] const int32_t* b) {
#if defined(__MUSA_ARCH__)  // device pass only (gemm_common.h)
#if __MUSA_ARCH__ >= 310
  __musa_wmma_m16n8k16_mma(c, a, b, c, 0, 0, 0, 0, 0, LayoutNum, MmaType);
#else
  static_assert(dependent_false<LayoutNum>, "tl::gemm_*_mp31_wmma: the m16n8k16 warp WMMA needs mp_31 or newer");
#endif
#endif
}

// The instruction, for the block GEMM of gemm_register_mma.h.
struct WmmaM16n8k16Atom {
  static constexpr int kM = 16, kN = 8, kK = 16, kGroup = 32;
  static constexpr int kRegsA = 4, kRegsB = 2;  // 16 x 16 and 8 x 16 16-bit values over 32 lanes
  template <int Rows, bool RowsContiguous, int ld, typename T>
  TL_DEVICE static void load(const T* smem, int t, int row0, int k0, int32_t* regs) {
    wmma_load_operand<Rows, RowsContiguous, ld>(smem, t, row0, k0, regs);
  }
  // tnspA = 1: A is M-major; tnspB = 1: B is N-major; the built-in's layout number is ((tnspA << 1) | tnspB) ^ 1.
  template <typename T, bool AMMajor, bool BKMajor>
  TL_DEVICE static void mma(int32_t* acc, const int32_t* a, const int32_t* b) {
    constexpr int kLayoutNum = (((AMMajor ? 1 : 0) << 1) | (BKMajor ? 0 : 1)) ^ 1;
    wmma_m16n8k16<kLayoutNum, Mma16Bit<T>::kMmaType>(acc, a, b);
  }
};

}  // namespace gemm_detail
}  // namespace tl

TL_GEMM_REGISTER_MMA_FORMS(mp31_wmma, gemm_detail::WmmaM16n8k16Atom)
