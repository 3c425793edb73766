"""`JITKernel.adapter`: the view of a compiled kernel that upstream's adapter objects give (`kernel.adapter.params`,
`.result_idx`, `.prim_func`, `.libpath`, `.get_kernel_source()`, calling it). Upstream's adapters are per-backend
classes (tvm_ffi, cython, nvrtc, cutedsl) whose internals scripts should not need; this one is a thin view over
the kernel: the same launcher, parameters and source. Scripts that release a kernel by hand (`adapter.func = None`,
`kernel.adapter = None`, as Moore Threads' TME tests do before `gc.collect()`) may drop these references."""

from __future__ import annotations

from typing import Any

from .base import BaseKernelAdapter


class KernelAdapter(BaseKernelAdapter):
    """What `kernel.adapter` offers, read from `kernel`.

    params      one ParamSpec per parameter of the user's program, in call order (name, dtype, shape: ints and size
                names); as upstream, T.dynamic sizes are not among them (the launcher reads them from the shapes)
    result_idx  the indices of the outputs the kernel allocates and returns (upstream's name for out_idx)
    prim_func   the TIR program compiled (None for a kernel reloaded from the cache by directory)
    libpath     the shared library the kernel runs from
    func        the callable that runs the kernel (the adapter itself is callable too); assigning it replaces
                what this adapter calls (None: the adapter no longer runs; the kernel itself still does)"""

    _RELEASED = object()

    def __init__(self, kernel: Any):  # a JITKernel (kernel.py, which imports this module)
        self._kernel = kernel
        self._func: Any = self._RELEASED  # the kernel's launcher unless assigned

    @property
    def params(self) -> list:
        sizes = set(self._kernel.metadata.host.size_params)
        return [p for p in self._kernel.params if p.name not in sizes]

    @property
    def result_idx(self) -> list[int]:
        return self._kernel.out_idx

    @property
    def prim_func(self) -> Any:
        return self._kernel.program

    @property
    def libpath(self) -> str:
        return str(self._kernel.library_path)

    @property
    def func(self) -> Any:
        return self._kernel.launcher if self._func is self._RELEASED else self._func

    @func.setter
    def func(self, value: Any) -> None:
        self._func = value

    def __call__(self, *args: Any) -> Any:
        if self.func is None:
            raise RuntimeError("this kernel adapter's func was set to None: call the kernel itself")
        return self.func(*args)

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        return self._kernel.get_kernel_source(kernel_only)

    def get_host_source(self) -> str:
        return self._kernel.get_host_source()


class ProgramAdapter(KernelAdapter):
    """The adapter of a program about to be compiled: its parameters only. `compile` legalizes `out_idx` through
    `ProgramAdapter(params)._legalize_result_idx`, which a patch of BaseKernelAdapter or KernelAdapter replaces."""

    def __init__(self, params: list):  # no kernel yet: KernelAdapter's state is not set
        self._params = list(params)

    @property
    def params(self) -> list:
        return self._params
