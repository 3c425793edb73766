/*!
 * \file tl_templates/musa/random.h
 * \brief The two macros behind T.rng_init / T.rng_rand*: a per-thread murand generator state with a fixed name.
 *
 * Included (after common.h) only by kernels that use random numbers. T.rng_init prints
 *   TL_RNG_DECLARE(murandStatePhilox4_32_10_t(), 0);   // murandStatePhilox4_32_10_t tl_rng_state_0;
 *   murand_init(seed, subsequence, offset, TL_RNG_STATE(0));
 * and T.rng_rand() prints murand(TL_RNG_STATE(0)) (murand_uniform, murand_normal, ..._double likewise): the calls
 * are murand's own API, from <murand_kernel.h> (MUSA's port of curand_kernel.h). Under the simulator the same
 * include finds src/tl_templates/sim/murand_kernel.h, a bit-exact model of the three generators.
 */
#pragma once

#include "common.h"

#include <murand_kernel.h>

// `fresh_state` is a value-initialised state (`murandStateXORWOW_t()`), which names the type through a call the
// printer can emit; `id` numbers the kernel's T.rng_init calls.
#define TL_RNG_DECLARE(fresh_state, id) decltype(fresh_state) tl_rng_state_##id
#define TL_RNG_STATE(id) (&tl_rng_state_##id)
