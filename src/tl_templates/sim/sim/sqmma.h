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
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

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

using mma::DecodedOperand;
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

  uint32_t Address(uint32_t r, uint32_t k) const {
    return SwizzleAddress(static_cast<uint32_t>(OperandAddress(desc, k_major, r, k, elem_bytes)), desc.swizzle);
  }
};

/*! \brief One SQMMA issued by a squad, shared by its 128 threads until each has applied it. */
struct Operation {
  uint32_t m = 0, n = 0;
  bool is_float = true;
  bool overwrite = false;  // scaleD == 1
  OperandPlan a, b;
  bool read = false;
  DecodedOperand a_values, b_values;
  // B column by column, lanes ordered so that each thread's outputs of one row are contiguous (ApplyOldest)
  std::vector<float> b_columns_f;
  std::vector<int32_t> b_columns_i;
  uint32_t unapplied = 0;  // threads that have not applied it yet
  double done_cycle = 0;   // when the tensor pipe finishes it (the cycle model, profile.h)
};

/*! \brief An operation queued on one thread, with that thread's registers. */
struct Pending {
  Operation* op;
  int32_t* d;
  const int32_t* c;
  uint32_t group;  // the thread's commit count at issue: the operation belongs to commit group `group`
};

struct ThreadQueue {
  std::deque<Pending> pending;  // in issue order
  uint32_t commits = 0;
};

/*! \brief The SQMMAs in flight in the running block (a BlockExtension, so every block starts without any). */
struct InFlight final : BlockExtension {
  InFlight(uint32_t thread_count, uint32_t squad_count) : threads(thread_count), squads(squad_count) {}
  std::vector<ThreadQueue> threads;                            // by linear thread id
  std::vector<std::deque<std::unique_ptr<Operation>>> squads;  // in issue order, freed once applied by all
};

inline InFlight* FindInFlight(BlockRunner& block) {
  return static_cast<InFlight*>(block.extension(ExtensionKind::kSqmma).get());
}

inline InFlight& GetInFlight(BlockRunner& block) {
  std::unique_ptr<BlockExtension>& slot = block.extension(ExtensionKind::kSqmma);
  if (slot == nullptr) {
    const uint32_t threads = block.thread_count();
    slot.reset(new InFlight(threads, (threads + kSquadSize - 1) / kSquadSize));
  }
  return *static_cast<InFlight*>(slot.get());
}

inline constexpr int kNumFlags = 8;  // tnspA, tnspB, scaleA, scaleB, scaleD, sat, k, mma_type
inline constexpr const char* kFlagNames[kNumFlags] = {"tnspA", "tnspB", "scaleA", "scaleB",
                                                      "scaleD", "sat", "k", "mma_type"};

/*! \brief What one thread passes to the issue; it lives in the thread's frame while the thread waits. */
struct IssueCall {
  const Shape* shape = nullptr;
  int32_t* d = nullptr;
  const int32_t* c = nullptr;
  uint32_t desc_a = 0, desc_b = 0;
  int flags[kNumFlags] = {};
  OperandTypes types;
  const char* file = "";
  int line = 0;
};

inline const IssueCall& IssueCallOf(BlockRunner& block, const Rendezvous& rv, uint32_t thread) {
  return *reinterpret_cast<const IssueCall*>(block.fiber(rv.base + thread).slot.in);
}

/*! \brief Check the flags of one thread's call and resolve its operand formats; a bad one fails the launch. */
inline void CheckFlags(BlockRunner& block, const char* name, IssueCall& call) {
  const char* where = SourceName(call.file);
  const int* f = call.flags;
  for (int i = 0; i < 5; ++i)
    if (f[i] != 0 && f[i] != 1)
      block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): %s is %d; it must be 0 or 1", name, where, call.line,
                 kFlagNames[i], f[i]);
  if (f[5] != 0)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): sat is %d; saturation is not modelled, pass 0", name, where,
               call.line, f[5]);
  if (!mma::DecodeMmaType(f[7], &call.types))
    block.Fail(musaErrorIllegalInstruction,
               "%s (%s:%d): mma_type %d is not modelled (U8U8 0, S8S8 1, F16F16 2, BF16BF16 3, TF32TF32 4, "
               "E4M3E4M3 5, E5M2E5M2 6, E4M3E5M2 11, E5M2E4M3 12)",
               name, where, call.line, f[7]);
  const Shape& s = *call.shape;
  const uint32_t bytes = mma::ElemBits(call.types.a) / 8;
  const int k = f[6];
  if (k != static_cast<int>(32 / bytes) && k != static_cast<int>(64 / bytes) && k != static_cast<int>(128 / bytes))
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): k = %d is not %u, %u or %u for %s operands", name, where,
               call.line, k, 32 / bytes, 64 / bytes, 128 / bytes, mma::ElemName(call.types.a));
  const bool a_k_major = f[0] == 0, b_k_major = f[1] == 1;
  if (call.types.a == Elem::kTF32) {
    if (!s.takes_tf32)
      block.Fail(musaErrorIllegalInstruction, "%s (%s:%d) has no tf32 form (tf32 lacks m32n128, m64n128, m128n32)",
                 name, where, call.line);
    if (s.m == 128 && !(a_k_major && b_k_major))
      block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): tf32 at M = 128 needs both operands K-major", name, where,
                 call.line);
  }
  if (!a_k_major && s.m * bytes > kSwizzleLineBytes)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): an M-major A spans %u bytes per k, more than %u", name,
               where, call.line, s.m * bytes, kSwizzleLineBytes);
  if (!b_k_major && s.n * bytes > kSwizzleLineBytes)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): an N-major B spans %u bytes per k, more than %u", name,
               where, call.line, s.n * bytes, kSwizzleLineBytes);
  if ((f[2] != 0 || f[3] != 0) && !call.types.is_float())
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): scaleA/scaleB negate floating-point operands only [I]",
               name, where, call.line);
}

/*! \brief Decode one operand's descriptor and check every element it reads against the launch's arena. */
inline OperandPlan PlanOperand(BlockRunner& block, const char* name, const IssueCall& call, char which) {
  const char* where = SourceName(call.file);
  const bool is_a = which == 'A';
  const uint32_t raw = is_a ? call.desc_a : call.desc_b;
  OperandPlan plan;
  char why[160];
  if (!DecodeDescriptor(raw, &plan.desc, why, sizeof(why)))
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): descriptor %c (0x%08x): %s", name, where, call.line, which,
               raw, why);
  plan.k_major = is_a ? call.flags[0] == 0 : call.flags[1] == 1;
  plan.rows = is_a ? call.shape->m : call.shape->n;
  plan.depth = static_cast<uint32_t>(call.flags[6]);
  plan.elem = is_a ? call.types.a : call.types.b;
  plan.elem_bytes = mma::ElemBits(plan.elem) / 8;
  plan.negate = call.flags[is_a ? 2 : 3] != 0;
  const size_t arena = SharedArenaBytes();
  for (uint32_t r = 0; r < plan.rows; ++r) {
    // The swizzle moves bytes only within their 256-byte line: a row whose lines all lie inside needs no more.
    const uint64_t last = std::max(OperandAddress(plan.desc, plan.k_major, r, 0, plan.elem_bytes),
                                   OperandAddress(plan.desc, plan.k_major, r, plan.depth - 1, plan.elem_bytes));
    if ((last | (kSwizzleLineBytes - 1)) < arena) continue;
    for (uint32_t k = 0; k < plan.depth; ++k) {
      const uint32_t phys = plan.Address(r, k);
      if (phys + plan.elem_bytes > arena)
        block.Fail(musaErrorLaunchFailure,
                   "%s (%s:%d): descriptor %c (0x%08x: start %u, leading stride %u B, swizzle %u B, %s-major) reads "
                   "element (%u, k %u) at shared address %u, outside the launch's %zu bytes of dynamic shared memory",
                   name, where, call.line, which, raw, plan.desc.start, plan.desc.leading_stride, plan.desc.swizzle,
                   plan.k_major ? "K" : (is_a ? "M" : "N"), r, k, phys, arena);
    }
  }
  return plan;
}

/*! \brief The issue's exchange: agreement across the squad, address planning, and queueing on every thread. */
inline void ExchangeIssue(BlockRunner& block, Rendezvous& rv) {
  const char* name = rv.op->name;
  const IssueCall& first = IssueCallOf(block, rv, 0);
  for (uint32_t t = 1; t < rv.expected; ++t) {
    const IssueCall& other = IssueCallOf(block, rv, t);
    if (other.desc_a != first.desc_a || other.desc_b != first.desc_b)
      block.Fail(musaErrorLaunchFailure,
                 "%s (%s:%d): the threads of squad %u disagree on the descriptors: thread 0 passes A 0x%08x B 0x%08x, "
                 "thread %u passes A 0x%08x B 0x%08x",
                 name, SourceName(first.file), first.line, rv.group_index, first.desc_a, first.desc_b, t,
                 other.desc_a, other.desc_b);
    for (int i = 0; i < kNumFlags; ++i)
      if (other.flags[i] != first.flags[i])
        block.Fail(musaErrorLaunchFailure,
                   "%s (%s:%d): the threads of squad %u disagree on %s: thread 0 passes %d, thread %u passes %d", name,
                   SourceName(first.file), first.line, rv.group_index, kFlagNames[i], first.flags[i], t,
                   other.flags[i]);
  }
  const OperandPlan a = PlanOperand(block, name, first, 'A');
  const OperandPlan b = PlanOperand(block, name, first, 'B');
  auto op = std::make_unique<Operation>();  // allocated only once nothing can fail
  op->a = a;
  op->b = b;
  op->m = first.shape->m;
  op->n = first.shape->n;
  op->is_float = first.types.is_float();
  op->overwrite = first.flags[4] == 1;
  op->unapplied = rv.expected;
  if (g_thread.profile != nullptr)  // the squad's clocks met at the issue (scheduler.h)
    op->done_cycle = g_thread.profile->Tensor(g_thread.profile->Settle(rv.base),
                                              2ull * op->m * op->n * uint64_t(first.flags[6]),
                                              mma::ElemBits(first.types.a));
  if (g_thread.profile != nullptr)
    for (uint32_t t = 0; t < rv.expected; t += kWarpSize)
      g_thread.profile->MarkIssue(rv.base + t, profile::SliceKind::kSqmmaIssue, op->done_cycle);
  InFlight& state = GetInFlight(block);
  for (uint32_t t = 0; t < rv.expected; ++t) {
    const IssueCall& call = IssueCallOf(block, rv, t);
    ThreadQueue& queue = state.threads[rv.base + t];
    queue.pending.push_back(Pending{op.get(), call.d, call.c, queue.commits});
  }
  state.squads[rv.group_index].push_back(std::move(op));
}

/*!
 * \brief Read an operand's values from shared memory (little-endian elements at the planned addresses). Along the
 *        operand's contiguous dimension (k when K-major, else the rows), bytes move in runs that stay inside one
 *        swizzle granule, which the swizzle moves as a whole.
 */
inline void ReadOperand(const OperandPlan& plan, DecodedOperand* values) {
  const uint32_t eb = plan.elem_bytes;
  const uint32_t piece = plan.desc.swizzle != 0 ? plan.desc.swizzle : kSwizzleLineBytes;
  const uint32_t outer = plan.k_major ? plan.rows : plan.depth, inner = plan.k_major ? plan.depth : plan.rows;
  std::vector<uint32_t> raw(static_cast<size_t>(plan.rows) * plan.depth);
  WrittenShadow* const shadow = g_thread.uninit_shadow;  // checked mode; one TLS load, not one per element
  for (uint32_t o = 0; o < outer; ++o) {
    for (uint32_t i = 0; i < inner;) {
      const uint32_t r = plan.k_major ? o : i, k = plan.k_major ? i : o;
      const auto address = static_cast<uint32_t>(OperandAddress(plan.desc, plan.k_major, r, k, eb));
      const uint32_t run = std::min(inner - i, (piece - address % piece) / eb);
      const unsigned char* at = SharedArenaAt(SwizzleAddress(address, plan.desc.swizzle));
      if (shadow != nullptr)
        for (uint32_t j = 0; j < run; ++j) shadow->CheckModelRead(at + j * eb, eb, "an SQMMA operand fetch");
      // the run's slots: consecutive when K-major, a row (depth slots) apart otherwise; the tests on the
      // element size stay outside the loops (-O1 does not unswitch them)
      uint32_t* const out = raw.data() + (plan.k_major ? static_cast<size_t>(o) * plan.depth + i
                                                       : static_cast<size_t>(i) * plan.depth + o);
      const size_t step = plan.k_major ? 1 : plan.depth;
      switch (eb) {  // little-endian
        case 1:
          for (uint32_t j = 0; j < run; ++j) out[j * step] = at[j];
          break;
        case 2:
          for (uint32_t j = 0; j < run; ++j) out[j * step] = at[2 * j] | (uint32_t{at[2 * j + 1]} << 8);
          break;
        default:
          for (uint32_t j = 0; j < run; ++j) std::memcpy(&out[j * step], at + 4 * j, sizeof(uint32_t));
          break;
      }
      i += run;
    }
  }
  values->Decode(plan.rows, plan.depth, plan.elem, plan.negate, raw.data());
}

/*!
 * \brief Read both operands, once per operation. B's columns are ordered n % 8 first, then n / 8: a thread of lane
 *        l holds the outputs n = l % 8 + 8 s (s < N / 8) of each of its rows, which become N / 8 adjacent lanes.
 */
inline void ReadOperands(Operation& op) {
  ReadOperand(op.a, &op.a_values);
  ReadOperand(op.b, &op.b_values);
  std::vector<uint32_t> order(op.n);
  const uint32_t per_lane = op.n / 8;
  for (uint32_t c = 0; c < 8; ++c)
    for (uint32_t s = 0; s < per_lane; ++s) order[c * per_lane + s] = c + 8 * s;
  op.b_values.Columns(order.data(), op.n, &op.b_columns_f, &op.b_columns_i);
  op.read = true;
}

/*! \brief Apply the oldest operation queued on the calling thread (`lane` = its index in the squad). */
inline void ApplyOldest(InFlight& state, uint32_t linear, uint32_t lane) {
  ThreadQueue& queue = state.threads[linear];
  const Pending p = queue.pending.front();
  queue.pending.pop_front();
  Operation& op = *p.op;
  if (g_thread.profile != nullptr) g_thread.profile->WaitUntil(linear, op.done_cycle, profile::k_mma_wait_stall_cycles);
  if (!op.read) ReadOperands(op);
  // Value v of the thread is (m, n) = (l/8 + 4w + 16 g, l%8 + 8 s) with v = g * (N/8) + s (the layout in the
  // file comment): each row g is N/8 adjacent words, and lane s of B's reordered column block l % 8.
  const uint32_t words = op.m * op.n / kSquadSize;
  const uint32_t warp = lane / 32, l = lane % 32, per_row = op.n / 8, depth = op.a_values.cols();
  uint32_t acc[128];  // all of C is read before D, which may alias it, is written
  for (uint32_t v = 0; v < words; ++v) acc[v] = op.overwrite ? 0u : mma::PackedElement(p.c, v, 32);
  const uint32_t rows = words / per_row, first_m = l / 8 + 4 * warp;  // row g is m = first_m + 16 g
  const size_t column = static_cast<size_t>(l % 8) * per_row;
  if (op.is_float) {
    float values[128];
    std::memcpy(values, acc, words * sizeof(float));
    mma::AccumulateRows(values, per_row, op.a_values.FloatRow(first_m), 16 * depth, rows,
                        op.b_columns_f.data() + column, depth, op.n, per_row);
    std::memcpy(acc, values, words * sizeof(float));
  } else {
    for (uint32_t g = 0; g < rows; ++g)
      mma::AccumulateRow(acc + g * per_row, op.a_values.IntRow(first_m + 16 * g), op.b_columns_i.data() + column,
                         depth, op.n, per_row);
  }
  std::memcpy(p.d, acc, words * sizeof(uint32_t));
  --op.unapplied;
  auto& squad = state.squads[linear / kSquadSize];
  while (!squad.empty() && squad.front()->unapplied == 0) squad.pop_front();
}

/*! \brief Issue one SQMMA for the calling thread. */
inline void Issue(const Collective& op, IssueCall& call, const int32_t* desc_a, const int32_t* desc_b) {
  BlockRunner& block = CurrentBlock(op.name);
  const char* where = SourceName(call.file);
  const uint32_t squad = block.GroupIndex(Group::kSquad, block.current().linear);
  const uint32_t extent = block.GroupExtent(Group::kSquad, squad);
  if (extent != kSquadSize)
    block.Fail(musaErrorLaunchFailure,
               "%s (%s:%d) needs all %u threads of squad %u (4 warps), but the block's last squad has only %u", op.name,
               where, call.line, kSquadSize, squad, extent);
  if (call.d == nullptr || call.c == nullptr || desc_a == nullptr || desc_b == nullptr)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): a pointer argument (d, desc_a, desc_b or c) is null",
               op.name, where, call.line);
  std::memcpy(&call.desc_a, desc_a, sizeof(call.desc_a));
  std::memcpy(&call.desc_b, desc_b, sizeof(call.desc_b));
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

/*!
 * \brief Apply the calling thread's queued operations in issue order: all of them, or (`committed_only`) those of
 *        its committed groups except the newest `keep_groups`.
 */
inline void Complete(const char* name, uint32_t keep_groups, bool committed_only) {
  BlockRunner& block = CurrentBlock(name);
  InFlight* state = FindInFlight(block);
  if (state == nullptr) return;
  const uint32_t linear = block.current().linear;
  ThreadQueue& queue = state->threads[linear];
  while (!queue.pending.empty()) {
    if (committed_only && queue.pending.front().group + keep_groups >= queue.commits) break;
    ApplyOldest(*state, linear, linear % kSquadSize);
  }
}

}  // namespace sqmma
}  // namespace tl_sim

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
inline void __musa_tce_commit_group() {
  tl_sim::BlockRunner& block = tl_sim::CurrentBlock("__musa_tce_commit_group");
  tl_sim::sqmma::GetInFlight(block).threads[block.current().linear].commits += 1;
}
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
