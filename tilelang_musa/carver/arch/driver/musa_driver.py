"""The MUSA device's properties: from torch_musa where a device is present, else from the device the simulator
models (the default target's arch, with the figures of profiler/arch_figures.py).

Attribute ids are the MUSA runtime's `musaDeviceAttr` values, which follow CUDA's numbering.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ....profiler.arch_figures import figures_for
from ....target import ARCHS, arch_of, determine_target, musa_device_present

MAX_THREADS_PER_BLOCK = 1
MAX_SHARED_MEMORY_PER_BLOCK = 8
MAX_REGISTERS_PER_BLOCK = 12
MULTIPROCESSOR_COUNT = 16
MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
MAX_PERSISTING_L2_CACHE_SIZE = 108


def _modelled(device_id: int) -> SimpleNamespace:
    """The simulated device: the default target's arch."""
    arch = arch_of(determine_target())
    figures = figures_for(arch.name)
    major, minor = arch.capability
    return SimpleNamespace(
        name=f"{figures.device} (simulated)", major=major, minor=minor, multi_processor_count=figures.mps,
        total_memory=48 << 30, max_threads_per_multi_processor=figures.threads_per_mp,
        regs_per_multiprocessor=figures.registers_per_mp, shared_memory_per_block=arch.max_shared_memory_per_block,
        shared_memory_per_multiprocessor=figures.shared_memory_per_mp, warp_size=arch.warp_size, l2_cache_size=0)


def get_musa_device_properties(device_id: int = 0) -> Any:
    """torch.musa's device properties, or the simulated device's (the same attribute names)."""
    if musa_device_present():
        import torch

        return torch.musa.get_device_properties(device_id)
    return _modelled(device_id)


def get_device_name(device_id: int = 0) -> str:
    return get_musa_device_properties(device_id).name


def get_num_sms(device_id: int = 0) -> int:
    """Multiprocessors: the grid a persistent kernel launches."""
    return int(get_musa_device_properties(device_id).multi_processor_count)


def get_device_attribute(attr: int, device_id: int = 0) -> int:
    props = get_musa_device_properties(device_id)
    arch = _arch_of(props)
    figures = figures_for(arch.name)
    answers = {
        MAX_THREADS_PER_BLOCK: 1024,
        MAX_SHARED_MEMORY_PER_BLOCK: arch.max_shared_memory_per_block,
        MAX_REGISTERS_PER_BLOCK: figures.registers_per_mp,
        MULTIPROCESSOR_COUNT: int(props.multi_processor_count),
        MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: figures.shared_memory_per_mp,
        MAX_PERSISTING_L2_CACHE_SIZE: 0,
    }
    if attr not in answers:
        raise ValueError(f"musaDeviceAttr {attr} is not answered here (known: {sorted(answers)})")
    return answers[attr]


def get_shared_memory_per_block(device_id: int = 0) -> int:
    return get_device_attribute(MAX_SHARED_MEMORY_PER_BLOCK, device_id)


def get_max_dynamic_shared_size_bytes(device_id: int = 0) -> int:
    return get_device_attribute(MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, device_id)


def get_persisting_l2_cache_max_size(device_id: int = 0) -> int:
    """MUSA has no persisting-L2 carve-out: 0 (T.annotate_l2_hit_ratio has nothing to size)."""
    return get_device_attribute(MAX_PERSISTING_L2_CACHE_SIZE, device_id)


def get_registers_per_block(device_id: int = 0) -> int:
    return get_device_attribute(MAX_REGISTERS_PER_BLOCK, device_id)


def _arch_of(props: Any):
    name = f"mp_{props.major}{props.minor}"
    return ARCHS[name] if name in ARCHS else arch_of(determine_target())
