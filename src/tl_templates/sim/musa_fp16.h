/*!
 * \file tl_templates/sim/musa_fp16.h
 * \brief The simulator's musa_fp16.h: `half` (`__half`), a bit-exact IEEE binary16 in 2 trivially copyable bytes,
 *        and `half2`, with CUDA's conversion and arithmetic API.
 *        Defined by sim/float16_api.h, the one source of both 16-bit types.
 */
#pragma once

#define TL_SIM_F16 __half
#define TL_SIM_F16_2 __half2
#define TL_SIM_F16_RAW __half_raw
#define TL_SIM_F16_2_RAW __half2_raw
#define TL_SIM_F16_FORMAT half
#define TL_SIM_F16_EXP_BITS 5
#define TL_SIM_F16_MAN_BITS 10
#define TL_SIM_F16_INF_BITS 0x7c00u
#define TL_SIM_F16_FROM_BITS HalfFromBits
#include "sim/float16_api.h"

typedef __half half;
typedef __half2 half2;
