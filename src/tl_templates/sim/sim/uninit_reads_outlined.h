/*!
 * \file tl_templates/sim/sim/uninit_reads_outlined.h
 * \brief The body of uninit_reads.h's WrittenShadow: the shared-memory shadow's mapping, marks and model reads,
 *        and the per-thread record of unwritten fragment/local loads. Compiled once into the simulator runtime (and
 *        into a kernel library that carries its own simulator), never in a kernel library that links the runtime
 *        (visibility.h, TL_SIM_OUTLINED). Included by uninit_reads.h only.
 */
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "uninit_reads.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

// Not TL_SIM_OUTLINED: gcc ignores an asm name on a destructor; the class is hidden, so each library's copy stays
// its own.
inline WrittenShadow::~WrittenShadow() {
  if (serials_ != nullptr) munmap(serials_, bytes_ * sizeof(uint32_t));
  if (nibbles_ != nullptr) munmap(nibbles_, 2 * bytes_ * sizeof(uint32_t));
}

TL_SIM_OUTLINED_DEF void WrittenShadow::NoteLocalHandOut(uint32_t thread, const void* base, size_t bytes,
                                                       const char* space, const char* name, int line) {
  if (thread >= hand_outs_.size()) hand_outs_.resize(thread + 1);
  HandOuts& h = hand_outs_[thread];
  if (h.serial != serial_ || h.line != line) h = HandOuts{serial_, line, 0, {}};
  const auto* b = static_cast<const unsigned char*>(base);
  int slot = 0;
  while (slot < h.count && h.arrays[slot].base != b) ++slot;
  if (slot == kHandOutsPerLine) return;  // more arrays than a call takes: the later ones go unnamed
  h.arrays[slot] = LocalArray{b, bytes, space, name};
  if (slot == h.count) ++h.count;
}

TL_SIM_OUTLINED_DEF const char* WrittenShadow::FindLocal(uint32_t thread, const void* p, const char** space,
                                                       int64_t* byte_offset, int* line) const {
  if (thread >= hand_outs_.size() || hand_outs_[thread].serial != serial_) return nullptr;
  const HandOuts& h = hand_outs_[thread];
  const auto* a = static_cast<const unsigned char*>(p);
  for (int i = 0; i < h.count; ++i) {
    const LocalArray& array = h.arrays[i];
    if (a < array.base || a >= array.base + array.bytes) continue;
    *space = array.space;
    *byte_offset = a - array.base;
    *line = h.line;
    return array.name;
  }
  return nullptr;
}

TL_SIM_OUTLINED_DEF bool WrittenShadow::Cover(const unsigned char* base, size_t bytes) {
  void* p = mmap(nullptr, bytes * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  serials_ = static_cast<uint32_t*>(p);
  base_ = base;
  bytes_ = bytes;
  return true;
}

TL_SIM_OUTLINED_DEF void WrittenShadow::NoteLocalRead(uint32_t thread, const char* space, const char* name,
                                                      int64_t element, int line) {
  if (thread >= local_reads_.size()) local_reads_.resize(thread + 1);
  LocalRead& r = local_reads_[thread];
  if (r.serial == serial_) return;
  r = LocalRead{serial_, space, name, element, line};
}

TL_SIM_OUTLINED_DEF void WrittenShadow::MarkWritten(const volatile void* address, size_t bytes, bool handed_out) {
  const auto* a = static_cast<const unsigned char*>(const_cast<const void*>(address));
  if (serials_ == nullptr || a < base_ || a + bytes > base_ + bytes_) return;
  uint32_t* s = serials_ + (a - base_);
  for (size_t i = 0; i < bytes; ++i)
    if (!handed_out) s[i] = serial_;
    else if (s[i] != serial_) s[i] = serial_ | kHandedOut;
}

TL_SIM_OUTLINED_DEF void WrittenShadow::NoteBuffer(const volatile void* data, size_t elem_bytes, int64_t lo,
                                                   int64_t hi, const char* name, int line) {
  const auto* base = static_cast<const unsigned char*>(const_cast<const void*>(data));
  Buffer* found = nullptr;
  for (Buffer& b : buffers_)
    if (b.base == base && b.name == name) found = &b;
  if (found == nullptr) {
    buffers_.push_back(Buffer{base, base + lo * static_cast<int64_t>(elem_bytes),
                              base + hi * static_cast<int64_t>(elem_bytes), elem_bytes, name, 0, 0, false});
    found = &buffers_.back();
  }
  if (found->handed == serial_) {  // marked once per block
    if (line != found->handed_line) found->handed_elsewhere = true;
    return;
  }
  found->handed = serial_;
  found->handed_line = line;
  found->handed_elsewhere = false;
  MarkWritten(found->begin, static_cast<size_t>(found->end - found->begin), true);
}

TL_SIM_OUTLINED_DEF void WrittenShadow::MarkNibbleWritten(const volatile void* byte, int odd) {
  const auto* a = static_cast<const unsigned char*>(const_cast<const void*>(byte));
  if (!Covers(a, 1)) return;
  if (nibbles_ == nullptr) {  // the first nibble store this worker sees
    void* p = mmap(nullptr, 2 * bytes_ * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {  // untracked: count the byte written, as any store would
      MarkWritten(a, 1);
      return;
    }
    nibbles_ = static_cast<uint32_t*>(p);
  }
  uint32_t* n = nibbles_ + 2 * (a - base_);
  n[odd ? 1 : 0] = serial_;
  if (n[odd ? 0 : 1] == serial_) serials_[a - base_] = serial_;  // both halves: the byte is written
}

TL_SIM_OUTLINED_DEF void WrittenShadow::CheckNibbleLoad(const volatile void* byte, int odd, const char* name,
                                                        int64_t offset, int line) {
  const auto* a = static_cast<const unsigned char*>(const_cast<const void*>(byte));
  if (!Covers(a, 1) || deferred_[0] != '\0') return;
  if (((*a >> (odd ? 4 : 0)) & 0xFu) != 0xFu || Written(a, 1)) return;
  if (nibbles_ != nullptr && nibbles_[2 * (a - base_) + (odd ? 1 : 0)] == serial_) return;
  char why[160];
  std::snprintf(why, sizeof(why), "its %s nibble (4-bit element %lld), which no thread of this block has written",
                odd ? "high" : "low", static_cast<long long>(2 * offset + (odd ? 1 : 0)));
  Defer(why, name, offset, line);
}

TL_SIM_OUTLINED_DEF void WrittenShadow::CheckHalfWritten(const unsigned char* a, size_t bytes, const char* name,
                                                         int64_t element, int line) {
  if (deferred_[0] != '\0' || !Covers(a, bytes)) return;
  for (size_t i = 0; i < bytes; ++i) {
    const int missing = UnwrittenHalf(a + i, true);
    if (missing < 0) continue;
    char byte[32] = "";
    if (bytes > 1) std::snprintf(byte, sizeof(byte), "byte %zu's ", i);
    char why[200];
    std::snprintf(why, sizeof(why),
                  "whose %s%s nibble no thread of this block has written (a nibble store wrote only its %s one)", byte,
                  missing ? "high" : "low", missing ? "low" : "high");
    Defer(why, name, element, line);
    return;
  }
}

TL_SIM_OUTLINED_DEF void WrittenShadow::CheckModelRead(const void* address, size_t bytes, const char* reader) {
  const auto* a = static_cast<const unsigned char*>(address);
  if (serials_ == nullptr || a < base_ || a + bytes > base_ + bytes_) return;
  const bool half_written = nibbles_ != nullptr && [&] {
    for (size_t i = 0; i < bytes; ++i)
      if (UnwrittenHalf(a + i, false) >= 0) return true;
    return false;
  }();
  if ((!half_written && !IsPoison(a, bytes)) || Written(a, bytes, false) || deferred_[0] != '\0') return;
  const Buffer* buffer = nullptr;
  for (const Buffer& b : buffers_)  // the innermost (latest registered) buffer that holds the element
    if (a >= b.begin && a + bytes <= b.end) buffer = &b;
  // handed to templates at two lines or more: one of them may have written it through a pointer it derived
  if (buffer != nullptr && buffer->handed == serial_ && buffer->handed_elsewhere) return;
  const int line = g_thread.last_access_line;
  char why[200];
  std::snprintf(why, sizeof(why), "read by %s, which no thread of this block has written%s", reader,
                half_written ? " whole (a nibble store wrote only one half of a byte, the other holds the poison)" : "");
  if (buffer != nullptr) {
    Defer(why, buffer->name, (a - buffer->base) / static_cast<int64_t>(buffer->elem), line);
  } else {
    Defer(why, "shared memory (byte offset in its arena)", a - base_, line);
  }
}

}  // namespace tl_sim
#pragma GCC visibility pop
