/*!
 * \file tl_templates/sim/sim/warp_mma_outlined.h
 * \brief The body of warp_mma.h's exchange: the lane/value tables of each instruction form and the gather, compute
 *        and scatter. Compiled once into the simulator runtime (and into a kernel library that carries its own
 *        simulator), never in a kernel library that links the runtime, whose build would otherwise instantiate the
 *        tables' containers again (visibility.h, TL_SIM_OUTLINED). Included by warp_mma.h only.
 */
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "mma_decoded_operand.h"
#include "warp_mma.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace mma {

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
TL_SIM_OUTLINED_DEF void ExchangeWarpMma(BlockRunner& block, Rendezvous& rv) {
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

}  // namespace mma
}  // namespace tl_sim
#pragma GCC visibility pop
