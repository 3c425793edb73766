/*!
 * \file tl_templates/sim/sim/poisoned_globals.h
 * \brief Checked mode's detector of uninitialised global reads: a load of an element of a global buffer that the
 *        launcher poisoned (an output or a `T.alloc_global` workspace, allocated for the call and filled with
 *        kPoisonByte) which no access has written yet ends the launch naming the buffer, the element, the line of
 *        the generated source and the thread.
 *
 * Only the ranges the launcher registered are checked (tl_sim_register_poisoned, exported by every simulator
 * kernel library; the launcher calls it before `call_packed` and clears it after): an input may hold any bytes,
 * -1 and NaN included. The registration lives for the whole call, so a later kernel of the same call reads what
 * an earlier one wrote. Per registered byte, a shadow byte records a write; every write path marks it: the
 * generated code's stores and address-taking accesses (access_checks.h: an address handed to a template, an
 * atomic for one, may be written through) and TME stores as they land (tme.h). A load of an element that still
 * holds the poison pattern and none of whose bytes were marked is the error. As for shared memory
 * (uninit_reads.h), a template that writes through a pointer it derived itself is not seen: it can only hide an
 * error, or report one when it wrote exactly the poison bytes (an int -1 or the all-ones NaN).
 *
 * Across launches: after a checked call the launcher reads back, per range, which bytes still hold the poison and
 * were never written (tl_sim_poisoned_unwritten) and keeps them with the tensor it returned; when that tensor comes
 * back as an input of a later call, it registers the range again with those bytes as its starting shadow and a
 * text naming the kernel that allocated it (launcher/carried_poison.py), so a read of a tail the first kernel
 * left unwritten is the same error in the second.
 *
 * Blocks of a launch run on several OS threads at once: the shadow's bytes are written with relaxed atomics.
 * Checked mode only: default mode never sets OsThreadState::global_shadow, and the hooks test it only inside
 * checked mode's branch.
 */
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "config.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief The global ranges the launcher poisoned for one call, and per byte whether the call wrote it. */
class PoisonedGlobals {
 public:
  static constexpr int kMaxRanges = 64;

  PoisonedGlobals() = default;
  PoisonedGlobals(const PoisonedGlobals&) = delete;
  PoisonedGlobals& operator=(const PoisonedGlobals&) = delete;
  ~PoisonedGlobals() { Clear(); }

  /*! \brief The launcher poisoned [begins[i], begins[i] + bytes[i]) for the coming call (n = 0: none). Ranges
   *         beyond kMaxRanges go unchecked. `unwritten[i]`: null for a range allocated for this call (nothing
   *         written yet); else one byte per byte of the range, nonzero where an earlier call left the poison
   *         unwritten (the pointer must stay valid through the call), with `origins[i]` naming that call. Range i
   *         keeps its index for Unwritten's readback whether or not it is kept. */
  void Set(const void* const* begins, const uint64_t* bytes, const unsigned char* const* unwritten,
           const char* const* origins, int n) {
    Clear();
    for (int i = 0; i < n && count_ < kMaxRanges; ++i) {
      const bool carried = unwritten != nullptr && unwritten[i] != nullptr;
      const bool valid = begins[i] != nullptr && bytes[i] > 0;
      ranges_[count_++] = Range{static_cast<const unsigned char*>(begins[i]), valid ? static_cast<size_t>(bytes[i]) : 0,
                                nullptr, nullptr, carried ? unwritten[i] : nullptr,
                                carried && origins != nullptr ? origins[i] : nullptr};
    }
  }

  /*! \brief Whether any range is registered. */
  bool Any() const {
    for (int i = 0; i < count_; ++i)
      if (ranges_[i].bytes > 0) return true;
    return false;
  }

  /*! \brief A checked launch is about to run: map the shadow of every range that lacks one (untouched pages cost
   *         nothing); a range whose shadow cannot be mapped goes unchecked. */
  void Prepare() {
    for (int i = 0; i < count_; ++i) {
      Range& r = ranges_[i];
      if (r.written != nullptr || r.bytes == 0) continue;
      void* p = mmap(nullptr, r.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) continue;
      r.written = static_cast<unsigned char*>(p);
      if (r.carried != nullptr)  // what the earlier call left unwritten stays so; every other byte counts written
        for (size_t b = 0; b < r.bytes; ++b) r.written[b] = r.carried[b] == 0;
      if (r.writer != nullptr) continue;
      void* w = mmap(nullptr, r.bytes * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (w != MAP_FAILED) r.writer = static_cast<uint64_t*>(w);
    }
  }

  /*! \brief After the call: into `out` (range i's bytes long; null: only count), 1 for each byte of range i that
   *         still holds the poison and no access wrote, 0 elsewhere; returns how many there are, or -1 when the call
   *         was not checked (no shadow: nothing is known) or i is not a kept range. */
  int64_t UnwrittenBytes(int i, unsigned char* out) const {
    if (i < 0 || i >= count_ || ranges_[i].written == nullptr) return -1;
    const Range& r = ranges_[i];
    int64_t count = 0;
    for (size_t b = 0; b < r.bytes; ++b) {
      const bool unwritten = r.begin[b] == kPoisonByte && __atomic_load_n(&r.written[b], __ATOMIC_RELAXED) == 0;
      if (out != nullptr) out[b] = unwritten;
      count += unwritten;
    }
    return count;
  }

  /*! \brief Inter-block publication (grid_flags.h): who last wrote [address, address + bytes), as `stamp` (the
   *         writing thread, and how many times it had published before: GridFlags::Stamp). */
  void MarkWriter(const volatile void* address, size_t bytes, uint64_t stamp) {
    const auto* a = static_cast<const unsigned char*>(const_cast<const void*>(address));
    for (int i = 0; i < count_; ++i) {
      const Range& r = ranges_[i];
      if (r.writer == nullptr || a + bytes <= r.begin || a >= r.begin + r.bytes) continue;
      const size_t from = a > r.begin ? static_cast<size_t>(a - r.begin) : 0;
      const size_t to = std::min(static_cast<size_t>(a + bytes - r.begin), r.bytes);
      for (size_t b = from; b < to; ++b) __atomic_store_n(&r.writer[b], stamp, __ATOMIC_RELAXED);
    }
  }

  /*! \brief The stamp of the last write of the byte at `address` (0: none recorded). */
  uint64_t Writer(const volatile void* address) const {
    const auto* a = static_cast<const unsigned char*>(const_cast<const void*>(address));
    for (int i = 0; i < count_; ++i) {
      const Range& r = ranges_[i];
      if (r.writer == nullptr || a < r.begin || a >= r.begin + r.bytes) continue;
      return __atomic_load_n(&r.writer[a - r.begin], __ATOMIC_RELAXED);
    }
    return 0;
  }

  /*! \brief The running thread wrote (or may write) [address, address + bytes). */
  void MarkWritten(const volatile void* address, size_t bytes) {
    const auto* a = static_cast<const unsigned char*>(const_cast<const void*>(address));
    for (int i = 0; i < count_; ++i) {
      const Range& r = ranges_[i];
      if (r.written == nullptr || a + bytes <= r.begin || a >= r.begin + r.bytes) continue;
      const size_t from = a > r.begin ? static_cast<size_t>(a - r.begin) : 0;
      const size_t to = std::min(static_cast<size_t>(a + bytes - r.begin), r.bytes);
      for (size_t b = from; b < to; ++b) __atomic_store_n(&r.written[b], 1, __ATOMIC_RELAXED);
    }
  }

  /*! \brief When the element of `bytes` bytes at `address` lies in a poisoned range, still holds the poison and
   *         none of its bytes was written (by this call, or by the earlier ones of a carried range): what the
   *         report says of it after "which" (where the poison came from). Else null. */
  const char* Unwritten(const volatile void* address, size_t bytes) const {
    const auto* a = static_cast<const unsigned char*>(const_cast<const void*>(address));
    for (int i = 0; i < count_; ++i) {
      const Range& r = ranges_[i];
      if (r.written == nullptr || a < r.begin || a + bytes > r.begin + r.bytes) continue;
      for (size_t b = 0; b < bytes; ++b)
        if (a[b] != kPoisonByte || __atomic_load_n(&r.written[a - r.begin + b], __ATOMIC_RELAXED) != 0)
          return nullptr;
      return r.origin != nullptr ? r.origin
                                 : "which the launcher poisoned (an output or workspace allocated for this call) and "
                                   "no thread has written yet";
    }
    return nullptr;
  }

 private:
  void Clear() {
    for (int i = 0; i < count_; ++i) {
      if (ranges_[i].written != nullptr) munmap(ranges_[i].written, ranges_[i].bytes);
      if (ranges_[i].writer != nullptr) munmap(ranges_[i].writer, ranges_[i].bytes * sizeof(uint64_t));
    }
    count_ = 0;
  }

  struct Range {
    const unsigned char* begin;
    size_t bytes;                   // 0: not checked (a null or empty range), kept for its index
    unsigned char* written;         // per byte, nonzero once written; null until Prepare
    uint64_t* writer;               // per byte, the last write's GridFlags stamp (inter-block publication); null
                                    // until Prepare
    const unsigned char* carried;   // an earlier call's unwritten bytes (nonzero: unwritten); null: a fresh range
    const char* origin;             // the report's text for a carried range ("which kernel ... allocated ...")
  };
  Range ranges_[kMaxRanges];
  int count_ = 0;
};

}  // namespace tl_sim
#pragma GCC visibility pop
