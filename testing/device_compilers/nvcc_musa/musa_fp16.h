/*!
 * \file testing/device_compilers/nvcc_musa/musa_fp16.h
 * \brief musa_fp16.h over CUDA's: `half`, `__half`, `half2` are CUDA's own.
 */
#pragma once

#include <cuda_fp16.h>
