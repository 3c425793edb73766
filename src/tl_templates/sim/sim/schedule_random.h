/*!
 * \file tl_templates/sim/sim/schedule_random.h
 * \brief The pseudo-random generator behind checked mode's thread order (TILELANG_SIM_CHECK=1).
 *
 * One stream per block, derived from (TILELANG_SIM_SEED, linear block index), so the order of a block does not
 * depend on which worker runs it or on the blocks run before it: a failure replays with the seed alone, whatever
 * TILELANG_SIM_WORKERS is. SplitMix64: tiny state, statistically fine for picking among at most 1024 threads.
 */
#pragma once

#include <cstdint>

#pragma GCC visibility push(hidden)
namespace tl_sim {

class ScheduleRandom {
 public:
  /*! \brief Start the stream of block `block_id` under `seed`. */
  void Seed(uint64_t seed, uint64_t block_id) {
    state_ = seed;
    state_ = Next() ^ (block_id * 0xD1B54A32D192ED03ull);  // decorrelate neighbouring seeds and blocks
  }

  /*! \brief A number in [0, n), n > 0 (the modulo bias is immaterial for n <= 1024). */
  uint32_t Below(uint32_t n) { return static_cast<uint32_t>(Next() % n); }

 private:
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  uint64_t state_ = 0;
};

}  // namespace tl_sim
#pragma GCC visibility pop
