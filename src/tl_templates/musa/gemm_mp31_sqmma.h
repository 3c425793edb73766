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
 * sub-tile. Each instruction takes k = 64, 32 or 16, the largest dividing K. C_frag is the thread's accumulator,
 * (M/GM) * (N/GN) / 128 floats in the slot order of make_gemm_accumulator_fragment("mp_31.sqmma.m<m>n<n>", M, N,
 * GM, GN) (tilelang_musa/layout/mma_layouts.py), slot (ai * atoms_n + aj) * (m * n / 128) + v.
 * Completion: `__musa_tce_commit_group()` + `__musa_tce_wait_group(n)` (mcc >= 4.3.6); define
 * TL_MUSA_SQMMA_WAIT_ALL to use the older `__musa_sqmma_wait()` (which waits for everything) instead.
 * The caller synchronises: the shared tiles must be complete (e.g. __syncthreads) before the call, and must not
 * be overwritten until the squad has waited.
 */
#pragma once

#include "common.h"
#include "gemm_common.h"

#if defined(__MUSA_ARCH__) && __MUSA_ARCH__ >= 310

namespace tl {

/*! \brief Wait until at most `Pending` of the calling thread's committed SQMMA groups are in flight. */
template <int Pending>
TL_DEVICE void sqmma_wait() {
  static_assert(Pending >= 0 && Pending <= 2, "tl::sqmma_wait: at most 2 groups can stay in flight");
#if defined(TL_MUSA_SQMMA_WAIT_ALL)
  __musa_sqmma_wait();
#else
  __musa_tce_wait_group(Pending);
#endif
}

namespace gemm_detail {

/*! \brief The SQMMA shape of a TileM x TileN squad tile (the order of the file comment). */
template <int TileM, int TileN>
struct SqmmaAtom {
 private:
  static constexpr int kShapes[11][2] = {{128, 128}, {128, 64}, {64, 128}, {128, 32}, {64, 64}, {32, 128},
                                         {64, 32},   {32, 64},  {64, 16},  {32, 32},  {16, 64}};
  static constexpr int pick() {
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

constexpr int sqmma_k(int K) { return K % 64 == 0 ? 64 : K % 32 == 0 ? 32 : 16; }

constexpr int log2_exact(int x) { return x <= 1 ? 0 : 1 + log2_exact(x / 2); }

/*! \brief Leading-stride code (LS = 4 << code bytes) of a stored row of `Bytes`; static_asserts it is encodable. */
template <int Bytes>
constexpr uint32_t sqmma_stride_code() {
  static_assert(Bytes >= 8 && Bytes <= 256 && (Bytes & (Bytes - 1)) == 0,
                "tl::gemm_ss_mp31_sqmma: an unswizzled operand's stored row length (the leading dimension) must be "
                "a power of two from 8 to 256 bytes (the descriptor's leading stride)");
  return static_cast<uint32_t>(log2_exact(Bytes) - 2);
}

/*! \brief Descriptor: start byte address bits [0, 18), leading-stride code [18, 21), swizzle 0 (none). */
template <uint32_t StrideCode>
TL_DEVICE int32_t sqmma_descriptor(uint32_t start) {
  return static_cast<int32_t>((start & 0x3ffffu) | (StrideCode << 18));
}

template <typename T>
TL_DEVICE uint32_t shared_address(const T* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One SQMMA of shape AtomM x AtomN into `acc` (d and c alias, as mutlass's atoms pass them).
template <int AtomM, int AtomN>
TL_DEVICE void sqmma(int32_t* acc, const int32_t* desc_a, const int32_t* desc_b, int tnsp_a, int tnsp_b,
                     int scale_d, int k, int mma_type) {
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
}

// Issue the squad's SQMMAs and commit them as one group.
template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, class A_t, class B_t,
          class C_t>
TL_DEVICE void sqmma_issue(const A_t* A_smem, const B_t* B_smem, C_t* C_frag) {
  static_assert(check_16bit_operands<A_t, B_t, C_t>(), "");
  using Atom = SqmmaAtom<M / GM, N / GN>;
  constexpr int kK = sqmma_k(K);
  using Tiling = BlockTiling<M, N, K, GM, GN, 128, Atom::m, Atom::n, kK>;
  constexpr int e = static_cast<int>(sizeof(A_t));
  // Stored row lengths (leading strides): A is (M, K) or (K, M), B is (K, N) or (N, K).
  constexpr uint32_t kCodeA = sqmma_stride_code<(TransA ? M : K) * e>();
  constexpr uint32_t kCodeB = sqmma_stride_code<(TransB ? K : N) * e>();
  constexpr int kTnspA = TransA ? 1 : 0;  // 1: A is M-major
  constexpr int kTnspB = TransB ? 1 : 0;  // 1 - B's major code; 1: B is K-major
  constexpr int kMmaType = Mma16Bit<A_t>::kMmaType;
  const GroupCoord at = group_coord<GM, 128, Tiling::kTileM, Tiling::kTileN>();
  const uint32_t a_base = shared_address(A_smem), b_base = shared_address(B_smem);
  int32_t* acc = reinterpret_cast<int32_t*>(C_frag);  // the built-in takes fp32 accumulators as 32-bit words
#pragma unroll 1
  for (int ak = 0; ak < Tiling::kAtomsK; ++ak) {
    const int k0 = ak * kK;
    const int scale_d = ClearAccum && ak == 0 ? 1 : 0;  // 1: D = A * B, dropping C
#pragma unroll
    for (int ai = 0; ai < Tiling::kAtomsM; ++ai) {
      const int m0 = at.row0 + ai * Atom::m;
      const int32_t desc_a = sqmma_descriptor<kCodeA>(a_base + (TransA ? k0 * M + m0 : m0 * K + k0) * e);
#pragma unroll
      for (int aj = 0; aj < Tiling::kAtomsN; ++aj) {
        const int n0 = at.col0 + aj * Atom::n;
        const int32_t desc_b = sqmma_descriptor<kCodeB>(b_base + (TransB ? n0 * K + k0 : k0 * N + n0) * e);
        sqmma<Atom::m, Atom::n>(acc + (ai * Tiling::kAtomsN + aj) * Tiling::kRegsPerAtom, &desc_a, &desc_b, kTnspA,
                                kTnspB, scale_d, kK, kMmaType);
      }
    }
  }
#if !defined(TL_MUSA_SQMMA_WAIT_ALL)
  __musa_tce_commit_group();
#endif
}

}  // namespace gemm_detail

template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, class A_t, class B_t,
          class C_t>
TL_DEVICE void gemm_ss_mp31_sqmma_nowait(const A_t* A_smem, const B_t* B_smem, C_t* C_frag) {
  gemm_detail::sqmma_issue<M, N, K, GM, GN, TransA, TransB, ClearAccum>(A_smem, B_smem, C_frag);
}

template <int M, int N, int K, int GM, int GN, bool TransA, bool TransB, bool ClearAccum, class A_t, class B_t,
          class C_t>
TL_DEVICE void gemm_ss_mp31_sqmma(const A_t* A_smem, const B_t* B_smem, C_t* C_frag) {
  gemm_detail::sqmma_issue<M, N, K, GM, GN, TransA, TransB, ClearAccum>(A_smem, B_smem, C_frag);
  sqmma_wait<0>();
}

}  // namespace tl

#endif  // __MUSA_ARCH__ >= 310
