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

#include "config.h"
#include "scheduler.h"
#include "thread_state.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

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
    const Stamp now = StampOf(block, line);
    Cell* cell = cells_ + (address - base_);
    for (uint32_t i = 0; i < bytes; ++i) {
      Update(block, cell[i], now, store, "shared", name, address + i - static_cast<const unsigned char*>(buffer));
    }
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
      Update(block, e.cell, StampOf(block, line), store, "global", name,
             address - static_cast<const unsigned char*>(buffer));
      return;
    }
  }

 private:
  /*! \brief An access: the thread (linear id + 1; 0 = none) and the epochs of its block, squad and warp (their low
   *         32 bits: only equality is asked, and 2^32 rendezvous apart on one OS thread is out of reach). */
  struct Stamp {
    uint32_t block_epoch = 0, squad_epoch = 0, warp_epoch = 0;
    uint16_t thread = 0;
    int32_t line = 0;
  };
  struct Cell {
    Stamp store;
    Stamp loads[2];
  };

  struct GlobalEntry {
    uint64_t generation;  // 1 + the linear id of the block that recorded it; 0 = never used
    uintptr_t key;
    Cell cell;
  };
  static constexpr int kGlobalTableBits = 16;
  static constexpr size_t kGlobalTableSize = size_t{1} << kGlobalTableBits;
  static constexpr int kMaxProbes = 32;

  /*! \brief Compare the access stamped `now` with the earlier ones of `cell`, then record it there. */
  void Update(BlockRunner& block, Cell& cell, const Stamp& now, bool store, const char* space, const char* name,
              ptrdiff_t byte) {
    const Stamp* other = nullptr;
    if (Unordered(cell.store, now)) other = &cell.store;
    if (store && other == nullptr) {
      if (Unordered(cell.loads[0], now)) other = &cell.loads[0];
      else if (Unordered(cell.loads[1], now)) other = &cell.loads[1];
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

  static Stamp StampOf(BlockRunner& block, int line) {
    const uint32_t me = block.current().linear;
    Stamp s;
    s.block_epoch = static_cast<uint32_t>(block.epoch(Group::kBlock, 0));
    s.squad_epoch = static_cast<uint32_t>(block.epoch(Group::kSquad, me / kSquadSize));
    s.warp_epoch = static_cast<uint32_t>(block.epoch(Group::kWarp, me / kWarpSize));
    s.thread = static_cast<uint16_t>(me + 1);
    s.line = line;
    return s;
  }

  /*! \brief True when `earlier`, another thread's access, is not ordered before the access stamped `now`. */
  static bool Unordered(const Stamp& earlier, const Stamp& now) {
    if (earlier.thread == 0 || earlier.thread == now.thread) return false;
    if (earlier.block_epoch != now.block_epoch) return false;
    const uint32_t a = earlier.thread - 1u, b = now.thread - 1u;
    if (a / kSquadSize == b / kSquadSize && earlier.squad_epoch != now.squad_epoch) return false;
    if (a / kWarpSize == b / kWarpSize && earlier.warp_epoch != now.warp_epoch) return false;
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
  GlobalEntry* global_ = nullptr;  // mapped at the first global access
  const unsigned char* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tl_sim
#pragma GCC visibility pop
