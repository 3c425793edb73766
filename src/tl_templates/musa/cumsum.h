/*!
 * \file tl_templates/musa/cumsum.h
 * \brief Inclusive prefix sums of T.cumsum over shared-memory buffers: `tl::CumSum1D` and `tl::CumSum2D`.
 *
 * Both scan "lines" with the block's first `Threads` threads. A line gets a power-of-two group of threads; each
 * member sums a contiguous chunk, the group turns the chunk sums into exclusive prefixes, and each member then
 * rewrites its chunk. Prefixes inside a 32-thread slice come from xor-shuffle butterflies (lane offsets below 32,
 * valid on 32- and 128-lane warps alike); a group wider than 32 threads also adds the totals of its earlier
 * slices through a small shared array between two __syncthreads(). 16-bit floats accumulate in float and are
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

template <typename T>
using cumsum_acc_t = typename std::conditional<is_half_like<T>::value, float, T>::type;

/*!
 * \brief Threads per line: the largest power of two g with g * lines <= Threads (all lines in one round when
 *        they fit), at least 1, and at most the line length rounded up to a power of two.
 */
template <int Threads>
TL_DEVICE int cumsum_group_size(int lines, int length) {
  int group = 1;
  while (group * 2 <= Threads && group * 2 * lines <= Threads && group < length) group *= 2;
  return group;
}

/*!
 * \brief The sum of `value` over the members of this thread's group with a smaller rank (an exclusive prefix).
 *        `group` is a power of two, the same for all threads of the block; `slice_totals` is shared scratch of
 *        32 elements, used when the group spans several 32-thread slices.
 */
template <int Threads, typename Acc>
TL_DEVICE Acc group_exclusive_prefix(Acc value, int group, int rank, Acc* slice_totals) {
  constexpr int kSlice = kMaxShuffleOffset;
  Acc before = Acc(0), total = value;
  // Butterfly: at step `offset` each lane's block of `offset` lanes meets its partner block; the upper block adds
  // the lower block's total to its prefix, and both carry on with the merged total.
  const int width = group < kSlice ? group : kSlice;
  for (int offset = 1; offset < width; offset *= 2) {
    const Acc other = shfl_xor_bits(total, offset, kArchWarpSize);
    if (rank & offset) before += other;
    total += other;
  }
  if (group > kSlice) {
    const int tid = static_cast<int>(threadIdx.x);
    const int groups = Threads / group;
    __syncthreads();  // readers of the previous round's totals are done
    if (tid < groups * group && tid % kSlice == 0) slice_totals[tid / kSlice] = total;
    __syncthreads();
    if (tid < groups * group) {
      for (int slice = (tid - rank) / kSlice; slice < tid / kSlice; ++slice) before += slice_totals[slice];
    }
  }
  return before;
}

/*!
 * \brief Inclusive scan of `lines` lines of `length` elements each: element k of line l is at
 *        l * line_stride + k * elem_stride, and a reverse scan runs from the line's end.
 */
template <int Threads, bool Reverse, typename T>
TL_DEVICE void scan_lines(const T* src, T* dst, int lines, int length, int line_stride, int elem_stride) {
  static_assert(Threads >= 1 && Threads <= 1024, "tl::CumSum: Threads must be in [1, 1024]");
  using Acc = cumsum_acc_t<T>;
  __shared__ Acc slice_totals[1024 / kMaxShuffleOffset];
  if (lines <= 0 || length <= 0) return;

  const int tid = static_cast<int>(threadIdx.x);
  const int group = cumsum_group_size<Threads>(lines, length);
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
    Acc sum = Acc(0);
    if (active) {
      for (int p = begin; p < end; ++p) {
        const int k = Reverse ? length - 1 - p : p;
        sum += cast<Acc>(src[base + k * elem_stride]);
      }
    }
    Acc running = group_exclusive_prefix<Threads>(sum, group, rank, slice_totals);
    if (active) {
      for (int p = begin; p < end; ++p) {
        const int i = base + (Reverse ? length - 1 - p : p) * elem_stride;
        running += cast<Acc>(src[i]);  // read before the write: src may be dst
        dst[i] = cast<T>(running);
      }
    }
  }
}

}  // namespace detail

/*!
 * \brief dst[i] = src[0] + ... + src[i] for i < N (Reverse: dst[i] = src[i] + ... + src[N - 1]).
 * Example: tl::CumSum1D<128>::run(x_shared, x_shared, 1000);  // in place
 */
template <int Threads, bool Reverse = false>
struct CumSum1D {
  template <typename T>
  static TL_DEVICE void run(const T* src, T* dst, int N) {
    detail::scan_lines<Threads, Reverse>(src, dst, 1, N, 0, 1);
  }
};

/*!
 * \brief Prefix sums of a row-major H x W buffer along `Axis`: 0 runs down each column (dst[i][j] = sum of
 *        src[0..i][j]), 1 along each row (dst[i][j] = sum of src[i][0..j]); Reverse sums from the far end.
 * Example: tl::CumSum2D<256, 1, true>::run(a_shared, b_shared, 64, 33);
 */
template <int Threads, int Axis = 0, bool Reverse = false>
struct CumSum2D {
  static_assert(Axis == 0 || Axis == 1, "tl::CumSum2D: Axis must be 0 or 1");
  template <typename T>
  static TL_DEVICE void run(const T* src, T* dst, int H, int W) {
    if constexpr (Axis == 0) {
      detail::scan_lines<Threads, Reverse>(src, dst, W, H, 1, W);
    } else {
      detail::scan_lines<Threads, Reverse>(src, dst, H, W, W, 1);
    }
  }
};

}  // namespace tl
