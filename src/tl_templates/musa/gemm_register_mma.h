/*!
 * \file tl_templates/musa/gemm_register_mma.h
 * \brief The block GEMM of the warp MMAs whose operands are registers (mp_22's m32n32k16 MMA, gemm_mp22_mma.h;
 *        mp_31's m16n8k16 WMMA, gemm_mp31_wmma.h), written once over the instruction, and the four operand forms
 *        (`gemm_ss_*`, `_rs`, `_sr`, `_rr`) each arch exposes.
 *
 * The instruction is a class `Atom` with
 *   kM, kN, kK, kGroup             the atom's shape and the lanes of the group that issues it
 *   kRegsA, kRegsB                 32-bit operand registers per lane of one A atom (kM x kK) and one B atom
 *   load<Rows, RowsContiguous, ld>(smem, lane, row0, k0, regs)
 *                                  the registers of a Rows x kK operand atom whose rows start at row0 and k at k0;
 *                                  RowsContiguous: the stored tile is (k, row) row-major with leading dimension ld
 *                                  (MN-major registers), otherwise (row, k) (K-major registers)
 *   mma<T, AMMajor, BKMajor>(acc, a, b)
 *                                  one C += A * B on the lane's accumulator words, A's registers M-major or not, B's
 *                                  K-major or not
 * Shared operands use the register layout whose pairs are contiguous in the stored tile (A M-major if TransA, B
 * K-major if TransB); fragment operands are K-major, in the slot order of make_gemm_a_fragment /
 * make_gemm_b_fragment (tilelang_musa/layout/mma_layouts.py): A slot (ai * atoms_k + ak) * 2 kRegsA + v, B slot
 * (aj * atoms_k + ak) * 2 kRegsB + v.
 */
#pragma once

#include "common.h"
#include "gemm_common.h"

namespace tl {
namespace gemm_detail {

// The block GEMM with each operand read from shared memory or (ARegs / BRegs) from the thread's fragment.
template <class Atom, int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, bool ARegs,
          bool BRegs, class A_t, class B_t, class C_t>
TL_DEVICE void register_mma_block(const A_t* A, const B_t* B, C_t* C_frag, int first) {
  static_assert(check_16bit_operands<A_t, B_t, C_t>(), "");
  using Tiling = BlockTiling<M, N, K, GM, GN, Atom::kGroup, Atom::kM, Atom::kN, Atom::kK>;
  constexpr bool kAMMajor = !ARegs && TransA;
  constexpr bool kBKMajor = BRegs || TransB;
  const GroupCoord at = group_coord<GM, Atom::kGroup, Tiling::kTileM, Tiling::kTileN, Tiling::kThreads>(first);
  if constexpr (ClearAccum) clear_accumulator<Tiling::kAccumulatorSlots>(C_frag);
#if defined(TL_SIMULATOR)
  // checked mode: an accumulator element nothing wrote, read before the first MMA adds to it (uninit_reads.h)
  if constexpr (!ClearAccum) tl_sim::CheckAccumulatorRead(C_frag, Tiling::kAccumulatorSlots);
#endif
  int32_t* acc = reinterpret_cast<int32_t*>(C_frag);  // the built-ins take fp32 accumulators as 32-bit words
#pragma unroll 1
  for (int ak = 0; ak < Tiling::kAtomsK; ++ak) {
    const int k0 = ak * Atom::kK;
    int32_t a[Tiling::kAtomsM][Atom::kRegsA], b[Tiling::kAtomsN][Atom::kRegsB];
#pragma unroll
    for (int ai = 0; ai < Tiling::kAtomsM; ++ai) {
      if constexpr (ARegs) {
#if defined(TL_SIMULATOR)
        // checked mode: an operand element of the thread's fragment that nothing wrote (uninit_reads.h)
        tl_sim::CheckOperandRead(A + (ai * Tiling::kAtomsK + ak) * 2 * Atom::kRegsA, sizeof(A_t), 2 * Atom::kRegsA);
#endif
        __builtin_memcpy(a[ai], A + (ai * Tiling::kAtomsK + ak) * 2 * Atom::kRegsA, sizeof(a[ai]));
      } else {
        Atom::template load<Atom::kM, TransA, TransA ? M : K>(A, at.lane, at.row0 + Atom::kM * ai, k0, a[ai]);
      }
    }
#pragma unroll
    for (int aj = 0; aj < Tiling::kAtomsN; ++aj) {
      if constexpr (BRegs) {
#if defined(TL_SIMULATOR)
        // checked mode: an operand element of the thread's fragment that nothing wrote (uninit_reads.h)
        tl_sim::CheckOperandRead(B + (aj * Tiling::kAtomsK + ak) * 2 * Atom::kRegsB, sizeof(B_t), 2 * Atom::kRegsB);
#endif
        __builtin_memcpy(b[aj], B + (aj * Tiling::kAtomsK + ak) * 2 * Atom::kRegsB, sizeof(b[aj]));
      } else {
        Atom::template load<Atom::kN, !TransB, TransB ? K : N>(B, at.lane, at.col0 + Atom::kN * aj, k0, b[aj]);
      }
    }
#pragma unroll
    for (int ai = 0; ai < Tiling::kAtomsM; ++ai)
#pragma unroll
      for (int aj = 0; aj < Tiling::kAtomsN; ++aj)
        Atom::template mma<A_t, kAMMajor, kBKMajor>(acc + (ai * Tiling::kAtomsN + aj) * Tiling::kRegsPerAtom, a[ai],
                                                     b[aj]);
  }
}

}  // namespace gemm_detail
}  // namespace tl

// The four operand forms of one instruction: tl::gemm_ss_<SUFFIX> (both operands in shared memory), _rs (A from
// the thread's fragment), _sr (B), _rr (both), each `(A, B, C_frag, int first = 0)`.
#define TL_GEMM_REGISTER_MMA_FORM(FORM, SUFFIX, ATOM, AREGS, BREGS)                                               \
  template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, class A_t, class B_t, \
            class C_t>                                                                                            \
  TL_DEVICE void gemm_##FORM##_##SUFFIX(const A_t* A, const B_t* B, C_t* C_frag, int first = 0) {                 \
    gemm_detail::register_mma_block<ATOM, M, N, K, GM, GN, TransA, TransB, ClearAccum, AREGS, BREGS>(A, B, C_frag, \
                                                                                                    first);       \
  }
#define TL_GEMM_REGISTER_MMA_FORMS(SUFFIX, ATOM)              \
  namespace tl {                                              \
  TL_GEMM_REGISTER_MMA_FORM(ss, SUFFIX, ATOM, false, false)   \
  TL_GEMM_REGISTER_MMA_FORM(rs, SUFFIX, ATOM, true, false)    \
  TL_GEMM_REGISTER_MMA_FORM(sr, SUFFIX, ATOM, false, true)    \
  TL_GEMM_REGISTER_MMA_FORM(rr, SUFFIX, ATOM, true, true)     \
  }
