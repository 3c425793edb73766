/*!
 * \file tl_templates/sim/sim/signal_guard.h
 * \brief Signals that end a launch rather than the process: a fault (SIGSEGV, SIGBUS) of a simulated thread, and
 *        the watchdog's tick (watchdog.h).
 *
 * While a launch of this library runs, its handler is installed for the three signals; concurrent launches from
 * several host threads share it (a count), and the handler found before the first (pytest's faulthandler, say)
 * is restored after the last. Each worker registers under its kernel thread id, so the handler finds the worker
 * without touching thread-local storage (a thread's first use of a library's TLS may allocate), and each worker
 * has an alternate signal stack (fiber.h), so the handler still runs when a fiber's stack is exhausted.
 *
 * When the interrupted code ran on one of the worker's fiber stacks, it is kernel code and the scheduler's context
 * is parked: the handler unblocks the signals (it never returns, so the kernel never restores the mask) and
 * abandons the block with BlockRunner::Interrupt, discarding the thread's stack. A fault touching a guard page, or
 * with the stack pointer below the running thread's stack, is a stack overflow; any other is an invalid access.
 * A fault anywhere else (the simulator itself, a thread that is not a worker) goes to the previous handler, or
 * gets the default action, as if this library were not loaded.
 *
 * Each kernel library carries its own copy of this file and installs its handler over the one it finds, passing
 * on what is not its own; a copy whose handler another has been installed over stays in that chain after its last
 * launch, forwarding everything, so the chain never loses a link whatever the order of launches. Such a copy also
 * pins its library in memory (RTLD_NODELETE): the JIT unloads kernel libraries it no longer needs, and a link into
 * unmapped code would crash the next signal.
 *
 * Limits: only x86-64 and AArch64 report the interrupted stack pointer; elsewhere faults and stalls keep their old
 * behaviour (a crash, a hang). A thread abandoned inside a C library call (printf in a spin loop, a fault inside
 * memcpy) may leave that library's locks held.
 */
#pragma once

#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "fiber.h"
#include "scheduler.h"
#include "thread_state.h"
#include "watchdog.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

class WorkerGuard;

/*! \brief The workers of this library's running launches, by kernel thread id; lock-free for signal handlers. */
class WorkerRegistry {
 public:
  static constexpr size_t kSlots = 1024;

  /*! \brief Register `worker` as thread `tid`'s. False when every slot is taken (the worker runs unguarded). */
  bool Add(pid_t tid, WorkerGuard* worker) {
    for (size_t i = 0; i < kSlots; ++i) {
      pid_t unclaimed = 0;
      if (slots_[i].tid.load(std::memory_order_relaxed) != 0 ||
          !slots_[i].tid.compare_exchange_strong(unclaimed, tid))
        continue;
      slots_[i].worker.store(worker);
      size_t used = used_.load();
      while (used < i + 1 && !used_.compare_exchange_weak(used, i + 1)) {
      }
      return true;
    }
    return false;
  }

  void Remove(pid_t tid) {
    for (size_t i = 0; i < used_.load(); ++i) {
      if (slots_[i].tid.load() != tid) continue;
      slots_[i].worker.store(nullptr);
      slots_[i].tid.store(0);
      return;
    }
  }

  /*! \brief Thread `tid`'s worker, or null. Only a worker's own thread finds it, so it is alive while found. */
  WorkerGuard* Find(pid_t tid) const {
    for (size_t i = 0; i < used_.load(); ++i)
      if (slots_[i].tid.load() == tid) return slots_[i].worker.load();
    return nullptr;
  }

 private:
  struct Slot {
    std::atomic<pid_t> tid{0};
    std::atomic<WorkerGuard*> worker{nullptr};
  };
  Slot slots_[kSlots];
  std::atomic<size_t> used_{0};  // no slot at or above this index was ever claimed
};

inline WorkerRegistry g_worker_registry;

inline pid_t KernelThreadId() { return static_cast<pid_t>(syscall(SYS_gettid)); }

/*! \brief The stack pointer of the code a signal interrupted; 0 where the architecture is not known here. */
inline uintptr_t InterruptedStackPointer(void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.sp);
#else
  (void)uc;
  return 0;
#endif
}

/*! \brief One worker's protection for a launch: its alternate signal stack, its registration and its watchdog
 *         timer, from construction to destruction on the worker's thread (after the runner, before its stacks
 *         are released). */
class WorkerGuard {
 public:
  WorkerGuard(BlockRunner& runner, double watchdog_seconds)
      : runner_(runner), thread_(&g_thread), tid_(KernelThreadId()) {
    const StackSet& stacks = runner.stacks();
    stack_t alternate{};
    alternate.ss_sp = stacks.signal_stack;
    alternate.ss_size = stacks.signal_stack_bytes;
    has_alternate_stack_ = sigaltstack(&alternate, &previous_stack_) == 0;
    registered_ = g_worker_registry.Add(tid_, this);
    if (registered_) watchdog_.Arm(tid_, watchdog_seconds, runner.progress());
  }
  ~WorkerGuard() {
    watchdog_.Disarm();
    if (registered_) g_worker_registry.Remove(tid_);
    if (has_alternate_stack_) sigaltstack(&previous_stack_, nullptr);
  }
  WorkerGuard(const WorkerGuard&) = delete;
  WorkerGuard& operator=(const WorkerGuard&) = delete;

  /*! \brief In the handler: the simulated thread whose stack the interrupted code ran on, else null. */
  Fiber* InterruptedFiber(void* context) const {
    if (runner_.stacks().StackAt(InterruptedStackPointer(context)) < 0) return nullptr;
    return thread_->fiber;  // the scheduler marks the running fiber before switching to its stack
  }

  BlockRunner& runner() { return runner_; }
  WatchdogTimer& watchdog() { return watchdog_; }

 private:
  BlockRunner& runner_;
  OsThreadState* thread_;  // the worker's thread state, read by the handler without a TLS lookup
  pid_t tid_;
  WatchdogTimer watchdog_;
  stack_t previous_stack_{};
  bool has_alternate_stack_ = false;
  bool registered_ = false;
};

inline void OnSignal(int signo, siginfo_t* info, void* context);

/*! \brief The handler's installation: counted across launches, restored after the last (see the file comment). */
class SignalHandlers {
 public:
  void Acquire() {
    std::lock_guard<std::mutex> lock(mu_);
    if (users_++ > 0) return;
    struct sigaction ours {};
    ours.sa_sigaction = &OnSignal;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    for (Entry& e : entries_) sigaddset(&ours.sa_mask, e.signo());
    for (Entry& e : entries_) {
      if (e.installed) continue;  // still linked in another library's chain since an earlier launch
      // Read the previous handler before installing: a forwarded signal may arrive as soon as ours is in place.
      if (sigaction(e.signo(), nullptr, &e.previous) != 0) continue;
      e.installed = sigaction(e.signo(), &ours, nullptr) == 0;
    }
  }

  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--users_ > 0) return;
    for (Entry& e : entries_) {
      struct sigaction current {};
      if (!e.installed || sigaction(e.signo(), nullptr, &current) != 0) continue;
      if (!(current.sa_flags & SA_SIGINFO) || current.sa_sigaction != &OnSignal) {  // stay in the chain
        PinLibrary();
        continue;
      }
      struct sigaction restore = e.previous;
      // A tick may still be on its way: ignore the watchdog's signal rather than let its default action kill.
      if (e.watchdog && restore.sa_handler == SIG_DFL && !(restore.sa_flags & SA_SIGINFO))
        restore.sa_handler = SIG_IGN;
      if (sigaction(e.signo(), &restore, nullptr) == 0) e.installed = false;
    }
  }

  /*! \brief In the handler: pass `signo` on to the handler found before ours, or give it its default action. */
  void Forward(int signo, siginfo_t* info, void* context) {
    for (Entry& e : entries_) {
      if (e.signo() != signo) continue;
      const struct sigaction& previous = e.previous;
      if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(signo, info, context);
      } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(signo);
      } else if (!e.watchdog) {
        // The default action of a fault (an ignored fault would only repeat): the faulting instruction runs again
        // on return and kills the process; a fault sent by kill() is raised again, delivered on return.
        signal(signo, SIG_DFL);
        if (info == nullptr || info->si_code <= 0) raise(signo);
      }
      return;
    }
  }

 private:
  /*! \brief Keep this library loaded for good: another handler may pass signals on to ours at any time. */
  void PinLibrary() {
    Dl_info info;
    if (pinned_ || dladdr(reinterpret_cast<void*>(&OnSignal), &info) == 0 || info.dli_fname == nullptr) return;
    pinned_ = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != nullptr;
  }

  struct Entry {
    int fixed_signo;  // 0: the watchdog's, known only at run time
    bool watchdog;
    struct sigaction previous;
    bool installed;
    int signo() const { return watchdog ? WatchdogSignal() : fixed_signo; }
  };
  std::mutex mu_;
  int users_ = 0;
  bool pinned_ = false;
  Entry entries_[3] = {{SIGSEGV, false, {}, false}, {SIGBUS, false, {}, false}, {0, true, {}, false}};
};

inline SignalHandlers g_signal_handlers;

/*! \brief The handlers are installed for as long as one of these lives (one per launch). */
class LaunchSignalScope {
 public:
  LaunchSignalScope() { g_signal_handlers.Acquire(); }
  ~LaunchSignalScope() { g_signal_handlers.Release(); }
  LaunchSignalScope(const LaunchSignalScope&) = delete;
  LaunchSignalScope& operator=(const LaunchSignalScope&) = delete;
};

/*! \brief Unblock the guarded signals and abandon the block: the handler never returns to restore the mask. */
[[noreturn]] inline void AbandonBlock(WorkerGuard& worker, Interruption why, const Fiber& thread, uintptr_t address) {
  sigset_t guarded;
  sigemptyset(&guarded);
  sigaddset(&guarded, SIGSEGV);
  sigaddset(&guarded, SIGBUS);
  sigaddset(&guarded, WatchdogSignal());
  pthread_sigmask(SIG_UNBLOCK, &guarded, nullptr);
  worker.runner().Interrupt(why, thread, address);
}

inline void OnSignal(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  WorkerGuard* worker = g_worker_registry.Find(KernelThreadId());
  const Fiber* running = worker != nullptr ? worker->InterruptedFiber(context) : nullptr;
  if (signo == WatchdogSignal() && worker != nullptr) {
    if (worker->watchdog().Tick(worker->runner().progress()) && running != nullptr)
      AbandonBlock(*worker, Interruption::kStalled, *running, 0);
  } else if ((signo == SIGSEGV || signo == SIGBUS) && running != nullptr) {
    const StackSet& stacks = worker->runner().stacks();
    const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
    const uintptr_t stack_low = reinterpret_cast<uintptr_t>(stacks.StackLow(worker->runner().StackOf(*running)));
    const bool overflow = stacks.InGuardPage(address) || InterruptedStackPointer(context) < stack_low;
    AbandonBlock(*worker, overflow ? Interruption::kStackOverflow : Interruption::kInvalidAccess, *running, address);
  } else {
    g_signal_handlers.Forward(signo, info, context);
  }
  errno = saved_errno;
}

}  // namespace tl_sim
#pragma GCC visibility pop
