/*!
 * \file tl_templates/sim/sim/mma_mp22.h
 * \brief mp_22 warp MMA on 128-lane warps: `__musa_fmma_m32n32k16_mma` (f16), `__musa_bfmma_m32n32k16_mma` (bf16),
 *        `__musa_tfmma_m32n32k8_mma` (tf32) and `__musa_imma_m32n32k32_mma` (s8 -> s32), D = A * B + C on a 32x32
 *        tile held by the registers of one warp, as a warp collective (warp_mma.h).
 *
 * Prototype, as device code calls it (mutlass include/mute/arch/mma_mp22.hpp, `MP22_32x32x*::fma`, which passes
 * `int32_t*` / `int32_t const*` register arrays):
 *   void __musa_fmma_m32n32k16_mma(int32_t* d, const int32_t* a, const int32_t* b, const int32_t* c,
 *                                  int 0, int 0, int 0, int 0, int 1, int layout);
 *   layout 0..3 = TT, TN, NT, NN: bit 1 = A is M-major, bit 0 = B is K-major (MUSA_LAYOUTS.md section 0; mutlass's
 *   TT pairs A "Row" with B "Col"). mutlass passes 0, 0, 0, 0, 1 for arguments 5-9 of every form and their meaning
 *   is not public: the model requires exactly those values [I].
 * Registers per lane: A[2], B[2], C/D[8] 32-bit words. Layouts (MUSA_LAYOUTS.md section 2, checked against
 *   mutlass's MP22_32x16_Row/Col, MP22_32x8_*, MP22_32x32_* and MP22_32x32_32b), with t = lane in [0, 128):
 *   16-bit (R x K = 32 x 16), v = v0 + 2*v1:  K-major r = ((t>>2)&15) + 16*(v>>1), k = 2*(t&3) + (v&1) + 8*(t>>6);
 *                                            MN-major r = 2*(t&7) + (v&1) + 16*(v>>1), k = t>>3;
 *   tf32 (32 x 8):                           K-major r = ((t>>2)&15) + 16*v, k = (t&3) + 4*(t>>6);
 *                                            MN-major r = (t&15) + 16*v, k = t>>4;
 *   s8 (32 x 32):                            K-major r = ((t>>2)&15) + 16*(v>>2), k = 4*(t&3) + (v&3) + 16*(t>>6);
 *                                            MN-major r = 4*(t&3) + (v&3) + 16*(v>>2), k = t>>2;
 *   C/D:  m = ((t>>3)&3) + 4*(t>>6) + 8*(v>>1),  n = (t&7) + 8*((t>>5)&1) + 16*(v&1).
 * The "wave32" shapes m16n16k16 and m8n32k16 (TileLang's port runs them on 32-lane groups, and the sources
 * disagree on their accumulator layout) are not modelled. Available on mp_22 only (mutlass: __MUSA_ARCH__ == 220).
 */
#pragma once

#include <cstdint>

#include "config.h"
#include "mma_numerics.h"
#include "runtime_types.h"
#include "scheduler.h"
#include "unavailable_builtin.h"
#include "warp_mma.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace mma {

inline void Mp22KMajor(uint32_t t, uint32_t v, uint32_t, uint32_t, uint32_t bits, uint32_t* r, uint32_t* k) {
  const uint32_t row = (t >> 2) & 15;
  if (bits == 16) {
    *r = row + 16 * (v >> 1);
    *k = 2 * (t & 3) + (v & 1) + 8 * (t >> 6);
  } else if (bits == 32) {
    *r = row + 16 * v;
    *k = (t & 3) + 4 * (t >> 6);
  } else {
    *r = row + 16 * (v >> 2);
    *k = 4 * (t & 3) + (v & 3) + 16 * (t >> 6);
  }
}

inline void Mp22MNMajor(uint32_t t, uint32_t v, uint32_t, uint32_t, uint32_t bits, uint32_t* r, uint32_t* k) {
  if (bits == 16) {
    *r = 2 * (t & 7) + (v & 1) + 16 * (v >> 1);
    *k = t >> 3;
  } else if (bits == 32) {
    *r = (t & 15) + 16 * v;
    *k = t >> 4;
  } else {
    *r = 4 * (t & 3) + (v & 3) + 16 * (v >> 2);
    *k = t >> 2;
  }
}

inline void Mp22Accumulator(uint32_t t, uint32_t v, uint32_t, uint32_t, uint32_t, uint32_t* m, uint32_t* n) {
  *m = ((t >> 3) & 3) + 4 * (t >> 6) + 8 * (v >> 1);
  *n = (t & 7) + 8 * ((t >> 5) & 1) + 16 * (v & 1);
}

inline void Mp22Mma(const Collective& op, Elem elem, uint32_t k, int32_t* d, const int32_t* a, const int32_t* b,
                    const int32_t* c, int r0, int r1, int r2, int r3, int flag, int layout, const char* file,
                    int line) {
  BlockRunner& block = CurrentBlock(op.name);
  if (r0 != 0 || r1 != 0 || r2 != 0 || r3 != 0 || flag != 1)
    block.Fail(musaErrorIllegalInstruction,
               "%s (%s:%d): arguments 5-9 must be 0, 0, 0, 0, 1 as mutlass passes them (got %d, %d, %d, %d, %d); "
               "other values are not modelled",
               op.name, SourceName(file), line, r0, r1, r2, r3, flag);
  if (layout < 0 || layout > 3)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): layout %d is not 0 (TT), 1 (TN), 2 (NT) or 3 (NN)",
               op.name, SourceName(file), line, layout);
  WarpMmaCall call;
  call.d = d;
  call.a = a;
  call.b = b;
  call.c = c;
  const int args[] = {r0, r1, r2, r3, flag, layout};
  for (int i = 0; i < 6; ++i) call.args[i] = args[i];
  call.num_args = 6;
  call.file = file;
  call.line = line;
  call.form.m = 32;
  call.form.n = 32;
  call.form.k = k;
  call.form.types = {elem, elem};
  call.form.a_map = (layout & 2) != 0 ? &Mp22MNMajor : &Mp22KMajor;
  call.form.b_map = (layout & 1) != 0 ? &Mp22KMajor : &Mp22MNMajor;
  call.form.c_map = &Mp22Accumulator;
  RunWarpMma(op, call);
}

}  // namespace mma
}  // namespace tl_sim

#if __MUSA_ARCH__ == 220
#define TL_SIM_MP22_MMA_BUILTIN(NAME, ELEM, K)                                                                         \
  namespace tl_sim {                                                                                                   \
  namespace mma {                                                                                                      \
  inline constexpr Collective kMp22Op_##NAME{#NAME, &ExchangeWarpMma};                                                 \
  }                                                                                                                    \
  }                                                                                                                    \
  inline void NAME(int32_t* d, const int32_t* a, const int32_t* b, const int32_t* c, int r0, int r1, int r2, int r3,   \
                   int flag, int layout, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {           \
    tl_sim::mma::Mp22Mma(tl_sim::mma::kMp22Op_##NAME, tl_sim::mma::Elem::ELEM, K, d, a, b, c, r0, r1, r2, r3, flag,    \
                         layout, file, line);                                                                          \
  }
#else
#define TL_SIM_MP22_MMA_BUILTIN(NAME, ELEM, K) TL_SIM_UNAVAILABLE_BUILTIN(NAME, "mp_22 (MMA on 128-lane warps)")
#endif

TL_SIM_MP22_MMA_BUILTIN(__musa_fmma_m32n32k16_mma, kF16, 16)
TL_SIM_MP22_MMA_BUILTIN(__musa_bfmma_m32n32k16_mma, kBF16, 16)
TL_SIM_MP22_MMA_BUILTIN(__musa_tfmma_m32n32k8_mma, kTF32, 8)
TL_SIM_MP22_MMA_BUILTIN(__musa_imma_m32n32k32_mma, kS8, 32)

#undef TL_SIM_MP22_MMA_BUILTIN
#pragma GCC visibility pop
