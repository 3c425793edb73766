/*!
 * \file tl_templates/sim/sim/visibility.h
 * \brief Symbol visibility of the simulator inside a kernel library.
 *
 * Every kernel library carries a private copy of the simulator, so libraries built from different header versions
 * or for different archs coexist in one process: functions and variables are hidden (`#pragma GCC visibility
 * push(hidden)` in each header; hidden symbols are never unified across libraries, unlike default-visibility
 * inline variables, which GCC emits as process-wide unique symbols). Types that kernels and host entry points take
 * as parameters (half, bfloat16, vectors, dim3) keep default visibility, because GCC hides any function whose
 * signature names a hidden type and the kernels must stay exported; their member functions are marked
 * TL_SIM_HIDDEN instead.
 */
#pragma once

#define TL_SIM_HIDDEN __attribute__((visibility("hidden")))
