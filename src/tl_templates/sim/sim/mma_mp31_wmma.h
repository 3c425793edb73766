/*!
 * \file tl_templates/sim/sim/mma_mp31_wmma.h
 * \brief mp_31 warp WMMA (`__musa_wmma_m16n8k4_mma` ... `__musa_wmma_m16n16k64_mma`): D = A * B + C on the
 *        registers of one 32-lane warp, as a warp collective (warp_mma.h).
 *
 * Prototype, as device code calls it (mutlass include/mute/arch/mma_mp31.hpp, `MP31_*::fma`, which passes
 * `int32_t*` / `int32_t const*` register arrays; TileLang's MUSA port calls the same 11-argument form):
 *   void __musa_wmma_mMnNkK_mma(int32_t* d, const int32_t* a, const int32_t* b, const int32_t* c,
 *                               int 0, int 0, int 0, int sat, int is_signed, int layout_num, int mma_type);
 *   layout_num = ((tnspA << 1) | tnspB) ^ 1 (tnsp 0 = K-major, 1 = MN-major), is_signed = 1 for S8S8 only,
 *   mma_type = mutlass's TceABDtype code (mma_numerics.h). Arguments 5-7 are 0 in every known caller and their
 *   meaning is not public, and saturation (8th) is not modelled: the model requires all four to be 0 [I].
 * Shapes and formats (mutlass's MP31_MxNxK atoms): m16n8k4 tf32; m16n8k8 f16/bf16/tf32; m16n8k16 and m8n16k16
 *   f16/bf16/8-bit; m16n16k16 f16/bf16/tf32/8-bit; m16n16k32 f16/bf16/8-bit; m16n16k64 8-bit. 8-bit = s8, u8, e4m3,
 *   e5m2 and the two mixed fp8 codes. Each lane holds M*K*bits/1024 words of A, N*K*bits/1024 of B, M*N/32 of C/D.
 * Register layouts (MUSA_LAYOUTS.md section 1, checked against mutlass's MP31_MxK / MP31_MxN layouts), with
 *   t = lane, p = 32 / bits:
 *   K-major operand, v = v0 + p*v1 + p*(K/(4p))*v2:        r = t/4 + 8*v2,          k = p*(t%4) + v0 + 4p*v1;
 *   MN-major operand, t = t0 + (bits/4)*t1, v = v0 + p*v1 + p*(R/8)*v2:  r = p*t0 + v0 + 8*v1,  k = t1 + (128/bits)*v2;
 *   C/D, v = v0 + (N/8)*v1:                                 m = t/8 + 4*v1,          n = t%8 + 8*v0.
 * Available on mp_31 and mp_32 (mutlass enables them for __MUSA_ARCH__ == 310; mp_32 is "like mp_31" [I]).
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

inline void Mp31KMajor(uint32_t t, uint32_t v, uint32_t, uint32_t depth, uint32_t bits, uint32_t* r, uint32_t* k) {
  const uint32_t p = 32 / bits, k_blocks = depth / (4 * p);
  const uint32_t v0 = v % p, v1 = v / p % k_blocks, v2 = v / (p * k_blocks);
  *r = t / 4 + 8 * v2;
  *k = p * (t % 4) + v0 + 4 * p * v1;
}

inline void Mp31MNMajor(uint32_t t, uint32_t v, uint32_t rows, uint32_t, uint32_t bits, uint32_t* r, uint32_t* k) {
  const uint32_t p = 32 / bits, r_blocks = rows / 8;
  const uint32_t t0 = t % (bits / 4), t1 = t / (bits / 4);
  const uint32_t v0 = v % p, v1 = v / p % r_blocks, v2 = v / (p * r_blocks);
  *r = p * t0 + v0 + 8 * v1;
  *k = t1 + (128 / bits) * v2;
}

inline void Mp31Accumulator(uint32_t t, uint32_t v, uint32_t, uint32_t cols, uint32_t, uint32_t* m, uint32_t* n) {
  const uint32_t n_blocks = cols / 8;
  *m = t / 8 + 4 * (v / n_blocks);
  *n = t % 8 + 8 * (v % n_blocks);
}

/*! \brief One WMMA shape and the element widths it accepts. */
struct WmmaShape {
  uint32_t m, n, k;
  bool takes_16bit, takes_tf32, takes_8bit;
};

inline constexpr WmmaShape kWmma_m16n8k4{16, 8, 4, false, true, false};
inline constexpr WmmaShape kWmma_m16n8k8{16, 8, 8, true, true, false};
inline constexpr WmmaShape kWmma_m16n8k16{16, 8, 16, true, false, true};
inline constexpr WmmaShape kWmma_m8n16k16{8, 16, 16, true, false, true};
inline constexpr WmmaShape kWmma_m16n16k16{16, 16, 16, true, true, true};
inline constexpr WmmaShape kWmma_m16n16k32{16, 16, 32, true, false, true};
inline constexpr WmmaShape kWmma_m16n16k64{16, 16, 64, false, false, true};

inline const char* WmmaFormats(const WmmaShape& s) {
  if (s.takes_16bit && s.takes_tf32 && s.takes_8bit) return "f16, bf16, tf32 and 8-bit";
  if (s.takes_16bit && s.takes_tf32) return "f16, bf16 and tf32";
  if (s.takes_16bit && s.takes_8bit) return "f16, bf16 and 8-bit";
  return s.takes_tf32 ? "tf32" : "8-bit";
}

/*! \brief Validate one lane's scalar arguments and resolve the instruction; a bad argument fails the launch. */
inline void ResolveWmma(const Collective& op, const WmmaShape& shape, WarpMmaCall& call) {
  BlockRunner& block = CurrentBlock(op.name);
  const char* where = SourceName(call.file);
  const int* args = call.args;  // 0, 0, 0, sat, is_signed, layout_num, mma_type
  if (args[0] != 0 || args[1] != 0 || args[2] != 0 || args[3] != 0)
    block.Fail(musaErrorIllegalInstruction,
               "%s (%s:%d): arguments 5-8 must be 0 (got %d, %d, %d, %d): their meaning is not public, and "
               "saturation (argument 8) is not modelled",
               op.name, where, call.line, args[0], args[1], args[2], args[3]);
  const int layout_num = args[5], mma_type = args[6];
  if (layout_num < 0 || layout_num > 3)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): layout_num %d is not ((tnspA << 1) | tnspB) ^ 1 in [0, 3]",
               op.name, where, call.line, layout_num);
  OperandTypes types;
  if (!DecodeMmaType(mma_type, &types))
    block.Fail(musaErrorIllegalInstruction,
               "%s (%s:%d): mma_type %d is not modelled (U8U8 0, S8S8 1, F16F16 2, BF16BF16 3, TF32TF32 4, "
               "E4M3E4M3 5, E5M2E5M2 6, E4M3E5M2 11, E5M2E4M3 12)",
               op.name, where, call.line, mma_type);
  const uint32_t bits = ElemBits(types.a);
  const bool accepted = bits == 16 ? shape.takes_16bit : bits == 32 ? shape.takes_tf32 : shape.takes_8bit;
  if (!accepted)
    block.Fail(musaErrorIllegalInstruction,
               "%s (%s:%d): mma_type %d (%s x %s) has no m%un%uk%u form; this shape takes %s", op.name, where,
               call.line, mma_type, ElemName(types.a), ElemName(types.b), shape.m, shape.n, shape.k,
               WmmaFormats(shape));
  const int want_signed = mma_type == kS8S8 ? 1 : 0;
  if (args[4] != want_signed)
    block.Fail(musaErrorIllegalInstruction,
               "%s (%s:%d): argument 9 (signed) is %d, but must be %d for mma_type %d (1 only for S8S8)", op.name,
               where, call.line, args[4], want_signed, mma_type);
  const int tnsp = layout_num ^ 1;  // bit 1: A is M-major, bit 0: B is N-major
  call.form.m = shape.m;
  call.form.n = shape.n;
  call.form.k = shape.k;
  call.form.types = types;
  call.form.a_map = (tnsp & 2) != 0 ? &Mp31MNMajor : &Mp31KMajor;
  call.form.b_map = (tnsp & 1) != 0 ? &Mp31MNMajor : &Mp31KMajor;
  call.form.c_map = &Mp31Accumulator;
}

inline void Wmma(const Collective& op, const WmmaShape& shape, int32_t* d, const int32_t* a, const int32_t* b,
                 const int32_t* c, int r0, int r1, int r2, int sat, int is_signed, int layout_num, int mma_type,
                 const char* file, int line) {
  WarpMmaCall call;
  call.d = d;
  call.a = a;
  call.b = b;
  call.c = c;
  const int args[] = {r0, r1, r2, sat, is_signed, layout_num, mma_type};
  for (int i = 0; i < 7; ++i) call.args[i] = args[i];
  call.num_args = 7;
  call.file = file;
  call.line = line;
  ResolveWmma(op, shape, call);
  RunWarpMma(op, call);
}

}  // namespace mma
}  // namespace tl_sim

#if __MUSA_ARCH__ >= 310
// Each built-in is its own collective, so that lanes meeting at different shapes are reported as divergent.
#define TL_SIM_WMMA_BUILTIN(MM, NN, KK)                                                                                \
  namespace tl_sim {                                                                                                   \
  namespace mma {                                                                                                      \
  inline constexpr Collective kWmmaOp_m##MM##n##NN##k##KK{"__musa_wmma_m" #MM "n" #NN "k" #KK "_mma",                  \
                                                           &ExchangeWarpMma};                                          \
  }                                                                                                                    \
  }                                                                                                                    \
  inline void __musa_wmma_m##MM##n##NN##k##KK##_mma(                                                                   \
      int32_t* d, const int32_t* a, const int32_t* b, const int32_t* c, int r0, int r1, int r2, int sat,               \
      int is_signed, int layout_num, int mma_type, const char* file = __builtin_FILE(), int line = __builtin_LINE()) { \
    tl_sim::mma::Wmma(tl_sim::mma::kWmmaOp_m##MM##n##NN##k##KK, tl_sim::mma::kWmma_m##MM##n##NN##k##KK, d, a, b, c,    \
                      r0, r1, r2, sat, is_signed, layout_num, mma_type, file, line);                                   \
  }
#else
#define TL_SIM_WMMA_BUILTIN(MM, NN, KK) \
  TL_SIM_UNAVAILABLE_BUILTIN(__musa_wmma_m##MM##n##NN##k##KK##_mma, "mp_31/mp_32 (WMMA on 32-lane warps)")
#endif

TL_SIM_WMMA_BUILTIN(16, 8, 4)
TL_SIM_WMMA_BUILTIN(16, 8, 8)
TL_SIM_WMMA_BUILTIN(16, 8, 16)
TL_SIM_WMMA_BUILTIN(8, 16, 16)
TL_SIM_WMMA_BUILTIN(16, 16, 16)
TL_SIM_WMMA_BUILTIN(16, 16, 32)
TL_SIM_WMMA_BUILTIN(16, 16, 64)

#undef TL_SIM_WMMA_BUILTIN
#pragma GCC visibility pop
