/*!
 * \file tl_templates/sim/sim/fiber.h
 * \brief Execution contexts for simulated threads: the context switch and the pool of guarded stacks.
 *
 * Why a hand-written switch: glibc's swapcontext saves and restores the signal mask with a system call on every
 * switch, and a block of 256 threads crossing one barrier switches 256 times. On x86-64 the switch below saves only
 * the callee-saved registers and the SSE/x87 control words (what the SysV ABI asks a function call to preserve),
 * which makes a switch cost about as much as an indirect call. _setjmp/_longjmp tricks are avoided because glibc's
 * fortified longjmp aborts when jumping to another stack. Other architectures, or -DTL_SIM_FIBER_UCONTEXT=1, use
 * ucontext (correct, slower).
 *
 * Stacks are mmap'd with a PROT_NONE guard page below each one (an overflow faults instead of corrupting the
 * neighbour; signal_guard.h turns the fault into a launch error) and sized by TILELANG_SIM_STACK_KB. A kernel
 * library that carries its own copy of the simulator unmaps them when the launch ends: a cache would live once per
 * loaded library, and each idle set of N guarded stacks holds 2N memory mappings, so a process with a few dozen
 * kernels of 1024 threads loaded would exhaust the kernel's mapping limit (vm.max_map_count), as a long test run
 * did. The runtime shared by the kernel libraries of an arch (docs/SIMULATOR.md) keeps released sets for
 * the next launches instead, within a bound for the whole process. The worker's alternate signal stack shares the
 * mapping.
 */
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <vector>


#include "config.h"
#include "visibility.h"

#if !defined(__x86_64__) || defined(TL_SIM_FIBER_UCONTEXT)
#include <ucontext.h>
#define TL_SIM_FIBER_ASM 0
#else
#define TL_SIM_FIBER_ASM 1
#endif

#if TL_SIM_FIBER_ASM
// tl_sim_fiber_switch(void** save_sp, void* resume_sp): push the callee-saved state on the current stack, store the
// stack pointer in *save_sp, load resume_sp and pop the state saved there. Frame, from the saved sp upwards:
// [mxcsr:4, x87 cw:2, pad:2][r15][r14][r13][r12][rbx][rbp][return address] = 64 bytes.
// tl_sim_fiber_trampoline: first "return" of a new fiber; calls entry(arg) with entry in r13 and arg in r12.
// Weak + hidden: one private copy per kernel library, and several inclusions would still link.
asm(R"(
  .text
  .p2align 4
  .weak tl_sim_fiber_switch
  .hidden tl_sim_fiber_switch
  .type tl_sim_fiber_switch, @function
tl_sim_fiber_switch:
  .cfi_startproc
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size tl_sim_fiber_switch, .-tl_sim_fiber_switch

  .p2align 4
  .weak tl_sim_fiber_trampoline
  .hidden tl_sim_fiber_trampoline
  .type tl_sim_fiber_trampoline, @function
tl_sim_fiber_trampoline:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  callq *%r13
  ud2
  .cfi_endproc
  .size tl_sim_fiber_trampoline, .-tl_sim_fiber_trampoline
)");
#endif

#pragma GCC visibility push(hidden)
#if TL_SIM_FIBER_ASM
extern "C" void tl_sim_fiber_switch(void** save_sp, void* resume_sp);
extern "C" void tl_sim_fiber_trampoline();
#endif

namespace tl_sim {

using FiberEntry = void (*)(void* arg);

/*! \brief The saved state of a suspended execution context (a simulated thread, or the scheduler's OS stack). */
struct FiberContext {
#if TL_SIM_FIBER_ASM
  void* sp = nullptr;
#else
  ucontext_t uc;
  FiberEntry entry = nullptr;
  void* arg = nullptr;
#endif
};

#if TL_SIM_FIBER_ASM

/*! \brief Make `ctx` start `entry(arg)` on the stack [stack_lo, stack_lo + bytes) at its next resumption. */
inline void PrepareContext(FiberContext* ctx, void* stack_lo, size_t bytes, FiberEntry entry, void* arg) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack_lo) + bytes) & ~uintptr_t{15};
  uint64_t* frame = reinterpret_cast<uint64_t*>(top) - 8;
  uint32_t mxcsr;
  uint16_t fpcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpcw));
  frame[0] = static_cast<uint64_t>(mxcsr) | (static_cast<uint64_t>(fpcw) << 32);  // inherit the FP modes
  frame[1] = 0;                                                                  // r15
  frame[2] = 0;                                                                  // r14
  frame[3] = reinterpret_cast<uint64_t>(entry);                                  // r13
  frame[4] = reinterpret_cast<uint64_t>(arg);                                    // r12
  frame[5] = 0;                                                                  // rbx
  frame[6] = 0;                                                                  // rbp: ends frame-pointer walks
  frame[7] = reinterpret_cast<uint64_t>(&tl_sim_fiber_trampoline);               // "return" address
  // After the ret, rsp == top (16-aligned), so the trampoline's call enters entry() with the ABI's alignment.
  ctx->sp = frame;
}

/*! \brief Suspend the running context into `save` and resume `resume`. */
inline void SwitchContext(FiberContext* save, FiberContext* resume) { tl_sim_fiber_switch(&save->sp, resume->sp); }

#else

inline void UcontextStart(unsigned int hi, unsigned int lo) {
  auto* ctx = reinterpret_cast<FiberContext*>((static_cast<uintptr_t>(hi) << 32) | lo);
  ctx->entry(ctx->arg);
}

inline void PrepareContext(FiberContext* ctx, void* stack_lo, size_t bytes, FiberEntry entry, void* arg) {
  getcontext(&ctx->uc);
  ctx->uc.uc_stack.ss_sp = stack_lo;
  ctx->uc.uc_stack.ss_size = bytes;
  ctx->uc.uc_link = nullptr;  // entry never returns
  ctx->entry = entry;
  ctx->arg = arg;
  uintptr_t self = reinterpret_cast<uintptr_t>(ctx);
  // makecontext passes int arguments only: split the pointer.
  makecontext(&ctx->uc, reinterpret_cast<void (*)()>(&UcontextStart), 2, static_cast<unsigned int>(self >> 32),
              static_cast<unsigned int>(self & 0xffffffffu));
}

inline void SwitchContext(FiberContext* save, FiberContext* resume) { swapcontext(&save->uc, &resume->uc); }

#endif

// The alternate signal stack of each worker: the fault handler must run somewhere when a fiber's stack is full.
inline constexpr size_t kSignalStackBytes = 64 * 1024;

/*! \brief `count` stacks of `stack_bytes` each, in one mapping, each with a guard page below it; after them, behind
 *         a guard page of its own, the worker's alternate signal stack. */
struct StackSet {
  unsigned char* base = nullptr;
  size_t map_bytes = 0;
  size_t stack_bytes = 0;
  size_t stride = 0;  // guard + stack
  size_t guard_bytes = 0;
  uint32_t count = 0;
  unsigned char* signal_stack = nullptr;
  size_t signal_stack_bytes = 0;

  void* StackLow(uint32_t i) const { return base + i * stride + guard_bytes; }

  /*! \brief The stack that holds `address`, counting the guard page below each stack as its own; -1 if none. */
  int64_t StackAt(uintptr_t address) const {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(base);
    if (address < lo || address >= lo + stride * count) return -1;
    return static_cast<int64_t>((address - lo) / stride);
  }
  /*! \brief Whether `address` lies in the guard page below one of the stacks. */
  bool InGuardPage(uintptr_t address) const {
    return StackAt(address) >= 0 && (address - reinterpret_cast<uintptr_t>(base)) % stride < guard_bytes;
  }
};

#if defined(TL_SIM_SHARED_RUNTIME)
/*! \brief Maps the stack sets of launches (one per OS thread of a launch) and keeps released ones for the next
 *         launches: the process has one pool per arch (the runtime's), so idle stacks are bounded by
 *         kMaxIdleStacks in all, whatever the number of kernel libraries (see the file comment). Thread-safe. Its
 *         bodies are the runtime's (fiber_outlined.h). */
class StackPool {
 public:
  static constexpr uint64_t kMaxIdleStacks = 4096;           // about 8192 mappings at most
  static constexpr uint64_t kMaxIdleBytes = uint64_t{128} << 20;  // of stack, touched pages staying resident

  /*! \brief The runtime is unloaded when the last kernel library linking it is (kernels compiled with the cache
   *         off, then dropped): its idle sets are unmapped, or each unload and reload would keep up to
   *         2 x kMaxIdleStacks mappings until the process hits vm.max_map_count (a fuzz child did, ~250 programs). */
  ~StackPool();  // fiber_outlined.h: its members' destruction instantiates their container

  /*! \brief A set of `count` stacks of `stack_bytes`; null (and `error` filled) on failure. */
  TL_SIM_OUTLINED StackSet* Acquire(uint32_t count, size_t stack_bytes, char* error, size_t error_size)
      TL_SIM_OUTLINED_AS("stack_pool_acquire");

  TL_SIM_OUTLINED void Release(StackSet* s) TL_SIM_OUTLINED_AS("stack_pool_release");

  /*! \brief Unmap every idle set (musaDeviceReset). */
  TL_SIM_OUTLINED void Trim() TL_SIM_OUTLINED_AS("stack_pool_trim");

 private:
  static uint64_t Bytes(const StackSet& s) { return uint64_t{s.count} * s.stride; }

  std::mutex mu_;
  std::vector<StackSet*> idle_;  // oldest first
  uint64_t idle_stacks_ = 0;
  uint64_t idle_bytes_ = 0;
#else
/*! \brief Maps and unmaps the stack sets of launches: one per OS thread of a launch, for the launch (see the file
 *         comment for why nothing is kept). Thread-safe: it holds no state. */
class StackPool {
 public:
  /*! \brief A set of `count` stacks of `stack_bytes`; null (and `error` filled) on failure. */
  StackSet* Acquire(uint32_t count, size_t stack_bytes, char* error, size_t error_size) {
    return Map(count, stack_bytes, error, error_size);
  }

  void Release(StackSet* s) { Unmap(s); }

  /*! \brief Nothing is idle to unmap (musaDeviceReset). */
  void Trim() {}
#endif


 private:
  static StackSet* Map(uint32_t count, size_t stack_bytes, char* error, size_t error_size) {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t stack = (stack_bytes + page - 1) / page * page;
    auto* s = new StackSet();
    s->stack_bytes = stack_bytes;
    s->guard_bytes = page;
    s->stride = page + stack;
    s->count = count;
    s->signal_stack_bytes = kSignalStackBytes;
    s->map_bytes = s->stride * count + page + kSignalStackBytes;
    void* p = mmap(nullptr, s->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::snprintf(error, error_size, "cannot map %u fiber stacks of %zu KiB (%s); lower %s", count,
                    stack_bytes / 1024, "mmap failed", kStackEnvVar);
      delete s;
      return nullptr;
    }
    s->base = static_cast<unsigned char*>(p);
    for (uint32_t i = 0; i <= count; ++i) {  // the last guard is the signal stack's
      if (mprotect(s->base + i * s->stride, page, PROT_NONE) != 0) {
        std::snprintf(error, error_size, "cannot protect the guard page of fiber stack %u", i);
        Unmap(s);
        return nullptr;
      }
    }
    s->signal_stack = s->base + s->stride * count + page;
    return s;
  }

  static void Unmap(StackSet* s) {
    munmap(s->base, s->map_bytes);
    delete s;
  }

};

#if defined(TL_SIM_SHARED_RUNTIME)
/*! \brief The runtime's pool (void*: a signature naming a hidden type would hide the symbol). */
extern "C" TL_SIM_RT_EXPORT void* RuntimeStackPool() __asm__(TL_SIM_RT_SYMBOL("stack_pool"));
#endif
#if defined(TL_SIM_LINK_RUNTIME)
inline StackPool& GlobalStackPool() { return *static_cast<StackPool*>(RuntimeStackPool()); }
#else
inline StackPool& GlobalStackPool() {
  static StackPool pool;
  return pool;
}
#endif

}  // namespace tl_sim
#pragma GCC visibility pop

#if defined(TL_SIM_BUILD_RUNTIME)  // the shared pool's bodies; a linked kernel library calls the runtime's
#include "fiber_outlined.h"
#endif
