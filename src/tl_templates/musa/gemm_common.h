/*!
 * \file tl_templates/musa/gemm_common.h
 * \brief Pieces shared by the block-level GEMM templates (gemm_mp22_mma.h, gemm_mp31_wmma.h, gemm_mp31_sqmma.h).
 *
 * Every template follows the block-level composition of tilelang_musa/layout/mma_layouts.py (its module docstring
 * is the contract): the block's threads form groups of G threads (the instruction's thread group), group
 * g = gm + GM * gn owns the (M / GM) x (N / GN) sub-tile at rows gm * M / GM and columns gn * N / GN, made of
 * atoms_m x atoms_n instruction atoms, and accumulator value v of atom (ai, aj) is the thread's slot
 * (ai * atoms_n + aj) * regs_per_atom + v.
 *
 * Two passes: mcc parses kernel bodies, and the templates they instantiate, in its host pass too, where
 * __MUSA_ARCH__ is undefined and the MUSA built-ins are unknown. So every template is declared in both passes and
 * only the built-in calls sit under `#if defined(__MUSA_ARCH__)`; in a device pass for an arch without the
 * instruction, instantiating the call fails a static_assert that names the arch it needs.
 */
#pragma once

#include "common.h"

namespace tl {
namespace gemm_detail {

/*! \brief Static shape of one block GEMM on GM x GN groups of `Group` threads running an AtomM x AtomN x AtomK
 *         instruction; static_asserts name the first violated divisibility. */
template <int M, int N, int K, int GM, int GN, int Group, int AtomM, int AtomN, int AtomK>
struct BlockTiling {
  static_assert(M > 0 && N > 0 && K > 0 && GM > 0 && GN > 0, "tl::gemm: M, N, K, GM and GN must be positive");
  static_assert(M % (GM * AtomM) == 0, "tl::gemm: M must be a multiple of GM x the instruction's m");
  static_assert(N % (GN * AtomN) == 0, "tl::gemm: N must be a multiple of GN x the instruction's n");
  static_assert(K % AtomK == 0, "tl::gemm: K must be a multiple of the instruction's k");
  static constexpr int kGroup = Group;
  static constexpr int kThreads = GM * GN * Group;  // the block must have exactly this many threads
  static constexpr int kTileM = M / GM, kTileN = N / GN;
  static constexpr int kAtomsM = kTileM / AtomM, kAtomsN = kTileN / AtomN, kAtomsK = K / AtomK;
  static constexpr int kRegsPerAtom = AtomM * AtomN / Group;  // accumulator values per thread per atom
  static constexpr int kAccumulatorSlots = kAtomsM * kAtomsN * kRegsPerAtom;
};

/*! \brief The calling thread's place in the group grid: lane, and the group's first row and column. */
struct GroupCoord {
  int lane, row0, col0;
};

/*! \brief Threads is the gemm's thread count (GM * GN * Group): a gemm run by part of the block (a T.ws region)
 *         numbers its threads from that part's first thread `first` (a multiple of Group), as the accumulator's
 *         layout does; first = 0 keeps the numbering tid % Threads (a part starting at a multiple of Threads). */
template <int GM, int Group, int TileM, int TileN, int Threads>
TL_DEVICE GroupCoord group_coord(int first = 0) {
  const int tid = (static_cast<int>(threadIdx.x) - first) % Threads;
  const int g = tid / Group;  // g = gm + GM * gn (M fastest)
  return GroupCoord{tid % Group, (g % GM) * TileM, (g / GM) * TileN};
}

/*! \brief 16-bit element types the matrix instructions take, with their MUSA TceABDtype codes (mma_type). */
template <typename T>
struct Mma16Bit;
template <>
struct Mma16Bit<half_t> {
  static constexpr int kMmaType = 2;  // F16F16
};
template <>
struct Mma16Bit<bfloat16_t> {
  static constexpr int kMmaType = 3;  // BF16BF16
};

template <typename A_t, typename B_t, typename C_t>
TL_CONSTEXPR bool check_16bit_operands() {
  static_assert(std::is_same<A_t, B_t>::value, "tl::gemm: A and B must have the same element type");
  static_assert(std::is_same<A_t, half_t>::value || std::is_same<A_t, bfloat16_t>::value,
                "tl::gemm: this matrix-instruction path takes float16 or bfloat16 operands");
  static_assert(std::is_same<C_t, float>::value, "tl::gemm: float16/bfloat16 operands accumulate in float32");
  return true;
}

/*!
 * \brief Two adjacent 16-bit elements as one 32-bit register, the lower-indexed element in the low half
 *        (MUSA_LAYOUTS.md: "lower index in the low bits"). `p` must be 4-byte aligned; the templates choose the
 *        register layouts that make each register's pair contiguous in the stored tile.
 */
template <typename T>
TL_DEVICE int32_t load_pair(const T* p) {
  static_assert(sizeof(T) == 2, "load_pair packs two 16-bit elements");
  int32_t word;
#if defined(TL_SIMULATOR)
  tl_sim::CheckOperandRead(p, sizeof(T), 2);  // checked mode: an operand element nothing wrote (uninit_reads.h)
#endif
  __builtin_memcpy(&word, p, sizeof(word));
  return word;
}

/*! \brief false, but only once the template arguments are known: a static_assert on it fires when (and only when)
 *         the enclosing template is instantiated. */
template <auto...>
inline constexpr bool dependent_false = false;

template <int Slots, typename C_t>
TL_DEVICE void clear_accumulator(C_t* c) {
#pragma unroll
  for (int i = 0; i < Slots; ++i) c[i] = C_t(0);
}

}  // namespace gemm_detail
}  // namespace tl
