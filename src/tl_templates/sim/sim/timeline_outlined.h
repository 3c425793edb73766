/*!
 * \file tl_templates/sim/sim/timeline_outlined.h
 * \brief The bodies of timeline.h's functions that use the standard library's containers: compiled once into the
 *        simulator runtime (and into a kernel library that carries its own simulator), never in a kernel library
 *        that links the runtime (visibility.h, TL_SIM_OUTLINED). Included by timeline.h only.
 */
#pragma once

#include "timeline.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace profile {

TL_SIM_OUTLINED_DEF void Timeline::StartBlock(uint64_t block, uint32_t x, uint32_t y, uint32_t z, uint32_t warps) {
  block_ = block;
  warps_ = warps;
  blocks_.push_back({block, x, y, z});
  last_.assign(warps + 2, kNone);
}

TL_SIM_OUTLINED_DEF void Timeline::Add(uint32_t track, SliceKind kind, double start, double end, uint64_t amount,
                                       double until) {
  const bool merges = kind == SliceKind::kArithmetic || kind == SliceKind::kMemory;
  if (merges && last_[track] != kNone) {
    Slice& last = slices_[last_[track]];
    if (last.kind == kind && last.end == start) {
      last.end = end;
      last.amount += amount;
      return;
    }
  }
  if (slices_.size() >= kMaxTraceSlices) {
    ++dropped_;
    return;
  }
  last_[track] = slices_.size();
  slices_.push_back(Slice{block_, track, kind, start, end, amount, until});
}

TL_SIM_OUTLINED_DEF void LaunchTimeline::Add(const Timeline& worker) {
  for (const Slice& s : worker.slices()) {
    if (slices.size() < kMaxTraceSlices) {
      slices.push_back(s);
    } else {
      ++dropped;
    }
  }
  blocks.insert(blocks.end(), worker.blocks().begin(), worker.blocks().end());
  dropped += worker.dropped();
}

TL_SIM_OUTLINED_DEF LastTrace& GlobalLastTrace() {
  static LastTrace last;
  return last;
}

TL_SIM_OUTLINED_DEF void PublishTimeline(const char* kernel, uint32_t threads_per_block, LaunchTimeline& launch) {
  // Workers finish in any order: order the blocks and each block's slices as they ran.
  std::sort(launch.blocks.begin(), launch.blocks.end(),
            [](const Timeline::Block& a, const Timeline::Block& b) { return a.id < b.id; });
  std::stable_sort(launch.slices.begin(), launch.slices.end(),
                   [](const Slice& a, const Slice& b) { return a.block < b.block; });
  std::string json;
  json.reserve(96 * launch.slices.size() + 256);
  json += "{\"kernel\": \"";
  json += kernel;  // a C identifier, of any length: nothing to escape, no fixed buffer to outgrow
  char buf[256];  // below, numbers only
  std::snprintf(buf, sizeof(buf),
                "\", \"threads_per_block\": %u, \"warp_size\": %u, \"max_slices\": %zu, \"dropped_slices\": %llu, "
                "\"blocks\": [",
                threads_per_block, kWarpSize, kMaxTraceSlices, static_cast<unsigned long long>(launch.dropped));
  json += buf;
  for (size_t i = 0; i < launch.blocks.size(); ++i) {
    const Timeline::Block& b = launch.blocks[i];
    std::snprintf(buf, sizeof(buf), "%s[%llu, %u, %u, %u]", i ? ", " : "", static_cast<unsigned long long>(b.id),
                  b.x, b.y, b.z);
    json += buf;
  }
  json += "], \"slices\": [";
  for (size_t i = 0; i < launch.slices.size(); ++i) {
    const Slice& s = launch.slices[i];
    std::snprintf(buf, sizeof(buf), "%s[%llu, %u, \"%s\", %.2f, %.2f, %llu, %.2f]", i ? ", " : "",
                  static_cast<unsigned long long>(s.block), s.track, kSliceNames[static_cast<int>(s.kind)], s.start,
                  s.end, static_cast<unsigned long long>(s.amount), s.until);
    json += buf;
  }
  json += "]}";
  LastTrace& last = GlobalLastTrace();
  std::lock_guard<std::mutex> lock(last.mu);
  last.json.swap(json);
}

}  // namespace profile
}  // namespace tl_sim
#pragma GCC visibility pop
