/*!
 * \file tl_templates/sim/sim/vector_types.h
 * \brief The CUDA-style vector types (`float4`, `uint2`, ... with `make_*` helpers), `uint3` and `dim3`, with the
 *        device's sizes and alignments (a `float4` is 16-byte aligned, so vectorised loads keep their meaning).
 */
#pragma once

#include "visibility.h"

#define TL_SIM_VECTOR1(name, T, align)                                              \
  struct __attribute__((aligned(align))) name { T x; };                            \
  static __inline__ name make_##name(T x) { return name{x}; }
#define TL_SIM_VECTOR2(name, T, align)                                              \
  struct __attribute__((aligned(align))) name { T x, y; };                         \
  static __inline__ name make_##name(T x, T y) { return name{x, y}; }
#define TL_SIM_VECTOR3(name, T)                                                     \
  struct name { T x, y, z; };                                                       \
  static __inline__ name make_##name(T x, T y, T z) { return name{x, y, z}; }
#define TL_SIM_VECTOR4(name, T, align)                                              \
  struct __attribute__((aligned(align))) name { T x, y, z, w; };                   \
  static __inline__ name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }

// Alignments follow CUDA's vector_types.h: 2- and 4-vectors are aligned to their size up to 16 bytes.
#define TL_SIM_VECTOR_FAMILY(prefix, T, a1, a2, a4) \
  TL_SIM_VECTOR1(prefix##1, T, a1)                  \
  TL_SIM_VECTOR2(prefix##2, T, a2)                  \
  TL_SIM_VECTOR3(prefix##3, T)                      \
  TL_SIM_VECTOR4(prefix##4, T, a4)

TL_SIM_VECTOR_FAMILY(char, signed char, 1, 2, 4)
TL_SIM_VECTOR_FAMILY(uchar, unsigned char, 1, 2, 4)
TL_SIM_VECTOR_FAMILY(short, short, 2, 4, 8)
TL_SIM_VECTOR_FAMILY(ushort, unsigned short, 2, 4, 8)
TL_SIM_VECTOR_FAMILY(int, int, 4, 8, 16)
TL_SIM_VECTOR_FAMILY(uint, unsigned int, 4, 8, 16)
TL_SIM_VECTOR_FAMILY(long, long, 8, 16, 16)
TL_SIM_VECTOR_FAMILY(ulong, unsigned long, 8, 16, 16)
TL_SIM_VECTOR_FAMILY(longlong, long long, 8, 16, 16)
TL_SIM_VECTOR_FAMILY(ulonglong, unsigned long long, 8, 16, 16)
TL_SIM_VECTOR_FAMILY(float, float, 4, 8, 16)
TL_SIM_VECTOR_FAMILY(double, double, 8, 16, 16)

#undef TL_SIM_VECTOR_FAMILY
#undef TL_SIM_VECTOR1
#undef TL_SIM_VECTOR2
#undef TL_SIM_VECTOR3
#undef TL_SIM_VECTOR4

/*! \brief Launch extents; unspecified dimensions are 1. Converts to and from `uint3` as in CUDA. */
struct dim3 {
  unsigned int x, y, z;
  TL_SIM_HIDDEN constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  TL_SIM_HIDDEN constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  TL_SIM_HIDDEN constexpr operator uint3() const { return uint3{x, y, z}; }
};
