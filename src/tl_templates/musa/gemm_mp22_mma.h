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

// The block GEMM with each operand read from shared memory or (ARegs / BRegs) from the thread's fragment.
template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, bool ARegs, bool BRegs,
          class A_t, class B_t, class C_t>
TL_DEVICE void mp22_mma_block(const A_t* A, const B_t* B, C_t* C_frag, int first) {
  static_assert(check_16bit_operands<A_t, B_t, C_t>(), "");
  using Tiling = BlockTiling<M, N, K, GM, GN, 128, 32, 32, 16>;
  // Shared operands use the register layout whose pairs are contiguous in the stored tile; fragment operands are
  // K-major ("Row"). Bit 1: A M-major, bit 0: B K-major.
  constexpr int kLayout = (!ARegs && TransA ? 2 : 0) | (BRegs || TransB ? 1 : 0);
  constexpr int kOperandValues = 32 * 16 / 128;  // 16-bit values of one operand atom per thread (2 registers)
  const GroupCoord at = group_coord<GM, 128, Tiling::kTileM, Tiling::kTileN, Tiling::kThreads>(first);
  if constexpr (ClearAccum) clear_accumulator<Tiling::kAccumulatorSlots>(C_frag);
  int32_t* acc = reinterpret_cast<int32_t*>(C_frag);  // the built-ins take fp32 accumulators as 32-bit words
#pragma unroll 1
  for (int ak = 0; ak < Tiling::kAtomsK; ++ak) {
    const int k0 = ak * 16;
    int32_t a[Tiling::kAtomsM][2], b[Tiling::kAtomsN][2];
#pragma unroll
    for (int ai = 0; ai < Tiling::kAtomsM; ++ai) {
      if constexpr (ARegs) {  // slot (ai * atoms_k + ak) * 4 + v
        __builtin_memcpy(a[ai], A + (ai * Tiling::kAtomsK + ak) * kOperandValues, sizeof(a[ai]));
      } else {
        mp22_load_operand<TransA, TransA ? M : K>(A, at.lane, at.row0 + 32 * ai, k0, a[ai]);
      }
    }
#pragma unroll
    for (int aj = 0; aj < Tiling::kAtomsN; ++aj) {
      if constexpr (BRegs) {  // slot (aj * atoms_k + ak) * 4 + v
        __builtin_memcpy(b[aj], B + (aj * Tiling::kAtomsK + ak) * kOperandValues, sizeof(b[aj]));
      } else {
        mp22_load_operand<!TransB, TransB ? K : N>(B, at.lane, at.col0 + 32 * aj, k0, b[aj]);
      }
    }
#pragma unroll
    for (int ai = 0; ai < Tiling::kAtomsM; ++ai)
#pragma unroll
      for (int aj = 0; aj < Tiling::kAtomsN; ++aj)
        mp22_mma<A_t>(acc + (ai * Tiling::kAtomsN + aj) * Tiling::kRegsPerAtom, a[ai], b[aj], kLayout);
  }
}

}  // namespace gemm_detail

template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, class A_t, class B_t,
          class C_t>
TL_DEVICE void gemm_ss_mp22_mma(const A_t* A_smem, const B_t* B_smem, C_t* C_frag, int first = 0) {
  gemm_detail::mp22_mma_block<M, N, K, GM, GN, TransA, TransB, ClearAccum, false, false>(A_smem, B_smem, C_frag, first);
}

template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, class A_t, class B_t,
          class C_t>
TL_DEVICE void gemm_rs_mp22_mma(const A_t* A_frag, const B_t* B_smem, C_t* C_frag, int first = 0) {
  gemm_detail::mp22_mma_block<M, N, K, GM, GN, TransA, TransB, ClearAccum, true, false>(A_frag, B_smem, C_frag, first);
}

template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, class A_t, class B_t,
          class C_t>
TL_DEVICE void gemm_sr_mp22_mma(const A_t* A_smem, const B_t* B_frag, C_t* C_frag, int first = 0) {
  gemm_detail::mp22_mma_block<M, N, K, GM, GN, TransA, TransB, ClearAccum, false, true>(A_smem, B_frag, C_frag, first);
}

template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, class A_t, class B_t,
          class C_t>
TL_DEVICE void gemm_rr_mp22_mma(const A_t* A_frag, const B_t* B_frag, C_t* C_frag, int first = 0) {
  gemm_detail::mp22_mma_block<M, N, K, GM, GN, TransA, TransB, ClearAccum, true, true>(A_frag, B_frag, C_frag, first);
}

}  // namespace tl
