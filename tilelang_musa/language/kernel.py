"""`with T.Kernel(gx, gy, gz, threads=...) as (bx, by, bz)`: the grid of blocks and the block's threads; and the
TVMScript forms of the same kernel: `for bx in T.thread_binding(n, thread="blockIdx.x")`,
`bx = T.launch_thread("blockIdx.x", n)`, `T.env_thread`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import tvm
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb
from tvm.tirx.script.builder.frame import PrimFuncFrame

from ..diagnostics import warn_once
from .builder import as_expr, current_trace, kernel_trace, static_value, take_name
from .early_alloc import place_early_allocations
from .loop import LoopFrame
from .proxy import stop_discovery_here

_BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
# Features of upstream TileLang's T.Kernel that select NVIDIA-only machinery.
_REJECTED_KWARGS = ("cluster_dims",)


class Kernel:
    """A kernel launch scope: `gx[, gy[, gz]]` blocks of `threads` threads (an int or up to 3 extents).

    The `as` names are the block indices: one name for a 1-D grid, a tuple otherwise. `producer_threads`
    sizes the producer warps of automatic warp specialization, which the compiler does not do yet, so it is
    accepted with a one-time warning; split the block by hand with `T.ws(...)` regions.

    The same object is the kernel of a TVMScript-style program, which has no `with T.Kernel`: its first
    `T.thread_binding` / `T.launch_thread` opens it (`Kernel.raw`), and each binding adds one axis (`bind`). Either
    way the IR is the same `thread_extent` launches, and constructs find the kernel as `trace.kernel`."""

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
        _check_threads(trace, "T.Kernel: ", threads)
        self.grid = tuple(grid)
        self.threads = threads
        self.fixed = True  # T.Kernel states all its axes; a raw kernel gains them as bindings appear
        if producer_threads is not None:
            warn_once("T.Kernel producer_threads", "T.Kernel(producer_threads=...) has no effect: it sizes the "
                      "producer warps of automatic warp specialization, which this build does not do yet; split "
                      "the block by hand with T.ws(...) regions (the threads count stays the whole block's)")
        self.producer_threads = producer_threads
        self.min_blocks_per_sm: int | None = None  # T.annotate_min_blocks_per_sm
        self.block_names: tuple[str, ...] = ()
        self.unpacks = False
        self.block_vars: list[Any] = []
        self.thread_vars: list[Any] = []
        self._frames: list[tuple[Any, str]] = []  # open launch frames, outermost first, with their tags

    @classmethod
    def raw(cls, trace: Any) -> Kernel:
        """Open the kernel of a program without `with T.Kernel`: no axes yet, `bind` adds them."""
        stop_discovery_here(trace)
        kernel = cls.__new__(cls)
        kernel.grid, kernel.threads, kernel.fixed, kernel.producer_threads = (), (), False, None
        kernel.min_blocks_per_sm = None
        kernel.block_names, kernel.unpacks = (), False
        kernel.block_vars, kernel.thread_vars, kernel._frames = [], [], []
        trace.kernel = kernel
        trace.kernels.append(kernel)
        return kernel

    @property
    def num_threads(self) -> int:
        total = 1
        for t in self.threads:
            total *= static_value(t)
        return total

    def bind_names(self, names: tuple[str, ...], unpacks: bool = False) -> None:
        """The user's `as` names for the block indices (so generated code reads like the source); `unpacks`:
        the target is a tuple, so even one block index comes as a tuple (`as (bx,)`)."""
        self.block_names = names
        self.unpacks = unpacks

    def __enter__(self):
        trace = current_trace("T.Kernel")
        stop_discovery_here(trace)
        if trace.kernel is not None:
            raise trace.error("T.Kernel scopes cannot be nested" if trace.kernel.fixed else
                              "T.Kernel inside T.thread_binding / T.launch_thread bindings: a program states its "
                              "kernel one way or the other")
        names = self.block_names if len(self.block_names) == len(self.grid) else ()
        for k, (tag, extent) in enumerate(zip(_BLOCK_TAGS, self.grid)):
            self.block_vars.append(self._launch(tag, extent, names[k] if names else None))
        for tag, extent in zip(_THREAD_TAGS, self.threads):
            self.thread_vars.append(self._launch(tag, extent))
        trace.kernel = self
        trace.kernels.append(self)
        place_early_allocations(trace)
        if len(self.block_vars) == 1 and not self.unpacks:
            return self.block_vars[0]
        return tuple(self.block_vars)

    def _launch(self, tag: str, extent: Any, name: str | None = None, env_var: Any = None) -> Any:
        frame = Tb.launch_thread(tag if env_var is None else env_var, extent)
        var = frame.__enter__()
        IRBuilder.name(name or tag.replace("Idx.", "_"), var)
        self._frames.append((frame, tag))
        return var

    def __exit__(self, *exc: Any) -> None:
        self.release(0, exc)

    @property
    def depth(self) -> int:
        """How many launch frames are open (`release(depth)` closes the ones opened after this point)."""
        return len(self._frames)

    def bind(self, construct: str, tag: str, extent: Any, name: str | None = None, env_var: Any = None) -> Any:
        """The variable of axis `tag` (e.g. "threadIdx.x") with `extent`: the kernel's own if it has that axis
        (the extents must agree), else a new launch (of `env_var`, a T.env_thread, if given), for a raw kernel
        only (T.Kernel states all its axes)."""
        trace = current_trace(construct)
        is_block = tag in _BLOCK_TAGS
        tags, vars_, extents = ((_BLOCK_TAGS, self.block_vars, self.grid) if is_block else
                                (_THREAD_TAGS, self.thread_vars, self.threads))
        axis = tags.index(tag)
        if axis < len(vars_):
            if not tvm.sym.Analyzer().can_prove_equal(as_expr(extent), as_expr(extents[axis])):
                where = "the enclosing T.Kernel" if self.fixed else "its first binding"
                raise trace.error(f"{construct}: {tag} has extent {extent} here but {extents[axis]} in {where}; "
                                  "a thread axis has one extent")
            return vars_[axis]
        if self.fixed:
            what = "grid" if is_block else "threads="
            raise trace.error(f"{construct}: the enclosing T.Kernel has no {tag} (its {what} states the kernel's "
                              f"{'blocks' if is_block else 'threads'}); add the axis to T.Kernel instead")
        if axis > len(vars_):
            raise trace.error(f"{construct}: {tag} is bound before {tags[len(vars_)]}; bind the axes in x, y, z order")
        if is_block and self.thread_vars:
            raise trace.error(f"{construct}: {tag} is bound inside a threadIdx binding; bind the block indices "
                              "(blockIdx.*) outside the thread indices (threadIdx.*)")
        if not is_block:
            _check_threads(trace, f"{construct}: ", (*self.threads, extent))
        var = self._launch(tag, extent, name, env_var)
        vars_.append(var)
        if is_block:
            self.grid = (*self.grid, extent)
        else:
            self.threads = (*self.threads, extent)
        return var

    def release(self, depth: int, exc: tuple = (None, None, None)) -> None:
        """Close the launch frames opened after `depth` (their axes leave the kernel); the kernel ends with its
        last frame."""
        while len(self._frames) > depth:
            frame, tag = self._frames.pop()
            frame.__exit__(*exc)
            if tag in _BLOCK_TAGS and not self.fixed:
                self.block_vars.pop()
                self.grid = self.grid[:-1]
            elif not self.fixed:
                self.thread_vars.pop()
                self.threads = self.threads[:-1]
        if not self._frames:
            current_trace().kernel = None


def _check_threads(trace: Any, prefix: str, threads: tuple) -> None:
    total = 1
    for t in threads:
        value = static_value(t)
        if value is None:
            raise trace.error(f"{prefix}the thread extents must be compile-time constants; got {t}")
        if value <= 0:
            raise trace.error(f"{prefix}thread extent {value} must be positive")
        total *= value
    if total > 1024:
        raise trace.error(f"{prefix}{total} threads per block exceed the MUSA limit of 1024")


def _bind(construct: str, tag: Any, extent: Any, name: str | None, statement: bool,
          env_var: Any = None) -> tuple[Kernel, int, Any]:
    """Bind axis `tag` in the current kernel, opening a raw one if none is open: (kernel, depth before, var).

    A `statement` binding (`tx = T.launch_thread(...)`) lasts to the end of the kernel, so it must sit where
    the kernel's launches are: at the top of the body, not inside a loop or branch."""
    trace = current_trace(construct)
    tag = str(tag)
    if tag not in _BLOCK_TAGS + _THREAD_TAGS:
        raise trace.error(f"{construct}: unknown thread axis {tag!r}; expected one of "
                          f"{', '.join(_BLOCK_TAGS + _THREAD_TAGS)}")
    kernel = trace.kernel
    if statement and (kernel is None or not kernel.fixed):
        top = IRBuilder.current().frames[-1]
        at_top = (isinstance(top, PrimFuncFrame) if kernel is None else top.same_as(kernel._frames[-1][0]))
        if not at_top and (kernel is None or not _has_axis(kernel, tag)):
            raise trace.error(f"{construct}({tag!r}) as a statement must be at the top of the kernel body, next to "
                              "the other launches; inside a loop or branch use `for v in T.thread_binding(n, "
                              "thread=...)`")
    opens = kernel is None
    if opens:
        kernel = Kernel.raw(trace)
    depth = kernel.depth
    var = kernel.bind(construct, tag, extent, name, env_var)
    if opens:
        place_early_allocations(trace)  # inside the kernel's first launch
    return kernel, depth, var


def _has_axis(kernel: Kernel, tag: str) -> bool:
    if tag in _BLOCK_TAGS:
        return _BLOCK_TAGS.index(tag) < len(kernel.block_vars)
    return _THREAD_TAGS.index(tag) < len(kernel.thread_vars)


def close_raw_kernel(trace: Any) -> None:
    """The end of the kernel body: close the launches of `T.launch_thread` statements of a raw kernel."""
    if trace.kernel is not None and not trace.kernel.fixed:
        trace.kernel.release(0)


class ThreadBinding(LoopFrame):
    """`for tx in T.thread_binding(128, thread="threadIdx.x"):` the axis for the loop's body;
    `tx = T.thread_binding(...)`: the axis for the rest of the kernel (`bind_as_statement`)."""

    def __init__(self, tag: str, extent: Any):
        super().__init__("T.thread_binding", [(0, extent)], None)
        self.tag = tag
        self.extent = extent

    def build(self, names: tuple[str, ...] | None) -> Iterator[Any]:
        name = names[0] if names else None
        kernel, depth, var = _bind(self.construct, self.tag, self.extent, name, statement=False)
        try:
            yield var
        finally:
            kernel.release(depth)

    def bind_as_statement(self, name: str) -> Any:
        return _bind(self.construct, self.tag, self.extent, name, statement=True)[2]


def thread_binding(start: Any, stop: Any = None, thread: str | None = None, *,
                   annotations: Any = None) -> ThreadBinding:
    """`for bx in T.thread_binding(n, thread="blockIdx.x"):` the index of a grid or block axis, as TVMScript
    writes kernels (nest block axes outside thread axes, at the top of the body). Inside `with T.Kernel` it names
    one of the kernel's axes (same extent). `T.thread_binding(n, "threadIdx.x")` and `(0, n, ...)` work too."""
    trace = current_trace("T.thread_binding")
    if thread is None and isinstance(stop, str):
        thread, stop = stop, None
    if thread is None:
        raise trace.error("T.thread_binding needs thread=\"blockIdx.x\" / \"threadIdx.x\" / ...")
    if stop is not None and static_value(start) != 0:
        raise trace.error(f"T.thread_binding({start}, {stop}): a thread axis starts at 0")
    return ThreadBinding(str(thread), start if stop is None else stop)


def launch_thread(thread: Any, extent: Any) -> Any:
    """`tx = T.launch_thread("threadIdx.x", 128)` (or `T.launch_thread(T.env_thread("threadIdx.x"), 128)`): the
    axis's index from here to the end of the kernel, as TVMScript writes kernels."""
    trace = current_trace("T.launch_thread")
    if isinstance(thread, tvm.ir.expr.Var):
        tag = _env_tag(thread)
        if tag is None:
            raise trace.error(f"T.launch_thread: {thread} is not a T.env_thread(...) variable")
        var = _bind("T.launch_thread", tag, extent, thread.name, statement=True, env_var=thread)[2]
        if not var.same_as(thread):  # the axis was already launched: alias the env variable to its index
            Tb.Bind(var, var=thread)
        return thread
    return _bind("T.launch_thread", thread, extent, take_name(str(thread).replace("Idx.", "_")), statement=True)[2]


def env_thread(thread_tag: str, dtype: str = "int32") -> Any:
    """`tx = T.env_thread("threadIdx.x")`: a thread-axis variable for a later `T.launch_thread(tx, extent)`."""
    current_trace("T.env_thread")
    return Tb.env_thread(thread_tag, dtype)


def _env_tag(var: Any) -> str | None:
    frame = IRBuilder.current().frames[0]
    env = getattr(frame, "env_threads", None) or {}
    iv = env.get(var) if hasattr(env, "get") else None
    return str(iv.thread_tag) if iv is not None else None


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
