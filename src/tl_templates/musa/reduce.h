/*!
 * \file tl_templates/musa/reduce.h
 * \brief Cross-thread reductions: the combine functors of T.reduce_* and `tl::AllReduce`, which combines one value
 *        per thread over a strided group of threads of the block and hands the result to every member.
 *
 * Functors (`tl::SumOp`, `MaxOp`, `MinOp`, `AbsSumOp`, `AbsMaxOp`, `BitAndOp`, `BitOrOp`, `BitXorOp`) work for
 * float, double, half_t, bfloat16_t and the integer types, and are commutative bit for bit, so both sides of a
 * butterfly exchange compute the same value and every member of a group ends with identical bits.
 *
 * Warp exchanges use only xor shuffles with lane offsets below 32 and full masks: on mp_22's 128-lane warps the
 * behaviour of wider shuffles is unverified (MUSA_FACTS.md), so offsets of 32 and beyond go through shared memory
 * on both warp sizes.
 */
#pragma once

#include "common.h"

namespace tl {

namespace detail {

// The warp width of the architecture being compiled. mcc's host pass has no __MUSA_ARCH__ (and runs no device
// code); 32 keeps it compiling.
#if defined(__MUSA_ARCH__) && __MUSA_ARCH__ < 300
constexpr int kArchWarpSize = 128;
#else
constexpr int kArchWarpSize = 32;
#endif

// Lane offsets below this are exchanged with shuffles; larger ones through shared memory (see the file comment).
constexpr int kMaxShuffleOffset = 32;

constexpr unsigned kFullMask = 0xffffffffu;

TL_CONSTEXPR bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

template <typename T>
struct is_float_like
    : std::integral_constant<bool, std::is_floating_point<T>::value || is_half_like<T>::value> {};

// Unsigned integer with the size of T, for bit-level operations on floating-point values.
template <typename T>
using bits_t = typename std::conditional<
    sizeof(T) == 1, uint8_t,
    typename std::conditional<sizeof(T) == 2, uint16_t,
                              typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type>::type>::type;

// Type in which comparisons of T are exact: 16-bit floats compare through float.
template <typename T>
using compare_t = typename std::conditional<is_half_like<T>::value, float, T>::type;

/*!
 * \brief __shfl_xor_sync on the bits of any trivially copyable T of at most 8 bytes. The 32-bit shuffle exists
 *        for every toolchain (half and bfloat16 overloads vary), and moving raw bits never rounds.
 */
template <typename T>
TL_DEVICE T shfl_xor_bits(const T& value, int lane_mask, int width) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                "tl::AllReduce exchanges trivially copyable values of at most 8 bytes");
  if constexpr (sizeof(T) <= 4) {
    unsigned int word = 0;
    __builtin_memcpy(&word, &value, sizeof(T));
    word = __shfl_xor_sync(kFullMask, word, lane_mask, width);
    T out;
    __builtin_memcpy(&out, &word, sizeof(T));
    return out;
  } else {
    unsigned int words[2] = {0u, 0u};
    __builtin_memcpy(words, &value, sizeof(T));
    words[0] = __shfl_xor_sync(kFullMask, words[0], lane_mask, width);
    words[1] = __shfl_xor_sync(kFullMask, words[1], lane_mask, width);
    T out;
    __builtin_memcpy(&out, words, sizeof(T));
    return out;
  }
}

/*!
 * \brief values[b] = op(values[b], values[b] of lane ^ offset) for b < Batch, for offset = kFirst, then doubling
 *        while below kLimit (kAscending) or halving while above it: the xor butterfly of AllReduce and WarpReduce.
 *        The simulator runs the whole butterfly as one rendezvous of the warp, with the same operands in the same
 *        order (sim/warp.h, XorButterfly), outside checked mode and profiling.
 */
template <class Op, int kFirst, int kLimit, bool kAscending, int kWidth, int Batch, typename T>
TL_DEVICE void xor_butterfly(T* values) {
#if defined(TL_SIMULATOR)
  if (tl_sim::RunXorButterfly<Op, T, Batch, kFirst, kLimit, kAscending, kWidth>(values, __FILE__, __LINE__)) return;
#endif
  const Op op{};
#pragma unroll
  for (int offset = kFirst; kAscending ? offset < kLimit : offset > kLimit;
       offset = kAscending ? offset * 2 : offset / 2) {
#pragma unroll
    for (int b = 0; b < Batch; ++b) values[b] = op(values[b], shfl_xor_bits(values[b], offset, kWidth));
  }
}

/*! \brief |x|; for floating point the sign bit is cleared (exact, and NaN stays NaN). */
template <typename T>
TL_DEVICE T abs_value(T x) {
  if constexpr (is_float_like<T>::value) {
    using B = bits_t<T>;
    return bit_cast<T>(static_cast<B>(bit_cast<B>(x) & static_cast<B>(~(B{1} << (8 * sizeof(T) - 1)))));
  } else if constexpr (std::is_signed<T>::value) {
    return x < 0 ? static_cast<T>(-x) : x;
  } else {
    return x;
  }
}

/*! \brief max (kMax) or min of two values where a NaN operand wins (T.reduce_max(..., nan_propagate=True)). */
template <bool kMax, typename T>
TL_DEVICE T extremum_nan(T a, T b) {
  if constexpr (is_float_like<T>::value) {
    using C = compare_t<T>;
    if (cast<C>(a) != cast<C>(a)) return a;
    if (cast<C>(b) != cast<C>(b)) return b;
  }
  return extremum<kMax>(a, b);
}

/*! \brief A bitwise operation (kOp: '&', '|', '^'); floating-point operands are combined through their bits. */
template <char kOp, typename T>
TL_DEVICE T bitwise(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    return static_cast<T>(kOp == '&' ? (a & b) : kOp == '|' ? (a | b) : (a ^ b));
  } else {
    using B = bits_t<T>;
    const B x = bit_cast<B>(a), y = bit_cast<B>(b);
    return bit_cast<T>(static_cast<B>(kOp == '&' ? (x & y) : kOp == '|' ? (x | y) : (x ^ y)));
  }
}

}  // namespace detail

// ---- combine functors ----------------------------------------------------------------------------

/*! \brief a + b, rounded to T (16-bit floats add in float and round once, as their own + does). */
struct SumOp {
  template <typename T>
  TL_DEVICE T operator()(T a, T b) const {
    if constexpr (detail::is_half_like<T>::value) {
      return cast<T>(cast<float>(a) + cast<float>(b));
    } else {
      return static_cast<T>(a + b);
    }
  }
};

/*! \brief a * b, rounded to T (16-bit floats multiply in float and round once, as their own * does). */
struct ProdOp {
  template <typename T>
  TL_DEVICE T operator()(T a, T b) const {
    if constexpr (detail::is_half_like<T>::value) {
      return cast<T>(cast<float>(a) * cast<float>(b));
    } else {
      return static_cast<T>(a * b);
    }
  }
};

/*!
 * \brief The larger (kMax) or smaller operand; -0 is below +0. A NaN operand loses to a number (fmax / fmin), or
 *        with kNan wins (T.reduce_max(..., nan_propagate=True)).
 */
template <bool kMax, bool kNan>
struct ExtremumOp {
  template <typename T>
  TL_DEVICE T operator()(T a, T b) const {
    if constexpr (kNan) {
      return detail::extremum_nan<kMax>(a, b);
    } else {
      return detail::extremum<kMax>(a, b);
    }
  }
};
using MaxOp = ExtremumOp<true, false>;
using MinOp = ExtremumOp<false, false>;
using MaxOpNan = ExtremumOp<true, true>;
using MinOpNan = ExtremumOp<false, true>;

/*!
 * \brief Cross-thread combine of T.reduce_abssum: a plain sum. The caller accumulates |x| of its own inputs
 *        before the exchange, so the partials being combined are already non-negative.
 */
struct AbsSumOp {
  template <typename T>
  TL_DEVICE T operator()(T a, T b) const {
    return SumOp()(a, b);
  }
};

/*! \brief max(|a|, |b|); idempotent on partials that already are absolute values, so it also combines them. */
struct AbsMaxOp {
  template <typename T>
  TL_DEVICE T operator()(T a, T b) const {
    return detail::extremum<true>(detail::abs_value(a), detail::abs_value(b));
  }
};

/*! \brief a & b (floating-point values are combined through their bits). */
struct BitAndOp {
  template <typename T>
  TL_DEVICE T operator()(T a, T b) const {
    return detail::bitwise<'&'>(a, b);
  }
};

/*! \brief a | b (floating-point values are combined through their bits). */
struct BitOrOp {
  template <typename T>
  TL_DEVICE T operator()(T a, T b) const {
    return detail::bitwise<'|'>(a, b);
  }
};

/*! \brief a ^ b (floating-point values are combined through their bits). */
struct BitXorOp {
  template <typename T>
  TL_DEVICE T operator()(T a, T b) const {
    return detail::bitwise<'^'>(a, b);
  }
};

// ---- AllReduce -----------------------------------------------------------------------------------

/*!
 * \brief tl::AllReduce over `Batch` values at once, in place: values[b] becomes the combine of values[b] over the
 *        group, for b < Batch (T.reduce_*(..., batch=Batch)). Same groups and contract as tl::AllReduce (below),
 *        except that `red_buf` holds at least blockDim.x * Batch elements; the shuffles of the values interleave and
 *        one pair of barriers serves the whole batch (AllReduce spends a pair on each value).
 */
template <class Op, int Threads, int Scale, int Batch, int WarpSize>
struct BatchAllReduce {
  static_assert(Batch >= 1, "tl::BatchAllReduce: Batch must be at least 1");

  template <class T>
  TL_DEVICE static void run_batch(T* values, T* red_buf) {
    static_assert(detail::is_pow2(Threads), "tl::AllReduce: Threads must be a power of two");
    static_assert(detail::is_pow2(Scale), "tl::AllReduce: Scale must be a power of two");
    static_assert(Threads * Scale <= 1024, "tl::AllReduce: Threads * Scale exceeds the 1024 threads of a block");
    static_assert(WarpSize == 32 || WarpSize == 128, "tl::AllReduce: WarpSize must be 32 or 128");
#if defined(__MUSA_ARCH__)
    static_assert(WarpSize == detail::kArchWarpSize,
                  "tl::AllReduce: WarpSize differs from the warp size of the architecture being compiled");
#endif
    constexpr int kSpan = Threads * Scale;
    constexpr int kShuffleLimit = kSpan < detail::kMaxShuffleOffset ? kSpan : detail::kMaxShuffleOffset;
    detail::xor_butterfly<Op, Scale, kShuffleLimit, true, WarpSize, Batch>(values);
    if constexpr (kSpan > detail::kMaxShuffleOffset) {
      const Op op{};
      constexpr int kStep = Scale > detail::kMaxShuffleOffset ? Scale : detail::kMaxShuffleOffset;
      constexpr int kPartials = kSpan / kStep;
      const int tid = static_cast<int>(threadIdx.x);
      const int threads = static_cast<int>(blockDim.x);
      __syncthreads();  // readers of a previous call sharing red_buf are done
#pragma unroll
      for (int b = 0; b < Batch; ++b) red_buf[b * threads + tid] = values[b];
      __syncthreads();
      const int first = tid - tid % kSpan + tid % kStep;
#pragma unroll
      for (int b = 0; b < Batch; ++b) {
        T value = red_buf[b * threads + first];
#pragma unroll
        for (int q = 1; q < kPartials; ++q) value = op(value, red_buf[b * threads + first + q * kStep]);
        values[b] = value;
      }
    }
  }

  /*!
   * \brief run_batch for a reduction run by `threads` threads of the block (a T.ws region), numbered from 0 by
   *        `tid`, in two halves around the exchange through `red_buf` (at least threads * Batch elements): the
   *        caller puts a barrier over those threads before shuffle_and_store (readers of a previous exchange are
   *        done) and between the halves; __syncthreads would wait for threads that never arrive.
   */
  template <class T>
  TL_DEVICE static void shuffle_and_store(T* values, T* red_buf, int tid, int threads) {
    constexpr int kSpan = Threads * Scale;
    constexpr int kShuffleLimit = kSpan < detail::kMaxShuffleOffset ? kSpan : detail::kMaxShuffleOffset;
    detail::xor_butterfly<Op, Scale, kShuffleLimit, true, WarpSize, Batch>(values);
    if constexpr (kSpan > detail::kMaxShuffleOffset) {
#pragma unroll
      for (int b = 0; b < Batch; ++b) red_buf[b * threads + tid] = values[b];
    }
  }

  template <class T>
  TL_DEVICE static void combine_stored(T* values, const T* red_buf, int tid, int threads) {
    constexpr int kSpan = Threads * Scale;
    if constexpr (kSpan > detail::kMaxShuffleOffset) {
      constexpr int kStep = Scale > detail::kMaxShuffleOffset ? Scale : detail::kMaxShuffleOffset;
      constexpr int kPartials = kSpan / kStep;
      const Op op{};
      const int first = tid - tid % kSpan + tid % kStep;
#pragma unroll
      for (int b = 0; b < Batch; ++b) {
        T value = red_buf[b * threads + first];
#pragma unroll
        for (int q = 1; q < kPartials; ++q) value = op(value, red_buf[b * threads + first + q * kStep]);
        values[b] = value;
      }
    }
  }
};

/*!
 * \brief Combines `value` with Op over `Threads` threads and returns the result to each of them.
 *
 * The members of a group are the threads (by threadIdx.x) base + k * Scale, k = 0 .. Threads - 1, inside each
 * aligned span of Threads * Scale threads; every thread of the block belongs to exactly one group, so one call
 * performs blockDim.x / Threads independent reductions. Within a group every member gets the same bits.
 *
 * - Lane offsets below 32 are xor butterflies over __shfl_xor_sync with a full mask (width WarpSize).
 * - If the span exceeds 32 threads, the partials of each 32-thread slice meet in `red_buf`: one barrier-guarded
 *   write, then every member combines the span / max(Scale, 32) <= 32 partials in one fixed order.
 *
 * Contract:
 * - Every thread of the block calls it, with the same template arguments (full-mask shuffles; __syncthreads()).
 * - blockDim.x is a multiple of Threads * Scale.
 * - `red_buf` is shared memory of at least blockDim.x elements, indexed by threadIdx.x. It is used only when
 *   Threads * Scale > 32 (otherwise it may be null). Back-to-back calls may share it (each call starts with a
 *   barrier); other code that writes it afterwards must __syncthreads() first.
 * - WarpSize is the architecture's warp size (128 on mp_21/22, 32 on mp_31/32).
 *
 * Example (row sums of a 4 x 32 fragment spread over 128 threads, thread = col * 4 + row):
 *   acc = tl::AllReduce<tl::SumOp, 32, 4, 32>(acc, red_buf);
 */
template <class Op, int Threads, int Scale, int WarpSize, class T>
TL_DEVICE T AllReduce(T value, T* red_buf) {
  BatchAllReduce<Op, Threads, Scale, 1, WarpSize>::run_batch(&value, red_buf);
  return value;
}

// ---- WarpReduce ----------------------------------------------------------------------------------

/*!
 * \brief Combines `value` with Op over the 32 lanes of the caller's 32-thread group (threads 32k .. 32k + 31 of
 *        the block) and returns the result to each of them (T.warp_reduce_sum / max / min / bitand / bitor /
 *        bitxor). 32 lanes on both archs: upstream scripts size their work to 32-lane warps, and on mp_22's
 *        128-lane warps the shuffles stay within the offsets below 32 that are known to work (reduce.h's note).
 *
 * Contract: all 32 lanes of the group call it together (full-mask shuffles).
 */
template <class Op, class T>
TL_DEVICE T WarpReduce(T value) {
  detail::xor_butterfly<Op, detail::kMaxShuffleOffset / 2, 0, false, detail::kMaxShuffleOffset, 1>(&value);
  return value;
}

}  // namespace tl
