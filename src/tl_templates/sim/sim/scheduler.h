/*!
 * \file tl_templates/sim/sim/scheduler.h
 * \brief Runs one block: each thread is a fiber, and threads meet through collective rendezvous.
 *
 * The fibers of a block run cooperatively on one OS thread in a deterministic order: thread 0 first, each runs
 * until it waits or exits, then the next ready one (FIFO). In checked mode (TILELANG_SIM_CHECK=1) the next thread is
 * drawn at random among the ready ones instead, from a stream seeded by (TILELANG_SIM_SEED, block), and the last
 * thread to arrive at a rendezvous goes back to the ready threads rather than always continuing first: code that
 * relies on one order of the threads shows it under some seed, and the seed replays the order.
 *
 * Everything that synchronises threads is one mechanism, a *rendezvous* of a set of threads within a group (the
 * block, a warp, a squad of 4 warps): each participant deposits a payload and waits; the last to arrive runs the
 * collective's exchange, which writes every participant's result, and wakes the others. `__syncthreads` is a
 * rendezvous of the whole block with no payload; a warp shuffle one of the lanes named by its mask; squad-wide
 * SQMMA issue another.
 *
 * The second way to wait is a *condition wait* (WaitForWake): a thread blocks until a device model wakes it
 * (Wake), e.g. an async-barrier wait until its phase completes. Models keep their state as block extensions
 * (BlockExtension), which the runner tells when a rendezvous completes, a thread exits, or no thread is ready
 * (OnQuiescent: the last chance to make progress, e.g. to count an async-barrier arrival of a warp whose other
 * lanes went elsewhere), and asks to describe their waiting threads when the block deadlocks.
 *
 * Stricter than hardware, and never a hang: threads of a group reaching different collectives, a mask naming a
 * thread that has exited, a thread exiting while others wait for it, and a state where no thread can proceed
 * all abort the block with a message naming the block, the thread, the collectives and their source lines. A thread
 * that never reaches a collective (a spin loop), overflows its stack or touches unmapped memory is interrupted by a
 * signal (signal_guard.h) and the block is abandoned the same way.
 *
 * For the race detector, each group instance counts its completed rendezvous: its *sync epoch* (epoch()). Two
 * accesses by threads of one group are ordered by a rendezvous of that group exactly when its epoch differs
 * between them. Epochs are never reset: each block starts its counters above every value an earlier block run on
 * the same OS thread reached, so stale records of an earlier block cannot pass for the current one.
 */
#pragma once

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bit_count.h"
#include "config.h"
#include "fiber.h"
#include "profile.h"
#include "schedule_random.h"
#include "thread_state.h"
#include "vector_types.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*!
 * \brief A set of threads of one group, by index relative to the group's first thread. Only the words below
 *        `used_` are meaningful (those above are stale, read as empty): a warp's set touches one or two words of
 *        the sixteen, so clearing, copying, comparing and walking it cost that, not 128 bytes.
 */
class ThreadSet {
 public:
  static constexpr uint32_t kWords = kMaxThreadsPerBlock / 64;

  ThreadSet() = default;
  ThreadSet(const ThreadSet& o) { *this = o; }
  ThreadSet& operator=(const ThreadSet& o) {
    used_ = o.used_;
    for (uint32_t w = 0; w < used_; ++w) words_[w] = o.words_[w];
    return *this;
  }
  void Clear() { used_ = 0; }
  void Set(uint32_t i) {
    Grow((i >> 6) + 1);
    words_[i >> 6] |= uint64_t{1} << (i & 63);
  }
  void SetWord(uint32_t w, uint64_t bits) {
    Grow(w + 1);
    words_[w] = bits;
  }
  bool Test(uint32_t i) const { return (i >> 6) < used_ && ((words_[i >> 6] >> (i & 63)) & 1); }
  void Reset(uint32_t i) {
    if ((i >> 6) < used_) words_[i >> 6] &= ~(uint64_t{1} << (i & 63));
  }
  uint32_t Count() const {
    uint32_t n = 0;
    for (uint32_t w = 0; w < used_; ++w) n += BitCount(words_[w]);
    return n;
  }
  bool Intersects(const ThreadSet& o) const {
    const uint32_t common = used_ < o.used_ ? used_ : o.used_;
    for (uint32_t i = 0; i < common; ++i)
      if (words_[i] & o.words_[i]) return true;
    return false;
  }
  bool operator==(const ThreadSet& o) const {
    const ThreadSet& longer = used_ >= o.used_ ? *this : o;
    const uint32_t common = used_ < o.used_ ? used_ : o.used_;
    for (uint32_t i = 0; i < common; ++i)
      if (words_[i] != o.words_[i]) return false;
    for (uint32_t i = common; i < longer.used_; ++i)
      if (longer.words_[i] != 0) return false;
    return true;
  }
  /*! \brief Call f(i) for each member, in increasing order. */
  template <class F>
  void ForEach(F&& f) const {
    for (uint32_t w = 0; w < used_; ++w) {
      for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1)
        f(w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits)));
    }
  }

 private:
  /*! \brief Make words below `n` meaningful, the new ones empty. */
  void Grow(uint32_t n) {
    for (; used_ < n; ++used_) words_[used_] = 0;
  }

  uint32_t used_ = 0;
  uint64_t words_[kWords];
};

enum class Group : uint8_t { kBlock = 0, kWarp = 1, kSquad = 2 };
inline constexpr int kNumGroupKinds = 3;

class BlockRunner;
struct Rendezvous;
struct Fiber;

/*!
 * \brief State a device model outside the scheduler keeps for the running block between collectives (e.g. SQMMA
 *        operations in flight until their wait). The runner owns one per kind; every block starts without any.
 *        The hooks run on the stack of the thread that triggered them and may Fail() the block.
 */
struct BlockExtension {
  virtual ~BlockExtension() = default;
  /*! \brief A rendezvous of a warp or squad completed (before its participants resume). */
  virtual void OnRendezvous(BlockRunner&, const Rendezvous&) {}
  /*! \brief `thread` finished the kernel (it is already counted as exited). */
  virtual void OnThreadExit(BlockRunner&, Fiber&) {}
  /*! \brief No thread is ready: wake threads (BlockRunner::Wake) if the model can make progress; true if it did. */
  virtual bool OnQuiescent(BlockRunner&) { return false; }
  /*! \brief The block deadlocked: append (BlockRunner::Append) what this model's threads wait for. */
  virtual void DescribeWaits(BlockRunner&) {}
};
// kAsyncOrder and kAsyncWrites are checked mode's (race_detector.h); the others are the device models'.
enum class ExtensionKind : uint8_t { kSqmma = 0, kAsyncBarrier, kAsyncCopy, kTmeStore, kAsyncOrder, kAsyncWrites };
inline constexpr int kNumExtensionKinds = 6;

/*! \brief What a rendezvous does once every participant has arrived. */
struct Collective {
  const char* name;                                    // as the kernel wrote it, for messages
  void (*exchange)(BlockRunner& block, Rendezvous& rv);  // writes each participant's slot.out; null: pure barrier
  // A warp's *_sync intrinsic (shuffle, vote, match, __syncwarp): a lane that has exited is no participant
  // (BlockRunner::LiveLanes). Others (barriers, warp MMAs, which need every lane's operands) report it.
  bool exited_lanes_leave = false;
};

/*! \brief A participant's payload: its value and per-thread arguments in, its result out. */
struct CollectiveSlot {
  uint64_t in = 0;
  int32_t arg = 0;
  int32_t width = 0;
  uint64_t out = 0;
};

/*! \brief One pending instance of a collective over a set of threads of one group. */
struct Rendezvous {
  const Collective* op = nullptr;
  Group group = Group::kBlock;
  uint32_t group_index = 0;
  uint32_t base = 0;  // linear id of the group's first thread
  ThreadSet members;  // who must arrive
  ThreadSet arrived;
  uint32_t expected = 0;
  uint32_t count = 0;
  const char* file = "";  // where the first participant arrived
  int line = 0;
  Rendezvous* next = nullptr;  // in the group's list of pending rendezvous, or the free list
};

enum class FiberState : uint8_t { kReady, kRunning, kWaiting, kExited };

/*! \brief A simulated thread of the running block. */
struct Fiber {
  FiberContext ctx;
  BlockRunner* block = nullptr;
  uint3 idx{0, 0, 0};
  uint32_t linear = 0;  // x + y * blockDim.x + z * blockDim.x * blockDim.y
  FiberState state = FiberState::kReady;
  Rendezvous* waiting_on = nullptr;
  // A condition wait (WaitForWake, waiting_on null): what the thread waits at, for deadlock messages.
  const char* wait_what = nullptr;
  const char* wait_file = "";
  int wait_line = 0;
  CollectiveSlot slot;
  uint32_t activemask_calls = 0;  // see __activemask (warp.h)
};

/*! \brief The kernel with its bound arguments, type-erased, and what the launch needs to know of the kernel's
 *         library (which may be another library than the one running the launch: sim/runtime_abi.h). */
struct KernelCall {
  void (*invoke)(const void* bound);
  const void* bound;
  unsigned char* (*shared_memory)();  // the calling OS thread's instance of the library's dynamic shared memory
  bool may_block;                     // whether the library holds code that can suspend a thread (LibraryMayBlock)
  size_t min_stack_bytes;             // the stack the kernel's local arrays need (TL_SIM_MIN_STACK_KB)
  bool grid_flags;                    // whether the library holds inter-block flags (grid_flags.h, checked mode)
  bool cooperative;                   // musaLaunchCooperativeKernel: every block resident at once (grid_barrier.h)
  bool flush_denormals;               // built with -fmusa-flush-denormals-to-zero (denormals.h)
};

/*! \brief How a block's threads run. kLoop: one after another to completion on one fiber (no thread can wait, so
 *         no switch is ever needed); kFibers: each thread on its own fiber. Both run the threads in the same order
 *         (the ready queue's, random in checked mode) and check the same things (docs/SIMULATOR.md). */
enum class ExecMode : uint8_t { kLoop, kFibers };

// A library marks what its code can do with a byte in a section of that name, emitted only where such code is; the
// asm keeps the byte referenced from the code that uses it, however the compiler inlines it. The section's linker
// bounds then say whether the library (the one this code is compiled into) holds such code.
#define TL_SIM_SECTION_MARK(section_name)                                                      \
  do {                                                                                         \
    static const char tl_sim_section_mark __attribute__((used, section(#section_name))) = 1; \
    asm volatile("" : : "r"(&tl_sim_section_mark));                                            \
  } while (0)
#define TL_SIM_DECLARE_SECTION(section_name)                                                    \
  extern "C" const char __start_##section_name[] __attribute__((weak, visibility("hidden"))); \
  extern "C" const char __stop_##section_name[] __attribute__((weak, visibility("hidden")))

// Code that can suspend a thread (Arrive, WaitForWake): a library without any runs its blocks as loops.
#define TL_SIM_MAY_BLOCK() TL_SIM_SECTION_MARK(tl_sim_blocking)
TL_SIM_DECLARE_SECTION(tl_sim_blocking);
/*! \brief Whether this library holds code that can suspend a thread. */
inline bool LibraryMayBlock() { return __start_tl_sim_blocking != __stop_tl_sim_blocking; }

// Code that waits for or publishes an inter-block flag (tl::grid_flag_wait / arrive): checked mode tracks
// inter-block publication only for such libraries (every global store of a launch would otherwise pay for it).
#define TL_SIM_USES_GRID_FLAGS() TL_SIM_SECTION_MARK(tl_sim_grid_flags)
TL_SIM_DECLARE_SECTION(tl_sim_grid_flags);
/*! \brief Whether this library holds code that waits for or publishes an inter-block flag. */
inline bool LibraryUsesGridFlags() { return __start_tl_sim_grid_flags != __stop_tl_sim_grid_flags; }

/*! \brief Why a signal handler abandoned the running block (signal_guard.h). */
enum class Interruption : uint8_t { kNone, kStackOverflow, kInvalidAccess, kStalled };

inline const char* SourceName(const char* file) {
  const char* slash = std::strrchr(file, '/');
  return slash != nullptr ? slash + 1 : file;
}

/*! \brief Runs the blocks of one launch on the calling OS thread, one after another, reusing its fibers. */
class BlockRunner {
 public:
  /*! \brief `stacks` holds one stack per thread for kFibers, one for kLoop. */
  // Inline: gcc ignores an asm name on a constructor, which would export it under its mangled name from every
  // arch's runtime (TL_SIM_OUTLINED), and a launch could then bind to another arch's. A template, so that only a
  // unit that constructs a runner (the runtime's launch path) instantiates the containers its initializers use; a
  // non-template body would have every kernel's build instantiate them again (visibility.h).
  template <typename Deferred = void>
  BlockRunner(KernelCall kernel, dim3 block_dim, const StackSet* stacks, const SimOptions& options, ExecMode mode)
      : kernel_(kernel),
        mode_(mode),
        stacks_(stacks),
        checked_(options.check),
        seed_(options.seed),
        watchdog_seconds_(options.watchdog_seconds),
        n_(block_dim.x * block_dim.y * block_dim.z),
        fibers_(n_),
        ready_(n_),
        rendezvous_(n_ + 1) {  // each pending rendezvous has a waiting thread, plus the one being completed
    for (uint32_t i = 0; i < n_; ++i) {
      Fiber& f = fibers_[i];
      f.block = this;
      f.linear = i;
      f.idx = uint3{i % block_dim.x, (i / block_dim.x) % block_dim.y, i / (block_dim.x * block_dim.y)};
      all_.Set(i);
    }
    for (int g = 0; g < kNumGroupKinds; ++g) {
      uint32_t size = GroupSize(static_cast<Group>(g));
      heads_[g].assign((n_ + size - 1) / size, nullptr);
      epochs_[g].assign((n_ + size - 1) / size, 0);
    }
  }
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  /*! \brief Run block `block_idx` (linear index `block_id` in the grid) to completion. False on error;
   *         error_code()/error_message() describe it. */
  TL_SIM_OUTLINED bool Run(uint3 block_idx, uint64_t block_id) TL_SIM_OUTLINED_AS("block_runner_run");

  musaError_t error_code() const { return code_; }
  const char* error_message() const { return message_; }

  /*! \brief Whether the launch runs in checked mode (TILELANG_SIM_CHECK=1). */
  bool checked() const { return checked_; }
  /*! \brief The sync epoch of group `index` of kind `g` (index 0 for the block): it grows by one each time a
   *         rendezvous over that group completes, before its exchange runs and its participants resume, and never
   *         goes back, not even across blocks and launches on this OS thread. A block barrier advances only the
   *         block's epoch, a warp collective only its warp's. */
  uint64_t epoch(Group g, uint32_t index) const { return epochs_[static_cast<int>(g)][index]; }
  /*! \brief How often this runner switched threads, completed a rendezvous or started or ended a block, or a
   *         thread stored to memory through a checked store (a long loop that computes is no spin loop): the
   *         watchdog's measure of progress. Written by the worker only; read by the watchdog on the worker. */
  uint64_t progress() const { return progress_.load(std::memory_order_relaxed); }
  void NoteProgress() { progress_.store(progress_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  const StackSet& stacks() const { return *stacks_; }
  ExecMode mode() const { return mode_; }
  /*! \brief The index in stacks() of the stack `thread` runs on. */
  uint32_t StackOf(const Fiber& thread) const { return mode_ == ExecMode::kLoop ? 0 : thread.linear; }

  uint32_t thread_count() const { return n_; }
  /*! \brief The running block's state of `kind`: null until a model installs it. */
  std::unique_ptr<BlockExtension>& extension(ExtensionKind kind) { return extensions_[static_cast<int>(kind)]; }
  const ThreadSet& all_threads() const { return all_; }
  Fiber& fiber(uint32_t linear) { return fibers_[linear]; }
  Fiber& current() { return *g_thread.fiber; }

  uint32_t GroupSize(Group g) const { return g == Group::kBlock ? n_ : g == Group::kWarp ? kWarpSize : kSquadSize; }
  uint32_t GroupIndex(Group g, uint32_t linear) const { return g == Group::kBlock ? 0 : linear / GroupSize(g); }
  uint32_t GroupBase(Group g, uint32_t index) const { return index * GroupSize(g); }
  /*! \brief How many threads group `index` really has (the last warp of a block may be partial). */
  uint32_t GroupExtent(Group g, uint32_t index) const {
    uint32_t base = GroupBase(g, index);
    return n_ - base < GroupSize(g) ? n_ - base : GroupSize(g);
  }

  /*!
   * \brief The running thread joins the rendezvous of `op` over `members` (relative to its group of kind `g`),
   *        waits until all members have arrived, and returns what the exchange wrote for it.
   */
  uint64_t Arrive(const Collective& op, Group g, const ThreadSet& members, CollectiveSlot in, const char* file,
                  int line) {
    TL_SIM_MAY_BLOCK();  // in the library whose code calls it (the body is the runtime's)
    return Join(op, g, members, in, file, line);
  }

  /*! \brief The cycle model (profile.h): the participants of a completed rendezvous leave it together, at the
   *         latest clock among them, a block barrier `barrier_cycles` later; their waits there are barrier stalls.
   *         A warp's shuffle, vote or match is counted once (one warp instruction, whatever its lanes). */
  TL_SIM_OUTLINED static void MeetClocks(profile::Recorder& clocks, Group g, const Rendezvous& rv)
      TL_SIM_OUTLINED_AS("block_runner_meet_clocks");

  /*!
   * \brief The running thread blocks until a device model wakes it (Wake). `what`, `file` and `line` say where it
   *        waits, for the deadlock message; a block where every live thread waits and no model can wake one is a
   *        deadlock.
   */
  void WaitForWake(const char* what, const char* file, int line) {
    TL_SIM_MAY_BLOCK();  // in the library whose code calls it (the body is the runtime's)
    SleepUntilWoken(what, file, line);
  }
  /*! \brief Make `thread`, blocked in WaitForWake, ready again. */
  void Wake(Fiber& thread) {
    if (thread.state != FiberState::kWaiting || thread.waiting_on != nullptr) return;
    thread.state = FiberState::kReady;
    thread.wait_what = nullptr;
    Push(thread);
    NoteProgress();
  }
  /*! \brief Threads that have not exited. */
  uint32_t live() const { return live_; }
  /*! \brief Threads of warp `warp` that have not exited. */
  uint32_t live_in_warp(uint32_t warp) const { return warp_live_[warp]; }

  /*! \brief Append to the error message, truncating at its end (for DescribeWaits). */
  __attribute__((format(printf, 2, 3))) TL_SIM_OUTLINED void Append(const char* fmt, ...)
      TL_SIM_OUTLINED_AS("block_runner_append");

  /*! \brief Abort the block from the running thread: record the error and return to the scheduler for good. */
  [[noreturn]] __attribute__((format(printf, 3, 4))) TL_SIM_OUTLINED void Fail(musaError_t code, const char* fmt, ...)
      TL_SIM_OUTLINED_AS("block_runner_fail");

  /*!
   * \brief Abandon the block from a signal handler that interrupted `thread` on its own stack (signal_guard.h):
   *        record why and return to the scheduler for good. `address` is the faulting address, if any. The
   *        thread's stack is discarded with whatever it held; Run() composes the message.
   */
  [[noreturn]] TL_SIM_OUTLINED void Interrupt(Interruption why, const Fiber& thread, uintptr_t address)
      TL_SIM_OUTLINED_AS("block_runner_interrupt");

 private:
  /*! \brief Arrive's body: join (or open) the rendezvous, run the exchange if last, else wait. */
  TL_SIM_OUTLINED uint64_t Join(const Collective& op, Group g, const ThreadSet& members, CollectiveSlot in,
                                const char* file, int line) TL_SIM_OUTLINED_AS("block_runner_join");
  /*! \brief WaitForWake's body. */
  TL_SIM_OUTLINED void SleepUntilWoken(const char* what, const char* file, int line)
      TL_SIM_OUTLINED_AS("block_runner_sleep_until_woken");
  TL_SIM_OUTLINED static void FiberMain(void* arg) TL_SIM_OUTLINED_AS("block_runner_fiber_main");

  /*! \brief kLoop: run the threads one after another, in the order a fiber schedule would, on this one fiber. */
  TL_SIM_OUTLINED static void LoopMain(void* arg) TL_SIM_OUTLINED_AS("block_runner_loop_main");

  /*! \brief The running thread's whole kernel. */
  TL_SIM_OUTLINED void RunThread() TL_SIM_OUTLINED_AS("block_runner_run_thread");

  /*! \brief A loop-executed kernel reached code that waits: its library was judged unable to wait
   *         (LibraryMayBlock), so this is the simulator's bug; fail loudly rather than run on without waiting. */
  [[noreturn]] TL_SIM_OUTLINED void CannotWaitInLoop(const char* what, const char* file, int line)
      TL_SIM_OUTLINED_AS("block_runner_cannot_wait_in_loop");

  [[noreturn]] TL_SIM_OUTLINED void OnExit(Fiber& self) TL_SIM_OUTLINED_AS("block_runner_on_exit");

  /*! \brief `self` finished the kernel: count it out and check that no collective still waits for it. */
  TL_SIM_OUTLINED void FinishThread(Fiber& self) TL_SIM_OUTLINED_AS("block_runner_finish_thread");

  TL_SIM_OUTLINED Rendezvous* Open(const Collective& op, Group g, uint32_t index, uint32_t base,
                                   const ThreadSet& members, const char* file, int line)
      TL_SIM_OUTLINED_AS("block_runner_open");

  TL_SIM_OUTLINED void Close(Rendezvous* rv) TL_SIM_OUTLINED_AS("block_runner_close");

  /*! \brief Every member of `rv` has arrived: run its exchange, make the members other than `caller` (a member's
   *         index, or -1) ready, and close it. */
  TL_SIM_OUTLINED void Complete(Rendezvous* rv, int caller) TL_SIM_OUTLINED_AS("block_runner_complete");

  /*! \brief A warp collective's participants: `members` less the lanes that have exited. CUDA's rule for the
   *         *_sync warp intrinsics is that the non-exited threads named in the mask take part; MUSA's is assumed
   *         the same [I]. A block barrier keeps counting an exited thread (FinishThread reports it). */
  TL_SIM_OUTLINED ThreadSet LiveLanes(uint32_t base, const ThreadSet& members) const
      TL_SIM_OUTLINED_AS("block_runner_live_lanes");

  /*! \brief `ready_head_ + offset` wrapped into the ring (offset < n_): no division on this hot path. */
  uint32_t RingSlot(uint32_t offset) const {
    const uint32_t slot = ready_head_ + offset;
    return slot >= n_ ? slot - n_ : slot;
  }
  void Push(Fiber& f) {
    ready_[RingSlot(ready_size_)] = f.linear;
    ++ready_size_;
  }
  Fiber* Pop() {
    if (ready_size_ == 0) return nullptr;
    if (checked_) std::swap(ready_[ready_head_], ready_[RingSlot(random_.Below(ready_size_))]);
    Fiber* f = &fibers_[ready_[ready_head_]];
    ready_head_ = RingSlot(1);
    --ready_size_;
    return f;
  }
  void Activate(Fiber& f) {
    NoteProgress();
    f.state = FiberState::kRunning;
    OsThreadState& t = g_thread;
    t.fiber = &f;
    t.thread_idx = f.idx;
    t.last_access_line = 0;
    t.last_access_what = nullptr;
  }
  /*! \brief Hand the OS thread to the next ready fiber (possibly `self`, if it is ready), or back to the scheduler
   *         if none is ready. */
  TL_SIM_OUTLINED void Suspend(Fiber& self) TL_SIM_OUTLINED_AS("block_runner_suspend");
  /*! \brief No thread is ready: let the device models make progress. True if one woke a thread. */
  TL_SIM_OUTLINED bool Quiesce() TL_SIM_OUTLINED_AS("block_runner_quiesce");
  /*! \brief Checked mode: the running thread rejoins the ready threads and a random one continues. */
  TL_SIM_OUTLINED void Yield(Fiber& self) TL_SIM_OUTLINED_AS("block_runner_yield");
  TL_SIM_OUTLINED uint64_t LastEpoch() const TL_SIM_OUTLINED_AS("block_runner_last_epoch");

  TL_SIM_OUTLINED const char* GroupName(Group g, uint32_t index) TL_SIM_OUTLINED_AS("block_runner_group_name");

  /*! \brief Every live thread waits: name up to three pending rendezvous and, for each, a thread it lacks. */
  TL_SIM_OUTLINED void DescribeDeadlock() TL_SIM_OUTLINED_AS("block_runner_describe_deadlock");

  /*! \brief Name up to `limit` pending rendezvous and, for each, a thread it lacks that waits elsewhere. */
  TL_SIM_OUTLINED void AppendWaiting(int limit) TL_SIM_OUTLINED_AS("block_runner_append_waiting");

  /*! \brief The message of a block a signal handler abandoned; `t` still holds the interrupted thread's last
   *         checked access (Activate clears it at every resumption). */
  TL_SIM_OUTLINED void DescribeInterruption(const OsThreadState& t)
      TL_SIM_OUTLINED_AS("block_runner_describe_interruption");

  KernelCall kernel_;
  ExecMode mode_;
  const StackSet* stacks_;
  bool checked_;
  uint64_t seed_;
  double watchdog_seconds_;
  uint32_t n_;
  std::vector<Fiber> fibers_;
  std::vector<uint32_t> ready_;  // FIFO ring of fiber ids
  uint32_t ready_head_ = 0, ready_size_ = 0;
  std::vector<Rendezvous> rendezvous_;
  Rendezvous* free_ = nullptr;
  std::vector<Rendezvous*> heads_[kNumGroupKinds];  // pending rendezvous per group instance
  std::vector<uint64_t> epochs_[kNumGroupKinds];    // sync epoch per group instance
  ScheduleRandom random_;                           // checked mode's choice among the ready threads
  std::atomic<uint64_t> progress_{0};
  std::unique_ptr<BlockExtension> extensions_[kNumExtensionKinds];
  ThreadSet all_;
  FiberContext scheduler_;  // the OS thread's own stack while fibers run
  FiberContext loop_;       // kLoop: the one fiber that runs every thread
  uint3 block_idx_{0, 0, 0};
  uint32_t live_ = 0;
  std::vector<uint32_t> warp_live_;  // per warp: threads that have not exited
  bool aborted_ = false;
  Interruption interruption_ = Interruption::kNone;
  uint32_t interrupted_ = 0;  // the interrupted thread's linear id
  uintptr_t fault_address_ = 0;
  musaError_t code_ = musaSuccess;
  char message_[1024];
  char group_name_[32];
};

/*! \brief The block the calling code runs in; calling a device collective from host code is a fatal usage error. */
inline BlockRunner& CurrentBlock(const char* what) {
  if (g_thread.block == nullptr || g_thread.fiber == nullptr) {
    std::fprintf(stderr, "tl_sim: %s called outside a kernel launched with musaLaunchKernel\n", what);
    std::abort();
  }
  return *g_thread.block;
}

}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "scheduler_outlined.h"
#endif
