/*!
 * \file tl_templates/sim/sim/float_convert.h
 * \brief Bit-exact conversions between float/double and the 16-bit formats (binary16: 5 exponent bits, 10 mantissa
 *        bits; bfloat16: 8 and 7), shared by musa_fp16.h and musa_bf16.h.
 *
 * Narrowing rounds to nearest, ties to even, directly from the source (a double is not rounded to float first,
 * which could round twice). Overflow gives infinity, underflow gradual subnormals, then signed zero. A NaN keeps
 * its sign and top payload bits and is made quiet. Widening to float is exact and keeps NaN payloads.
 * FmaRoundToOdd gives 16-bit fused multiply-add a single correct rounding.
 */
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief Round `value` (float or double) to the format with kExp exponent bits and kMan mantissa bits. */
template <int kExp, int kMan, class Src>
inline uint16_t NarrowRne(Src value) {
  static_assert(std::is_same<Src, float>::value || std::is_same<Src, double>::value, "float or double source");
  using Bits = std::conditional_t<sizeof(Src) == 4, uint32_t, uint64_t>;
  constexpr int kSrcExp = sizeof(Src) == 4 ? 8 : 11;
  constexpr int kSrcMan = sizeof(Src) == 4 ? 23 : 52;
  constexpr int kSrcBias = (1 << (kSrcExp - 1)) - 1;
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr int kMaxExp = (1 << kExp) - 1;
  constexpr uint16_t kInf = static_cast<uint16_t>(kMaxExp << kMan);

  Bits bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> (kSrcExp + kSrcMan)) << (kExp + kMan));
  const int exp = static_cast<int>((bits >> kSrcMan) & ((Bits{1} << kSrcExp) - 1));
  const Bits man = bits & ((Bits{1} << kSrcMan) - 1);

  if (exp == (1 << kSrcExp) - 1) {
    if (man == 0) return sign | kInf;
    return static_cast<uint16_t>(sign | kInf | (1u << (kMan - 1)) | static_cast<uint16_t>(man >> (kSrcMan - kMan)));
  }
  if (exp == 0 && man == 0) return sign;
  // value = sig * 2^(e - kSrcMan)
  const int e = exp == 0 ? 1 - kSrcBias : exp - kSrcBias;
  const Bits sig = exp == 0 ? man : (man | (Bits{1} << kSrcMan));
  const int biased = e + kBias;
  if (biased >= kMaxExp) return sign | kInf;
  int shift = kSrcMan - kMan;
  uint32_t packed = 0;  // exponent field of the result minus the implicit bit that `kept` carries
  if (biased >= 1) {
    packed = static_cast<uint32_t>(biased - 1) << kMan;
  } else {
    shift += 1 - biased;  // subnormal result
  }
  if (shift > kSrcMan + 1) return sign;  // below half of the smallest subnormal
  const Bits kept = sig >> shift;
  const Bits rest = sig & ((Bits{1} << shift) - 1);
  const Bits half = Bits{1} << (shift - 1);
  packed += static_cast<uint32_t>(kept);
  if (rest > half || (rest == half && (packed & 1u))) ++packed;  // a carry may reach the exponent, even infinity
  return static_cast<uint16_t>(sign | packed);
}

/*! \brief The exact float value of a 16-bit pattern of the format (kExp, kMan). */
template <int kExp, int kMan>
inline float WidenToFloat(uint16_t h) {
  uint32_t bits;
  if constexpr (kExp == 8) {
    bits = static_cast<uint32_t>(h) << 16;  // bfloat16 is the top half of a float
  } else {
    constexpr int kBias = (1 << (kExp - 1)) - 1;
    constexpr uint32_t kMaxExp = (1u << kExp) - 1;
    const uint32_t sign = static_cast<uint32_t>(h >> (kExp + kMan)) << 31;
    const uint32_t exp = (h >> kMan) & kMaxExp;
    uint32_t man = h & ((1u << kMan) - 1);
    if (exp == kMaxExp) {
      bits = sign | 0x7f800000u | (man << (23 - kMan));
    } else if (exp != 0) {
      bits = sign | ((exp - kBias + 127) << 23) | (man << (23 - kMan));
    } else if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise (every one is a normal float)
      int e = 1 - kBias;
      while ((man & (1u << kMan)) == 0) {
        man <<= 1;
        --e;
      }
      bits = sign | (static_cast<uint32_t>(e + 127) << 23) | ((man & ((1u << kMan) - 1)) << (23 - kMan));
    }
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/*!
 * \brief a*b+c for operands of a 16-bit format, rounded to odd in double: narrowing the result with NarrowRne
 *        then rounds a*b+c correctly once (53 >= 2 + the format's 11 or 8 significand bits). A plain double fma
 *        could land exactly on a 16-bit tie that the exact sum is not on, and then round the wrong way.
 */
inline double FmaRoundToOdd(double a, double b, double c) {
  const double p = a * b;  // exact: at most 22 significant bits, far inside double's range
  const double s = p + c;
  const double bp = s - p;  // TwoSum: s + err == p + c exactly
  const double err = (p - (s - bp)) + (c - bp);
  if (err == 0.0 || !std::isfinite(s)) return s;
  uint64_t bits;
  std::memcpy(&bits, &s, sizeof(bits));
  if ((bits & 1u) != 0) return s;  // already the odd neighbour of the exact value
  return std::nextafter(s, err > 0 ? HUGE_VAL : -HUGE_VAL);
}

#if defined(__x86_64__)
/*! \brief WidenF16's leading groups of eight with F16C (one instruction per group); returns how many it did. The
 *         instruction quiets a signalling NaN, which the simulator keeps as it is: a group holding any NaN is
 *         widened element by element. */
__attribute__((target("avx,f16c"))) inline size_t WidenF16GroupsF16c(const uint16_t* raw, float* out, size_t count) {
  using Half8 = short __attribute__((vector_size(16)));
  using Float8 = float __attribute__((vector_size(32)));
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    Half8 h;
    std::memcpy(&h, raw + i, sizeof(h));
    const Half8 nan = (h & 0x7fff) > 0x7c00;
    uint64_t any[2];
    std::memcpy(any, &nan, sizeof(any));
    if ((any[0] | any[1]) != 0) {
      for (size_t j = i; j < i + 8; ++j) out[j] = WidenToFloat<5, 10>(raw[j]);
      continue;
    }
    const Float8 f = __builtin_ia32_vcvtph2ps256(h);
    std::memcpy(out + i, &f, sizeof(f));
  }
  __builtin_ia32_vzeroupper();  // back to SSE code: gcc adds none to a target("avx") function of a baseline build
  return i;
}

inline bool CpuHasF16c() {
  static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c"));
  return has;
}
#endif

/*!
 * \brief NarrowRne from float, with F16C's vcvtps2ph for binary16 where the CPU has it: the same bits (round to
 *        nearest even by the immediate, whatever MXCSR says; a NaN keeps its sign and top payload bits and is made
 *        quiet; float subnormals round to signed zero with or without DAZ), in one instruction instead of ~30.
 *        Inline asm, since a kernel's baseline build cannot inline a target("f16c") function; the test of the flag
 *        reads a variable initialised when the library loads (false until then: the portable path).
 */
#if defined(__x86_64__) && defined(__GNUC__)
inline const bool kNarrowWithF16c = (__builtin_cpu_init(), __builtin_cpu_supports("f16c"));
#endif
template <int kExp, int kMan>
inline uint16_t NarrowFromFloat(float value) {
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (kExp == 5 && kMan == 10) {
    if (kNarrowWithF16c) {
      using Half8 = short __attribute__((vector_size(16)));
      Half8 bits;
      asm("vcvtps2ph $0, %1, %0" : "=x"(bits) : "x"(value));
      return static_cast<uint16_t>(bits[0]);
    }
  }
#endif
  return NarrowRne<kExp, kMan>(value);
}

/*! \brief out[i] = the exact value of binary16 element raw[i], for i < count (WidenToFloat, NaN payloads kept). */
inline void WidenF16(const uint16_t* raw, float* out, size_t count) {
  size_t i = 0;
#if defined(__x86_64__)
  if (CpuHasF16c()) i = WidenF16GroupsF16c(raw, out, count);
#endif
  for (; i < count; ++i) out[i] = WidenToFloat<5, 10>(raw[i]);
}


}  // namespace tl_sim
#pragma GCC visibility pop
