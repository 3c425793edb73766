/*!
 * \file tl_templates/sim/sim/denormals.h
 * \brief -fmusa-flush-denormals-to-zero: float32 subnormal inputs and results of device arithmetic are zero.
 *
 * The simulated threads' arithmetic is the host CPU's, whose float mode is per OS thread: a worker running the
 * blocks of a kernel built with that flag sets flush-to-zero (results) and denormals-are-zero (inputs) for the
 * blocks' duration and restores its own mode after, so the calling thread (also a worker) hands back the mode torch
 * and the rest of the process had. Fibers started inside take the mode with them (fiber.h's PrepareContext).
 * The host's mode also covers float64, whose subnormals (below 2^-1022) are then flushed too (docs/SIMULATOR.md).
 */
#pragma once

#include <cstdint>

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief While alive and `on`: the calling OS thread flushes subnormal float inputs and results to zero. */
class FlushDenormalsScope {
 public:
  explicit FlushDenormalsScope(bool on) : on_(on) {
    if (on_) {
      saved_ = Read();
      Write(saved_ | kFlushBits);
    }
  }
  ~FlushDenormalsScope() {
    if (on_) Write(saved_);
  }
  FlushDenormalsScope(const FlushDenormalsScope&) = delete;
  FlushDenormalsScope& operator=(const FlushDenormalsScope&) = delete;

 private:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr uint64_t kFlushBits = (1u << 15) | (1u << 6);  // MXCSR: FTZ, DAZ
  static uint64_t Read() {
    uint32_t mxcsr;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    return mxcsr;
  }
  static void Write(uint64_t value) {
    const uint32_t mxcsr = static_cast<uint32_t>(value);
    asm volatile("ldmxcsr %0" : : "m"(mxcsr));
  }
#elif defined(__aarch64__)
  static constexpr uint64_t kFlushBits = uint64_t{1} << 24;  // FPCR.FZ: inputs and results
  static uint64_t Read() {
    uint64_t fpcr;
    asm volatile("mrs %0, fpcr" : "=r"(fpcr));
    return fpcr;
  }
  static void Write(uint64_t value) { asm volatile("msr fpcr, %0" : : "r"(value)); }
#else
#error "tl_templates/sim: no flush-to-zero mode known for this host CPU (x86-64 MXCSR or AArch64 FPCR)"
#endif
  bool on_;
  uint64_t saved_ = 0;
};

}  // namespace tl_sim
#pragma GCC visibility pop
