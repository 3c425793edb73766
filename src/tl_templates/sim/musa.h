/*!
 * \file tl_templates/sim/musa.h
 * \brief The simulator's musa.h: the part of the MUSA driver API that generated code uses, the TME tensor
 *        descriptor (declared in decl/musa_driver_decl.h, shared with the device-compiler check) and its encoder.
 *
 * As on the device, a `MUtensorDescriptor` is an opaque 64-byte-aligned object that the host fills with
 * muTensorDescriptorEncode and passes to the kernel by value (`__grid_constant__ const MUtensorDescriptor`); device
 * code hands its address to the TME built-ins (sim/tme.h), which decode it. The enumerators' values are those of
 * Moore Threads' TileLang port (src/backend/musa/tma_types.h); the descriptor's size (128 bytes, as CUDA's
 * CUtensorMap) is [I]. The encoder validates as CUDA's cuTensorMapEncodeTiled does for the rules MUSA_FACTS.md
 * names (rank 1..5, global address and strides multiples of 16 bytes) and returns MUSA_ERROR_INVALID_VALUE
 * otherwise; interleaved layouts and the 4-bit packed types are not modelled (MUSA_ERROR_NOT_SUPPORTED).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "decl/musa_driver_decl.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief What the simulator keeps inside a MUtensorDescriptor (device code never looks inside). */
struct TensorDescriptor {
  static constexpr uint32_t kMagic = 0x54ad35e1u;
  static constexpr uint32_t kMaxRank = 5;
  uint32_t magic;
  uint32_t data_type;
  uint32_t rank;
  uint32_t elem_bytes;
  uint64_t address;
  uint64_t dims[kMaxRank];     // innermost first
  uint64_t strides[kMaxRank];  // bytes; strides[0] = elem_bytes
  uint64_t oob_fill;
};
static_assert(sizeof(TensorDescriptor) <= sizeof(MUtensorDescriptor), "the model fits in the opaque descriptor");

/*! \brief Bytes per element of `type`; 0 for the types the model does not handle. */
inline uint32_t TensorElementBytes(uint32_t type) {
  switch (type) {
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_INT8:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_UINT8:
      return 1;
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_INT16:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_UINT16:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT16:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_BFLOAT16:
      return 2;
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_INT32:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_UINT32:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT32:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_TFLOAT32:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT32_FTZ:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_TFLOAT32_FTZ:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT32_TFLOAT32_RNE:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT32_FTZ_TFLOAT32_RNE:
      return 4;  // copied bit for bit: the FTZ/TF32 conversions are not modelled [I]
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_INT64:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_UINT64:
    case MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

}  // namespace tl_sim

// muTensorDescriptorEncode: declared and described in decl/musa_driver_decl.h.
inline MUresult muTensorDescriptorEncode(MUtensorDescriptor* tensorDesc, MUtensorDescriptorDataType tensorDataType,
                                         muuint32_t tensorRank, void* globalAddress, const muuint64_t* globalDim,
                                         const muuint64_t* globalStrides, MUtensorDescriptorInterleave interleave,
                                         muuint64_t oobConstantFill) {
  using tl_sim::TensorDescriptor;
  if (tensorDesc == nullptr || reinterpret_cast<uintptr_t>(tensorDesc) % 64 != 0) return MUSA_ERROR_INVALID_VALUE;
  if (tensorRank < 1 || tensorRank > TensorDescriptor::kMaxRank) return MUSA_ERROR_INVALID_VALUE;
  if (globalAddress == nullptr || reinterpret_cast<uintptr_t>(globalAddress) % 16 != 0)
    return MUSA_ERROR_INVALID_VALUE;
  if (globalDim == nullptr || (tensorRank > 1 && globalStrides == nullptr)) return MUSA_ERROR_INVALID_VALUE;
  if (static_cast<int>(tensorDataType) < 0 || tensorDataType > MU_TENSOR_DESCRIPTOR_DATA_TYPE_16b4_b8)
    return MUSA_ERROR_INVALID_VALUE;
  if (static_cast<int>(interleave) < 0 || interleave > MU_TENSOR_DESCRIPTOR_INTERLEAVE_256B)
    return MUSA_ERROR_INVALID_VALUE;
  const uint32_t elem = tl_sim::TensorElementBytes(tensorDataType);
  if (elem == 0 || interleave != MU_TENSOR_DESCRIPTOR_INTERLEAVE_NONE) return MUSA_ERROR_NOT_SUPPORTED;
  TensorDescriptor d{};
  d.magic = TensorDescriptor::kMagic;
  d.data_type = tensorDataType;
  d.rank = tensorRank;
  d.elem_bytes = elem;
  d.address = reinterpret_cast<uint64_t>(globalAddress);
  d.oob_fill = oobConstantFill;
  d.strides[0] = elem;
  for (uint32_t i = 0; i < tensorRank; ++i) {
    if (globalDim[i] == 0 || globalDim[i] > (uint64_t{1} << 32)) return MUSA_ERROR_INVALID_VALUE;
    d.dims[i] = globalDim[i];
    if (i == 0) continue;
    const uint64_t stride = globalStrides[i - 1];
    if (stride == 0 || stride % 16 != 0 || stride >= (uint64_t{1} << 40)) return MUSA_ERROR_INVALID_VALUE;
    d.strides[i] = stride;
  }
  std::memset(tensorDesc, 0, sizeof(*tensorDesc));
  std::memcpy(tensorDesc, &d, sizeof(d));
  return MUSA_SUCCESS;
}

#pragma GCC visibility pop
