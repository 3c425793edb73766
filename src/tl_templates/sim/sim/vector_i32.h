/*!
 * \file tl_templates/sim/sim/vector_i32.h
 * \brief mcc's `vNi32_t` vectors of 32-bit ints, as the MUSA built-ins take and return them: TME box extents and
 *        coordinates (`v2i32_t`..`v5i32_t`, innermost dimension first) and robust loads (`v3i32_t`, `v4i32_t`,
 *        `v8i32_t`, `v16i32_t`, `v32i32_t`).
 *
 * mcc's are clang ext_vector_type(N) ints [I]; here they are aggregates of N ints, so `v3i32_t{a, b, c}` and
 * `v[i]` work as there (narrowing conversions in the braces are errors in both), and `sizeof` is 4N.
 */
#pragma once

#include <cstdint>

#define TL_SIM_VECTOR_I32(N)                                                            \
  struct v##N##i32_t {                                                                 \
    int32_t v[N];                                                                      \
    int32_t& operator[](int i) { return v[i]; }                                        \
    const int32_t& operator[](int i) const { return v[i]; }                            \
  };                                                                                   \
  static_assert(sizeof(v##N##i32_t) == 4 * (N), "v" #N "i32_t holds " #N " ints");

TL_SIM_VECTOR_I32(2)
TL_SIM_VECTOR_I32(3)
TL_SIM_VECTOR_I32(4)
TL_SIM_VECTOR_I32(5)
TL_SIM_VECTOR_I32(8)
TL_SIM_VECTOR_I32(16)
TL_SIM_VECTOR_I32(32)

#undef TL_SIM_VECTOR_I32
