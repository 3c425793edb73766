/*!
 * \file tl_templates/sim/musa_fp16.h
 * \brief The simulator's musa_fp16.h: `half` (`__half`), a bit-exact IEEE binary16 in 2 trivially copyable bytes,
 *        and `half2`, with CUDA's conversion and arithmetic API.
 *
 * Arithmetic is done in float and rounded back to nearest-even: float's 24-bit significand is wide enough
 * (>= 2 * 11 + 2) for +, -, *, / and sqrt to be correctly rounded that way; fma is rounded to odd in double first
 * (float_convert.h). Like CUDA's, the type converts implicitly from float, double and integers and to float, and
 * defines its operators for (half, half) only, so mixed `half + float` expressions must convert one side
 * explicitly.
 */
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sim/atomics.h"
#include "sim/float_convert.h"
#include "sim/keywords.h"
#include "sim/vector_types.h"
#include "sim/visibility.h"

struct __half_raw {
  unsigned short x;
};
struct __half2_raw {
  unsigned short x, y;
};

struct __attribute__((aligned(2))) __half {
  unsigned short __x;  // the binary16 bits

  __half() = default;
  TL_SIM_HIDDEN constexpr __half(const __half_raw& raw) : __x(raw.x) {}
  TL_SIM_HIDDEN __half(float f) : __x(tl_sim::NarrowRne<5, 10>(f)) {}
  TL_SIM_HIDDEN __half(double d) : __x(tl_sim::NarrowRne<5, 10>(d)) {}
  // Integers below 2^53 are exact in double; larger ones overflow binary16 either way.
  template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
  TL_SIM_HIDDEN __half(I i) : __x(tl_sim::NarrowRne<5, 10>(static_cast<double>(i))) {}

  TL_SIM_HIDDEN operator float() const { return tl_sim::WidenToFloat<5, 10>(__x); }
  TL_SIM_HIDDEN operator __half_raw() const { return __half_raw{__x}; }
};

struct __attribute__((aligned(4))) __half2 {
  __half x, y;

  __half2() = default;
  TL_SIM_HIDDEN constexpr __half2(const __half& a, const __half& b) : x(a), y(b) {}
  TL_SIM_HIDDEN constexpr __half2(const __half2_raw& raw) : x(__half_raw{raw.x}), y(__half_raw{raw.y}) {}
  TL_SIM_HIDDEN operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
};

typedef __half half;
typedef __half2 half2;

static_assert(sizeof(__half) == 2 && alignof(__half) == 2 && std::is_trivially_copyable<__half>::value &&
                  std::is_trivially_default_constructible<__half>::value,
              "half must be 2 trivial bytes, usable in __shared__ arrays");
static_assert(sizeof(__half2) == 4 && std::is_trivially_copyable<__half2>::value, "half2 must be 4 trivial bytes");

// The types above keep default visibility (sim/visibility.h); everything below is hidden.
#pragma GCC visibility push(hidden)

namespace tl_sim {
inline __half HalfFromBits(unsigned short bits) { return __half(__half_raw{bits}); }
}  // namespace tl_sim

// ---- conversions ------------------------------------------------------------------------------------------------
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) { return __half(d); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __half __int2half_rn(int i) { return __half(i); }
inline __half __uint2half_rn(unsigned int i) { return __half(i); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline short __half_as_short(__half h) { return static_cast<short>(h.__x); }
inline __half __ushort_as_half(unsigned short bits) { return tl_sim::HalfFromBits(bits); }
inline __half __short_as_half(short bits) { return tl_sim::HalfFromBits(static_cast<unsigned short>(bits)); }

inline __half2 make_half2(__half x, __half y) { return __half2(x, y); }
inline __half2 __halves2half2(__half lo, __half hi) { return __half2(lo, hi); }
inline __half2 __half2half2(__half h) { return __half2(h, h); }
inline __half2 __floats2half2_rn(float lo, float hi) { return __half2(__half(lo), __half(hi)); }
inline __half2 __float2half2_rn(float f) { return __half2(__half(f), __half(f)); }
inline __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
inline float2 __half22float2(__half2 h) { return make_float2(static_cast<float>(h.x), static_cast<float>(h.y)); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline float __low2float(__half2 h) { return static_cast<float>(h.x); }
inline float __high2float(__half2 h) { return static_cast<float>(h.y); }

// ---- arithmetic and comparison ----------------------------------------------------------------------------------
inline __half __hadd(__half a, __half b) { return __half(static_cast<float>(a) + static_cast<float>(b)); }
inline __half __hsub(__half a, __half b) { return __half(static_cast<float>(a) - static_cast<float>(b)); }
inline __half __hmul(__half a, __half b) { return __half(static_cast<float>(a) * static_cast<float>(b)); }
inline __half __hdiv(__half a, __half b) { return __half(static_cast<float>(a) / static_cast<float>(b)); }
inline __half __hfma(__half a, __half b, __half c) {
  return __half(tl_sim::FmaRoundToOdd(static_cast<double>(a), static_cast<double>(b), static_cast<double>(c)));
}
inline __half __hneg(__half a) { return tl_sim::HalfFromBits(a.__x ^ 0x8000u); }
inline __half __habs(__half a) { return tl_sim::HalfFromBits(a.__x & 0x7fffu); }
inline __half __hmax(__half a, __half b) { return __half(std::fmax(static_cast<float>(a), static_cast<float>(b))); }
inline __half __hmin(__half a, __half b) { return __half(std::fmin(static_cast<float>(a), static_cast<float>(b))); }
inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
inline int __hisinf(__half a) { return (a.__x & 0x7fffu) == 0x7c00u ? ((a.__x & 0x8000u) ? -1 : 1) : 0; }
inline bool __heq(__half a, __half b) { return static_cast<float>(a) == static_cast<float>(b); }
inline bool __hne(__half a, __half b) { return static_cast<float>(a) != static_cast<float>(b); }
inline bool __hlt(__half a, __half b) { return static_cast<float>(a) < static_cast<float>(b); }
inline bool __hle(__half a, __half b) { return static_cast<float>(a) <= static_cast<float>(b); }
inline bool __hgt(__half a, __half b) { return static_cast<float>(a) > static_cast<float>(b); }
inline bool __hge(__half a, __half b) { return static_cast<float>(a) >= static_cast<float>(b); }

inline __half operator+(const __half& a, const __half& b) { return __hadd(a, b); }
inline __half operator-(const __half& a, const __half& b) { return __hsub(a, b); }
inline __half operator*(const __half& a, const __half& b) { return __hmul(a, b); }
inline __half operator/(const __half& a, const __half& b) { return __hdiv(a, b); }
inline __half& operator+=(__half& a, const __half& b) { return a = __hadd(a, b); }
inline __half& operator-=(__half& a, const __half& b) { return a = __hsub(a, b); }
inline __half& operator*=(__half& a, const __half& b) { return a = __hmul(a, b); }
inline __half& operator/=(__half& a, const __half& b) { return a = __hdiv(a, b); }
inline __half operator+(const __half& a) { return a; }
inline __half operator-(const __half& a) { return __hneg(a); }
inline __half& operator++(__half& a) { return a = __hadd(a, __half(1.0f)); }
inline __half& operator--(__half& a) { return a = __hsub(a, __half(1.0f)); }
inline __half operator++(__half& a, int) { __half old = a; ++a; return old; }
inline __half operator--(__half& a, int) { __half old = a; --a; return old; }
inline bool operator==(const __half& a, const __half& b) { return __heq(a, b); }
inline bool operator!=(const __half& a, const __half& b) { return __hne(a, b); }
inline bool operator<(const __half& a, const __half& b) { return __hlt(a, b); }
inline bool operator<=(const __half& a, const __half& b) { return __hle(a, b); }
inline bool operator>(const __half& a, const __half& b) { return __hgt(a, b); }
inline bool operator>=(const __half& a, const __half& b) { return __hge(a, b); }

inline __half2 __hadd2(__half2 a, __half2 b) { return __half2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
inline __half2 __hsub2(__half2 a, __half2 b) { return __half2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
inline __half2 __hmul2(__half2 a, __half2 b) { return __half2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
inline __half2 __h2div(__half2 a, __half2 b) { return __half2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
inline __half2 __hneg2(__half2 a) { return __half2(__hneg(a.x), __hneg(a.y)); }
inline __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
inline __half2 __hmax2(__half2 a, __half2 b) { return __half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
inline __half2 __hmin2(__half2 a, __half2 b) { return __half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }
inline __half2 operator+(const __half2& a, const __half2& b) { return __hadd2(a, b); }
inline __half2 operator-(const __half2& a, const __half2& b) { return __hsub2(a, b); }
inline __half2 operator*(const __half2& a, const __half2& b) { return __hmul2(a, b); }
inline __half2 operator/(const __half2& a, const __half2& b) { return __h2div(a, b); }
inline __half2& operator+=(__half2& a, const __half2& b) { return a = __hadd2(a, b); }
inline __half2& operator-=(__half2& a, const __half2& b) { return a = __hsub2(a, b); }
inline __half2& operator*=(__half2& a, const __half2& b) { return a = __hmul2(a, b); }
inline __half2 operator-(const __half2& a) { return __hneg2(a); }
inline bool operator==(const __half2& a, const __half2& b) { return a.x == b.x && a.y == b.y; }
inline bool operator!=(const __half2& a, const __half2& b) { return !(a == b); }

// ---- math (in float, rounded once) ------------------------------------------------------------------------------
#define TL_SIM_HALF_UNARY(name, fn) \
  inline __half name(__half a) { return __half(fn(static_cast<float>(a))); }
TL_SIM_HALF_UNARY(hexp, expf)
TL_SIM_HALF_UNARY(hexp2, exp2f)
TL_SIM_HALF_UNARY(hlog, logf)
TL_SIM_HALF_UNARY(hlog2, log2f)
TL_SIM_HALF_UNARY(hsqrt, sqrtf)
TL_SIM_HALF_UNARY(hfloor, floorf)
TL_SIM_HALF_UNARY(hceil, ceilf)
TL_SIM_HALF_UNARY(htrunc, truncf)
TL_SIM_HALF_UNARY(hrint, rintf)
#undef TL_SIM_HALF_UNARY
inline __half hrsqrt(__half a) { return __half(1.0f / sqrtf(static_cast<float>(a))); }
inline __half hrcp(__half a) { return __half(1.0f / static_cast<float>(a)); }

// ---- atomics ----------------------------------------------------------------------------------------------------
inline __half atomicAdd(__half* address, __half val) {
  return tl_sim::AtomicUpdate(address, [val](__half old) { return __hadd(old, val); });
}
inline __half2 atomicAdd(__half2* address, __half2 val) {
  return tl_sim::AtomicUpdate(address, [val](__half2 old) { return __hadd2(old, val); });
}

#pragma GCC visibility pop
