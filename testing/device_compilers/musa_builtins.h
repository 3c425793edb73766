/*!
 * \file testing/device_compilers/musa_builtins.h
 * \brief The `__musa_*` device built-ins, declared for a compiler that does not know them (clang or nvcc in CUDA
 *        mode), with the prototypes of shared/docs/MUSA_FACTS.md and the simulator (src/tl_templates/sim/sim/).
 *
 * Whether mcc's host pass knows them is not documented; TileLang-MUSA calls them only under __MUSA_ARCH__, and the
 * shims hold the templates to that: the built-ins are declared in the device pass only (__CUDA_ARCH__), so a call
 * the host pass can see (outside `#if defined(__MUSA_ARCH__)`) fails the check. The including shim defines TL_SHIM_BUILTIN (the specifiers) and
 * TL_SHIM_BUILTIN_BODY (`;` for clang's syntax check; a body that traps for nvcc, since nvcc
 * links the device code of a translation unit and needs a definition). Nothing here runs.
 *
 * When a template starts calling a new built-in, declare it here (or the check reports an undeclared identifier).
 * The shim's musa_predefined.h defines the `vNi32_t` vectors first (both passes: wrappers take them).
 */
#pragma once

#if defined(__CUDA_ARCH__)

#include <stdint.h>

// ---- mp_22 warp MMA on 128-lane warps: (d, a, b, c, 0, 0, 0, 0, 1, layout) ---------------------------------
#define TL_SHIM_MP22_MMA(NAME)                                                                      \
  TL_SHIM_BUILTIN void NAME(int32_t* d, const int32_t* a, const int32_t* b, const int32_t* c, int, int, int, \
                              int, int, int layout) TL_SHIM_BUILTIN_BODY
TL_SHIM_MP22_MMA(__musa_fmma_m32n32k16_mma);
TL_SHIM_MP22_MMA(__musa_bfmma_m32n32k16_mma);
TL_SHIM_MP22_MMA(__musa_tfmma_m32n32k8_mma);
TL_SHIM_MP22_MMA(__musa_imma_m32n32k32_mma);
#undef TL_SHIM_MP22_MMA

// ---- mp_31 warp WMMA: (d, a, b, c, 0, 0, 0, sat, is_signed, layout_num, mma_type) ----------------------------
#define TL_SHIM_MP31_WMMA(SHAPE)                                                                      \
  TL_SHIM_BUILTIN void __musa_wmma_##SHAPE##_mma(int32_t* d, const int32_t* a, const int32_t* b,    \
                                                   const int32_t* c, int, int, int, int sat,          \
                                                   int is_signed, int layout_num, int mma_type)       \
      TL_SHIM_BUILTIN_BODY
TL_SHIM_MP31_WMMA(m16n8k4);
TL_SHIM_MP31_WMMA(m16n8k8);
TL_SHIM_MP31_WMMA(m16n8k16);
TL_SHIM_MP31_WMMA(m8n16k16);
TL_SHIM_MP31_WMMA(m16n16k16);
TL_SHIM_MP31_WMMA(m16n16k32);
TL_SHIM_MP31_WMMA(m16n16k64);
#undef TL_SHIM_MP31_WMMA

// ---- mp_31 SQMMA: (d, &descA, &descB, c, tnspA, tnspB, scaleA, scaleB, scaleD, sat, k, mma_type) -------------
#define TL_SHIM_MP31_SQMMA(SHAPE)                                                                           \
  TL_SHIM_BUILTIN void __musa_sqmma_##SHAPE##_mma(int32_t* d, const int32_t* desc_a, const int32_t* desc_b, \
                                                    const int32_t* c, int tnsp_a, int tnsp_b, int scale_a,    \
                                                    int scale_b, int scale_d, int sat, int k, int mma_type)   \
      TL_SHIM_BUILTIN_BODY
TL_SHIM_MP31_SQMMA(m16n64);
TL_SHIM_MP31_SQMMA(m32n32);
TL_SHIM_MP31_SQMMA(m32n64);
TL_SHIM_MP31_SQMMA(m32n128);
TL_SHIM_MP31_SQMMA(m64n16);
TL_SHIM_MP31_SQMMA(m64n32);
TL_SHIM_MP31_SQMMA(m64n64);
TL_SHIM_MP31_SQMMA(m64n128);
TL_SHIM_MP31_SQMMA(m128n32);
TL_SHIM_MP31_SQMMA(m128n64);
TL_SHIM_MP31_SQMMA(m128n128);
#undef TL_SHIM_MP31_SQMMA

// ---- SQMMA completion: the wait-all form (older mcc) and the group forms (mcc >= 4.3.6) ----------------------
TL_SHIM_BUILTIN void __musa_sqmma_wait() TL_SHIM_BUILTIN_BODY

// ---- async barriers (mp_31): integer ids 1..63, counts in warps ---------------------------------------------
TL_SHIM_BUILTIN void __musa_async_bar_record(uint32_t n) TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_async_init_arrival(uint32_t id, uint32_t warps, uint32_t phase) TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_async_add_trans(uint32_t id, uint32_t bytes) TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN uint32_t __musa_async_arrive(uint32_t id) TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_async_arrive_add_trans(uint32_t id, uint32_t bytes) TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_async_wait(uint32_t id, uint32_t parity) TL_SHIM_BUILTIN_BODY

// ---- LDLMS asynchronous global -> shared copies (mp_22, mp_31); shared pointers in address space 3, global in 1 --
TL_SHIM_BUILTIN void __musa_memcpy_g2s(void __attribute__((address_space(3)))* dst,
                                       const void __attribute__((address_space(1)))* src, uint32_t bytes,
                                       int prefetch) TL_SHIM_BUILTIN_BODY
// The robust forms take musa_robust.h's descriptor types: they are declared by the shims' musa_robust.h.

// ---- TME (mp_31): box and coordinates as vNi32_t (rank >= 2), innermost first --------------------------------
#define TL_SHIM_TME(N, VEC)                                                                                     \
  TL_SHIM_BUILTIN void __musa_tme_ld_tile_##N##d(uint32_t bar, void __attribute__((address_space(3)))* smem,      \
                                                 uint64_t desc, VEC box, VEC coord, int sg, int ss, int sl,       \
                                                 int prefetch, int inner, int outer, int l2) TL_SHIM_BUILTIN_BODY \
  TL_SHIM_BUILTIN void __musa_tme_st_##N##d(void __attribute__((address_space(3)))* smem, uint64_t desc, VEC box, \
                                            VEC coord, int sg, int ss, int sl, int inner, int outer, int last)    \
      TL_SHIM_BUILTIN_BODY
TL_SHIM_TME(1, int32_t)
TL_SHIM_TME(2, v2i32_t)
TL_SHIM_TME(3, v3i32_t)
TL_SHIM_TME(4, v4i32_t)
TL_SHIM_TME(5, v5i32_t)
#undef TL_SHIM_TME
TL_SHIM_BUILTIN void __musa_tme_store_read_wait() TL_SHIM_BUILTIN_BODY

#endif  // __CUDA_ARCH__

// Built-ins that Moore Threads' own kernels call from kernel bodies through T.call_extern, with no __MUSA_ARCH__ guard
// (their sparse MLA and GDN kernels: the LDLMS and SQMMA group forms, __musa_lma_wait, the loop hint, the TME store
// commit). They compile with mcc, so its host pass knows them: declared for both passes here.
TL_SHIM_BUILTIN void __musa_tce_commit_group() TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_tce_wait_group(int n) TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_memcpy_g2s_commit_group() TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_memcpy_g2s_wait_group(int n) TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_memcpy_g2s_wait() TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_lma_wait() TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_loop_transparent_outermost() TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_tme_store_commit() TL_SHIM_BUILTIN_BODY
