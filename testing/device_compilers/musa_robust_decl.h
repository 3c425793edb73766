/*!
 * \file testing/device_compilers/musa_robust_decl.h
 * \brief musa_robust.h for the device-compiler check: the robust descriptors (`__musa::robust_ptr` and the
 *        descriptor types it hands out, the simulator's own declarations) and the robust built-ins that take them,
 *        declared as MUSA_FACTS.md and the simulator (src/tl_templates/sim/async_copy.h) give them. The built-ins
 *        exist in the device pass only.
 */
#pragma once

#include <stdint.h>

#include "tl_templates/sim/decl/musa_robust_decl.h"  // the descriptor types, one source with the simulator

#if defined(__CUDA_ARCH__)
TL_SHIM_BUILTIN void __musa_memcpy_g2s_robust_v4(void __attribute__((address_space(3)))* dst,
                                                 const void __attribute__((address_space(1)))* src, uint32_t bytes,
                                                 __musa::robust_v4_addr_t desc, int prefetch) TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_memcpy_g2s_robust(void __attribute__((address_space(3)))* dst,
                                              const void __attribute__((address_space(1)))* src, uint32_t bytes,
                                              __musa::robust_addr_t desc, int prefetch) TL_SHIM_BUILTIN_BODY
#define TL_SHIM_ROBUST_LOADS(S, T)                                                                              \
  TL_SHIM_BUILTIN T __musa_ld_v4_robust_##S(const void* addr, __musa::robust_v4_addr_t desc, int prefetch)     \
      TL_SHIM_BUILTIN_BODY TL_SHIM_BUILTIN T __musa_ld_robust_##S(const void* addr, __musa::robust_addr_t desc) \
          TL_SHIM_BUILTIN_BODY
TL_SHIM_ROBUST_LOADS(i8, int8_t)
TL_SHIM_ROBUST_LOADS(i16, int16_t)
TL_SHIM_ROBUST_LOADS(i32, int32_t)
TL_SHIM_ROBUST_LOADS(i64, int64_t)
TL_SHIM_ROBUST_LOADS(v3i32, v3i32_t)
TL_SHIM_ROBUST_LOADS(v4i32, v4i32_t)
TL_SHIM_ROBUST_LOADS(v8i32, v8i32_t)
TL_SHIM_ROBUST_LOADS(v16i32, v16i32_t)
TL_SHIM_ROBUST_LOADS(v32i32, v32i32_t)
#undef TL_SHIM_ROBUST_LOADS
#endif  // __CUDA_ARCH__
