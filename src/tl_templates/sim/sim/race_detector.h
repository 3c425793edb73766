/*!
 * \file tl_templates/sim/sim/race_detector.h
 * \brief Checked mode's data-race detector for shared memory.
 *
 * Two accesses to one byte by different threads of a block, at least one a store, race unless a synchronisation
 * both threads took part in separates them. The simulator's synchronisations are rendezvous over a group (the
 * block, a squad of 4 warps, a warp); each group instance counts its completed rendezvous (its *epoch*,
 * BlockRunner::epoch), so an access stamped with the epochs its thread saw is ordered before a later access of
 * another thread when the block's epoch moved on, or they share a squad whose epoch moved on, or a warp whose
 * epoch moved on. Epochs never restart, so stamps of an earlier block are always stale.
 *
 * Async barriers (async_barrier.h) order accesses without a rendezvous: accesses a warp made before its arrival
 * are ordered before those a thread makes after a wait that saw the phase complete. That edge is a vector clock
 * over warps (AsyncOrder): each warp counts its releases (arrivals, and completions of copies it issued), every
 * access is stamped with its warp's count, and each thread knows, per warp, how many of its releases it has
 * acquired (by a wait, or by a warp or squad rendezvous with a thread that had). An access is ordered before a later
 * one of thread q when q acquired a release of the accessing warp made after it.
 *
 * Asynchronous copies (async_copy.h, tme.h) mark the shared bytes they will write (or, for a TME store, read) as
 * in flight (AsyncWrites): an access that conflicts with a copy in flight ends the launch naming the copy's issue.
 *
 * Every byte of the worker's shared memory has a shadow cell: the last store and up to two loads since it. A
 * third concurrent reader replaces the second, so a race may be missed but never invented. Global memory is
 * checked within a block, per access start (AccessGlobal). Accesses the detector sees are those the generated
 * code makes directly (loads, stores; not atomics or addresses handed to templates). A race ends the launch
 * naming the buffer, both threads and both source lines.
 */
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "config.h"
#include "scheduler.h"
#include "shared_memory.h"
#include "thread_state.h"

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

/*! \brief An asynchronous copy in flight, as checked mode sees it. */
struct AsyncTransfer {
  const char* what = "";      // the built-in, e.g. "__musa_memcpy_g2s"
  const char* file = "";      // where it was issued
  int line = 0;
  uint32_t thread = 0;        // the issuing thread's linear id
  bool engine_reads = false;  // the engine reads these bytes (a TME store): only stores to them conflict
  const char* hint = "";      // what the kernel probably misses, e.g. "missing __musa_memcpy_g2s_wait?"
  bool active = true;
};

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

class RaceDetector {
 public:
  RaceDetector() = default;
  RaceDetector(const RaceDetector&) = delete;
  RaceDetector& operator=(const RaceDetector&) = delete;
  ~RaceDetector() { Release(); }

  /*! \brief Shadow [base, base + bytes): the OS thread's shared memory. False when the shadow cannot be mapped. */
  bool Cover(const unsigned char* base, size_t bytes) {
    Release();
    void* p = mmap(nullptr, bytes * sizeof(Cell), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return false;
    cells_ = static_cast<Cell*>(p);
    base_ = base;
    bytes_ = bytes;
    return true;
  }

  /*! \brief The running thread loads (`store` false) or stores `bytes` bytes of shared memory at `address`, in
   *         buffer `name` that starts at `buffer`. */
  void AccessShared(const unsigned char* address, uint32_t bytes, bool store, const char* name, const void* buffer,
                    int line) {
    if (address < base_ || address + bytes > base_ + bytes_) return;  // not this worker's shared memory
    BlockRunner& block = CurrentBlock("a shared-memory access");
    AccessSharedBy(block, block.current().linear, address, bytes, store, name, buffer, line);
  }

  /*! \brief The same for an access made on behalf of thread `thread` (an asynchronous copy landing). */
  void AccessSharedBy(BlockRunner& block, uint32_t thread, const unsigned char* address, uint32_t bytes, bool store,
                      const char* name, const void* buffer, int line) {
    if (address < base_ || address + bytes > base_ + bytes_) return;
    const Stamp now = StampOf(block, thread, line);
    Cell* cell = cells_ + (address - base_);
    const auto* order = static_cast<const AsyncOrder*>(block.extension(ExtensionKind::kAsyncOrder).get());
    for (uint32_t i = 0; i < bytes; ++i) {
      if (cell[i].transfer != 0) CheckTransfer(block, cell[i].transfer, store, name, address + i, buffer, line);
      Update(block, order, cell[i], now, store, "shared", name,
             address + i - static_cast<const unsigned char*>(buffer));
    }
  }

  /*! \brief Register an asynchronous transfer of the running block; returns its id for MarkTransfer/EndTransfer. */
  uint32_t BeginTransfer(BlockRunner& block, const AsyncTransfer& transfer) {
    std::unique_ptr<BlockExtension>& slot = block.extension(ExtensionKind::kAsyncWrites);
    if (slot == nullptr) slot.reset(new AsyncWrites(next_transfer_));
    auto& writes = *static_cast<AsyncWrites*>(slot.get());
    const uint32_t id = writes.base + static_cast<uint32_t>(writes.transfers.size());
    writes.transfers.push_back(transfer);
    next_transfer_ = id + 1;
    return id;
  }

  /*!
   * \brief Mark [address, address + bytes) of shared memory as in flight for transfer `id` (nothing outside this
   *        worker's shared memory). Two transfers in flight on one byte, one of them writing it, end the launch.
   *        `arena` is the issuing library's dynamic shared memory, which the message gives shared addresses in.
   */
  void MarkTransfer(BlockRunner& block, uint32_t id, const unsigned char* address, size_t bytes,
                    const AsyncTransfer& transfer, const unsigned char* arena) {
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
      block.Fail(musaErrorLaunchFailure,
                 "%s (%s:%d) %s %s while %s issued at %s:%d by thread (%u,%u,%u) is still in flight there (%s)",
                 transfer.what, SourceName(transfer.file), transfer.line, transfer.engine_reads ? "reads" : "writes",
                 where, other->what, SourceName(other->file), other->line, a.x, a.y, a.z, other->hint);
    }
  }

  /*! \brief Transfer `id` completed: its bytes are no longer in flight. */
  void EndTransfer(BlockRunner& block, uint32_t id, const unsigned char* address, size_t bytes) {
    if (id == 0) return;
    auto* writes = static_cast<AsyncWrites*>(block.extension(ExtensionKind::kAsyncWrites).get());
    if (writes == nullptr || writes->Find(id) == nullptr) return;
    writes->Find(id)->active = false;
    Cell* cell = cells_ + (address - base_);
    for (size_t i = 0; i < bytes; ++i)
      if (cell[i].transfer == id) cell[i].transfer = 0;
  }

  /*!
   * \brief The same for global memory, within the running block. Global memory has no fixed extent to shadow:
   *        accesses are keyed by their first byte in a table that each block starts afresh, so accesses of
   *        different widths overlapping at other bytes are not compared, and a full table stops recording.
   */
  void AccessGlobal(const unsigned char* address, bool store, const char* name, const void* buffer, int line) {
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

 private:
  /*! \brief An access: the thread (linear id + 1; 0 = none) and the epochs of its block, squad and warp (their low
   *         32 bits: only equality is asked, and 2^32 rendezvous apart on one OS thread is out of reach). */
  struct Stamp {
    uint32_t block_epoch = 0, squad_epoch = 0, warp_epoch = 0;
    uint32_t release = 0;  // the accessing warp's release count (AsyncOrder)
    uint16_t thread = 0;
    int32_t line = 0;
  };
  struct Cell {
    Stamp store;
    Stamp loads[2];
    uint32_t transfer = 0;  // an asynchronous transfer in flight on this byte (AsyncWrites id), or 0
  };

  /*! \brief An access of `store` kind meets a byte marked in flight by transfer `id`: fail if it conflicts. */
  void CheckTransfer(BlockRunner& block, uint32_t id, bool store, const char* name, const unsigned char* address,
                     const void* buffer, int line) {
    auto* writes = static_cast<AsyncWrites*>(block.extension(ExtensionKind::kAsyncWrites).get());
    const AsyncTransfer* t = writes != nullptr ? writes->Find(id) : nullptr;
    if (t == nullptr || (t->engine_reads && !store)) return;
    const uint3 issuer = block.fiber(t->thread).idx;
    block.Fail(musaErrorLaunchFailure,
               "%s of shared memory at byte %td of `%s` (line %d) while an asynchronous copy (%s) issued at %s:%d by "
               "thread (%u,%u,%u) has not completed (%s)",
               store ? "write" : "read", address - static_cast<const unsigned char*>(buffer), name, line, t->what,
               SourceName(t->file), t->line, issuer.x, issuer.y, issuer.z, t->hint);
  }

  struct GlobalEntry {
    uint64_t generation;  // 1 + the linear id of the block that recorded it; 0 = never used
    uintptr_t key;
    Cell cell;
  };
  static constexpr int kGlobalTableBits = 16;
  static constexpr size_t kGlobalTableSize = size_t{1} << kGlobalTableBits;
  static constexpr int kMaxProbes = 32;

  /*! \brief Compare the access stamped `now` with the earlier ones of `cell`, then record it there. */
  void Update(BlockRunner& block, const AsyncOrder* order, Cell& cell, const Stamp& now, bool store,
              const char* space, const char* name, ptrdiff_t byte) {
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
    } else if (cell.loads[0].thread == 0 || cell.loads[0].thread == now.thread ||
               cell.loads[0].block_epoch != now.block_epoch) {
      cell.loads[0] = now;
    } else {
      cell.loads[1] = now;
    }
  }

  bool MapGlobalTable() {
    void* p = mmap(nullptr, kGlobalTableSize * sizeof(GlobalEntry), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    global_ = static_cast<GlobalEntry*>(p);
    return true;
  }

  static Stamp StampOf(BlockRunner& block, uint32_t me, int line) {
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

  /*! \brief True when `earlier`, another thread's access, is not ordered before the access stamped `now`. */
  static bool Unordered(const AsyncOrder* order, const Stamp& earlier, const Stamp& now) {
    if (earlier.thread == 0 || earlier.thread == now.thread) return false;
    if (earlier.block_epoch != now.block_epoch) return false;
    const uint32_t a = earlier.thread - 1u, b = now.thread - 1u;
    if (a / kSquadSize == b / kSquadSize && earlier.squad_epoch != now.squad_epoch) return false;
    if (a / kWarpSize == b / kWarpSize && earlier.warp_epoch != now.warp_epoch) return false;
    if (order != nullptr && earlier.release < order->Clock(b)[a / kWarpSize]) return false;
    return true;
  }

  [[noreturn]] static void Report(BlockRunner& block, const Stamp& earlier, bool earlier_stored, const Stamp& now,
                                  bool now_stores, const char* space, const char* name, ptrdiff_t byte) {
    const uint3 other = block.fiber(earlier.thread - 1u).idx;
    block.Fail(musaErrorLaunchFailure,
               "data race on byte %td of %s `%s`: this thread %s it at line %d while thread (%u,%u,%u) %s it at line "
               "%d, with no barrier between them (line numbers of the kernel source)",
               byte, space, name, now_stores ? "stores" : "loads", now.line, other.x, other.y, other.z,
               earlier_stored ? "stored" : "loaded", earlier.line);
  }

  void Release() {
    if (cells_ != nullptr) munmap(cells_, bytes_ * sizeof(Cell));
    if (global_ != nullptr) munmap(global_, kGlobalTableSize * sizeof(GlobalEntry));
    global_ = nullptr;
    cells_ = nullptr;
    base_ = nullptr;
    bytes_ = 0;
  }

  Cell* cells_ = nullptr;  // one per byte of shared memory
  uint32_t next_transfer_ = 1;  // ids of asynchronous transfers grow across blocks: stale marks never match
  GlobalEntry* global_ = nullptr;  // mapped at the first global access
  const unsigned char* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tl_sim
#pragma GCC visibility pop
