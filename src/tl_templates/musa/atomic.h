/*!
 * \file tl_templates/musa/atomic.h
 * \brief Atomic read-modify-write for T.atomic_add / T.atomic_max / T.atomic_min / T.atomic_or on global or shared
 *        memory.
 *
 * - `tl::AtomicAdd(addr, val)`, `AtomicMax`, `AtomicMin` and the `...Ret` forms, which return the value `*addr`
 *   held just before the update. `val` is converted to the element type first (tl::cast).
 * - `tl::AtomicOr(addr, val)` (and `AtomicOrRet`) for 32/64-bit integers.
 * - `tl::AtomicAddx2` / `AtomicAddx4` (and `...Ret`) add a vector to consecutive elements; `AtomicAddx2(addr, v0, v1)`
 *   adds two values.
 * Element types: float, double, half_t, bfloat16_t and 32/64-bit integers. All are relaxed, like the device's.
 * - `tl::fp4_e2m1_store(byte, odd, bits)` writes one nibble of a byte of packed FP4 (atomicAnd + atomicOr).
 *
 * The code calls only the CUDA-named atomic built-ins (atomicAdd, atomicMax, atomicMin, atomicOr, atomicCAS)
 * that exist under mcc and in the simulator (the half / bfloat16 pair add: atomicAdd on half2 / __mt_bfloat162).
 * Where no portable built-in exists (floating-point and 16-bit max/min), it loops on atomicCAS over the aligned 32-bit word (or the 8-byte word for 8-byte types) holding the
 * element: 16-bit CAS is not available everywhere.
 */
#pragma once

#include "common.h"
#include "reduce.h"

namespace tl {

/*!
 * \brief Stores E2M1 code `bits` as element `odd` of the byte at `byte`, leaving the other nibble as it is. Two
 *        atomics on the aligned 32-bit word holding the byte (clear the nibble, then set it) touch only this
 *        nibble's bits, so threads storing the two nibbles of one byte (or neighbouring bytes) do not race.
 */
TL_DEVICE void fp4_e2m1_store(uint8_t* byte, uint32_t odd, uint32_t bits) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(byte);
  unsigned int* word = reinterpret_cast<unsigned int*>(address & ~static_cast<uintptr_t>(3));
  const unsigned int shift = static_cast<unsigned int>(address & 3u) * 8u + (odd ? 4u : 0u);  // little-endian
  atomicAnd(word, ~(0xFu << shift));
  atomicOr(word, (bits & 0xFu) << shift);
}

namespace detail {

/*! \brief The 32/64-bit integer type whose atomic built-ins the device library declares for integer T. */
template <typename T>
using atomic_int_t = typename std::conditional<
    sizeof(T) == 4, typename std::conditional<std::is_signed<T>::value, int, unsigned int>::type,
    typename std::conditional<std::is_signed<T>::value, long long, unsigned long long>::type>::type;

template <typename T>
struct is_atomic_element
    : std::integral_constant<bool, std::is_same<T, float>::value || std::is_same<T, double>::value ||
                                       is_half_like<T>::value ||
                                       (std::is_integral<T>::value && (sizeof(T) == 4 || sizeof(T) == 8))> {};

/*! \brief f(old) applied as `Op()(old, operand)`; a functor rather than a lambda keeps device code plain. */
template <class Op, typename T>
struct CombineWith {
  T operand;
  TL_DEVICE T operator()(T old) const { return Op()(old, operand); }
};

/*! \brief Lane-wise SumOp of two tl::vec values. */
template <typename T, int N>
struct AddLanes {
  vec<T, N> operand;
  TL_DEVICE vec<T, N> operator()(const vec<T, N>& old) const {
    vec<T, N> r;
    for (int i = 0; i < N; ++i) r.data[i] = SumOp()(old.data[i], operand.data[i]);
    return r;
  }
};

/*!
 * \brief Atomically replaces *addr by f(*addr) and returns the previous value, with an atomicCAS loop.
 *        A 2-byte T is updated inside its aligned 32-bit word (the neighbouring half is rewritten unchanged, and a
 *        concurrent change to it makes the CAS retry). When f leaves the bits unchanged nothing is written.
 */
template <typename T, typename F>
TL_DEVICE T atomic_update(T* addr, F f) {
  static_assert(std::is_trivially_copyable<T>::value && (sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8),
                "tl atomics: compare-and-swap updates need a 2-, 4- or 8-byte element");
  if constexpr (sizeof(T) == 2) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(addr);
    unsigned int* word = reinterpret_cast<unsigned int*>(address & ~uintptr_t{3});
    const unsigned int shift = static_cast<unsigned int>(address & 2u) * 8u;  // little-endian: high half at +2
    const unsigned int keep = ~(0xffffu << shift);
    unsigned int assumed = *reinterpret_cast<volatile unsigned int*>(word);
    for (;;) {
      const uint16_t old_bits = static_cast<uint16_t>(assumed >> shift);
      const T old = bit_cast<T>(old_bits);
      const uint16_t new_bits = bit_cast<uint16_t>(f(old));
      if (new_bits == old_bits) return old;
      const unsigned int replaced = (assumed & keep) | (static_cast<unsigned int>(new_bits) << shift);
      const unsigned int seen = atomicCAS(word, assumed, replaced);
      if (seen == assumed) return old;
      assumed = seen;
    }
  } else {
    using W = typename std::conditional<sizeof(T) == 4, unsigned int, unsigned long long>::type;
    W* word = reinterpret_cast<W*>(addr);
    W assumed = *reinterpret_cast<volatile W*>(word);
    for (;;) {
      const T old = bit_cast<T>(assumed);
      const W new_bits = bit_cast<W>(f(old));
      if (new_bits == assumed) return old;
      const W seen = atomicCAS(word, assumed, new_bits);
      if (seen == assumed) return old;
      assumed = seen;
    }
  }
}

template <typename T>
TL_DEVICE void check_atomic_element() {
  static_assert(is_atomic_element<T>::value,
                "tl atomics support float, double, half_t, bfloat16_t and 32/64-bit integer elements");
}

/*! \brief Max (kMax) or min of *addr and v, returning the old value. */
template <bool kMax, typename T>
TL_DEVICE T atomic_extremum(T* addr, T v) {
  check_atomic_element<T>();
  if constexpr (std::is_integral<T>::value) {
    using N = atomic_int_t<T>;
    N* p = reinterpret_cast<N*>(addr);
    if constexpr (kMax) {
      return static_cast<T>(atomicMax(p, static_cast<N>(v)));
    } else {
      return static_cast<T>(atomicMin(p, static_cast<N>(v)));
    }
  } else {
    // No portable floating-point or 16-bit built-in: CAS with the reduction's own max/min (fmax-style NaN rule).
    using Op = typename std::conditional<kMax, MaxOp, MinOp>::type;
    return atomic_update(addr, CombineWith<Op, T>{v});
  }
}

}  // namespace detail

// ---- scalar --------------------------------------------------------------------------------------

/*! \brief *addr += val atomically; returns the old *addr. Integers wrap; 16-bit floats round as their add. */
template <typename T, typename V>
TL_DEVICE T AtomicAddRet(T* addr, V val) {
  detail::check_atomic_element<T>();
  const T v = cast<T>(val);
  if constexpr (std::is_integral<T>::value) {
    // CUDA declares 64-bit atomicAdd for unsigned only; two's-complement addition is the same operation.
    using N = typename std::conditional<sizeof(T) == 8, unsigned long long, detail::atomic_int_t<T>>::type;
    return static_cast<T>(atomicAdd(reinterpret_cast<N*>(addr), static_cast<N>(v)));
  } else {
    return atomicAdd(addr, v);  // float, double, half, __mt_bfloat16 built-ins
  }
}

/*! \brief *addr += val atomically. */
template <typename T, typename V>
TL_DEVICE void AtomicAdd(T* addr, V val) {
  (void)AtomicAddRet(addr, val);
}

/*!
 * \brief *addr = max(*addr, val) atomically; returns the old *addr. Floating point follows tl::MaxOp: a NaN `val`
 *        leaves *addr unchanged and a NaN in memory is replaced; +0 counts above -0.
 */
template <typename T, typename V>
TL_DEVICE T AtomicMaxRet(T* addr, V val) {
  return detail::atomic_extremum<true>(addr, cast<T>(val));
}

/*! \brief *addr = max(*addr, val) atomically (see AtomicMaxRet). */
template <typename T, typename V>
TL_DEVICE void AtomicMax(T* addr, V val) {
  (void)AtomicMaxRet(addr, val);
}

/*! \brief *addr = min(*addr, val) atomically; returns the old *addr. NaN and zero rules mirror AtomicMaxRet. */
template <typename T, typename V>
TL_DEVICE T AtomicMinRet(T* addr, V val) {
  return detail::atomic_extremum<false>(addr, cast<T>(val));
}

/*! \brief *addr = min(*addr, val) atomically (see AtomicMinRet). */
template <typename T, typename V>
TL_DEVICE void AtomicMin(T* addr, V val) {
  (void)AtomicMinRet(addr, val);
}

/*! \brief *addr |= val atomically (T.atomic_or), for 32/64-bit integers; returns the old *addr. */
template <typename T, typename V>
TL_DEVICE T AtomicOrRet(T* addr, V val) {
  static_assert(std::is_integral<T>::value && (sizeof(T) == 4 || sizeof(T) == 8),
                "tl::AtomicOr supports 32/64-bit integer elements");
  // CUDA declares 64-bit atomicOr for unsigned only; the bits are the same for a signed element.
  using N = typename std::conditional<sizeof(T) == 8, unsigned long long, detail::atomic_int_t<T>>::type;
  return static_cast<T>(atomicOr(reinterpret_cast<N*>(addr), static_cast<N>(static_cast<T>(val))));
}

/*! \brief *addr |= val atomically. */
template <typename T, typename V>
TL_DEVICE void AtomicOr(T* addr, V val) {
  (void)AtomicOrRet(addr, val);
}

// ---- vectors -------------------------------------------------------------------------------------
// addr[i] += val[i] for the N lanes, returning the old lanes. Each 32/64-bit lane is its own atomic (no
// atomicity across lanes); 16-bit lanes go in aligned pairs, each pair one atomic 32-bit update, so `addr` must be
// aligned to 4 bytes for half_t / bfloat16_t.

namespace detail {

/*! \brief The aligned pair of 16-bit floats at addr += pair in one atomic; returns the old pair. half and bfloat16
 *        pairs: the device library's atomicAdd on half2 / __mt_bfloat162 (Moore Threads' MUSA templates call it;
 *        docs/ATOMICS_ON_MUSA.md); other 16-bit types: a compare-and-swap loop on the 32-bit word. */
template <typename T>
TL_DEVICE vec<T, 2> add_pair(T* addr, const vec<T, 2>& pair) {
  if constexpr (std::is_same<T, half_t>::value || std::is_same<T, bfloat16_t>::value) {
    using Pair = typename builtin_vector<T, 2>::type;
    Pair operand, seen;
    __builtin_memcpy(&operand, &pair, sizeof(Pair));
    seen = atomicAdd(reinterpret_cast<Pair*>(addr), operand);
    vec<T, 2> out;
    __builtin_memcpy(&out, &seen, sizeof(Pair));
    return out;
  } else {
    return atomic_update(reinterpret_cast<vec<T, 2>*>(addr), AddLanes<T, 2>{pair});
  }
}

/*! \brief Lane-wise add of N lanes at addr; returns the old lanes. */
template <typename T, int N>
TL_DEVICE vec<T, N> atomic_add_lanes(T* addr, const vec<T, N>& val) {
  check_atomic_element<T>();
  vec<T, N> old;
  if constexpr (is_half_like<T>::value) {
    static_assert(N % 2 == 0, "tl::AtomicAddxN: 16-bit lanes are updated in pairs");
    for (int i = 0; i < N; i += 2) {
      const vec<T, 2> pair{{val.data[i], val.data[i + 1]}};
      const vec<T, 2> seen = add_pair(addr + i, pair);
      old.data[i] = seen.data[0];
      old.data[i + 1] = seen.data[1];
    }
  } else {
    for (int i = 0; i < N; ++i) old.data[i] = AtomicAddRet(addr + i, val.data[i]);
  }
  return old;
}

}  // namespace detail

template <typename T>
TL_DEVICE vec<T, 2> AtomicAddx2Ret(T* addr, const vec<T, 2>& val) {
  return detail::atomic_add_lanes(addr, val);
}
template <typename T>
TL_DEVICE vec<T, 2> AtomicAddx2Ret(T* addr, const T* val) {
  return detail::atomic_add_lanes(addr, vec<T, 2>{{val[0], val[1]}});
}
template <typename T>
TL_DEVICE void AtomicAddx2(T* addr, const vec<T, 2>& val) {
  (void)detail::atomic_add_lanes(addr, val);
}
template <typename T>
TL_DEVICE void AtomicAddx2(T* addr, const T* val) {
  (void)AtomicAddx2Ret(addr, val);
}
/*! \brief addr[0] += lane0 and addr[1] += lane1, each value converted to T first (a pair of an auto-vectorized
 *        T.atomic_add whose values are expressions: a float accumulator's lanes added into half_t, say). */
template <typename T, typename V0, typename V1>
TL_DEVICE void AtomicAddx2(T* addr, V0 lane0, V1 lane1) {
  (void)detail::atomic_add_lanes(addr, vec<T, 2>{{cast<T>(lane0), cast<T>(lane1)}});
}
/*! \brief addr[0..3] += lane0..lane3, each converted to T first (T.atomic_addx4 of another float type). */
template <typename T, typename V0, typename V1, typename V2, typename V3>
TL_DEVICE void AtomicAddx4(T* addr, V0 lane0, V1 lane1, V2 lane2, V3 lane3) {
  (void)detail::atomic_add_lanes(addr, vec<T, 4>{{cast<T>(lane0), cast<T>(lane1), cast<T>(lane2), cast<T>(lane3)}});
}

template <typename T>
TL_DEVICE vec<T, 4> AtomicAddx4Ret(T* addr, const vec<T, 4>& val) {
  return detail::atomic_add_lanes(addr, val);
}
template <typename T>
TL_DEVICE vec<T, 4> AtomicAddx4Ret(T* addr, const T* val) {
  return detail::atomic_add_lanes(addr, vec<T, 4>{{val[0], val[1], val[2], val[3]}});
}
template <typename T>
TL_DEVICE void AtomicAddx4(T* addr, const vec<T, 4>& val) {
  (void)detail::atomic_add_lanes(addr, val);
}
template <typename T>
TL_DEVICE void AtomicAddx4(T* addr, const T* val) {
  (void)AtomicAddx4Ret(addr, val);
}

// ---- ordered loads and stores, fences -------------------------------------------------------------
// Memory orders by std::memory_order's numbering (T.atomic_* memory_order=). An acquire is a fence after the access,
// a release a fence before it: conservative on any memory model, as MUSA documents no finer-grained ordering.

enum MemoryOrder : int { kRelaxed = 0, kConsume = 1, kAcquire = 2, kRelease = 3, kAcqRel = 4, kSeqCst = 5 };

template <int Order>
TL_DEVICE void fence_before() {
  if constexpr (Order == kRelease || Order == kAcqRel || Order == kSeqCst) __threadfence();
}

template <int Order>
TL_DEVICE void fence_after() {
  if constexpr (Order == kConsume || Order == kAcquire || Order == kAcqRel || Order == kSeqCst) __threadfence();
}

/*! \brief *addr read once, whole (a volatile access of its bits), with the memory order's fence (T.atomic_load). */
template <int Order = kSeqCst, typename T>
TL_DEVICE T AtomicLoad(const T* addr) {
  detail::check_atomic_element<T>();
  using Bits = typename std::conditional<sizeof(T) == 2, uint16_t,
                                         typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type>::type;
  fence_before<Order == kSeqCst ? kSeqCst : kRelaxed>();
  const Bits bits = *reinterpret_cast<const volatile Bits*>(addr);
  fence_after<Order>();
  return bit_cast<T>(bits);
}

/*! \brief *addr = val written once, whole, with the memory order's fence (T.atomic_store). */
template <int Order = kSeqCst, typename T, typename V>
TL_DEVICE void AtomicStore(T* addr, V val) {
  detail::check_atomic_element<T>();
  using Bits = typename std::conditional<sizeof(T) == 2, uint16_t,
                                         typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type>::type;
  const Bits bits = bit_cast<Bits>(cast<T>(val));
  fence_before<Order>();
  *reinterpret_cast<volatile Bits*>(addr) = bits;
  fence_after<Order == kSeqCst ? kSeqCst : kRelaxed>();
}

// ---- inter-block flags (a stream-K GEMM's partial tiles: transform/stream_k.py) ------------------------------
// Every thread that stored part of what a flag publishes arrives on it (its stores fenced first), and every thread
// that reads that data waits for all those arrivals itself: no block barrier, so the threads of one warp-
// specialized squad may publish and acquire alone. The simulator runs them on its inter-block flag model
// (sim/grid_flags.h: blocks in order, a wait that can never be satisfied is an error, the cycle model's clocks).

/*! \brief The calling thread's earlier global stores are published: *flag += 1 after a fence. */
TL_DEVICE void grid_flag_arrive(int* flag, int line = __builtin_LINE()) {
#if defined(TL_SIMULATOR)
  TL_SIM_USES_GRID_FLAGS();
  tl_sim::GridFlagArrive(flag, line);
#else
  (void)line;
  __threadfence();
  atomicAdd(flag, 1);
#endif
}

/*! \brief Wait until *flag >= expected (every publisher arrived), then acquire: their stores are visible. */
TL_DEVICE void grid_flag_wait(const int* flag, int expected, int line = __builtin_LINE()) {
#if defined(TL_SIMULATOR)
  TL_SIM_USES_GRID_FLAGS();
  tl_sim::GridFlagWait(flag, expected, line);
#else
  (void)line;
  while (*reinterpret_cast<const volatile int*>(flag) < expected) {
  }
  __threadfence();
#endif
}

}  // namespace tl
