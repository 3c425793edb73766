"""What LayoutInference decides, as a record: a layout per fragment and a plan per T.Parallel nest over fragments,
each with the reason it was chosen, and the exchanges through shared memory that reconcile two layouts that cannot
agree. LayoutInference (layout_inference.py) fills it and writes it onto the IR; ApplyLayoutExchanges
(apply_layout_exchanges.py) rewrites the IR by it. `describe` is the debug dump (TILELANG_DUMP_LAYOUTS=1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tvm import tirx

from ..ir.utils import loc_of, substitute
from ..layout import Fragment
from ..tileop.loop_plan import LoopPlan
from ..tileop.reduce import Reduce
from .thread_guard import ThreadRange

STAGE = "LayoutInference"
FRAGMENT_SCOPE = "local.fragment"
EXCHANGE_SCOPE = "shared.dyn"


@dataclass
class NestDecision:
    """A T.Parallel nest over fragments, and the plan chosen for it (`reason`: why that plan)."""

    loop: tirx.For
    loop_vars: list[Any]
    extents: list[int]
    body: Any
    accesses: list[tuple[Any, tuple]]  # (fragment buffer, indices)
    reach: ThreadRange  # the threads that run the nest
    plan: LoopPlan | None = None
    recipe: dict | None = None  # how LowerParallelLoop rebuilds `plan` (the `tl.loop_plan` annotation)
    source: Any = None  # the fragment whose layout the plan follows
    exchanges: dict = field(default_factory=dict)  # fragment -> Exchange: it is relaid out around the nest
    inner: dict = field(default_factory=dict)  # loop var of a loop inside the body (serial, unrolled, vectorized) -> range
    reason: str = ""

    def representative(self, indices: tuple) -> tuple:
        """`indices` with every inner loop variable at its first value (`f[i, l * 8 + t]` -> `f[i, t]`)."""
        if not self.inner:
            return tuple(indices)
        first = {v: tirx.const(lo, v.dtype) for v, (lo, _) in self.inner.items()}
        return tuple(substitute(e, first) for e in indices)

    @property
    def loc(self):
        return loc_of(self.loop)


@dataclass
class Exchange:
    """A fragment the nest reads (or writes) in another layout: `copy` is the fragment in the nest's layout,
    `tile` the shared tile the elements pass through (`copy` is `tile` when the nest reads the tile itself)."""

    copy: Any
    tile: Any
    written: bool


@dataclass
class ReduceExchange:
    """A T.reduce_* that reduces into `scratch` (laid out as the reduction leaves its results), relaid out to its
    destination through `tile` (see ApplyLayoutExchanges)."""

    node: Any  # the op's Evaluate, by handle
    op: Reduce
    scratch: Any
    tile: Any
    reach: ThreadRange


@dataclass
class LayoutDecisions:
    """Everything LayoutInference chose, with the reasons."""

    layouts: dict[Any, Fragment]  # buffer -> layout (fragments, and shared tiles some tile op laid out)
    reasons: dict[Any, str]  # buffer -> what fixed its layout
    fragments: list[Any]  # every fragment, the exchanges' copies included
    nests: list[NestDecision]
    reduce_exchanges: list[ReduceExchange]

    def describe(self, name: str) -> str:
        """The decisions as text, one line per buffer and per nest (the TILELANG_DUMP_LAYOUTS dump)."""
        lines = [f"LayoutInference decisions for `{name}`:"]
        for buf, layout in self.layouts.items():
            lines.append(f"  buffer `{buf.name}`: {layout!r}\n    because: {self.reasons.get(buf, 'unknown')}")
        for nest in self.nests:
            lines.append(f"  T.Parallel loop at {nest.loc or '<unknown line>'} (threads {nest.reach}): "
                         f"{nest.plan.fragment!r}\n    because: {nest.reason}")
            for buf, exchange in nest.exchanges.items():
                how = "read from the shared tile" if exchange.copy is exchange.tile else \
                    f"used as `{exchange.copy.name}`"
                lines.append(f"    exchange: `{buf.name}` {how} through `{exchange.tile.name}`"
                             f"{' and written back' if exchange.written else ''}")
        for found in self.reduce_exchanges:
            lines.append(f"  T.reduce_{found.op.kind} at {found.op.loc}: reduces into `{found.scratch.name}`, relaid "
                         f"out to `{found.op.dst.buffer.name}` through `{found.tile.name}`")
        return "\n".join(lines)
