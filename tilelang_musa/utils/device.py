"""The torch device kernels take their tensors on, and waiting for them: "musa" on a MUSA device, "cpu" in the
simulator (execution backend "sim"), as `execution_backend="auto"` resolves (jit/backend.py)."""

from __future__ import annotations

import os

import torch

__all__ = ["get_available_cpu_count", "get_current_device", "synchronize"]


def get_current_device() -> str:
    """The torch device of the tensors kernels compiled with the default execution backend take and return:
    "musa" (with torch_musa's current device index, e.g. "musa:0") or "cpu" (the simulator)."""
    from ..jit.backend import resolve_backend

    device = resolve_backend(None).device
    if device == "musa":
        return f"musa:{torch.musa.current_device()}"
    return device


def synchronize() -> None:
    """Wait for the kernels launched so far: torch.musa.synchronize() on a MUSA device; nothing to wait for in the
    simulator, whose launches return when the kernel has finished."""
    if get_current_device().startswith("musa"):
        torch.musa.synchronize()


def get_available_cpu_count() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity API (macOS, Windows)
        return max(1, os.cpu_count() or 1)
