/*!
 * \file tl_templates/sim/musa_bf16.h
 * \brief The simulator's musa_bf16.h: `__mt_bfloat16`, a bit-exact bfloat16 (the top 16 bits of an IEEE float) in
 *        2 trivially copyable bytes, and the pair `__mt_bfloat162`, with CUDA-style conversion and arithmetic API.
 *        Defined by sim/float16_api.h, the one source of both 16-bit types.
 */
#pragma once

#define TL_SIM_F16 __mt_bfloat16
#define TL_SIM_F16_2 __mt_bfloat162
#define TL_SIM_F16_RAW __mt_bfloat16_raw
#define TL_SIM_F16_2_RAW __mt_bfloat162_raw
#define TL_SIM_F16_FORMAT bfloat16
#define TL_SIM_F16_EXP_BITS 8
#define TL_SIM_F16_MAN_BITS 7
#define TL_SIM_F16_INF_BITS 0x7f80u
#define TL_SIM_F16_FROM_BITS Bfloat16FromBits
#include "sim/float16_api.h"
