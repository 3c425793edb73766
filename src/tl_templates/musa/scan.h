/*!
 * \file tl_templates/musa/scan.h
 * \brief Inclusive scans of shared-memory buffers, `tl::Scan1D` and `tl::Scan2D`: T.cumsum (`tl::SumOp`) and
 *        T.cummax (`tl::MaxOp`, NaN loses to a number as in T.reduce_max).
 *
 * Both scan "lines" with the block's first `Threads` threads. A line gets a power-of-two group of threads; each
 * member combines a contiguous chunk, the group turns the chunk totals into exclusive prefixes, and each member
 * then rewrites its chunk. Prefixes inside a 32-thread slice come from xor-shuffle butterflies (lane offsets below 32,
 * valid on 32- and 128-lane warps alike); a group wider than 32 threads also combines the totals of its earlier
 * slices through a small shared array between two __syncthreads(). 16-bit floats are scanned in float and
 * rounded once per output element.
 *
 * Contract of `run` (both templates):
 * - Every thread of the block calls it with the same arguments: threads beyond the first `Threads` do no work
 *   but take part in the shuffles and barriers.
 * - `src` and `dst` point to shared memory and are the same buffer (in place) or disjoint.
 * - It does not order `src`/`dst` against other code: as for any shared-memory producer and consumer, put a
 *   __syncthreads() between writes of `src` by other threads and the call, and between the call and reads of
 *   `dst` by other threads.
 */
#pragma once

#include "common.h"
#include "reduce.h"


namespace tl {

namespace detail {

// Scans of 16-bit floats run in float (exact for max, one rounding per output for sums).
template <typename T>
using scan_acc_t = typename std::conditional<is_half_like<T>::value, float, T>::type;

/*! \brief The value that leaves every operand unchanged under Op: 0 for sums, the lowest value for maxima. */
template <typename Op, typename Acc>
TL_DEVICE Acc scan_identity() {
  if constexpr (std::is_same<Op, MaxOp>::value) {
    if constexpr (std::is_floating_point<Acc>::value) {
      return static_cast<Acc>(-INFINITY);
    } else if constexpr (std::is_signed<Acc>::value) {
      using U = typename std::make_unsigned<Acc>::type;
      return static_cast<Acc>(-static_cast<Acc>(static_cast<U>(~U(0)) >> 1) - 1);
    } else {
      return Acc(0);
    }
  } else {
    static_assert(std::is_same<Op, SumOp>::value, "tl::Scan: Op must be tl::SumOp or tl::MaxOp");
    return Acc(0);
  }
}

/*!
 * \brief Threads per line: the largest power of two g with g * lines <= Threads (all lines in one round when
 *        they fit), at least 1, and at most the line length rounded up to a power of two.
 */
template <int Threads>
TL_DEVICE int scan_group_size(int lines, int length) {
  int group = 1;
  while (group * 2 <= Threads && group * 2 * lines <= Threads && group < length) group *= 2;
  return group;
}

/*!
 * \brief Op over `value` of the members of this thread's group with a smaller rank (an exclusive prefix; the
 *        identity for rank 0). `group` is a power of two, the same for all threads of the block; `slice_totals`
 *        is shared scratch of 32 elements, used when the group spans several 32-thread slices.
 */
template <int Threads, typename Op, typename Acc>
TL_DEVICE Acc group_exclusive_prefix(Acc value, int group, int rank, Acc* slice_totals) {
  constexpr int kSlice = kMaxShuffleOffset;
  Acc before = scan_identity<Op, Acc>(), total = value;
  // Butterfly: at step `offset` each lane's block of `offset` lanes meets its partner block; the upper block
  // combines the lower block's total into its prefix, and both carry on with the merged total. Op is
  // commutative bit for bit, so both partners hold the same total.
  const int width = group < kSlice ? group : kSlice;
  for (int offset = 1; offset < width; offset *= 2) {
    const Acc other = shfl_xor_bits(total, offset, kArchWarpSize);
    if (rank & offset) before = Op()(before, other);
    total = Op()(total, other);
  }
  if (group > kSlice) {
    const int tid = static_cast<int>(threadIdx.x);
    const int groups = Threads / group;
    __syncthreads();  // readers of the previous round's totals are done
    if (tid < groups * group && tid % kSlice == 0) slice_totals[tid / kSlice] = total;
    __syncthreads();
    if (tid < groups * group) {
      for (int slice = (tid - rank) / kSlice; slice < tid / kSlice; ++slice) {
        before = Op()(before, slice_totals[slice]);
      }
    }
  }
  return before;
}

/*!
 * \brief Inclusive scan of `lines` lines of `length` elements each: element k of line l is at
 *        l * line_stride + k * elem_stride, and a reverse scan runs from the line's end.
 */
template <int Threads, typename Op, bool Reverse, typename T>
TL_DEVICE void scan_lines(const T* src, T* dst, int lines, int length, int line_stride, int elem_stride,
                          int dst_line_stride, int dst_elem_stride) {
  static_assert(Threads >= 1 && Threads <= 1024, "tl::Scan: Threads must be in [1, 1024]");
  using Acc = scan_acc_t<T>;
  __shared__ Acc slice_totals[1024 / kMaxShuffleOffset];
  if (lines <= 0 || length <= 0) return;

  const int tid = static_cast<int>(threadIdx.x);
  const int group = scan_group_size<Threads>(lines, length);
  const int groups = Threads / group;
  const int rounds = (lines + groups - 1) / groups;
  const int rank = tid % group;
  const int chunk = (length + group - 1) / group;
  const int begin = rank * chunk < length ? rank * chunk : length;
  const int end = begin + chunk < length ? begin + chunk : length;

  for (int round = 0; round < rounds; ++round) {
    const int line = round * groups + tid / group;
    const bool active = tid < groups * group && line < lines;
    const int base = line * line_stride;
    const int dst_base = line * dst_line_stride;
    Acc chunk_total = scan_identity<Op, Acc>();
    if (active) {
      for (int p = begin; p < end; ++p) {
        const int k = Reverse ? length - 1 - p : p;
        chunk_total = Op()(chunk_total, cast<Acc>(src[base + k * elem_stride]));
      }
    }
    Acc running = group_exclusive_prefix<Threads, Op>(chunk_total, group, rank, slice_totals);
    if (active) {
      for (int p = begin; p < end; ++p) {
        const int k = Reverse ? length - 1 - p : p;
        running = Op()(running, cast<Acc>(src[base + k * elem_stride]));  // read before the write: src may be dst
        dst[dst_base + k * dst_elem_stride] = cast<T>(running);
      }
    }
  }
}

}  // namespace detail

/*!
 * \brief dst[i] = src[0] op ... op src[i] for i < N (Reverse: dst[i] = src[i] op ... op src[N - 1]).
 * Example: tl::Scan1D<128, tl::SumOp>::run(x_shared, x_shared, 1000);  // in-place prefix sums
 */
template <int Threads, typename Op, bool Reverse = false>
struct Scan1D {
  template <typename T>
  static TL_DEVICE void run(const T* src, T* dst, int N) {
    detail::scan_lines<Threads, Op, Reverse>(src, dst, 1, N, 0, 1, 0, 1);
  }
};

/*!
 * \brief Scans of a row-major H x W buffer along `Axis`: 0 runs down each column (dst[i][j] = src[0][j] op ...
 *        op src[i][j]), 1 along each row; Reverse scans from the far end.
 * Example: tl::Scan2D<256, 1, tl::MaxOp, true>::run(a_shared, b_shared, 64, 33);  // suffix maxima of rows
 */
template <int Threads, int Axis, typename Op, bool Reverse = false>
struct Scan2D {
  static_assert(Axis == 0 || Axis == 1, "tl::Scan2D: Axis must be 0 or 1");
  template <typename T>
  static TL_DEVICE void run(const T* src, T* dst, int H, int W) {
    run_pitched(src, W, dst, W, H, W);
  }
  /*! \brief The same over an H x W box of tiles whose rows are `src_pitch` / `dst_pitch` elements apart
   *         (`A_shared[r0:r1, c0:c1]`: src points at its first element). */
  template <typename T>
  static TL_DEVICE void run_pitched(const T* src, int src_pitch, T* dst, int dst_pitch, int H, int W) {
    if constexpr (Axis == 0) {
      detail::scan_lines<Threads, Op, Reverse>(src, dst, W, H, 1, src_pitch, 1, dst_pitch);
    } else {
      detail::scan_lines<Threads, Op, Reverse>(src, dst, H, W, src_pitch, 1, dst_pitch, 1);
    }
  }
};

}  // namespace tl
