"""What the performance model knows about each MUSA GPU: published figures where they exist, inferred ones otherwise.

Every figure carries its provenance (docs/PERF_FACTS.md has the sources): [S] a source states it, [I] inferred
(the reasoning is given), [A] assumed: nothing public says, so the value is a conventional one, a parameter of the
model to correct when a card is measured. The S5000's composition figures marked "fitted" (shared-memory rate,
launch cost, dependent and shuffle latency) were fitted on the calibration half of Moore Threads' measured S5000
rows, never on a held-out row: benchmark/s5000_calibration.py has the method and the command, and its FITTED must
equal them (testing/test_perf_model.py). The simulator's cycle model (src/tl_templates/sim/sim/profile.h) gets the
per-MP figures it needs through `sim_timing_flags`, so these tables are the one place they are written.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class ArchFigures:
    arch: str
    device: str
    mps: int  # multiprocessors ("cores"); blocks are spread over them
    clock_hz: float
    tensor_flops_per_cycle: Mapping[int, float]  # SQMMA, per MP, by operand width in bits; empty: no SQMMA
    warp_mma_flops_per_cycle: float  # per MP: mp_22's 128-thread warp MMA, mp_31's WMMA (16-bit operands)
    dram_bytes_per_s: float  # peak
    dram_efficiency: float  # the fraction of peak a streaming kernel sustains
    l2_bytes_per_s: float
    global_latency_cycles: float  # a global load's issue to its data
    async_latency_cycles: float  # an LDLMS / TME transfer's first byte
    shared_wavefronts_per_cycle: float  # per MP: one bank row (32 banks x 4 B) per cycle
    warp_instructions_per_cycle: float  # per MP: warp instructions issued (arithmetic and memory)
    # cycles from a warp's arithmetic instruction to the next that uses its result (the cycle model charges one:
    # model.py adds the rest to the critical path, less what asynchronous waits hide); 0: not modelled
    dependent_latency_cycles: float
    # cycles from a warp shuffle's (vote's, match's) issue to its result, which the next step of a reduction or lane
    # exchange waits for (the cycle model charges none: model.py adds them to the critical path); 0: not modelled
    shuffle_latency_cycles: float
    barrier_cycles: float  # a block barrier once its last thread arrives
    launch_seconds: float  # a kernel launch's fixed cost
    shared_memory_per_mp: int  # bytes
    threads_per_mp: int
    registers_per_mp: int  # 32-bit registers
    max_blocks_per_mp: int
    provenance: Mapping[str, str]

    @property
    def peak_tensor_flops(self) -> float:
        """The chip's dense 16-bit matrix FLOP/s (SQMMA where the arch has it, else warp MMA)."""
        per_cycle = self.tensor_flops_per_cycle.get(16, self.warp_mma_flops_per_cycle)
        return per_cycle * self.mps * self.clock_hz

    @property
    def transfer_bytes_per_cycle(self) -> float:
        """One MP's share of the L2, which serves its async transfers: the rate one block's copies stream at."""
        return self.l2_bytes_per_s / self.mps / self.clock_hz

    def describe(self) -> str:
        rows = [(f.name, getattr(self, f.name), self.provenance.get(f.name, ""))
                for f in fields(self) if f.name not in ("provenance", "arch", "device")]
        width = max(len(name) for name, _, _ in rows)
        lines = [f"performance figures of {self.arch} ({self.device})"]
        lines += [f"  {name:<{width}}  {value!s:<28} {why}" for name, value, why in rows]
        return "\n".join(lines)


_S5000 = ArchFigures(
    arch="mp_31", device="MTT S5000",
    mps=56, clock_hz=2.0e9,
    tensor_flops_per_cycle=MappingProxyType({8: 8192.0, 16: 4096.0, 32: 2048.0}),
    warp_mma_flops_per_cycle=2048.0,
    dram_bytes_per_s=1.6e12, dram_efficiency=0.82, l2_bytes_per_s=4.8e12,
    global_latency_cycles=600.0, async_latency_cycles=600.0, shared_wavefronts_per_cycle=0.75,
    warp_instructions_per_cycle=4.0, dependent_latency_cycles=10.0, shuffle_latency_cycles=48.0,
    barrier_cycles=20.0, launch_seconds=6e-6, shared_memory_per_mp=196608, threads_per_mp=2048,
    registers_per_mp=65536, max_blocks_per_mp=16,
    provenance=MappingProxyType({
        "mps": "[S] 56 MPs (TileLang-MUSA's S5000 kernels: mp_count = 56)",
        "clock_hz": "[A] not published; only FLOP/cycle x clock matters for matrix work",
        "tensor_flops_per_cycle": "[I] 16-bit: 56 MPs x 4096 x 2.0 GHz = 459 TFLOPS, half the 920 TFLOPS FP8 of the "
                                  "air-cooled card [S-press]; 8-bit 2x, tf32 0.5x [I]",
        "warp_mma_flops_per_cycle": "[A] half the SQMMA rate (WMMA reads registers, not shared tiles)",
        "dram_bytes_per_s": "[S-press] 1.6 TB/s",
        "dram_efficiency": "[I] TileLang-MUSA's best streaming baseline: 1309 GB/s",
        "l2_bytes_per_s": "[A] 3x DRAM, as on comparable GPUs",
        "global_latency_cycles": "[A] 600 cycles, as on comparable GPUs",
        "async_latency_cycles": "[A] as a global load",
        "shared_wavefronts_per_cycle": "[A] fitted: 0.75 bank rows (32 x 4 B) a cycle (1.0 before the fit)",
        "warp_instructions_per_cycle": "[A] 4 schedulers of 32 lanes: 56 x 128 lanes x 2 x 2.0 GHz = 29 TFLOPS FP32, "
                                       "near the one unverified 32 TFLOPS claim [W]",
        "dependent_latency_cycles": "[A] not published ([NF], PERF_FACTS.md); fitted: 10 on the dependent chain "
                                    "(6 when every instruction was taken as one chain), an effective figure that "
                                    "also carries uncounted instructions",
        "shuffle_latency_cycles": "[A] not published ([NF]); fitted: 48 (32 before the chain count; it trades "
                                  "against the dependent latency on chain-bound rows: not a measurement of its "
                                  "own)",
        "barrier_cycles": "[A]",
        "launch_seconds": "[A] fitted: 6 us (4 us before the fit)",
        "shared_memory_per_mp": "[I] at least the 192 KiB one block may take",
        "threads_per_mp": "[A]", "registers_per_mp": "[A]", "max_blocks_per_mp": "[A]",
    }),
)

_S4000 = ArchFigures(
    arch="mp_22", device="MTT S4000",
    mps=32, clock_hz=1.5e9,
    tensor_flops_per_cycle=MappingProxyType({}),
    warp_mma_flops_per_cycle=2048.0,
    dram_bytes_per_s=768e9, dram_efficiency=0.8, l2_bytes_per_s=2.3e12,
    global_latency_cycles=600.0, async_latency_cycles=600.0, shared_wavefronts_per_cycle=1.0,
    warp_instructions_per_cycle=2.0, dependent_latency_cycles=0.0, shuffle_latency_cycles=0.0,
    barrier_cycles=20.0, launch_seconds=4e-6, shared_memory_per_mp=73728, threads_per_mp=2048,
    registers_per_mp=65536, max_blocks_per_mp=16,
    provenance=MappingProxyType({
        "mps": "[A] not published; 128 tensor cores [W] in groups of 4",
        "clock_hz": "[I] 1.5 GHz reproduces every official S4000 figure (PERF_FACTS.md section 3)",
        "warp_mma_flops_per_cycle": "[I] 32 MPs x 2048 x 1.5 GHz = 98 TFLOPS FP16 [S-press: 98-100]",
        "dram_bytes_per_s": "[S-press] 768 GB/s",
        "dram_efficiency": "[A] as the S5000's",
        "l2_bytes_per_s": "[A] 3x DRAM",
        "global_latency_cycles": "[A]", "async_latency_cycles": "[A]", "shared_wavefronts_per_cycle": "[A]",
        "warp_instructions_per_cycle": "[I] 8192 FP32 lanes / 32 MPs = two 128-lane warps per cycle (25 TFLOPS "
                                       "FP32 [S-press] at 1.5 GHz)",
        "dependent_latency_cycles": "[A] not published ([NF]); 0: not modelled",
        "shuffle_latency_cycles": "[A] not published ([NF]); 0: not modelled",
        "barrier_cycles": "[A]", "launch_seconds": "[A]",
        "shared_memory_per_mp": "[I] at least the 72 KiB one block may take",
        "threads_per_mp": "[A]", "registers_per_mp": "[A]", "max_blocks_per_mp": "[A]",
    }),
)

ARCH_FIGURES: Mapping[str, ArchFigures] = MappingProxyType({"mp_22": _S4000, "mp_31": _S5000, "mp_32": _S5000})


def figures_for(arch: str) -> ArchFigures:
    try:
        return ARCH_FIGURES[arch]
    except KeyError:
        raise ValueError(f"no performance figures for arch {arch!r} (known: {', '.join(ARCH_FIGURES)})") from None


def sim_timing_flags(arch: str) -> list[str]:
    """The -D flags that give the simulator this arch's per-MP figures: the cycle model's, and the residency a
    cooperative launch is checked against (empty for an arch without figures: its launches count but do not time,
    and it has no cooperative launch)."""
    if arch not in ARCH_FIGURES:
        return []
    f = ARCH_FIGURES[arch]
    tensor = {bits: f.tensor_flops_per_cycle.get(bits, f.warp_mma_flops_per_cycle) for bits in (8, 16, 32)}
    values = {"TENSOR8": tensor[8], "TENSOR16": tensor[16], "TENSOR32": tensor[32],
              "WARP_MMA": f.warp_mma_flops_per_cycle, "GLOBAL_LATENCY": f.global_latency_cycles,
              "ASYNC_LATENCY": f.async_latency_cycles, "TRANSFER_BYTES": f.transfer_bytes_per_cycle,
              "BARRIER": f.barrier_cycles}
    # how many blocks stay resident at once: a cooperative launch larger than that fails (sim/grid_barrier.h)
    residency = {"COUNT": f.mps, "THREADS": f.threads_per_mp, "SHARED_BYTES": f.shared_memory_per_mp,
                 "BLOCKS": f.max_blocks_per_mp}
    return [f"-DTL_SIM_TIMING_{name}={value!r}" for name, value in values.items()] + \
        [f"-DTL_SIM_MP_{name}={value!r}" for name, value in residency.items()]
