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
#include <vector>

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

/*!
 * \brief An R x K operand (A with R = M, or B with R = N), decoded to values: floats for floating-point formats,
 *        int32 for integers. `negate` applies the SQMMA scale flag (exact for both).
 */
class DecodedOperand {
 public:
  void Reset(uint32_t rows, uint32_t cols, Elem elem, bool negate) {
    rows_ = rows;
    cols_ = cols;
    elem_ = elem;
    negate_ = negate;
    if (ElemIsFloat(elem)) {
      f_.assign(static_cast<size_t>(rows) * cols, NAN);
    } else {
      i_.assign(static_cast<size_t>(rows) * cols, 0);
    }
  }
  /*! \brief Store element (r, k) from its raw bits in the operand's format. */
  void Set(uint32_t r, uint32_t k, uint32_t raw) {
    const size_t at = static_cast<size_t>(r) * cols_ + k;
    switch (elem_) {
      case Elem::kU8: i_[at] = static_cast<int32_t>(raw & 0xffu); break;
      case Elem::kS8: i_[at] = static_cast<int8_t>(raw & 0xffu); break;
      case Elem::kF16: f_[at] = WidenToFloat<5, 10>(static_cast<uint16_t>(raw)); break;
      case Elem::kBF16: f_[at] = WidenToFloat<8, 7>(static_cast<uint16_t>(raw)); break;
      case Elem::kTF32: f_[at] = DecodeTf32(raw); break;
      case Elem::kE4M3: f_[at] = DecodeFp8(raw, true); break;
      case Elem::kE5M2: f_[at] = DecodeFp8(raw, false); break;
    }
    if (negate_) {
      if (ElemIsFloat(elem_)) {
        f_[at] = -f_[at];
      } else {
        i_[at] = static_cast<int32_t>(0u - static_cast<uint32_t>(i_[at]));
      }
    }
  }
  const float* FloatRow(uint32_t r) const { return f_.data() + static_cast<size_t>(r) * cols_; }
  const int32_t* IntRow(uint32_t r) const { return i_.data() + static_cast<size_t>(r) * cols_; }
  uint32_t cols() const { return cols_; }

 private:
  uint32_t rows_ = 0, cols_ = 0;
  Elem elem_ = Elem::kF16;
  bool negate_ = false;
  std::vector<float> f_;
  std::vector<int32_t> i_;
};

/*!
 * \brief One accumulator word: start from `c_word` (when `use_c`) or zero, then add A[m][k] * B[n][k] for k
 *        ascending, in fp32 (float formats) or modulo 2^32 (integers). The products and sums are formed in double
 *        and rounded to float: exact for the product, and innocuous double rounding for the sum (53 >= 2 * 24 + 2),
 *        which also keeps a compiler from contracting them into an fma with a different rounding.
 */
inline uint32_t DotWord(const DecodedOperand& a, uint32_t m, const DecodedOperand& b, uint32_t n, uint32_t c_word,
                        bool use_c, bool is_float) {
  const uint32_t depth = a.cols();
  uint32_t out;
  if (is_float) {
    const float* x = a.FloatRow(m);
    const float* y = b.FloatRow(n);
    float acc = use_c ? FloatFromBits(c_word) : 0.0f;
    for (uint32_t k = 0; k < depth; ++k) {
      const float product = static_cast<float>(static_cast<double>(x[k]) * static_cast<double>(y[k]));
      acc = static_cast<float>(static_cast<double>(acc) + static_cast<double>(product));
    }
    std::memcpy(&out, &acc, sizeof(out));
  } else {
    const int32_t* x = a.IntRow(m);
    const int32_t* y = b.IntRow(n);
    uint32_t acc = use_c ? c_word : 0u;
    for (uint32_t k = 0; k < depth; ++k)
      acc += static_cast<uint32_t>(x[k]) * static_cast<uint32_t>(y[k]);  // wraps like the s32 accumulator
    out = acc;
  }
  return out;
}

}  // namespace mma
}  // namespace tl_sim
#pragma GCC visibility pop
