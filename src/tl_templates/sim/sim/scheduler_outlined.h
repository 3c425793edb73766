/*!
 * \file tl_templates/sim/sim/scheduler_outlined.h
 * \brief The body of scheduler.h's BlockRunner: running a block (loop or fibers), joining and completing
 *        rendezvous, thread switches, failing and describing a block. Compiled once into the simulator runtime (and
 *        into a kernel library that carries its own simulator), never in a kernel library that links the runtime
 *        (visibility.h, TL_SIM_OUTLINED): such a library calls the runtime's. Included by scheduler.h only.
 *
 * BlockRunner::Arrive and WaitForWake stay inline in scheduler.h: they mark the library whose code calls them as
 * able to make a thread wait (TL_SIM_MAY_BLOCK), which decides between loop and fiber execution.
 */
#pragma once

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "scheduler.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

TL_SIM_OUTLINED_DEF uint64_t BlockRunner::Join(const Collective& op, Group g, const ThreadSet& members,
                                              CollectiveSlot in, const char* file, int line) {
  if (mode_ == ExecMode::kLoop) CannotWaitInLoop(op.name, file, line);
  Fiber& self = current();
  const uint32_t index = GroupIndex(g, self.linear);
  const uint32_t base = GroupBase(g, index);
  const uint32_t me = self.linear - base;
  if (!members.Test(me))
    Fail(musaErrorLaunchFailure, "%s (%s:%d): the calling thread is not in its own participant mask", op.name,
         SourceName(file), line);
  // a warp whose lanes have exited: they are no participants (LiveLanes); the common case copies nothing
  const bool lanes_exited = op.exited_lanes_leave && g == Group::kWarp && warp_live_[index] < GroupExtent(g, index);
  const ThreadSet live = lanes_exited ? LiveLanes(base, members) : ThreadSet();
  const ThreadSet& participants = lanes_exited ? live : members;
  Rendezvous* rv = nullptr;
  for (Rendezvous* r = heads_[static_cast<int>(g)][index]; r != nullptr; r = r->next) {
    if (r->members.Test(me)) {
      rv = r;
      break;
    }
    if (r->members.Intersects(participants))
      Fail(musaErrorLaunchFailure,
           "%s (%s:%d) names threads of %s that wait at %s (%s:%d) over a different set of threads", op.name,
           SourceName(file), line, GroupName(g, index), r->op->name, SourceName(r->file), r->line);
  }
  if (rv == nullptr) {
    rv = Open(op, g, index, base, participants, file, line);
  } else if (rv->op != &op) {
    Fail(musaErrorLaunchFailure,
         "divergent collective: this thread reaches %s (%s:%d) while %u of %u threads of %s wait at %s (%s:%d)",
         op.name, SourceName(file), line, rv->count, rv->expected, GroupName(g, index), rv->op->name,
         SourceName(rv->file), rv->line);
  } else if (!(rv->members == participants)) {
    Fail(musaErrorLaunchFailure, "%s (%s:%d): threads of %s disagree on the set of participating threads",
         op.name, SourceName(file), line, GroupName(g, index));
  }
  self.slot = in;
  rv->arrived.Set(me);
  if (++rv->count == rv->expected) {
    Complete(rv, static_cast<int>(me));
    if (checked_) Yield(self);
    return self.slot.out;
  }
  self.state = FiberState::kWaiting;
  self.waiting_on = rv;
  Suspend(self);
  return self.slot.out;
}

TL_SIM_OUTLINED_DEF void BlockRunner::SleepUntilWoken(const char* what, const char* file, int line) {
  if (mode_ == ExecMode::kLoop) CannotWaitInLoop(what, file, line);
  Fiber& self = current();
  self.state = FiberState::kWaiting;
  self.waiting_on = nullptr;
  self.wait_what = what;
  self.wait_file = file;
  self.wait_line = line;
  Suspend(self);
}

TL_SIM_OUTLINED_DEF bool BlockRunner::Run(uint3 block_idx, uint64_t block_id) {
  OsThreadState& t = g_thread;
  NoteProgress();
  t.block_idx = block_idx;
  t.last_access_line = 0;
  t.last_access_what = nullptr;
  block_idx_ = block_idx;
  aborted_ = false;
  interruption_ = Interruption::kNone;
  if (checked_) random_.Seed(seed_, block_id);
  for (auto& epochs : epochs_) std::fill(epochs.begin(), epochs.end(), t.next_sync_epoch);
  code_ = musaSuccess;
  message_[0] = '\0';
  live_ = n_;
  warp_live_.resize(heads_[static_cast<int>(Group::kWarp)].size());
  for (uint32_t w = 0; w < warp_live_.size(); ++w) warp_live_[w] = GroupExtent(Group::kWarp, w);
  ready_head_ = ready_size_ = 0;
  free_ = nullptr;
  for (Rendezvous& rv : rendezvous_) {
    rv.next = free_;
    free_ = &rv;
  }
  for (auto& heads : heads_) std::fill(heads.begin(), heads.end(), nullptr);
  for (auto& extension : extensions_) extension.reset();
  const size_t usable = stacks_->stride - stacks_->guard_bytes;
  for (uint32_t i = 0; i < n_; ++i) {
    Fiber& f = fibers_[i];
    f.state = FiberState::kReady;
    f.waiting_on = nullptr;
    f.wait_what = nullptr;
    f.activemask_calls = 0;
    if (mode_ == ExecMode::kFibers) PrepareContext(&f.ctx, stacks_->StackLow(i), usable, &FiberMain, &f);
    Push(f);
  }
  t.block = this;
  if (mode_ == ExecMode::kLoop) {
    PrepareContext(&loop_, stacks_->StackLow(0), usable, &LoopMain, this);
    SwitchContext(&scheduler_, &loop_);
  } else {
    Fiber* first = Pop();
    Activate(*first);
    SwitchContext(&scheduler_, &first->ctx);
  }
  // Back on the OS thread's own stack: every thread exited, or none can proceed, or one failed or was interrupted.
  t.block = nullptr;
  t.fiber = nullptr;
  t.next_sync_epoch = LastEpoch() + 1;
  NoteProgress();
  if (interruption_ != Interruption::kNone) DescribeInterruption(t);
  if (aborted_) return false;
  if (live_ > 0) {
    DescribeDeadlock();
    return false;
  }
  return true;
}

TL_SIM_OUTLINED_DEF void BlockRunner::MeetClocks(profile::Recorder& clocks, Group g, const Rendezvous& rv) {
  double at = 0;
  rv.members.ForEach([&](uint32_t i) { at = std::max(at, clocks.Settle(rv.base + i)); });
  const bool block = g == Group::kBlock;
  if (block) at += profile::kTiming.barrier_cycles;
  if (g == Group::kWarp && rv.op->exchange != nullptr) clocks.Add(profile::k_warp_shuffles, 1);  // not __syncwarp
  rv.members.ForEach([&](uint32_t i) {
    clocks.WaitUntil(rv.base + i, at, block ? profile::k_barrier_stall_cycles : profile::kNumCounters);
  });
}

TL_SIM_OUTLINED_DEF void BlockRunner::Append(const char* fmt, ...) {
  const size_t used = std::strlen(message_);
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(message_ + used, sizeof(message_) - used, fmt, ap);
  va_end(ap);
}

TL_SIM_OUTLINED_DEF void BlockRunner::Fail(musaError_t code, const char* fmt, ...) {
  Fiber& self = current();
  int k = std::snprintf(message_, sizeof(message_), "block (%u,%u,%u), thread (%u,%u,%u): ", block_idx_.x,
                        block_idx_.y, block_idx_.z, self.idx.x, self.idx.y, self.idx.z);
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(message_ + k, sizeof(message_) - static_cast<size_t>(k), fmt, ap);
  va_end(ap);
  code_ = code;
  aborted_ = true;
  SwitchContext(&self.ctx, &scheduler_);
  __builtin_unreachable();  // an aborted block's fibers are never resumed
}

TL_SIM_OUTLINED_DEF void BlockRunner::Interrupt(Interruption why, const Fiber& thread, uintptr_t address) {
  interruption_ = why;
  interrupted_ = thread.linear;
  fault_address_ = address;
  aborted_ = true;
  FiberContext abandoned;
  SwitchContext(&abandoned, &scheduler_);
  __builtin_unreachable();
}

TL_SIM_OUTLINED_DEF void BlockRunner::FiberMain(void* arg) {
  Fiber& f = *static_cast<Fiber*>(arg);
  BlockRunner& b = *f.block;
  b.RunThread();
  b.OnExit(f);
}

TL_SIM_OUTLINED_DEF void BlockRunner::LoopMain(void* arg) {
  BlockRunner& b = *static_cast<BlockRunner*>(arg);
  for (Fiber* f = b.Pop(); f != nullptr; f = b.Pop()) {
    b.Activate(*f);
    b.RunThread();
    b.FinishThread(*f);
  }
  // What the last thread's exit does in kFibers: no thread waits here, so no model can wake one.
  if (b.Quiesce()) b.Fail(musaErrorLaunchFailure, "internal simulator error: a thread woke in loop execution");
  SwitchContext(&b.loop_, &b.scheduler_);
  __builtin_unreachable();  // a finished block's loop is never resumed
}

TL_SIM_OUTLINED_DEF void BlockRunner::RunThread() {
#if defined(__cpp_exceptions)
  bool threw = false;
  try {
    kernel_.invoke(kernel_.bound);
  } catch (...) {
    threw = true;  // fail outside the handler: switching stacks inside one would corrupt the EH state
  }
  if (threw) Fail(musaErrorLaunchFailure, "the kernel threw a C++ exception");
#else
  kernel_.invoke(kernel_.bound);
#endif
}

TL_SIM_OUTLINED_DEF void BlockRunner::CannotWaitInLoop(const char* what, const char* file, int line) {
  Fail(musaErrorLaunchFailure,
       "internal simulator error: %s (%s:%d) can wait, but the block runs as a loop over its threads, where no "
       "thread may wait; set TILELANG_SIM_EXEC=fibers to work around it",
       what, SourceName(file), line);
}

TL_SIM_OUTLINED_DEF void BlockRunner::OnExit(Fiber& self) {
  FinishThread(self);
  Suspend(self);
  __builtin_unreachable();  // an exited fiber is never resumed
}

TL_SIM_OUTLINED_DEF void BlockRunner::FinishThread(Fiber& self) {
  self.state = FiberState::kExited;
  --live_;
  --warp_live_[GroupIndex(Group::kWarp, self.linear)];
  for (auto& extension : extensions_)
    if (extension != nullptr) extension->OnThreadExit(*this, self);
  if (mode_ == ExecMode::kLoop) return;  // no rendezvous ever opens in a loop (Arrive refuses it)
  for (int g = 0; g < kNumGroupKinds; ++g) {
    const uint32_t index = GroupIndex(static_cast<Group>(g), self.linear);
    for (Rendezvous *r = heads_[g][index], *next = nullptr; r != nullptr; r = next) {
      next = r->next;
      if (!r->members.Test(self.linear - r->base)) continue;
      if (r->op->exited_lanes_leave) {  // an exited lane takes no part in a warp's *_sync intrinsic
        r->members.Reset(self.linear - r->base);
        if (--r->expected == r->count) Complete(r, -1);
        continue;
      }
      Fail(musaErrorLaunchFailure, "divergent %s: this thread exited while %u of %u threads of %s wait at %s (%s:%d)",
           r->op->name, r->count, r->expected, GroupName(r->group, r->group_index), r->op->name,
           SourceName(r->file), r->line);
    }
  }
}

TL_SIM_OUTLINED_DEF Rendezvous* BlockRunner::Open(const Collective& op, Group g, uint32_t index, uint32_t base,
                                                 const ThreadSet& members, const char* file, int line) {
  members.ForEach([&](uint32_t i) {
    if (base + i >= n_)
      Fail(musaErrorLaunchFailure, "%s (%s:%d) names thread %u of %s, which does not exist", op.name,
           SourceName(file), line, i, GroupName(g, index));
    const Fiber& f = fibers_[base + i];
    if (f.state == FiberState::kExited)
      Fail(musaErrorLaunchFailure, "divergent %s (%s:%d): thread (%u,%u,%u) of %s has exited and can never arrive",
           op.name, SourceName(file), line, f.idx.x, f.idx.y, f.idx.z, GroupName(g, index));
  });
  Rendezvous* rv = free_;
  free_ = rv->next;
  rv->op = &op;
  rv->group = g;
  rv->group_index = index;
  rv->base = base;
  rv->members = members;
  rv->arrived.Clear();
  rv->expected = members.Count();
  rv->count = 0;
  rv->file = file;
  rv->line = line;
  rv->next = heads_[static_cast<int>(g)][index];
  heads_[static_cast<int>(g)][index] = rv;
  return rv;
}

TL_SIM_OUTLINED_DEF void BlockRunner::Suspend(Fiber& self) {
  if (mode_ == ExecMode::kLoop) CannotWaitInLoop("a thread switch", __FILE__, __LINE__);
  Fiber* next = Pop();
  if (next == nullptr && Quiesce()) next = Pop();
  if (next == &self) {
    Activate(self);
  } else if (next != nullptr) {
    Activate(*next);
    SwitchContext(&self.ctx, &next->ctx);
  } else {
    SwitchContext(&self.ctx, &scheduler_);
  }
}

TL_SIM_OUTLINED_DEF bool BlockRunner::Quiesce() {
  bool woke = false;
  for (auto& extension : extensions_)
    if (extension != nullptr && ready_size_ == 0) woke = extension->OnQuiescent(*this) || woke;
  return woke && ready_size_ > 0;
}

TL_SIM_OUTLINED_DEF void BlockRunner::Yield(Fiber& self) {
  self.state = FiberState::kReady;
  Push(self);
  Suspend(self);
}

TL_SIM_OUTLINED_DEF const char* BlockRunner::GroupName(Group g, uint32_t index) {
  if (g == Group::kBlock) return "the block";
  std::snprintf(group_name_, sizeof(group_name_), "%s %u", g == Group::kWarp ? "warp" : "squad", index);
  return group_name_;
}

TL_SIM_OUTLINED_DEF void BlockRunner::DescribeDeadlock() {
  code_ = musaErrorLaunchFailure;
  message_[0] = '\0';
  Append("block (%u,%u,%u): deadlock, no thread can proceed:", block_idx_.x, block_idx_.y, block_idx_.z);
  AppendWaiting(3);
  for (auto& extension : extensions_)
    if (extension != nullptr) extension->DescribeWaits(*this);
}

TL_SIM_OUTLINED_DEF void BlockRunner::AppendWaiting(int limit) {
  int shown = 0, more = 0;
  for (int g = 0; g < kNumGroupKinds; ++g) {
    for (uint32_t index = 0; index < heads_[g].size(); ++index) {
      for (const Rendezvous* r = heads_[g][index]; r != nullptr; r = r->next) {
        if (shown == limit) {
          ++more;
          continue;
        }
        ++shown;
        Append(" %u of %u threads of %s wait at %s (%s:%d)", r->count, r->expected, GroupName(r->group, index),
               r->op->name, SourceName(r->file), r->line);
        const Fiber* missing = nullptr;
        r->members.ForEach([&](uint32_t i) {
          if (missing == nullptr && !r->arrived.Test(i)) missing = &fibers_[r->base + i];
        });
        // Open() and OnExit() rule out exited members, so a missing thread waits elsewhere or runs.
        if (missing != nullptr && missing->waiting_on != nullptr) {
          const Rendezvous* w = missing->waiting_on;
          Append(", while thread (%u,%u,%u) waits at %s (%s:%d)", missing->idx.x, missing->idx.y, missing->idx.z,
                 w->op->name, SourceName(w->file), w->line);
        }
        Append(";");
      }
    }
  }
  if (more > 0) Append(" and %d more", more);
}

TL_SIM_OUTLINED_DEF void BlockRunner::DescribeInterruption(const OsThreadState& t) {
  const Fiber& f = fibers_[interrupted_];
  code_ = musaErrorLaunchFailure;
  message_[0] = '\0';
  Append("block (%u,%u,%u), thread (%u,%u,%u)", block_idx_.x, block_idx_.y, block_idx_.z, f.idx.x, f.idx.y,
         f.idx.z);
  switch (interruption_) {
    case Interruption::kStackOverflow:
      Append(" overflowed its %zu KiB stack; raise %s", stacks_->stack_bytes / 1024, kStackEnvVar);
      break;
    case Interruption::kInvalidAccess:
      Append(": invalid memory access at address 0x%" PRIxPTR " (the kernel touched memory outside its tensors)",
             fault_address_);
      break;
    case Interruption::kStalled:
      Append(" made no progress for %g s (%s): it runs without reaching a barrier or other collective, and the "
             "simulator switches threads only there, so a loop waiting for another thread of its block spins "
             "forever", watchdog_seconds_, kWatchdogEnvVar);
      break;
    case Interruption::kNone:
      break;
  }
  if (t.last_access_line > 0)
    Append("; its last checked memory access was %s at line %d of the generated source",
           t.last_access_what != nullptr ? t.last_access_what : "an access", t.last_access_line);
  if (interruption_ == Interruption::kStalled) {
    Append(";");
    AppendWaiting(3);
    if (ready_size_ > 0) Append(" %u other threads are ready to run;", ready_size_);
  }
}

TL_SIM_OUTLINED_DEF void BlockRunner::Complete(Rendezvous* rv, int caller) {
  const Group g = rv->group;
  ++epochs_[static_cast<int>(g)][rv->group_index];
  NoteProgress();
  if (g_thread.profile != nullptr) MeetClocks(*g_thread.profile, g, *rv);
  if (rv->op->exchange != nullptr) rv->op->exchange(*this, *rv);
  if (g != Group::kBlock)
    for (auto& extension : extensions_)
      if (extension != nullptr) extension->OnRendezvous(*this, *rv);
  rv->members.ForEach([&](uint32_t i) {
    if (static_cast<int>(i) == caller) return;
    Fiber& f = fibers_[rv->base + i];
    f.state = FiberState::kReady;
    f.waiting_on = nullptr;
    Push(f);
  });
  Close(rv);
}

TL_SIM_OUTLINED_DEF ThreadSet BlockRunner::LiveLanes(uint32_t base, const ThreadSet& members) const {
  ThreadSet live = members;
  members.ForEach([&](uint32_t i) {
    if (fibers_[base + i].state == FiberState::kExited) live.Reset(i);
  });
  return live;
}

TL_SIM_OUTLINED_DEF void BlockRunner::Close(Rendezvous* rv) {
  Rendezvous** link = &heads_[static_cast<int>(rv->group)][rv->group_index];
  while (*link != rv) link = &(*link)->next;
  *link = rv->next;
  rv->next = free_;
  free_ = rv;
}

TL_SIM_OUTLINED_DEF uint64_t BlockRunner::LastEpoch() const {
  uint64_t last = 0;
  for (const auto& epochs : epochs_)
    for (uint64_t e : epochs) last = std::max(last, e);
  return last;
}

}  // namespace tl_sim
#pragma GCC visibility pop
