/*!
 * \file testing/device_compilers/clang_musa/musa_runtime.h
 * \brief musa_runtime.h for clang's syntax check: the MUSA runtime API (the CUDA runtime API renamed, per
 *        shared/docs/MUSA_FACTS.md) that host wrappers call, declarations only, with the C++ template overloads
 *        that take a kernel itself rather than a `const void*`.
 */
#pragma once

#include <stddef.h>

enum musaError_t {
  musaSuccess = 0,
  musaErrorInvalidValue = 1,
  musaErrorMemoryAllocation = 2,
  musaErrorInitializationError = 3,
  musaErrorInvalidConfiguration = 9,
  musaErrorInvalidDeviceFunction = 98,
  musaErrorNoDevice = 100,
  musaErrorInvalidDevice = 101,
  musaErrorLaunchFailure = 719,
  musaErrorUnknown = 999,
};
typedef struct MUstream_st* musaStream_t;
enum musaFuncAttribute {
  musaFuncAttributeMaxDynamicSharedMemorySize = 8,
  musaFuncAttributePreferredSharedMemoryCarveout = 9,
};
enum musaMemcpyKind {
  musaMemcpyHostToHost = 0,
  musaMemcpyHostToDevice = 1,
  musaMemcpyDeviceToHost = 2,
  musaMemcpyDeviceToDevice = 3,
  musaMemcpyDefault = 4,
};

extern "C" {
musaError_t musaGetLastError(void);
musaError_t musaPeekAtLastError(void);
const char* musaGetErrorString(musaError_t error);
const char* musaGetErrorName(musaError_t error);
musaError_t musaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shared_mem,
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
musaError_t musaFuncSetAttribute(T* func, enum musaFuncAttribute attr, int value) {
  return ::musaFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value);
}
