"""Small IR helpers shared by the tile ops and the passes (dtype sizes, flat indices, statement sequences, thread
extents, buffer declarations); the 0.27 wheel has no stmt_functor, so they build on tvm-ffi's structural
walk/mutate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import tvm
import tvm_ffi
from tvm import tirx

TensorLoad = tvm.ir.expr.TensorLoad
Var = tvm.ir.expr.Var


def substitute(node: Any, vmap: Any) -> Any:
    """Replace the Vars in `vmap` (by identity) inside an expression or statement."""
    if not vmap:
        return node
    return tvm_ffi.structural_mutate(node, [(Var, by_identity(vmap))])


def by_identity(vmap: Any) -> Any:
    """A structural_mutate callback on Vars: `vmap`'s value for a Var, else the Var. Keyed by the object's handle:
    a Var that reaches Python again is another Python object, and a dict finds it only through `==`, which builds
    and tests an expression (~4 us a lookup)."""
    by_handle = {key.__chandle__(): value for key, value in vmap.items()}
    return lambda v, m: by_handle.get(v.__chandle__(), v)


def with_fresh_bindings(node: Any) -> Any:
    """`node` with a new Var for every variable defined inside it: scalar bindings (`x: T.let = ...` statements,
    Let expressions) and loop variables. A pass that emits a statement more than once (a pipelined unit per
    iteration, say) keeps each variable defined once: a Var bound twice to different values stops TVM's analyzer
    ("Trying to update var ... with a different value"). The new Vars keep their names; the printer tells repeated
    names apart."""
    defined: dict = {}

    def define(var):
        defined.setdefault(var.__chandle__(), (var, Var(var.name, var.ty)))

    tvm_ffi.structural_walk(node, [(tirx.Bind, lambda n: define(n.var)), (tirx.Let, lambda n: define(n.var)),
                                   (tirx.For, lambda n: define(n.loop_var))], order="pre")
    return substitute(node, dict(defined.values()))


def is_buffer(value: Any) -> bool:
    return isinstance(value, Var) and isinstance(value.ty, tirx.BufferType)


def scope_of(buffer: Var) -> str:
    return str(buffer.ty.storage_scope)


def dtype_bytes(dtype: Any) -> int:
    dt = tvm.runtime.DataType(str(dtype))
    return max(1, dt.bits * dt.lanes // 8)


@dataclass(frozen=True)
class Access:
    buffer: Var
    indices: tuple
    is_store: bool


def collect_accesses(node: Any) -> list[Access]:
    """Every buffer load and store inside `node`, in walk order."""
    out: list[Access] = []

    def on_load(n):
        out.append(Access(n.source, tuple(n.indices), False))

    def on_store(n):
        out.append(Access(n.buffer, tuple(n.indices), True))

    tvm_ffi.structural_walk(node, [(TensorLoad, on_load), (tirx.BufferStore, on_store)], order="pre")
    return out


_READS_STATE = 2  # TCallEffectKind: kExprAnnotation 0, kPure 1, kReadState 2; above it a call may write


def may_write_memory(call: Any) -> bool:
    """Whether a call may write memory or have another effect (an atomic, an extern, a barrier): by its op's
    TCallEffectKind; a call of anything but a registered op may."""
    op = call.op
    if not isinstance(op, tvm.ir.Op):
        return True
    effect = op.get_attr("TCallEffectKind")
    return effect is None or int(effect) > _READS_STATE


def _past_int32(shape: list[Any]) -> bool:
    size = 1
    for extent in shape:
        if not isinstance(extent, tirx.IntImm):
            return False
        size *= int(extent.value)
    return size >= 1 << 31


def flat_index(buffer: Var, indices: Iterable[Any]) -> Any:
    """Linear element index of `indices` into `buffer`: through its strides if it has them (T.StridedTensor),
    else row-major (compact layout)."""
    shape = list(buffer.ty.shape)
    indices = list(indices)
    strides = list(buffer.ty.strides or [])
    if _past_int32(shape):  # its offsets (and the constants the simplifier folds from them) do not fit in int32
        indices = [tirx.Cast("int64", i) if str(i.ty.dtype) != "int64" else i for i in indices]
    if strides:
        flat = tirx.const(0, "int32")
        for stride, index in zip(strides, indices):
            flat = flat + index * stride
        return flat
    flat = indices[0] if indices else tirx.const(0, "int32")
    for extent, index in zip(shape[1:], indices[1:]):
        flat = flat * extent + index
    return flat


def unflatten(flat: Any, shape: list[Any]) -> list[Any]:
    """The row-major indices of linear position `flat` in `shape` (flat_index's inverse for a compact buffer)."""
    out = []
    for k in range(len(shape) - 1, -1, -1):
        out.append(tirx.floormod(flat, shape[k]) if k else flat)
        flat = tirx.floordiv(flat, shape[k])
    return out[::-1]


def buffer_size(buffer: Var) -> Any:
    size = tirx.const(1, "int32")
    for extent in buffer.ty.shape:
        size = size * extent
    return size


def as_int(expr: Any) -> int | None:
    if isinstance(expr, int):
        return expr
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    return None


def expression_size(expr: Any) -> int:
    """The expression nodes of `expr` as printed: a subexpression that occurs twice counts twice."""
    count = [0]

    def visit(_node):
        count[0] += 1

    tvm_ffi.structural_walk(expr, [(tvm.ir.Expr, visit)])
    return count[0]


def seq(stmts: list[Any]) -> Any:
    stmts = [s for s in stmts if s is not None]
    if len(stmts) == 1:
        return stmts[0]
    return tirx.SeqStmt(stmts)


@dataclass
class ThreadInfo:
    """The launch of a kernel: thread/block IterVar vars and their extents, by tag."""

    vars: dict[str, Var]
    extents: dict[str, Any]

    @property
    def num_threads(self) -> int:
        total = 1
        for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            total *= as_int(self.extents.get(tag, 1)) or 1
        return total

    def linear_thread_id(self) -> Any:
        """threadIdx.x + threadIdx.y * X + threadIdx.z * X * Y (only the launched dims)."""
        out = None
        stride = 1
        for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            if tag not in self.vars:
                continue
            term = self.vars[tag] if stride == 1 else self.vars[tag] * stride
            out = term if out is None else out + term
            stride *= as_int(self.extents[tag])
        return out if out is not None else tirx.const(0, "int32")


def thread_info(func: tirx.PrimFunc) -> ThreadInfo:
    vars_: dict[str, Var] = {}
    extents: dict[str, Any] = {}

    def on_attr(node):
        if node.attr_key == "thread_extent":
            tag = str(node.node.thread_tag)
            vars_[tag] = node.node.var
            extents[tag] = node.value

    tvm_ffi.structural_walk(func.body, [(tirx.AttrStmt, on_attr)], order="pre")
    return ThreadInfo(vars_, extents)


def loc_of(node: Any):
    """The SourceLoc recorded on a loop or tile op by the frontend, if any."""
    ann = getattr(node, "annotations", None)
    if ann is not None and "tl.loc" in ann:
        return loc_from_text(str(ann["tl.loc"]))
    return None


def loc_from_text(text: str):
    """A SourceLoc from its "file:line:col" text (as the frontend records it in attributes)."""
    from ..errors import SourceLoc

    filename, line, col = text.rsplit(":", 2)
    return SourceLoc(filename, int(line), int(col))


def declare_buffers(body: Any, buffers: list[Any], annotations: list[dict] | None = None) -> Any:
    """`body` with `AllocBuffer`s for `buffers` (with `annotations`, one dict each) added before the kernel's first
    allocation (the outermost sequence that allocates), so they are in scope wherever the kernel's own tiles are."""
    if not buffers:
        return body
    done = False

    def on_seq(node, mutator):
        nonlocal done
        if done:
            return node
        first = next((k for k, s in enumerate(node.seq) if isinstance(s, tirx.AllocBuffer)), None)
        if first is None:
            return mutator.default_mutate(node)
        done = True
        seq = list(node.seq)
        allocs = [tirx.AllocBuffer(b, a) if a else tirx.AllocBuffer(b)
                  for b, a in zip(buffers, annotations or [None] * len(buffers))]
        return tirx.SeqStmt(seq[:first] + allocs + seq[first:])

    body = tvm_ffi.structural_mutate(body, [(tirx.SeqStmt, on_seq)])
    if not done:
        raise ValueError("declare_buffers: the kernel allocates nothing to declare beside")
    return body


def replace_buffer(node: Any, old: Var, new: Var) -> Any:
    """`node` with every load and store of `old` going to `new` (same shape)."""
    def on_store(n, mutator):
        n = mutator.default_mutate(n)
        return tirx.BufferStore(new, n.value, n.indices) if n.buffer.same_as(old) else n

    def on_load(n, mutator):
        n = mutator.default_mutate(n)
        return new[tuple(n.indices)] if n.source.same_as(old) else n

    return tvm_ffi.structural_mutate(node, [(tirx.BufferStore, on_store), (TensorLoad, on_load)])
