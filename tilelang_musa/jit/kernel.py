"""JITKernel: a compiled kernel. Call it with tensors; read its MUSA source; benchmark it.

A kernel lives in a directory holding its stage files and `metadata.json` (stages.py): a kernel cache entry, or a
temporary directory when the cache is off. `JITKernel.from_database(directory)` reloads one without lowering.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tvm
from tvm import tirx

from ..errors import TileLangError
from ..launcher import KernelLaunchError, Launcher, ParamSpec
from .backend import Backend, backend_named
from .export import unpack_export, write_export
from .adapter import KernelAdapter
from .stages import KernelMetadata, stage_file


class JITKernel:
    """A kernel compiled for one target and backend.

    `kernel(*inputs)` checks the inputs, allocates the outputs (`out_idx` / `T.empty`), runs, and returns
    the outputs (one tensor, a list of them in `out_idx` order, or None: as upstream's adapters)."""

    # tilelang.compile, registered by jit/compile.py (which imports this module) for the upstream constructor
    compile_program: Any = None

    def __init__(self, directory: Path | tirx.PrimFunc, metadata: KernelMetadata | None = None,
                 backend: Backend | None = None, target: tvm.target.Target | None = None,
                 program: tirx.PrimFunc | None = None, pass_configs: dict | None = None, **compile_options: Any):
        if isinstance(directory, tirx.PrimFunc):
            # upstream's `JITKernel(func, out_idx=..., target=..., execution_backend=...)`: tilelang.compile's
            # keywords, the metadata/backend positions taken as out_idx/execution_backend as upstream orders them
            if metadata is not None:
                compile_options.setdefault("out_idx", metadata)
            if backend is not None:
                compile_options.setdefault("execution_backend", backend)
            kernel = type(self).compile_program(directory, target=target, pass_configs=pass_configs, **compile_options)
            self.__dict__.update(kernel.__dict__)
            return
        if compile_options or metadata is None or backend is None or target is None:
            raise TypeError("JITKernel(directory, metadata, backend, target, ...) or JITKernel(program, **compile "
                            "options)")
        self.directory = Path(directory)
        self.metadata = metadata
        self.params: list[ParamSpec] = list(metadata.host.params)
        self.backend = backend
        self.target = target
        self.program = program  # None when reloaded from the cache by directory alone
        if pass_configs is None:
            from ..transform import normalize_pass_configs

            pass_configs = normalize_pass_configs(metadata.options.get("pass_configs"))
        self.pass_configs = pass_configs
        self._source: str | None = None
        # size parameters (T.dynamic) are taken from the tensors' shapes, not passed by the caller
        self.launcher = Launcher(str(self.library_path), self.params, backend.device, self.kernel_name,
                                 scalar_bindings=metadata.host.size_params, assumes=metadata.host.assumes)

    @classmethod
    def from_database(cls, directory: str | Path, program: tirx.PrimFunc | None = None,
                      target: tvm.target.Target | None = None, backend: Backend | None = None,
                      pass_configs: dict | None = None) -> "JITKernel":
        """The kernel stored in `directory` (a kernel cache entry, or a copy of one), loaded without lowering or
        building: parameters, launches, target and options come from its metadata.json."""
        directory = Path(directory)
        metadata = KernelMetadata.read(directory)
        return cls(directory, metadata, backend or backend_named(metadata.execution_backend),
                   target or tvm.target.Target(metadata.target), program, pass_configs)

    def __call__(self, *args: Any) -> Any:
        try:
            return self.launcher(*args)
        except KernelLaunchError as err:
            raise self._naming_user_lines(err) from None

    def _naming_user_lines(self, err: KernelLaunchError) -> KernelLaunchError:
        """A simulator report naming generated lines, with the user's lines added: from the source's `#line`
        directives (pass config `tl.emit_line_directives`), else from the side table in the kernel's metadata;
        `err` itself where neither names a line."""
        from ..ir.source_lines import name_user_lines, table_from_json, user_lines

        source = self.get_kernel_source(kernel_only=False)
        if "#line " in source:
            lines = user_lines(source)
        elif self.metadata.user_lines:
            lines = table_from_json(self.metadata.user_lines)
            if self.program is not None and self.metadata.program_lines is not None:
                # the entry may have been built for a structurally equal program written on other lines
                from ..ir.program_lines import lines_from_json, moved_table, program_lines

                lines = moved_table(lines, lines_from_json(self.metadata.program_lines), program_lines(self.program))
        else:
            return err
        message = name_user_lines(str(err), lines)
        return err if message == str(err) else KernelLaunchError(message)

    def for_program(self, program: tirx.PrimFunc) -> "JITKernel":
        """This kernel (the same library and launcher) serving `program`, structurally equal to its own: the
        kernel cache's memo hit for another program object, whose reports name its own lines."""
        import copy

        twin = copy.copy(self)
        twin.program = program
        twin.__dict__.pop("_adapter", None)  # upstream's adapter names its kernel's program
        return twin

    @property
    def adapter(self) -> "KernelAdapter | None":
        """Upstream's `kernel.adapter`: parameters, outputs, program, library and source (adapter/kernel_adapter.py).
        One per kernel; assignable, as upstream's attribute is (`kernel.adapter = None` drops it)."""
        if "_adapter" not in self.__dict__:
            self._adapter = KernelAdapter(self)
        return self._adapter

    @adapter.setter
    def adapter(self, value: "KernelAdapter | None") -> None:
        self._adapter = value

    @property
    def name(self) -> str:
        """The program's name (its global symbol), the stem of its stage files."""
        return self.metadata.name

    @property
    def kernel_name(self) -> str:
        """The (first) `__global__` function."""
        return self.metadata.host.launches[0].name

    @property
    def out_idx(self) -> list[int]:
        return [i for i, p in enumerate(self.params) if p.is_output]

    def stage_path(self, stage: str) -> Path:
        """The file holding the output of `stage` ("tir", "lowered", "mu", "host", "bin")."""
        return self.directory / stage_file(self.name, stage)

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        """The MUSA source compiled for this kernel (the `mu` stage, a TILELANG_REPLACE_MUSAC file included):
        as upstream, the template includes and the kernels, or with `kernel_only=False` the whole file, the
        host wrapper too."""
        if self._source is None:
            self._source = self.stage_path("mu").read_text()
        sections = self.metadata.sections
        if not kernel_only or sections is None:  # a replaced source: its parts are unknown
            return self._source
        return self._source[:sections["host"][0]]

    def _section(self, part: str) -> str:
        sections = self.metadata.sections
        if sections is None:  # a replaced source: no parts known
            return self.get_kernel_source(kernel_only=False)
        start, end = sections[part]
        return self.get_kernel_source(kernel_only=False)[start:end]

    def get_device_source(self) -> str:
        return self._section("device")

    def get_host_source(self) -> str:
        return self._section("host")

    def get_profiler(self, tensor_supply_type: Any = None):
        """A Profiler that runs this kernel on generated inputs (`run_once`, `assert_allclose`, `do_bench`)."""
        from ..profiler import Profiler, TensorSupplyType

        return Profiler(self, tensor_supply_type or TensorSupplyType.Auto)

    def run_once(self, func: Any = None) -> Any:
        """Run the kernel (or `func`) once on generated inputs (the profiler's)."""
        return self.get_profiler().run_once(func)

    def show_source(self, which: str = "kernel") -> None:
        """Print the kernel source ("kernel"), the host wrapper ("host") or both."""
        if which not in ("kernel", "host", "both"):
            raise ValueError(f"show_source: which must be 'kernel', 'host' or 'both'; got {which!r}")
        print(self.get_kernel_source(kernel_only=False) if which == "both" else
              self.get_host_source() if which == "host" else self.get_kernel_source())

    def export_sources(self, kernel_path: str | Path | None = None, host_path: str | Path | None = None) -> None:
        """Write the kernel source and / or the host wrapper to files (their folders are made)."""
        if kernel_path is None and host_path is None:
            raise ValueError("export_sources: give kernel_path, host_path or both")
        for path, text in ((kernel_path, self.get_kernel_source), (host_path, self.get_host_source)):
            if path is not None:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_text(text())

    def print_source_code(self, which: str = "kernel", file: str | Path | None = None) -> None:
        """Upstream's older name: `show_source(which)`, or with `file` the kernel source written there."""
        if file is not None:
            self.export_sources(kernel_path=file)
        else:
            self.show_source(which)

    def export_library(self, kernel_file: str | Path) -> Path:
        """Write this kernel to one shared-library file that `load_library(kernel_file)` loads back in any
        process, without lowering or building (export.py); `python -m tilelang.tools.aot` turns the same kernel
        into C for programs without Python."""
        return write_export(self.directory, list(self.metadata.stages.values()), self.library_path.name,
                            kernel_file)

    @classmethod
    def from_library(cls, kernel_file: str | Path) -> "JITKernel":
        """The kernel `export_library` wrote to `kernel_file`: parameters, launches, target and backend come from
        the file."""
        directory = unpack_export(kernel_file)
        try:
            return cls.from_database(directory)
        except (KeyError, ValueError) as err:
            raise TileLangError(f"load_library: {kernel_file} holds kernel metadata this tilelang_musa cannot read: "
                                f"{err}") from None

    @property
    def library_path(self) -> Path:
        return self.stage_path("bin")

    def __repr__(self) -> str:
        arch = self.target.attrs["arch"]
        return f"JITKernel({self.kernel_name}, target=musa/{arch}, backend={self.backend.name})"


def load_library(kernel_file: str | Path) -> JITKernel:
    """`tilelang.load_library`: the kernel `JITKernel.export_library` wrote, in this or any other process."""
    return JITKernel.from_library(kernel_file)
