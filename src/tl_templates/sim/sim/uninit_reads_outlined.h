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

TL_SIM_OUTLINED_DEF void WrittenShadow::CheckModelRead(const void* address, size_t bytes, const char* reader) {
  const auto* a = static_cast<const unsigned char*>(address);
  if (serials_ == nullptr || a < base_ || a + bytes > base_ + bytes_) return;
  if (!IsPoison(a, bytes) || Written(a, bytes, false) || deferred_[0] != '\0') return;
  const Buffer* buffer = nullptr;
  for (const Buffer& b : buffers_)  // the innermost (latest registered) buffer that holds the element
    if (a >= b.begin && a + bytes <= b.end) buffer = &b;
  // handed to templates at two lines or more: one of them may have written it through a pointer it derived
  if (buffer != nullptr && buffer->handed == serial_ && buffer->handed_elsewhere) return;
  const int line = g_thread.last_access_line;
  char why[160];
  std::snprintf(why, sizeof(why), "read by %s, which no thread of this block has written", reader);
  if (buffer != nullptr) {
    Defer(why, buffer->name, (a - buffer->base) / static_cast<int64_t>(buffer->elem), line);
  } else {
    Defer(why, "shared memory (byte offset in its arena)", a - base_, line);
  }
}

}  // namespace tl_sim
#pragma GCC visibility pop
