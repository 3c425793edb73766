/*!
 * \file tools/silicon/cuda_musa/musa_predefined.h
 * \brief The runnable CUDA shim for the simulator-against-silicon check (docs/SIM_VS_SILICON.md), pre-included
 *        (`--pre-include`) into each generated MUSA C source that nvcc builds for an NVIDIA GPU.
 *
 * It is the compile-only nvcc shim of testing/device_compilers/nvcc_musa/ (on the include path after this folder:
 * musa_runtime.h, musa_fp16.h, musa_bf16.h map the MUSA names onto the CUDA runtime and CUDA's half/bfloat16),
 * which already forwards every runtime call the host wrapper makes (`call()`: musaLaunchKernel, musaStream_t,
 * musaError_t, musaGetErrorString, musaFuncSetAttribute) to its CUDA original, so the built library runs. Only the
 * generic subset runs: the `__musa_*` built-ins (matrix instructions, TME, async copies and barriers) trap, and
 * tools/silicon/prepare.py keeps kernels that use them out of the bundle.
 *
 * What the device templates (src/tl_templates/musa/) need beyond that is the same on both vendors' CUDA dialect:
 * 32-lane warps (mp_31's, MUSA_FACTS.md), `__shfl_*_sync` with 32-bit masks, atomics, `__syncthreads`.
 */
#pragma once

#include "../../../testing/device_compilers/nvcc_musa/musa_predefined.h"

#define TL_SILICON_SHIM 1
