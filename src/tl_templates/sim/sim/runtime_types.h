/*!
 * \file tl_templates/sim/sim/runtime_types.h
 * \brief The types of the MUSA runtime API (error codes, stream handle, attribute and copy-kind enums) and the
 *        generic description of each error code. Numeric values mirror the CUDA runtime's, as MUSA's do.
 */
#pragma once

enum musaError_t {
  musaSuccess = 0,
  musaErrorInvalidValue = 1,
  musaErrorMemoryAllocation = 2,
  musaErrorInitializationError = 3,
  musaErrorInvalidConfiguration = 9,
  musaErrorInvalidMemcpyDirection = 21,
  musaErrorInvalidDeviceFunction = 98,
  musaErrorNoDevice = 100,
  musaErrorInvalidDevice = 101,
  musaErrorInvalidResourceHandle = 400,
  musaErrorIllegalAddress = 700,
  musaErrorAssert = 710,
  musaErrorIllegalInstruction = 715,
  musaErrorLaunchFailure = 719,
  musaErrorCooperativeLaunchTooLarge = 720,
  musaErrorNotSupported = 801,
  musaErrorUnknown = 999,
};

/*! \brief Opaque stream handle; null is the default stream. The simulator runs every launch synchronously. */
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

enum musaDeviceAttr {
  musaDevAttrMaxThreadsPerBlock = 1,
  musaDevAttrMaxSharedMemoryPerBlock = 8,
  musaDevAttrWarpSize = 10,
  musaDevAttrMultiProcessorCount = 16,
  musaDevAttrComputeCapabilityMajor = 75,
  musaDevAttrComputeCapabilityMinor = 76,
  musaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief The enumerator's name, as musaGetErrorName reports it. */
inline const char* ErrorName(musaError_t e) {
  switch (e) {
    case musaSuccess: return "musaSuccess";
    case musaErrorInvalidValue: return "musaErrorInvalidValue";
    case musaErrorMemoryAllocation: return "musaErrorMemoryAllocation";
    case musaErrorInitializationError: return "musaErrorInitializationError";
    case musaErrorInvalidConfiguration: return "musaErrorInvalidConfiguration";
    case musaErrorInvalidMemcpyDirection: return "musaErrorInvalidMemcpyDirection";
    case musaErrorInvalidDeviceFunction: return "musaErrorInvalidDeviceFunction";
    case musaErrorNoDevice: return "musaErrorNoDevice";
    case musaErrorInvalidDevice: return "musaErrorInvalidDevice";
    case musaErrorInvalidResourceHandle: return "musaErrorInvalidResourceHandle";
    case musaErrorIllegalAddress: return "musaErrorIllegalAddress";
    case musaErrorAssert: return "musaErrorAssert";
    case musaErrorIllegalInstruction: return "musaErrorIllegalInstruction";
    case musaErrorLaunchFailure: return "musaErrorLaunchFailure";
    case musaErrorCooperativeLaunchTooLarge: return "musaErrorCooperativeLaunchTooLarge";
    case musaErrorNotSupported: return "musaErrorNotSupported";
    case musaErrorUnknown: return "musaErrorUnknown";
  }
  return "unrecognized error code";
}

/*! \brief The generic one-line description of a code (musaGetErrorString when no detailed message applies). */
inline const char* ErrorDescription(musaError_t e) {
  switch (e) {
    case musaSuccess: return "no error";
    case musaErrorInvalidValue: return "invalid argument";
    case musaErrorMemoryAllocation: return "out of memory";
    case musaErrorInitializationError: return "initialization error";
    case musaErrorInvalidConfiguration: return "invalid configuration argument";
    case musaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case musaErrorInvalidDeviceFunction: return "invalid device function";
    case musaErrorNoDevice: return "no MUSA-capable device is detected";
    case musaErrorInvalidDevice: return "invalid device ordinal";
    case musaErrorInvalidResourceHandle: return "invalid resource handle";
    case musaErrorIllegalAddress: return "an illegal memory access was encountered";
    case musaErrorAssert: return "device-side assert triggered";
    case musaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case musaErrorLaunchFailure: return "unspecified launch failure";
    case musaErrorCooperativeLaunchTooLarge: return "too many blocks in cooperative launch";
    case musaErrorNotSupported: return "operation not supported";
    case musaErrorUnknown: return "unknown error";
  }
  return "unrecognized error code";
}

}  // namespace tl_sim
#pragma GCC visibility pop
