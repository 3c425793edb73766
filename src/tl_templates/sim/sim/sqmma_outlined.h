/*!
 * \file tl_templates/sim/sim/sqmma_outlined.h
 * \brief The body of sqmma.h's model: the squad's agreement check, operand planning and fetch, the per-thread queues
 *        and the arithmetic. Compiled once into the simulator runtime (and into a kernel library that carries its
 *        own simulator), never in a kernel library that links the runtime (visibility.h, TL_SIM_OUTLINED), so a
 *        GEMM's build does not generate it again, and it may use the CPU's AVX/F16C where present (checked at run
 *        time; the results are the same bits either way). Included by sqmma.h only.
 *
 * The operands are read from the issuing library's shared memory (IssueCall::arena), not the runtime's own
 * buf_dyn_shmem.
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "float_convert.h"
#include "sqmma.h"
#include "uninit_reads.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace sqmma {

/*! \brief One SQMMA issued by a squad, shared by its 128 threads until each has applied it. */
struct Operation {
  uint32_t m = 0, n = 0;
  bool is_float = true;
  bool overwrite = false;  // scaleD == 1
  OperandPlan a, b;
  bool read = false;
  // The operands' values once read (ReadOperands): floats for floating-point formats, else integers. A row by row
  // (element (m, k) at m * depth + k); B column by column, each k's n lanes ordered by BColumnSlot.
  std::unique_ptr<float[]> a_f, b_f;
  std::unique_ptr<int32_t[]> a_i, b_i;
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

inline constexpr const char* kFlagNames[kNumFlags] = {"tnspA", "tnspB", "scaleA", "scaleB",
                                                      "scaleD", "sat", "k", "mma_type"};

inline const IssueCall& IssueCallOf(BlockRunner& block, const Rendezvous& rv, uint32_t thread) {
  return *reinterpret_cast<const IssueCall*>(block.fiber(rv.base + thread).slot.in);
}

TL_SIM_OUTLINED_DEF void CheckFlags(BlockRunner& block, const char* name, IssueCall& call) {
  // the file's name only on a failure (strrchr): this runs at every issue
  auto where = [&call] { return SourceName(call.file); };
  const int* f = call.flags;
  for (int i = 0; i < 5; ++i)
    if (f[i] != 0 && f[i] != 1)
      block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): %s is %d; it must be 0 or 1", name, where(), call.line,
                 kFlagNames[i], f[i]);
  if (f[5] != 0)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): sat is %d; saturation is not modelled, pass 0", name, where(),
               call.line, f[5]);
  if (!mma::DecodeMmaType(f[7], &call.types))
    block.Fail(musaErrorIllegalInstruction,
               "%s (%s:%d): mma_type %d is not modelled (U8U8 0, S8S8 1, F16F16 2, BF16BF16 3, TF32TF32 4, "
               "E4M3E4M3 5, E5M2E5M2 6, E4M3E5M2 11, E5M2E4M3 12)",
               name, where(), call.line, f[7]);
  const Shape& s = *call.shape;
  const uint32_t bytes = mma::ElemBits(call.types.a) / 8;
  const int k = f[6];
  if (k != static_cast<int>(32 / bytes) && k != static_cast<int>(64 / bytes) && k != static_cast<int>(128 / bytes))
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): k = %d is not %u, %u or %u for %s operands", name, where(),
               call.line, k, 32 / bytes, 64 / bytes, 128 / bytes, mma::ElemName(call.types.a));
  const bool a_k_major = f[0] == 0, b_k_major = f[1] == 1;
  if (call.types.a == Elem::kTF32) {
    if (!s.takes_tf32)
      block.Fail(musaErrorIllegalInstruction, "%s (%s:%d) has no tf32 form (tf32 lacks m32n128, m64n128, m128n32)",
                 name, where(), call.line);
    if (s.m == 128 && !(a_k_major && b_k_major))
      block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): tf32 at M = 128 needs both operands K-major", name, where(),
                 call.line);
  }
  if (!a_k_major && s.m * bytes > kSwizzleLineBytes)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): an M-major A spans %u bytes per k, more than %u", name,
               where(), call.line, s.m * bytes, kSwizzleLineBytes);
  if (!b_k_major && s.n * bytes > kSwizzleLineBytes)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): an N-major B spans %u bytes per k, more than %u", name,
               where(), call.line, s.n * bytes, kSwizzleLineBytes);
  if ((f[2] != 0 || f[3] != 0) && !call.types.is_float())
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): scaleA/scaleB negate floating-point operands only [I]",
               name, where(), call.line);
}

/*! \brief Decode one operand's descriptor and check every element it reads against the launch's arena. */
inline OperandPlan PlanOperand(BlockRunner& block, const char* name, const IssueCall& call, char which) {
  // the file's name only on a failure (strrchr): this runs at every issue
  auto where = [&call] { return SourceName(call.file); };
  const bool is_a = which == 'A';
  const uint32_t raw = is_a ? call.desc_a : call.desc_b;
  OperandPlan plan;
  char why[160];
  if (!DecodeDescriptor(raw, &plan.desc, why, sizeof(why)))
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): descriptor %c (0x%08x): %s", name, where(), call.line, which,
               raw, why);
  plan.k_major = is_a ? call.flags[0] == 0 : call.flags[1] == 1;
  plan.rows = is_a ? call.shape->m : call.shape->n;
  plan.depth = static_cast<uint32_t>(call.flags[6]);
  plan.elem = is_a ? call.types.a : call.types.b;
  plan.elem_bytes = mma::ElemBits(plan.elem) / 8;
  plan.negate = call.flags[is_a ? 2 : 3] != 0;
  plan.arena = call.arena;
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
                   name, where(), call.line, which, raw, plan.desc.start, plan.desc.leading_stride, plan.desc.swizzle,
                   plan.k_major ? "K" : (is_a ? "M" : "N"), r, k, phys, arena);
    }
  }
  return plan;
}

TL_SIM_OUTLINED_DEF void ExchangeIssue(BlockRunner& block, Rendezvous& rv) {
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

/*! \brief The slot of B's column `col` among each k's n lanes: col % 8 first, then col / 8, so that a thread of lane
 *         l, which holds the outputs n = l % 8 + 8 s (s < N / 8) of each of its rows, finds them in N / 8 adjacent
 *         lanes. A bijection of [0, n) (n is a multiple of 8). */
inline uint32_t BColumnSlot(uint32_t n, uint32_t col) { return (col % 8) * (n / 8) + col / 8; }

/*!
 * \brief Copy an operand's elements (`Raw`: little-endian words of the element's size) from shared memory into
 *        `out` in the order ReadOperands keeps the values: element (r, k) at r * depth + k, or, `columns` (B), at
 *        k * rows + BColumnSlot(rows, r). Along the operand's contiguous dimension (k when K-major, else the rows),
 *        bytes move in runs that stay inside one swizzle granule, which the swizzle moves as a whole.
 */
template <class Raw>
void GatherOperandRuns(const OperandPlan& plan, bool columns, Raw* out) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shared memory holds little-endian elements");
  constexpr uint32_t eb = sizeof(Raw);
  const uint32_t piece = plan.desc.swizzle != 0 ? plan.desc.swizzle : kSwizzleLineBytes;
  const uint32_t rows = plan.rows, depth = plan.depth;
  const uint32_t outer = plan.k_major ? rows : depth, inner = plan.k_major ? depth : rows;
  WrittenShadow* const shadow = g_thread.uninit_shadow;  // checked mode; one TLS load, not one per element
  for (uint32_t o = 0; o < outer; ++o) {
    for (uint32_t i = 0; i < inner;) {
      const uint32_t r = plan.k_major ? o : i, k = plan.k_major ? i : o;
      const auto address = static_cast<uint32_t>(OperandAddress(plan.desc, plan.k_major, r, k, eb));
      const uint32_t run = std::min(inner - i, (piece - address % piece) / eb);
      const unsigned char* at = plan.arena + SwizzleAddress(address, plan.desc.swizzle);
      if (shadow != nullptr)
        for (uint32_t j = 0; j < run; ++j) shadow->CheckModelRead(at + j * eb, eb, "an SQMMA operand fetch");
      if (plan.k_major && !columns) {  // row r's elements k .. k + run - 1, in place
        std::memcpy(out + static_cast<size_t>(r) * depth + k, at, static_cast<size_t>(run) * eb);
      } else if (plan.k_major) {  // the same, one per k
        Raw* dst = out + static_cast<size_t>(k) * rows + BColumnSlot(rows, r);
        for (uint32_t j = 0; j < run; ++j) std::memcpy(dst + static_cast<size_t>(j) * rows, at + j * eb, eb);
      } else if (!columns) {  // rows r .. r + run - 1 of k
        Raw* dst = out + static_cast<size_t>(r) * depth + k;
        for (uint32_t j = 0; j < run; ++j) std::memcpy(dst + static_cast<size_t>(j) * depth, at + j * eb, eb);
      } else {  // columns r + j of one residue mod 8 lie in adjacent slots: one pass per residue
        Raw* dst = out + static_cast<size_t>(k) * rows;
        for (uint32_t q = 0; q < 8 && q < run; ++q) {
          Raw* slot = dst + BColumnSlot(rows, r + q);
          for (uint32_t j = q; j < run; j += 8, ++slot) std::memcpy(slot, at + j * eb, eb);
        }
      }
      i += run;
    }
  }
}

/*!
 * \brief GatherOperand where every run of the contiguous dimension is whole 16-byte chunks (its length in bytes, the
 *        descriptor's leading stride and its start multiples of 16): the swizzle moves a chunk as a whole
 *        (its granularity is 16 bytes or more), so each chunk is found once and its elements placed, instead of
 *        planning runs element by element. The same elements in the same places, checked (checked mode) in the
 *        same order. Returns false, doing nothing, where it does not apply.
 */
template <class Raw>
bool GatherOperandChunks(const OperandPlan& plan, bool columns, Raw* out) {
  constexpr uint32_t eb = sizeof(Raw), per_chunk = 16 / eb;
  const uint32_t rows = plan.rows, depth = plan.depth;
  const uint32_t outer = plan.k_major ? rows : depth, inner = plan.k_major ? depth : rows;
  const uint32_t stride = plan.desc.leading_stride;  // from one outer index to the next (OperandAddress)
  const uint32_t start = plan.desc.start, granularity = plan.desc.swizzle;
  if (inner * eb % 16 != 0 || stride % 16 != 0 || start % 16 != 0) return false;
  // SwizzleAddress(a) = a ^ (((a >> log2(line)) & (line / granularity - 1)) << log2(granularity)), its terms once
  const uint32_t line_mask = granularity == 0 ? 0 : kSwizzleLineBytes / granularity - 1;
  const uint32_t shift = granularity == 0 ? 0 : Log2(granularity);
  const unsigned char* const arena = plan.arena;
  WrittenShadow* const shadow = g_thread.uninit_shadow;
  // Calls place(o, i, chunk) for every chunk: outer index o, inner indices i .. i + per_chunk - 1.
  auto each_chunk = [=](auto place) {
    for (uint32_t o = 0; o < outer; ++o) {
      const uint32_t first = start + o * stride;
      for (uint32_t i = 0; i < inner; i += per_chunk) {
        const uint32_t a = first + i * eb;
        const unsigned char* at = arena + (a ^ (((a >> Log2(kSwizzleLineBytes)) & line_mask) << shift));
        if (shadow != nullptr)
          for (uint32_t j = 0; j < per_chunk; ++j) shadow->CheckModelRead(at + j * eb, eb, "an SQMMA operand fetch");
        place(o, i, at);
      }
    }
  };
  const uint32_t lanes = rows / 8;  // BColumnSlot(rows, c) = (c % 8) * lanes + c / 8
  if (plan.k_major && !columns) {  // row o's elements k = i .. i + per_chunk - 1, in place
    each_chunk([=](uint32_t o, uint32_t i, const unsigned char* at) {
      std::memcpy(out + static_cast<size_t>(o) * depth + i, at, 16);
    });
  } else if (plan.k_major) {  // column o of B at each k = i + j
    each_chunk([=](uint32_t o, uint32_t i, const unsigned char* at) {
      Raw* dst = out + static_cast<size_t>(i) * rows + (o % 8) * lanes + o / 8;
#pragma GCC unroll 16
      for (uint32_t j = 0; j < per_chunk; ++j) std::memcpy(dst + static_cast<size_t>(j) * rows, at + j * eb, eb);
    });
  } else if (!columns) {  // rows r = i + j of A at k = o
    each_chunk([=](uint32_t o, uint32_t i, const unsigned char* at) {
      Raw* dst = out + static_cast<size_t>(i) * depth + o;
#pragma GCC unroll 16
      for (uint32_t j = 0; j < per_chunk; ++j) std::memcpy(dst + static_cast<size_t>(j) * depth, at + j * eb, eb);
    });
  } else {  // columns c = i + j of B at k = o
    each_chunk([=](uint32_t o, uint32_t i, const unsigned char* at) {
      Raw* dst = out + static_cast<size_t>(o) * rows;
#pragma GCC unroll 16
      for (uint32_t j = 0; j < per_chunk; ++j) {
        const uint32_t c = i + j;
        std::memcpy(dst + (c % 8) * lanes + c / 8, at + j * eb, eb);
      }
    });
  }
  return true;
}

/*!
 * \brief Copy an operand's elements from shared memory into `out` in the order ReadOperands keeps the values
 *        (GatherOperandRuns): by whole chunks where they apply, else in runs.
 */
template <class Raw>
void GatherOperand(const OperandPlan& plan, bool columns, Raw* out) {
  if (!GatherOperandChunks(plan, columns, out)) GatherOperandRuns(plan, columns, out);
}

/*! \brief Read an operand's values from shared memory into `f` (floating-point formats) or `i` (integers), in
 *         GatherOperand's order; `negate` (the scale flag) applied, exactly. */
inline void ReadOperand(const OperandPlan& plan, bool columns, std::unique_ptr<float[]>* f,
                        std::unique_ptr<int32_t[]>* i) {
  const size_t count = static_cast<size_t>(plan.rows) * plan.depth;
  if (mma::ElemIsFloat(plan.elem)) {
    f->reset(new float[count]);  // every element is written below
    float* const out = f->get();
    if (plan.elem == Elem::kF16 || plan.elem == Elem::kBF16) {
      std::unique_ptr<uint16_t[]> raw(new uint16_t[count]);
      GatherOperand(plan, columns, raw.get());
      if (plan.elem == Elem::kF16) {
        WidenF16(raw.get(), out, count);
      } else {
        for (size_t at = 0; at < count; ++at) out[at] = WidenToFloat<8, 7>(raw[at]);
      }
    } else if (plan.elem == Elem::kTF32) {
      std::unique_ptr<uint32_t[]> raw(new uint32_t[count]);
      GatherOperand(plan, columns, raw.get());
      for (size_t at = 0; at < count; ++at) out[at] = mma::DecodeFloat<Elem::kTF32>(raw[at]);
    } else {
      std::unique_ptr<uint8_t[]> raw(new uint8_t[count]);
      GatherOperand(plan, columns, raw.get());
      if (plan.elem == Elem::kE4M3) {
        for (size_t at = 0; at < count; ++at) out[at] = mma::DecodeFloat<Elem::kE4M3>(raw[at]);
      } else {
        for (size_t at = 0; at < count; ++at) out[at] = mma::DecodeFloat<Elem::kE5M2>(raw[at]);
      }
    }
    if (plan.negate)
      for (size_t at = 0; at < count; ++at) out[at] = -out[at];
  } else {
    i->reset(new int32_t[count]);
    int32_t* const out = i->get();
    std::unique_ptr<uint8_t[]> raw(new uint8_t[count]);
    GatherOperand(plan, columns, raw.get());
    if (plan.elem == Elem::kS8) {
      for (size_t at = 0; at < count; ++at) out[at] = static_cast<int8_t>(raw[at]);
    } else {
      for (size_t at = 0; at < count; ++at) out[at] = raw[at];
    }
    if (plan.negate)  // never: CheckFlags refuses scale flags on integer operands; kept exact all the same
      for (size_t at = 0; at < count; ++at) out[at] = static_cast<int32_t>(0u - static_cast<uint32_t>(out[at]));
  }
}

/*! \brief Read both operands, once per operation: A row by row, B column by column (BColumnSlot). */
inline void ReadOperands(Operation& op) {
  ReadOperand(op.a, false, &op.a_f, &op.a_i);
  ReadOperand(op.b, true, &op.b_f, &op.b_i);
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
  const uint32_t depth = op.a.depth;
  // Value v of the thread is (m, n) = (l/8 + 4w + 16 g, l%8 + 8 s) with v = g * (N/8) + s (the layout in the
  // file comment): each row g is N/8 adjacent words, and lane s of B's reordered column block l % 8.
  const uint32_t words = op.m * op.n / kSquadSize;
  const uint32_t warp = lane / 32, l = lane % 32, per_row = op.n / 8;
  // D is computed in place: C is moved into D first (memmove: all of C is read before any of D is written, D may
  // alias it, in part or whole), then the products are added to D.
  if (op.overwrite) std::memset(p.d, 0, words * sizeof(uint32_t));
  else if (p.d != p.c) std::memmove(p.d, p.c, words * sizeof(uint32_t));
  const uint32_t rows = words / per_row, first_m = l / 8 + 4 * warp;  // row g is m = first_m + 16 g
  const size_t column = static_cast<size_t>(l % 8) * per_row;
  if (op.is_float) {
    mma::AccumulateRowsWide(reinterpret_cast<float*>(p.d), per_row,
                            op.a_f.get() + static_cast<size_t>(first_m) * depth, 16 * depth, rows,
                            op.b_f.get() + column, depth, op.n, per_row);
  } else {
    uint32_t* const acc = reinterpret_cast<uint32_t*>(p.d);
    for (uint32_t g = 0; g < rows; ++g)
      mma::AccumulateRow(acc + g * per_row, op.a_i.get() + static_cast<size_t>(first_m + 16 * g) * depth,
                         op.b_i.get() + column, depth, op.n, per_row);
  }
  --op.unapplied;
  auto& squad = state.squads[linear / kSquadSize];
  while (!squad.empty() && squad.front()->unapplied == 0) squad.pop_front();
}

TL_SIM_OUTLINED_DEF void Complete(const char* name, uint32_t keep_groups, bool committed_only) {
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

TL_SIM_OUTLINED_DEF void CommitGroup() {
  BlockRunner& block = CurrentBlock("__musa_tce_commit_group");
  GetInFlight(block).threads[block.current().linear].commits += 1;
}

}  // namespace sqmma
}  // namespace tl_sim
#pragma GCC visibility pop
