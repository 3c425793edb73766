/*!
 * \file tl_templates/musa/cast_rounding.h
 * \brief `T.cast(x, dtype, round=, sat=, rbits=)`: a float converted to float16, bfloat16, float8_e4m3fn or
 *        float8_e5m2 with a chosen rounding (to nearest even, toward zero, up, down, or stochastic with caller-given
 *        random bits) and saturation, in portable MUSA C (language/cast_rounding.py documents the semantics).
 *
 * The value is m * 2^e (m the float's 24-bit significand); the target's quantum at |x| is 2^q, q the larger of
 * |x|'s exponent and the target's smallest normal exponent, less its mantissa bits. Truncating m to that quantum
 * gives the target's magnitude code directly (exponent and mantissa fields added, so rounding up carries into the
 * next binade, and out of the subnormals, by itself); the dropped part, as a fraction of the quantum in 32 bits,
 * decides whether to round up.
 */
#pragma once

#include "common.h"

namespace tl {

/*! \brief The rounding of `tl::convert_rounded` (stochastic rounding is `tl::convert_stochastic`). */
enum class Rounding : int { kNearestEven = 0, kTowardZero = 1, kUp = 2, kDown = 3, kStochastic = 4 };

namespace detail {

/*! \brief A target format's fields and special codes (magnitudes, without the sign bit). */
template <typename Bits, int Man, int Bias, uint32_t MaxFinite, uint32_t Infinity, uint32_t NaN, bool HasInfinity>
struct format_fields {
  using bits_t = Bits;
  static constexpr int kMan = Man, kBias = Bias;
  static constexpr uint32_t kMaxFinite = MaxFinite, kInfinity = Infinity, kNaN = NaN;
  static constexpr bool kHasInfinity = HasInfinity;
};

template <typename T>
struct rounded_format;
template <>
struct rounded_format<half_t> : format_fields<uint16_t, 10, 15, 0x7BFFu, 0x7C00u, 0x7E00u, true> {};
template <>
struct rounded_format<bfloat16_t> : format_fields<uint16_t, 7, 127, 0x7F7Fu, 0x7F80u, 0x7FC0u, true> {};
template <>  // OCP E4M3 "fn": no infinity; 0x7F is NaN
struct rounded_format<fp8_e4_t> : format_fields<uint8_t, 3, 7, 0x7Eu, 0x7Fu, 0x7Fu, false> {};
template <>
struct rounded_format<fp8_e5_t> : format_fields<uint8_t, 2, 15, 0x7Bu, 0x7Cu, 0x7Eu, true> {};

/*! \brief The magnitude code of the finite float with bits `abs_bits` (sign cleared) in a format of Man mantissa
 *         bits and exponent bias Bias, rounded by `mode`; it may exceed the format's largest finite code. */
template <int Man, int Bias>
TL_HOST_DEVICE uint32_t round_magnitude(uint32_t abs_bits, Rounding mode, bool negative, uint32_t rbits) {
  const uint32_t exp_field = abs_bits >> 23;
  const uint64_t m = exp_field ? ((abs_bits & 0x7FFFFFu) | 0x800000u) : (abs_bits & 0x7FFFFFu);
  const int e = exp_field ? static_cast<int>(exp_field) - 150 : -149;       // |x| = m * 2^e
  const int x_exp = exp_field ? static_cast<int>(exp_field) - 127 : -127;  // below every target's normal range
  const int min_exp = 1 - Bias;
  const int q = (x_exp > min_exp ? x_exp : min_exp) - Man;  // the target's quantum at |x| is 2^q
  const int dropped = q - e;                                // >= 0: every target is narrower than float
  const uint64_t kept = dropped >= 64 ? 0 : m >> dropped;
  const uint64_t rest = m - (dropped >= 64 ? 0 : kept << dropped);
  // The dropped part as a fraction of the quantum, in 32 bits; exact when at most 32 bits were dropped (with more,
  // the fraction is below 2^-8, so only the directed and stochastic modes can see it, and `rest` is still exact).
  const uint64_t fraction =
      dropped <= 32 ? rest << (32 - dropped) : (dropped - 32 >= 64 ? 0 : rest >> (dropped - 32));
  bool up = false;
  switch (mode) {
    case Rounding::kNearestEven:
      up = fraction > (1ull << 31) || (fraction == (1ull << 31) && (kept & 1u));
      break;
    case Rounding::kTowardZero:
      break;
    case Rounding::kUp:
      up = rest != 0 && !negative;
      break;
    case Rounding::kDown:
      up = rest != 0 && negative;
      break;
    case Rounding::kStochastic:
      up = fraction + rbits >= (1ull << 32);
      break;
  }
  return (static_cast<uint32_t>(q + Man + Bias - 1) << Man) + static_cast<uint32_t>(kept) + (up ? 1u : 0u);
}

/*! \brief `x` in T's bits. Sat: a result beyond T's largest finite magnitude (infinity included) becomes that
 *         magnitude; else as IEEE: infinity (NaN for a format without one), except that a directed rounding
 *         toward zero keeps the largest finite value. NaN stays NaN. */
template <typename T>
TL_HOST_DEVICE T convert(float x, Rounding mode, bool sat, uint32_t rbits) {
  using F = rounded_format<T>;
  const uint32_t f = bit_cast<uint32_t>(x), abs_bits = f & 0x7FFFFFFFu;
  const bool negative = (f >> 31) != 0;
  constexpr uint32_t kSign = 1u << (8 * sizeof(typename F::bits_t) - 1);
  if (abs_bits > 0x7F800000u) return bit_cast<T>(static_cast<typename F::bits_t>(F::kNaN));
  uint32_t code;
  if (abs_bits == 0x7F800000u) {
    code = sat ? F::kMaxFinite : F::kInfinity;
  } else {
    code = round_magnitude<F::kMan, F::kBias>(abs_bits, mode, negative, rbits);
    const bool toward_zero = mode == Rounding::kTowardZero || (mode == Rounding::kUp && negative) ||
                             (mode == Rounding::kDown && !negative);
    if (code > F::kMaxFinite) code = sat || toward_zero ? F::kMaxFinite : F::kInfinity;
  }
  if (!F::kHasInfinity && code == F::kInfinity) return bit_cast<T>(static_cast<typename F::bits_t>(F::kNaN));
  return bit_cast<T>(static_cast<typename F::bits_t>((negative ? kSign : 0u) | code));
}

}  // namespace detail

/*! \brief `x` converted to T (half_t, bfloat16_t, fp8_e4_t, fp8_e5_t) rounded by Mode, saturating if Sat. */
template <typename T, Rounding Mode, bool Sat>
TL_HOST_DEVICE T convert_rounded(float x) {
  static_assert(Mode != Rounding::kStochastic, "stochastic rounding takes random bits: tl::convert_stochastic");
  return detail::convert<T>(x, Mode, Sat, 0u);
}

/*! \brief `x` converted to T rounded stochastically: up when the dropped fraction of T's quantum, in 32 bits, plus
 *         `rbits` carries out of 32 bits (so up with probability the fraction, for uniformly random rbits). */
template <typename T, bool Sat>
TL_HOST_DEVICE T convert_stochastic(float x, uint32_t rbits) {
  return detail::convert<T>(x, Rounding::kStochastic, Sat, rbits);
}

}  // namespace tl
