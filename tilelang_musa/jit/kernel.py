"""JITKernel: a compiled kernel. Call it with tensors; read its MUSA source; benchmark it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tvm
from tvm import tirx

from ..codegen import KernelSource
from .backend import Backend
from .launcher import Launcher, ParamSpec


@dataclass(frozen=True)
class CompiledArtifact:
    source: KernelSource
    library: Path
    device_func: tirx.PrimFunc  # the (first) lowered device function the printer saw


class JITKernel:
    """A kernel compiled for one target and backend.

    `kernel(*inputs)` checks the inputs, allocates the outputs (`out_idx` / `T.empty`), runs, and returns
    the outputs (one tensor, a tuple, or None)."""

    def __init__(self, artifact: CompiledArtifact, params: list[ParamSpec], backend: Backend,
                 target: tvm.target.Target, program: tirx.PrimFunc, pass_configs: dict,
                 size_params: list[str] | None = None):
        self.artifact = artifact
        self.params = params
        self.backend = backend
        self.target = target
        self.program = program
        self.pass_configs = pass_configs
        # size parameters (T.dynamic) are taken from the tensors' shapes, not passed by the caller
        self.launcher = Launcher(str(artifact.library), params, backend.device, artifact.source.kernel_name,
                                 scalar_bindings=size_params or ())

    def __call__(self, *args: Any) -> Any:
        return self.launcher(*args)

    @property
    def kernel_name(self) -> str:
        return self.artifact.source.kernel_name

    @property
    def out_idx(self) -> list[int]:
        return [i for i, p in enumerate(self.params) if p.is_output]

    def get_kernel_source(self) -> str:
        """The complete MUSA source compiled for this kernel (templates include, kernel, host wrapper)."""
        return self.artifact.source.text

    def get_device_source(self) -> str:
        return self.artifact.source.device

    def get_host_source(self) -> str:
        return self.artifact.source.host

    def get_profiler(self, tensor_supply_type: Any = None):
        """A Profiler that runs this kernel on generated inputs (`run_once`, `assert_allclose`, `do_bench`)."""
        from ..profiler import Profiler, TensorSupplyType

        return Profiler(self, tensor_supply_type or TensorSupplyType.Auto)

    def show_source(self) -> None:
        print(self.get_kernel_source())

    @property
    def library_path(self) -> Path:
        return self.artifact.library

    def __repr__(self) -> str:
        arch = self.target.attrs["arch"]
        return f"JITKernel({self.kernel_name}, target=musa/{arch}, backend={self.backend.name})"
