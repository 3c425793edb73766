/*!
 * \file testing/device_compilers/nvcc_musa/musa_bf16.h
 * \brief musa_bf16.h over CUDA's: `__mt_bfloat16` is `__nv_bfloat16`.
 */
#pragma once

#include <cuda_bf16.h>

typedef __nv_bfloat16 __mt_bfloat16;
typedef __nv_bfloat162 __mt_bfloat162;
