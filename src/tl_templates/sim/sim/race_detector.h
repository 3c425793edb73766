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
 * third concurrent reader replaces the second (a load ordered before the new one, or the same thread's, is replaced
 * first), so a race may be missed but never invented. Global memory is
 * checked within a block, per access start (AccessGlobal). Accesses the detector sees are those the generated
 * code makes directly (loads, stores; not atomics or addresses handed to templates). A race ends the launch
 * naming the buffer, both threads and both source lines; when the two are lanes of one warp, it names the lanes and
 * says the code relies on lockstep (warp-synchronous code with no __syncwarp: docs/SIMULATOR.md).
 */
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "config.h"
#include "scheduler.h"
#include "shared_memory.h"
#include "thread_state.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

// Checked mode's happens-before edges of async barriers (AsyncOrder) and its transfers in flight (AsyncWrites): only
// the runtime's code (race_detector_outlined.h) builds or reads them.
struct AsyncOrder;

/*! \brief An access as checked mode records it: the thread (linear id + 1; 0 = none) and the epochs of its block,
 *         squad and warp (their low 32 bits: only equality is asked, and 2^32 rendezvous apart on one OS thread is
 *         out of reach). */
struct AccessStamp {
  uint32_t block_epoch = 0, squad_epoch = 0, warp_epoch = 0;
  uint32_t release = 0;  // the accessing warp's release count (AsyncOrder)
  uint16_t thread = 0;
  int32_t line = 0;
};

/*! \brief An asynchronous copy in flight, as checked mode sees it. An access that meets its bytes is told apart two
 *         ways: one ordered after the issue (the issuing thread's own, or another's across a barrier) met a copy
 *         nobody waited for (`hint`); one that nothing orders with the issue lacks a barrier, before the issue if it
 *         belongs before the copy, or `after` if it belongs after. */
struct AsyncTransfer {
  const char* what = "";      // the built-in, e.g. "__musa_memcpy_g2s"
  const char* file = "";      // where it was issued
  int line = 0;
  uint32_t thread = 0;        // the issuing thread's linear id
  bool engine_reads = false;  // the engine reads these bytes (a TME store): only stores to them conflict
  const char* hint = "";      // what an access ordered after the issue misses, e.g. "missing __musa_memcpy_g2s_wait?"
  const char* after = "";     // what orders an access after the copy, e.g. "the issuing thread's
                              // __musa_memcpy_g2s_wait and a barrier after it"
  AccessStamp issued;         // the issue, stamped by RaceDetector::BeginTransfer
  bool active = true;
};


class RaceDetector {
 public:
  RaceDetector() = default;
  RaceDetector(const RaceDetector&) = delete;
  RaceDetector& operator=(const RaceDetector&) = delete;
  ~RaceDetector() { Release(); }

  /*! \brief Shadow [base, base + bytes): the OS thread's shared memory. False when the shadow cannot be mapped. */
  TL_SIM_OUTLINED bool Cover(const unsigned char* base, size_t bytes) TL_SIM_OUTLINED_AS("race_detector_cover");

  /*! \brief The running thread loads (`store` false) or stores `bytes` bytes of shared memory at `address`, in
   *         buffer `name` that starts at `buffer`. */
  TL_SIM_OUTLINED void AccessShared(const unsigned char* address, uint32_t bytes, bool store, const char* name,
                                    const void* buffer, int line)
      TL_SIM_OUTLINED_AS("race_detector_access_shared");

  /*! \brief The same for an access made on behalf of thread `thread` (an asynchronous copy landing); with
   *         `meet_transfers` false, bytes in flight for a transfer are not checked (a copy's issue: MarkTransfer
   *         names a second copy in flight itself). */
  TL_SIM_OUTLINED void AccessSharedBy(BlockRunner& block, uint32_t thread, const unsigned char* address,
                                      uint32_t bytes, bool store, const char* name, const void* buffer, int line,
                                      bool meet_transfers = true)
      TL_SIM_OUTLINED_AS("race_detector_access_shared_by");

  /*! \brief Register an asynchronous transfer of the running block; returns its id for MarkTransfer/EndTransfer. */
  TL_SIM_OUTLINED uint32_t BeginTransfer(BlockRunner& block, const AsyncTransfer& transfer)
      TL_SIM_OUTLINED_AS("race_detector_begin_transfer");

  /*!
   * \brief Mark [address, address + bytes) of shared memory as in flight for transfer `id` (nothing outside this
   *        worker's shared memory). Two transfers in flight on one byte, one of them writing it, end the launch.
   *        `arena` is the issuing library's dynamic shared memory, which the message gives shared addresses in.
   */
  TL_SIM_OUTLINED void MarkTransfer(BlockRunner& block, uint32_t id, const unsigned char* address, size_t bytes,
                                    const AsyncTransfer& transfer, const unsigned char* arena)
      TL_SIM_OUTLINED_AS("race_detector_mark_transfer");

  /*! \brief Transfer `id` completed: its bytes are no longer in flight. */
  TL_SIM_OUTLINED void EndTransfer(BlockRunner& block, uint32_t id, const unsigned char* address, size_t bytes)
      TL_SIM_OUTLINED_AS("race_detector_end_transfer");

  /*!
   * \brief The same for global memory, within the running block. Global memory has no fixed extent to shadow:
   *        accesses are keyed by their first byte in a table that each block starts afresh, so accesses of
   *        different widths overlapping at other bytes are not compared, and a full table stops recording.
   */
  TL_SIM_OUTLINED void AccessGlobal(const unsigned char* address, bool store, const char* name, const void* buffer,
                                    int line)
      TL_SIM_OUTLINED_AS("race_detector_access_global");

 private:
  using Stamp = AccessStamp;
  struct Cell {
    Stamp store;
    Stamp loads[2];
    uint32_t transfer = 0;  // an asynchronous transfer in flight on this byte (AsyncWrites id), or 0
  };

  /*! \brief An access of `store` kind, stamped `now`, meets a byte marked in flight by transfer `id`: fail if it
   *         conflicts. */
  TL_SIM_OUTLINED void CheckTransfer(BlockRunner& block, uint32_t id, const Stamp& now, bool store, const char* name,
                                     const unsigned char* address, const void* buffer, int line)
      TL_SIM_OUTLINED_AS("race_detector_check_transfer");

  /*! \brief Why an access stamped `now` met transfer `t` in flight: `t`'s hint when the access is ordered after the
   *         issue, else the missing barrier (see AsyncTransfer). Written into `out`. */
  static void WhyInFlight(const AsyncOrder* order, const AsyncTransfer& t, const Stamp& now, char* out, size_t size);

  struct GlobalEntry {
    uint64_t generation;  // 1 + the linear id of the block that recorded it; 0 = never used
    uintptr_t key;
    Cell cell;
  };
  static constexpr int kGlobalTableBits = 16;
  static constexpr size_t kGlobalTableSize = size_t{1} << kGlobalTableBits;
  static constexpr int kMaxProbes = 32;

  /*! \brief Compare the access stamped `now` with the earlier ones of `cell`, then record it there. */
  TL_SIM_OUTLINED void Update(BlockRunner& block, const AsyncOrder* order, Cell& cell, const Stamp& now, bool store,
                              const char* space, const char* name, ptrdiff_t byte)
      TL_SIM_OUTLINED_AS("race_detector_update");

  TL_SIM_OUTLINED bool MapGlobalTable() TL_SIM_OUTLINED_AS("race_detector_map_global_table");

  /*! \brief The stamp of an access by thread `me` at `line`, now. */
  static Stamp StampOf(BlockRunner& block, uint32_t me, int line);

  /*! \brief True when `earlier`, another thread's access, is not ordered before the access stamped `now`. */
  static bool Unordered(const AsyncOrder* order, const Stamp& earlier, const Stamp& now);

  [[noreturn]] TL_SIM_OUTLINED static void Report(BlockRunner& block, const Stamp& earlier, bool earlier_stored,
                                                  const Stamp& now, bool now_stores, const char* space,
                                                  const char* name, ptrdiff_t byte)
      TL_SIM_OUTLINED_AS("race_detector_report");

  TL_SIM_OUTLINED void Release() TL_SIM_OUTLINED_AS("race_detector_release");

  Cell* cells_ = nullptr;  // one per byte of shared memory
  uint32_t next_transfer_ = 1;  // ids of asynchronous transfers grow across blocks: stale marks never match
  GlobalEntry* global_ = nullptr;  // mapped at the first global access
  const unsigned char* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "race_detector_outlined.h"
#endif
