/*!
 * \file tl_templates/sim/musa_bf16.h
 * \brief The simulator's musa_bf16.h: `__mt_bfloat16`, a bit-exact bfloat16 (the top 16 bits of an IEEE float) in
 *        2 trivially copyable bytes, and the pair `__mt_bfloat162`, with CUDA-style conversion and arithmetic API.
 *
 * Arithmetic is done in float and rounded back to nearest-even (float's 24-bit significand is wide enough,
 * >= 2 * 8 + 2, for +, -, *, / and sqrt to be correctly rounded that way); fma is rounded to odd in double first
 * (float_convert.h). The type converts implicitly from float, double and integers and to float, and defines its
 * operators for (bf16, bf16) only, like `half`.
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

struct __mt_bfloat16_raw {
  unsigned short x;
};
struct __mt_bfloat162_raw {
  unsigned short x, y;
};

struct __attribute__((aligned(2))) __mt_bfloat16 {
  unsigned short __x;  // the bfloat16 bits

  __mt_bfloat16() = default;
  TL_SIM_HIDDEN constexpr __mt_bfloat16(const __mt_bfloat16_raw& raw) : __x(raw.x) {}
  TL_SIM_HIDDEN __mt_bfloat16(float f) : __x(tl_sim::NarrowRne<8, 7>(f)) {}
  TL_SIM_HIDDEN __mt_bfloat16(double d) : __x(tl_sim::NarrowRne<8, 7>(d)) {}
  // Integers below 2^53 are exact in double; larger ones overflow bfloat16 either way.
  template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
  TL_SIM_HIDDEN __mt_bfloat16(I i) : __x(tl_sim::NarrowRne<8, 7>(static_cast<double>(i))) {}

  TL_SIM_HIDDEN operator float() const { return tl_sim::WidenToFloat<8, 7>(__x); }
  TL_SIM_HIDDEN operator __mt_bfloat16_raw() const { return __mt_bfloat16_raw{__x}; }
};

struct __attribute__((aligned(4))) __mt_bfloat162 {
  __mt_bfloat16 x, y;

  __mt_bfloat162() = default;
  TL_SIM_HIDDEN constexpr __mt_bfloat162(const __mt_bfloat16& a, const __mt_bfloat16& b) : x(a), y(b) {}
  TL_SIM_HIDDEN constexpr __mt_bfloat162(const __mt_bfloat162_raw& raw) : x(__mt_bfloat16_raw{raw.x}), y(__mt_bfloat16_raw{raw.y}) {}
  TL_SIM_HIDDEN operator __mt_bfloat162_raw() const { return __mt_bfloat162_raw{x.__x, y.__x}; }
};

static_assert(sizeof(__mt_bfloat16) == 2 && alignof(__mt_bfloat16) == 2 &&
                  std::is_trivially_copyable<__mt_bfloat16>::value &&
                  std::is_trivially_default_constructible<__mt_bfloat16>::value,
              "__mt_bfloat16 must be 2 trivial bytes, usable in __shared__ arrays");
static_assert(sizeof(__mt_bfloat162) == 4 && std::is_trivially_copyable<__mt_bfloat162>::value,
              "__mt_bfloat162 must be 4 trivial bytes");

// The types above keep default visibility (sim/visibility.h); everything below is hidden.
#pragma GCC visibility push(hidden)

namespace tl_sim {
inline __mt_bfloat16 Bfloat16FromBits(unsigned short bits) { return __mt_bfloat16(__mt_bfloat16_raw{bits}); }
}  // namespace tl_sim

// ---- conversions ------------------------------------------------------------------------------------------------
inline __mt_bfloat16 __float2bfloat16(float f) { return __mt_bfloat16(f); }
inline __mt_bfloat16 __float2bfloat16_rn(float f) { return __mt_bfloat16(f); }
inline __mt_bfloat16 __double2bfloat16(double d) { return __mt_bfloat16(d); }
inline float __bfloat162float(__mt_bfloat16 h) { return static_cast<float>(h); }
inline __mt_bfloat16 __int2bfloat16_rn(int i) { return __mt_bfloat16(i); }
inline __mt_bfloat16 __uint2bfloat16_rn(unsigned int i) { return __mt_bfloat16(i); }
inline unsigned short __bfloat16_as_ushort(__mt_bfloat16 h) { return h.__x; }
inline short __bfloat16_as_short(__mt_bfloat16 h) { return static_cast<short>(h.__x); }
inline __mt_bfloat16 __ushort_as_bfloat16(unsigned short bits) { return tl_sim::Bfloat16FromBits(bits); }
inline __mt_bfloat16 __short_as_bfloat16(short bits) {
  return tl_sim::Bfloat16FromBits(static_cast<unsigned short>(bits));
}

inline __mt_bfloat162 make_bfloat162(__mt_bfloat16 x, __mt_bfloat16 y) { return __mt_bfloat162(x, y); }
inline __mt_bfloat162 __halves2bfloat162(__mt_bfloat16 lo, __mt_bfloat16 hi) { return __mt_bfloat162(lo, hi); }
inline __mt_bfloat162 __bfloat162bfloat162(__mt_bfloat16 h) { return __mt_bfloat162(h, h); }
inline __mt_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return __mt_bfloat162(__mt_bfloat16(lo), __mt_bfloat16(hi));
}
inline __mt_bfloat162 __float2bfloat162_rn(float f) { return __mt_bfloat162(__mt_bfloat16(f), __mt_bfloat16(f)); }
inline __mt_bfloat162 __float22bfloat162_rn(float2 f) { return __mt_bfloat162(__mt_bfloat16(f.x), __mt_bfloat16(f.y)); }
inline float2 __bfloat1622float2(__mt_bfloat162 h) {
  return make_float2(static_cast<float>(h.x), static_cast<float>(h.y));
}
inline __mt_bfloat16 __low2bfloat16(__mt_bfloat162 h) { return h.x; }
inline __mt_bfloat16 __high2bfloat16(__mt_bfloat162 h) { return h.y; }
inline float __low2float(__mt_bfloat162 h) { return static_cast<float>(h.x); }
inline float __high2float(__mt_bfloat162 h) { return static_cast<float>(h.y); }

// ---- arithmetic and comparison ----------------------------------------------------------------------------------
inline __mt_bfloat16 __hadd(__mt_bfloat16 a, __mt_bfloat16 b) {
  return __mt_bfloat16(static_cast<float>(a) + static_cast<float>(b));
}
inline __mt_bfloat16 __hsub(__mt_bfloat16 a, __mt_bfloat16 b) {
  return __mt_bfloat16(static_cast<float>(a) - static_cast<float>(b));
}
inline __mt_bfloat16 __hmul(__mt_bfloat16 a, __mt_bfloat16 b) {
  return __mt_bfloat16(static_cast<float>(a) * static_cast<float>(b));
}
inline __mt_bfloat16 __hdiv(__mt_bfloat16 a, __mt_bfloat16 b) {
  return __mt_bfloat16(static_cast<float>(a) / static_cast<float>(b));
}
inline __mt_bfloat16 __hfma(__mt_bfloat16 a, __mt_bfloat16 b, __mt_bfloat16 c) {
  return __mt_bfloat16(tl_sim::FmaRoundToOdd(static_cast<double>(a), static_cast<double>(b), static_cast<double>(c)));
}
inline __mt_bfloat16 __hneg(__mt_bfloat16 a) { return tl_sim::Bfloat16FromBits(a.__x ^ 0x8000u); }
inline __mt_bfloat16 __habs(__mt_bfloat16 a) { return tl_sim::Bfloat16FromBits(a.__x & 0x7fffu); }
inline __mt_bfloat16 __hmax(__mt_bfloat16 a, __mt_bfloat16 b) {
  return __mt_bfloat16(std::fmax(static_cast<float>(a), static_cast<float>(b)));
}
inline __mt_bfloat16 __hmin(__mt_bfloat16 a, __mt_bfloat16 b) {
  return __mt_bfloat16(std::fmin(static_cast<float>(a), static_cast<float>(b)));
}
inline bool __hisnan(__mt_bfloat16 a) { return (a.__x & 0x7fffu) > 0x7f80u; }
inline int __hisinf(__mt_bfloat16 a) { return (a.__x & 0x7fffu) == 0x7f80u ? ((a.__x & 0x8000u) ? -1 : 1) : 0; }
inline bool __heq(__mt_bfloat16 a, __mt_bfloat16 b) { return static_cast<float>(a) == static_cast<float>(b); }
inline bool __hne(__mt_bfloat16 a, __mt_bfloat16 b) { return static_cast<float>(a) != static_cast<float>(b); }
inline bool __hlt(__mt_bfloat16 a, __mt_bfloat16 b) { return static_cast<float>(a) < static_cast<float>(b); }
inline bool __hle(__mt_bfloat16 a, __mt_bfloat16 b) { return static_cast<float>(a) <= static_cast<float>(b); }
inline bool __hgt(__mt_bfloat16 a, __mt_bfloat16 b) { return static_cast<float>(a) > static_cast<float>(b); }
inline bool __hge(__mt_bfloat16 a, __mt_bfloat16 b) { return static_cast<float>(a) >= static_cast<float>(b); }

inline __mt_bfloat16 operator+(const __mt_bfloat16& a, const __mt_bfloat16& b) { return __hadd(a, b); }
inline __mt_bfloat16 operator-(const __mt_bfloat16& a, const __mt_bfloat16& b) { return __hsub(a, b); }
inline __mt_bfloat16 operator*(const __mt_bfloat16& a, const __mt_bfloat16& b) { return __hmul(a, b); }
inline __mt_bfloat16 operator/(const __mt_bfloat16& a, const __mt_bfloat16& b) { return __hdiv(a, b); }
inline __mt_bfloat16& operator+=(__mt_bfloat16& a, const __mt_bfloat16& b) { return a = __hadd(a, b); }
inline __mt_bfloat16& operator-=(__mt_bfloat16& a, const __mt_bfloat16& b) { return a = __hsub(a, b); }
inline __mt_bfloat16& operator*=(__mt_bfloat16& a, const __mt_bfloat16& b) { return a = __hmul(a, b); }
inline __mt_bfloat16& operator/=(__mt_bfloat16& a, const __mt_bfloat16& b) { return a = __hdiv(a, b); }
inline __mt_bfloat16 operator+(const __mt_bfloat16& a) { return a; }
inline __mt_bfloat16 operator-(const __mt_bfloat16& a) { return __hneg(a); }
inline __mt_bfloat16& operator++(__mt_bfloat16& a) { return a = __hadd(a, __mt_bfloat16(1.0f)); }
inline __mt_bfloat16& operator--(__mt_bfloat16& a) { return a = __hsub(a, __mt_bfloat16(1.0f)); }
inline __mt_bfloat16 operator++(__mt_bfloat16& a, int) { __mt_bfloat16 old = a; ++a; return old; }
inline __mt_bfloat16 operator--(__mt_bfloat16& a, int) { __mt_bfloat16 old = a; --a; return old; }
inline bool operator==(const __mt_bfloat16& a, const __mt_bfloat16& b) { return __heq(a, b); }
inline bool operator!=(const __mt_bfloat16& a, const __mt_bfloat16& b) { return __hne(a, b); }
inline bool operator<(const __mt_bfloat16& a, const __mt_bfloat16& b) { return __hlt(a, b); }
inline bool operator<=(const __mt_bfloat16& a, const __mt_bfloat16& b) { return __hle(a, b); }
inline bool operator>(const __mt_bfloat16& a, const __mt_bfloat16& b) { return __hgt(a, b); }
inline bool operator>=(const __mt_bfloat16& a, const __mt_bfloat16& b) { return __hge(a, b); }

inline __mt_bfloat162 __hadd2(__mt_bfloat162 a, __mt_bfloat162 b) {
  return __mt_bfloat162(__hadd(a.x, b.x), __hadd(a.y, b.y));
}
inline __mt_bfloat162 __hsub2(__mt_bfloat162 a, __mt_bfloat162 b) {
  return __mt_bfloat162(__hsub(a.x, b.x), __hsub(a.y, b.y));
}
inline __mt_bfloat162 __hmul2(__mt_bfloat162 a, __mt_bfloat162 b) {
  return __mt_bfloat162(__hmul(a.x, b.x), __hmul(a.y, b.y));
}
inline __mt_bfloat162 __h2div(__mt_bfloat162 a, __mt_bfloat162 b) {
  return __mt_bfloat162(__hdiv(a.x, b.x), __hdiv(a.y, b.y));
}
inline __mt_bfloat162 __hfma2(__mt_bfloat162 a, __mt_bfloat162 b, __mt_bfloat162 c) {
  return __mt_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
inline __mt_bfloat162 __hneg2(__mt_bfloat162 a) { return __mt_bfloat162(__hneg(a.x), __hneg(a.y)); }
inline __mt_bfloat162 __habs2(__mt_bfloat162 a) { return __mt_bfloat162(__habs(a.x), __habs(a.y)); }
inline __mt_bfloat162 __hmax2(__mt_bfloat162 a, __mt_bfloat162 b) {
  return __mt_bfloat162(__hmax(a.x, b.x), __hmax(a.y, b.y));
}
inline __mt_bfloat162 __hmin2(__mt_bfloat162 a, __mt_bfloat162 b) {
  return __mt_bfloat162(__hmin(a.x, b.x), __hmin(a.y, b.y));
}
inline __mt_bfloat162 operator+(const __mt_bfloat162& a, const __mt_bfloat162& b) { return __hadd2(a, b); }
inline __mt_bfloat162 operator-(const __mt_bfloat162& a, const __mt_bfloat162& b) { return __hsub2(a, b); }
inline __mt_bfloat162 operator*(const __mt_bfloat162& a, const __mt_bfloat162& b) { return __hmul2(a, b); }
inline __mt_bfloat162 operator/(const __mt_bfloat162& a, const __mt_bfloat162& b) { return __h2div(a, b); }
inline __mt_bfloat162& operator+=(__mt_bfloat162& a, const __mt_bfloat162& b) { return a = __hadd2(a, b); }
inline __mt_bfloat162& operator-=(__mt_bfloat162& a, const __mt_bfloat162& b) { return a = __hsub2(a, b); }
inline __mt_bfloat162& operator*=(__mt_bfloat162& a, const __mt_bfloat162& b) { return a = __hmul2(a, b); }
inline __mt_bfloat162 operator-(const __mt_bfloat162& a) { return __hneg2(a); }
inline bool operator==(const __mt_bfloat162& a, const __mt_bfloat162& b) { return a.x == b.x && a.y == b.y; }
inline bool operator!=(const __mt_bfloat162& a, const __mt_bfloat162& b) { return !(a == b); }

// ---- math (in float, rounded once) ------------------------------------------------------------------------------
#define TL_SIM_BF16_UNARY(name, fn) \
  inline __mt_bfloat16 name(__mt_bfloat16 a) { return __mt_bfloat16(fn(static_cast<float>(a))); }
TL_SIM_BF16_UNARY(hexp, expf)
TL_SIM_BF16_UNARY(hexp2, exp2f)
TL_SIM_BF16_UNARY(hlog, logf)
TL_SIM_BF16_UNARY(hlog2, log2f)
TL_SIM_BF16_UNARY(hsqrt, sqrtf)
TL_SIM_BF16_UNARY(hfloor, floorf)
TL_SIM_BF16_UNARY(hceil, ceilf)
TL_SIM_BF16_UNARY(htrunc, truncf)
TL_SIM_BF16_UNARY(hrint, rintf)
#undef TL_SIM_BF16_UNARY
inline __mt_bfloat16 hrsqrt(__mt_bfloat16 a) { return __mt_bfloat16(1.0f / sqrtf(static_cast<float>(a))); }
inline __mt_bfloat16 hrcp(__mt_bfloat16 a) { return __mt_bfloat16(1.0f / static_cast<float>(a)); }

// ---- atomics ----------------------------------------------------------------------------------------------------
inline __mt_bfloat16 atomicAdd(__mt_bfloat16* address, __mt_bfloat16 val) {
  return tl_sim::AtomicUpdate(address, [val](__mt_bfloat16 old) { return __hadd(old, val); });
}
inline __mt_bfloat162 atomicAdd(__mt_bfloat162* address, __mt_bfloat162 val) {
  return tl_sim::AtomicUpdate(address, [val](__mt_bfloat162 old) { return __hadd2(old, val); });
}

#pragma GCC visibility pop
