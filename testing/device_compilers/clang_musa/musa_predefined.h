/*!
 * \file testing/device_compilers/clang_musa/musa_predefined.h
 * \brief What mcc provides before the first line of a `.mu` file, for clang in CUDA mode without a CUDA
 *        installation (`-nocudainc -nocudalib`), force-included with `-include`.
 *
 * mcc is clang with a MUSA target: it predefines __MUSACC__, defines __MUSA_ARCH__ in the device pass only, and
 * implicitly includes a runtime wrapper that spells the kernel-language keywords as clang attributes and declares
 * the built-in variables, the device functions (barriers, shuffles, atomics, math, printf) and the `__musa_*`
 * built-ins. This file gives clang the same, declarations only (the check is `-fsyntax-only`), with the CUDA
 * signatures that MUSA copies. What it cannot give is mcc itself: a construct mcc rejects for a MUSA-specific
 * reason stays invisible here.
 */
#pragma once

#define __MUSACC__ 1
#if defined(__CUDA_ARCH__)
// mcc compiles one device pass per arch of --offload-arch, and the generated build names exactly one.
#define __MUSA_ARCH__ __MUSA_ARCH_LIST__
#endif

// ---- keywords ---------------------------------------------------------------------------------------------------
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))

#include <stddef.h>
#include <stdint.h>

// ---- vector types and the built-in variables ----------------------------------------------------------------------
struct uint3 {
  unsigned int x, y, z;
};
// The other vector types of MUSA's vector_types.h (CUDA's, with CUDA's alignments) that generated code views
// memory through (`float4`, `uchar2`, ...; src/codegen/musa_types.cc).
#define TL_SHIM_VECTORS(P, T, A2, A4)        \
  struct __align__(A2) P##2 { T x, y; };      \
  struct __align__(A4) P##4 { T x, y, z, w; };
#define TL_SHIM_VECTOR3(P, T) \
  struct P##3 { T x, y, z; };
TL_SHIM_VECTORS(char, signed char, 2, 4) TL_SHIM_VECTOR3(char, signed char)
TL_SHIM_VECTORS(uchar, unsigned char, 2, 4) TL_SHIM_VECTOR3(uchar, unsigned char)
TL_SHIM_VECTORS(short, short, 4, 8) TL_SHIM_VECTOR3(short, short)
TL_SHIM_VECTORS(ushort, unsigned short, 4, 8) TL_SHIM_VECTOR3(ushort, unsigned short)
TL_SHIM_VECTORS(int, int, 8, 16) TL_SHIM_VECTOR3(int, int)
TL_SHIM_VECTORS(uint, unsigned int, 8, 16)
TL_SHIM_VECTORS(float, float, 8, 16) TL_SHIM_VECTOR3(float, float)
TL_SHIM_VECTORS(longlong, long long, 16, 16) TL_SHIM_VECTOR3(longlong, long long)
TL_SHIM_VECTORS(ulonglong, unsigned long long, 16, 16) TL_SHIM_VECTOR3(ulonglong, unsigned long long)
TL_SHIM_VECTORS(double, double, 16, 16) TL_SHIM_VECTOR3(double, double)
#undef TL_SHIM_VECTORS
#undef TL_SHIM_VECTOR3
struct dim3 {
  unsigned int x, y, z;
  __host__ __device__ constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  __host__ __device__ constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
extern const __device__ uint3 threadIdx;
extern const __device__ uint3 blockIdx;
extern const __device__ dim3 blockDim;
extern const __device__ dim3 gridDim;
extern const __device__ int warpSize;

// ---- barriers, fences, control ------------------------------------------------------------------------------------
__device__ void __syncthreads();
__device__ void __syncthreads_lm();
__device__ void __syncwarp(unsigned int mask = 0xffffffffu);
__device__ int __syncthreads_count(int predicate);
__device__ int __syncthreads_and(int predicate);
__device__ int __syncthreads_or(int predicate);
__device__ int __any_sync(unsigned int mask, int predicate);
__device__ int __all_sync(unsigned int mask, int predicate);
__device__ unsigned int __ballot_sync(unsigned int mask, int predicate);
__device__ unsigned int __activemask();
template <class T>
__device__ unsigned int __match_any_sync(unsigned int mask, T value);
template <class T>
__device__ unsigned int __match_all_sync(unsigned int mask, T value, int* pred);
__device__ void __threadfence();
__device__ void __threadfence_block();
__device__ void __trap();
__device__ long long clock64();
__device__ void __nanosleep(unsigned int ns);
template <class T>
__device__ T __ldg(const T* ptr);
extern "C" __device__ int printf(const char* format, ...);
__device__ size_t __cvta_generic_to_shared(const void* ptr);

// ---- warp shuffles ------------------------------------------------------------------------------------------------
#define TL_SHIM_SHUFFLES(T)                                                                        \
  __device__ T __shfl_sync(unsigned int mask, T var, int src_lane, int width = warpSize);         \
  __device__ T __shfl_xor_sync(unsigned int mask, T var, int lane_mask, int width = warpSize);    \
  __device__ T __shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width = warpSize); \
  __device__ T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = warpSize);
TL_SHIM_SHUFFLES(int)
TL_SHIM_SHUFFLES(unsigned int)
TL_SHIM_SHUFFLES(long)
TL_SHIM_SHUFFLES(unsigned long)
TL_SHIM_SHUFFLES(long long)
TL_SHIM_SHUFFLES(unsigned long long)
TL_SHIM_SHUFFLES(float)
TL_SHIM_SHUFFLES(double)
#undef TL_SHIM_SHUFFLES

// ---- atomics (the CUDA overload set) ------------------------------------------------------------------------------
#define TL_SHIM_ATOMIC(NAME, T) __device__ T NAME(T* address, T val);
TL_SHIM_ATOMIC(atomicAdd, int)
TL_SHIM_ATOMIC(atomicAdd, unsigned int)
TL_SHIM_ATOMIC(atomicAdd, unsigned long long)
TL_SHIM_ATOMIC(atomicAdd, float)
TL_SHIM_ATOMIC(atomicAdd, double)
TL_SHIM_ATOMIC(atomicExch, int)
TL_SHIM_ATOMIC(atomicExch, unsigned int)
TL_SHIM_ATOMIC(atomicExch, unsigned long long)
TL_SHIM_ATOMIC(atomicExch, float)
TL_SHIM_ATOMIC(atomicMax, int)
TL_SHIM_ATOMIC(atomicMax, unsigned int)
TL_SHIM_ATOMIC(atomicMax, long long)
TL_SHIM_ATOMIC(atomicMax, unsigned long long)
TL_SHIM_ATOMIC(atomicMin, int)
TL_SHIM_ATOMIC(atomicMin, unsigned int)
TL_SHIM_ATOMIC(atomicMin, long long)
TL_SHIM_ATOMIC(atomicMin, unsigned long long)
TL_SHIM_ATOMIC(atomicAnd, int)
TL_SHIM_ATOMIC(atomicAnd, unsigned int)
TL_SHIM_ATOMIC(atomicAnd, unsigned long long)  // CUDA's and MUSA's 64-bit bitwise atomics
TL_SHIM_ATOMIC(atomicOr, int)
TL_SHIM_ATOMIC(atomicOr, unsigned int)
TL_SHIM_ATOMIC(atomicOr, unsigned long long)  // CUDA's and MUSA's 64-bit bitwise atomics
TL_SHIM_ATOMIC(atomicXor, int)
TL_SHIM_ATOMIC(atomicXor, unsigned int)
TL_SHIM_ATOMIC(atomicXor, unsigned long long)  // CUDA's and MUSA's 64-bit bitwise atomics
#undef TL_SHIM_ATOMIC
__device__ int atomicCAS(int* address, int compare, int val);
__device__ unsigned int atomicCAS(unsigned int* address, unsigned int compare, unsigned int val);
__device__ unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                                        unsigned long long val);
__device__ unsigned short atomicCAS(unsigned short* address, unsigned short compare, unsigned short val);

// ---- integer intrinsics -------------------------------------------------------------------------------------------
__device__ int __popc(unsigned int x);
__device__ int __popcll(unsigned long long x);
__device__ int __clz(int x);
__device__ int __clzll(long long x);
__device__ int __ffs(int x);
__device__ int __ffsll(long long x);
__device__ unsigned int __brev(unsigned int x);

// ---- math: the float (f-suffixed) and double device functions, overloading the host C library's -------------------
#define TL_SHIM_MATH1(NAME)         \
  __device__ float NAME##f(float); \
  __device__ double NAME(double);
#define TL_SHIM_MATH2(NAME)                \
  __device__ float NAME##f(float, float); \
  __device__ double NAME(double, double);
TL_SHIM_MATH1(exp) TL_SHIM_MATH1(exp2) TL_SHIM_MATH1(exp10) TL_SHIM_MATH1(expm1) TL_SHIM_MATH1(log)
TL_SHIM_MATH1(log2) TL_SHIM_MATH1(log10) TL_SHIM_MATH1(log1p) TL_SHIM_MATH1(sqrt) TL_SHIM_MATH1(rsqrt)
TL_SHIM_MATH1(cbrt) TL_SHIM_MATH1(sin) TL_SHIM_MATH1(cos) TL_SHIM_MATH1(tan) TL_SHIM_MATH1(asin)
TL_SHIM_MATH1(acos) TL_SHIM_MATH1(atan) TL_SHIM_MATH1(sinh) TL_SHIM_MATH1(cosh) TL_SHIM_MATH1(tanh)
TL_SHIM_MATH1(asinh) TL_SHIM_MATH1(acosh) TL_SHIM_MATH1(atanh) TL_SHIM_MATH1(erf) TL_SHIM_MATH1(erfc)
TL_SHIM_MATH1(fabs) TL_SHIM_MATH1(floor) TL_SHIM_MATH1(ceil) TL_SHIM_MATH1(trunc) TL_SHIM_MATH1(round)
TL_SHIM_MATH1(rint) TL_SHIM_MATH1(nearbyint)
TL_SHIM_MATH2(pow) TL_SHIM_MATH2(fmod) TL_SHIM_MATH2(atan2) TL_SHIM_MATH2(hypot) TL_SHIM_MATH2(copysign)
TL_SHIM_MATH2(nextafter) TL_SHIM_MATH2(fmin) TL_SHIM_MATH2(fmax) TL_SHIM_MATH2(remainder) TL_SHIM_MATH2(fdim)
#undef TL_SHIM_MATH1
#undef TL_SHIM_MATH2
__device__ float fmaf(float, float, float);
__device__ double fma(double, double, double);
__device__ float ldexpf(float, int);
__device__ double ldexp(double, int);
__device__ float __expf(float);
__device__ float __logf(float);
__device__ float __exp10f(float);
__device__ float __log2f(float);
__device__ float __powf(float, float);
__device__ float __sinf(float);
__device__ float __cosf(float);
__device__ float __tanf(float);
__device__ float __fdividef(float, float);
__device__ float __log10f(float);
// Explicitly rounded arithmetic (T.ieee_*), CUDA's names: which of them mcc provides is not documented.
#define TL_SHIM_ROUNDED(MODE)                                                                              \
  __device__ float __fadd_##MODE(float, float);                                                            \
  __device__ float __fsub_##MODE(float, float);                                                            \
  __device__ float __fmul_##MODE(float, float);                                                            \
  __device__ float __fdiv_##MODE(float, float);                                                            \
  __device__ float __fmaf_##MODE(float, float, float);                                                     \
  __device__ float __frcp_##MODE(float);                                                                   \
  __device__ float __fsqrt_##MODE(float);                                                                  \
  __device__ double __dadd_##MODE(double, double);                                                         \
  __device__ double __dsub_##MODE(double, double);                                                         \
  __device__ double __dmul_##MODE(double, double);                                                         \
  __device__ double __ddiv_##MODE(double, double);                                                         \
  __device__ double __fma_##MODE(double, double, double);                                                  \
  __device__ double __drcp_##MODE(double);                                                                 \
  __device__ double __dsqrt_##MODE(double);
TL_SHIM_ROUNDED(rn) TL_SHIM_ROUNDED(rz) TL_SHIM_ROUNDED(ru) TL_SHIM_ROUNDED(rd)
#undef TL_SHIM_ROUNDED
__device__ float __frsqrt_rn(float);
__device__ bool isnan(float);
__device__ bool isnan(double);
__device__ bool isinf(float);
__device__ bool isinf(double);
__device__ bool isfinite(float);
__device__ bool isfinite(double);

// ---- the __musa_* built-ins (device pass only) ---------------------------------------------------------------------
// mcc's vectors of 32-bit ints (TME boxes and coordinates, robust loads): clang ext vectors [I]. Defined here,
// for both passes, so the templates' own fallback typedefs (tme.h) stand aside.
#define TL_MUSA_HAVE_VNI32 1
typedef int v2i32_t __attribute__((ext_vector_type(2)));
typedef int v3i32_t __attribute__((ext_vector_type(3)));
typedef int v4i32_t __attribute__((ext_vector_type(4)));
typedef int v5i32_t __attribute__((ext_vector_type(5)));
typedef int v8i32_t __attribute__((ext_vector_type(8)));
typedef int v16i32_t __attribute__((ext_vector_type(16)));
typedef int v32i32_t __attribute__((ext_vector_type(32)));

#define TL_SHIM_BUILTIN __device__
#define TL_SHIM_BUILTIN_BODY ;
#include "../musa_builtins.h"
