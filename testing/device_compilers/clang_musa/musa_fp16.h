/*!
 * \file testing/device_compilers/clang_musa/musa_fp16.h
 * \brief musa_fp16.h for clang's syntax check: `half` / `__half` and friends (half_types.h).
 */
#pragma once
#include "half_types.h"
