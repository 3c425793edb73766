/*!
 * \file tl_templates/sim/sim/fiber_outlined.h
 * \brief The bodies of the runtime's shared StackPool (fiber.h), which use the standard library's containers:
 *        compiled once into the simulator runtime, never in a kernel library that links it (visibility.h,
 *        TL_SIM_OUTLINED). Included by fiber.h only, in the runtime's build.
 */
#pragma once

#include "fiber.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

// Not TL_SIM_OUTLINED: gcc ignores an asm name on a destructor; the class is hidden, so each runtime's stays its
// own.
inline StackPool::~StackPool() { Trim(); }

TL_SIM_OUTLINED_DEF StackSet* StackPool::Acquire(uint32_t count, size_t stack_bytes, char* error, size_t error_size) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < idle_.size(); ++i) {
      StackSet* s = idle_[i];
      if (s->count == count && s->stack_bytes == stack_bytes) {
        idle_[i] = idle_.back();
        idle_.pop_back();
        idle_stacks_ -= count;
        idle_bytes_ -= Bytes(*s);
        return s;
      }
    }
  }
  return Map(count, stack_bytes, error, error_size);
}

TL_SIM_OUTLINED_DEF void StackPool::Release(StackSet* s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (s->count > kMaxIdleStacks || Bytes(*s) > kMaxIdleBytes) {
    Unmap(s);
    return;
  }
  while (idle_stacks_ + s->count > kMaxIdleStacks || idle_bytes_ + Bytes(*s) > kMaxIdleBytes) {
    StackSet* oldest = idle_.front();  // the oldest make room
    idle_stacks_ -= oldest->count;
    idle_bytes_ -= Bytes(*oldest);
    Unmap(oldest);
    idle_.erase(idle_.begin());
  }
  idle_.push_back(s);
  idle_stacks_ += s->count;
  idle_bytes_ += Bytes(*s);
}

TL_SIM_OUTLINED_DEF void StackPool::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  for (StackSet* s : idle_) Unmap(s);
  idle_.clear();
  idle_stacks_ = idle_bytes_ = 0;
}

}  // namespace tl_sim
#pragma GCC visibility pop
