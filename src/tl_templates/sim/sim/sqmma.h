/*!
 * \file tl_templates/sim/sim/sqmma.h
 * \brief mp_31 SQMMA: the asynchronous MMA of a squad (4 warps = 128 threads) on shared-memory operands, and the
 *        built-ins that wait for it.
 *
 * Prototypes, as device code calls them (mutlass include/mute/arch/mma_mp31_sqmma.hpp `MP31_*_SS::fma` passes
 * `d`, `&desc_a`, `&desc_b`, `d` and int flags; the waits as TileLang's MUSA port tl_templates/musa/intrin.h calls
 * them):
 *   void __musa_sqmma_mMnN_mma(int32_t* d, const int32_t* desc_a, const int32_t* desc_b, const int32_t* c,
 *                              int tnspA, int tnspB, int scaleA, int scaleB, int scaleD, int sat, int k,
 *                              int mma_type);
 *   void __musa_sqmma_wait();          // older mcc: wait for every SQMMA the thread issued
 *   void __musa_tce_commit_group();    // mcc >= 4.3.6: close the group of SQMMAs issued since the last commit
 *   void __musa_tce_wait_group(int n); // wait until at most n of the thread's committed groups are in flight
 * MxN in {16x64, 32x32, 32x64, 32x128, 64x16, 64x32, 64x64, 64x128, 128x32, 128x64, 128x128}; tf32 lacks 32x128,
 * 64x128 and 128x32 and needs both operands K-major at M = 128 (mutlass's ss_op_selector). k: f16/bf16 16|32|64,
 * tf32 8|16|32, 8-bit 32|64|128. tnspA = 1: A is M-major; tnspB = 1: B is K-major (callers pass 1 - B's major
 * code). scaleA/scaleB = 1 negate the operand (floating-point formats only [I]). scaleD 0: D = A*B + C, 1: D = A*B.
 * sat must be 0 (not modelled [I]). mma_type: mutlass's TceABDtype code (mma_numerics.h). D and C hold M*N/128
 * words per thread: with w = t/32, l = t%32, v = v0 + 2*v1 + 2*(N/16)*v2, value v is (m, n) =
 * (l/8 + 4*w + 16*v2, l%8 + 8*v0 + 16*v1) (MUSA_LAYOUTS.md section 3). Operands: sqmma_descriptor.h.
 *
 * Timing model. The issue is a rendezvous of the squad: every thread passes the same descriptors and flags; the
 * last to arrive checks them and the operand addresses (alignment, inside the launch's dynamic shared memory) and
 * queues the operation on each thread, whose registers stay untouched: reading D before the wait sees the old
 * values. Each thread's wait then applies its queued operations in issue order: the operands are read from shared
 * memory when the first thread of the squad completes the operation (the latest moment the hardware could still
 * be reading them, so a kernel that overwrites an operand before waiting computes with the new data), and C is
 * read from the thread's registers when it applies, so back-to-back SQMMAs that accumulate into the same
 * registers chain. Operations a thread never waits for are dropped with the block. Arithmetic: mma_numerics.h.
 *
 * A kernel library that links the simulator runtime sees only the built-ins, the issue (which makes the thread wait
 * at the squad's rendezvous, so it stays inline: scheduler.h's loop/fiber choice) and the declarations of the
 * model's body; the body (operand planning and fetch, the queues, the arithmetic) is sqmma_outlined.h, compiled
 * once in the runtime.
 */
#pragma once

#include <cstdint>
#include <cstring>

#include "config.h"
#include "mma_numerics.h"
#include "profile.h"
#include "runtime_types.h"
#include "scheduler.h"
#include "shared_address.h"
#include "sqmma_descriptor.h"
#include "unavailable_builtin.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace sqmma {

using mma::Elem;
using mma::OperandTypes;

struct Shape {
  uint32_t m, n;
  bool takes_tf32;
};

/*! \brief One operand of an issued SQMMA: how to find element (r, k) in shared memory. */
struct OperandPlan {
  Descriptor desc;
  bool k_major = true;
  uint32_t rows = 0, depth = 0, elem_bytes = 0;
  Elem elem = Elem::kF16;
  bool negate = false;
  const unsigned char* arena = nullptr;  // the issuing library's dynamic shared memory (IssueCall::arena)

  uint32_t Address(uint32_t r, uint32_t k) const {
    return SwizzleAddress(static_cast<uint32_t>(OperandAddress(desc, k_major, r, k, elem_bytes)), desc.swizzle);
  }
};

inline constexpr int kNumFlags = 8;  // tnspA, tnspB, scaleA, scaleB, scaleD, sat, k, mma_type

/*! \brief What one thread passes to the issue; it lives in the thread's frame while the thread waits. */
struct IssueCall {
  const Shape* shape = nullptr;
  int32_t* d = nullptr;
  const int32_t* c = nullptr;
  uint32_t desc_a = 0, desc_b = 0;
  int flags[kNumFlags] = {};
  OperandTypes types;
  // The issuing library's dynamic shared memory (this OS thread's instance): the runtime has its own
  // buf_dyn_shmem, so the model reads the operands through this base.
  const unsigned char* arena = nullptr;
  const char* file = "";
  int line = 0;
};

// The model's body, compiled once in the runtime (sqmma_outlined.h; visibility.h, TL_SIM_OUTLINED).
/*! \brief Check the flags of one thread's call and resolve its operand formats; a bad one fails the launch. */
TL_SIM_OUTLINED void CheckFlags(BlockRunner& block, const char* name, IssueCall& call)
    TL_SIM_OUTLINED_AS("sqmma_check_flags");
/*! \brief The issue's exchange: agreement across the squad, address planning, and queueing on every thread. */
TL_SIM_OUTLINED void ExchangeIssue(BlockRunner& block, Rendezvous& rv) TL_SIM_OUTLINED_AS("sqmma_exchange_issue");
/*!
 * \brief Apply the calling thread's queued operations in issue order: all of them, or (`committed_only`) those of
 *        its committed groups except the newest `keep_groups`.
 */
TL_SIM_OUTLINED void Complete(const char* name, uint32_t keep_groups, bool committed_only)
    TL_SIM_OUTLINED_AS("sqmma_complete");
/*! \brief Close the calling thread's group of SQMMAs issued since its last commit. */
TL_SIM_OUTLINED void CommitGroup() TL_SIM_OUTLINED_AS("sqmma_commit_group");

/*! \brief Issue one SQMMA for the calling thread. */
inline void Issue(const Collective& op, IssueCall& call, const int32_t* desc_a, const int32_t* desc_b) {
  BlockRunner& block = CurrentBlock(op.name);
  const uint32_t squad = block.GroupIndex(Group::kSquad, block.current().linear);
  const uint32_t extent = block.GroupExtent(Group::kSquad, squad);
  if (extent != kSquadSize)
    block.Fail(musaErrorLaunchFailure,
               "%s (%s:%d) needs all %u threads of squad %u (4 warps), but the block's last squad has only %u", op.name,
               SourceName(call.file), call.line, kSquadSize, squad, extent);
  if (call.d == nullptr || call.c == nullptr || desc_a == nullptr || desc_b == nullptr)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): a pointer argument (d, desc_a, desc_b or c) is null",
               op.name, SourceName(call.file), call.line);  // the file's name only on a failure: a hot path
  std::memcpy(&call.desc_a, desc_a, sizeof(call.desc_a));
  std::memcpy(&call.desc_b, desc_b, sizeof(call.desc_b));
  call.arena = SharedArenaAt(0);
  CheckFlags(block, op.name, call);
  if (g_thread.profile != nullptr && block.current().linear % kSquadSize == 0) {  // one instruction per squad
    g_thread.profile->Add(profile::k_sqmma, 1);
    g_thread.profile->Add(profile::k_sqmma_flops, 2ull * call.shape->m * call.shape->n * uint64_t(call.flags[6]));
    g_thread.profile->AddMmaShape(true, call.shape->m, call.shape->n, static_cast<uint32_t>(call.flags[6]));
  }
  ThreadSet squad_threads;
  for (uint32_t w = 0; w < kSquadSize / 64; ++w) squad_threads.SetWord(w, ~uint64_t{0});
  CollectiveSlot slot;
  slot.in = reinterpret_cast<uint64_t>(&call);
  block.Arrive(op, Group::kSquad, squad_threads, slot, call.file, call.line);
}

}  // namespace sqmma
}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "sqmma_outlined.h"
#endif

#pragma GCC visibility push(hidden)
#if __MUSA_ARCH__ >= 310
#define TL_SIM_SQMMA_BUILTIN(MM, NN, TF32)                                                                             \
  namespace tl_sim {                                                                                                   \
  namespace sqmma {                                                                                                    \
  inline constexpr Shape kShape_m##MM##n##NN{MM, NN, TF32};                                                            \
  inline constexpr Collective kIssue_m##MM##n##NN{"__musa_sqmma_m" #MM "n" #NN "_mma", &ExchangeIssue};                \
  }                                                                                                                    \
  }                                                                                                                    \
  inline void __musa_sqmma_m##MM##n##NN##_mma(int32_t* d, const int32_t* desc_a, const int32_t* desc_b,                \
                                              const int32_t* c, int tnspA, int tnspB, int scaleA, int scaleB,          \
                                              int scaleD, int sat, int k, int mma_type,                                \
                                              const char* file = __builtin_FILE(), int line = __builtin_LINE()) {      \
    tl_sim::sqmma::IssueCall call;                                                                                     \
    call.shape = &tl_sim::sqmma::kShape_m##MM##n##NN;                                                                  \
    call.d = d;                                                                                                        \
    call.c = c;                                                                                                        \
    const int flags[] = {tnspA, tnspB, scaleA, scaleB, scaleD, sat, k, mma_type};                                      \
    for (int i = 0; i < tl_sim::sqmma::kNumFlags; ++i) call.flags[i] = flags[i];                                       \
    call.file = file;                                                                                                  \
    call.line = line;                                                                                                  \
    tl_sim::sqmma::Issue(tl_sim::sqmma::kIssue_m##MM##n##NN, call, desc_a, desc_b);                                    \
  }

/*! \brief Wait for every SQMMA the calling thread has issued (committed or not). */
inline void __musa_sqmma_wait() { tl_sim::sqmma::Complete("__musa_sqmma_wait", 0, false); }
/*! \brief Close the calling thread's group of SQMMAs issued since its last commit (an empty group is allowed). */
inline void __musa_tce_commit_group() { tl_sim::sqmma::CommitGroup(); }
/*! \brief Wait until at most `n` (0..2, MUSA_FACTS.md) of the calling thread's committed groups are in flight;
 *         SQMMAs issued after its last commit are not waited for. */
inline void __musa_tce_wait_group(int n, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (n < 0 || n > 2)
    tl_sim::CurrentBlock("__musa_tce_wait_group")
        .Fail(musaErrorIllegalInstruction, "__musa_tce_wait_group (%s:%d): n = %d is not 0, 1 or 2",
              tl_sim::SourceName(file), line, n);
  tl_sim::sqmma::Complete("__musa_tce_wait_group", static_cast<uint32_t>(n), true);
}
#else
#define TL_SIM_SQMMA_BUILTIN(MM, NN, TF32) \
  TL_SIM_UNAVAILABLE_BUILTIN(__musa_sqmma_m##MM##n##NN##_mma, "mp_31/mp_32 (SQMMA on a squad of 4 warps)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_sqmma_wait, "mp_31/mp_32 (SQMMA on a squad of 4 warps)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_tce_commit_group, "mp_31/mp_32 (SQMMA on a squad of 4 warps)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_tce_wait_group, "mp_31/mp_32 (SQMMA on a squad of 4 warps)")
#endif

TL_SIM_SQMMA_BUILTIN(16, 64, true)
TL_SIM_SQMMA_BUILTIN(32, 32, true)
TL_SIM_SQMMA_BUILTIN(32, 64, true)
TL_SIM_SQMMA_BUILTIN(32, 128, false)
TL_SIM_SQMMA_BUILTIN(64, 16, true)
TL_SIM_SQMMA_BUILTIN(64, 32, true)
TL_SIM_SQMMA_BUILTIN(64, 64, true)
TL_SIM_SQMMA_BUILTIN(64, 128, false)
TL_SIM_SQMMA_BUILTIN(128, 32, false)
TL_SIM_SQMMA_BUILTIN(128, 64, true)
TL_SIM_SQMMA_BUILTIN(128, 128, true)

#undef TL_SIM_SQMMA_BUILTIN
#pragma GCC visibility pop
