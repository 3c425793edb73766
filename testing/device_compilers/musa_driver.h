/*!
 * \file testing/device_compilers/musa_driver.h
 * \brief The part of MUSA's driver API (musa.h) that generated host wrappers use, declarations only: the TME tensor
 *        descriptor and its encoder. The enumerators are the simulator's (src/tl_templates/sim/musa.h); the check
 *        is that the wrappers compile against these names and types, not what the driver does with them.
 */
#pragma once

#include <stdint.h>

typedef uint32_t muuint32_t;
typedef uint64_t muuint64_t;

typedef enum MUresult_enum { MUSA_SUCCESS = 0, MUSA_ERROR_INVALID_VALUE = 1, MUSA_ERROR_NOT_SUPPORTED = 801 } MUresult;

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
} MUtensorDescriptorDataType;

typedef enum MUtensorDescriptorInterleave_enum {
  MU_TENSOR_DESCRIPTOR_INTERLEAVE_NONE = 0,
  MU_TENSOR_DESCRIPTOR_INTERLEAVE_16B,
  MU_TENSOR_DESCRIPTOR_INTERLEAVE_32B,
} MUtensorDescriptorInterleave;

typedef struct alignas(64) MUtensorDescriptor_st {
  muuint64_t opaque[16];
} MUtensorDescriptor;

MUresult muTensorDescriptorEncode(MUtensorDescriptor* desc, MUtensorDescriptorDataType type, muuint32_t rank,
                                  void* global_address, const muuint64_t* global_dim,
                                  const muuint64_t* global_strides, MUtensorDescriptorInterleave interleave,
                                  muuint64_t oob_fill);
