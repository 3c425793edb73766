/*!
 * \file tl_templates/sim/sim/warp_mma.h
 * \brief The engine of the warp-synchronous matrix built-ins (mp_31 WMMA on 32-lane warps, mp_22 MMA on 128-lane
 *        warps): one rendezvous of the whole warp, where the last lane to arrive gathers A, B and C from every
 *        lane's registers through the instruction's lane/value maps, computes D (mma_numerics.h) and writes every
 *        lane's D registers.
 *
 * Everything is read before anything is written, so `d` may alias `c` (or any other operand). A lane missing from
 * the warp (exited, waiting at another collective, or absent from a partial last warp) fails the launch through the
 * scheduler's divergence and deadlock reports; lanes that disagree on a scalar argument fail it here.
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "config.h"
#include "mma_numerics.h"
#include "profile.h"
#include "runtime_types.h"
#include "scheduler.h"
#include "warp.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace mma {

/*!
 * \brief (lane t, value v) -> (row, column) in the instruction's matrix: (r, k) for an R x K operand (A with R = M,
 *        B with R = N), (m, n) for the accumulator. `bits` is the element width.
 */
using FragmentMap = void (*)(uint32_t t, uint32_t v, uint32_t rows, uint32_t cols, uint32_t bits, uint32_t* row,
                             uint32_t* col);

/*! \brief One warp MMA instruction, resolved from a lane's arguments. */
struct WarpMmaForm {
  uint32_t m = 0, n = 0, k = 0;
  OperandTypes types;
  FragmentMap a_map = nullptr, b_map = nullptr, c_map = nullptr;
};

inline constexpr int kMaxScalarArgs = 7;

/*! \brief What one lane passes to the built-in; it lives in the lane's frame while the lane waits. */
struct WarpMmaCall {
  int32_t* d = nullptr;
  const int32_t* a = nullptr;
  const int32_t* b = nullptr;
  const int32_t* c = nullptr;
  int args[kMaxScalarArgs] = {};  // the scalar arguments as passed (5th onwards), compared across lanes
  int num_args = 0;
  WarpMmaForm form;
  const char* file = "";
  int line = 0;
};

inline const WarpMmaCall& CallOf(BlockRunner& block, const Rendezvous& rv, uint32_t lane) {
  return *reinterpret_cast<const WarpMmaCall*>(block.fiber(rv.base + lane).slot.in);
}

/*!
 * \brief Where each (lane, value) of an instruction form lands, the maps evaluated once: entry lane * values + v
 *        is the slot of A (m * K + k), of B transposed (k * N + n) and of C (m * N + n).
 */
struct WarpMmaTables {
  std::vector<uint32_t> a, b, c;
};

inline WarpMmaTables BuildTables(const WarpMmaForm& f, uint32_t lanes) {
  const uint32_t a_bits = ElemBits(f.types.a), b_bits = ElemBits(f.types.b);
  const uint32_t a_values = f.m * f.k / lanes, b_values = f.n * f.k / lanes, c_values = f.m * f.n / lanes;
  WarpMmaTables t;
  t.a.resize(static_cast<size_t>(lanes) * a_values);
  t.b.resize(static_cast<size_t>(lanes) * b_values);
  t.c.resize(static_cast<size_t>(lanes) * c_values);
  uint32_t row, col;
  for (uint32_t lane = 0; lane < lanes; ++lane) {
    for (uint32_t v = 0; v < a_values; ++v) {
      f.a_map(lane, v, f.m, f.k, a_bits, &row, &col);
      t.a[lane * a_values + v] = row * f.k + col;
    }
    for (uint32_t v = 0; v < b_values; ++v) {
      f.b_map(lane, v, f.n, f.k, b_bits, &row, &col);
      t.b[lane * b_values + v] = col * f.n + row;
    }
    for (uint32_t v = 0; v < c_values; ++v) {
      f.c_map(lane, v, f.m, f.n, 32, &row, &col);
      t.c[lane * c_values + v] = row * f.n + col;
    }
  }
  return t;
}

/*! \brief A form's tables with the fields that identify the form. Immutable once published. */
struct WarpMmaTablesEntry {
  FragmentMap a_map, b_map, c_map;
  uint32_t m, n, k, lanes;
  Elem a, b;
  WarpMmaTables tables;

  bool Describes(const WarpMmaForm& f, uint32_t lanes_) const {
    return a_map == f.a_map && b_map == f.b_map && c_map == f.c_map && m == f.m && n == f.n && k == f.k &&
           lanes == lanes_ && a == f.types.a && b == f.types.b;
  }
};

/*!
 * \brief The tables of form `f`, built on first use and kept for the process (shared by the workers: the library's
 *        thread_local storage is shared memory, poisoned per block, shared_memory.h).
 *
 * Every warp MMA looks its form up (65,536 times a call of mp_22's README GEMM), so the lookup takes no lock: an
 * entry is built under the mutex, then published by a release store of its pointer into the next free slot, and
 * readers scan the published slots with acquire loads. Entries are never changed or freed. A kernel uses a handful
 * of forms; past kSlots of them, the rest are found under the mutex.
 */
inline const WarpMmaTables& TablesFor(const WarpMmaForm& f, uint32_t lanes) {
  static constexpr int kSlots = 32;
  static std::atomic<const WarpMmaTablesEntry*> published[kSlots];  // zero-initialized: static storage
  static std::atomic<int> count{0};
  static std::mutex mutex;
  static std::deque<WarpMmaTablesEntry> known;  // owns every entry; a deque keeps references valid
  const int seen = count.load(std::memory_order_acquire);
  for (int i = 0; i < seen; ++i) {
    const WarpMmaTablesEntry* e = published[i].load(std::memory_order_acquire);
    if (e->Describes(f, lanes)) return e->tables;
  }
  std::lock_guard<std::mutex> lock(mutex);
  for (const WarpMmaTablesEntry& e : known)  // built by another worker since, or beyond the published slots
    if (e.Describes(f, lanes)) return e.tables;
  known.push_back(WarpMmaTablesEntry{f.a_map, f.b_map, f.c_map, f.m, f.n, f.k, lanes, f.types.a, f.types.b,
                                     BuildTables(f, lanes)});
  const int slot = count.load(std::memory_order_relaxed);  // only the mutex holder publishes
  if (slot < kSlots) {
    published[slot].store(&known.back(), std::memory_order_release);
    count.store(slot + 1, std::memory_order_release);
  }
  return known.back().tables;
}

/*! \brief The rendezvous exchange: check agreement, gather, compute, scatter. */
inline void ExchangeWarpMma(BlockRunner& block, Rendezvous& rv) {
  const uint32_t lanes = rv.expected;
  const WarpMmaCall& first = CallOf(block, rv, 0);
  for (uint32_t lane = 1; lane < lanes; ++lane) {
    const WarpMmaCall& other = CallOf(block, rv, lane);
    for (int i = 0; i < first.num_args; ++i) {
      if (other.args[i] != first.args[i])
        block.Fail(musaErrorLaunchFailure,
                   "%s (%s:%d): the lanes of warp %u disagree on argument %d: lane 0 passes %d, lane %u passes %d",
                   rv.op->name, SourceName(first.file), first.line, rv.group_index, i + 5, first.args[i], lane,
                   other.args[i]);
    }
  }
  const WarpMmaForm& f = first.form;
  const WarpMmaTables& tables = TablesFor(f, lanes);
  const uint32_t a_bits = ElemBits(f.types.a), b_bits = ElemBits(f.types.b);
  const uint32_t a_values = f.m * f.k / lanes, b_values = f.n * f.k / lanes, c_values = f.m * f.n / lanes;
  std::vector<uint32_t> a_raw(static_cast<size_t>(f.m) * f.k), b_raw(static_cast<size_t>(f.k) * f.n);
  std::vector<uint32_t> acc(static_cast<size_t>(f.m) * f.n);
  for (uint32_t lane = 0; lane < lanes; ++lane) {
    const WarpMmaCall& call = CallOf(block, rv, lane);
    const uint32_t* a_slot = tables.a.data() + lane * a_values;
    const uint32_t* b_slot = tables.b.data() + lane * b_values;
    const uint32_t* c_slot = tables.c.data() + lane * c_values;
    for (uint32_t v = 0; v < a_values; ++v) a_raw[a_slot[v]] = PackedElement(call.a, v, a_bits);
    for (uint32_t v = 0; v < b_values; ++v) b_raw[b_slot[v]] = PackedElement(call.b, v, b_bits);
    for (uint32_t v = 0; v < c_values; ++v) acc[c_slot[v]] = PackedElement(call.c, v, 32);
  }
  DecodedOperand a, b_columns;  // A as M x K; B transposed, K x N: row k holds B[n][k] for every n
  a.Decode(f.m, f.k, f.types.a, false, a_raw.data());
  b_columns.Decode(f.k, f.n, f.types.b, false, b_raw.data());
  if (f.types.is_float()) {
    std::vector<float> values(acc.size());
    std::memcpy(values.data(), acc.data(), acc.size() * sizeof(float));
    AccumulateRows(values.data(), f.n, a.FloatRow(0), f.k, f.m, b_columns.FloatRow(0), f.k, f.n, f.n);
    std::memcpy(acc.data(), values.data(), acc.size() * sizeof(float));
  } else {
    for (uint32_t m = 0; m < f.m; ++m)
      AccumulateRow(acc.data() + static_cast<size_t>(m) * f.n, a.IntRow(m), b_columns.IntRow(0), f.k, f.n, f.n);
  }
  for (uint32_t lane = 0; lane < lanes; ++lane) {
    const WarpMmaCall& call = CallOf(block, rv, lane);
    const uint32_t* c_slot = tables.c.data() + lane * c_values;
    for (uint32_t v = 0; v < c_values; ++v) std::memcpy(call.d + v, &acc[c_slot[v]], sizeof(uint32_t));
  }
  if (profile::Recorder* clocks = g_thread.profile) {  // the lanes met at the rendezvous (scheduler.h)
    const double done = clocks->Tensor(clocks->Settle(rv.base), 2ull * f.m * f.n * f.k, 0);
    clocks->MarkIssue(rv.base, profile::SliceKind::kMmaIssue, done);
    for (uint32_t lane = 0; lane < lanes; ++lane)
      clocks->WaitUntil(rv.base + lane, done, profile::kNumCounters, profile::SliceKind::kMmaWait);
  }
}

/*!
 * \brief Run a warp MMA for the calling lane: check that its warp is whole and the register pointers are set,
 *        arrive, and return once every lane's D is written. `op` names the built-in and must use ExchangeWarpMma.
 */
inline void RunWarpMma(const Collective& op, WarpMmaCall& call) {
  BlockRunner& block = CurrentBlock(op.name);
  const uint32_t warp = block.GroupIndex(Group::kWarp, block.current().linear);
  const uint32_t extent = block.GroupExtent(Group::kWarp, warp);
  if (extent != kWarpSize)
    block.Fail(musaErrorLaunchFailure,
               "%s (%s:%d) needs all %u lanes of warp %u, but the block's last warp has only %u threads", op.name,
               SourceName(call.file), call.line, kWarpSize, warp, extent);
  if (call.d == nullptr || call.a == nullptr || call.b == nullptr || call.c == nullptr)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): a register pointer (d, a, b or c) is null", op.name,
               SourceName(call.file), call.line);
  if (g_thread.profile != nullptr && block.current().linear % kWarpSize == 0) {  // one instruction per warp
    g_thread.profile->Add(profile::k_warp_mma, 1);
    g_thread.profile->Add(profile::k_warp_mma_flops, 2ull * call.form.m * call.form.n * call.form.k);
    g_thread.profile->AddMmaShape(false, call.form.m, call.form.n, call.form.k);
  }
  CollectiveSlot slot;
  slot.in = reinterpret_cast<uint64_t>(&call);
  block.Arrive(op, Group::kWarp, WarpLanes(block, warp, 0xffffffffu), slot, call.file, call.line);
}

}  // namespace mma
}  // namespace tl_sim
#pragma GCC visibility pop
