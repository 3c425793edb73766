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
TL_SHIM_BUILTIN void __musa_tce_commit_group() TL_SHIM_BUILTIN_BODY
TL_SHIM_BUILTIN void __musa_tce_wait_group(int n) TL_SHIM_BUILTIN_BODY

#endif  // __CUDA_ARCH__
