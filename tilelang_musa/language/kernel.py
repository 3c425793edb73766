"""`with T.Kernel(gx, gy, gz, threads=...) as (bx, by, bz)`: the grid of blocks and the block's threads."""

from __future__ import annotations

from typing import Any

from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..diagnostics import warn_once
from .builder import current_trace, kernel_trace, static_value
from .proxy import stop_discovery_here

_BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
# Features of upstream TileLang's T.Kernel that select NVIDIA-only machinery.
_REJECTED_KWARGS = ("cluster_dims",)


class Kernel:
    """A kernel launch scope: `gx[, gy[, gz]]` blocks of `threads` threads (an int or up to 3 extents).

    The `as` names are the block indices: one name for a 1-D grid, a tuple otherwise. `producer_threads`
    sizes the producer warps of a warp-specialized kernel; no kernel is warp-specialized yet, so it is accepted
    with a one-time warning."""

    def __init__(self, *grid: Any, threads: Any = 128, producer_threads: Any = None, prelude: Any = None,
                 is_cpu: bool = False, **kwargs: Any):
        trace = current_trace("T.Kernel")
        for key in kwargs:
            what = "NVIDIA-only" if key in _REJECTED_KWARGS else "unknown"
            raise trace.error(f"T.Kernel: `{key}=` is {what} and not supported on MUSA")
        if is_cpu:
            raise trace.error("T.Kernel(is_cpu=True) is not supported: TileLang-MUSA compiles for MUSA devices")
        if prelude is not None:
            raise trace.error("T.Kernel(prelude=...) is not supported on MUSA")
        if not grid:
            grid = (1,)
        if len(grid) > 3:
            raise trace.error(f"T.Kernel takes at most 3 grid dimensions; got {len(grid)}")
        threads = tuple(threads) if isinstance(threads, (list, tuple)) else (threads,)
        if not 1 <= len(threads) <= 3:
            raise trace.error(f"T.Kernel: threads must be an int or 1 to 3 extents; got {threads}")
        total = 1
        for t in threads:
            value = static_value(t)
            if value is None:
                raise trace.error(f"T.Kernel: the thread extents must be compile-time constants; got {t}")
            if value <= 0:
                raise trace.error(f"T.Kernel: thread extent {value} must be positive")
            total *= value
        if total > 1024:
            raise trace.error(f"T.Kernel: {total} threads per block exceed the MUSA limit of 1024")
        self.grid = grid
        self.threads = threads
        self.num_threads = total
        if producer_threads is not None:
            warn_once("T.Kernel producer_threads", "T.Kernel(producer_threads=...) has no effect: it sizes the "
                      "producer warps of a warp-specialized kernel, and this build does not warp-specialize yet")
        self.producer_threads = producer_threads
        self.block_names: tuple[str, ...] = ()
        self.unpacks = False
        self.block_vars: list[Any] = []
        self.thread_vars: list[Any] = []
        self._frames: list[Any] = []

    def bind_names(self, names: tuple[str, ...], unpacks: bool = False) -> None:
        """The user's `as` names for the block indices (so generated code reads like the source); `unpacks`:
        the target is a tuple, so even one block index comes as a tuple (`as (bx,)`)."""
        self.block_names = names
        self.unpacks = unpacks

    def __enter__(self):
        trace = current_trace("T.Kernel")
        stop_discovery_here(trace)
        if trace.kernel is not None:
            raise trace.error("T.Kernel scopes cannot be nested")
        names = self.block_names if len(self.block_names) == len(self.grid) else ()
        for k, (tag, extent) in enumerate(zip(_BLOCK_TAGS, self.grid)):
            self.block_vars.append(self._launch(tag, extent, names[k] if names else None))
        for tag, extent in zip(_THREAD_TAGS, self.threads):
            self.thread_vars.append(self._launch(tag, extent))
        trace.kernel = self
        if len(self.block_vars) == 1 and not self.unpacks:
            return self.block_vars[0]
        return tuple(self.block_vars)

    def _launch(self, tag: str, extent: Any, name: str | None = None) -> Any:
        frame = Tb.launch_thread(tag, extent)
        var = frame.__enter__()
        IRBuilder.name(name or tag.replace("Idx.", "_"), var)
        self._frames.append(frame)
        return var

    def __exit__(self, *exc: Any) -> None:
        current_trace("T.Kernel").kernel = None
        for frame in reversed(self._frames):
            frame.__exit__(*exc)


def _open_kernel(construct: str) -> Kernel:
    trace = kernel_trace(construct)
    return trace.kernel


def get_thread_binding(dim: int = 0) -> Any:
    """threadIdx along `dim` (0 = x) of the enclosing T.Kernel."""
    kernel = _open_kernel("T.get_thread_binding")
    if not 0 <= dim < len(kernel.thread_vars):
        raise current_trace().error(f"T.get_thread_binding({dim}): the kernel has {len(kernel.thread_vars)} thread dims")
    return kernel.thread_vars[dim]


def get_block_binding(dim: int = 0) -> Any:
    """blockIdx along `dim` (0 = x) of the enclosing T.Kernel."""
    kernel = _open_kernel("T.get_block_binding")
    if not 0 <= dim < len(kernel.block_vars):
        raise current_trace().error(f"T.get_block_binding({dim}): the kernel has {len(kernel.block_vars)} grid dims")
    return kernel.block_vars[dim]


def get_thread_bindings() -> list[Any]:
    return list(_open_kernel("T.get_thread_bindings").thread_vars)


def get_block_bindings() -> list[Any]:
    return list(_open_kernel("T.get_block_bindings").block_vars)
