/*!
 * \file tl_templates/sim/sim/profile_outlined.h
 * \brief The bodies of profile.h's functions that use the standard library's containers: compiled once into the
 *        simulator runtime (and into a kernel library that carries its own simulator), never in a kernel library
 *        that links the runtime, whose build would otherwise instantiate the containers' templates again
 *        (visibility.h, TL_SIM_OUTLINED). Included by profile.h only.
 */
#pragma once

#include "profile.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace profile {

TL_SIM_OUTLINED_DEF void Totals::Add(const Totals& other) {
  for (int i = 0; i < kNumCounters; ++i)
    value[i] = i == k_block_cycles_max ? std::max(value[i], other.value[i]) : value[i] + other.value[i];
  for (const auto& [shape, count] : other.mma_shapes) mma_shapes[shape] += count;
}

TL_SIM_OUTLINED_DEF void Recorder::StartBlock(uint32_t threads, uint64_t id, uint3 index) {
  clocks_.assign(threads, Clock{});
  tensor_free_ = transfer_free_ = 0;
  transfer_busy_.clear();
  for (double& c : cycles_) c = 0;
  if (timeline_ != nullptr)
    timeline_->StartBlock(id, index.x, index.y, index.z, (threads + kWarpSize - 1) / kWarpSize);
}

TL_SIM_OUTLINED_DEF double Recorder::PlaceTransfer(double at, double length) {
  auto next = transfer_busy_.upper_bound(at);
  double start = at;
  if (next != transfer_busy_.begin()) start = std::max(start, std::prev(next)->second);
  for (; next != transfer_busy_.end() && next->first < start + length; ++next) start = std::max(start, next->second);
  double first = start, last = start + length;  // the busy stretch, merged with the ones it touches
  auto it = transfer_busy_.upper_bound(first);
  if (it != transfer_busy_.begin() && std::prev(it)->second >= first) it = std::prev(it);
  for (; it != transfer_busy_.end() && it->first <= last; it = transfer_busy_.erase(it)) {
    first = std::min(first, it->first);
    last = std::max(last, it->second);
  }
  transfer_busy_.emplace(first, last);
  transfer_free_ = std::max(transfer_free_, start + length);
  return start;
}

TL_SIM_OUTLINED_DEF void Recorder::Access(uint32_t thread, bool shared, bool store, const void* address,
                                         uint32_t bytes, const char* name, int line) {
  if (thread < clocks_.size()) {
    Clock& c = clocks_[thread];
    if (timeline_ != nullptr && thread % kWarpSize == 0)
      timeline_->Add(thread / kWarpSize, SliceKind::kMemory, c.cycle, c.cycle + 1, 1);
    c.cycle += 1;
    if (!shared && !store) c.loads_ready = std::max(c.loads_ready, c.cycle + kTiming.global_latency);
  }
  const Site site{name, line, store, shared};
  uint32_t& executions = executions_[{thread, site}];
  std::vector<Span>& spans = requests_[RequestKey{site, thread / kWarpSize, executions}];
  ++executions;
  spans.push_back(Span{reinterpret_cast<uintptr_t>(address), bytes});
}

TL_SIM_OUTLINED_DEF void Recorder::AddMmaShape(bool squad, uint32_t m, uint32_t n, uint32_t k) {
  ++totals_.mma_shapes[MmaShapeKey(squad, m, n, k)];
}

TL_SIM_OUTLINED_DEF void Recorder::FlushBlock() {
  double end = std::max(tensor_free_, transfer_free_);
  for (uint32_t t = 0; t < clocks_.size(); ++t) end = std::max(end, Settle(t));
  if (!kTimed) end = 0;
  cycles_[k_block_cycles] = end;
  for (int i = k_block_cycles; i < kNumCounters; ++i) {
    if (i == k_block_cycles_max || !kTimed) continue;
    totals_.value[i] += static_cast<uint64_t>(std::llround(cycles_[i]));
  }
  totals_.value[k_block_cycles_max] =
      std::max(totals_.value[k_block_cycles_max], static_cast<uint64_t>(std::llround(end)));
  for (auto& [key, spans] : requests_) {
    if (key.site.shared) {
      Shared(key.site.store, spans);
    } else {
      Global(key.site.store, std::move(spans));
    }
  }
  requests_.clear();
  executions_.clear();
  ++totals_.value[k_blocks];
}

TL_SIM_OUTLINED_DEF void Recorder::Global(bool store, std::vector<Span> spans) {
  std::unordered_set<uintptr_t> sectors;
  for (const Span& s : spans)
    for (uintptr_t a = s.address / kSectorBytes; a <= (s.address + s.bytes - 1) / kSectorBytes; ++a) sectors.insert(a);
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.address < b.address; });
  uint64_t bytes = 0;
  uintptr_t covered = 0;  // one past the highest byte counted so far
  for (const Span& s : spans) {
    const uintptr_t begin = std::max(s.address, covered), end = s.address + s.bytes;
    if (end > begin) bytes += end - begin;
    covered = std::max(covered, end);
  }
  totals_.value[store ? k_global_store_requests : k_global_load_requests] += 1;
  totals_.value[store ? k_global_store_sectors : k_global_load_sectors] += sectors.size();
  totals_.value[store ? k_global_store_bytes : k_global_load_bytes] += bytes;
}

TL_SIM_OUTLINED_DEF void Recorder::Shared(bool store, const std::vector<Span>& spans) {
  std::unordered_set<uintptr_t> words;
  for (const Span& s : spans)
    for (uintptr_t w = s.address / kBankBytes; w <= (s.address + s.bytes - 1) / kBankBytes; ++w) words.insert(w);
  uint64_t per_bank[kSharedBanks] = {};
  uint64_t worst = 0;
  for (uintptr_t w : words) worst = std::max(worst, ++per_bank[w % kSharedBanks]);
  totals_.value[store ? k_shared_store_requests : k_shared_load_requests] += 1;
  totals_.value[store ? k_shared_store_wavefronts : k_shared_load_wavefronts] += worst;
  totals_.value[store ? k_shared_store_ideal_wavefronts : k_shared_load_ideal_wavefronts] +=
      (words.size() + kSharedBanks - 1) / kSharedBanks;
}

TL_SIM_OUTLINED_DEF LastLaunch& GlobalLastLaunch() {
  static LastLaunch last;
  return last;
}

TL_SIM_OUTLINED_DEF void Publish(const char* kernel, const Geometry& shape, const Totals& totals, bool print) {
  LastLaunch& last = GlobalLastLaunch();
  std::lock_guard<std::mutex> lock(last.mu);
  int at = std::snprintf(last.json, sizeof(last.json),
                         "{\"kernel\": \"%s\", \"grid_blocks\": %llu, \"threads_per_block\": %u, "
                         "\"dynamic_smem_bytes\": %llu",
                         kernel, static_cast<unsigned long long>(shape.grid_blocks), shape.threads_per_block,
                         static_cast<unsigned long long>(shape.dynamic_smem_bytes));
  for (int i = 0; i < kNumCounters && at < static_cast<int>(sizeof(last.json)); ++i)
    at += std::snprintf(last.json + at, sizeof(last.json) - at, ", \"%s\": %llu", kCounterNames[i],
                        static_cast<unsigned long long>(totals.value[i]));
  const char* separator = "";
  at += std::snprintf(last.json + at, sizeof(last.json) - at, ", \"mma_shapes\": {");
  for (const auto& [key, count] : totals.mma_shapes) {
    if (at >= static_cast<int>(sizeof(last.json))) break;
    at += std::snprintf(last.json + at, sizeof(last.json) - at, "%s\"%s m%un%uk%u\": %llu", separator,
                        (key >> 48) ? "sqmma" : "warp_mma", static_cast<unsigned>((key >> 32) & 0xffff),
                        static_cast<unsigned>((key >> 16) & 0xffff), static_cast<unsigned>(key & 0xffff),
                        static_cast<unsigned long long>(count));
    separator = ", ";
  }
  if (at < static_cast<int>(sizeof(last.json))) std::snprintf(last.json + at, sizeof(last.json) - at, "}}");
  if (!print) return;
  std::fprintf(stderr, "[tilelang sim profile] kernel %s (%s): %llu of %llu blocks, %u threads, %llu B smem\n",
               kernel, kArchName, static_cast<unsigned long long>(totals.value[k_blocks]),
               static_cast<unsigned long long>(shape.grid_blocks), shape.threads_per_block,
               static_cast<unsigned long long>(shape.dynamic_smem_bytes));
  for (int i = 0; i < kNumCounters; ++i)
    std::fprintf(stderr, "  %-30s %llu\n", kCounterNames[i], static_cast<unsigned long long>(totals.value[i]));
  for (const auto& [key, count] : totals.mma_shapes)
    std::fprintf(stderr, "  %-8s m%un%uk%-13u %llu\n", (key >> 48) ? "sqmma" : "warp_mma",
                 static_cast<unsigned>((key >> 32) & 0xffff), static_cast<unsigned>((key >> 16) & 0xffff),
                 static_cast<unsigned>(key & 0xffff), static_cast<unsigned long long>(count));
}

}  // namespace profile
}  // namespace tl_sim
#pragma GCC visibility pop
