/*!
 * \file tl_templates/musa/quantize.h
 * \brief Batch decoders of packed low-bit weights, under the names upstream TileLang's intrinsic groups give them
 *        (tilelang.quantize.get_lop3_intrin_group / get_mxfp_intrin_group return `#include` of this header as their
 *        source). Upstream implements them with NVIDIA PTX (lop3.b32, sub.f16x2, prmt.b32, mul.bf16x2); here they
 *        are plain integer and float arithmetic with the same results, so mcc and the simulator both compile them.
 *
 * Layouts decoded (the ones interleave_weight and the twiddled MXFP4 format produce):
 *  - decode_i{4,2}{u,s}_to_f16[_scale](src, dst[, scale], N = 8): for each group of 8 outputs, one 32-bit word w
 *    (4-bit fields: the group's 4 bytes; 2-bit fields: 2 bytes b0, b1 spread to w = b0 | b1 << 16). Output 2i is
 *    field i of w's low half, output 2i + 1 field i of w's high half (fields counted from bit 0, `nbit` wide).
 *    Unsigned fields decode to their value; signed ("s") ones to value - 2^(nbit-1) (offset binary). `_scale`
 *    multiplies each by *scale, rounded once to the output type (as fma.rn.f16x2 with a zero addend).
 *  - decode_fp4_to_bf16_twiddling(src, dst, N = 8): for each i < N, the 32-bit word of bytes src[4i..4i+3], byte-
 *    reversed (x = b0 << 24 | b1 << 16 | b2 << 8 | b3), yields 8 E2M1 values in the bit positions of bf16 lanes:
 *    code j (j < 3) is x << 3j masked with 0x81C081C0, code 3 gathers bit 15 from x << 1, bits 8-7 from x >> 3 and
 *    bit 6 from x >> 7. In each 16-bit lane, bit 15 is the sign, bits 8-7 the exponent (bias 1), bit 6 the
 *    mantissa. dst[8i + j] is code j's high lane, dst[8i + j + 4] its low lane.
 */
#pragma once

#include "common.h"

namespace tl {
namespace quant {

/*! \brief An output element from a float that holds it exactly or is to be rounded once (half, bfloat16, float). */
template <typename T>
TL_DEVICE T from_float(float value) {
  return static_cast<T>(value);
}

/*! \brief 8 values of `Bits`-wide fields of one word, in the interleaved order described in the file comment. */
template <int Bits, bool Signed, typename Out>
TL_DEVICE void decode_interleaved_word(uint32_t word, Out *dst, const float *scale) {
  constexpr uint32_t kMask = (1u << Bits) - 1u;
  constexpr int kOffset = Signed ? (1 << (Bits - 1)) : 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int lo = static_cast<int>((word >> (Bits * i)) & kMask) - kOffset;
    const int hi = static_cast<int>((word >> (16 + Bits * i)) & kMask) - kOffset;
    dst[2 * i] = from_float<Out>(scale ? static_cast<float>(lo) * *scale : static_cast<float>(lo));
    dst[2 * i + 1] = from_float<Out>(scale ? static_cast<float>(hi) * *scale : static_cast<float>(hi));
  }
}

/*! \brief The word of group g: 4 bytes for 4-bit fields, 2 bytes spread over the halves for 2-bit fields. */
template <int Bits>
TL_DEVICE uint32_t interleaved_word(const uint8_t *bytes, int group) {
  if (Bits == 4) {
    const uint8_t *b = bytes + 4 * group;
    return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
  }
  const uint8_t *b = bytes + 2 * group;
  return uint32_t(b[0]) | uint32_t(b[1]) << 16;
}

template <int Bits, bool Signed, typename In, typename Out>
TL_DEVICE void decode_interleaved(const In *src, Out *dst, int n, const float *scale) {
  static_assert(Bits == 4 || Bits == 2, "interleaved decode handles 4- and 2-bit fields");
  const uint8_t *bytes = reinterpret_cast<const uint8_t *>(src);
  for (int g = 0; g < n / 8; ++g) decode_interleaved_word<Bits, Signed>(interleaved_word<Bits>(bytes, g), dst + 8 * g, scale);
}

/*! \brief decode_interleaved with every output multiplied by `*scale` (any type that converts to float). */
template <int Bits, bool Signed, typename In, typename Out, typename Scale>
TL_DEVICE void decode_interleaved_scaled(const In *src, Out *dst, int n, const Scale *scale) {
  const float s = static_cast<float>(*scale);
  decode_interleaved<Bits, Signed>(src, dst, n, &s);
}

/*! \brief bf16 bits of the E2M1 value whose sign, exponent and mantissa sit at bits 15, 8-7 and 6 of `lane`
 *         (what PTX gets by multiplying that lane, read as bf16, by 2^126: the exponent rebias is exact). */
TL_DEVICE uint16_t twiddled_e2m1_to_bf16_bits(uint32_t lane) {
  const uint32_t sign = (lane >> 15) & 1u, exponent = (lane >> 7) & 3u, mantissa = (lane >> 6) & 1u;
  if (exponent == 0) return static_cast<uint16_t>(sign << 15 | (mantissa ? 126u << 7 : 0u));  // +-0.5 or +-0
  return static_cast<uint16_t>(sign << 15 | (exponent + 126u) << 7 | mantissa << 6);
}

}  // namespace quant
}  // namespace tl

// ---- integer fields to half (upstream's lop3 group names) ----------------------------------------------------------

template <typename T1, typename T2>
TL_DEVICE void decode_i4u_to_f16(T1 *src, T2 *dst, const int N = 8) {
  tl::quant::decode_interleaved<4, false>(src, dst, N, nullptr);
}

template <typename T1, typename T2>
TL_DEVICE void decode_i4s_to_f16(T1 *src, T2 *dst, const int N = 8) {
  tl::quant::decode_interleaved<4, true>(src, dst, N, nullptr);
}

template <typename T1, typename T2>
TL_DEVICE void decode_i2u_to_f16(T1 *src, T2 *dst, const int N = 8) {
  tl::quant::decode_interleaved<2, false>(src, dst, N, nullptr);
}

template <typename T1, typename T2>
TL_DEVICE void decode_i2s_to_f16(T1 *src, T2 *dst, const int N = 8) {
  tl::quant::decode_interleaved<2, true>(src, dst, N, nullptr);
}

template <typename T1, typename T2, typename T3>
TL_DEVICE void decode_i4u_to_f16_scale(T1 *src, T2 *dst, T3 *scale, const int N = 8) {
  tl::quant::decode_interleaved_scaled<4, false>(src, dst, N, scale);
}

template <typename T1, typename T2, typename T3>
TL_DEVICE void decode_i4s_to_f16_scale(T1 *src, T2 *dst, T3 *scale, const int N = 8) {
  tl::quant::decode_interleaved_scaled<4, true>(src, dst, N, scale);
}

template <typename T1, typename T2, typename T3>
TL_DEVICE void decode_i2u_to_f16_scale(T1 *src, T2 *dst, T3 *scale, const int N = 8) {
  tl::quant::decode_interleaved_scaled<2, false>(src, dst, N, scale);
}

template <typename T1, typename T2, typename T3>
TL_DEVICE void decode_i2s_to_f16_scale(T1 *src, T2 *dst, T3 *scale, const int N = 8) {
  tl::quant::decode_interleaved_scaled<2, true>(src, dst, N, scale);
}

// ---- twiddled MXFP4 to bfloat16 (upstream's mxfp group name) -------------------------------------------------------

template <typename T1, typename T2>
TL_DEVICE void decode_fp4_to_bf16_twiddling(T1 *src, T2 *dst, const int N = 8) {
  static_assert(sizeof(T2) == 2, "decode_fp4_to_bf16_twiddling writes bfloat16 outputs");
  for (int i = 0; i < N; ++i) {
    const uint8_t *b = reinterpret_cast<const uint8_t *>(src + 4 * i);  // the word at element 4i, as upstream reads it
    const uint32_t x = uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
    const uint32_t kFields = 0x81C081C0u;
    const uint32_t codes[4] = {x & kFields, (x << 3) & kFields, (x << 6) & kFields,
                               ((x << 1) & 0x80008000u) | ((x >> 3) & 0x01800180u) | ((x >> 7) & 0x00400040u)};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint16_t high = tl::quant::twiddled_e2m1_to_bf16_bits(codes[j] >> 16);
      const uint16_t low = tl::quant::twiddled_e2m1_to_bf16_bits(codes[j] & 0xFFFFu);
      __builtin_memcpy(&dst[8 * i + j], &high, 2);
      __builtin_memcpy(&dst[8 * i + j + 4], &low, 2);
    }
  }
}
