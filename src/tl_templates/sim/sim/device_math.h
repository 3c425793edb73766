/*!
 * \file tl_templates/sim/sim/device_math.h
 * \brief CUDA-only math and bit built-ins, for a host compiler. The standard functions (expf, exp2f, fminf, ...)
 *        come from <math.h> unchanged; only what the C library lacks is defined here.
 *
 * The fast intrinsics (__expf, __fdividef, ...) are approximate on the device; here they are the exact functions,
 * so a kernel validated against a reference with a tolerance stays valid on hardware. Float-to-int conversions
 * saturate and map NaN to 0, as the device's cvt instructions do, instead of being undefined.
 */
#pragma once

#include <math.h>

#include <cfenv>
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>

#include "bit_count.h"

#pragma GCC visibility push(hidden)

// Reinterpretation.
inline int __float_as_int(float x) { int r; std::memcpy(&r, &x, 4); return r; }
inline unsigned int __float_as_uint(float x) { unsigned int r; std::memcpy(&r, &x, 4); return r; }
inline float __int_as_float(int x) { float r; std::memcpy(&r, &x, 4); return r; }
inline float __uint_as_float(unsigned int x) { float r; std::memcpy(&r, &x, 4); return r; }
inline long long __double_as_longlong(double x) { long long r; std::memcpy(&r, &x, 8); return r; }
inline double __longlong_as_double(long long x) { double r; std::memcpy(&r, &x, 8); return r; }

// Fast and explicitly rounded float arithmetic (round-to-nearest is the host's default mode too).
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0

// Explicitly rounded arithmetic (T.ieee_*): the operation runs with the host FPU in the requested mode. Operands
// and result pass through volatiles so the operation cannot move out from between the two fesetround calls; a
// fiber never yields inside, so the mode is restored before another simulated thread runs.
namespace tl_sim {
template <int Mode, class F>
inline auto Rounded(F op) {
  const int saved = std::fegetround();
  std::fesetround(Mode);
  volatile auto result = op();
  std::fesetround(saved);
  return result;
}
}  // namespace tl_sim

#define TL_SIM_ROUNDED_OPS(suffix, mode)                                                                          \
  inline float __fadd_##suffix(float x, float y) {                                                                \
    return tl_sim::Rounded<mode>([&] { volatile float a = x, b = y; return a + b; });                             \
  }                                                                                                               \
  inline float __fsub_##suffix(float x, float y) {                                                                \
    return tl_sim::Rounded<mode>([&] { volatile float a = x, b = y; return a - b; });                             \
  }                                                                                                               \
  inline float __fmul_##suffix(float x, float y) {                                                                \
    return tl_sim::Rounded<mode>([&] { volatile float a = x, b = y; return a * b; });                             \
  }                                                                                                               \
  inline float __fdiv_##suffix(float x, float y) {                                                                \
    return tl_sim::Rounded<mode>([&] { volatile float a = x, b = y; return a / b; });                             \
  }                                                                                                               \
  inline float __fmaf_##suffix(float x, float y, float z) {                                                       \
    return tl_sim::Rounded<mode>([&] { volatile float a = x, b = y, c = z; return fmaf(a, b, c); });              \
  }                                                                                                               \
  inline float __frcp_##suffix(float x) {                                                                         \
    return tl_sim::Rounded<mode>([&] { volatile float a = x; return 1.0f / a; });                                 \
  }                                                                                                               \
  inline float __fsqrt_##suffix(float x) {                                                                        \
    return tl_sim::Rounded<mode>([&] { volatile float a = x; return sqrtf(a); });                                 \
  }                                                                                                               \
  inline double __dadd_##suffix(double x, double y) {                                                             \
    return tl_sim::Rounded<mode>([&] { volatile double a = x, b = y; return a + b; });                            \
  }                                                                                                               \
  inline double __dsub_##suffix(double x, double y) {                                                             \
    return tl_sim::Rounded<mode>([&] { volatile double a = x, b = y; return a - b; });                            \
  }                                                                                                               \
  inline double __dmul_##suffix(double x, double y) {                                                             \
    return tl_sim::Rounded<mode>([&] { volatile double a = x, b = y; return a * b; });                            \
  }                                                                                                               \
  inline double __ddiv_##suffix(double x, double y) {                                                             \
    return tl_sim::Rounded<mode>([&] { volatile double a = x, b = y; return a / b; });                            \
  }                                                                                                               \
  inline double __fma_##suffix(double x, double y, double z) {                                                    \
    return tl_sim::Rounded<mode>([&] { volatile double a = x, b = y, c = z; return fma(a, b, c); });              \
  }                                                                                                               \
  inline double __drcp_##suffix(double x) {                                                                       \
    return tl_sim::Rounded<mode>([&] { volatile double a = x; return 1.0 / a; });                                 \
  }                                                                                                               \
  inline double __dsqrt_##suffix(double x) {                                                                      \
    return tl_sim::Rounded<mode>([&] { volatile double a = x; return sqrt(a); });                                 \
  }
TL_SIM_ROUNDED_OPS(rn, FE_TONEAREST)
TL_SIM_ROUNDED_OPS(rz, FE_TOWARDZERO)
TL_SIM_ROUNDED_OPS(ru, FE_UPWARD)
TL_SIM_ROUNDED_OPS(rd, FE_DOWNWARD)
#undef TL_SIM_ROUNDED_OPS

namespace tl_sim {
/*!
 * \brief Whether x * m^2 < 1 exactly, for a positive finite float x and a positive double m of at most 25
 *        significant bits (a midpoint between two floats): the product has at most 74 significant bits, so it is
 *        compared as an integer times a power of two.
 */
inline bool ProductOfSquareBelowOne(float x, double m) {
  int ex, em;
  const double fx = std::frexp(static_cast<double>(x), &ex);  // x = fx * 2^ex, fx in [0.5, 1)
  const double fm = std::frexp(m, &em);
  const auto X = static_cast<unsigned __int128>(std::ldexp(fx, 24));  // exact: x has at most 24 bits
  const auto M = static_cast<unsigned __int128>(std::ldexp(fm, 25));  // exact: m has at most 25 bits
  const unsigned __int128 p = X * M * M;                                // < 2^74
  const int s = (ex - 24) + 2 * (em - 25);                              // x * m^2 = p * 2^s
  if (s >= 0) return false;                                              // p >= 1
  if (-s >= 127) return true;
  return p < (static_cast<unsigned __int128>(1) << (-s));
}
}  // namespace tl_sim

/*!
 * \brief 1/sqrt(x) rounded once to nearest even, as CUDA's __frsqrt_rn is (measured bit-exact on an H200,
 *        docs/SIM_VS_SILICON.md); 1.0f / sqrtf(x) rounds twice and is 1 ulp off for about one input in seven.
 *        The exact value is never a tie (x * m^2 == 1 would make m a power of two), so the double estimate's
 *        rounding is checked against the midpoint on its side exactly.
 */
inline float __frsqrt_rn(float x) {
  if (!(x > 0.0f) || x == HUGE_VALF) return 1.0f / sqrtf(x);  // NaN, negative: NaN; +-0: +-inf; +inf: 0 (exact)
  const double d = 1.0 / sqrt(static_cast<double>(x));
  const float r = static_cast<float>(d);
  const float lo = d < static_cast<double>(r) ? nextafterf(r, 0.0f) : r;  // the floats bracketing the estimate
  const float hi = lo == r ? nextafterf(r, HUGE_VALF) : r;
  const double mid = (static_cast<double>(lo) + static_cast<double>(hi)) / 2;  // exact
  // 1/sqrt(x) > mid  <=>  x * mid^2 < 1
  return tl_sim::ProductOfSquareBelowOne(x, mid) ? hi : lo;
}
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline double rcbrt(double x) { return 1.0 / cbrt(x); }

namespace tl_sim {
/*! \brief Round with `round_fn`, then saturate to [lo, hi]; NaN gives 0. */
template <class I, class R>
inline I SaturatingConvert(double x, R round_fn) {
  if (x != x) return 0;
  double r = round_fn(x);
  if (r <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (r >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(r);
}
}  // namespace tl_sim

#define TL_SIM_FLOAT_TO_INT(suffix, round_fn)                                                                 \
  inline int __float2int_##suffix(float x) { return tl_sim::SaturatingConvert<int>(x, round_fn); }           \
  inline unsigned int __float2uint_##suffix(float x) {                                                        \
    return tl_sim::SaturatingConvert<unsigned int>(x, round_fn);                                              \
  }                                                                                                           \
  inline long long __float2ll_##suffix(float x) { return tl_sim::SaturatingConvert<long long>(x, round_fn); } \
  inline int __double2int_##suffix(double x) { return tl_sim::SaturatingConvert<int>(x, round_fn); }
TL_SIM_FLOAT_TO_INT(rn, [](double v) { return nearbyint(v); })
TL_SIM_FLOAT_TO_INT(rz, [](double v) { return trunc(v); })
TL_SIM_FLOAT_TO_INT(rd, [](double v) { return floor(v); })
TL_SIM_FLOAT_TO_INT(ru, [](double v) { return ceil(v); })
#undef TL_SIM_FLOAT_TO_INT
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned int x) { return static_cast<float>(x); }
inline float __ll2float_rn(long long x) { return static_cast<float>(x); }
inline float __double2float_rn(double x) { return static_cast<float>(x); }

// Integer bit built-ins.
inline int __popc(unsigned int x) { return static_cast<int>(tl_sim::BitCount(x)); }
inline int __popcll(unsigned long long x) { return static_cast<int>(tl_sim::BitCount(x)); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned int>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline int __mulhi(int x, int y) { return static_cast<int>((static_cast<long long>(x) * y) >> 32); }
inline unsigned int __umulhi(unsigned int x, unsigned int y) {
  return static_cast<unsigned int>((static_cast<unsigned long long>(x) * y) >> 32);
}
inline long long __mul64hi(long long x, long long y) {
  return static_cast<long long>((static_cast<__int128>(x) * y) >> 64);
}
inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(x) * y) >> 64);
}
inline int __mul24(int x, int y) { return ((x << 8) >> 8) * ((y << 8) >> 8); }
inline unsigned int __umul24(unsigned int x, unsigned int y) { return (x & 0xffffffu) * (y & 0xffffffu); }

/*! \brief Read-only (texture-path) load: an ordinary load here. */
template <class T>
inline T __ldg(const T* p) { return *p; }

/*! \brief A thread's pause of about `ns` nanoseconds (a back-off in a polling loop): the simulated threads keep no
 *         wall-clock time, and a pause cannot change what a correct program computes, so it returns at once. */
inline void __nanosleep(unsigned int /*ns*/) {}

// CUDA's global min/max overloads for same-typed integer and floating arguments.
#define TL_SIM_MIN_MAX(T)                                 \
  inline T min(T a, T b) { return b < a ? b : a; }        \
  inline T max(T a, T b) { return a < b ? b : a; }
TL_SIM_MIN_MAX(int)
TL_SIM_MIN_MAX(unsigned int)
TL_SIM_MIN_MAX(long)
TL_SIM_MIN_MAX(unsigned long)
TL_SIM_MIN_MAX(long long)
TL_SIM_MIN_MAX(unsigned long long)
#undef TL_SIM_MIN_MAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

#pragma GCC visibility pop
