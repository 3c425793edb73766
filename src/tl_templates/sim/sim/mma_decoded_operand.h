/*!
 * \file tl_templates/sim/sim/mma_decoded_operand.h
 * \brief An MMA operand decoded from its raw bits to values, for the matrix models' arithmetic. Included only where
 *        the models' bodies are compiled (warp_mma_outlined.h: the runtime, a self-contained library) and by tests
 *        that call the row kernels directly, never by a kernel library that links the runtime, whose build would
 *        otherwise instantiate its containers (visibility.h, TL_SIM_OUTLINED).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mma_numerics.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace mma {

/*!
 * \brief An R x K operand (A with R = M, or B with R = N), decoded to values: floats for floating-point formats,
 *        int32 for integers. `negate` applies the SQMMA scale flag (exact for both).
 */
class DecodedOperand {
 public:
  /*! \brief Decode every element from its raw bits, given in row-major order (`raw[r * cols + k]`). */
  void Decode(uint32_t rows, uint32_t cols, Elem elem, bool negate, const uint32_t* raw) {
    cols_ = cols;
    elem_ = elem;
    const size_t count = static_cast<size_t>(rows) * cols;
    if (ElemIsFloat(elem)) {
      f_.resize(count);
      switch (elem) {
        case Elem::kF16: DecodeAll<Elem::kF16>(raw, count); break;
        case Elem::kBF16: DecodeAll<Elem::kBF16>(raw, count); break;
        case Elem::kTF32: DecodeAll<Elem::kTF32>(raw, count); break;
        case Elem::kE4M3: DecodeAll<Elem::kE4M3>(raw, count); break;
        case Elem::kE5M2: DecodeAll<Elem::kE5M2>(raw, count); break;
        default: break;
      }
    } else {
      i_.resize(count);
      for (size_t at = 0; at < count; ++at)
        i_[at] = elem == Elem::kS8 ? static_cast<int8_t>(raw[at] & 0xffu) : static_cast<int32_t>(raw[at] & 0xffu);
    }
    if (negate)
      for (size_t at = 0; at < count; ++at) Negate(at);
  }
  /*!
   * \brief The operand column by column for the row kernels below: `out[k * count + j]` is element
   *        (order[j], k), so the rows `order` names become contiguous lanes for each k.
   */
  void Columns(const uint32_t* order, uint32_t count, std::vector<float>* f, std::vector<int32_t>* i) const {
    const bool is_float = ElemIsFloat(elem_);
    if (is_float) {
      f->resize(static_cast<size_t>(cols_) * count);
    } else {
      i->resize(static_cast<size_t>(cols_) * count);
    }
    for (uint32_t j = 0; j < count; ++j) {
      const size_t row = static_cast<size_t>(order[j]) * cols_;
      for (uint32_t k = 0; k < cols_; ++k) {
        if (is_float) {
          (*f)[static_cast<size_t>(k) * count + j] = f_[row + k];
        } else {
          (*i)[static_cast<size_t>(k) * count + j] = i_[row + k];
        }
      }
    }
  }
  const float* FloatRow(uint32_t r) const { return f_.data() + static_cast<size_t>(r) * cols_; }
  const int32_t* IntRow(uint32_t r) const { return i_.data() + static_cast<size_t>(r) * cols_; }
  uint32_t cols() const { return cols_; }

 private:
  template <Elem kElem>
  void DecodeAll(const uint32_t* raw, size_t count) {
    for (size_t at = 0; at < count; ++at) f_[at] = DecodeFloat<kElem>(raw[at]);
  }
  void Negate(size_t at) {
    if (ElemIsFloat(elem_)) {
      f_[at] = -f_[at];
    } else {
      i_[at] = static_cast<int32_t>(0u - static_cast<uint32_t>(i_[at]));
    }
  }

  uint32_t cols_ = 0;
  Elem elem_ = Elem::kF16;
  std::vector<float> f_;
  std::vector<int32_t> i_;
};

}  // namespace mma
}  // namespace tl_sim
#pragma GCC visibility pop
