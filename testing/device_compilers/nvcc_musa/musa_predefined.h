/*!
 * \file testing/device_compilers/nvcc_musa/musa_predefined.h
 * \brief What mcc provides before the first line of a `.mu` file, for nvcc (pre-included with `--pre-include`),
 *        on top of the CUDA runtime that nvcc includes implicitly.
 *
 * nvcc is a real two-pass GPU compiler with its own (stricter) rules on host/device calls and the real CUDA
 * half/bfloat16 headers: a generated kernel that builds here is free of the dialect slips that g++ (the
 * simulator) accepts. MUSA-only names map onto their CUDA counterparts; the `__musa_*` built-ins trap.
 */
#pragma once

#define __MUSACC__ 1
#if defined(__CUDA_ARCH__)
// mcc compiles one device pass per arch of --offload-arch, and the generated build names exactly one.
#define __MUSA_ARCH__ __MUSA_ARCH_LIST__
#endif

// The lighter MUSA block barrier has the semantics of __syncthreads for shared memory.
__device__ __forceinline__ void __syncthreads_lm() { __syncthreads(); }

// mcc's vectors of 32-bit ints (TME boxes and coordinates, robust loads). nvcc has no ext vectors: aggregates with
// the same construction (`v3i32_t{a, b, c}`) and indexing, as the simulator's (src/tl_templates/sim/sim/vector_i32.h).
#define TL_MUSA_HAVE_VNI32 1
#define TL_SHIM_VECTOR_I32(N)                                                      \
  struct v##N##i32_t {                                                           \
    int v[N];                                                                    \
    __host__ __device__ int& operator[](int i) { return v[i]; }                  \
    __host__ __device__ const int& operator[](int i) const { return v[i]; }      \
  };
TL_SHIM_VECTOR_I32(2)
TL_SHIM_VECTOR_I32(3)
TL_SHIM_VECTOR_I32(4)
TL_SHIM_VECTOR_I32(5)
TL_SHIM_VECTOR_I32(8)
TL_SHIM_VECTOR_I32(16)
TL_SHIM_VECTOR_I32(32)
#undef TL_SHIM_VECTOR_I32

#define TL_SHIM_BUILTIN __device__ inline
#define TL_SHIM_BUILTIN_BODY { __trap(); }
#include "../musa_builtins.h"
