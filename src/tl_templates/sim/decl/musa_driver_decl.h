/*!
 * \file tl_templates/sim/decl/musa_driver_decl.h
 * \brief The part of MUSA's driver API (musa.h) that generated host wrappers use, declared once for the simulator
 *        (../musa.h, which defines the encoder) and the device-compiler check (testing/device_compilers): the TME
 *        tensor descriptor, its enumerators and its encoder.
 *
 * Declarations only, with nothing from the C++ standard library: the enumerators' values are those of Moore
 * Threads' TileLang port (src/backend/musa/tma_types.h); the descriptor's size (128 bytes, as CUDA's CUtensorMap)
 * is [I]. The types keep default visibility: a kernel taking a MUtensorDescriptor must stay an exported symbol.
 */
#pragma once

#include <stdint.h>

typedef uint32_t muuint32_t;
typedef uint64_t muuint64_t;

typedef enum MUresult_enum {
  MUSA_SUCCESS = 0,
  MUSA_ERROR_INVALID_VALUE = 1,
  MUSA_ERROR_NOT_SUPPORTED = 801,
} MUresult;

typedef enum MUtensorDescriptorDataType_enum {
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_INT8 = 0,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_UINT8,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_INT16,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_UINT16,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT16,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_BFLOAT16,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_INT32,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_UINT32,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT32,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_TFLOAT32,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_INT64,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_UINT64,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT64,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT32_FTZ,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_TFLOAT32_FTZ,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT32_TFLOAT32_RNE,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT32_FTZ_TFLOAT32_RNE,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_16b4,
  MU_TENSOR_DESCRIPTOR_DATA_TYPE_16b4_b8
} MUtensorDescriptorDataType;

typedef enum MUtensorDescriptorInterleave_enum {
  MU_TENSOR_DESCRIPTOR_INTERLEAVE_NONE = 0,
  MU_TENSOR_DESCRIPTOR_INTERLEAVE_16B,
  MU_TENSOR_DESCRIPTOR_INTERLEAVE_32B,
  MU_TENSOR_DESCRIPTOR_INTERLEAVE_64B,
  MU_TENSOR_DESCRIPTOR_INTERLEAVE_128B,
  MU_TENSOR_DESCRIPTOR_INTERLEAVE_256B
} MUtensorDescriptorInterleave;

typedef struct alignas(64) MUtensorDescriptor_st {
  muuint64_t opaque[16];
} MUtensorDescriptor;

/*!
 * \brief Fill `tensorDesc` for a `tensorRank`-dimensional tensor at `globalAddress` with extents `globalDim`
 *        (innermost first) and byte strides `globalStrides` of dims 1..rank-1 (dim 0 is contiguous). Out-of-bounds
 *        elements of a load read as the low bytes of `oobConstantFill` [I]. MUSA_SUCCESS, or an error code.
 *        (The simulator defines it inline, hidden, in ../musa.h.)
 */
#ifndef TL_SIMULATOR
MUresult muTensorDescriptorEncode(MUtensorDescriptor* tensorDesc, MUtensorDescriptorDataType tensorDataType,
                                  muuint32_t tensorRank, void* globalAddress, const muuint64_t* globalDim,
                                  const muuint64_t* globalStrides, MUtensorDescriptorInterleave interleave,
                                  muuint64_t oobConstantFill);
#endif
