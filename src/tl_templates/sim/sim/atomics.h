/*!
 * \file tl_templates/sim/sim/atomics.h
 * \brief Device atomics (atomicAdd, atomicMax, atomicCAS, ...) with CUDA's signatures, returning the old value.
 *
 * Real atomics (GCC __atomic built-ins, relaxed like the device's), because blocks may run on several OS threads.
 * Operations the hardware lacks natively are compare-and-swap loops over the object's bits.
 */
#pragma once

#include <cmath>

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief Atomically replace *p by f(*p); return the previous value. T is any trivially copyable 2/4/8-byte type. */
template <class T, class F>
inline T AtomicUpdate(T* p, F f) {
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  T desired = f(old);
  while (!__atomic_compare_exchange(p, &old, &desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) desired = f(old);
  return old;
}

}  // namespace tl_sim

#define TL_SIM_ATOMIC_INTEGER(T)                                                                              \
  inline T atomicAdd(T* address, T val) { return __atomic_fetch_add(address, val, __ATOMIC_RELAXED); }       \
  inline T atomicExch(T* address, T val) { return __atomic_exchange_n(address, val, __ATOMIC_RELAXED); }     \
  inline T atomicMin(T* address, T val) {                                                                     \
    return tl_sim::AtomicUpdate(address, [val](T old) { return val < old ? val : old; });                    \
  }                                                                                                           \
  inline T atomicMax(T* address, T val) {                                                                     \
    return tl_sim::AtomicUpdate(address, [val](T old) { return val > old ? val : old; });                    \
  }                                                                                                           \
  inline T atomicCAS(T* address, T compare, T val) {                                                          \
    __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);           \
    return compare;                                                                                           \
  }                                                                                                           \
  inline T atomicAnd(T* address, T val) { return __atomic_fetch_and(address, val, __ATOMIC_RELAXED); }       \
  inline T atomicOr(T* address, T val) { return __atomic_fetch_or(address, val, __ATOMIC_RELAXED); }         \
  inline T atomicXor(T* address, T val) { return __atomic_fetch_xor(address, val, __ATOMIC_RELAXED); }

TL_SIM_ATOMIC_INTEGER(int)
TL_SIM_ATOMIC_INTEGER(unsigned int)
TL_SIM_ATOMIC_INTEGER(unsigned long long)
#undef TL_SIM_ATOMIC_INTEGER

// CUDA has min/max (but not add) for signed 64-bit.
inline long long atomicMin(long long* address, long long val) {
  return tl_sim::AtomicUpdate(address, [val](long long old) { return val < old ? val : old; });
}
inline long long atomicMax(long long* address, long long val) {
  return tl_sim::AtomicUpdate(address, [val](long long old) { return val > old ? val : old; });
}
inline int atomicSub(int* address, int val) { return __atomic_fetch_sub(address, val, __ATOMIC_RELAXED); }
inline unsigned int atomicSub(unsigned int* address, unsigned int val) {
  return __atomic_fetch_sub(address, val, __ATOMIC_RELAXED);
}
inline unsigned short atomicCAS(unsigned short* address, unsigned short compare, unsigned short val) {
  __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}
/*! \brief ((old >= val) ? 0 : old + 1), as CUDA defines it. */
inline unsigned int atomicInc(unsigned int* address, unsigned int val) {
  return tl_sim::AtomicUpdate(address, [val](unsigned int old) { return old >= val ? 0u : old + 1; });
}
/*! \brief (((old == 0) || (old > val)) ? val : old - 1), as CUDA defines it. */
inline unsigned int atomicDec(unsigned int* address, unsigned int val) {
  return tl_sim::AtomicUpdate(address, [val](unsigned int old) { return (old == 0 || old > val) ? val : old - 1; });
}

inline float atomicAdd(float* address, float val) {
  return tl_sim::AtomicUpdate(address, [val](float old) { return old + val; });
}
inline double atomicAdd(double* address, double val) {
  return tl_sim::AtomicUpdate(address, [val](double old) { return old + val; });
}
inline float atomicExch(float* address, float val) {
  return tl_sim::AtomicUpdate(address, [val](float) { return val; });
}
// Float min/max ignore a NaN operand (fminf/fmaxf semantics).
inline float atomicMin(float* address, float val) {
  return tl_sim::AtomicUpdate(address, [val](float old) { return std::fmin(old, val); });
}
inline float atomicMax(float* address, float val) {
  return tl_sim::AtomicUpdate(address, [val](float old) { return std::fmax(old, val); });
}
inline double atomicMin(double* address, double val) {
  return tl_sim::AtomicUpdate(address, [val](double old) { return std::fmin(old, val); });
}
inline double atomicMax(double* address, double val) {
  return tl_sim::AtomicUpdate(address, [val](double old) { return std::fmax(old, val); });
}
#pragma GCC visibility pop
