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

#define TL_SHIM_BUILTIN __device__ inline
#define TL_SHIM_BUILTIN_BODY { __trap(); }
#include "../musa_builtins.h"
