/*!
 * \file tl_templates/sim/sim/tme_outlined.h
 * \brief The body of tme.h's model: planning a tile, reading and landing loads, the per-thread store queues.
 *        Compiled once into the simulator runtime (and into a kernel library that carries its own simulator), never
 *        in a kernel library that links the runtime (visibility.h, TL_SIM_OUTLINED), so a TME kernel's build does
 *        not generate it again. Included by tme.h only.
 *
 * The tiles lie in the issuing library's shared memory (the `arena` the built-ins pass), not in the runtime's own
 * buf_dyn_shmem.
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "async_barrier.h"
#include "poisoned_globals.h"
#include "profile.h"
#include "race_detector.h"
#include "scheduler.h"
#include "shared_address.h"
#include "swizzle.h"
#include "tme.h"
#include "uninit_reads.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace tme {

inline constexpr uint32_t kChunk = 16;  // the smallest swizzle granularity: chunks move as a whole

struct Swizzle {
  uint32_t granularity = 0, stride = 256, line = 256;
};

/*! \brief One copy's geometry: the descriptor, the box, and where each 16-byte chunk of the box lives in shared. */
struct Tile {
  TensorDescriptor desc;
  uint32_t rank = 0;
  int64_t extent[TensorDescriptor::kMaxRank] = {};
  int64_t coord[TensorDescriptor::kMaxRank] = {};
  uint64_t bytes = 0;
  const unsigned char* arena = nullptr;  // the issuing library's dynamic shared memory (shared address 0)
  std::vector<unsigned char*> chunks;  // shared address of chunk i of the dense box

  /*!
   * \brief Call f(offset in the box, global address or null, count) for runs of `count` elements along the box's
   *        innermost dimension (contiguous in global memory: strides[0] is the element size) that are all in
   *        bounds, or all out of bounds (null). Together the runs cover every element of the box once, in order.
   */
  template <typename F>
  void ForEachRun(F&& f) const {
    const uint32_t elem = desc.elem_bytes;
    const uint64_t inner = static_cast<uint64_t>(extent[0]);
    const uint64_t rows = bytes / elem / inner;
    // the innermost indices inside the tensor: [lo, hi) of the box's row
    const int64_t lo = std::min<int64_t>(std::max<int64_t>(-coord[0], 0), extent[0]);
    const int64_t past = static_cast<int64_t>(desc.dims[0]) - coord[0];
    const int64_t hi = std::max<int64_t>(std::min<int64_t>(past, extent[0]), lo);
    int64_t index[TensorDescriptor::kMaxRank] = {};  // index[0] stays 0
    for (uint64_t row = 0; row < rows; ++row) {
      bool inside = true;
      uint64_t address = desc.address;
      for (uint32_t d = 1; d < rank; ++d) {
        const int64_t c = coord[d] + index[d];
        if (c < 0 || static_cast<uint64_t>(c) >= desc.dims[d]) inside = false;
        else address += static_cast<uint64_t>(c) * desc.strides[d];
      }
      const uint64_t offset = row * inner * elem;
      if (!inside || lo == hi) {
        f(offset, nullptr, inner);
      } else {
        if (lo > 0) f(offset, nullptr, static_cast<uint64_t>(lo));
        f(offset + lo * elem, reinterpret_cast<unsigned char*>(address + static_cast<uint64_t>(coord[0] + lo) * elem),
          static_cast<uint64_t>(hi - lo));
        if (hi < extent[0]) f(offset + hi * elem, nullptr, static_cast<uint64_t>(extent[0] - hi));
      }
      for (uint32_t d = 1; d < rank && ++index[d] == extent[d]; ++d) index[d] = 0;
    }
  }
};

/*! \brief Validate a copy's arguments and plan its tile; any error fails the launch naming `what` and the line. */
inline Tile Plan(BlockRunner& block, const unsigned char* arena, const char* what, void* smem, uint64_t desc_addr,
                 uint32_t rank,
                 const int32_t* box, const int32_t* coord, int sg, int ss, int sl, const int* hints, int hint_count,
                 const char* file, int line) {
  auto where = [file] { return SourceName(file); };  // the file's name only on a failure (strrchr)
  Tile t;
  if (desc_addr == 0)
    block.Fail(musaErrorIllegalAddress, "%s (%s:%d): the descriptor address is 0", what, where(), line);
  std::memcpy(&t.desc, reinterpret_cast<const void*>(desc_addr), sizeof(t.desc));
  if (t.desc.magic != TensorDescriptor::kMagic)
    block.Fail(musaErrorIllegalInstruction,
               "%s (%s:%d): 0x%llx is not the address of a MUtensorDescriptor filled by muTensorDescriptorEncode",
               what, where(), line, static_cast<unsigned long long>(desc_addr));
  if (t.desc.rank != rank)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): the descriptor is of rank %u, the built-in of rank %u", what,
               where(), line, t.desc.rank, rank);
  if (sg < 0 || sg > 3 || ss < 0 || ss > 3 || sl < 0 || sl > 1 || !(sg < ss + 2) || !(ss <= sl + 2))
    block.Fail(musaErrorIllegalInstruction,
               "%s (%s:%d): swizzle sg=%d ss=%d sl=%d is invalid (sg 0..3, ss 0..3, sl 0..1, sg < ss + 2, "
               "ss <= sl + 2)", what, where(), line, sg, ss, sl);
  for (int i = 0; i < hint_count; ++i)
    if (hints[i] < 0 || hints[i] > 3)
      block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): cache hint %d is not 0..3 (NONE, ONCE, NORMAL, PERSIST)",
                 what, where(), line, hints[i]);
  Swizzle swizzle;
  swizzle.granularity = sg == 0 ? 0 : 8u << sg;
  swizzle.stride = 32u << ss;
  swizzle.line = 128u << sl;
  t.rank = rank;
  uint64_t elems = 1;
  for (uint32_t d = 0; d < rank; ++d) {
    if (box[d] < 1)
      block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): box extent %d of dimension %u is not positive", what,
                 where(), line, box[d], d);
    t.extent[d] = box[d];
    t.coord[d] = coord[d];
    elems *= static_cast<uint64_t>(box[d]);
  }
  t.bytes = elems * t.desc.elem_bytes;
  t.arena = arena;
  if (static_cast<uint64_t>(box[0]) * t.desc.elem_bytes % kChunk != 0)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): the box's innermost extent is %d elements of %u bytes, not a "
               "multiple of 16 bytes [I]", what, where(), line, box[0], t.desc.elem_bytes);
  auto* p = static_cast<unsigned char*>(smem);
  if (p == nullptr || reinterpret_cast<uintptr_t>(p) % kChunk != 0)
    block.Fail(musaErrorIllegalAddress, "%s (%s:%d): shared address %p is not 16-byte aligned [I]", what, where(), line,
               smem);
  if (!(p >= arena && p < arena + kDynamicSmemCapacity))
    block.Fail(musaErrorIllegalAddress,
               "%s (%s:%d): the tile at %p is not in the dynamic shared buffer (buf_dyn_shmem), the only shared "
               "memory with shared addresses in the simulator (shared_address.h)", what, where(), line, smem);
  if (static_cast<uint64_t>(p - arena) + t.bytes > SharedArenaBytes())
    block.Fail(musaErrorIllegalAddress,
               "%s (%s:%d): the %llu-byte box at shared address %zu ends past the launch's %zu bytes of dynamic "
               "shared memory",
               what, where(), line, static_cast<unsigned long long>(t.bytes), static_cast<size_t>(p - arena),
               SharedArenaBytes());
  t.chunks.resize(t.bytes / kChunk);
  // SwizzledAddress(a, granularity, stride, line), its terms computed once rather than per chunk
  const uint32_t line_shift = Log2(swizzle.line);
  const uint32_t mask = swizzle.granularity == 0 ? 0 : swizzle.stride / swizzle.granularity - 1;
  const uint32_t shift = swizzle.granularity == 0 ? 0 : Log2(swizzle.granularity);
  unsigned char* const base = const_cast<unsigned char*>(arena);
  const auto first = static_cast<uint32_t>(p - arena);
  unsigned char** chunk = t.chunks.data();
  for (uint64_t i = 0, n = t.chunks.size(); i < n; ++i) {
    const auto a = static_cast<uint32_t>(first + i * kChunk);
    chunk[i] = base + (a ^ (((a >> line_shift) & mask) << shift));
  }
  return t;
}

/*! \brief Checked mode: register `t`'s shared bytes as in flight for a transfer of the running thread. */
inline uint32_t BeginTransfer(BlockRunner& block, const Tile& t, const char* what, bool engine_reads,
                              const char* hint, const char* after, const char* file, int line) {
  RaceDetector* detector = g_thread.race_detector;
  if (detector == nullptr) return 0;
  AsyncTransfer transfer;
  transfer.what = what;
  transfer.file = file;
  transfer.line = line;
  transfer.thread = block.current().linear;
  transfer.engine_reads = engine_reads;
  transfer.hint = hint;
  transfer.after = after;
  const uint32_t id = detector->BeginTransfer(block, transfer);
  for (unsigned char* chunk : t.chunks) detector->MarkTransfer(block, id, chunk, kChunk, transfer, t.arena);
  return id;
}

/*! \brief Checked mode: the transfer ended; its shared bytes were accessed by thread `thread` (race detector). */
inline void EndTransfer(BlockRunner& block, const Tile& t, uint32_t id, uint32_t thread, bool store, int line) {
  if (store && g_thread.uninit_shadow != nullptr)
    for (unsigned char* chunk : t.chunks) g_thread.uninit_shadow->MarkWritten(chunk, kChunk);
  RaceDetector* detector = g_thread.race_detector;
  if (detector == nullptr) return;
  for (unsigned char* chunk : t.chunks) {
    detector->EndTransfer(block, id, chunk, kChunk);
    detector->AccessSharedBy(block, thread, chunk, kChunk, store, store ? "a TME load's tile" : "a TME store's tile",
                             chunk, line);
  }
}

TL_SIM_OUTLINED_DEF void Load(uint32_t rank, const unsigned char* arena, uint32_t bar, void* smem, uint64_t desc_addr,
                         const int32_t* box, const int32_t* coord, int sg, int ss, int sl, int prefetch, int inner,
                         int outer, int l2, const char* what, const char* file, int line) {
  (void)prefetch;
  (void)l2;
  BlockRunner& block = CurrentBlock(what);
  const int hints[2] = {inner, outer};
  auto tile = std::make_shared<Tile>(Plan(block, arena, what, smem, desc_addr, rank, box, coord, sg, ss, sl, hints,
                                          2, file, line));
  // ForEachRun writes every byte of the box: no zero-fill
  const std::shared_ptr<unsigned char[]> image(new unsigned char[tile->bytes]);
  const uint32_t elem = tile->desc.elem_bytes;
  const uint64_t fill = tile->desc.oob_fill;
  tile->ForEachRun([&](uint64_t offset, const unsigned char* global, uint64_t count) {
    if (global != nullptr) {
      if (PoisonedGlobals* globals = g_thread.global_shadow) {  // checked mode: an output not written yet
        for (uint64_t i = 0; i < count; ++i)
          if (const char* why = globals->Unwritten(global + i * elem, elem))
            UninitialisedRead("global", why, "(the TME load's tile)", static_cast<int64_t>(offset / elem + i), line);
      }
      std::memcpy(image.get() + offset, global, count * elem);
    } else {
      for (uint64_t i = 0; i < count; ++i)
        std::memcpy(image.get() + offset + i * elem, &fill, elem);  // little-endian: the low bytes [I]
    }
  });
  const uint32_t id =
      BeginTransfer(block, *tile, what, false, "missing __musa_async_wait on its barrier?",
                    "a __musa_async_wait on the copy's barrier", file, line);
  for (unsigned char* chunk : tile->chunks) std::memset(chunk, kPoisonByte, kChunk);
  if (g_thread.profile != nullptr) g_thread.profile->Add(profile::k_tme_load_bytes, tile->bytes);
  async::BarrierLoad load;
  load.bytes = tile->bytes;
  load.thread = block.current().linear;
  load.what = what;
  load.file = file;
  load.line = line;
  const uint32_t issuer = load.thread;
  load.land = [tile, image, id, issuer, line](BlockRunner& b) {
    for (uint64_t i = 0; i < tile->chunks.size(); ++i) std::memcpy(tile->chunks[i], image.get() + i * kChunk, kChunk);
    EndTransfer(b, *tile, id, issuer, true, line);
  };
  async::IssueLoad(bar, std::move(load));
}

/*! \brief A store issued by one thread, until its read_wait. */
struct Store {
  std::shared_ptr<Tile> tile;
  bool committed = false;
  uint32_t transfer = 0;
  double done_cycle = 0;  // the cycle model's end of the engine's reads (profile.h)
  const char* what = "";
  const char* file = "";
  int line = 0;
};

struct Stores final : BlockExtension {
  explicit Stores(uint32_t threads) : pending(threads) {}
  std::vector<std::deque<Store>> pending;  // by linear thread id, in issue order

  void OnThreadExit(BlockRunner& block, Fiber& thread) override {
    std::deque<Store>& mine = pending[thread.linear];
    if (mine.empty() || !block.checked()) return;
    const Store& s = mine.front();
    block.Fail(musaErrorLaunchFailure,
               "the thread exits with %zu TME stores not waited for, the first (%s) issued at %s:%d (missing "
               "__musa_tme_store_commit and __musa_tme_store_read_wait?)",
               mine.size(), s.what, SourceName(s.file), s.line);
  }
};

inline Stores& GetStores(BlockRunner& block) {
  std::unique_ptr<BlockExtension>& slot = block.extension(ExtensionKind::kTmeStore);
  if (slot == nullptr) slot.reset(new Stores(block.thread_count()));
  return *static_cast<Stores*>(slot.get());
}

TL_SIM_OUTLINED_DEF void StoreTile(uint32_t rank, const unsigned char* arena, void* smem, uint64_t desc_addr,
                              const int32_t* box, const int32_t* coord, int sg, int ss, int sl, int inner, int outer,
                              int l2, const char* what, const char* file, int line) {
  (void)l2;
  BlockRunner& block = CurrentBlock(what);
  const int hints[2] = {inner, outer};
  Store s;
  s.tile = std::make_shared<Tile>(Plan(block, arena, what, smem, desc_addr, rank, box, coord, sg, ss, sl, hints, 2,
                                       file, line));
  s.what = what;
  s.file = file;
  s.line = line;
  s.transfer = BeginTransfer(block, *s.tile, what, true, "missing __musa_tme_store_read_wait?",
                             "the issuing thread's __musa_tme_store_read_wait and a barrier after it", file, line);
  if (g_thread.profile != nullptr) {
    g_thread.profile->Add(profile::k_tme_store_bytes, s.tile->bytes);
    s.done_cycle = g_thread.profile->Transfer(block.current().linear, s.tile->bytes, profile::SliceKind::kTmeStore);
  }
  GetStores(block).pending[block.current().linear].push_back(std::move(s));
}

TL_SIM_OUTLINED_DEF void Commit() {
  BlockRunner& block = CurrentBlock("__musa_tme_store_commit");
  for (Store& s : GetStores(block).pending[block.current().linear]) s.committed = true;
}

/*! \brief Complete the running thread's committed stores: read the tiles from shared memory, write global. */
TL_SIM_OUTLINED_DEF void ReadWait(int line) {
  BlockRunner& block = CurrentBlock("__musa_tme_store_read_wait");
  auto* stores = static_cast<Stores*>(block.extension(ExtensionKind::kTmeStore).get());
  if (stores == nullptr) return;
  const uint32_t me = block.current().linear;
  std::deque<Store>& mine = stores->pending[me];
  while (!mine.empty() && mine.front().committed) {
    if (g_thread.profile != nullptr)
      g_thread.profile->WaitUntil(me, mine.front().done_cycle, profile::k_copy_wait_stall_cycles);
    const Tile& t = *mine.front().tile;
    EndTransfer(block, t, mine.front().transfer, me, false, line);
    if (WrittenShadow* shadow = g_thread.uninit_shadow) {  // the elements that land in the tensor
      const uint32_t elem = t.desc.elem_bytes;
      t.ForEachRun([&](uint64_t offset, unsigned char* global, uint64_t count) {
        for (uint64_t b = offset; global != nullptr && b < offset + count * elem; b += elem)
          shadow->CheckModelRead(t.chunks[b / kChunk] + b % kChunk, elem, "a TME store");
      });
    }
    const std::unique_ptr<unsigned char[]> image(new unsigned char[t.bytes]);  // every chunk is copied in
    for (uint64_t i = 0; i < t.chunks.size(); ++i) std::memcpy(image.get() + i * kChunk, t.chunks[i], kChunk);
    t.ForEachRun([&](uint64_t offset, unsigned char* global, uint64_t count) {
      if (global == nullptr) return;
      std::memcpy(global, image.get() + offset, count * t.desc.elem_bytes);
      if (g_thread.global_shadow != nullptr) g_thread.global_shadow->MarkWritten(global, count * t.desc.elem_bytes);
    });
    mine.pop_front();
  }
}

}  // namespace tme
}  // namespace tl_sim
#pragma GCC visibility pop
