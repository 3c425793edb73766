/*!
 * \file tl_templates/sim/sim/race_detector_outlined.h
 * \brief The body of race_detector.h's RaceDetector: the shadow of shared memory, the global table, the
 *        in-flight transfers and the race reports. Compiled once into the simulator runtime (and into a kernel
 *        library that carries its own simulator), never in a kernel library that links the runtime (visibility.h,
 *        TL_SIM_OUTLINED): such a library's checked accesses call the runtime's. Included by race_detector.h only.
 */
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "race_detector.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief Checked mode's happens-before edges of async barriers: vector clocks over warps (see the file comment). */
struct AsyncOrder final : BlockExtension {
  explicit AsyncOrder(uint32_t thread_count)
      : threads(thread_count),
        warps((thread_count + kWarpSize - 1) / kWarpSize),
        released(warps, 0),
        acquired(size_t{thread_count} * warps, 0) {}

  uint32_t threads, warps;
  std::vector<uint32_t> released;  // per warp: how often it released; its accesses are stamped with this count
  std::vector<uint32_t> acquired;  // per thread, per warp: the releases of that warp ordered before the thread

  uint32_t* Clock(uint32_t thread) { return acquired.data() + size_t{thread} * warps; }
  const uint32_t* Clock(uint32_t thread) const { return acquired.data() + size_t{thread} * warps; }
  /*! \brief A new clock for an async barrier (or anything that carries releases from warps to waiters). */
  std::vector<uint32_t> NewClock() const { return std::vector<uint32_t>(warps, 0); }
  /*! \brief Warp `warp` releases into `into`: its accesses so far, and what its lanes acquired, are ordered before
   *         whoever later acquires `into`. */
  void Release(uint32_t warp, std::vector<uint32_t>& into) {
    released[warp] += 1;
    into[warp] = std::max(into[warp], released[warp]);
    const uint32_t end = std::min(threads, (warp + 1) * kWarpSize);
    for (uint32_t t = warp * kWarpSize; t < end; ++t) Join(into.data(), Clock(t));
  }
  /*! \brief Thread `thread` acquires `from`. */
  void Acquire(uint32_t thread, const std::vector<uint32_t>& from) { Join(Clock(thread), from.data()); }
  /*! \brief A warp or squad rendezvous orders every participant after what every other one did and acquired. */
  void OnRendezvous(BlockRunner& block, const Rendezvous& rv) override {
    (void)block;
    std::vector<uint32_t>& joined = scratch_;
    joined.assign(warps, 0);
    rv.members.ForEach([&](uint32_t i) {
      const uint32_t t = rv.base + i;
      joined[t / kWarpSize] = std::max(joined[t / kWarpSize], released[t / kWarpSize] + 1);
      Join(joined.data(), Clock(t));
    });
    for (uint32_t w = 0; w < warps; ++w)
      if (joined[w] > released[w]) released[w] = joined[w];
    rv.members.ForEach([&](uint32_t i) { Join(Clock(rv.base + i), joined.data()); });
  }

 private:
  std::vector<uint32_t> scratch_;  // OnRendezvous's join, kept to spare an allocation per shuffle

  void Join(uint32_t* into, const uint32_t* from) const {
    for (uint32_t w = 0; w < warps; ++w) into[w] = std::max(into[w], from[w]);
  }
};

/*! \brief The running block's AsyncOrder, created at the first use of an async barrier in checked mode. */
inline AsyncOrder& GetAsyncOrder(BlockRunner& block) {
  std::unique_ptr<BlockExtension>& slot = block.extension(ExtensionKind::kAsyncOrder);
  if (slot == nullptr) slot.reset(new AsyncOrder(block.thread_count()));
  return *static_cast<AsyncOrder*>(slot.get());
}

/*! \brief The running block's transfers in flight; ids below `base` belong to earlier blocks. */
struct AsyncWrites final : BlockExtension {
  explicit AsyncWrites(uint32_t first) : base(first) {}
  uint32_t base;
  std::vector<AsyncTransfer> transfers;  // id = base + index
  AsyncTransfer* Find(uint32_t id) {
    if (id < base || id - base >= transfers.size()) return nullptr;
    AsyncTransfer& t = transfers[id - base];
    return t.active ? &t : nullptr;
  }
};

inline RaceDetector::Stamp RaceDetector::StampOf(BlockRunner& block, uint32_t me, int line) {
  Stamp s;
  const auto* order = static_cast<const AsyncOrder*>(block.extension(ExtensionKind::kAsyncOrder).get());
  if (order != nullptr) s.release = order->released[me / kWarpSize];
  s.block_epoch = static_cast<uint32_t>(block.epoch(Group::kBlock, 0));
  s.squad_epoch = static_cast<uint32_t>(block.epoch(Group::kSquad, me / kSquadSize));
  s.warp_epoch = static_cast<uint32_t>(block.epoch(Group::kWarp, me / kWarpSize));
  s.thread = static_cast<uint16_t>(me + 1);
  s.line = line;
  return s;
}

inline bool RaceDetector::Unordered(const AsyncOrder* order, const Stamp& earlier, const Stamp& now) {
  if (earlier.thread == 0 || earlier.thread == now.thread) return false;
  if (earlier.block_epoch != now.block_epoch) return false;
  const uint32_t a = earlier.thread - 1u, b = now.thread - 1u;
  if (a / kSquadSize == b / kSquadSize && earlier.squad_epoch != now.squad_epoch) return false;
  if (a / kWarpSize == b / kWarpSize && earlier.warp_epoch != now.warp_epoch) return false;
  if (order != nullptr && earlier.release < order->Clock(b)[a / kWarpSize]) return false;
  return true;
}

TL_SIM_OUTLINED_DEF bool RaceDetector::Cover(const unsigned char* base, size_t bytes) {
  Release();
  void* p = mmap(nullptr, bytes * sizeof(Cell), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return false;
  cells_ = static_cast<Cell*>(p);
  base_ = base;
  bytes_ = bytes;
  return true;
}

TL_SIM_OUTLINED_DEF void RaceDetector::AccessShared(const unsigned char* address, uint32_t bytes, bool store,
                                                    const char* name, const void* buffer, int line) {
  if (address < base_ || address + bytes > base_ + bytes_) return;  // not this worker's shared memory
  BlockRunner& block = CurrentBlock("a shared-memory access");
  AccessSharedBy(block, block.current().linear, address, bytes, store, name, buffer, line);
}

TL_SIM_OUTLINED_DEF void RaceDetector::AccessSharedBy(BlockRunner& block, uint32_t thread,
                                                      const unsigned char* address, uint32_t bytes, bool store,
                                                      const char* name, const void* buffer, int line,
                                                      bool meet_transfers) {
  if (address < base_ || address + bytes > base_ + bytes_) return;
  const Stamp now = StampOf(block, thread, line);
  Cell* cell = cells_ + (address - base_);
  const auto* order = static_cast<const AsyncOrder*>(block.extension(ExtensionKind::kAsyncOrder).get());
  for (uint32_t i = 0; i < bytes; ++i) {
    if (cell[i].transfer != 0 && meet_transfers)
      CheckTransfer(block, cell[i].transfer, now, store, name, address + i, buffer, line);
    Update(block, order, cell[i], now, store, "shared", name,
           address + i - static_cast<const unsigned char*>(buffer));
  }
}

TL_SIM_OUTLINED_DEF uint32_t RaceDetector::BeginTransfer(BlockRunner& block, const AsyncTransfer& transfer) {
  std::unique_ptr<BlockExtension>& slot = block.extension(ExtensionKind::kAsyncWrites);
  if (slot == nullptr) slot.reset(new AsyncWrites(next_transfer_));
  auto& writes = *static_cast<AsyncWrites*>(slot.get());
  const uint32_t id = writes.base + static_cast<uint32_t>(writes.transfers.size());
  writes.transfers.push_back(transfer);
  writes.transfers.back().issued = StampOf(block, transfer.thread, transfer.line);
  next_transfer_ = id + 1;
  return id;
}

TL_SIM_OUTLINED_DEF void RaceDetector::MarkTransfer(BlockRunner& block, uint32_t id, const unsigned char* address,
                                                    size_t bytes, const AsyncTransfer& transfer,
                                                    const unsigned char* arena) {
  if (address < base_ || address + bytes > base_ + bytes_) return;
  auto& writes = *static_cast<AsyncWrites*>(block.extension(ExtensionKind::kAsyncWrites).get());
  Cell* cell = cells_ + (address - base_);
  for (size_t i = 0; i < bytes; ++i) {
    const AsyncTransfer* other =
        cell[i].transfer != 0 && cell[i].transfer != id ? writes.Find(cell[i].transfer) : nullptr;
    if (other == nullptr) {
      cell[i].transfer = id;
      continue;
    }
    if (other->engine_reads && transfer.engine_reads) continue;
    const uint3 a = block.fiber(other->thread).idx;
    const unsigned char* byte = address + i;
    char where[64] = "static shared memory";
    if (byte >= arena && byte < arena + kDynamicSmemCapacity)
      std::snprintf(where, sizeof(where), "shared address %zu", static_cast<size_t>(byte - arena));
    char why[320];
    WhyInFlight(static_cast<const AsyncOrder*>(block.extension(ExtensionKind::kAsyncOrder).get()), *other,
                writes.Find(id) != nullptr ? writes.Find(id)->issued : StampOf(block, transfer.thread, transfer.line),
                why, sizeof(why));
    block.Fail(musaErrorLaunchFailure,
               "%s (%s:%d) %s %s while %s issued at %s:%d by thread (%u,%u,%u) is still in flight there (%s)",
               transfer.what, SourceName(transfer.file), transfer.line, transfer.engine_reads ? "reads" : "writes",
               where, other->what, SourceName(other->file), other->line, a.x, a.y, a.z, why);
  }
}

TL_SIM_OUTLINED_DEF void RaceDetector::EndTransfer(BlockRunner& block, uint32_t id, const unsigned char* address,
                                                   size_t bytes) {
  if (id == 0) return;
  auto* writes = static_cast<AsyncWrites*>(block.extension(ExtensionKind::kAsyncWrites).get());
  if (writes == nullptr || writes->Find(id) == nullptr) return;
  writes->Find(id)->active = false;
  Cell* cell = cells_ + (address - base_);
  for (size_t i = 0; i < bytes; ++i)
    if (cell[i].transfer == id) cell[i].transfer = 0;
}

TL_SIM_OUTLINED_DEF void RaceDetector::AccessGlobal(const unsigned char* address, bool store, const char* name,
                                                    const void* buffer, int line) {
  BlockRunner& block = CurrentBlock("a global-memory access");
  const OsThreadState& t = g_thread;
  const uint64_t generation = 1 + t.block_idx.x + static_cast<uint64_t>(t.grid_dim.x) *
                                      (t.block_idx.y + static_cast<uint64_t>(t.grid_dim.y) * t.block_idx.z);
  if (global_ == nullptr && !MapGlobalTable()) return;
  const uintptr_t key = reinterpret_cast<uintptr_t>(address);
  size_t slot = (key * 0x9E3779B97F4A7C15ull) >> (64 - kGlobalTableBits);
  for (int probe = 0; probe < kMaxProbes; ++probe, slot = (slot + 1) & (kGlobalTableSize - 1)) {
    GlobalEntry& e = global_[slot];
    if (e.generation != generation) {  // free (or an earlier block's): this access is the first at `address`
      e.generation = generation;
      e.key = key;
      e.cell = Cell{};
    } else if (e.key != key) {
      continue;
    }
    Update(block, static_cast<const AsyncOrder*>(block.extension(ExtensionKind::kAsyncOrder).get()), e.cell,
           StampOf(block, block.current().linear, line), store, "global", name,
           address - static_cast<const unsigned char*>(buffer));
    return;
  }
}

TL_SIM_OUTLINED_DEF void RaceDetector::CheckTransfer(BlockRunner& block, uint32_t id, const Stamp& now, bool store,
                                                     const char* name, const unsigned char* address,
                                                     const void* buffer, int line) {
  auto* writes = static_cast<AsyncWrites*>(block.extension(ExtensionKind::kAsyncWrites).get());
  const AsyncTransfer* t = writes != nullptr ? writes->Find(id) : nullptr;
  if (t == nullptr || (t->engine_reads && !store)) return;
  const uint3 issuer = block.fiber(t->thread).idx;
  char why[320];
  WhyInFlight(static_cast<const AsyncOrder*>(block.extension(ExtensionKind::kAsyncOrder).get()), *t, now, why,
              sizeof(why));
  block.Fail(musaErrorLaunchFailure,
             "%s of shared memory at byte %td of `%s` (line %d) while an asynchronous copy (%s) issued at %s:%d by "
             "thread (%u,%u,%u) has not completed (%s)",
             store ? "write" : "read", address - static_cast<const unsigned char*>(buffer), name, line, t->what,
             SourceName(t->file), t->line, issuer.x, issuer.y, issuer.z, why);
}

// The issuing thread's own access, or another thread's that a barrier orders after the issue, met a copy that was
// not waited for: the transfer's hint. Another thread's access that nothing orders with the issue lacks a barrier, on
// one side of the copy or the other (the simulator runs a thread ahead to its next barrier, so a copy issued after
// another thread's read of the old bytes, with no barrier between, usually meets that read here).
inline void RaceDetector::WhyInFlight(const AsyncOrder* order, const AsyncTransfer& t, const Stamp& now, char* out,
                                      size_t size) {
  if (now.thread == t.thread + 1u || t.after[0] == '\0') {
    std::snprintf(out, size, "%s", t.hint);
  } else if (!Unordered(order, t.issued, now)) {
    std::snprintf(out, size, "%s a barrier orders this access after the copy's issue, but not after its completion",
                  t.hint);
  } else {
    std::snprintf(out, size,
                  "missing barrier? nothing orders this access with the copy's issue by another thread: if the "
                  "access belongs before the copy, a barrier between the two is missing; if it belongs after, %s",
                  t.after);
  }
}

TL_SIM_OUTLINED_DEF void RaceDetector::Update(BlockRunner& block, const AsyncOrder* order, Cell& cell,
                                              const Stamp& now, bool store, const char* space, const char* name,
                                              ptrdiff_t byte) {
  const Stamp* other = nullptr;
  if (Unordered(order, cell.store, now)) other = &cell.store;
  if (store && other == nullptr) {
    if (Unordered(order, cell.loads[0], now)) other = &cell.loads[0];
    else if (Unordered(order, cell.loads[1], now)) other = &cell.loads[1];
  }
  if (other != nullptr) Report(block, *other, other == &cell.store, now, store, space, name, byte);
  if (store) {
    cell.store = now;
    cell.loads[0] = cell.loads[1] = Stamp{};
  } else if (!Unordered(order, cell.loads[0], now)) {
    // A slot whose load is ordered before this one (or is this thread's) is taken first: what is ordered after
    // this load is ordered after that one too, so the two slots keep loads of two threads a later store may race
    // with (a warp's lanes reading a counter one of them then writes back).
    cell.loads[0] = now;
  } else {
    cell.loads[1] = now;
  }
}

TL_SIM_OUTLINED_DEF bool RaceDetector::MapGlobalTable() {
  void* p = mmap(nullptr, kGlobalTableSize * sizeof(GlobalEntry), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  global_ = static_cast<GlobalEntry*>(p);
  return true;
}

TL_SIM_OUTLINED_DEF void RaceDetector::Report(BlockRunner& block, const Stamp& earlier, bool earlier_stored,
                                              const Stamp& now, bool now_stores, const char* space, const char* name,
                                              ptrdiff_t byte) {
  const uint32_t a = earlier.thread - 1u, b = now.thread - 1u;
  const uint3 other = block.fiber(a).idx;
  // Lanes of one warp at two statements: warp-synchronous code that assumes lockstep orders them. (At one statement,
  // e.g. `S[0] = S[0] + 1` by several lanes, lockstep would not help: the generic report.)
  if (a / kWarpSize == b / kWarpSize && earlier.line != now.line) {
    block.Fail(musaErrorLaunchFailure,
               "data race on byte %td of %s `%s`: this thread %s it at line %d while thread (%u,%u,%u) %s it at "
               "line %d, with no __syncwarp or barrier between them (line numbers of the kernel source). Both are "
               "lanes of warp %u (lanes %u and %u of %u): the code relies on a warp's lanes running in lockstep, "
               "which neither the device guarantees (a race by CUDA's memory model since independent thread "
               "scheduling) nor the simulator does (it runs the lanes one after another); put T.sync_warp() "
               "(__syncwarp()) or a block barrier between the two accesses",
               byte, space, name, now_stores ? "stores" : "loads", now.line, other.x, other.y, other.z,
               earlier_stored ? "stored" : "loaded", earlier.line, b / kWarpSize, b % kWarpSize, a % kWarpSize,
               kWarpSize);
  }
  block.Fail(musaErrorLaunchFailure,
             "data race on byte %td of %s `%s`: this thread %s it at line %d while thread (%u,%u,%u) %s it at line "
             "%d, with no barrier between them (line numbers of the kernel source)",
             byte, space, name, now_stores ? "stores" : "loads", now.line, other.x, other.y, other.z,
             earlier_stored ? "stored" : "loaded", earlier.line);
}

TL_SIM_OUTLINED_DEF void RaceDetector::Release() {
  if (cells_ != nullptr) munmap(cells_, bytes_ * sizeof(Cell));
  if (global_ != nullptr) munmap(global_, kGlobalTableSize * sizeof(GlobalEntry));
  global_ = nullptr;
  cells_ = nullptr;
  base_ = nullptr;
  bytes_ = 0;
}

}  // namespace tl_sim
#pragma GCC visibility pop
