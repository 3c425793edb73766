/*!
 * \file tl_templates/musa/gemm_mp31_sqmma.h
 * \brief Block GEMM on mp_31 (MTT S5000) with SQMMA (`__musa_sqmma_m{M}n{N}_mma`), the asynchronous MMA of a
 *        squad (4 warps = 128 threads) reading both operands from shared memory through descriptors.
 *
 *   template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum,
 *             class A_t, class B_t, class C_t>
 *   __device__ void tl::gemm_ss_mp31_sqmma(const A_t* A_smem, const B_t* B_smem, C_t* C_frag);
 *   // Same, but returns right after issuing (one committed group, see below); the caller must call
 *   // tl::sqmma_wait<0>() before reading C_frag or overwriting A_smem / B_smem:
 *   __device__ void tl::gemm_ss_mp31_sqmma_nowait<...same parameters...>(A_smem, B_smem, C_frag);
 *   template <int Pending> __device__ void tl::sqmma_wait();  // at most Pending (0..2) committed groups in flight
 *   // Operands in the SQMMA swizzled layout (tilelang_musa.layout.make_sqmma_swizzled_layout), see below:
 *   template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum,
 *             int ContA, int SwzA, int ContB, int SwzB, class A_t, class B_t, class C_t>
 *   __device__ void tl::gemm_ss_mp31_sqmma_swizzled(const A_t* A_smem, const B_t* B_smem, C_t* C_frag);
 *   __device__ void tl::gemm_ss_mp31_sqmma_swizzled_nowait<...same parameters...>(A_smem, B_smem, C_frag);
 *   // Each takes an optional last argument `int first` (default 0): the first thread of a gemm run by part of
 *   // the block (a multiple of 128), from which its threads are numbered.
 *
 * C (M x N) += A (M x K) * B (K x N); with ClearAccum, C = A * B (scaleD = 1 on each atom's first k step, so
 * C_frag's old contents are never read). A is stored M x K row-major (K-major), or K x M if TransA (M-major); B is
 * K x N row-major (N-major), or N x K if TransB (K-major). A_t = B_t = half_t or bfloat16_t, C_t = float.
 * Shared memory: both tiles dense (leading dimension = stored row length) in the dynamic shared buffer, with NO
 * swizzle (descriptor swizzle granularity 0): the compiler must place them unswizzled. The descriptor's leading
 * stride is the stored row length in bytes, which must therefore be a power of two from 8 to 256 bytes (4 to 128
 * 16-bit elements; static_asserted), and each tile must start 16-byte aligned (the descriptor's start alignment).
 * Addressing model: MUSA_LAYOUTS.md section 3 (K-major addr(r, k) = S + r * LS + k * 2, MN-major S + r * 2 + k * LS).
 * Threads: the block must have exactly GM * GN * 128 threads, all calling with the same arguments. Squad
 * g = threadIdx.x / 128 = gm + GM * gn owns the (M/GM) x (N/GN) sub-tile (gm, gn) as atoms_m x atoms_n atoms of
 * the instruction SqmmaAtom<M/GM, N/GN> picks: the first of m128n128, m128n64, m64n128, m128n32, m64n64, m32n128,
 * m64n32, m32n64, m64n16, m32n32, m16n64 (fewest instructions, then the larger m) whose m and n divide the
 * sub-tile. Each instruction takes k = 64, 32 or 16, the largest dividing K (swizzled: see below). C_frag is the
 * thread's accumulator, (M/GM) * (N/GN) / 128 floats in the slot order of make_gemm_accumulator_fragment(
 * "mp_31.sqmma.m<m>n<n>", M, N, GM, GN) (tilelang_musa/layout/mma_layouts.py), slot (ai * atoms_n + aj) *
 * (m * n / 128) + v.
 * Swizzled operands: each stored tile (A: M x K or K x M, B: K x N or N x K) is held in column blocks of ContX
 * elements along its stored rows (block b = columns [b * ContX, (b + 1) * ContX) of every row, dense with row pitch
 * ContX * sizeof(T), blocks one after another), then xor-swizzled with granularity SwzX bytes (0, 16, 32 or 64) on
 * the byte address; the tile must start at a multiple of the swizzle period (4096 B for 16, 2048 B for 32, 1024 B
 * for 64), so that the hardware's swizzle of the absolute address equals the layout's. Each instruction operand
 * lies in one column block: the descriptor starts at the block's unswizzled address of the operand's first element
 * and strides by the block pitch. So ContX must be a multiple of an MN-major operand's atom m / n (M-major A,
 * N-major B) and of a K-major operand's k step; k is the largest of 64, 32, 16 dividing K and each K-major ContX.
 * The default continuity of make_sqmma_swizzled_layout (min(stored row, 256 B)) always satisfies this.
 * The dense templates above are the special case ContX = stored row length, SwzX = 0.
 * Completion: `__musa_tce_commit_group()` + `__musa_tce_wait_group(n)` (mcc >= 4.3.6); define
 * TL_MUSA_SQMMA_WAIT_ALL to use the older `__musa_sqmma_wait()` (which waits for everything) instead.
 * The caller synchronises: the shared tiles must be complete (e.g. __syncthreads) before the call, and must not
 * be overwritten until the squad has waited.
 */
#pragma once

#include "common.h"
#include "gemm_common.h"

namespace tl {

/*! \brief Wait until at most `Pending` of the calling thread's committed SQMMA groups are in flight. */
template <int Pending>
TL_DEVICE void sqmma_wait() {
  static_assert(Pending >= 0 && Pending <= 2, "tl::sqmma_wait: at most 2 groups can stay in flight");
#if defined(__MUSA_ARCH__)  // device pass only (gemm_common.h)
#if __MUSA_ARCH__ < 310
  static_assert(gemm_detail::dependent_false<Pending>, "tl::sqmma_wait: SQMMA needs mp_31 or newer");
#elif defined(TL_MUSA_SQMMA_WAIT_ALL)
  __musa_sqmma_wait();
#else
  __musa_tce_wait_group(Pending);
#endif
#endif
}

namespace gemm_detail {

/*! \brief The SQMMA shape of a TileM x TileN squad tile (the order of the file comment). */
template <int TileM, int TileN>
struct SqmmaAtom {
 private:
  static constexpr int kShapes[11][2] = {{128, 128}, {128, 64}, {64, 128}, {128, 32}, {64, 64}, {32, 128},
                                         {64, 32},   {32, 64},  {64, 16},  {32, 32},  {16, 64}};
  static TL_CONSTEXPR int pick() {
    for (int i = 0; i < 11; ++i)
      if (TileM % kShapes[i][0] == 0 && TileN % kShapes[i][1] == 0) return i;
    return -1;
  }
  static constexpr int kIndex = pick();
  static_assert(kIndex >= 0, "tl::gemm_ss_mp31_sqmma: no SQMMA shape divides the squad tile (M/GM) x (N/GN); "
                             "M/GM and N/GN must be multiples of 16, with one of the shapes of the file comment");

 public:
  static constexpr int m = kShapes[kIndex < 0 ? 0 : kIndex][0];
  static constexpr int n = kShapes[kIndex < 0 ? 0 : kIndex][1];
};

TL_CONSTEXPR int log2_exact(int x) { return x <= 1 ? 0 : 1 + log2_exact(x / 2); }

/*! \brief The k step: the largest of 64, 32, 16 dividing K and the continuity of each K-major operand (a k step
 *         must not straddle two column blocks); 16 when none does (the static_asserts then name the rule). */
TL_CONSTEXPR int sqmma_k(int K, int cont_a_k, int cont_b_k) {
  for (int k = 64; k >= 16; k /= 2)
    if (K % k == 0 && cont_a_k % k == 0 && cont_b_k % k == 0) return k;
  return 16;
}

/*!
 * \brief How an operand tile of Rows x Cols stored elements (the logical tile, maybe transposed) is held: column
 *        blocks of Cont elements with pitch Cont * Elem bytes, swizzle granularity Swz bytes.
 */
template <int Rows, int Cols, int Cont, int Swz, int Elem>
struct SqmmaStorage {
  static_assert(Cont > 0 && Cols % Cont == 0,
                "tl::gemm_ss_mp31_sqmma_swizzled: an operand's continuity must divide its stored row length");
  static constexpr int kPitch = Cont * Elem;
  static_assert(kPitch >= 8 && kPitch <= 256 && (kPitch & (kPitch - 1)) == 0,
                "tl::gemm_ss_mp31_sqmma: an operand's row pitch (its stored row length, or the swizzled layout's "
                "continuity, in bytes) must be a power of two from 8 to 256 bytes (the descriptor's leading stride)");
  static_assert(Swz == 0 || Swz == 16 || Swz == 32 || Swz == 64,
                "tl::gemm_ss_mp31_sqmma_swizzled: the swizzle granularity must be 0, 16, 32 or 64 bytes");
  // Descriptor bits [18, 21): LS = 4 << code; bits [21, 23): 0 none, 1 = 16 B, 2 = 32 B, 3 = 64 B.
  static constexpr uint32_t kFormat = (static_cast<uint32_t>(log2_exact(kPitch) - 2) << 18) |
                                      (static_cast<uint32_t>(Swz == 0 ? 0 : log2_exact(Swz) - 3) << 21);

  /*! \brief The unswizzled byte offset of stored element (row, col): its column block, then the row in it. */
  static TL_DEVICE uint32_t offset(int row, int col) {
    return static_cast<uint32_t>((col / Cont) * (Rows * kPitch) + row * kPitch + (col % Cont) * Elem);
  }

  /*! \brief Descriptor of an instruction operand whose first stored element is (row, col) of the tile at `base`. */
  static TL_DEVICE int32_t descriptor(uint32_t base, int row, int col) {
    return static_cast<int32_t>(((base + offset(row, col)) & 0x3ffffu) | kFormat);
  }
};

template <typename T>
TL_DEVICE uint32_t shared_address(const T* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One SQMMA of shape AtomM x AtomN into `acc` (d and c alias, as mutlass's atoms pass them).
template <int AtomM, int AtomN>
TL_DEVICE void sqmma([[maybe_unused]] int32_t* acc, [[maybe_unused]] const int32_t* desc_a,
                     [[maybe_unused]] const int32_t* desc_b, [[maybe_unused]] int tnsp_a,
                     [[maybe_unused]] int tnsp_b, [[maybe_unused]] int scale_d, [[maybe_unused]] int k,
                     [[maybe_unused]] int mma_type) {
#if defined(__MUSA_ARCH__)  // device pass only (gemm_common.h)
#if __MUSA_ARCH__ < 310
  static_assert(dependent_false<AtomM>, "tl::gemm_ss_mp31_sqmma: SQMMA needs mp_31 or newer");
#else
#define TL_SQMMA_SHAPE(MM, NN)                                                                          \
  if constexpr (AtomM == MM && AtomN == NN) {                                                          \
    __musa_sqmma_m##MM##n##NN##_mma(acc, desc_a, desc_b, acc, tnsp_a, tnsp_b, 0, 0, scale_d, 0, k, mma_type); \
    return;                                                                                            \
  }
  TL_SQMMA_SHAPE(16, 64)
  TL_SQMMA_SHAPE(32, 32)
  TL_SQMMA_SHAPE(32, 64)
  TL_SQMMA_SHAPE(32, 128)
  TL_SQMMA_SHAPE(64, 16)
  TL_SQMMA_SHAPE(64, 32)
  TL_SQMMA_SHAPE(64, 64)
  TL_SQMMA_SHAPE(64, 128)
  TL_SQMMA_SHAPE(128, 32)
  TL_SQMMA_SHAPE(128, 64)
  TL_SQMMA_SHAPE(128, 128)
#undef TL_SQMMA_SHAPE
#endif
#endif
}

// Closes the group of SQMMAs this thread issued since the last commit (mcc >= 4.3.6; the wait-all form has none).
TL_DEVICE void sqmma_commit() {
#if defined(__MUSA_ARCH__) && __MUSA_ARCH__ >= 310 && !defined(TL_MUSA_SQMMA_WAIT_ALL)
  __musa_tce_commit_group();
#endif
}

// Issue the squad's SQMMAs and commit them as one group. A is stored (M, K) or (K, M), B (K, N) or (N, K).
template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, int ContA, int SwzA,
          int ContB, int SwzB, class A_t, class B_t, class C_t>
TL_DEVICE void sqmma_issue(const A_t* A_smem, const B_t* B_smem, C_t* C_frag, int first = 0) {
  static_assert(check_16bit_operands<A_t, B_t, C_t>(), "");
  using Atom = SqmmaAtom<M / GM, N / GN>;
  constexpr int e = static_cast<int>(sizeof(A_t));
  using StoreA = SqmmaStorage<TransA ? K : M, TransA ? M : K, ContA, SwzA, e>;
  using StoreB = SqmmaStorage<TransB ? N : K, TransB ? K : N, ContB, SwzB, e>;
  // The k step stays inside a K-major operand's column block (A K-major unless TransA, B K-major if TransB).
  constexpr int kK = sqmma_k(K, TransA ? K : ContA, TransB ? ContB : K);
  static_assert(TransA || ContA % kK == 0,
                "tl::gemm_ss_mp31_sqmma_swizzled: a K-major A's continuity must be a multiple of 16 elements (an "
                "SQMMA k step must not straddle two column blocks)");
  static_assert(!TransB || ContB % kK == 0,
                "tl::gemm_ss_mp31_sqmma_swizzled: a K-major B's continuity must be a multiple of 16 elements (an "
                "SQMMA k step must not straddle two column blocks)");
  // An MN-major operand's atom (m or n contiguous elements) stays inside one column block.
  static_assert(!TransA || ContA % Atom::m == 0,
                "tl::gemm_ss_mp31_sqmma_swizzled: an M-major A's continuity must be a multiple of the SQMMA atom's m "
                "(an instruction operand must not straddle two column blocks)");
  static_assert(TransB || ContB % Atom::n == 0,
                "tl::gemm_ss_mp31_sqmma_swizzled: an N-major B's continuity must be a multiple of the SQMMA atom's n "
                "(an instruction operand must not straddle two column blocks)");
  using Tiling = BlockTiling<M, N, K, GM, GN, 128, Atom::m, Atom::n, kK>;
  constexpr int kTnspA = TransA ? 1 : 0;  // 1: A is M-major
  constexpr int kTnspB = TransB ? 1 : 0;  // 1 - B's major code; 1: B is K-major
  constexpr int kMmaType = Mma16Bit<A_t>::kMmaType;
  const GroupCoord at = group_coord<GM, 128, Tiling::kTileM, Tiling::kTileN, Tiling::kThreads>(first);
  const uint32_t a_base = shared_address(A_smem), b_base = shared_address(B_smem);
  int32_t* acc = reinterpret_cast<int32_t*>(C_frag);  // the built-in takes fp32 accumulators as 32-bit words
#if defined(TL_SIMULATOR)
  // checked mode: an accumulator element nothing wrote, read by the first k step (uninit_reads.h)
  if constexpr (!ClearAccum) tl_sim::CheckAccumulatorRead(C_frag, Tiling::kAccumulatorSlots);
#endif
#pragma unroll 1
  for (int ak = 0; ak < Tiling::kAtomsK; ++ak) {
    const int k0 = ak * kK;
    const int scale_d = ClearAccum && ak == 0 ? 1 : 0;  // 1: D = A * B, dropping C
#pragma unroll
    for (int ai = 0; ai < Tiling::kAtomsM; ++ai) {
      const int m0 = at.row0 + ai * Atom::m;
      const int32_t desc_a = TransA ? StoreA::descriptor(a_base, k0, m0) : StoreA::descriptor(a_base, m0, k0);
#pragma unroll
      for (int aj = 0; aj < Tiling::kAtomsN; ++aj) {
        const int n0 = at.col0 + aj * Atom::n;
        const int32_t desc_b = TransB ? StoreB::descriptor(b_base, n0, k0) : StoreB::descriptor(b_base, k0, n0);
        sqmma<Atom::m, Atom::n>(acc + (ai * Tiling::kAtomsN + aj) * Tiling::kRegsPerAtom, &desc_a, &desc_b, kTnspA,
                                kTnspB, scale_d, kK, kMmaType);
      }
    }
  }
  sqmma_commit();
}

}  // namespace gemm_detail

// Dense unswizzled tiles: one column block spanning the stored row, no swizzle.
template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, class A_t, class B_t,
          class C_t>
TL_DEVICE void gemm_ss_mp31_sqmma_nowait(const A_t* A_smem, const B_t* B_smem, C_t* C_frag, int first = 0) {
  gemm_detail::sqmma_issue<M, N, K, GM, GN, TransA, TransB, ClearAccum, TransA ? M : K, 0, TransB ? K : N, 0>(
      A_smem, B_smem, C_frag, first);
}

template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, class A_t, class B_t,
          class C_t>
TL_DEVICE void gemm_ss_mp31_sqmma(const A_t* A_smem, const B_t* B_smem, C_t* C_frag, int first = 0) {
  gemm_ss_mp31_sqmma_nowait<M, N, K, GM, GN, TransA, TransB, ClearAccum>(A_smem, B_smem, C_frag, first);
  sqmma_wait<0>();
}

template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, int ContA, int SwzA,
          int ContB, int SwzB, class A_t, class B_t, class C_t>
TL_DEVICE void gemm_ss_mp31_sqmma_swizzled_nowait(const A_t* A_smem, const B_t* B_smem, C_t* C_frag, int first = 0) {
  gemm_detail::sqmma_issue<M, N, K, GM, GN, TransA, TransB, ClearAccum, ContA, SwzA, ContB, SwzB>(A_smem, B_smem,
                                                                                                  C_frag, first);
}

template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, int ContA, int SwzA,
          int ContB, int SwzB, class A_t, class B_t, class C_t>
TL_DEVICE void gemm_ss_mp31_sqmma_swizzled(const A_t* A_smem, const B_t* B_smem, C_t* C_frag, int first = 0) {
  gemm_ss_mp31_sqmma_swizzled_nowait<M, N, K, GM, GN, TransA, TransB, ClearAccum, ContA, SwzA, ContB, SwzB>(
      A_smem, B_smem, C_frag, first);
  sqmma_wait<0>();
}

}  // namespace tl
