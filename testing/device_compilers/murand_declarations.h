/*!
 * \file testing/device_compilers/murand_declarations.h
 * \brief murand_kernel.h's device API as T.rng_init / T.rng_rand* use it (murand is cuRAND's device API renamed,
 *        curand -> murand), for compile checks where no random library is installed: every function traps.
 */
#pragma once

struct murandStatePhilox4_32_10 {
  unsigned int ctr[4], output[4], key[2], STATE;
  int boxmuller_flag, boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
struct murandStateXORWOW {
  unsigned int d, v[5];
  int boxmuller_flag, boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
struct murandStateMRG32k3a {
  unsigned int s1[3], s2[3];
  int boxmuller_flag, boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct murandStatePhilox4_32_10 murandStatePhilox4_32_10_t;
typedef struct murandStateXORWOW murandStateXORWOW_t;
typedef struct murandStateMRG32k3a murandStateMRG32k3a_t;

#define TL_MURAND_DECLARE(State)                                                                                      \
  __device__ inline void murand_init(unsigned long long, unsigned long long, unsigned long long, State*) {             \
    __trap();                                                                                                         \
  }                                                                                                                   \
  __device__ inline unsigned int murand(State*) { __trap(); return 0; }                                               \
  __device__ inline float murand_uniform(State*) { __trap(); return 0; }                                              \
  __device__ inline double murand_uniform_double(State*) { __trap(); return 0; }                                      \
  __device__ inline float murand_normal(State*) { __trap(); return 0; }                                               \
  __device__ inline double murand_normal_double(State*) { __trap(); return 0; }
TL_MURAND_DECLARE(murandStatePhilox4_32_10_t)
TL_MURAND_DECLARE(murandStateXORWOW_t)
TL_MURAND_DECLARE(murandStateMRG32k3a_t)
#undef TL_MURAND_DECLARE
