/*!
 * \file tl_templates/sim/sim/timeline.h
 * \brief The cycle model's timeline (TILELANG_SIM_PROFILE=3): what each warp of the simulated blocks did when, in
 *        the model's cycles, for a Chrome / Perfetto trace (tilelang_musa/profiler/trace.py writes the file).
 *
 * A warp's track is its lane 0's clock (profile.h's Recorder): every advance of that clock is one slice, so a
 * track's slices never overlap. Two more tracks per block show the shared pipes: the tensor pipe's matrix
 * instructions and the async transfers (LDLMS, TME) streaming through the MP's share of the L2, each sequential.
 * Consecutive arithmetic (and consecutive memory instructions) on a track merge into one slice. A launch keeps at
 * most kMaxTraceSlices slices; beyond that it counts what it dropped, and the trace says so.
 *
 * `tl_sim_last_trace()` returns the last traced launch's slices as JSON:
 *   {"kernel": ..., "threads_per_block": ..., "warp_size": 32, "max_slices": ..., "dropped_slices": ...,
 *    "blocks": [[id, x, y, z], ...], "slices": [[block, track, "kind", start, end, amount, until], ...]}
 * with tracks 0..warps-1 the warps, `warps` the tensor pipe and `warps + 1` the transfers; `amount` is a slice's
 * instructions, FLOPs or bytes, `until` a transfer's landing or a matrix instruction's completion (else 0).
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "config.h"
#include "visibility.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace profile {

inline constexpr size_t kMaxTraceSlices = 100000;  // a launch's cap: a few MB of JSON, enough for a few blocks

#define TL_SIM_SLICE_KINDS(X)                                                                                   \
  X(kArithmetic, "arithmetic") X(kMemory, "memory") X(kGlobalLoadWait, "global load wait")                      \
  X(kBarrierWait, "barrier wait") X(kAsyncBarrierWait, "async barrier wait") X(kCopyWait, "copy wait")          \
  X(kCollectiveWait, "collective wait") X(kSqmmaIssue, "sqmma issue") X(kSqmmaWait, "sqmma wait")               \
  X(kMmaIssue, "mma issue") X(kMmaWait, "mma wait") X(kSqmma, "sqmma") X(kMma, "mma") X(kLdlms, "ldlms")         \
  X(kTmeLoad, "tme load") X(kTmeStore, "tme store")

enum class SliceKind : uint8_t {
#define TL_SIM_SLICE_ENUM(name, text) name,
  TL_SIM_SLICE_KINDS(TL_SIM_SLICE_ENUM)
#undef TL_SIM_SLICE_ENUM
};

inline constexpr const char* kSliceNames[] = {
#define TL_SIM_SLICE_NAME(name, text) text,
    TL_SIM_SLICE_KINDS(TL_SIM_SLICE_NAME)
#undef TL_SIM_SLICE_NAME
};

struct Slice {
  uint64_t block;
  uint32_t track;
  SliceKind kind;
  double start, end;
  uint64_t amount;  // instructions, FLOPs or bytes
  double until;     // a transfer's landing, a matrix instruction's completion
};

/*! \brief A worker's slices, for the blocks it ran. */
class Timeline {
 public:
  TL_SIM_OUTLINED void StartBlock(uint64_t block, uint32_t x, uint32_t y, uint32_t z, uint32_t warps)
      TL_SIM_OUTLINED_AS("timeline_start_block");

  uint32_t tensor_track() const { return warps_; }
  uint32_t transfer_track() const { return warps_ + 1; }

  /*! \brief `kind` on `track` from `start` to `end`; arithmetic and memory slices extend the track's last slice
   *         of their kind when they follow it without a gap. */
  TL_SIM_OUTLINED void Add(uint32_t track, SliceKind kind, double start, double end, uint64_t amount = 0,
                           double until = 0) TL_SIM_OUTLINED_AS("timeline_add");

  struct Block {
    uint64_t id;
    uint32_t x, y, z;
  };
  const std::vector<Slice>& slices() const { return slices_; }
  const std::vector<Block>& blocks() const { return blocks_; }
  uint64_t dropped() const { return dropped_; }

 private:
  static constexpr size_t kNone = SIZE_MAX;
  uint64_t block_ = 0;
  uint32_t warps_ = 0;
  std::vector<Slice> slices_;
  std::vector<Block> blocks_;
  std::vector<size_t> last_;  // by track: the index of its last slice in slices_
  uint64_t dropped_ = 0;
};

/*! \brief The slices of a launch, gathered from its workers. */
struct LaunchTimeline {
  std::vector<Slice> slices;
  std::vector<Timeline::Block> blocks;
  uint64_t dropped = 0;

  TL_SIM_OUTLINED void Add(const Timeline& worker) TL_SIM_OUTLINED_AS("timeline_gather");
};

/*! \brief The JSON of the process's last traced launch (read by tl_sim_last_trace). */
struct LastTrace {
  std::mutex mu;
  std::string json = "{}";
};

TL_SIM_OUTLINED LastTrace& GlobalLastTrace() TL_SIM_OUTLINED_AS("timeline_last_trace");

TL_SIM_OUTLINED void PublishTimeline(const char* kernel, uint32_t threads_per_block, LaunchTimeline& launch)
    TL_SIM_OUTLINED_AS("timeline_publish");

}  // namespace profile
}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "timeline_outlined.h"
#endif

/*! \brief The JSON slices of the last launch traced in this process (TILELANG_SIM_PROFILE=3), "{}" if none. */
#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library finds the runtime's
extern "C" __attribute__((visibility("default"), used)) inline const char* tl_sim_last_trace() {
  return tl_sim::profile::GlobalLastTrace().json.c_str();
}
#endif
