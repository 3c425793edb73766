"""`kernel.get_profiler()`: run a kernel on generated inputs, check it against a reference, time it.

The methods and their arguments are upstream TileLang's: `run_once`, `assert_allclose`, `manual_assert_close`,
`assert_consistent`, `do_bench` (see bench.py for what warmup/rep mean and how a run is timed). `counters` is ours:
what one launch would cost the hardware, counted by the simulator (counters.py); `model` is ours too: the
launch's modelled time on the arch it was compiled for (model.py); `trace` writes the cycle model's timeline of
sampled blocks as a Chrome / Perfetto trace (trace.py).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from .bench import do_bench
from .arch_figures import figures_for
from .counters import Counters, profiling, read_counters
from .model import ModelledTime, model_launch, registers_per_thread
from .trace import read_timeline, write_trace
from .tensor_supply import TensorSupplyType, supply_tensor


# Blocks model() simulates by default, evenly spaced over the grid: enough for the mean of a regular grid.
DEFAULT_MODEL_SAMPLE = 16
# Blocks trace() records by default: a timeline is read block by block, and each adds a dozen tracks.
DEFAULT_TRACE_SAMPLE = 2


class Profiler:
    def __init__(self, kernel: Any, tensor_supply_type: TensorSupplyType = TensorSupplyType.Auto, seed: int = 0):
        self.kernel = kernel
        self.supply_type = tensor_supply_type
        self.seed = seed
        self.device = kernel.backend.device

    @property
    def params(self) -> list:
        return list(self.kernel.params)

    def _get_params(self, with_output: bool = False) -> list:
        """The kernel's parameter specs (`ParamSpec`), outputs included only when asked (never the T.alloc_global
        workspaces: the launcher allocates them)."""
        return [p for p in self.kernel.params if (with_output or not p.is_output) and not p.is_workspace]

    def _get_inputs(self, with_output: bool = False,
                    dynamic_symbolic_constraints: dict[str, int] | None = None) -> list[Any]:
        """Tensors for the kernel's inputs (and outputs, `with_output`), made by `supply_type` from a generator
        seeded with `seed`: every call returns the same values. Symbolic sizes take their values from
        `dynamic_symbolic_constraints` ({"m": 2048})."""
        sizes = dict(dynamic_symbolic_constraints or {})
        specs = self._get_params(with_output)
        unbound = sorted({d for s in specs if s.kind == "tensor" for d in s.shape if isinstance(d, str)} - set(sizes))
        if unbound:
            raise ValueError(f"profiler: sizes {unbound} are symbolic; pass dynamic_symbolic_constraints="
                             f"{{{', '.join(repr(u) + ': ...' for u in unbound)}}} or call the kernel with tensors")
        gen = torch.Generator().manual_seed(self.seed)
        taken_from_shapes = set(self.kernel.metadata.host.size_params)  # the launcher reads them off the tensors
        inputs = []
        for spec in specs:
            if spec.kind == "scalar" and spec.name in taken_from_shapes:
                continue
            if spec.kind == "scalar":
                if spec.name in sizes:
                    inputs.append(sizes[spec.name])
                    continue
                raise ValueError(f"profiler: scalar parameter `{spec.name}` needs a value; benchmark a lambda instead")
            if spec.kind == "pointer":
                raise ValueError(f"profiler: pointer parameter `{spec.name}` (T.ptr) needs an address; benchmark a "
                                 "lambda instead")
            inputs.append(supply_tensor(spec, sizes, self.supply_type, self.device, gen))
        return inputs

    def run_once(self, func: Callable | None = None) -> Any:
        return (func or self.kernel)(*self._get_inputs())

    def _outputs_and_references(self, reference_program: Callable, input_tensors: Sequence[Any] | None):
        inputs = list(input_tensors) if input_tensors is not None else self._get_inputs()
        refs = reference_program(*inputs)
        outs = self.kernel(*inputs)
        return _as_list(outs, inputs), _as_list(refs, None)

    def assert_allclose(self, reference_program: Callable, input_tensors: Sequence[Any] | None = None,
                        atol: float = 1e-2, rtol: float = 1e-2, max_mismatched_ratio: float = 0.01) -> None:
        """Run the kernel and `reference_program` on the same inputs (`input_tensors`, else generated ones) and
        raise AssertionError when more than `max_mismatched_ratio` of any output's elements differ beyond
        `atol + rtol * |ref|`. A reference output that is None is not compared; NaN matches NaN, as upstream's."""
        outs, refs = self._outputs_and_references(reference_program, input_tensors)
        if len(outs) != len(refs):
            raise AssertionError(f"the kernel returned {len(outs)} outputs, the reference {len(refs)}")
        for index, (out, ref) in enumerate(zip(outs, refs)):
            if out is None or ref is None:
                continue
            out, ref = out.float(), torch.as_tensor(ref).to(out.device).float()
            if out.shape != ref.shape:
                raise AssertionError(f"output {index}: the kernel's shape is {tuple(out.shape)}, "
                                     f"the reference's {tuple(ref.shape)}")
            mismatched = ~torch.isclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
            ratio = mismatched.float().mean().item() if out.numel() else 0.0
            if ratio > max_mismatched_ratio:
                worst = (out - ref).abs().nan_to_num(float("inf")).max().item()
                raise AssertionError(
                    f"output {index}: {int(mismatched.sum())} of {out.numel()} elements ({ratio:.2%}) differ from "
                    f"the reference beyond atol={atol}, rtol={rtol} (allowed: {max_mismatched_ratio:.2%}); "
                    f"largest difference {worst:g}")

    def manual_assert_close(self, reference_program: Callable, input_tensors: Sequence[Any] | None = None,
                            manual_check_prog: Callable | None = None) -> None:
        """Run both programs and hand their outputs (two lists) to `manual_check_prog`, which raises on mismatch."""
        outs, refs = self._outputs_and_references(reference_program, input_tensors)
        if len(outs) != len(refs):
            raise AssertionError(f"the kernel returned {len(outs)} outputs, the reference {len(refs)}")
        if manual_check_prog is None:
            raise ValueError("manual_assert_close needs manual_check_prog")
        manual_check_prog(outs, refs)

    def assert_consistent(self, repeat: int = 10) -> None:
        """Run the kernel `repeat` more times on the same inputs; every run must give the first run's outputs."""
        inputs = self._get_inputs()
        first = [t.clone() for t in _as_list(self.kernel(*inputs), inputs)]
        for _ in range(repeat):
            for a, b in zip(_as_list(self.kernel(*inputs), inputs), first):
                if not torch.equal(a, b):
                    raise AssertionError("the kernel's outputs differ between runs on the same inputs")

    def do_bench(self, func: Callable | None = None, warmup: float = 25, rep: float = 100, n_warmup: int = 0,
                 n_repeat: int = 0, input_tensors: Sequence[Any] | None = None, backend: str = "event",
                 quantiles: Sequence[float] | None = None, return_mode: str = "mean",
                 dynamic_symbolic_constraints: dict[str, int] | None = None, device: Any = None,
                 early_stop_baseline: float | None = None) -> float | list[float]:
        """Milliseconds per call of `func` (default: the kernel) on `input_tensors` (default: generated ones).
        `warmup`/`rep` are milliseconds; `n_warmup`/`n_repeat` > 0 fix the counts instead (see bench.py)."""
        if input_tensors is not None:
            inputs = list(input_tensors)
        else:
            inputs = self._get_inputs(dynamic_symbolic_constraints=dynamic_symbolic_constraints)
        target = func or self.kernel
        return do_bench(partial(target, *inputs), warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat,
                        quantiles=quantiles, backend=backend, return_mode=return_mode,
                        device=device if device is not None else self.device,
                        early_stop_baseline=early_stop_baseline)


    def counters(self, input_tensors: Sequence[Any] | None = None,
                 dynamic_symbolic_constraints: dict[str, int] | None = None,
                 sample_blocks: int | None = None) -> Counters:
        """Run the kernel once in the simulator on `input_tensors` (default: generated ones) and return what the
        launch counted: global sectors, shared bank wavefronts, matrix instructions, async-copy bytes, barriers
        (counters.py). `sample_blocks`: run only that many of the grid's blocks (their outputs only are written).
        A program of several kernels: the last one's."""
        return self._profiled_run("counters", input_tensors, dynamic_symbolic_constraints, sample_blocks)[0]

    def model(self, input_tensors: Sequence[Any] | None = None,
              dynamic_symbolic_constraints: dict[str, int] | None = None,
              sample_blocks: int | None = DEFAULT_MODEL_SAMPLE, in_place: Sequence[Any] = ()) -> ModelledTime:
        """The kernel's modelled time on the arch it was compiled for, from one simulated launch on
        `input_tensors` (default: generated ones) of `sample_blocks` evenly spaced blocks (None: all): seconds,
        TFLOPS, DRAM GB/s, the limiting resource, occupancy and the roofline bound (model.py). A program of
        several kernels: the last one's launch, with all the program's tensors as its distinct bytes.
        `in_place`: the input tensors the kernel reads and writes back (a recurrent state): DRAM moves their bytes
        twice (the counters do not tell which tensor a load or store touched)."""
        in_place = list(in_place)
        if in_place and input_tensors is None:
            raise ValueError("model(in_place=...) names tensors of the launch: pass them in input_tensors too")
        counters, tensors = self._profiled_run("model", input_tensors, dynamic_symbolic_constraints, sample_blocks)
        storages = {t.untyped_storage().data_ptr() for t in tensors if isinstance(t, torch.Tensor)}
        for i, t in enumerate(in_place):
            if not isinstance(t, torch.Tensor) or t.untyped_storage().data_ptr() not in storages:
                raise ValueError(f"model(in_place=...): item {i} is not one of the launch's tensors "
                                 f"({type(t).__name__})")
        figures = figures_for(self.kernel.target.attrs["arch"])
        registers = registers_per_thread(self.kernel.get_kernel_source())
        return model_launch(counters, figures, _distinct_bytes(tensors), registers, _distinct_bytes(in_place))

    def trace(self, path: str | Path, sample_blocks: int | None = DEFAULT_TRACE_SAMPLE,
              input_tensors: Sequence[Any] | None = None,
              dynamic_symbolic_constraints: dict[str, int] | None = None) -> Path:
        """Run the kernel once in the simulator on `input_tensors` (default: generated ones), `sample_blocks` of
        its blocks evenly spaced (None: all), and write the cycle model's timeline of those blocks to `path` as a
        Chrome / Perfetto trace: a track per warp, slices in cycles (trace.py). Returns the path. The launch's
        counters are those counters() gives for the same blocks. A program of several kernels: the last one's."""
        self._profiled_run("trace", input_tensors, dynamic_symbolic_constraints, sample_blocks, trace=True)
        return write_trace(path, read_timeline(self.kernel.library_path))

    def _profiled_run(self, what: str, input_tensors: Sequence[Any] | None,
                      dynamic_symbolic_constraints: dict[str, int] | None,
                      sample_blocks: int | None, trace: bool = False) -> tuple[Counters, list[Any]]:
        """One launch in the simulator with the counters on: its counters, and its tensors (inputs, outputs)."""
        if self.kernel.backend.name != "sim":
            raise RuntimeError(f"{what}() needs the simulator (execution_backend='sim'); this kernel runs on "
                               f"{self.kernel.backend.name!r}")
        inputs = list(input_tensors) if input_tensors is not None else \
            self._get_inputs(dynamic_symbolic_constraints=dynamic_symbolic_constraints)
        source = self.kernel.get_kernel_source()
        if sample_blocks is not None and ("tl::grid_flag_wait" in source or "this_grid().sync()" in source):
            # a block waits for flags earlier blocks publish (a stream-K schedule), or at a grid barrier for every
            # block: a sample would leave the publishers out, and the waits' cycles need them (sim/grid_flags.h,
            # sim/grid_barrier.h), so every block runs
            sample_blocks = None
        with profiling(sample_blocks=sample_blocks, trace=trace):
            outputs = self.kernel(*inputs)
        return read_counters(self.kernel.library_path), inputs + _as_list(outputs, None)


def _distinct_bytes(tensors: Sequence[Any]) -> int:
    """The bytes of the tensors' storage, each storage once."""
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor):
            storage = t.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def _as_list(result: Any, inputs: list[Any] | None) -> list[Any]:
    """Outputs as a list: a tensor, a tuple/list, or None (a kernel with no outputs writes into `inputs`)."""
    if result is None:
        return list(inputs) if inputs is not None else []
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]
