"""A modelled device time for a launch, from the simulator's counters and the arch's figures (arch_figures.py).

`kernel.get_profiler().model()` runs the kernel once in the simulator (a sample of its blocks for large grids) and
composes what the launch counted into a time on the arch the kernel was compiled for:

- occupancy: how many blocks an MP holds at once (`blocks_per_mp`), limited by shared memory, threads, registers
  (estimated from the kernel's per-thread arrays: a lower bound; never below one block) and the MP's block slots;
- the launch takes the longest of
    critical_path  `waves` rounds of the mean block's critical path in simulated cycles (profile.h's cycle model:
                   the overlap the kernel's pipeline and warp specialization allow is in it; one block alone on the
                   MP), never less than the longest sampled block's (blocks that differ: variable-length
                   sequences, causal masks), each lengthened by its mean warp's dependent-instruction latency
                   beyond the one cycle the cycle model charges (`dependent_latency_cycles`, [A]) and shuffle
                   latency (`shuffle_latency_cycles`, [A]; the cycle model charges none), less what the warp's
                   waits for SQMMA, copies and async-barrier phases hide (`latency_chain_cycles`),
                   and, on the busiest MP, for the ceil(grid / MPs) blocks it runs
                   (not blocks_per_mp x waves: a grid smaller than the MPs' slots leaves them empty),
    issue          their warp instructions (arithmetic, memory and shuffles) at the MP's issue rate,
    tensor         their matrix instructions at the arch's rate per operand width,
    shared         their shared-memory wavefronts, bank conflicts included,
    l2             the bytes they move through the L2 (global sectors, LDLMS, TME);
    and, for the chip,
    dram           the launch's distinct bytes (the arguments' storage, read or written once: an L2 that catches
                   every re-read, [A]), plus the tensors updated in place once more (read, then written back),
                   at the sustained DRAM bandwidth, however few MPs are busy;
  in one wave the MP terms grow in proportion to the longest block too; add the launch cost. The longest term
  names the limiting resource.

`roofline_seconds` is the bound no schedule beats: the matrix work at the tensor pipes' peak, or the distinct bytes
at peak DRAM bandwidth. The latency term charges a warp's dependent chain of arithmetic: each statement's
dependence depth, shared by the independent loop iterations it runs beside (src/codegen/dependence_depth.h);
statements in sequence are taken as dependent, so straight-line independent work is still modelled slow. The
figures marked [A] in arch_figures.py are what a measurement on a card should correct. docs/PERF_MODEL.md has
the method, the calibration and the gaps.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping

from ..target import ARCHS
from .arch_figures import ArchFigures
from .counters import SECTOR_BYTES, Counters

RESOURCES = ("critical_path", "issue", "tensor", "shared", "l2", "dram")

# A local array in the generated MUSA C: `__align__(16) float acc[128];` (shared memory is declared `__shared__`).
_LOCAL_ARRAY = re.compile(r"^\s*(?:__align__\(\d+\)\s+)?([A-Za-z_][\w:]*)\s+[A-Za-z_]\w*\[(\d+)\];", re.M)
_ELEMENT_BYTES = {"double": 8, "int64_t": 8, "uint64_t": 8, "half_t": 2, "half": 2, "bfloat16_t": 2,
                  "__half": 2, "int16_t": 2, "uint16_t": 2, "int8_t": 1, "uint8_t": 1, "char": 1,
                  "fp8_e4_t": 1, "fp8_e5_t": 1, "fp8_e8_t": 1, "fp8_e4fnuz_t": 1, "fp8_e5fnuz_t": 1, "bool": 1}
# [A] registers a thread needs besides its arrays: indices, addresses, loop counters.
BASE_REGISTERS = 32


def registers_per_thread(source: str) -> int:
    """A lower bound on the 32-bit registers a thread of the kernel in `source` needs: its local arrays, plus a
    base for its scalars (the MUSA compiler's count is not available without mcc)."""
    array_bytes = sum(int(n) * _ELEMENT_BYTES.get(t, 4) for t, n in _LOCAL_ARRAY.findall(source))
    return BASE_REGISTERS + -(-array_bytes // 4)


@dataclass(frozen=True)
class ModelledTime:
    kernel: str
    arch: str
    device: str
    seconds: float
    tflops: float  # matrix FLOPs per second, 1e12
    dram_gbps: float  # the launch's distinct bytes per second, 1e9
    limiter: str  # the resource of the longest term (RESOURCES)
    resource_seconds: Mapping[str, float]  # each resource's term over the whole grid, launch cost excluded
    roofline_seconds: float
    blocks_per_mp: int
    occupancy_limit: str  # what bounds blocks_per_mp: shared_memory, threads, registers or block_slots
    registers_per_thread: int
    waves: int
    grid_blocks: int
    simulated_blocks: int  # the blocks the counts come from (evenly spaced over the grid)
    distinct_bytes: int  # the storage of the launch's tensors
    l2_bytes: int  # what the grid moves through the L2 (scaled from the simulated blocks)
    counters: Counters

    @property
    def l2_reuse(self) -> float:
        """Bytes through the L2 per distinct byte: how often the launch re-reads its data (1.0: streamed once)."""
        return self.l2_bytes / self.distinct_bytes if self.distinct_bytes else 0.0

    @property
    def milliseconds(self) -> float:
        return self.seconds * 1e3

    def table(self) -> str:
        rows = [("modelled time", f"{self.seconds * 1e6:,.1f} us on {self.device} ({self.arch})"),
                ("limited by", self.limiter),
                ("TFLOPS", f"{self.tflops:.1f}"), ("DRAM GB/s", f"{self.dram_gbps:.1f}"),
                ("roofline", f"{self.roofline_seconds * 1e6:,.1f} us")]
        rows += [(f"  {name}", f"{value * 1e6:,.1f} us") for name, value in self.resource_seconds.items()]
        rows += [("L2 reuse", f"{self.l2_reuse:.1f} bytes through the L2 per distinct byte")]
        rows += [("occupancy", f"{self.blocks_per_mp} block(s) per MP, limited by {self.occupancy_limit} "
                               f"(~{self.registers_per_thread} registers per thread)"),
                 ("waves", f"{self.waves} of the grid's {self.grid_blocks} blocks"),
                 ("simulated blocks", str(self.simulated_blocks))]
        width = max(len(name) for name, _ in rows)
        return "\n".join([f"model of {self.kernel}"] + [f"  {name:<{width}}  {value}" for name, value in rows])


def occupancy(counters: Counters, figures: ArchFigures, registers: int) -> tuple[int, str]:
    """Blocks per MP and what limits it; ValueError when one block's threads or shared memory do not fit an MP.
    Registers limit the blocks beyond the first only: the estimate is rough and the register file [A], and a
    compiler spills rather than refuse a block."""
    limits = {}  # on a tie the first named limits
    if counters.dynamic_smem_bytes:
        limits["shared_memory"] = figures.shared_memory_per_mp // counters.dynamic_smem_bytes
    limits["threads"] = figures.threads_per_mp // counters.threads_per_block
    limits["block_slots"] = figures.max_blocks_per_mp
    limits["registers"] = max(1, figures.registers_per_mp // (registers * counters.threads_per_block))
    limit = min(limits, key=lambda name: limits[name])
    if limits[limit] < 1:
        raise ValueError(f"one block of {counters.kernel} does not fit an MP of the {figures.device}: {limit} "
                         f"({counters.threads_per_block} threads, {counters.dynamic_smem_bytes} B shared memory, "
                         f"~{registers} registers per thread)")
    return limits[limit], limit


def model_launch(counters: Counters, figures: ArchFigures, distinct_bytes: int, registers: int,
                 in_place_bytes: int = 0) -> ModelledTime:
    """The modelled time of the launch `counters` describe (see the module docstring). `distinct_bytes`: the
    storage of the launch's tensors; `registers`: per thread (registers_per_thread); `in_place_bytes`: the storage
    of tensors the launch reads and writes back in place (a recurrent state), which DRAM moves twice: read, then
    written. No more than the launch's stores wrote is counted (its store and TME-store bytes, scaled to the grid)."""
    if counters.blocks == 0:
        raise ValueError(f"the launch of {counters.kernel} ran no block; nothing to model")
    blocks_per_mp, limit = occupancy(counters, figures, registers)
    per_block = 1.0 / counters.blocks
    clock = figures.clock_hz
    l2_bytes = _l2_bytes(counters)
    wavefronts = counters.shared_load_wavefronts + counters.shared_store_wavefronts
    instructions = counters.arithmetic_instructions + counters.global_load_requests + counters.global_store_requests \
        + counters.shared_load_requests + counters.shared_store_requests + counters.warp_shuffles
    waves = math.ceil(counters.grid_blocks / (figures.mps * blocks_per_mp))
    # The MP's own resources serve the blocks it runs: the busiest MP runs ceil(grid / MPs) of them (fewer than
    # blocks_per_mp x waves when the grid leaves MPs or block slots empty: a grid of 16 blocks puts one on each of
    # 16 MPs, whatever the occupancy allows).
    busiest_mp_blocks = math.ceil(counters.grid_blocks / figures.mps)
    block_cycles = {
        "issue": instructions * per_block / figures.warp_instructions_per_cycle,
        "tensor": counters.tensor_cycles * per_block,
        "shared": wavefronts * per_block / figures.shared_wavefronts_per_cycle,
        "l2": l2_bytes * per_block / figures.transfer_bytes_per_cycle,
    }
    chain = latency_chain_cycles(counters, figures)
    mean_cycles = counters.block_cycles * per_block + chain
    resource_seconds = {"critical_path": waves * mean_cycles / clock}
    resource_seconds.update({name: busiest_mp_blocks * cycles / clock for name, cycles in block_cycles.items()})
    # DRAM is the chip's, not an MP's: the launch's bytes at the sustained bandwidth, however few MPs ask for them
    # (how fast few MPs can ask is their l2 term). In-place tensors are read and written back.
    dram_bytes = distinct_bytes + min(in_place_bytes, total_written_bytes(counters))
    resource_seconds["dram"] = dram_bytes / (figures.dram_bytes_per_s * figures.dram_efficiency)
    # No launch ends before its longest block: a grid whose blocks differ (variable-length sequences, causal masks)
    # in one wave takes its longest sampled block, not the mean one; that block's MP also issues, reads shared
    # memory and moves bytes for longer, by as much as its critical path is longer than the mean (its counts are
    # not kept apart, so they are taken in proportion).
    longest_cycles = counters.block_cycles_max + chain
    resource_seconds["critical_path"] = max(resource_seconds["critical_path"], longest_cycles / clock)
    if waves == 1 and mean_cycles > 0 and longest_cycles > mean_cycles:
        for name in ("issue", "tensor", "shared", "l2"):
            resource_seconds[name] *= longest_cycles / mean_cycles
    limiter = max(resource_seconds, key=lambda name: resource_seconds[name])
    seconds = resource_seconds[limiter] + figures.launch_seconds
    total = counters.scaled()
    tensor_peak_seconds = total.tensor_cycles / figures.mps / clock
    roofline = max(tensor_peak_seconds, dram_bytes / figures.dram_bytes_per_s)
    return ModelledTime(
        kernel=counters.kernel, arch=figures.arch, device=figures.device, seconds=seconds,
        tflops=total.mma_flops / seconds / 1e12, dram_gbps=distinct_bytes / seconds / 1e9, limiter=limiter,
        resource_seconds=resource_seconds, roofline_seconds=roofline, blocks_per_mp=blocks_per_mp,
        occupancy_limit=limit, registers_per_thread=registers, waves=waves, grid_blocks=counters.grid_blocks,
        simulated_blocks=counters.blocks, distinct_bytes=distinct_bytes, l2_bytes=_l2_bytes(total),
        counters=counters)


def _warps(counters: Counters, figures: ArchFigures) -> int:
    return counters.blocks * -(-counters.threads_per_block // ARCHS[figures.arch].warp_size)


def dependent_chain_cycles(counters: Counters, figures: ArchFigures) -> float:
    """The dependent latency the cycle model leaves out: it charges a warp one cycle per arithmetic instruction,
    but an instruction that uses its predecessor's result waits `dependent_latency_cycles` for it. Taken as every
    instruction on the mean warp's dependent chain (`arithmetic_chain`: each statement's dependence depth, shared
    by the independent loop iterations it runs beside, which the warp overlaps) waiting that long, (latency - 1)
    cycles more each, before the overlap latency_chain_cycles() takes off; 0 where the figure is 0 or 1 (not
    modelled). Counters taken before the chain was counted put every arithmetic instruction on it."""
    if figures.dependent_latency_cycles <= 1 or not counters.blocks:
        return 0.0
    return (figures.dependent_latency_cycles - 1) * counters.arithmetic_chain / _warps(counters, figures)


def shuffle_chain_cycles(counters: Counters, figures: ArchFigures) -> float:
    """The shuffle latency the cycle model leaves out: it lets a shuffle's lanes leave it at once, but each step of
    a reduction or lane exchange waits `shuffle_latency_cycles` for its partners' values. Taken as every one of the
    mean warp's shuffles (votes and matches too) on its chain, before the overlap latency_chain_cycles() takes
    off; 0 where the figure is 0."""
    if figures.shuffle_latency_cycles <= 0 or not counters.blocks:
        return 0.0
    return figures.shuffle_latency_cycles * counters.warp_shuffles / _warps(counters, figures)


def asynchronous_wait_cycles(counters: Counters, figures: ArchFigures) -> float:
    """The mean warp's cycles waiting for work that runs beside it: its SQMMA groups on the tensor pipe, its
    LDLMS copies and TME stores, the async-barrier phases a producer's transfers complete. Not its block-barrier
    waits (those wait for other warps, whose chains are as long)."""
    if not counters.blocks:
        return 0.0
    waits = counters.mma_wait_stall_cycles + counters.copy_wait_stall_cycles + counters.async_barrier_stall_cycles
    return waits / _warps(counters, figures)


def latency_chain_cycles(counters: Counters, figures: ArchFigures) -> float:
    """What the dependent and shuffle latencies add to a block's critical path: the mean warp's chains
    (dependent_chain_cycles + shuffle_chain_cycles) beyond its asynchronous waits. A warp whose instructions take
    longer reaches its next wait for the tensor pipe, a copy or a producer later, and that work, which runs beside
    it, has gone on meanwhile: it waits as much less. So a warp that spends its time waiting for SQMMA or copies
    (FlashAttention's softmax between two GEMMs, a dequantizing loop fed by copies) hides its latency there, and a
    warp that runs one chain with nothing beside it (GDN decode's and MTP's recurrences) pays all of it."""
    chain = dependent_chain_cycles(counters, figures) + shuffle_chain_cycles(counters, figures)
    return max(0.0, chain - asynchronous_wait_cycles(counters, figures))


def total_written_bytes(counters: Counters) -> int:
    """The bytes the launch's stores and TME stores wrote, extrapolated from the simulated blocks to the grid."""
    scale = counters.grid_blocks / counters.blocks if counters.blocks else 0.0
    return round((counters.global_store_bytes + counters.tme_store_bytes) * scale)


def _l2_bytes(counters: Counters) -> int:
    sectors = counters.global_load_sectors + counters.global_store_sectors
    return sectors * SECTOR_BYTES + counters.ldlms_bytes + counters.tme_load_bytes + counters.tme_store_bytes
