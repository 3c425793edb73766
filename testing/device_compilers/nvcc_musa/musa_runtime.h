/*!
 * \file testing/device_compilers/nvcc_musa/musa_runtime.h
 * \brief musa_runtime.h over the CUDA runtime: the MUSA names host wrappers use (shared/docs/MUSA_FACTS.md: the
 *        CUDA runtime API with `cuda` -> `musa`), each forwarding to its CUDA original.
 */
#pragma once

#include <cuda_runtime.h>

typedef cudaError_t musaError_t;
typedef cudaStream_t musaStream_t;
typedef cudaFuncAttribute musaFuncAttribute;
typedef cudaMemcpyKind musaMemcpyKind;
constexpr musaError_t musaSuccess = cudaSuccess;
constexpr musaFuncAttribute musaFuncAttributeMaxDynamicSharedMemorySize = cudaFuncAttributeMaxDynamicSharedMemorySize;
constexpr musaMemcpyKind musaMemcpyHostToDevice = cudaMemcpyHostToDevice;
constexpr musaMemcpyKind musaMemcpyDeviceToHost = cudaMemcpyDeviceToHost;
constexpr musaMemcpyKind musaMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice;
constexpr musaMemcpyKind musaMemcpyDefault = cudaMemcpyDefault;

inline musaError_t musaGetLastError() { return cudaGetLastError(); }
inline musaError_t musaPeekAtLastError() { return cudaPeekAtLastError(); }
inline const char* musaGetErrorString(musaError_t error) { return cudaGetErrorString(error); }
inline const char* musaGetErrorName(musaError_t error) { return cudaGetErrorName(error); }
inline musaError_t musaDeviceSynchronize() { return cudaDeviceSynchronize(); }
inline musaError_t musaStreamSynchronize(musaStream_t stream) { return cudaStreamSynchronize(stream); }
inline musaError_t musaMalloc(void** ptr, size_t size) { return cudaMalloc(ptr, size); }
inline musaError_t musaFree(void* ptr) { return cudaFree(ptr); }
inline musaError_t musaMemcpy(void* dst, const void* src, size_t count, musaMemcpyKind kind) {
  return cudaMemcpy(dst, src, count, kind);
}

template <class T>
musaError_t musaLaunchKernel(T* func, dim3 grid, dim3 block, void** args, size_t shared_mem = 0,
                             musaStream_t stream = 0) {
  return cudaLaunchKernel(func, grid, block, args, shared_mem, stream);
}
template <class T>
musaError_t musaLaunchCooperativeKernel(T* func, dim3 grid, dim3 block, void** args, size_t shared_mem = 0,
                                        musaStream_t stream = 0) {
  return cudaLaunchCooperativeKernel(func, grid, block, args, shared_mem, stream);
}
template <class T>
musaError_t musaFuncSetAttribute(T* func, musaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(func, attr, value);
}
