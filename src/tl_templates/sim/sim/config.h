/*!
 * \file tl_templates/sim/sim/config.h
 * \brief The simulated device: architecture constants chosen by -D__MUSA_ARCH__, and the run-time options read
 *        from the environment (one validated struct).
 */
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#ifndef __MUSA_ARCH__
#error "tl_templates/sim: compile with -D__MUSA_ARCH__=<210|220|310|320> to choose the simulated MUSA architecture"
#endif
#if __MUSA_ARCH__ != 210 && __MUSA_ARCH__ != 220 && __MUSA_ARCH__ != 310 && __MUSA_ARCH__ != 320
#error "tl_templates/sim: __MUSA_ARCH__ must be 210 (mp_21), 220 (mp_22), 310 (mp_31) or 320 (mp_32)"
#endif

#pragma GCC visibility push(hidden)
namespace tl_sim {

inline constexpr int kArch = __MUSA_ARCH__;
inline constexpr const char* kArchName =
    kArch == 210 ? "mp_21" : kArch == 220 ? "mp_22" : kArch == 310 ? "mp_31" : "mp_32";
// QY (mp_21/22) warps are 128 threads wide, PH1 (mp_31/32) warps 32.
inline constexpr uint32_t kWarpSize = kArch < 300 ? 128 : 32;
// A squad is 4 warps of 32 threads: the unit of SQMMA on mp_31.
inline constexpr uint32_t kSquadSize = 128;
inline constexpr uint32_t kMaxThreadsPerBlock = 1024;
inline constexpr uint32_t kMaxBlockDimXY = 1024;
inline constexpr uint32_t kMaxBlockDimZ = 64;
inline constexpr uint64_t kMaxGridDimX = 0x7fffffffu;
inline constexpr uint64_t kMaxGridDimYZ = 65535;
// Dynamic shared memory a kernel may use without musaFuncSetAttribute, as on the device.
inline constexpr size_t kDefaultDynamicSmemLimit = 48 * 1024;
// Opt-in maximum per block. mp_21's figure is not public; it is assumed equal to mp_22's.
inline constexpr size_t kMaxSmemPerBlock = kArch < 300 ? 73728 : 196608;
// The dynamic shared buffer is sized for the largest architecture so one layout serves every arch.
inline constexpr size_t kDynamicSmemCapacity = 196608;
// Shared memory starts every block filled with this byte: 0xFFFFFFFF is a NaN float, so reads of
// memory nobody wrote show up in results.
inline constexpr unsigned char kPoisonByte = 0xFF;

inline constexpr const char* kStackEnvVar = "TILELANG_SIM_STACK_KB";
inline constexpr size_t kDefaultStackKiB = 64;
inline constexpr size_t kMinStackKiB = 16;  // printf from a kernel needs a few KiB
inline constexpr size_t kMaxStackKiB = 65536;
// The toolchain driver passes the stack a kernel needs for its per-thread arrays (-DTL_SIM_MIN_STACK_KB): a
// simulated thread's registers and local memory live on its fiber stack, so big local arrays need big stacks.
#ifndef TL_SIM_MIN_STACK_KB
#define TL_SIM_MIN_STACK_KB 0
#endif
inline constexpr size_t kKernelMinStackKiB = TL_SIM_MIN_STACK_KB;
// The toolchain driver passes mcc's -fmusa-flush-denormals-to-zero as -DTL_SIM_FLUSH_DENORMALS_TO_ZERO=1: the
// library's launches then flush float32 subnormals to zero (denormals.h).
#ifndef TL_SIM_FLUSH_DENORMALS_TO_ZERO
#define TL_SIM_FLUSH_DENORMALS_TO_ZERO 0
#endif
inline constexpr bool kFlushDenormals = TL_SIM_FLUSH_DENORMALS_TO_ZERO != 0;

inline constexpr const char* kWorkersEnvVar = "TILELANG_SIM_WORKERS";
inline constexpr size_t kMaxWorkers = 256;

// Checked mode: the ready threads of a block run in an order drawn from a generator seeded by (seed, block), so
// runs differ from the default FIFO order yet replay exactly with the same seed.
inline constexpr const char* kCheckEnvVar = "TILELANG_SIM_CHECK";
inline constexpr const char* kSeedEnvVar = "TILELANG_SIM_SEED";
// 1: count each launch and print the counters to stderr, 2: count silently (profile.h), 3: count silently and
// record the cycle model's timeline (timeline.h)
inline constexpr const char* kProfileEnvVar = "TILELANG_SIM_PROFILE";
inline constexpr const char* kProfileBlocksEnvVar = "TILELANG_SIM_PROFILE_BLOCKS";  // counting: run N blocks
inline constexpr uint64_t kDefaultSeed = 1;

// A launch whose workers make no progress (no thread switch, rendezvous or block boundary) for this long fails.
inline constexpr const char* kExecEnvVar = "TILELANG_SIM_EXEC";
/*! \brief TILELANG_SIM_EXEC: how blocks run (scheduler.h's ExecMode). auto: as a loop over the threads when the
 *         kernel's library holds no code that can make a thread wait, else on fibers; fibers / loop: forced (loop
 *         is refused for a library that can wait). */
enum class ExecChoice : uint8_t { kAuto, kFibers, kLoop };

inline constexpr const char* kWatchdogEnvVar = "TILELANG_SIM_WATCHDOG_S";
inline constexpr double kDefaultWatchdogSeconds = 60;
inline constexpr double kMaxWatchdogSeconds = 1e6;

/*! \brief Options of the simulator, read from the environment at every launch so tests can change them. */
struct SimOptions {
  size_t stack_bytes = kDefaultStackKiB * 1024;  // per simulated thread, plus one guard page below it
  size_t workers = 1;  // OS threads running blocks concurrently (default: the machine's cores)
  bool check = false;  // checked mode: randomised scheduling and the race detector
  bool profile = false;  // TILELANG_SIM_PROFILE=1|2: count the launch's requests and instructions (profile.h)
  bool print_profile = false;  // TILELANG_SIM_PROFILE=1: and print them
  bool trace = false;  // TILELANG_SIM_PROFILE=3: and record the cycle model's timeline (timeline.h)
  uint64_t profile_blocks = 0;  // TILELANG_SIM_PROFILE_BLOCKS: while counting, run this many blocks (0: all)
  uint64_t seed = kDefaultSeed;  // checked mode's scheduling seed
  double watchdog_seconds = kDefaultWatchdogSeconds;
  ExecChoice exec = ExecChoice::kAuto;


  /*! \brief Parse the environment; on a bad value return false and describe it in `error`. */
  static bool FromEnv(SimOptions* out, char* error, size_t error_size) {
    SimOptions opts;
    unsigned long long kib = 0;
    const char* text = std::getenv(kStackEnvVar);
    if (!ParseUnsigned(text, kMinStackKiB, kMaxStackKiB, &kib)) {
      std::snprintf(error, error_size, "%s='%s' is not a whole number of KiB in [%zu, %zu]", kStackEnvVar, text,
                    kMinStackKiB, kMaxStackKiB);
      return false;
    }
    if (IsSet(text)) opts.stack_bytes = static_cast<size_t>(kib) * 1024;
    if (opts.stack_bytes < kKernelMinStackKiB * 1024) opts.stack_bytes = kKernelMinStackKiB * 1024;
    const unsigned cores = std::thread::hardware_concurrency();
    opts.workers = cores == 0 ? 1 : cores;
    unsigned long long n = 0;
    const char* workers = std::getenv(kWorkersEnvVar);
    if (!ParseUnsigned(workers, 1, kMaxWorkers, &n)) {
      std::snprintf(error, error_size, "%s='%s' is not a whole number in [1, %zu]", kWorkersEnvVar, workers,
                    kMaxWorkers);
      return false;
    }
    if (IsSet(workers)) opts.workers = static_cast<size_t>(n);
    unsigned long long check = 0;
    const char* check_text = std::getenv(kCheckEnvVar);
    if (!ParseUnsigned(check_text, 0, 1, &check)) {
      std::snprintf(error, error_size, "%s='%s' is not 0 or 1", kCheckEnvVar, check_text);
      return false;
    }
    opts.check = IsSet(check_text) && check == 1;
    unsigned long long profile = 0;
    const char* profile_text = std::getenv(kProfileEnvVar);
    if (!ParseUnsigned(profile_text, 0, 3, &profile)) {
      std::snprintf(error, error_size, "%s='%s' is not 0, 1, 2 or 3", kProfileEnvVar, profile_text);
      return false;
    }
    opts.profile = IsSet(profile_text) && profile >= 1;
    opts.print_profile = IsSet(profile_text) && profile == 1;
    opts.trace = IsSet(profile_text) && profile == 3;
    unsigned long long sample = 0;
    const char* sample_text = std::getenv(kProfileBlocksEnvVar);
    if (!ParseUnsigned(sample_text, 0, UINT64_MAX, &sample)) {
      std::snprintf(error, error_size, "%s='%s' is not a whole number of blocks", kProfileBlocksEnvVar, sample_text);
      return false;
    }
    if (opts.profile && IsSet(sample_text)) opts.profile_blocks = sample;
    unsigned long long seed = 0;
    const char* seed_text = std::getenv(kSeedEnvVar);
    if (!ParseUnsigned(seed_text, 0, UINT64_MAX, &seed)) {
      std::snprintf(error, error_size, "%s='%s' is not a whole number in [0, 2^64)", kSeedEnvVar, seed_text);
      return false;
    }
    if (IsSet(seed_text)) opts.seed = seed;
    const char* exec = std::getenv(kExecEnvVar);
    if (IsSet(exec)) {
      if (std::strcmp(exec, "auto") == 0) {
        opts.exec = ExecChoice::kAuto;
      } else if (std::strcmp(exec, "fibers") == 0) {
        opts.exec = ExecChoice::kFibers;
      } else if (std::strcmp(exec, "loop") == 0) {
        opts.exec = ExecChoice::kLoop;
      } else {
        std::snprintf(error, error_size, "%s='%s' is not auto, fibers or loop", kExecEnvVar, exec);
        return false;
      }
    }
    const char* watchdog = std::getenv(kWatchdogEnvVar);
    if (IsSet(watchdog)) {
      char* end = nullptr;
      errno = 0;
      const double seconds = std::strtod(watchdog, &end);
      // The negated comparisons reject NaN too.
      if (errno != 0 || *end != '\0' || !(seconds > 0) || !(seconds <= kMaxWatchdogSeconds)) {
        std::snprintf(error, error_size, "%s='%s' is not a number of seconds in (0, %g]", kWatchdogEnvVar, watchdog,
                      kMaxWatchdogSeconds);
        return false;
      }
      opts.watchdog_seconds = seconds;
    }
    *out = opts;
    return true;
  }

 private:
  static bool IsSet(const char* text) { return text != nullptr && *text != '\0'; }

  /*! \brief True if `text` is unset, empty, or a decimal whole number in [lo, hi] (then stored in *value). */
  static bool ParseUnsigned(const char* text, unsigned long long lo, unsigned long long hi, unsigned long long* value) {
    if (!IsSet(text)) return true;
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] == '-' || n < lo || n > hi) return false;
    *value = n;
    return true;
  }
};

}  // namespace tl_sim
#pragma GCC visibility pop
