/*!
 * \file testing/device_compilers/clang_musa/musa_bf16.h
 * \brief musa_bf16.h for clang's syntax check: `__mt_bfloat16` and friends (half_types.h).
 */
#pragma once
#include "half_types.h"
