/*!
 * \file tl_templates/sim/sim/shared_memory.h
 * \brief Shared memory: the dynamic buffer, and the poison fill of all shared memory at the start of each block.
 *
 * `__shared__` is `thread_local` (keywords.h), so every shared variable of the kernel's library, static or dynamic,
 * lives in the library's TLS block of the OS thread that runs the block. The only other thread_local of the
 * library is the simulator's own OsThreadState (thread_state.h), so the poison covers the whole TLS block except
 * that struct, and except the part of the dynamic buffer beyond what the launch asked for (to keep the fill cheap).
 * The block is located once per OS thread with dl_iterate_phdr (glibc >= 2.25 reports each module's TLS block);
 * if it cannot be found only the dynamic buffer is poisoned.
 *
 * The dynamic buffer must be declared by the kernel as `extern __shared__ ... buf_dyn_shmem[]`, the name TileLang's
 * shared-memory merging gives it; it is 4096-aligned like the device's (shared memory addresses start at 0).
 */
#pragma once

#include <link.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "config.h"
#include "thread_state.h"

#pragma GCC visibility push(hidden)
alignas(4096) inline thread_local unsigned char buf_dyn_shmem[tl_sim::kDynamicSmemCapacity];

namespace tl_sim {

struct TlsSearch {
  const void* key;
  unsigned char* begin;
  size_t size;
};

inline int FindTlsBlock(dl_phdr_info* info, size_t, void* data) {
  auto* search = static_cast<TlsSearch*>(data);
  if (info->dlpi_tls_data == nullptr) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_TLS) continue;
    auto* begin = static_cast<unsigned char*>(info->dlpi_tls_data);
    size_t size = info->dlpi_phdr[i].p_memsz;
    auto* key = static_cast<const unsigned char*>(search->key);
    if (key >= begin && key < begin + size) {
      search->begin = begin;
      search->size = size;
      return 1;
    }
  }
  return 0;
}

/*! \brief Find (once per OS thread and kernel library) the TLS block that holds `dyn`, the library's dynamic
 *         shared memory, i.e. all of the library's shared memory. */
inline void LocateTlsBlock(OsThreadState& t, unsigned char* dyn) {
  if (t.tls_key == dyn) return;
  TlsSearch search{dyn, nullptr, 0};
  dl_iterate_phdr(&FindTlsBlock, &search);
  t.tls_begin = search.begin;
  t.tls_size = search.size;
  t.tls_key = dyn;
}

/*! \brief This OS thread's instance of this library's dynamic shared memory (KernelCall::shared_memory). */
inline unsigned char* LibrarySharedMemory() { return buf_dyn_shmem; }

/*! \brief Fill [begin, end) with poison, skipping the sorted, disjoint `holes`. */
inline void PoisonExcept(unsigned char* begin, unsigned char* end, const unsigned char* const (*holes)[2], int n) {
  unsigned char* p = begin;
  for (int i = 0; i < n && p < end; ++i) {
    unsigned char* hole_begin = const_cast<unsigned char*>(holes[i][0]);
    unsigned char* hole_end = const_cast<unsigned char*>(holes[i][1]);
    if (hole_begin > p) std::memset(p, kPoisonByte, static_cast<size_t>((hole_begin < end ? hole_begin : end) - p));
    if (hole_end > p) p = hole_end;
  }
  if (p < end) std::memset(p, kPoisonByte, static_cast<size_t>(end - p));
}

/*! \brief Poison this OS thread's shared memory of the kernel library whose dynamic shared memory is `dyn` before a
 *         block runs, dynamic part up to `dynamic_bytes`. */
inline void PoisonSharedMemory(unsigned char* dyn, size_t dynamic_bytes) {
  OsThreadState& t = g_thread;
  LocateTlsBlock(t, dyn);
  if (t.tls_begin == nullptr) {
    std::memset(dyn, kPoisonByte, dynamic_bytes);
    return;
  }
  const auto* state = reinterpret_cast<const unsigned char*>(&t);
  const unsigned char* holes[2][2] = {{state, state + sizeof(OsThreadState)},
                                      {dyn + dynamic_bytes, dyn + kDynamicSmemCapacity}};
  if (holes[1][0] < holes[0][0]) {
    std::swap(holes[0][0], holes[1][0]);
    std::swap(holes[0][1], holes[1][1]);
  }
  PoisonExcept(t.tls_begin, t.tls_begin + t.tls_size, holes, 2);
}

}  // namespace tl_sim
#pragma GCC visibility pop
