/*!
 * \file testing/device_compilers/nvcc_musa/murand_kernel.h
 * \brief murand_kernel.h over cuRAND (murand is cuRAND's device API renamed), so that a kernel built with
 *        `--shared` draws cuRAND's numbers on an NVIDIA GPU; functions that trap where the toolkit lacks
 *        cuRAND (a compile check only).
 */
#pragma once

#if __has_include(<curand_kernel.h>)
#include <curand_kernel.h>

typedef curandStatePhilox4_32_10_t murandStatePhilox4_32_10_t;
typedef curandStateXORWOW_t murandStateXORWOW_t;
typedef curandStateMRG32k3a_t murandStateMRG32k3a_t;

template <class State>
__device__ __forceinline__ void murand_init(unsigned long long seed, unsigned long long subsequence,
                                            unsigned long long offset, State* state) {
  curand_init(seed, subsequence, offset, state);
}
template <class State>
__device__ __forceinline__ unsigned int murand(State* state) { return curand(state); }
template <class State>
__device__ __forceinline__ float murand_uniform(State* state) { return curand_uniform(state); }
template <class State>
__device__ __forceinline__ double murand_uniform_double(State* state) { return curand_uniform_double(state); }
template <class State>
__device__ __forceinline__ float murand_normal(State* state) { return curand_normal(state); }
template <class State>
__device__ __forceinline__ double murand_normal_double(State* state) { return curand_normal_double(state); }
#else
#include "../murand_declarations.h"
#endif
