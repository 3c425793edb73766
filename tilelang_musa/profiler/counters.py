"""What a launch would cost the hardware, counted by the simulator (src/tl_templates/sim/sim/profile.h).

`kernel.get_profiler().counters()` runs the kernel once in the simulator with TILELANG_SIM_PROFILE=2 (count, do not
print) and returns the launch's `Counters`; `TILELANG_SIM_PROFILE=1` prints them to stderr after every launch.
Counts are exact for the simulated execution: warp-level global requests and the 32-byte sectors they touch, shared
requests and the bank wavefronts they need, matrix instructions (SQMMA per squad, WMMA / MMA per warp; in all
and by shape) and their FLOPs, LDLMS and TME bytes, block barriers and async-barrier waits (per warp), warp shuffles
(per warp instruction; votes and matches too), arithmetic instructions (per warp, the generated statements' operators:
src/codegen/arithmetic_count.h), and the cycle model's times: each block's critical path (`block_cycles`), the tensor
pipe's busy cycles and the warps' stalls by kind (profile.h says what is timed and how; model.py turns them into a
device time). The bank and sector sizes are inferred (docs/PERF_FACTS.md). With `sample_blocks=N`
(TILELANG_SIM_PROFILE_BLOCKS) only N of the grid's blocks run, evenly spaced: the counts are theirs (`blocks` of
`grid_blocks`; `scaled()` extrapolates), and the other blocks' outputs are never written.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Iterator, Mapping

PROFILE_ENV = "TILELANG_SIM_PROFILE"
SAMPLE_ENV = "TILELANG_SIM_PROFILE_BLOCKS"
SECTOR_BYTES = 32
CHAIN_UNITS = 65536  # profile.h kChainUnits


@dataclass(frozen=True)
class Counters:
    kernel: str
    grid_blocks: int  # the launch's shape
    threads_per_block: int
    dynamic_smem_bytes: int
    global_load_requests: int
    global_load_sectors: int
    global_load_bytes: int
    global_store_requests: int
    global_store_sectors: int
    global_store_bytes: int
    shared_load_requests: int
    shared_load_wavefronts: int
    shared_load_ideal_wavefronts: int
    shared_store_requests: int
    shared_store_wavefronts: int
    shared_store_ideal_wavefronts: int
    sqmma: int
    sqmma_flops: int
    warp_mma: int
    warp_mma_flops: int
    ldlms_bytes: int
    tme_load_bytes: int
    tme_store_bytes: int
    arithmetic_instructions: int  # per warp: the statements' arithmetic, as the code generator counts it
    block_barriers: int
    async_barrier_waits: int
    blocks: int  # blocks simulated (all of them, unless sampled)
    # the cycle model (profile.h): per block, its critical path with the overlap its asynchrony allows; summed
    # over the blocks simulated, but block_cycles_max, the longest block's
    block_cycles: int
    block_cycles_max: int
    tensor_cycles: int  # the tensor pipe busy
    barrier_stall_cycles: int  # warps waiting at block barriers (per warp)
    async_barrier_stall_cycles: int  # warps waiting for async-barrier phases (TME loads, producer arrivals)
    copy_wait_stall_cycles: int  # warps waiting for their LDLMS copies and TME stores
    mma_wait_stall_cycles: int  # warps waiting for their SQMMA groups
    # matrix instructions by kind and shape: {"sqmma m64n128k16": 12, "warp_mma m32n32k16": 8}
    mma_shapes: Mapping[str, int] = field(default_factory=dict)
    # warp shuffles, votes and matches (per warp instruction), the reduction templates' included; 0 in counters
    # taken before the simulator counted them
    warp_shuffles: int = 0
    # the mean warp's dependent chain of arithmetic, per warp summed as arithmetic_instructions is, in
    # 1/CHAIN_UNITS of an instruction: each statement's dependence depth over the independent loop iterations it
    # runs beside (src/codegen/dependence_depth.h); -1 in counters taken before the simulator counted it
    arithmetic_chain_units: int = -1

    @property
    def arithmetic_chain(self) -> float:
        """The arithmetic instructions on the warps' dependent chains (summed over warps as
        arithmetic_instructions is); every instruction where the counters predate the chain count."""
        if self.arithmetic_chain_units < 0:
            return float(self.arithmetic_instructions)
        return self.arithmetic_chain_units / CHAIN_UNITS

    @property
    def global_load_efficiency(self) -> float:
        """Distinct bytes asked for over bytes the sectors move (1.0: perfectly coalesced loads; lanes reading one
        address ask for its bytes once)."""
        return self.global_load_bytes / (self.global_load_sectors * SECTOR_BYTES) if self.global_load_sectors else 1.0

    @property
    def global_store_efficiency(self) -> float:
        return self.global_store_bytes / (self.global_store_sectors * SECTOR_BYTES) if self.global_store_sectors \
            else 1.0

    @property
    def shared_bank_conflicts(self) -> int:
        """Wavefronts beyond the minimum the requests' distinct words need (loads and stores)."""
        return (self.shared_load_wavefronts - self.shared_load_ideal_wavefronts
                + self.shared_store_wavefronts - self.shared_store_ideal_wavefronts)

    @property
    def mma_flops(self) -> int:
        return self.sqmma_flops + self.warp_mma_flops

    def scaled(self) -> "Counters":
        """The counts extrapolated from the simulated blocks to the whole grid (itself when every block ran)."""
        if self.blocks in (0, self.grid_blocks):
            return self
        shape = ("kernel", "grid_blocks", "threads_per_block", "dynamic_smem_bytes", "block_cycles_max")
        factor = self.grid_blocks / self.blocks
        counts = {f.name: getattr(self, f.name) if f.name in shape or getattr(self, f.name) < 0
                  else round(getattr(self, f.name) * factor) for f in fields(self) if f.name != "mma_shapes"}
        return Counters(**counts, mma_shapes={k: round(v * factor) for k, v in self.mma_shapes.items()})

    def table(self) -> str:
        rows = [(f.name, getattr(self, f.name)) for f in fields(self) if f.name not in ("kernel", "mma_shapes")]
        rows += [(f"  {shape}", count) for shape, count in self.mma_shapes.items()]
        rows += [("global_load_efficiency", f"{self.global_load_efficiency:.3f}"),
                 ("global_store_efficiency", f"{self.global_store_efficiency:.3f}"),
                 ("shared_bank_conflicts", self.shared_bank_conflicts)]
        width = max(len(name) for name, _ in rows)
        return "\n".join([f"counters of {self.kernel}"] + [f"  {name:<{width}}  {value}" for name, value in rows])


def read_counters(library: Path) -> Counters:
    """The counters of the last launch profiled by the kernel library at `library` (already loaded by its
    launcher: this opens the same copy)."""
    lib = ctypes.CDLL(str(library))
    lib.tl_sim_last_profile.restype = ctypes.c_char_p
    values = json.loads(lib.tl_sim_last_profile().decode())
    if not values:
        raise RuntimeError("no launch was profiled (TILELANG_SIM_PROFILE was not set when the kernel ran)")
    names = {f.name for f in fields(Counters)}
    return Counters(**{k: v for k, v in values.items() if k in names})


@contextlib.contextmanager
def profiling(print_table: bool = False, sample_blocks: int | None = None, trace: bool = False) -> Iterator[None]:
    """Launches inside count (and print, `print_table`; or record the timeline too, `trace`: trace.py; run only
    `sample_blocks` blocks); the simulator reads the variables at each launch."""
    mode = "3" if trace else "1" if print_table else "2"
    values = {PROFILE_ENV: mode, SAMPLE_ENV: str(sample_blocks) if sample_blocks else None}
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            _set(name, value)
        yield
    finally:
        for name, value in saved.items():
            _set(name, value)


def _set(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
