/*!
 * \file tl_templates/sim/sim/watchdog.h
 * \brief The watchdog: a launch whose worker makes no progress for TILELANG_SIM_WATCHDOG_S seconds fails instead
 *        of hanging.
 *
 * Progress is BlockRunner::progress(), a counter the worker bumps at every thread switch, completed rendezvous and
 * block boundary. Each worker arms a POSIX timer that signals the worker itself (SIGEV_THREAD_ID) every quarter
 * of the period; at each tick the signal handler (signal_guard.h) compares the counter with its value at the
 * previous tick, and after four quiet ticks in a row (at least one whole period without progress) it interrupts
 * the running simulated thread. So there is no monitor thread, and a launch pays three system calls per worker
 * plus one counter increment per switch; a short launch never sees a tick. Counting ticks rather than reading the
 * clock keeps a stopped process (a debugger, SIGSTOP, a suspended machine) from looking stalled when it resumes:
 * the ticks it missed are delivered as one. A debugger stops at the ticks of a long launch unless told otherwise
 * (gdb: `handle SIG61 nostop noprint pass`; the signal is SIGRTMAX - 3).
 */
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <time.h>

#include <cstdint>

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief The real-time signal of the watchdog's ticks (a function: SIGRTMAX is only known at run time). */
inline int WatchdogSignal() { return SIGRTMAX - 3; }

/*! \brief One worker's timer and the count of quiet ticks. Arm/Disarm run on the worker; Tick in its handler. */
class WatchdogTimer {
 public:
  static constexpr int kQuietTicks = 4;

  /*! \brief Signal kernel thread `tid` every `seconds` / kQuietTicks, starting from progress value `progress`.
   *         False when the system refuses a timer: the launch then runs without a watchdog. */
  bool Arm(pid_t tid, double seconds, uint64_t progress) {
    seen_ = progress;
    quiet_ = 0;
    sigevent event{};
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = WatchdogSignal();
    event._sigev_un._tid = tid;
    if (timer_create(CLOCK_MONOTONIC, &event, &timer_) != 0) return false;
    double tick = seconds / kQuietTicks;
    if (tick < 1e-3) tick = 1e-3;
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(tick);
    spec.it_value.tv_nsec = static_cast<long>((tick - static_cast<double>(spec.it_value.tv_sec)) * 1e9);
    spec.it_interval = spec.it_value;
    if (timer_settime(timer_, 0, &spec, nullptr) != 0) {
      timer_delete(timer_);
      return false;
    }
    armed_ = true;
    return true;
  }

  /*! \brief Stop the ticks; Linux drops a tick still pending with the timer. */
  void Disarm() {
    if (armed_) timer_delete(timer_);
    armed_ = false;
  }

  /*! \brief A tick saw the worker's counter at `progress`: true once a whole period has passed without progress
   *         (and at every later quiet tick, until the counter moves). */
  bool Tick(uint64_t progress) {
    if (progress != seen_) {
      seen_ = progress;
      quiet_ = 0;
      return false;
    }
    return ++quiet_ >= kQuietTicks;
  }

 private:
  timer_t timer_{};
  bool armed_ = false;
  uint64_t seen_ = 0;
  int quiet_ = 0;
};

}  // namespace tl_sim
#pragma GCC visibility pop
