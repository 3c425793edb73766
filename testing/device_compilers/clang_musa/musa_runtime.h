/*!
 * \file testing/device_compilers/clang_musa/musa_runtime.h
 * \brief musa_runtime.h for clang's syntax check: the MUSA runtime API (the CUDA runtime API renamed, per
 *        shared/docs/MUSA_FACTS.md) that host wrappers call, declarations only, with the C++ template overloads
 *        that take a kernel itself rather than a `const void*`. The types are the simulator's
 *        (src/tl_templates/sim/sim/runtime_types.h); the functions are declared as the SDK declares them
 *        (extern "C"), where the simulator defines its own inline.
 */
#pragma once

#include <stddef.h>

// The runtime's types (error codes, the stream handle, the attribute and copy-kind enums): the simulator's
// declarations are the one source of them, so the wrappers the syntax check accepts are the ones the simulator
// runs.
#include "tl_templates/sim/sim/runtime_types.h"

extern "C" {
musaError_t musaGetLastError(void);
musaError_t musaPeekAtLastError(void);
const char* musaGetErrorString(musaError_t error);
const char* musaGetErrorName(musaError_t error);
musaError_t musaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared_mem,
                             musaStream_t stream);
musaError_t musaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared_mem,
                                        musaStream_t stream);
musaError_t musaFuncSetAttribute(const void* func, enum musaFuncAttribute attr, int value);
musaError_t musaMalloc(void** ptr, size_t size);
musaError_t musaFree(void* ptr);
musaError_t musaMemcpy(void* dst, const void* src, size_t count, enum musaMemcpyKind kind);
musaError_t musaMemcpyAsync(void* dst, const void* src, size_t count, enum musaMemcpyKind kind, musaStream_t stream);
musaError_t musaMemset(void* ptr, int value, size_t count);
musaError_t musaDeviceSynchronize(void);
musaError_t musaStreamSynchronize(musaStream_t stream);
musaError_t musaGetDevice(int* device);
musaError_t musaSetDevice(int device);
}

template <class T>
musaError_t musaLaunchKernel(T* func, dim3 grid, dim3 block, void** args, size_t shared_mem = 0,
                             musaStream_t stream = 0) {
  return ::musaLaunchKernel(reinterpret_cast<const void*>(func), grid, block, args, shared_mem, stream);
}
template <class T>
musaError_t musaLaunchCooperativeKernel(T* func, dim3 grid, dim3 block, void** args, size_t shared_mem = 0,
                                        musaStream_t stream = 0) {
  return ::musaLaunchCooperativeKernel(reinterpret_cast<const void*>(func), grid, block, args, shared_mem, stream);
}
template <class T>
musaError_t musaFuncSetAttribute(T* func, enum musaFuncAttribute attr, int value) {
  return ::musaFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value);
}
