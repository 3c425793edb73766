/*!
 * \file tl_templates/sim/sim/float16_api.h
 * \brief The one source of the simulator's two 16-bit float types (musa_fp16.h's `__half`, musa_bf16.h's
 *        `__mt_bfloat16`): the type, its pair, CUDA's conversion, arithmetic, comparison, math and atomic API.
 *
 * The two headers differ only in the format (exponent and significand bits) and in names, so each defines the
 * parameters below and includes this file (deliberately without an include guard); it undefines them at its end.
 *   TL_SIM_F16, TL_SIM_F16_2, TL_SIM_F16_RAW, TL_SIM_F16_2_RAW   the type names (`__half`, `__half2`, ...)
 *   TL_SIM_F16_FORMAT                                             the name in the API's functions (`half`)
 *   TL_SIM_F16_EXP_BITS, TL_SIM_F16_MAN_BITS, TL_SIM_F16_INF_BITS the format, and the bits of +infinity
 *   TL_SIM_F16_FROM_BITS                                          the name of the tl_sim:: constructor from bits
 *
 * Arithmetic is done in float and rounded back to nearest-even: float's 24-bit significand is wide enough
 * (>= 2 * (MAN_BITS + 1) + 2) for +, -, *, / and sqrt to be correctly rounded that way; fma is rounded to odd in
 * double first (float_convert.h). Like CUDA's, the type converts implicitly from float, double and integers and to
 * float, and defines its operators for (T, T) only, so a mixed `T + float` expression must convert one side.
 */
#if !defined(TL_SIM_F16) || !defined(TL_SIM_F16_FORMAT) || !defined(TL_SIM_F16_INF_BITS)
#error "sim/float16_api.h is included by musa_fp16.h and musa_bf16.h, which define its parameters"
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "atomics.h"
#include "float_convert.h"
#include "keywords.h"
#include "vector_types.h"
#include "visibility.h"

// The API's names: TL_SIM_F16_NAME(__float2, _rn) is __float2half_rn for fp16, __float2bfloat16_rn for bf16.
#define TL_SIM_F16_PASTE3(a, b, c) a##b##c
#define TL_SIM_F16_PASTE5(a, b, c, d, e) a##b##c##d##e
#define TL_SIM_F16_JOIN3(a, b, c) TL_SIM_F16_PASTE3(a, b, c)
#define TL_SIM_F16_JOIN5(a, b, c, d, e) TL_SIM_F16_PASTE5(a, b, c, d, e)
#define TL_SIM_F16_NAME(pre, post) TL_SIM_F16_JOIN3(pre, TL_SIM_F16_FORMAT, post)
#define TL_SIM_F16_NAME2(pre, mid, post) TL_SIM_F16_JOIN5(pre, TL_SIM_F16_FORMAT, mid, TL_SIM_F16_FORMAT, post)
#define TL_SIM_F16_QUOTE(x) #x
#define TL_SIM_F16_STR(x) TL_SIM_F16_QUOTE(x)

struct TL_SIM_F16_RAW {
  unsigned short x;
};
struct TL_SIM_F16_2_RAW {
  unsigned short x, y;
};

struct __attribute__((aligned(2))) TL_SIM_F16 {
  unsigned short __x;  // the format's bits

  TL_SIM_F16() = default;
  TL_SIM_HIDDEN constexpr TL_SIM_F16(const TL_SIM_F16_RAW& raw) : __x(raw.x) {}
  TL_SIM_HIDDEN TL_SIM_F16(float f) : __x(tl_sim::NarrowFromFloat<TL_SIM_F16_EXP_BITS, TL_SIM_F16_MAN_BITS>(f)) {}
  TL_SIM_HIDDEN TL_SIM_F16(double d) : __x(tl_sim::NarrowRne<TL_SIM_F16_EXP_BITS, TL_SIM_F16_MAN_BITS>(d)) {}
  // Integers below 2^53 are exact in double; larger ones overflow a 16-bit format either way.
  template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>
  TL_SIM_HIDDEN TL_SIM_F16(I i)
      : __x(tl_sim::NarrowRne<TL_SIM_F16_EXP_BITS, TL_SIM_F16_MAN_BITS>(static_cast<double>(i))) {}

  TL_SIM_HIDDEN operator float() const { return tl_sim::WidenToFloat<TL_SIM_F16_EXP_BITS, TL_SIM_F16_MAN_BITS>(__x); }
  TL_SIM_HIDDEN operator TL_SIM_F16_RAW() const { return TL_SIM_F16_RAW{__x}; }
};

struct __attribute__((aligned(4))) TL_SIM_F16_2 {
  TL_SIM_F16 x, y;

  TL_SIM_F16_2() = default;
  TL_SIM_HIDDEN constexpr TL_SIM_F16_2(const TL_SIM_F16& a, const TL_SIM_F16& b) : x(a), y(b) {}
  TL_SIM_HIDDEN constexpr TL_SIM_F16_2(const TL_SIM_F16_2_RAW& raw)
      : x(TL_SIM_F16_RAW{raw.x}), y(TL_SIM_F16_RAW{raw.y}) {}
  TL_SIM_HIDDEN operator TL_SIM_F16_2_RAW() const { return TL_SIM_F16_2_RAW{x.__x, y.__x}; }
};

static_assert(sizeof(TL_SIM_F16) == 2 && alignof(TL_SIM_F16) == 2 && std::is_trivially_copyable<TL_SIM_F16>::value &&
                  std::is_trivially_default_constructible<TL_SIM_F16>::value,
              TL_SIM_F16_STR(TL_SIM_F16) " must be 2 trivial bytes, usable in __shared__ arrays");
static_assert(sizeof(TL_SIM_F16_2) == 4 && std::is_trivially_copyable<TL_SIM_F16_2>::value,
              TL_SIM_F16_STR(TL_SIM_F16_2) " must be 4 trivial bytes");

// The types above keep default visibility (sim/visibility.h); everything below is hidden.
#pragma GCC visibility push(hidden)

namespace tl_sim {
inline TL_SIM_F16 TL_SIM_F16_FROM_BITS(unsigned short bits) { return TL_SIM_F16(TL_SIM_F16_RAW{bits}); }
}  // namespace tl_sim

// ---- conversions ------------------------------------------------------------------------------------------------
inline TL_SIM_F16 TL_SIM_F16_NAME(__float2, )(float f) { return TL_SIM_F16(f); }
inline TL_SIM_F16 TL_SIM_F16_NAME(__float2, _rn)(float f) { return TL_SIM_F16(f); }
inline TL_SIM_F16 TL_SIM_F16_NAME(__double2, )(double d) { return TL_SIM_F16(d); }
inline float TL_SIM_F16_NAME(__, 2float)(TL_SIM_F16 h) { return static_cast<float>(h); }
inline TL_SIM_F16 TL_SIM_F16_NAME(__int2, _rn)(int i) { return TL_SIM_F16(i); }
inline TL_SIM_F16 TL_SIM_F16_NAME(__uint2, _rn)(unsigned int i) { return TL_SIM_F16(i); }
inline unsigned short TL_SIM_F16_NAME(__, _as_ushort)(TL_SIM_F16 h) { return h.__x; }
inline short TL_SIM_F16_NAME(__, _as_short)(TL_SIM_F16 h) { return static_cast<short>(h.__x); }
inline TL_SIM_F16 TL_SIM_F16_NAME(__ushort_as_, )(unsigned short bits) { return tl_sim::TL_SIM_F16_FROM_BITS(bits); }
inline TL_SIM_F16 TL_SIM_F16_NAME(__short_as_, )(short bits) {
  return tl_sim::TL_SIM_F16_FROM_BITS(static_cast<unsigned short>(bits));
}

inline TL_SIM_F16_2 TL_SIM_F16_NAME(make_, 2)(TL_SIM_F16 x, TL_SIM_F16 y) { return TL_SIM_F16_2(x, y); }
inline TL_SIM_F16_2 TL_SIM_F16_NAME(__halves2, 2)(TL_SIM_F16 lo, TL_SIM_F16 hi) { return TL_SIM_F16_2(lo, hi); }
inline TL_SIM_F16_2 TL_SIM_F16_NAME2(__, 2, 2)(TL_SIM_F16 h) { return TL_SIM_F16_2(h, h); }
inline TL_SIM_F16_2 TL_SIM_F16_NAME(__floats2, 2_rn)(float lo, float hi) {
  return TL_SIM_F16_2(TL_SIM_F16(lo), TL_SIM_F16(hi));
}
inline TL_SIM_F16_2 TL_SIM_F16_NAME(__float2, 2_rn)(float f) { return TL_SIM_F16_2(TL_SIM_F16(f), TL_SIM_F16(f)); }
inline TL_SIM_F16_2 TL_SIM_F16_NAME(__float22, 2_rn)(float2 f) {
  return TL_SIM_F16_2(TL_SIM_F16(f.x), TL_SIM_F16(f.y));
}
inline float2 TL_SIM_F16_NAME(__, 22float2)(TL_SIM_F16_2 h) {
  return make_float2(static_cast<float>(h.x), static_cast<float>(h.y));
}
inline TL_SIM_F16 TL_SIM_F16_NAME(__low2, )(TL_SIM_F16_2 h) { return h.x; }
inline TL_SIM_F16 TL_SIM_F16_NAME(__high2, )(TL_SIM_F16_2 h) { return h.y; }
inline float __low2float(TL_SIM_F16_2 h) { return static_cast<float>(h.x); }
inline float __high2float(TL_SIM_F16_2 h) { return static_cast<float>(h.y); }

// ---- arithmetic and comparison ----------------------------------------------------------------------------------
inline TL_SIM_F16 __hadd(TL_SIM_F16 a, TL_SIM_F16 b) {
  return TL_SIM_F16(static_cast<float>(a) + static_cast<float>(b));
}
inline TL_SIM_F16 __hsub(TL_SIM_F16 a, TL_SIM_F16 b) {
  return TL_SIM_F16(static_cast<float>(a) - static_cast<float>(b));
}
inline TL_SIM_F16 __hmul(TL_SIM_F16 a, TL_SIM_F16 b) {
  return TL_SIM_F16(static_cast<float>(a) * static_cast<float>(b));
}
inline TL_SIM_F16 __hdiv(TL_SIM_F16 a, TL_SIM_F16 b) {
  return TL_SIM_F16(static_cast<float>(a) / static_cast<float>(b));
}
inline TL_SIM_F16 __hfma(TL_SIM_F16 a, TL_SIM_F16 b, TL_SIM_F16 c) {
  return TL_SIM_F16(tl_sim::FmaRoundToOdd(static_cast<double>(a), static_cast<double>(b), static_cast<double>(c)));
}
inline TL_SIM_F16 __hneg(TL_SIM_F16 a) { return tl_sim::TL_SIM_F16_FROM_BITS(a.__x ^ 0x8000u); }
inline TL_SIM_F16 __habs(TL_SIM_F16 a) { return tl_sim::TL_SIM_F16_FROM_BITS(a.__x & 0x7fffu); }
inline TL_SIM_F16 __hmax(TL_SIM_F16 a, TL_SIM_F16 b) {
  return TL_SIM_F16(std::fmax(static_cast<float>(a), static_cast<float>(b)));
}
inline TL_SIM_F16 __hmin(TL_SIM_F16 a, TL_SIM_F16 b) {
  return TL_SIM_F16(std::fmin(static_cast<float>(a), static_cast<float>(b)));
}
inline bool __hisnan(TL_SIM_F16 a) { return (a.__x & 0x7fffu) > TL_SIM_F16_INF_BITS; }
inline int __hisinf(TL_SIM_F16 a) {
  return (a.__x & 0x7fffu) == TL_SIM_F16_INF_BITS ? ((a.__x & 0x8000u) ? -1 : 1) : 0;
}
inline bool __heq(TL_SIM_F16 a, TL_SIM_F16 b) { return static_cast<float>(a) == static_cast<float>(b); }
inline bool __hne(TL_SIM_F16 a, TL_SIM_F16 b) { return static_cast<float>(a) != static_cast<float>(b); }
inline bool __hlt(TL_SIM_F16 a, TL_SIM_F16 b) { return static_cast<float>(a) < static_cast<float>(b); }
inline bool __hle(TL_SIM_F16 a, TL_SIM_F16 b) { return static_cast<float>(a) <= static_cast<float>(b); }
inline bool __hgt(TL_SIM_F16 a, TL_SIM_F16 b) { return static_cast<float>(a) > static_cast<float>(b); }
inline bool __hge(TL_SIM_F16 a, TL_SIM_F16 b) { return static_cast<float>(a) >= static_cast<float>(b); }

inline TL_SIM_F16 operator+(const TL_SIM_F16& a, const TL_SIM_F16& b) { return __hadd(a, b); }
inline TL_SIM_F16 operator-(const TL_SIM_F16& a, const TL_SIM_F16& b) { return __hsub(a, b); }
inline TL_SIM_F16 operator*(const TL_SIM_F16& a, const TL_SIM_F16& b) { return __hmul(a, b); }
inline TL_SIM_F16 operator/(const TL_SIM_F16& a, const TL_SIM_F16& b) { return __hdiv(a, b); }
inline TL_SIM_F16& operator+=(TL_SIM_F16& a, const TL_SIM_F16& b) { return a = __hadd(a, b); }
inline TL_SIM_F16& operator-=(TL_SIM_F16& a, const TL_SIM_F16& b) { return a = __hsub(a, b); }
inline TL_SIM_F16& operator*=(TL_SIM_F16& a, const TL_SIM_F16& b) { return a = __hmul(a, b); }
inline TL_SIM_F16& operator/=(TL_SIM_F16& a, const TL_SIM_F16& b) { return a = __hdiv(a, b); }
inline TL_SIM_F16 operator+(const TL_SIM_F16& a) { return a; }
inline TL_SIM_F16 operator-(const TL_SIM_F16& a) { return __hneg(a); }
inline TL_SIM_F16& operator++(TL_SIM_F16& a) { return a = __hadd(a, TL_SIM_F16(1.0f)); }
inline TL_SIM_F16& operator--(TL_SIM_F16& a) { return a = __hsub(a, TL_SIM_F16(1.0f)); }
inline TL_SIM_F16 operator++(TL_SIM_F16& a, int) { TL_SIM_F16 old = a; ++a; return old; }
inline TL_SIM_F16 operator--(TL_SIM_F16& a, int) { TL_SIM_F16 old = a; --a; return old; }
inline bool operator==(const TL_SIM_F16& a, const TL_SIM_F16& b) { return __heq(a, b); }
inline bool operator!=(const TL_SIM_F16& a, const TL_SIM_F16& b) { return __hne(a, b); }
inline bool operator<(const TL_SIM_F16& a, const TL_SIM_F16& b) { return __hlt(a, b); }
inline bool operator<=(const TL_SIM_F16& a, const TL_SIM_F16& b) { return __hle(a, b); }
inline bool operator>(const TL_SIM_F16& a, const TL_SIM_F16& b) { return __hgt(a, b); }
inline bool operator>=(const TL_SIM_F16& a, const TL_SIM_F16& b) { return __hge(a, b); }

inline TL_SIM_F16_2 __hadd2(TL_SIM_F16_2 a, TL_SIM_F16_2 b) { return TL_SIM_F16_2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
inline TL_SIM_F16_2 __hsub2(TL_SIM_F16_2 a, TL_SIM_F16_2 b) { return TL_SIM_F16_2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
inline TL_SIM_F16_2 __hmul2(TL_SIM_F16_2 a, TL_SIM_F16_2 b) { return TL_SIM_F16_2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
inline TL_SIM_F16_2 __h2div(TL_SIM_F16_2 a, TL_SIM_F16_2 b) { return TL_SIM_F16_2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }
inline TL_SIM_F16_2 __hfma2(TL_SIM_F16_2 a, TL_SIM_F16_2 b, TL_SIM_F16_2 c) {
  return TL_SIM_F16_2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
inline TL_SIM_F16_2 __hneg2(TL_SIM_F16_2 a) { return TL_SIM_F16_2(__hneg(a.x), __hneg(a.y)); }
inline TL_SIM_F16_2 __habs2(TL_SIM_F16_2 a) { return TL_SIM_F16_2(__habs(a.x), __habs(a.y)); }
inline TL_SIM_F16_2 __hmax2(TL_SIM_F16_2 a, TL_SIM_F16_2 b) { return TL_SIM_F16_2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
inline TL_SIM_F16_2 __hmin2(TL_SIM_F16_2 a, TL_SIM_F16_2 b) { return TL_SIM_F16_2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }
inline TL_SIM_F16_2 operator+(const TL_SIM_F16_2& a, const TL_SIM_F16_2& b) { return __hadd2(a, b); }
inline TL_SIM_F16_2 operator-(const TL_SIM_F16_2& a, const TL_SIM_F16_2& b) { return __hsub2(a, b); }
inline TL_SIM_F16_2 operator*(const TL_SIM_F16_2& a, const TL_SIM_F16_2& b) { return __hmul2(a, b); }
inline TL_SIM_F16_2 operator/(const TL_SIM_F16_2& a, const TL_SIM_F16_2& b) { return __h2div(a, b); }
inline TL_SIM_F16_2& operator+=(TL_SIM_F16_2& a, const TL_SIM_F16_2& b) { return a = __hadd2(a, b); }
inline TL_SIM_F16_2& operator-=(TL_SIM_F16_2& a, const TL_SIM_F16_2& b) { return a = __hsub2(a, b); }
inline TL_SIM_F16_2& operator*=(TL_SIM_F16_2& a, const TL_SIM_F16_2& b) { return a = __hmul2(a, b); }
inline TL_SIM_F16_2 operator-(const TL_SIM_F16_2& a) { return __hneg2(a); }
inline bool operator==(const TL_SIM_F16_2& a, const TL_SIM_F16_2& b) { return a.x == b.x && a.y == b.y; }
inline bool operator!=(const TL_SIM_F16_2& a, const TL_SIM_F16_2& b) { return !(a == b); }

// ---- math (in float, rounded once) ------------------------------------------------------------------------------
#define TL_SIM_F16_UNARY(name, fn) \
  inline TL_SIM_F16 name(TL_SIM_F16 a) { return TL_SIM_F16(fn(static_cast<float>(a))); }
TL_SIM_F16_UNARY(hexp, expf)
TL_SIM_F16_UNARY(hexp2, exp2f)
TL_SIM_F16_UNARY(hlog, logf)
TL_SIM_F16_UNARY(hlog2, log2f)
TL_SIM_F16_UNARY(hsqrt, sqrtf)
TL_SIM_F16_UNARY(hfloor, floorf)
TL_SIM_F16_UNARY(hceil, ceilf)
TL_SIM_F16_UNARY(htrunc, truncf)
TL_SIM_F16_UNARY(hrint, rintf)
#undef TL_SIM_F16_UNARY
inline TL_SIM_F16 hrsqrt(TL_SIM_F16 a) { return TL_SIM_F16(1.0f / sqrtf(static_cast<float>(a))); }
inline TL_SIM_F16 hrcp(TL_SIM_F16 a) { return TL_SIM_F16(1.0f / static_cast<float>(a)); }

// ---- atomics ----------------------------------------------------------------------------------------------------
inline TL_SIM_F16 atomicAdd(TL_SIM_F16* address, TL_SIM_F16 val) {
  return tl_sim::AtomicUpdate(address, [val](TL_SIM_F16 old) { return __hadd(old, val); });
}
inline TL_SIM_F16_2 atomicAdd(TL_SIM_F16_2* address, TL_SIM_F16_2 val) {
  return tl_sim::AtomicUpdate(address, [val](TL_SIM_F16_2 old) { return __hadd2(old, val); });
}

#pragma GCC visibility pop

#undef TL_SIM_F16_PASTE3
#undef TL_SIM_F16_PASTE5
#undef TL_SIM_F16_JOIN3
#undef TL_SIM_F16_JOIN5
#undef TL_SIM_F16_NAME
#undef TL_SIM_F16_NAME2
#undef TL_SIM_F16_QUOTE
#undef TL_SIM_F16_STR
// The parameters were the includer's, for this inclusion only.
#undef TL_SIM_F16
#undef TL_SIM_F16_2
#undef TL_SIM_F16_RAW
#undef TL_SIM_F16_2_RAW
#undef TL_SIM_F16_FORMAT
#undef TL_SIM_F16_EXP_BITS
#undef TL_SIM_F16_MAN_BITS
#undef TL_SIM_F16_INF_BITS
#undef TL_SIM_F16_FROM_BITS
