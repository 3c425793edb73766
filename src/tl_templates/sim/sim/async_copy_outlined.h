/*!
 * \file tl_templates/sim/sim/async_copy_outlined.h
 * \brief The body of async_copy.h's LDLMS model: each thread's queue of copies in flight, their issue, commit and
 *        landing. Compiled once into the simulator runtime (and into a kernel library that carries its own
 *        simulator), never in a kernel library that links the runtime, whose build would otherwise instantiate the
 *        queues' containers again (visibility.h, TL_SIM_OUTLINED). Included by async_copy.h only.
 *
 * The copies' destinations are absolute addresses in the issuing library's shared memory; checked mode's shared
 * addresses are taken against that library's buffer (Enqueue's `arena`), not the runtime's own buf_dyn_shmem.
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "async_copy.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace ldlms {

struct Copy {
  unsigned char* dst;
  uint32_t bytes;
  unsigned char data[kMaxCopyBytes];
  uint32_t group;     // the thread's commit count at issue: committed once commits > group
  uint32_t transfer;  // checked mode's id (race_detector.h)
  double land_cycle;  // the cycle model's landing (profile.h)
  const char* what;
  const char* file;
  int line;
};

struct ThreadCopies {
  std::deque<Copy> pending;  // in issue order
  uint32_t commits = 0;
};

struct InFlight final : BlockExtension {
  explicit InFlight(uint32_t threads) : copies(threads) {}
  std::vector<ThreadCopies> copies;  // by linear thread id

  void OnThreadExit(BlockRunner& block, Fiber& thread) override {
    ThreadCopies& mine = copies[thread.linear];
    if (mine.pending.empty() || !block.checked()) return;
    const Copy& c = mine.pending.front();
    block.Fail(musaErrorLaunchFailure,
               "the thread exits with %zu asynchronous copies it never waited for, the first (%s) issued at %s:%d "
               "(missing __musa_memcpy_g2s_wait?)",
               mine.pending.size(), c.what, SourceName(c.file), c.line);
  }
};

inline InFlight& GetInFlight(BlockRunner& block) {
  std::unique_ptr<BlockExtension>& slot = block.extension(ExtensionKind::kAsyncCopy);
  if (slot == nullptr) slot.reset(new InFlight(block.thread_count()));
  return *static_cast<InFlight*>(slot.get());
}

TL_SIM_OUTLINED_DEF void Commit(const char* what) {
  BlockRunner& block = CurrentBlock(what);
  GetInFlight(block).copies[block.current().linear].commits += 1;
}

TL_SIM_OUTLINED_DEF void Enqueue(const char* what, void* dst, const void* src, uint32_t bytes,
                                 const unsigned char* data, unsigned char* arena, const char* file, int line) {
  BlockRunner& block = CurrentBlock(what);
  if (g_thread.profile != nullptr) g_thread.profile->Add(profile::k_ldlms_bytes, bytes);
  ThreadCopies& mine = GetInFlight(block).copies[block.current().linear];
  Copy c{};
  c.dst = static_cast<unsigned char*>(dst);
  c.bytes = bytes;
  c.group = mine.commits;
  c.land_cycle = g_thread.profile != nullptr ? g_thread.profile->Transfer(block.current().linear, bytes, profile::SliceKind::kLdlms)
                                             : 0;
  c.what = what;
  c.file = file;
  c.line = line;
  std::memcpy(c.data, data, bytes);
  OsThreadState& t = g_thread;
  if (t.race_detector != nullptr) {
    t.race_detector->AccessGlobal(static_cast<const unsigned char*>(src), false, "an asynchronous copy's source", src,
                                  line);
    AsyncTransfer transfer;
    transfer.what = what;
    transfer.file = file;
    transfer.line = line;
    transfer.thread = block.current().linear;
    transfer.hint = "missing __musa_memcpy_g2s_wait?";
    transfer.after = "the issuing thread's __musa_memcpy_g2s_wait and a barrier after it";
    // The copy may write its destination any time from its issue on: a load of those bytes by another thread that
    // no barrier orders before the issue races with it, even when a barrier separates the issue from the wait
    // (where the landing is checked).
    t.race_detector->AccessSharedBy(block, block.current().linear, c.dst, bytes, true,
                                    "the destination of an asynchronous copy, at its issue", c.dst, line, false);
    c.transfer = t.race_detector->BeginTransfer(block, transfer);
    t.race_detector->MarkTransfer(block, c.transfer, c.dst, bytes, transfer, arena);
  }
  std::memset(c.dst, kPoisonByte, bytes);
  mine.pending.push_back(c);
}

TL_SIM_OUTLINED_DEF void Land(const char* what, uint32_t keep, bool committed_only, const char* file, int line) {
  BlockRunner& block = CurrentBlock(what);
  auto* state = static_cast<InFlight*>(block.extension(ExtensionKind::kAsyncCopy).get());
  if (state == nullptr) return;
  ThreadCopies& mine = state->copies[block.current().linear];
  RaceDetector* detector = g_thread.race_detector;
  double landed = 0;
  while (!mine.pending.empty()) {
    const Copy& c = mine.pending.front();
    if (committed_only && c.group + keep >= mine.commits) break;
    landed = std::max(landed, c.land_cycle);
    if (g_thread.uninit_shadow != nullptr) g_thread.uninit_shadow->MarkWritten(c.dst, c.bytes);
    if (detector != nullptr) {
      detector->EndTransfer(block, c.transfer, c.dst, c.bytes);
      detector->AccessShared(c.dst, c.bytes, true, "the destination of an asynchronous copy", c.dst, line);
    }
    std::memcpy(c.dst, c.data, c.bytes);
    mine.pending.pop_front();
  }
  if (g_thread.profile != nullptr)
    g_thread.profile->WaitUntil(block.current().linear, landed, profile::k_copy_wait_stall_cycles);
  (void)file;
}

}  // namespace ldlms
}  // namespace tl_sim
#pragma GCC visibility pop
