/*!
 * \file tl_templates/sim/sim/keywords.h
 * \brief The MUSA C function and variable qualifiers, spelled for a host C++ compiler.
 *
 * Device code becomes ordinary host code. `__shared__` becomes `thread_local`: the OS thread that runs a block owns
 * one instance (at block scope `thread_local` implies static), so blocks running on different OS threads never
 * share it, and shared_memory.h refills every instance with poison at the start of each block.
 */
#pragma once

#define __global__
#define __device__
#define __host__
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ thread_local
#define __constant__
#define __grid_constant__
