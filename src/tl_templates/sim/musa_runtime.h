/*!
 * \file tl_templates/sim/musa_runtime.h
 * \brief The simulator's musa_runtime.h: the MUSA runtime API subset used by generated host wrappers, plus (as
 *        with mcc, where the runtime header brings the device built-ins) the kernel-language keywords, vector
 *        types and device built-ins, all modelled on the CPU (including the asynchronous ones: async barriers, LDLMS
 *        and robust copies, TME, which bring musa.h's tensor descriptor and musa_robust.h with them).
 *
 * Compile a generated `.mu` as one shared library with
 *   g++ -std=c++17 -O2 -fPIC -shared -x c++ -pthread -I<repo>/src -I<repo>/src/tl_templates/sim \
 *       -DTL_SIMULATOR=1 -D__MUSA_ARCH__=310 -D__MUSA_ARCH_LIST__=310 kernel.mu -o kernel.so
 * The toolchain adds -DTL_SIM_LINK_RUNTIME=1 and links the prebuilt runtime of the arch (jit/sim_runtime.py,
 * docs/SIMULATOR.md), which runs the launches; without it the library carries a private copy of the whole
 * simulator. Either way every function and variable here is hidden (sim/visibility.h) but for the runtime's
 * arch-qualified ABI, so libraries built for different archs coexist in one process. "Device" memory is host memory; every launch runs
 * to completion before musaLaunchKernel returns, so streams and synchronisation are trivially satisfied.
 */
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "sim/visibility.h"
#include "sim/config.h"
#include "sim/keywords.h"
#include "sim/vector_types.h"
#include "sim/runtime_types.h"
#include "sim/thread_state.h"
#include "sim/fiber.h"
#include "sim/schedule_random.h"
#include "sim/scheduler.h"
#include "sim/shared_memory.h"
#include "sim/watchdog.h"
#include "sim/signal_guard.h"
#include "sim/launch.h"
#include "sim/builtins.h"
#include "sim/warp.h"
#include "sim/atomics.h"
#include "sim/device_math.h"
#include "sim/shared_address.h"
#include "sim/mma_mp31_wmma.h"
#include "sim/mma_mp22.h"
#include "sim/sqmma.h"
#include "sim/access_checks.h"
#include "sim/async_barrier.h"
#include "sim/async_copy.h"
#include "sim/tme.h"
#include "sim/grid_flags.h"
#include "sim/grid_barrier.h"

#pragma GCC visibility push(hidden)

// ---- errors -----------------------------------------------------------------------------------------------------
/*! \brief Return and clear this host thread's last error. */
inline musaError_t musaGetLastError() {
  musaError_t e = tl_sim::g_thread.last_error;
  tl_sim::g_thread.last_error = musaSuccess;
  return e;
}
inline musaError_t musaPeekAtLastError() { return tl_sim::g_thread.last_error; }
/*! \brief The detailed message of this thread's most recent error with code `error` (for a failed launch: kernel,
 *         block, thread and what went wrong), else the code's generic description. */
inline const char* musaGetErrorString(musaError_t error) {
  const tl_sim::OsThreadState& t = tl_sim::g_thread;
  const char* detail = tl_sim::ErrorDetailText(t);
  if (error != musaSuccess && error == t.detail_code && detail[0] != '\0') return detail;
  return tl_sim::ErrorDescription(error);
}
inline const char* musaGetErrorName(musaError_t error) { return tl_sim::ErrorName(error); }

// ---- device -----------------------------------------------------------------------------------------------------
inline musaError_t musaGetDeviceCount(int* count) {
  if (count == nullptr) return tl_sim::SetError(musaErrorInvalidValue, "musaGetDeviceCount: count is null");
  *count = 1;
  return musaSuccess;
}
inline musaError_t musaGetDevice(int* device) {
  if (device == nullptr) return tl_sim::SetError(musaErrorInvalidValue, "musaGetDevice: device is null");
  *device = 0;
  return musaSuccess;
}
inline musaError_t musaSetDevice(int device) {
  if (device != 0)
    return tl_sim::SetError(musaErrorInvalidDevice, "musaSetDevice(%d): the simulator has one device, 0", device);
  return musaSuccess;
}
inline musaError_t musaDeviceGetAttribute(int* value, musaDeviceAttr attr, int device) {
  if (value == nullptr) return tl_sim::SetError(musaErrorInvalidValue, "musaDeviceGetAttribute: value is null");
  if (device != 0)
    return tl_sim::SetError(musaErrorInvalidDevice,
                            "musaDeviceGetAttribute: no device %d (the simulator has one device, 0)", device);
  switch (attr) {
    case musaDevAttrMaxThreadsPerBlock:
      *value = static_cast<int>(tl_sim::kMaxThreadsPerBlock);
      return musaSuccess;
    case musaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(tl_sim::kDefaultDynamicSmemLimit);
      return musaSuccess;
    case musaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(tl_sim::kMaxSmemPerBlock);
      return musaSuccess;
    case musaDevAttrWarpSize:
      *value = static_cast<int>(tl_sim::kWarpSize);
      return musaSuccess;
    case musaDevAttrMultiProcessorCount:
      *value = 1;  // blocks run one after another
      return musaSuccess;
    case musaDevAttrComputeCapabilityMajor:
      *value = tl_sim::kArch / 100;
      return musaSuccess;
    case musaDevAttrComputeCapabilityMinor:
      *value = tl_sim::kArch / 10 % 10;
      return musaSuccess;
  }
  return tl_sim::SetError(musaErrorInvalidValue, "musaDeviceGetAttribute: attribute %d is not modelled",
                          static_cast<int>(attr));
}
inline musaError_t musaDeviceSynchronize() { return musaSuccess; }
/*! \brief Release the simulator's cached resources (idle fiber stacks) and clear the last error. */
inline musaError_t musaDeviceReset() {
  tl_sim::GlobalStackPool().Trim();
  tl_sim::g_thread.last_error = musaSuccess;
  return musaSuccess;
}

// ---- streams ----------------------------------------------------------------------------------------------------
inline musaError_t musaStreamCreate(musaStream_t* stream) {
  if (stream == nullptr) return tl_sim::SetError(musaErrorInvalidValue, "musaStreamCreate: stream is null");
  // A distinct non-null handle; work on it runs synchronously like everything else.
  *stream = reinterpret_cast<musaStream_t>(new char(0));
  return musaSuccess;
}
inline musaError_t musaStreamDestroy(musaStream_t stream) {
  delete reinterpret_cast<char*>(stream);
  return musaSuccess;
}
inline musaError_t musaStreamSynchronize(musaStream_t) { return musaSuccess; }

// ---- memory (device memory is host memory) ----------------------------------------------------------------------
inline musaError_t musaMalloc(void** ptr, size_t size) {
  if (ptr == nullptr) return tl_sim::SetError(musaErrorInvalidValue, "musaMalloc: ptr is null");
  *ptr = size == 0 ? nullptr : std::aligned_alloc(256, (size + 255) / 256 * 256);  // the device's alignment
  if (size != 0 && *ptr == nullptr)
    return tl_sim::SetError(musaErrorMemoryAllocation, "musaMalloc: cannot allocate %zu bytes", size);
  return musaSuccess;
}
inline musaError_t musaFree(void* ptr) {
  std::free(ptr);
  return musaSuccess;
}
inline musaError_t musaMemcpy(void* dst, const void* src, size_t count, musaMemcpyKind kind) {
  if (kind < musaMemcpyHostToHost || kind > musaMemcpyDefault)
    return tl_sim::SetError(musaErrorInvalidMemcpyDirection, "musaMemcpy: kind %d is not a musaMemcpyKind",
                            static_cast<int>(kind));
  if (count != 0 && (dst == nullptr || src == nullptr))
    return tl_sim::SetError(musaErrorInvalidValue, "musaMemcpy: null pointer for a %zu-byte copy", count);
  if (count != 0) std::memmove(dst, src, count);
  return musaSuccess;
}
inline musaError_t musaMemcpyAsync(void* dst, const void* src, size_t count, musaMemcpyKind kind,
                                   musaStream_t = nullptr) {
  return musaMemcpy(dst, src, count, kind);
}
inline musaError_t musaMemset(void* dst, int value, size_t count) {
  if (count != 0 && dst == nullptr) return tl_sim::SetError(musaErrorInvalidValue, "musaMemset: dst is null");
  if (count != 0) std::memset(dst, value, count);
  return musaSuccess;
}
inline musaError_t musaMemsetAsync(void* dst, int value, size_t count, musaStream_t = nullptr) {
  return musaMemset(dst, value, count);
}

// ---- kernels ----------------------------------------------------------------------------------------------------
/*! \brief Record a per-kernel attribute. MaxDynamicSharedMemorySize raises the launch limit above 48 KiB, up to
 *         the arch's per-block maximum; the carveout preference is accepted and has no effect. */
inline musaError_t musaFuncSetAttribute(const void* func, musaFuncAttribute attr, int value) {
  if (func == nullptr)
    return tl_sim::SetError(musaErrorInvalidDeviceFunction, "musaFuncSetAttribute: the kernel is null");
  char name_buf[48];
  const char* name = tl_sim::KernelName(func, name_buf, sizeof(name_buf));
  switch (attr) {
    case musaFuncAttributeMaxDynamicSharedMemorySize:
      if (value < 0 || static_cast<size_t>(value) > tl_sim::kMaxSmemPerBlock)
        return tl_sim::SetError(musaErrorInvalidValue,
                                "musaFuncSetAttribute(%s, MaxDynamicSharedMemorySize, %d): %s allows 0 to %zu bytes "
                                "per block",
                                name, value, tl_sim::kArchName, tl_sim::kMaxSmemPerBlock);
      tl_sim::GlobalKernelAttributes().SetMaxDynamicSmem(func, static_cast<size_t>(value));
      return musaSuccess;
    case musaFuncAttributePreferredSharedMemoryCarveout:
      if (value < -1 || value > 100)
        return tl_sim::SetError(musaErrorInvalidValue,
                                "musaFuncSetAttribute(%s, PreferredSharedMemoryCarveout, %d): expected -1 or 0..100",
                                name, value);
      return musaSuccess;
  }
  return tl_sim::SetError(musaErrorInvalidValue, "musaFuncSetAttribute(%s): attribute %d is not modelled", name,
                          static_cast<int>(attr));
}
template <class... Params>
inline musaError_t musaFuncSetAttribute(void (*kernel)(Params...), musaFuncAttribute attr, int value) {
  return musaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}

/*! \brief Launch a kernel given by its typed pointer; args[i] points at the value of its i-th parameter. Runs the
 *         whole grid before returning; an error inside the kernel is returned here with a detailed message. */
template <class... Params>
inline musaError_t musaLaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, void** args,
                                    size_t sharedMem = 0, musaStream_t stream = nullptr) {
  (void)stream;
  return tl_sim::LaunchKernel(kernel, grid, block, args, sharedMem);
}
/*! \brief A cooperative launch: every block resident at once, so that the kernel may wait at a grid barrier
 *         (cooperative_groups::this_grid().sync(), sim/grid_barrier.h); a grid larger than the device holds
 *         resident is musaErrorCooperativeLaunchTooLarge. */
template <class... Params>
inline musaError_t musaLaunchCooperativeKernel(void (*kernel)(Params...), dim3 grid, dim3 block, void** args,
                                               size_t sharedMem = 0, musaStream_t stream = nullptr) {
  (void)stream;
  return tl_sim::LaunchKernel(kernel, grid, block, args, sharedMem, true);
}
/*! \brief The untyped form cannot be simulated: the parameter types are needed to unpack `args`. */
inline musaError_t musaLaunchKernel(const void* func, dim3, dim3, void**, size_t = 0, musaStream_t = nullptr) {
  char name_buf[48];
  return tl_sim::SetError(musaErrorInvalidDeviceFunction,
                          "musaLaunchKernel(%s): the simulator needs the kernel's typed function pointer, not a "
                          "const void*",
                          func != nullptr ? tl_sim::KernelName(func, name_buf, sizeof(name_buf)) : "null");
}

#pragma GCC visibility pop
