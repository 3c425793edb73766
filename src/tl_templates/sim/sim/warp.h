/*!
 * \file tl_templates/sim/sim/warp.h
 * \brief Warp collectives: shuffles, votes, __syncwarp and __activemask, as rendezvous of the lanes in the mask.
 *
 * Shuffles follow CUDA's width-segment semantics generalised to the arch's warp size W (32 on mp_31, 128 on mp_22;
 * MUSA_LAYOUTS.md section 7): lane offsets and xor masks are taken modulo W, `width` must be a power of two in
 * [1, W], a lane whose source falls past its segment (up/down/xor) keeps its own value, and xor may read earlier
 * segments. Masks are 32 bits: on 128-lane warps bit i names lanes i, i+32, i+64 and i+96 [I]. Lanes that do not
 * exist (a partial last warp) are dropped from the mask, and so are lanes that have exited (CUDA's rule: the
 * non-exited threads named in the mask take part; BlockRunner::LiveLanes). Reading a lane that exists but is not in
 * the mask, or has exited, is undefined on the device; here it returns all-one bits (NaN for floats) so the mistake
 * shows.
 */
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "builtins.h"
#include "config.h"
#include "scheduler.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief The lanes of `warp` named by `mask`, relative to the warp's first thread. */
inline ThreadSet WarpLanes(BlockRunner& block, uint32_t warp, unsigned mask) {
  static_assert(kWarpSize % 32 == 0 && kWarpSize <= 128, "warps are 32 or 128 lanes");
  ThreadSet lanes;
  const uint32_t extent = block.GroupExtent(Group::kWarp, warp);
  const uint64_t replicated = uint64_t{mask} | (uint64_t{mask} << 32);
  for (uint32_t w = 0; w * 64 < extent; ++w) {
    const uint32_t valid = extent - w * 64;  // lanes of this 64-lane word that exist
    lanes.SetWord(w, valid >= 64 ? replicated : replicated & ((uint64_t{1} << valid) - 1));
  }
  return lanes;
}

enum class ShuffleMode { kIdx, kUp, kDown, kXor };

/*! \brief The PTX shfl rule: source lane and whether it is inside the caller's reach (else the own value). */
template <ShuffleMode kMode>
void ExchangeShuffle(BlockRunner& block, Rendezvous& rv) {
  rv.members.ForEach([&](uint32_t lane) {
    CollectiveSlot& s = block.fiber(rv.base + lane).slot;
    const uint32_t width = static_cast<uint32_t>(s.width);
    const uint32_t b = static_cast<uint32_t>(s.arg) & (kWarpSize - 1);
    const uint32_t segment_start = lane & ~(width - 1);
    const uint32_t segment_last = segment_start + width - 1;
    uint32_t src = lane;
    if constexpr (kMode == ShuffleMode::kIdx) {
      src = segment_start | (b & (width - 1));
    } else if constexpr (kMode == ShuffleMode::kUp) {
      if (lane >= b && lane - b >= segment_start) src = lane - b;
    } else if constexpr (kMode == ShuffleMode::kDown) {
      if (lane + b <= segment_last) src = lane + b;
    } else {
      if ((lane ^ b) <= segment_last) src = lane ^ b;
    }
    s.out = rv.members.Test(src) ? block.fiber(rv.base + src).slot.in : ~uint64_t{0};
  });
}

inline constexpr Collective kShflIdx{"__shfl_sync", &ExchangeShuffle<ShuffleMode::kIdx>, true};
inline constexpr Collective kShflUp{"__shfl_up_sync", &ExchangeShuffle<ShuffleMode::kUp>, true};
inline constexpr Collective kShflDown{"__shfl_down_sync", &ExchangeShuffle<ShuffleMode::kDown>, true};
inline constexpr Collective kShflXor{"__shfl_xor_sync", &ExchangeShuffle<ShuffleMode::kXor>, true};

/*! \brief Votes: slot.in is the predicate; slot.arg 0 = any, 1 = all, 2 = ballot. */
inline void ExchangeVote(BlockRunner& block, Rendezvous& rv) {
  uint64_t ballot = 0;
  uint32_t count = 0;
  rv.members.ForEach([&](uint32_t lane) {
    if (block.fiber(rv.base + lane).slot.in != 0) {
      ballot |= uint64_t{1} << (lane & 63);
      ++count;
    }
  });
  rv.members.ForEach([&](uint32_t lane) {
    CollectiveSlot& s = block.fiber(rv.base + lane).slot;
    s.out = s.arg == 0 ? (count != 0) : s.arg == 1 ? (count == rv.expected) : ballot;
  });
}

/*! \brief Matches: slot.in is the value's bits; slot.arg 0 = any (the lanes holding the caller's value), 1 = all
 *         (the mask if every lane holds the same value, else 0). */
inline void ExchangeMatch(BlockRunner& block, Rendezvous& rv) {
  bool all_equal = true, seen = false;
  uint64_t first = 0, members = 0;
  rv.members.ForEach([&](uint32_t lane) {
    const uint64_t value = block.fiber(rv.base + lane).slot.in;
    members |= uint64_t{1} << (lane & 63);
    all_equal = all_equal && (!seen || value == first);
    first = seen ? first : value;
    seen = true;
  });
  rv.members.ForEach([&](uint32_t lane) {
    CollectiveSlot& s = block.fiber(rv.base + lane).slot;
    if (s.arg == 1) {
      s.out = all_equal ? members : 0;
      return;
    }
    uint64_t peers = 0;
    rv.members.ForEach([&](uint32_t other) {
      if (block.fiber(rv.base + other).slot.in == s.in) peers |= uint64_t{1} << (other & 63);
    });
    s.out = peers;
  });
}

inline constexpr Collective kMatchAny{"__match_any_sync", &ExchangeMatch, true};
inline constexpr Collective kMatchAll{"__match_all_sync", &ExchangeMatch, true};
inline constexpr Collective kAnySync{"__any_sync", &ExchangeVote, true};
inline constexpr Collective kAllSync{"__all_sync", &ExchangeVote, true};
inline constexpr Collective kBallotSync{"__ballot_sync", &ExchangeVote, true};
inline constexpr Collective kSyncWarp{"__syncwarp", nullptr, true};

inline uint64_t WarpCollective(const Collective& op, unsigned mask, CollectiveSlot in, const char* file, int line) {
  BlockRunner& block = CurrentBlock(op.name);
  const uint32_t warp = block.GroupIndex(Group::kWarp, block.current().linear);
  return block.Arrive(op, Group::kWarp, WarpLanes(block, warp, mask), in, file, line);
}

template <class T>
T WarpShuffle(const Collective& op, unsigned mask, T var, int arg, int width, const char* file, int line) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                "warp shuffles move trivially copyable values of at most 8 bytes");
  if (width <= 0 || width > static_cast<int>(kWarpSize) || (width & (width - 1)) != 0)
    CurrentBlock(op.name).Fail(musaErrorLaunchFailure, "%s (%s:%d): width %d is not a power of two in [1, %u]",
                               op.name, SourceName(file), line, width, kWarpSize);
  CollectiveSlot in;
  std::memcpy(&in.in, &var, sizeof(T));
  in.arg = arg;
  in.width = width;
  const uint64_t bits = WarpCollective(op, mask, in, file, line);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

inline uint64_t WarpVote(const Collective& op, int kind, unsigned mask, int predicate, const char* file, int line) {
  CollectiveSlot in;
  in.in = predicate != 0;
  in.arg = kind;
  return WarpCollective(op, mask, in, file, line);
}

template <class T>
uint64_t WarpMatch(const Collective& op, int kind, unsigned mask, T value, const char* file, int line) {
  static_assert(std::is_integral<T>::value || std::is_floating_point<T>::value,
                "__match_any_sync / __match_all_sync compare integers or floating-point values");
  if (kWarpSize != 32)
    CurrentBlock(op.name).Fail(musaErrorNotSupported, "%s (%s:%d) is not modelled on %s's %u-lane warps", op.name,
                               SourceName(file), line, kArchName, kWarpSize);
  CollectiveSlot in;
  in.in = 0;
  std::memcpy(&in.in, &value, sizeof(T));
  in.arg = kind;
  return WarpCollective(op, mask, in, file, line);
}

/*!
 * \brief A butterfly of xor shuffles as ONE rendezvous of the warp (tl::AllReduce, tl::WarpReduce: reduce.h).
 *
 * Each lane hands over the address of its `batch` values; the last lane to arrive runs every round for every lane,
 * in the rounds' order: round by round, value b of each lane becomes op(own, partner's) with the partner chosen by
 * the xor rule of ExchangeShuffle (the round's offset, `width`), and a partner that is not a member gives all-one
 * bits, as __shfl_xor_sync does. Op is the caller's functor, compiled in the kernel's library, and each lane's
 * operands and their order are those of its own shuffles, so every result is bit for bit what the round-by-round
 * shuffles give; the lanes pay one thread switch each instead of one per shuffle.
 *
 * Offsets run from `first`, doubling while below `limit` (ascending) or halving while above it.
 *
 * A plan is a constant of the kernel's library, one per (Op, T, rounds): its address names the collective, so lanes
 * of one warp at different butterflies are a divergent collective. The code is shared: one exchange per element
 * size moves the values as bytes, and one small `combine` per (Op, T) applies Op to a round's lanes, so a library
 * with many reductions compiles the exchange a few times, not once per butterfly.
 */
struct XorButterflyPlan : Collective {
  // own[i] = Op(own[i], partner[i]) for i < lanes (CombineLanes<Op, T>)
  void (*combine)(unsigned char* own, const unsigned char* partner, uint32_t lanes);
  int batch, first, limit;
  bool ascending;
  int width;

  constexpr bool InRange(int offset) const { return ascending ? offset < limit : offset > limit; }
  constexpr int Next(int offset) const { return ascending ? offset * 2 : offset / 2; }
};

/*! \brief own[i] = Op(own[i], partner[i]) for i < lanes, on values of T stored as bytes. */
template <class Op, class T>
void CombineLanes(unsigned char* own, const unsigned char* partner, uint32_t lanes) {
  const Op op{};
  for (uint32_t i = 0; i < lanes; ++i) {
    T a, b;
    std::memcpy(&a, own + i * sizeof(T), sizeof(T));
    std::memcpy(&b, partner + i * sizeof(T), sizeof(T));
    const T c = op(a, b);
    std::memcpy(own + i * sizeof(T), &c, sizeof(T));
  }
}

/*! \brief The values a lane handed over (slot.in holds their address). */
inline unsigned char* LaneValueBytes(BlockRunner& block, const Rendezvous& rv, uint32_t lane) {
  return reinterpret_cast<unsigned char*>(static_cast<uintptr_t>(block.fiber(rv.base + lane).slot.in));
}

/*! \brief The exchange of every butterfly over values of kBytes bytes (the plan is the rendezvous' collective). */
template <uint32_t kBytes>
void ExchangeXorButterfly(BlockRunner& block, Rendezvous& rv) {
  const XorButterflyPlan& plan = static_cast<const XorButterflyPlan&>(*rv.op);
  // The members are the warp's lanes [0, lanes) less those that exited: RunXorButterfly passes the full mask.
  const uint32_t lanes = block.GroupExtent(Group::kWarp, rv.group_index);
  const uint32_t width = static_cast<uint32_t>(plan.width);
  unsigned char cur[kWarpSize * kBytes], partner[kWarpSize * kBytes];
  unsigned char absent[kBytes];  // what a shuffle reads from a lane outside the mask
  std::memset(absent, 0xff, kBytes);
  for (int b = 0; b < plan.batch; ++b) {
    for (uint32_t lane = 0; lane < lanes; ++lane)  // a lane that exited (no member) handed nothing over
      std::memcpy(cur + lane * kBytes, rv.members.Test(lane) ? LaneValueBytes(block, rv, lane) + b * kBytes : absent,
                  kBytes);
    for (int offset = plan.first; offset > 0 && plan.InRange(offset); offset = plan.Next(offset)) {
      const uint32_t mask_bits = static_cast<uint32_t>(offset) & (kWarpSize - 1);
      for (uint32_t lane = 0; lane < lanes; ++lane) {
        const uint32_t segment_last = (lane & ~(width - 1)) + width - 1;
        const uint32_t src = (lane ^ mask_bits) <= segment_last ? lane ^ mask_bits : lane;
        std::memcpy(partner + lane * kBytes, rv.members.Test(src) ? cur + src * kBytes : absent, kBytes);
      }
      plan.combine(cur, partner, lanes);
    }
    for (uint32_t lane = 0; lane < lanes; ++lane)
      if (rv.members.Test(lane)) std::memcpy(LaneValueBytes(block, rv, lane) + b * kBytes, cur + lane * kBytes, kBytes);
  }
}

/*! \brief The plan of one butterfly: the exchange of T's size and Op's combine over T. */
template <class Op, class T, int kBatch, int kFirst, int kLimit, bool kAscending, int kWidth>
struct XorButterfly {
  static constexpr bool InRange(int offset) { return kAscending ? offset < kLimit : offset > kLimit; }
  static constexpr int Next(int offset) { return kAscending ? offset * 2 : offset / 2; }
  static constexpr int Rounds() {
    int n = 0;
    for (int offset = kFirst; offset > 0 && InRange(offset); offset = Next(offset)) ++n;
    return n;
  }
  // A width __shfl_xor_sync would reject takes the round-by-round path, which fails with its message.
  static constexpr bool kModelled = kWidth > 0 && kWidth <= static_cast<int>(kWarpSize) &&
                                    (kWidth & (kWidth - 1)) == 0 && kFirst > 0 && kBatch >= 1 &&
                                    (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                "warp shuffles move trivially copyable values of at most 8 bytes");
  static constexpr XorButterflyPlan kPlan{{"__shfl_xor_sync", &ExchangeXorButterfly<sizeof(T)>, true},
                                          &CombineLanes<Op, T>,
                                          kBatch,
                                          kFirst,
                                          kLimit,
                                          kAscending,
                                          kWidth};
};

/*! \brief The calling lane joins the warp's rendezvous at `plan` with its values (RunXorButterfly, below). */
inline bool RunXorButterflyPlan(const XorButterflyPlan& plan, void* values, const char* file, int line) {
  BlockRunner& block = CurrentBlock("__shfl_xor_sync");
  if (block.checked() || g_thread.profile != nullptr) return false;
  const uint32_t warp = block.GroupIndex(Group::kWarp, block.current().linear);
  CollectiveSlot in;
  in.in = reinterpret_cast<uintptr_t>(values);
  in.arg = plan.first;
  in.width = plan.width;
  block.Arrive(plan, Group::kWarp, WarpLanes(block, warp, 0xffffffffu), in, file, line);
  return true;
}

/*!
 * \brief Run the butterfly of XorButterflyPlan over the full warp mask on `values` (the calling lane's kBatch values),
 *        or return false and leave it to the caller's shuffles: in checked mode (whose seeded schedules, race
 *        detector and uninitialised-value checks see each shuffle as the device issues it) and when profiling
 *        (which counts each shuffle and meets the lanes' clocks at each).
 */
template <class Op, class T, int kBatch, int kFirst, int kLimit, bool kAscending, int kWidth>
bool RunXorButterfly(T* values, const char* file, int line) {
  using Butterfly = XorButterfly<Op, T, kBatch, kFirst, kLimit, kAscending, kWidth>;
  if constexpr (!Butterfly::kModelled || Butterfly::Rounds() == 0) {
    return false;
  } else {
    return RunXorButterflyPlan(Butterfly::kPlan, values, file, line);
  }
}

}  // namespace tl_sim

template <class T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize, const char* file = __builtin_FILE(),
                     int line = __builtin_LINE()) {
  return tl_sim::WarpShuffle(tl_sim::kShflIdx, mask, var, srcLane, width, file, line);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize,
                        const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return tl_sim::WarpShuffle(tl_sim::kShflUp, mask, var, static_cast<int>(delta), width, file, line);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize,
                          const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return tl_sim::WarpShuffle(tl_sim::kShflDown, mask, var, static_cast<int>(delta), width, file, line);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize,
                         const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return tl_sim::WarpShuffle(tl_sim::kShflXor, mask, var, laneMask, width, file, line);
}

inline int __any_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return static_cast<int>(tl_sim::WarpVote(tl_sim::kAnySync, 0, mask, predicate, file, line));
}
inline int __all_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return static_cast<int>(tl_sim::WarpVote(tl_sim::kAllSync, 1, mask, predicate, file, line));
}
/*! \brief One bit per lane: defined for 32-lane warps only (a 128-lane ballot does not fit the result). */
inline unsigned __ballot_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  if (tl_sim::kWarpSize != 32)
    tl_sim::CurrentBlock("__ballot_sync")
        .Fail(musaErrorNotSupported, "__ballot_sync (%s:%d) is not modelled on %s's %u-lane warps",
              tl_sim::SourceName(file), line, tl_sim::kArchName, tl_sim::kWarpSize);
  return static_cast<unsigned>(tl_sim::WarpVote(tl_sim::kBallotSync, 2, mask, predicate, file, line));
}
/*! \brief The lanes of `mask` whose `value` has the caller's bits: defined for 32-lane warps only, as a ballot. */
template <class T>
inline unsigned __match_any_sync(unsigned mask, T value, const char* file = __builtin_FILE(),
                                 int line = __builtin_LINE()) {
  return static_cast<unsigned>(tl_sim::WarpMatch(tl_sim::kMatchAny, 0, mask, value, file, line));
}
/*! \brief `mask` if every lane of it holds the same `value` bits (and *pred = 1), else 0 (and *pred = 0). */
template <class T>
inline unsigned __match_all_sync(unsigned mask, T value, int* pred, const char* file = __builtin_FILE(),
                                 int line = __builtin_LINE()) {
  const unsigned result = static_cast<unsigned>(tl_sim::WarpMatch(tl_sim::kMatchAll, 1, mask, value, file, line));
  *pred = result != 0;
  return result;
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  tl_sim::WarpCollective(tl_sim::kSyncWarp, mask, tl_sim::CollectiveSlot{}, file, line);
}

/*!
 * \brief Bit i set when every existing lane it names (see the mask rule above) is active. Lanes run one after
 *        another here, so "active" takes the lockstep view: a lane is active unless it exited before reaching as
 *        many __activemask calls as the caller (a lane that ran ahead through this call and then exited was here).
 */
inline unsigned __activemask() {
  tl_sim::BlockRunner& block = tl_sim::CurrentBlock("__activemask");
  tl_sim::Fiber& self = block.current();
  const uint32_t call = ++self.activemask_calls;
  const uint32_t warp = block.GroupIndex(tl_sim::Group::kWarp, self.linear);
  const uint32_t base = block.GroupBase(tl_sim::Group::kWarp, warp);
  const uint32_t extent = block.GroupExtent(tl_sim::Group::kWarp, warp);
  unsigned mask = 0;
  for (uint32_t bit = 0; bit < 32 && bit < extent; ++bit) {
    bool live = true;
    for (uint32_t lane = bit; lane < extent; lane += 32) {
      const tl_sim::Fiber& f = block.fiber(base + lane);
      live = live && (f.state != tl_sim::FiberState::kExited || f.activemask_calls >= call);
    }
    if (live) mask |= 1u << bit;
  }
  return mask;
}
#pragma GCC visibility pop
