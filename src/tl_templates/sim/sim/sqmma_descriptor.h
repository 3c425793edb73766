/*!
 * \file tl_templates/sim/sim/sqmma_descriptor.h
 * \brief The mp_31 SQMMA shared-memory descriptor and the addresses an operand reads through it.
 *
 * Encoding (32 bits; mutlass include/mute/arch/mma_mp31_desc.hpp `SqmmaDescriptor`, MUSA_LAYOUTS.md section 3):
 *   bits [0, 18)   start byte address in the shared window
 *   bits [18, 21)  leading stride LS = 4 << code bytes, code 1..6 = 8..256 B (the stride of the strided mode)
 *   bits [21, 23)  swizzle granularity SG: 0 none, 1 = 16 B, 2 = 32 B, 3 = 64 B
 *   bits [23, 32)  unused: the model requires them to be 0 [I].
 * An R x K operand (A: R = M, B: R = N) with e-byte elements reads element (r, k) at [I for the hardware's walk]
 *   K-major   a = start + r * LS + k * e      (contiguous along K, K * e <= 256)
 *   MN-major  a = start + r * e + k * LS      (contiguous along R, R * e <= 256)
 * and the swizzle applies to that absolute address with a fixed 256-byte line:
 *   phys = a ^ (((a >> 8) & (256 / SG - 1)) << log2(SG)).
 * Walking K or atoms means adding unswizzled byte offsets to the start address.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "swizzle.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace sqmma {

inline constexpr uint32_t kSwizzleLineBytes = 256;
inline constexpr uint32_t kStartAddressBits = 18;
// Every canonical start (tile bases, K steps of 32 B, atom steps) is 16-byte aligned; the hardware's exact
// requirement is not public [I].
inline constexpr uint32_t kStartAlignment = 16;

struct Descriptor {
  uint32_t raw = 0;
  uint32_t start = 0;           // byte address in the shared window
  uint32_t leading_stride = 0;  // bytes
  uint32_t swizzle = 0;         // granularity in bytes; 0 = none
};

/*! \brief Decode `raw`; on an invalid encoding return false and describe it in `why`. */
inline bool DecodeDescriptor(uint32_t raw, Descriptor* out, char* why, size_t why_size) {
  const uint32_t start = raw & ((1u << kStartAddressBits) - 1);
  const uint32_t stride_code = (raw >> 18) & 7u;
  const uint32_t swizzle_code = (raw >> 21) & 3u;
  if ((raw >> 23) != 0) {
    std::snprintf(why, why_size, "bits 23-31 are 0x%x; only bits 0-22 are defined and the rest must be 0",
                  raw >> 23);
    return false;
  }
  if (stride_code < 1 || stride_code > 6) {
    std::snprintf(why, why_size, "leading stride code %u is not 1..6 (8 to 256 bytes)", stride_code);
    return false;
  }
  if (start % kStartAlignment != 0) {
    std::snprintf(why, why_size, "start address %u is not a multiple of %u bytes", start, kStartAlignment);
    return false;
  }
  out->raw = raw;
  out->start = start;
  out->leading_stride = 4u << stride_code;
  out->swizzle = swizzle_code == 0 ? 0 : 8u << swizzle_code;
  return true;
}

/*! \brief The swizzled (physical) byte address of unswizzled address `a`, granularity `sg` bytes (0 = none). */
inline uint32_t SwizzleAddress(uint32_t a, uint32_t sg) {
  return SwizzledAddress(a, sg, kSwizzleLineBytes, kSwizzleLineBytes);  // the copy engine's, stride = line = 256 B
}

/*! \brief The unswizzled byte address of element (r, k) of an operand read through `d`. */
inline uint64_t OperandAddress(const Descriptor& d, bool k_major, uint32_t r, uint32_t k, uint32_t elem_bytes) {
  return k_major ? uint64_t{d.start} + uint64_t{r} * d.leading_stride + uint64_t{k} * elem_bytes
                 : uint64_t{d.start} + uint64_t{r} * elem_bytes + uint64_t{k} * d.leading_stride;
}

}  // namespace sqmma
}  // namespace tl_sim
#pragma GCC visibility pop
