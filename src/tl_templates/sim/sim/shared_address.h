/*!
 * \file tl_templates/sim/sim/shared_address.h
 * \brief Shared-memory addresses: `__cvta_generic_to_shared` and the bounds of the block's dynamic arena.
 *
 * Generated code is compiled with `-mtgpu-alloc-shared-memory-from-zero=1` (MUSA_FACTS.md, Toolchain), so the
 * block's shared window starts at address 0, and TileLang places every shared buffer in the one dynamic buffer: a
 * shared address is a byte offset into `buf_dyn_shmem`. Device code obtains it with CUDA's
 * `__cvta_generic_to_shared(ptr)` truncated to 32 bits (mutlass include/mute/arch/util.hpp `cast_smem_ptr_to_uint`,
 * TileLang's MUSA port tl_templates/musa/common.h), e.g. for an SQMMA descriptor's start address. In the simulator
 * static `__shared__` variables live outside that buffer and have no shared address: converting one fails.
 */
#pragma once

#include <cstddef>
#include <cstdint>

#include "config.h"
#include "runtime_types.h"
#include "scheduler.h"
#include "shared_memory.h"
#include "thread_state.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief Bytes of the running block's dynamic shared memory: the addresses [0, size) are valid. */
inline size_t SharedArenaBytes() { return g_thread.dynamic_smem; }

/*! \brief The arena's bytes at shared address `address`. */
inline unsigned char* SharedArenaAt(uint32_t address) { return buf_dyn_shmem + address; }

}  // namespace tl_sim

/*! \brief The shared-window address of `ptr`, which must point into (or just past) the dynamic shared buffer. */
inline size_t __cvta_generic_to_shared(const void* ptr, const char* file = __builtin_FILE(),
                                       int line = __builtin_LINE()) {
  const auto* p = static_cast<const unsigned char*>(ptr);
  const unsigned char* base = buf_dyn_shmem;
  if (p < base || p > base + tl_sim::kDynamicSmemCapacity)
    tl_sim::CurrentBlock("__cvta_generic_to_shared")
        .Fail(musaErrorLaunchFailure,
              "__cvta_generic_to_shared (%s:%d): %p is not in the dynamic shared memory buffer buf_dyn_shmem, the "
              "only shared memory the simulator gives shared addresses to",
              tl_sim::SourceName(file), line, ptr);
  return static_cast<size_t>(p - base);
}
#pragma GCC visibility pop
