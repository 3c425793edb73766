/*!
 * \file tl_templates/sim/sim/launch.h
 * \brief A kernel launch: validate the configuration, bind the arguments, run every block.
 *
 * Blocks are claimed from a shared counter by workers (one OS thread each, with its own fibers and shared memory):
 * the calling thread plus TILELANG_SIM_WORKERS - 1 helper threads (default: one worker per core), and the launch
 * returns when the grid is done. Throughout, faults of simulated threads and the watchdog's ticks end the launch
 * with an error instead of the process or a hang (signal_guard.h). In checked mode every launch error ends with
 * "(TILELANG_SIM_SEED=<seed>)", the seed that replays it (all but errors found before the options are read).
 * The process-wide mutable state is the per-kernel attributes and the signal handlers' installation, both locked,
 * and the lock-free registry of workers (signal_guard.h).
 */
#pragma once

#include <dlfcn.h>

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "config.h"
#include "denormals.h"
#include "fiber.h"
#include "grid_barrier.h"
#include "grid_flags.h"
#include "profile.h"
#include "race_detector.h"
#include "runtime_types.h"
#include "scheduler.h"
#include "shared_memory.h"
#include "signal_guard.h"
#include "thread_state.h"
#include "poisoned_globals.h"
#include "uninit_reads.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief Opt-in limits set with musaFuncSetAttribute, keyed by the kernel's address. Thread-safe. */
class KernelAttributes {
 public:
  // The runtime's (TL_SIM_OUTLINED): the table's container is instantiated once, not in every kernel's build.
  TL_SIM_OUTLINED void SetMaxDynamicSmem(const void* fn, size_t bytes)
      TL_SIM_OUTLINED_AS("kernel_attributes_set_max_dynamic_smem");
  TL_SIM_OUTLINED size_t MaxDynamicSmem(const void* fn) TL_SIM_OUTLINED_AS("kernel_attributes_max_dynamic_smem");

 private:
  std::mutex mu_;
  std::vector<std::pair<const void*, size_t>> limits_;
};

#if defined(TL_SIM_SHARED_RUNTIME)
/*! \brief The runtime's KernelAttributes (void*: a signature naming a hidden type would hide the symbol). */
extern "C" TL_SIM_RT_EXPORT void* RuntimeKernelAttributes() __asm__(TL_SIM_RT_SYMBOL("kernel_attributes"));
#endif
#if defined(TL_SIM_LINK_RUNTIME)
/*! \brief The runtime's: musaFuncSetAttribute here sets what the runtime's launch reads. */
inline KernelAttributes& GlobalKernelAttributes() { return *static_cast<KernelAttributes*>(RuntimeKernelAttributes()); }
#else
inline KernelAttributes& GlobalKernelAttributes() {
  static KernelAttributes attributes;
  return attributes;
}
#endif

/*! \brief The kernel's symbol name (kernels are exported extern "C" functions), or its address. */
inline const char* KernelName(const void* fn, char* buf, size_t size) {
  Dl_info info;
  if (dladdr(fn, &info) != 0 && info.dli_sname != nullptr && info.dli_saddr == fn) return info.dli_sname;
  std::snprintf(buf, size, "<kernel at %p>", fn);
  return buf;
}

/*! \brief Record a launch error as "kernel <name>: <message><suffix>" (the name is looked up only on failure);
 *         the message is cut short if need be, never the suffix. */
__attribute__((format(printf, 4, 5))) inline musaError_t LaunchError(const void* fn, const char* suffix,
                                                                      musaError_t code, const char* fmt, ...) {
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(message, sizeof(message), fmt, ap);
  va_end(ap);
  char name_buf[48];
  const char* name = KernelName(fn, name_buf, sizeof(name_buf));
  const int room = static_cast<int>(kErrorDetailBytes) - 1 -
                   static_cast<int>(std::strlen("kernel : ") + std::strlen(name) + std::strlen(suffix));
  return SetError(code, "kernel %s: %.*s%s", name, room > 0 ? room : 0, message, suffix);
}

// The launch itself (the workers, the grid's blocks, the profile's totals) is the runtime's in a linked kernel
// library: left out of its view, its build does not instantiate the containers and threads it uses.
#if !defined(TL_SIM_LINK_RUNTIME)
TL_SIM_OUTLINED_DEF void KernelAttributes::SetMaxDynamicSmem(const void* fn, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& entry : limits_) {
    if (entry.first == fn) {
      entry.second = bytes;
      return;
    }
  }
  limits_.emplace_back(fn, bytes);
}
TL_SIM_OUTLINED_DEF size_t KernelAttributes::MaxDynamicSmem(const void* fn) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& entry : limits_)
    if (entry.first == fn) return entry.second;
  return kDefaultDynamicSmemLimit;
}

/*! \brief The blocks of one launch, claimed by index by any number of workers; the lowest failing block wins. */
struct GridWork {
  KernelCall kernel;
  ExecMode mode;
  dim3 grid;
  dim3 block;
  size_t dynamic_smem;
  SimOptions options;
  uint64_t total_blocks;
  uint64_t runs;  // blocks to run: total_blocks, or the sample TILELANG_SIM_PROFILE_BLOCKS asks for
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  uint64_t failed_block = UINT64_MAX;
  musaError_t code = musaSuccess;
  char message[1024] = {};
  profile::Totals counted;  // TILELANG_SIM_PROFILE=1|2|3: the workers' counters, summed as each finishes
  profile::LaunchTimeline timeline;  // TILELANG_SIM_PROFILE=3: the workers' slices, gathered as each finishes
  PoisonedGlobals* poisoned = nullptr;  // checked mode: the ranges the launcher poisoned for this call, if any
  GridFlags flags;  // inter-block flags: which runs have finished, the flags' publish cycles (grid_flags.h)
  GridBarrier* barrier = nullptr;  // a cooperative launch's grid barrier (grid_barrier.h), else null

  void Record(uint64_t block_id, musaError_t error, const char* text) {
    std::lock_guard<std::mutex> lock(mu);
    if (block_id < failed_block) {
      failed_block = block_id;
      code = error;
      std::snprintf(message, sizeof(message), "%s", text);
    }
    failed.store(true);
    flags.Wake();
    if (barrier != nullptr) barrier->Wake();
  }
};

/*! \brief Checked mode on a worker: the race detector and the unwritten-read shadow over this OS thread's shared
 *         memory (its TLS block, else the dynamic arena at `dyn`), and the launch's poisoned global ranges. */
inline void CoverCheckedMode(OsThreadState& t, unsigned char* dyn, RaceDetector& races, WrittenShadow& written,
                             PoisonedGlobals* poisoned) {
  LocateTlsBlock(t, dyn);
  const bool whole = t.tls_begin != nullptr;
  if (races.Cover(whole ? t.tls_begin : dyn, whole ? t.tls_size : kDynamicSmemCapacity)) t.race_detector = &races;
  written.Cover(whole ? t.tls_begin : dyn, whole ? t.tls_size : kDynamicSmemCapacity);
  t.uninit_shadow = &written;
  t.global_shadow = poisoned;
}

/*! \brief Run `run` (block `id`) ended: the flag waits and the grid barrier learn it. */
inline void FinishRun(GridWork& work, uint64_t run, uint64_t id) {
  work.flags.Finish(run);
  if (work.barrier != nullptr) work.barrier->Finish(id);
}

/*! \brief One worker: run blocks of `work` on this OS thread until the grid is exhausted or a block fails (in a
 *         cooperative launch, one block). */
inline void RunBlocks(GridWork& work) {
  const uint32_t threads = work.block.x * work.block.y * work.block.z;
  char error[256];
  const uint32_t stack_count = work.mode == ExecMode::kLoop ? 1 : threads;
  StackSet* stacks = GlobalStackPool().Acquire(stack_count, work.options.stack_bytes, error, sizeof(error));
  if (stacks == nullptr) {
    work.Record(0, musaErrorMemoryAllocation, error);
    return;
  }
  const FlushDenormalsScope flush(work.kernel.flush_denormals);  // restored when this worker is done
  OsThreadState& t = g_thread;
  t.block_dim = work.block;
  t.grid_dim = work.grid;
  t.dynamic_smem = work.dynamic_smem;
  {
    BlockRunner runner(work.kernel, work.block, stacks, work.options, work.mode);
    unsigned char* dyn = work.kernel.shared_memory();
    WorkerGuard guard(runner, work.options.watchdog_seconds);
    RaceDetector races;  // checked mode: shadows this OS thread's shared memory (its TLS block, shared_memory.h)
    WrittenShadow written;  // checked mode: which bytes of that shared memory the running block wrote
    profile::Recorder counters;
    profile::Timeline timeline;
    if (work.options.profile) t.profile = &counters;
    if (work.options.trace) counters.Trace(&timeline);
    if (work.options.check) CoverCheckedMode(t, dyn, races, written, work.poisoned);
    const uint64_t gx = work.grid.x, gy = work.grid.y;
    t.grid_flags = &work.flags;
    t.grid_barrier = work.barrier;
    while (!work.failed.load(std::memory_order_relaxed)) {
      const uint64_t run = work.next.fetch_add(1, std::memory_order_relaxed);
      if (run >= work.runs) break;
      const uint64_t id = work.runs == work.total_blocks
                              ? run
                              : static_cast<uint64_t>(static_cast<unsigned __int128>(run) * work.total_blocks / work.runs);
      PoisonSharedMemory(dyn, work.dynamic_smem);
      written.StartBlock();
      const uint3 idx{static_cast<unsigned>(id % gx), static_cast<unsigned>((id / gx) % gy),
                      static_cast<unsigned>(id / (gx * gy))};
      if (t.profile != nullptr) counters.StartBlock(threads, id, idx);
      t.block_run = run;
      if (!runner.Run(idx, id)) {
        // a block that gave up a flag or grid-barrier wait because another failed: that block's error is the launch's
        if (!work.flags.Abandoned(run) && !(work.barrier != nullptr && work.barrier->Abandoned(id)))
          work.Record(id, runner.error_code(), runner.error_message());
        FinishRun(work, run, id);
        break;
      }
      FinishRun(work, run, id);
      if (written.Deferred()[0] != '\0') {  // checked mode: an unwritten shared read, reported once the block ended
        work.Record(id, musaErrorLaunchFailure, written.Deferred());
        break;
      }
      if (t.profile != nullptr) counters.FlushBlock();
      if (work.barrier != nullptr) break;  // a cooperative launch: one block per worker, all resident at once
    }
    t.grid_flags = nullptr;
    t.grid_barrier = nullptr;
    t.race_detector = nullptr;
    t.uninit_shadow = nullptr;
    t.global_shadow = nullptr;
    t.access_nibble = -1;  // a block failed in CheckSharedNibble never reset it: its fiber was abandoned, not unwound
    if (t.profile != nullptr) {
      t.profile = nullptr;
      std::lock_guard<std::mutex> lock(work.mu);
      work.counted.Add(counters.totals());
      if (work.options.trace) work.timeline.Add(timeline);
    }
  }
  GlobalStackPool().Release(stacks);
}

/*! \brief The launch configuration's errors, as the driver reports them (seed: checked mode's suffix). */
inline musaError_t CheckConfiguration(const void* fn, const char* seed, dim3 grid, dim3 block, size_t dynamic_smem) {
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > kMaxBlockDimXY || block.y > kMaxBlockDimXY ||
      block.z > kMaxBlockDimZ || uint64_t{block.x} * block.y * block.z > kMaxThreadsPerBlock)
    return LaunchError(fn, seed, musaErrorInvalidConfiguration,
                       "block (%u,%u,%u) is invalid: each extent must be >= 1, x and y <= %u, z <= %u, and "
                       "x*y*z <= %u threads",
                       block.x, block.y, block.z, kMaxBlockDimXY, kMaxBlockDimZ, kMaxThreadsPerBlock);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > kMaxGridDimX || grid.y > kMaxGridDimYZ ||
      grid.z > kMaxGridDimYZ)
    return LaunchError(fn, seed, musaErrorInvalidConfiguration,
                       "grid (%u,%u,%u) is invalid: each extent must be >= 1, x <= %llu, y and z <= %llu", grid.x,
                       grid.y, grid.z, static_cast<unsigned long long>(kMaxGridDimX),
                       static_cast<unsigned long long>(kMaxGridDimYZ));
  if (dynamic_smem > kMaxSmemPerBlock)
    return LaunchError(fn, seed, musaErrorInvalidValue,
                       "%zu bytes of dynamic shared memory requested; %s allows at most %zu bytes per block",
                       dynamic_smem, kArchName, kMaxSmemPerBlock);
  const size_t limit = GlobalKernelAttributes().MaxDynamicSmem(fn);
  if (dynamic_smem > limit)
    return LaunchError(fn, seed, musaErrorInvalidValue,
                       "%zu bytes of dynamic shared memory requested, above the kernel's limit of %zu bytes; raise "
                       "it first with musaFuncSetAttribute(kernel, musaFuncAttributeMaxDynamicSharedMemorySize, %zu)",
                       dynamic_smem, limit, dynamic_smem);
  return musaSuccess;
}

/*! \brief A cooperative launch of `blocks` blocks: false (the launch error recorded) when the device cannot hold
 *         them all resident at once, as the driver refuses it (grid_barrier_outlined.h has the figures). */
inline bool CheckCooperative(const void* fn, const char* seed, uint64_t blocks, uint64_t threads, size_t smem) {
  if (!kResidencyKnown) {
    LaunchError(fn, seed, musaErrorCooperativeLaunchTooLarge,
                "cooperative launch: this simulator build has no residency figures for %s (-DTL_SIM_MP_COUNT ...), "
                "so it cannot tell how many blocks stay resident at once",
                kArchName);
    return false;
  }
  const uint64_t resident = ResidentBlocks(threads, smem);
  if (blocks <= resident) return true;
  LaunchError(fn, seed, musaErrorCooperativeLaunchTooLarge,
              "cooperative launch of %llu blocks (musaLaunchCooperativeKernel): %s holds at most %llu blocks of %llu "
              "threads and %zu bytes of shared memory resident at once (%llu MPs x %llu blocks), and a grid barrier "
              "needs every block resident; launch at most that many blocks (a persistent kernel loops over its "
              "tiles)",
              static_cast<unsigned long long>(blocks), kArchName, static_cast<unsigned long long>(resident),
              static_cast<unsigned long long>(threads), smem, static_cast<unsigned long long>(kResidency.mps),
              static_cast<unsigned long long>(resident / kResidency.mps));
  return false;
}

/*! \brief Launch `call` (the kernel at `fn` with bound arguments) over `grid` x `block`: in a cooperative launch
 *         (call.cooperative) every block on an OS thread of its own, all at once (grid_barrier.h). */
inline musaError_t Launch(const void* fn, KernelCall call, dim3 grid, dim3 block, size_t dynamic_smem) {
  if (g_thread.block != nullptr)
    return LaunchError(fn, "", musaErrorNotSupported, "launching a kernel from device code is not modelled");
  SimOptions options;
  char error[256];
  if (!SimOptions::FromEnv(&options, error, sizeof(error)))
    return LaunchError(fn, "", musaErrorInvalidValue, "%s", error);
  if (options.stack_bytes < call.min_stack_bytes) options.stack_bytes = call.min_stack_bytes;
  if (options.exec == ExecChoice::kLoop && call.may_block)
    return LaunchError(fn, "", musaErrorInvalidValue,
                       "%s=loop: the kernel's library holds code that can make a thread wait (a barrier, warp "
                       "collective or asynchronous wait), which only runs on fibers",
                       kExecEnvVar);
  const bool fibers = options.exec == ExecChoice::kFibers || (options.exec == ExecChoice::kAuto && call.may_block);
  char seed[48] = "";
  if (options.check)
    std::snprintf(seed, sizeof(seed), " (%s=%llu)", kSeedEnvVar, static_cast<unsigned long long>(options.seed));
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  const musaError_t invalid = CheckConfiguration(fn, seed, grid, block, dynamic_smem);
  if (invalid != musaSuccess) return invalid;
  const uint64_t total = uint64_t{grid.x} * grid.y * grid.z;
  if (call.cooperative && !CheckCooperative(fn, seed, total, threads, dynamic_smem))
    return musaErrorCooperativeLaunchTooLarge;
  GridWork work;
  work.kernel = call;
  work.mode = fibers ? ExecMode::kFibers : ExecMode::kLoop;
  work.grid = grid;
  work.block = block;
  work.dynamic_smem = dynamic_smem;
  work.options = options;
  work.total_blocks = total;
  // a cooperative launch runs whole: a sample's blocks would wait at a grid barrier for the others forever
  const bool sampled = options.profile_blocks != 0 && !call.cooperative;
  work.runs = sampled ? std::min(options.profile_blocks, total) : total;
  std::unique_ptr<GridBarrier> barrier;
  if (call.cooperative) barrier.reset(work.barrier = new GridBarrier(total, grid, &work.failed));
  work.flags.Start(work.runs, work.total_blocks, static_cast<uint32_t>(threads), &work.failed,
                   options.check && call.grid_flags);
  if (options.check && g_thread.poisoned_globals != nullptr && g_thread.poisoned_globals->Any()) {
    g_thread.poisoned_globals->Prepare();
    work.poisoned = g_thread.poisoned_globals;
  }
  // Blocks are independent: the calling thread and options.workers - 1 helpers claim them until none is left;
  // in a cooperative launch, every block has a worker.
  const uint64_t helpers = (call.cooperative ? work.runs : std::min<uint64_t>(options.workers, work.runs)) - 1;
  LaunchSignalScope signal_handlers;
  const profile::ProfiledLaunch profiled(options.profile);
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (uint64_t i = 0; i < helpers; ++i) pool.emplace_back([&work] { RunBlocks(work); });
  RunBlocks(work);
  for (std::thread& worker : pool) worker.join();
  if (work.code != musaSuccess) return LaunchError(fn, seed, work.code, "%s", work.message);
  if (options.profile) {
    char name_buf[48];
    const profile::Geometry shape{work.total_blocks, static_cast<uint32_t>(threads), dynamic_smem};
    const char* name = KernelName(fn, name_buf, sizeof(name_buf));
    profile::Publish(name, shape, work.counted, options.print_profile);
    if (options.trace) profile::PublishTimeline(name, shape.threads_per_block, work.timeline);
  }
  return musaSuccess;
}
#endif  // !TL_SIM_LINK_RUNTIME

#if defined(TL_SIM_SHARED_RUNTIME)
/*! \brief The runtime's ABI, as the kernel library and the runtime see it: both sides must agree on the layout of
 *         every object they share (the runtime is built from the same headers with the same flags: jit/
 *         sim_runtime.py); a launch from a library that disagrees fails with a message instead of running. */
inline constexpr uint64_t kRuntimeAbi = (uint64_t{2} << 56) ^ (uint64_t{sizeof(OsThreadState)} << 40) ^
                                        (uint64_t{sizeof(BlockRunner)} << 20) ^ (sizeof(KernelCall) << 10) ^
                                        sizeof(SimOptions) ^ (sizeof(Fiber) << 30);
/*! \brief Launch `*call` (the kernel at `fn`) over `grid` x `block` in the runtime. */
extern "C" TL_SIM_RT_EXPORT musaError_t RuntimeLaunch(uint64_t abi, const void* fn, const void* call, dim3 grid,
                                                      dim3 block, size_t dynamic_smem)
    __asm__(TL_SIM_RT_SYMBOL("launch"));
#endif

/*! \brief A kernel with a copy of its arguments; every simulated thread calls it with those values. */
template <class... Params>
struct BoundKernel {
  void (*fn)(Params...);
  std::tuple<std::decay_t<Params>...> args;

  static void Invoke(const void* self) {
    const auto& b = *static_cast<const BoundKernel*>(self);
    std::apply(b.fn, b.args);
  }
};

template <class... Params, size_t... I>
std::tuple<std::decay_t<Params>...> UnpackArgs(void** args, std::index_sequence<I...>) {
  return std::tuple<std::decay_t<Params>...>(*static_cast<std::decay_t<Params>*>(args[I])...);
}

/*! \brief musaLaunchKernel (musaLaunchCooperativeKernel: `cooperative`) for a typed kernel pointer: args[i]
 *         points at the value of parameter i. */
template <class... Params>
musaError_t LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, void** args, size_t dynamic_smem,
                         bool cooperative = false) {
  const void* fn = reinterpret_cast<const void*>(kernel);
  if (kernel == nullptr) return SetError(musaErrorInvalidDeviceFunction, "musaLaunchKernel: the kernel is null");
  if (sizeof...(Params) > 0) {
    if (args == nullptr)
      return LaunchError(fn, "", musaErrorInvalidValue, "args is null but the kernel takes %zu parameters",
                         sizeof...(Params));
    for (size_t i = 0; i < sizeof...(Params); ++i)
      if (args[i] == nullptr) return LaunchError(fn, "", musaErrorInvalidValue, "args[%zu] is null", i);
  }
  BoundKernel<Params...> bound{kernel, UnpackArgs<Params...>(args, std::index_sequence_for<Params...>{})};
  const KernelCall call{&BoundKernel<Params...>::Invoke, &bound, &LibrarySharedMemory, LibraryMayBlock(),
                        kKernelMinStackKiB * 1024, LibraryUsesGridFlags(), cooperative, kFlushDenormals};
#if defined(TL_SIM_LINK_RUNTIME)
  return RuntimeLaunch(kRuntimeAbi, fn, &call, grid, block, dynamic_smem);
#else
  return Launch(fn, call, grid, block, dynamic_smem);
#endif
}

}  // namespace tl_sim
#pragma GCC visibility pop

/*!
 * \brief The launcher's registration of the global ranges it poisoned (outputs and workspaces allocated for the
 *        call, and tensors an earlier call returned with bytes it left unwritten: `unwritten[i]` and `origins[i]`
 *        non-null, poisoned_globals.h) before `call_packed` on this thread, and its clearing after (n = 0): what
 *        checked mode's uninitialised global-read check covers. One record per host thread, kept for the thread's
 *        life (the runtime's, for a linked kernel library).
 */
#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library finds the runtime's
extern "C" __attribute__((visibility("default"), used)) inline void tl_sim_register_poisoned(
    const void* const* begins, const uint64_t* bytes, const unsigned char* const* unwritten,
    const char* const* origins, int n) {
  tl_sim::OsThreadState& t = tl_sim::g_thread;
  if (t.poisoned_globals == nullptr) {
    if (n == 0) return;
    static pthread_key_t key;  // frees the record when the thread exits
    static const bool created =
        pthread_key_create(&key, [](void* p) { delete static_cast<tl_sim::PoisonedGlobals*>(p); }) == 0;
    t.poisoned_globals = new tl_sim::PoisonedGlobals();
    if (created) pthread_setspecific(key, t.poisoned_globals);
  }
  t.poisoned_globals->Set(begins, bytes, unwritten, origins, n);
}

/*!
 * \brief After `call_packed`, before the clearing: range i's bytes that still hold the poison and no access wrote
 *        (1 in `out`, one byte per byte of the range; null: only count); returns how many, or -1 when the call
 *        ran unchecked.
 */
extern "C" __attribute__((visibility("default"), used)) inline int64_t tl_sim_poisoned_unwritten(int i,
                                                                                                 unsigned char* out) {
  const tl_sim::PoisonedGlobals* globals = tl_sim::g_thread.poisoned_globals;
  return globals == nullptr ? -1 : globals->UnwrittenBytes(i, out);
}
#endif
