/*!
 * \file tl_templates/sim/sim/mma_numerics.h
 * \brief Element formats, operand type codes and arithmetic shared by the matrix built-ins (mp_31 WMMA and SQMMA,
 *        mp_22 warp MMA).
 *
 * Operands arrive as 32-bit words (a fragment register, or shared memory). In a packed register, element i is bits
 * [(i % p) * bits, (i % p + 1) * bits) of word i / p, with p = 32 / bits elements per word (MUSA_LAYOUTS.md
 * notation; lower index in the low bits [I]). Every element decodes exactly: f16, bf16, tf32, e4m3 and e5m2 to
 * float, s8 and u8 to int32.
 *
 * Arithmetic [I: the hardware's internal order is not public]. Each output starts from C (or 0 when the
 * instruction overwrites), then adds the products for k = 0, 1, ..., K-1 in that order, rounding the product and
 * each sum to fp32 (nearest even):  acc = fp32(acc + fp32(A[m][k] * B[k][n])). A tf32 operand keeps the top 19
 * bits of its fp32 word (sign, 8 exponent and 10 mantissa bits); the low 13 bits are ignored, i.e. truncated [I].
 * Integer products and sums wrap modulo 2^32 into the s32 (or u32) accumulator.
 */
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "float_convert.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace mma {

/*! \brief The element formats the matrix models decode. */
enum class Elem : uint8_t { kU8, kS8, kF16, kBF16, kTF32, kE4M3, kE5M2 };

inline uint32_t ElemBits(Elem e) {
  switch (e) {
    case Elem::kF16:
    case Elem::kBF16: return 16;
    case Elem::kTF32: return 32;
    default: return 8;
  }
}
inline bool ElemIsFloat(Elem e) { return e != Elem::kU8 && e != Elem::kS8; }
inline const char* ElemName(Elem e) {
  switch (e) {
    case Elem::kU8: return "u8";
    case Elem::kS8: return "s8";
    case Elem::kF16: return "f16";
    case Elem::kBF16: return "bf16";
    case Elem::kTF32: return "tf32";
    case Elem::kE4M3: return "e4m3";
    case Elem::kE5M2: return "e5m2";
  }
  return "?";
}

/*!
 * \brief The `mma_type` argument of the mp_31 built-ins: mutlass's `MP31::TceABDtype` (include/mute/arch/
 *        mma_mp31.hpp), the same codes for WMMA and SQMMA. The mixed integer/float codes (F16S4 0x07, F16S8 0x08,
 *        ... S8BF16 0x10) are not modelled.
 */
enum MmaTypeCode : int {
  kU8U8 = 0x00,
  kS8S8 = 0x01,
  kF16F16 = 0x02,
  kBF16BF16 = 0x03,
  kTF32TF32 = 0x04,
  kE4M3E4M3 = 0x05,
  kE5M2E5M2 = 0x06,
  kE4M3E5M2 = 0x0B,
  kE5M2E4M3 = 0x0C,
};

/*! \brief The element formats of A and B; the accumulator is f32 for float inputs, s32/u32 for integers. */
struct OperandTypes {
  Elem a = Elem::kF16;
  Elem b = Elem::kF16;
  bool is_float() const { return ElemIsFloat(a); }
  bool is_8bit() const { return ElemBits(a) == 8; }
};

/*! \brief Decode an mp_31 `mma_type` code; false if it is not one the simulator models. */
inline bool DecodeMmaType(int code, OperandTypes* out) {
  switch (code) {
    case kU8U8: *out = {Elem::kU8, Elem::kU8}; return true;
    case kS8S8: *out = {Elem::kS8, Elem::kS8}; return true;
    case kF16F16: *out = {Elem::kF16, Elem::kF16}; return true;
    case kBF16BF16: *out = {Elem::kBF16, Elem::kBF16}; return true;
    case kTF32TF32: *out = {Elem::kTF32, Elem::kTF32}; return true;
    case kE4M3E4M3: *out = {Elem::kE4M3, Elem::kE4M3}; return true;
    case kE5M2E5M2: *out = {Elem::kE5M2, Elem::kE5M2}; return true;
    case kE4M3E5M2: *out = {Elem::kE4M3, Elem::kE5M2}; return true;
    case kE5M2E4M3: *out = {Elem::kE5M2, Elem::kE4M3}; return true;
  }
  return false;
}

inline float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/*! \brief The exact value of an 8-bit float: e4m3 ("fn": bias 7, no infinities, S.1111.111 is NaN) or e5m2 (IEEE
 *         binary8 with bias 15, infinities and NaNs). */
inline float DecodeFp8(uint32_t raw, bool e4m3) {
  const int exp_bits = e4m3 ? 4 : 5, man_bits = 7 - exp_bits, bias = e4m3 ? 7 : 15;
  const bool negative = (raw & 0x80u) != 0;
  const int exp = static_cast<int>((raw >> man_bits) & ((1u << exp_bits) - 1));
  const int man = static_cast<int>(raw & ((1u << man_bits) - 1));
  float magnitude;
  if (e4m3 && exp == 15 && man == 7) {
    magnitude = NAN;
  } else if (!e4m3 && exp == 31) {
    magnitude = man == 0 ? INFINITY : NAN;
  } else if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(man), 1 - bias - man_bits);
  } else {
    magnitude = std::ldexp(static_cast<float>(man + (1 << man_bits)), exp - bias - man_bits);
  }
  return negative ? -magnitude : magnitude;
}

/*! \brief A tf32 operand word as the matrix unit sees it: the low 13 mantissa bits dropped, NaN kept NaN. */
inline float DecodeTf32(uint32_t word) {
  if ((word & 0x7f800000u) == 0x7f800000u && (word & 0x007fffffu) != 0) return FloatFromBits(word | 0x00400000u);
  return FloatFromBits(word & 0xffffe000u);
}

/*! \brief Bits of element `index` of a packed register array (or of 32-bit words of shared memory). */
inline uint32_t PackedElement(const int32_t* words, uint32_t index, uint32_t bits) {
  const uint32_t per_word = 32 / bits;
  uint32_t word;
  std::memcpy(&word, words + index / per_word, sizeof(word));
  const uint32_t shift = (index % per_word) * bits;
  return bits == 32 ? word : (word >> shift) & ((1u << bits) - 1);
}

/*! \brief Decode one element from its raw bits: a float for floating-point formats (exact), else an int. */
template <Elem kElem>
inline float DecodeFloat(uint32_t raw) {
  if constexpr (kElem == Elem::kF16) return WidenToFloat<5, 10>(static_cast<uint16_t>(raw));
  if constexpr (kElem == Elem::kBF16) return WidenToFloat<8, 7>(static_cast<uint16_t>(raw));
  if constexpr (kElem == Elem::kTF32) return DecodeTf32(raw);
  if constexpr (kElem == Elem::kE4M3) return DecodeFp8(raw, true);
  if constexpr (kElem == Elem::kE5M2) return DecodeFp8(raw, false);
  return 0.0f;
}

// Keeps a value opaque to the optimizer at this point, at no cost: with it a product and a sum are each rounded to
// fp32 as written, whatever contraction (fma) or reassociation flags the kernel is built with.
#if defined(__x86_64__) || defined(__i386__)
#define TL_SIM_FP_FENCE(v) __asm__("" : "+x"(v))
#elif defined(__aarch64__) || defined(__arm__)
#define TL_SIM_FP_FENCE(v) __asm__("" : "+w"(v))
#else
#define TL_SIM_FP_FENCE(v) __asm__("" : "+m"(v))
#endif

using Float4 = float __attribute__((vector_size(16)));

inline Float4 LoadFloat4(const float* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

/*! \brief acc = fp32(acc + fp32(a * b)) lane by lane (the fences keep each rounding). */
inline Float4 MultiplyAdd(Float4 acc, Float4 a, Float4 b) {
  Float4 product = a * b;
  TL_SIM_FP_FENCE(product);
  acc = acc + product;
  TL_SIM_FP_FENCE(acc);
  return acc;
}

/*!
 * \brief Accumulate one row of outputs: for j < count, acc[j] gets a_row[k] * b[k * stride + j] added for
 *        k = 0 .. depth-1 in order, the product and each sum rounded to fp32 (the order the file comment
 *        states); the lanes j run side by side, four to a vector.
 */
inline void AccumulateRow(float* acc, const float* a_row, const float* b, uint32_t depth, uint32_t stride,
                          uint32_t count) {
  uint32_t j = 0;
  for (; j + 16 <= count; j += 16) {  // four vectors of lanes per pass over k
    Float4 s0 = LoadFloat4(acc + j), s1 = LoadFloat4(acc + j + 4), s2 = LoadFloat4(acc + j + 8),
           s3 = LoadFloat4(acc + j + 12);
    const float* col = b + j;
    for (uint32_t k = 0; k < depth; ++k, col += stride) {
      const Float4 x = {a_row[k], a_row[k], a_row[k], a_row[k]};
      s0 = MultiplyAdd(s0, x, LoadFloat4(col));
      s1 = MultiplyAdd(s1, x, LoadFloat4(col + 4));
      s2 = MultiplyAdd(s2, x, LoadFloat4(col + 8));
      s3 = MultiplyAdd(s3, x, LoadFloat4(col + 12));
    }
    std::memcpy(acc + j, &s0, sizeof(s0));
    std::memcpy(acc + j + 4, &s1, sizeof(s1));
    std::memcpy(acc + j + 8, &s2, sizeof(s2));
    std::memcpy(acc + j + 12, &s3, sizeof(s3));
  }
  for (; j + 4 <= count; j += 4) {
    Float4 s = LoadFloat4(acc + j);
    const float* col = b + j;
    for (uint32_t k = 0; k < depth; ++k, col += stride) {
      const Float4 x = {a_row[k], a_row[k], a_row[k], a_row[k]};
      s = MultiplyAdd(s, x, LoadFloat4(col));
    }
    std::memcpy(acc + j, &s, sizeof(s));
  }
  for (; j < count; ++j) {
    float s = acc[j];
    for (uint32_t k = 0; k < depth; ++k) {
      float product = a_row[k] * b[static_cast<size_t>(k) * stride + j];
      TL_SIM_FP_FENCE(product);
      s = s + product;
      TL_SIM_FP_FENCE(s);
    }
    acc[j] = s;
  }
}

#if defined(__x86_64__)
using Float8 = float __attribute__((vector_size(32)));

/*!
 * \brief AccumulateRows' leading rows four at a time, eight lanes per instruction (sixteen lanes per pass over k), where the CPU has AVX (the
 *        simulator builds for baseline x86-64, which has 4-lane SSE only): the same products and sums in the same
 *        order, each rounded to fp32 (`avx` without `fma`, and the fences, so nothing is contracted). Four rows of 8
 *        lanes are four independent sums per step of k. `count` is a multiple of 8; returns the rows done.
 */
__attribute__((target("avx"))) inline uint32_t AccumulateRowQuadsAvx(float* acc, uint32_t acc_stride, const float* a,
                                                                     uint32_t a_stride, uint32_t rows, const float* b,
                                                                     uint32_t depth, uint32_t stride,
                                                                     uint32_t count) {
  uint32_t i = 0;
  for (; i + 4 <= rows; i += 4) {  // written out: -O1 neither unrolls nor keeps an array of vectors in registers
    float* const r0 = acc + static_cast<size_t>(i) * acc_stride;
    float* const r1 = r0 + acc_stride;
    float* const r2 = r1 + acc_stride;
    float* const r3 = r2 + acc_stride;
    const float* const x0 = a + static_cast<size_t>(i) * a_stride;
    const float* const x1 = x0 + a_stride;
    const float* const x2 = x1 + a_stride;
    const float* const x3 = x2 + a_stride;
    uint32_t j = 0;
    // Sixteen lanes of four rows: eight independent sums per step of k, enough to keep both of a core's adders busy
    // through their latency (four sums, the 8-lane loop below, leave half of them idle).
    for (; j + 16 <= count; j += 16) {
      Float8 s0, s1, s2, s3, t0, t1, t2, t3;
      std::memcpy(&s0, r0 + j, sizeof(Float8));
      std::memcpy(&s1, r1 + j, sizeof(Float8));
      std::memcpy(&s2, r2 + j, sizeof(Float8));
      std::memcpy(&s3, r3 + j, sizeof(Float8));
      std::memcpy(&t0, r0 + j + 8, sizeof(Float8));
      std::memcpy(&t1, r1 + j + 8, sizeof(Float8));
      std::memcpy(&t2, r2 + j + 8, sizeof(Float8));
      std::memcpy(&t3, r3 + j + 8, sizeof(Float8));
      const float* col = b + j;
      for (uint32_t k = 0; k < depth; ++k, col += stride) {
        Float8 lo, hi;
        std::memcpy(&lo, col, sizeof(lo));
        std::memcpy(&hi, col + 8, sizeof(hi));
        const Float8 y0 = Float8{x0[k], x0[k], x0[k], x0[k], x0[k], x0[k], x0[k], x0[k]};
        const Float8 y1 = Float8{x1[k], x1[k], x1[k], x1[k], x1[k], x1[k], x1[k], x1[k]};
        const Float8 y2 = Float8{x2[k], x2[k], x2[k], x2[k], x2[k], x2[k], x2[k], x2[k]};
        const Float8 y3 = Float8{x3[k], x3[k], x3[k], x3[k], x3[k], x3[k], x3[k], x3[k]};
        Float8 p0 = y0 * lo, p1 = y1 * lo, p2 = y2 * lo, p3 = y3 * lo;
        Float8 q0 = y0 * hi, q1 = y1 * hi, q2 = y2 * hi, q3 = y3 * hi;
        TL_SIM_FP_FENCE(p0);
        TL_SIM_FP_FENCE(p1);
        TL_SIM_FP_FENCE(p2);
        TL_SIM_FP_FENCE(p3);
        TL_SIM_FP_FENCE(q0);
        TL_SIM_FP_FENCE(q1);
        TL_SIM_FP_FENCE(q2);
        TL_SIM_FP_FENCE(q3);
        s0 = s0 + p0;
        s1 = s1 + p1;
        s2 = s2 + p2;
        s3 = s3 + p3;
        t0 = t0 + q0;
        t1 = t1 + q1;
        t2 = t2 + q2;
        t3 = t3 + q3;
        TL_SIM_FP_FENCE(s0);
        TL_SIM_FP_FENCE(s1);
        TL_SIM_FP_FENCE(s2);
        TL_SIM_FP_FENCE(s3);
        TL_SIM_FP_FENCE(t0);
        TL_SIM_FP_FENCE(t1);
        TL_SIM_FP_FENCE(t2);
        TL_SIM_FP_FENCE(t3);
      }
      std::memcpy(r0 + j, &s0, sizeof(Float8));
      std::memcpy(r1 + j, &s1, sizeof(Float8));
      std::memcpy(r2 + j, &s2, sizeof(Float8));
      std::memcpy(r3 + j, &s3, sizeof(Float8));
      std::memcpy(r0 + j + 8, &t0, sizeof(Float8));
      std::memcpy(r1 + j + 8, &t1, sizeof(Float8));
      std::memcpy(r2 + j + 8, &t2, sizeof(Float8));
      std::memcpy(r3 + j + 8, &t3, sizeof(Float8));
    }
    for (; j < count; j += 8) {
      Float8 s0, s1, s2, s3;
      std::memcpy(&s0, r0 + j, sizeof(Float8));
      std::memcpy(&s1, r1 + j, sizeof(Float8));
      std::memcpy(&s2, r2 + j, sizeof(Float8));
      std::memcpy(&s3, r3 + j, sizeof(Float8));
      const float* col = b + j;
      for (uint32_t k = 0; k < depth; ++k, col += stride) {
        Float8 column;
        std::memcpy(&column, col, sizeof(column));
        Float8 p0 = Float8{x0[k], x0[k], x0[k], x0[k], x0[k], x0[k], x0[k], x0[k]} * column;
        Float8 p1 = Float8{x1[k], x1[k], x1[k], x1[k], x1[k], x1[k], x1[k], x1[k]} * column;
        Float8 p2 = Float8{x2[k], x2[k], x2[k], x2[k], x2[k], x2[k], x2[k], x2[k]} * column;
        Float8 p3 = Float8{x3[k], x3[k], x3[k], x3[k], x3[k], x3[k], x3[k], x3[k]} * column;
        TL_SIM_FP_FENCE(p0);
        TL_SIM_FP_FENCE(p1);
        TL_SIM_FP_FENCE(p2);
        TL_SIM_FP_FENCE(p3);
        s0 = s0 + p0;
        s1 = s1 + p1;
        s2 = s2 + p2;
        s3 = s3 + p3;
        TL_SIM_FP_FENCE(s0);
        TL_SIM_FP_FENCE(s1);
        TL_SIM_FP_FENCE(s2);
        TL_SIM_FP_FENCE(s3);
      }
      std::memcpy(r0 + j, &s0, sizeof(Float8));
      std::memcpy(r1 + j, &s1, sizeof(Float8));
      std::memcpy(r2 + j, &s2, sizeof(Float8));
      std::memcpy(r3 + j, &s3, sizeof(Float8));
    }
  }
  // back to SSE code: gcc adds no vzeroupper to a target("avx") function of a baseline build, and dirty upper
  // halves would slow every SSE instruction after it
  __builtin_ia32_vzeroupper();
  return i;
}

using Float16 = float __attribute__((vector_size(64)));

/*!
 * \brief AccumulateRows' leading rows eight at a time, sixteen lanes per instruction, where the CPU has AVX-512F:
 *        the same products and sums in the same order, each rounded to fp32 (no fma; the fences), eight independent
 *        sums per step of k. `count` is a multiple of 16; returns the rows done.
 */
__attribute__((target("avx512f"))) inline uint32_t AccumulateRowOctetsAvx512(float* acc, uint32_t acc_stride,
                                                                            const float* a, uint32_t a_stride,
                                                                            uint32_t rows, const float* b,
                                                                            uint32_t depth, uint32_t stride,
                                                                            uint32_t count) {
  uint32_t i = 0;
  for (; i + 8 <= rows; i += 8) {
    float* r[8];
    const float* x[8];
    for (int q = 0; q < 8; ++q) {
      r[q] = acc + static_cast<size_t>(i + q) * acc_stride;
      x[q] = a + static_cast<size_t>(i + q) * a_stride;
    }
    for (uint32_t j = 0; j < count; j += 16) {
      Float16 s0, s1, s2, s3, s4, s5, s6, s7;  // written out: -O1 keeps no array of vectors in registers
      std::memcpy(&s0, r[0] + j, sizeof(Float16));
      std::memcpy(&s1, r[1] + j, sizeof(Float16));
      std::memcpy(&s2, r[2] + j, sizeof(Float16));
      std::memcpy(&s3, r[3] + j, sizeof(Float16));
      std::memcpy(&s4, r[4] + j, sizeof(Float16));
      std::memcpy(&s5, r[5] + j, sizeof(Float16));
      std::memcpy(&s6, r[6] + j, sizeof(Float16));
      std::memcpy(&s7, r[7] + j, sizeof(Float16));
      const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3], *x4 = x[4], *x5 = x[5], *x6 = x[6], *x7 = x[7];
      const float* col = b + j;
      for (uint32_t k = 0; k < depth; ++k, col += stride) {
        Float16 column;
        std::memcpy(&column, col, sizeof(column));
        Float16 p0 = x0[k] * column, p1 = x1[k] * column, p2 = x2[k] * column, p3 = x3[k] * column;
        Float16 p4 = x4[k] * column, p5 = x5[k] * column, p6 = x6[k] * column, p7 = x7[k] * column;
        TL_SIM_FP_FENCE(p0);
        TL_SIM_FP_FENCE(p1);
        TL_SIM_FP_FENCE(p2);
        TL_SIM_FP_FENCE(p3);
        TL_SIM_FP_FENCE(p4);
        TL_SIM_FP_FENCE(p5);
        TL_SIM_FP_FENCE(p6);
        TL_SIM_FP_FENCE(p7);
        s0 = s0 + p0;
        s1 = s1 + p1;
        s2 = s2 + p2;
        s3 = s3 + p3;
        s4 = s4 + p4;
        s5 = s5 + p5;
        s6 = s6 + p6;
        s7 = s7 + p7;
        TL_SIM_FP_FENCE(s0);
        TL_SIM_FP_FENCE(s1);
        TL_SIM_FP_FENCE(s2);
        TL_SIM_FP_FENCE(s3);
        TL_SIM_FP_FENCE(s4);
        TL_SIM_FP_FENCE(s5);
        TL_SIM_FP_FENCE(s6);
        TL_SIM_FP_FENCE(s7);
      }
      std::memcpy(r[0] + j, &s0, sizeof(Float16));
      std::memcpy(r[1] + j, &s1, sizeof(Float16));
      std::memcpy(r[2] + j, &s2, sizeof(Float16));
      std::memcpy(r[3] + j, &s3, sizeof(Float16));
      std::memcpy(r[4] + j, &s4, sizeof(Float16));
      std::memcpy(r[5] + j, &s5, sizeof(Float16));
      std::memcpy(r[6] + j, &s6, sizeof(Float16));
      std::memcpy(r[7] + j, &s7, sizeof(Float16));
    }
  }
  __builtin_ia32_vzeroupper();  // back to SSE code (as AccumulateRowQuadsAvx)
  return i;
}

/*! \brief Whether this CPU runs AccumulateRowOctetsAvx512 (asked once). */
inline bool CpuHasAvx512() {
  static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f"));
  return has;
}

/*! \brief Whether this CPU runs AccumulateRowQuadsAvx (asked once). */
inline bool CpuHasAvx() {
  static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("avx"));
  return has;
}
#endif

/*!
 * \brief AccumulateRow for `rows` rows against the same columns: row i is acc + i * acc_stride and a + i * a_stride.
 *        With AVX, four rows at a time (AccumulateRowQuadsAvx); else, and for the rows left, two rows of 8 lanes go
 *        through k together, so that four independent sums hide the adder's latency. `vector_width` 4 keeps to
 *        SSE (a test compares the two paths).
 */
inline void AccumulateRows(float* acc, uint32_t acc_stride, const float* a, uint32_t a_stride, uint32_t rows,
                           const float* b, uint32_t depth, uint32_t stride, uint32_t count, int vector_width = 8) {
  uint32_t i = 0;
#if defined(__x86_64__)
  if (vector_width == 8 && count % 8 == 0 && rows >= 4 && CpuHasAvx())
    i = AccumulateRowQuadsAvx(acc, acc_stride, a, a_stride, rows, b, depth, stride, count);
#endif
  if (count % 8 == 0) {
    for (; i + 2 <= rows; i += 2) {
      float* acc0 = acc + static_cast<size_t>(i) * acc_stride;
      float* acc1 = acc0 + acc_stride;
      const float* a0 = a + static_cast<size_t>(i) * a_stride;
      const float* a1 = a0 + a_stride;
      for (uint32_t j = 0; j < count; j += 8) {
        Float4 s0 = LoadFloat4(acc0 + j), s1 = LoadFloat4(acc0 + j + 4);
        Float4 t0 = LoadFloat4(acc1 + j), t1 = LoadFloat4(acc1 + j + 4);
        const float* col = b + j;
        for (uint32_t k = 0; k < depth; ++k, col += stride) {
          const Float4 b0 = LoadFloat4(col), b1 = LoadFloat4(col + 4);
          const Float4 x = {a0[k], a0[k], a0[k], a0[k]}, y = {a1[k], a1[k], a1[k], a1[k]};
          s0 = MultiplyAdd(s0, x, b0);
          s1 = MultiplyAdd(s1, x, b1);
          t0 = MultiplyAdd(t0, y, b0);
          t1 = MultiplyAdd(t1, y, b1);
        }
        std::memcpy(acc0 + j, &s0, sizeof(s0));
        std::memcpy(acc0 + j + 4, &s1, sizeof(s1));
        std::memcpy(acc1 + j, &t0, sizeof(t0));
        std::memcpy(acc1 + j + 4, &t1, sizeof(t1));
      }
    }
  }
  for (; i < rows; ++i)
    AccumulateRow(acc + static_cast<size_t>(i) * acc_stride, a + static_cast<size_t>(i) * a_stride, b, depth, stride,
                  count);
}

/*!
 * \brief AccumulateRows, taking eight rows of sixteen lanes at a time with AVX-512 where the CPU has it (the
 *        simulator runtime's SQMMA model; kept apart from AccumulateRows so that the kernels that inline the warp
 *        MMA models do not compile it). `vector_width` as AccumulateRows'; 16 allows AVX-512.
 */
inline void AccumulateRowsWide(float* acc, uint32_t acc_stride, const float* a, uint32_t a_stride, uint32_t rows,
                               const float* b, uint32_t depth, uint32_t stride, uint32_t count,
                               int vector_width = 16) {
  uint32_t i = 0;
#if defined(__x86_64__)
  if (vector_width == 16 && count % 16 == 0 && rows >= 8 && CpuHasAvx512())
    i = AccumulateRowOctetsAvx512(acc, acc_stride, a, a_stride, rows, b, depth, stride, count);
#endif
  if (i < rows)
    AccumulateRows(acc + static_cast<size_t>(i) * acc_stride, acc_stride, a + static_cast<size_t>(i) * a_stride,
                   a_stride, rows - i, b, depth, stride, count, vector_width == 16 ? 8 : vector_width);
}

/*! \brief AccumulateRow for integer operands: products and sums wrap modulo 2^32 like the s32 accumulator. */
inline void AccumulateRow(uint32_t* acc, const int32_t* a_row, const int32_t* b, uint32_t depth, uint32_t stride,
                          uint32_t count) {
  for (uint32_t k = 0; k < depth; ++k) {
    const uint32_t x = static_cast<uint32_t>(a_row[k]);
    const int32_t* col = b + static_cast<size_t>(k) * stride;
    for (uint32_t j = 0; j < count; ++j) acc[j] += x * static_cast<uint32_t>(col[j]);
  }
}

}  // namespace mma
}  // namespace tl_sim
#pragma GCC visibility pop
