"""Upstream TileLang constructs that select NVIDIA-only hardware: each one is a clear error naming the construct
and the line (the user's guide lists them as unsupported), never a silent no-op or an AttributeError."""

from __future__ import annotations

from typing import Any, Callable

from ..errors import UnsupportedError
from .builder import current_loc

_NVIDIA_ONLY = {
    "alloc_tmem": "Blackwell tensor memory",
    "alloc_descriptor": "Hopper/Blackwell matrix descriptors",
    "alloc_wgmma_desc": "Hopper WGMMA descriptors",
    "alloc_tcgen05_smem_desc": "Blackwell tcgen05 descriptors",
    "alloc_tcgen05_instr_desc": "Blackwell tcgen05 descriptors",
}

# Thread-block clusters (sm_90's distributed shared memory, cluster barriers, cluster launch control): no MUSA
# counterpart is documented (mutlass fixes its ClusterShape at 1x1x1 and has no device-side cluster call).
_CLUSTER = "thread-block clusters; launch independent blocks with T.Kernel"
_NVIDIA_ONLY.update({name: _CLUSTER for name in (
    "ClusterKernel", "alloc_cluster_barrier", "cluster_arrive", "cluster_arrive_relaxed", "cluster_wait",
    "cluster_sync", "block_rank_in_cluster", "clc_try_cancel", "clc_try_cancel_multicast", "clc_is_canceled",
    "clc_get_first_ctaid_x", "clc_get_first_ctaid_y", "clc_get_first_ctaid_z")})

# Upstream's CUDA-only TIR exports (tilelang/language/tir/exports.py): PTX matrix and bulk-copy instructions that
# libraries' own MMA emitters call (BitBLAS's TensorCoreIntrinEmitter: T.ptx_ldmatrix, T.ptx_mma). T.gemm is the
# portable form (MUSA's matrix instructions are reached through it).
_PTX = "a PTX instruction; write the tile operation with T.gemm / T.copy"
_NVIDIA_ONLY.update({name: _PTX for name in (
    "ptx_ldmatrix", "ptx_mma", "ptx_mma_sp", "ptx_mma_block_scale", "ptx_wgmma_ss", "ptx_wgmma_rs", "ptx_wgmma_sp_ss",
    "ptx_wgmma_sp_rs", "ptx_tcgen05_mma_ss", "ptx_tcgen05_mma_ts", "ptx_tcgen05_mma_blockscaled_ss",
    "ptx_cp_async_bulk", "ptx_fence_barrier_init", "ptx_wait_barrier")})


def _reject(name: str, what: str) -> Callable[..., Any]:
    def construct(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(f"T.{name} ({what}) is NVIDIA-specific and not supported by TileLang-MUSA",
                               current_loc())

    construct.__name__ = name
    construct.__doc__ = f"Not supported on MUSA: {what}."
    return construct


UNSUPPORTED = {name: _reject(name, what) for name, what in _NVIDIA_ONLY.items()}


