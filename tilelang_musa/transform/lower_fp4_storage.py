"""LowerFP4Storage: float4_e2m1fn tensors become byte tensors; an element load decodes a nibble, a store writes one.

float4_e2m1fn is a storage type on MUSA (no fp4 arithmetic): a kernel tensor parameter of it holds two values a
byte, the even element in the low nibble (upstream TileLang's `tl_fp4_packed_load` convention), and is passed as a
uint8 tensor; a shared tile of it (T.alloc_shared) is a byte tile the same way. Registers (T.alloc_fragment,
T.alloc_local) hold one code a byte, stored and loaded plainly. After FlattenBuffer every access has one flat element
index i, and

    Cast(T, x[i])          -> Cast(T, tl::fp4_e2m1_to_float(x[i >> 1], i & 1))
    x[i] = Cast(fp4, v)    -> tl::fp4_e2m1_store(&x[i >> 1], i & 1, tl::float_to_fp4_e2m1(v))
    x[i] = y[j]  (fp4)     -> tl::fp4_e2m1_store(&x[i >> 1], i & 1, tl::fp4_e2m1_bits(y[j >> 1], j & 1))

with x now a uint8 buffer (the parameter's last dim halved, its other strides halved). `tl::fp4_e2m1_store` updates
the nibble with atomics on the aligned 32-bit word holding the byte, so threads writing the two nibbles of one byte
do not race (src/tl_templates/musa/atomic.h). A select between fp4 values (a bounds guard's `if_then_else(c, x[i],
0)`) is decoded or encoded branch by branch, and an element only read (`T.evaluate(x[i])`) is decoded for nothing.
The address of an even element, `&x[i]` (a T.ptx_cp_async copy's operand), is that of byte i >> 1.

int4 / uint4 tensor parameters and shared tiles are packed the same way (two a byte, element 2k in the low nibble);
their elements are loaded, cast, selected and stored as fp4's are, decoded to int32 and encoded as 4-bit codes
(packed_int_nibbles.py: a store is a read-modify-write of its byte, not atomic).
Any other use of an fp4 value is fp4 arithmetic: a CompileError; of an int4 value, an UnsupportedError (MUSA C has
no 4-bit integer type). Errors name the line of the innermost loop around the access, where there is one.

Runs after FlattenBuffer (flat indices) and before VectorizeLoop: the helpers are scalar calls, so a loop vectorized
over fp4 elements is run lane by lane.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..errors import CompileError, UnsupportedError
from ..ir.utils import TensorLoad, Var, is_buffer, loc_of
from .packed_int_nibbles import nibble_code, nibble_store, sign_extended, wrapped_code
from .pass_base import tl_pass

FP4 = "float4_e2m1fn"
# The 16 E2M1 codes' values (sign in bit 3): what tl::fp4_e2m1_to_float returns.
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _dtype(expr: Any) -> str:
    ty = getattr(expr, "ty", None)
    return str(ty.dtype) if isinstance(ty, tvm.ir.PrimType) else ""


def _is_fp4(dtype: Any) -> bool:
    return str(dtype).split("x")[0] == FP4


PACKED_INTS = ("int4", "uint4")  # packed like fp4, bytes moved only (module docstring)


def _is_packed(dtype: Any) -> bool:
    return _is_fp4(dtype) or str(dtype).split("x")[0] in PACKED_INTS


def fp4_bits(value: float) -> int:
    """The E2M1 code of `value`, rounded to nearest even; beyond +-6 (infinities included) saturates, NaN is +6."""
    if value != value:  # noqa: PLR0124 - NaN
        return 0x7
    sign = 0x8 if value < 0 or (value == 0 and str(value).startswith("-")) else 0
    magnitude = abs(value)
    best = 0
    for code in range(1, 8):
        gap, best_gap = abs(FP4_VALUES[code] - magnitude), abs(FP4_VALUES[best] - magnitude)
        if gap < best_gap or (gap == best_gap and code % 2 == 0):
            best = code
    return sign | best


def _byte_buffer(buffer: Var) -> Var:
    """A uint8 buffer over `buffer`'s storage: the last dim and every other stride halved (in bytes)."""
    ty = buffer.ty
    shape = list(ty.shape)
    shape[-1] = tirx.floordiv(shape[-1] + 1, 2)
    strides = None
    if ty.strides:
        strides = [tirx.floordiv(s, 2) for s in list(ty.strides)[:-1]] + [tirx.const(1, ty.strides[-1].ty.dtype)]
    return Tb.buffer(shape, "uint8", strides=strides, scope=str(ty.storage_scope), buffer_name=buffer.name)


def _code_buffer(buffer: Var) -> Var:
    """A uint8 buffer of `buffer`'s shape: one E2M1 code (low nibble) a byte, for registers."""
    ty = buffer.ty
    return Tb.buffer(list(ty.shape), "uint8", scope=str(ty.storage_scope), buffer_name=buffer.name)


def lower_fp4_storage(func: tirx.PrimFunc) -> tirx.PrimFunc:
    stored, allocs = _fp4_buffers(func)
    # an int4 or fp4 value in a kernel with no such buffer (a rounding through fp4, `T.cast(T.int4(x), "int32")`)
    # needs the pass too
    if not stored and not allocs and not _has_packed_value(func.body):
        return func
    # Registers (fragments, local arrays) hold one code a byte: a nibble store's atomics need memory.
    unpacked = {b for b in allocs if str(b.ty.storage_scope) not in ("shared", "shared.dyn")}
    remap: dict[Any, Var] = {b: _code_buffer(b) if b in unpacked else _byte_buffer(b) for b in stored + allocs}
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else "kernel"
    packed_ints = {remap[b] for b in stored + allocs if not _is_fp4(b.ty.dtype.dtype)}
    rewriter = _Fp4Rewriter(remap, {remap[b] for b in unpacked}, name, packed_ints)
    body = rewriter.rewrite(func.body)
    rewriter.check_no_fp4_left(body)
    new_params = [remap.get(p, p) for p in func.params]
    return tirx.PrimFunc(new_params, body, ret_type=func.ret_type, attrs=func.attrs)


# Where a packed value can come from in a kernel with no packed buffer: a cast, a constant, an intrinsic's result.
# (A callback on every expression cost lowering ~10% on large kernels; these are a small share of the nodes.)
_PACKED_VALUE_SOURCES = (tirx.Cast, tirx.IntImm, tirx.FloatImm, tvm.ir.Call)


def _has_packed_value(body: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(body, [(_PACKED_VALUE_SOURCES, lambda n: found.append(n)
                                    if not found and _is_packed(_dtype(n)) else None)])
    return bool(found)


def _fp4_buffers(func: tirx.PrimFunc) -> tuple[list[Var], list[Var]]:
    """The kernel's fp4 (and packed int4 / uint4) tensors: (its parameters then its DeclBuffers, its allocations),
    each in walk order."""
    params = [p for p in func.params if is_buffer(p) and _is_packed(p.ty.dtype.dtype)]
    decls: list[Any] = []
    tvm_ffi.structural_walk(func.body, [(tirx.DeclBuffer, lambda d: decls.append(d.buffer)
                                         if _is_packed(d.buffer.ty.dtype.dtype) else None)])
    allocs: list[Any] = []
    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, lambda a: allocs.append(a.buffer)
                                         if _is_packed(a.buffer.ty.dtype.dtype) else None)])
    return params + decls, allocs


def _select_arms(expr: Any) -> tuple[Any, Any, Any] | None:
    """(condition, true value, false value) of a Select or an if_then_else call, else None."""
    if isinstance(expr, tirx.Select):
        return expr.condition, expr.true_value, expr.false_value
    if isinstance(expr, tvm.ir.Call) and str(expr.op.name) == "prim.if_then_else":
        return tuple(expr.args)
    return None


def _provably_even(index: Any) -> bool:
    """Whether `index` is even, also through a Select of two even values (a guarded copy's clamped row, with a
    swizzled grid: `Select(row_ok, row, 0) * 256 + Select(row_ok, 32, 0)`), which the modular analysis gives up on."""
    mod = tvm.sym.Analyzer().modular_set(index)
    if mod.coeff % 2 == 0 and mod.base % 2 == 0:
        return True
    arms = _select_arms(index)
    if arms is not None:
        return _provably_even(arms[1]) and _provably_even(arms[2])
    if isinstance(index, (tirx.Add, tirx.Sub)):
        return _provably_even(index.a) and _provably_even(index.b)
    if isinstance(index, tirx.Mul):
        return _provably_even(index.a) or _provably_even(index.b)
    return False


def _halved(index: Any) -> Any:
    """index / 2 of a provably even index, divided term by term through Selects so that it simplifies."""
    ana = tvm.sym.Analyzer()
    mod = ana.modular_set(index)
    arms = _select_arms(index)
    if (mod.coeff % 2 or mod.base % 2) and arms is not None:
        return tirx.Select(arms[0], _halved(arms[1]), _halved(arms[2]))
    if (mod.coeff % 2 or mod.base % 2) and isinstance(index, (tirx.Add, tirx.Sub)):
        return type(index)(_halved(index.a), _halved(index.b))
    if (mod.coeff % 2 or mod.base % 2) and isinstance(index, tirx.Mul):
        return tirx.Mul(_halved(index.a), index.b) if _provably_even(index.a) else tirx.Mul(index.a, _halved(index.b))
    return ana.simplify(tirx.floordiv(index, 2))


class _Fp4Rewriter:
    """Rewrites a kernel body over the byte buffers in `remap` (fp4 buffer -> its uint8 buffer): element loads
    decoded, stores encoded (module docstring). `unpacked`: the byte buffers of one code a byte (registers);
    `packed_ints`: those of int4 / uint4 tensors (packed_int_nibbles.py)."""

    def __init__(self, remap: dict, unpacked: set, kernel: str, packed_ints: set):
        self.remap = remap
        self.unpacked = unpacked
        self.kernel = kernel
        self.packed_ints = packed_ints
        self.locs: list[Any] = []  # the source lines of the loops around the walk, innermost last
        self.handlers = [(tirx.Cast, self.on_cast), (tirx.BufferStore, self.on_store), (tirx.DeclBuffer, self.on_decl),
                         (tirx.AllocBuffer, self.on_alloc), (tirx.Evaluate, self.on_evaluate), (tirx.For, self.on_for),
                         (tvm.ir.Call, self.on_call), (TensorLoad, self.on_load), (Var, self.on_var)]

    def fail(self, node: Any, what: str) -> CompileError:
        return CompileError(f"kernel `{self.kernel}`: {what} `{node}`: {FP4} is a storage type (no float4 arithmetic "
                            f"on MUSA); cast loaded elements first (T.cast(x[i], \"float16\")) and store with "
                            f"T.cast(value, \"{FP4}\")", self.loc(), stage="LowerFP4Storage")

    def fail_int(self, node: Any) -> UnsupportedError:
        return UnsupportedError(f"kernel `{self.kernel}`: `{node}` computes with a {node.ty.dtype} value, a sub-byte "
                                "integer, which a MUSA kernel cannot hold (no 4- or 2-bit integer type in MUSA C): "
                                "its elements may be loaded, cast (T.cast(x[i], \"int32\"), T.cast(v, "
                                f"\"{node.ty.dtype}\")), selected and stored, nothing else",
                                self.loc(), stage="LowerFP4Storage")

    def loc(self) -> Any:
        return next((loc for loc in reversed(self.locs) if loc is not None), None)

    def rewrite(self, node: Any) -> Any:
        return tvm_ffi.structural_mutate(node, self.handlers)

    def check_no_fp4_left(self, body: Any) -> None:
        """Whatever fp4-typed value is left is used in arithmetic (or compared, or passed to a call): an error."""
        left: list[Any] = []

        def note(n: Any) -> None:
            if not left and _is_packed(_dtype(n)):
                left.append(n)

        tvm_ffi.structural_walk(body, [(tvm.ir.Expr, note)])
        if left and not _is_fp4(_dtype(left[0])):
            raise self.fail_int(left[0])
        if left:
            raise self.fail(left[0], "the fp4 value")

    def nibble(self, load: Any) -> tuple[Any, Any]:
        """The byte holding fp4 element load.indices[0] of a (flat) fp4 buffer, and which nibble (0 low, 1 high)."""
        if len(load.indices) != 1:
            raise self.fail(load, f"an access to the {len(load.indices)}-d {FP4} buffer")
        index = self.rewrite(load.indices[0])
        if index.ty.dtype.lanes != 1:
            raise self.fail(load, "a vector access to")
        one = tirx.const(1, str(index.ty.dtype))
        byte_buffer = self.remap[load.source]
        if byte_buffer in self.unpacked:  # a code a byte: the low nibble of byte i
            return tirx.BufferLoad(byte_buffer, [index]), tirx.const(0, str(index.ty.dtype))
        return tirx.BufferLoad(byte_buffer, [tirx.shift_right(index, one)]), tirx.bitwise_and(index, one)

    def decode(self, expr: Any) -> Any:
        """The float32 value of an fp4 expression."""
        if isinstance(expr, TensorLoad) and expr.source in self.remap:
            byte, odd = self.nibble(expr)
            return tirx.call_extern("float32", "tl::fp4_e2m1_to_float", byte, odd)
        if isinstance(expr, tirx.FloatImm):
            return tirx.const(FP4_VALUES[fp4_bits(float(expr.value))], "float32")
        if isinstance(expr, tirx.Cast):  # a value rounded to fp4 and read back
            return tirx.call_extern("float32", "tl::fp4_e2m1_to_float",
                                    tirx.call_extern("uint8", "tl::float_to_fp4_e2m1", self.to_float(expr.value)))
        if isinstance(expr, tvm.ir.Call) and str(expr.op.name) == "prim.if_then_else":
            return tirx.if_then_else(self.rewrite(expr.args[0]), self.decode(expr.args[1]), self.decode(expr.args[2]))
        if isinstance(expr, tirx.Select):
            return tirx.Select(self.rewrite(expr.condition), self.decode(expr.true_value),
                               self.decode(expr.false_value))
        raise self.fail(expr, "the fp4 value")

    def encode(self, expr: Any) -> Any:
        """The 4-bit code (uint8) of an fp4 expression."""
        if isinstance(expr, TensorLoad) and expr.source in self.remap:
            byte, odd = self.nibble(expr)
            return tirx.call_extern("uint8", "tl::fp4_e2m1_bits", byte, odd)
        if isinstance(expr, tirx.FloatImm):
            return tirx.const(fp4_bits(float(expr.value)), "uint8")
        if isinstance(expr, tirx.Cast):
            return tirx.call_extern("uint8", "tl::float_to_fp4_e2m1", self.to_float(expr.value))
        if isinstance(expr, tvm.ir.Call) and str(expr.op.name) == "prim.if_then_else":
            return tirx.if_then_else(self.rewrite(expr.args[0]), self.encode(expr.args[1]), self.encode(expr.args[2]))
        if isinstance(expr, tirx.Select):
            return tirx.Select(self.rewrite(expr.condition), self.encode(expr.true_value),
                               self.encode(expr.false_value))
        raise self.fail(expr, "the value stored,")

    def decode_int(self, expr: Any) -> Any:
        """The int32 value of an int4 / uint4 expression."""
        signed = not _dtype(expr).startswith("u")
        if isinstance(expr, TensorLoad) and expr.source in self.remap:
            return sign_extended(nibble_code(*self.nibble(expr)), signed)
        if isinstance(expr, tirx.IntImm):
            return tirx.const(int(expr.value), "int32")
        if isinstance(expr, tirx.Cast):  # a value converted to 4 bits and read back
            return sign_extended(self.encode_int(expr), signed)
        if isinstance(expr, tvm.ir.Call) and str(expr.op.name) == "prim.if_then_else":
            return tirx.if_then_else(self.rewrite(expr.args[0]), self.decode_int(expr.args[1]),
                                     self.decode_int(expr.args[2]))
        if isinstance(expr, tirx.Select):
            return tirx.Select(self.rewrite(expr.condition), self.decode_int(expr.true_value),
                               self.decode_int(expr.false_value))
        raise self.fail_int(expr)

    def encode_int(self, expr: Any) -> Any:
        """The 4-bit code (int32, 0..15) of an int4 / uint4 expression."""
        if isinstance(expr, TensorLoad) and expr.source in self.remap:
            return nibble_code(*self.nibble(expr))
        if isinstance(expr, tirx.IntImm):
            return tirx.const(int(expr.value) & 15, "int32")
        if isinstance(expr, tirx.Cast):
            value = expr.value
            value = self.decode(value) if _is_fp4(_dtype(value)) else self.decode_int(value) \
                if _is_packed(_dtype(value)) else self.rewrite(value)
            return wrapped_code(value if _dtype(value).startswith(("int", "uint")) else tirx.Cast("int32", value))
        if isinstance(expr, tvm.ir.Call) and str(expr.op.name) == "prim.if_then_else":
            return tirx.if_then_else(self.rewrite(expr.args[0]), self.encode_int(expr.args[1]),
                                     self.encode_int(expr.args[2]))
        if isinstance(expr, tirx.Select):
            return tirx.Select(self.rewrite(expr.condition), self.encode_int(expr.true_value),
                               self.encode_int(expr.false_value))
        raise self.fail_int(expr)

    def to_float(self, value: Any) -> Any:
        """A non-fp4 value, rewritten, as float32 (what tl::float_to_fp4_e2m1 rounds)."""
        value = self.rewrite(value)
        if _is_fp4(_dtype(value)):
            raise self.fail(value, "a cast between fp4 values")
        return value if _dtype(value) == "float32" else tirx.Cast("float32", value)

    # The handlers of the walk.

    def on_cast(self, node: Any, mutator: Any) -> Any:
        if _is_packed(_dtype(node.value)) and not _is_fp4(_dtype(node.value)) and not _is_packed(_dtype(node)):
            value = self.decode_int(node.value)
            return value if _dtype(node) == "int32" else tirx.Cast(_dtype(node), value)
        if not _is_fp4(_dtype(node.value)):
            return mutator.default_mutate(node)
        if _is_fp4(_dtype(node)):
            raise self.fail(node, "a cast from fp4 to fp4")
        value = self.decode(node.value)
        return value if _dtype(node) == "float32" else tirx.Cast(_dtype(node), value)

    def on_store(self, node: Any, mutator: Any) -> Any:
        if node.buffer not in self.remap:
            return mutator.default_mutate(node)
        target = tirx.BufferLoad(node.buffer, list(node.indices))  # for nibble(): the element stored to
        byte, odd = self.nibble(target)
        if byte.source in self.packed_ints:
            return nibble_store(byte, odd, self.encode_int(node.value))
        code = self.encode(node.value)
        if byte.source in self.unpacked:  # this thread's own register: a plain store of the code
            return tirx.BufferStore(byte.source, code, list(byte.indices))
        return tirx.Evaluate(tirx.call_extern("int32", "tl::fp4_e2m1_store", tirx.address_of(byte), odd, code))

    def on_evaluate(self, node: Any, mutator: Any) -> Any:
        # `T.evaluate(x[i])`: an element read for nothing but the read; its value is never used, so no arithmetic
        if not _is_packed(_dtype(node.value)):
            return mutator.default_mutate(node)
        return tirx.Evaluate(self.decode(node.value) if _is_fp4(_dtype(node.value)) else self.decode_int(node.value))

    def on_for(self, node: Any, mutator: Any) -> Any:
        """Notes the loop's line for the errors of the accesses in it."""
        self.locs.append(loc_of(node))
        try:
            return mutator.default_mutate(node)
        finally:
            self.locs.pop()

    def on_decl(self, node: Any, mutator: Any) -> Any:
        if node.buffer not in self.remap:
            return mutator.default_mutate(node)
        return tirx.DeclBuffer(self.remap[node.buffer], data=self.rewrite(node.data))

    def on_alloc(self, node: Any, mutator: Any) -> Any:
        if node.buffer not in self.remap:
            return mutator.default_mutate(node)
        return tirx.AllocBuffer(self.remap[node.buffer], node.annotations)

    def on_call(self, node: Any, mutator: Any) -> Any:
        """`&x[i]` (an LDLMS copy's operand): the address of byte i / 2, where i is provably even (an odd element is
        the high nibble of its byte, which has no address)."""
        if not (isinstance(node.op, tvm.ir.Op) and str(node.op.name) == "tirx.address_of"
                and isinstance(node.args[0], TensorLoad) and node.args[0].source in self.remap):
            return mutator.default_mutate(node)
        load = node.args[0]
        byte_buffer = self.remap[load.source]
        index = self.rewrite(load.indices[0]) if len(load.indices) == 1 else None
        if byte_buffer in self.unpacked or index is None or not _provably_even(index):
            raise CompileError(f"kernel `{self.kernel}`: the address of `{load}`: an address into a "
                               f"{load.ty.dtype} tensor must be of a provably even element of a tensor or shared "
                               "tile (two elements a byte, the odd one in the high nibble)", stage="LowerFP4Storage")
        return tirx.address_of(tirx.BufferLoad(byte_buffer, [_halved(index)]))

    def on_var(self, node: Any, mutator: Any) -> Any:
        return self.remap.get(node, node)

    def on_load(self, node: Any, mutator: Any) -> Any:
        if node.source in self.remap and self.remap[node.source] in self.packed_ints:
            raise self.fail_int(node)
        if node.source in self.remap:  # casts and stores take theirs before the walk gets here
            raise self.fail(node, "the fp4 element")
        return mutator.default_mutate(node)


def LowerFP4Storage():  # noqa: N802
    return tl_pass("LowerFP4Storage", lower_fp4_storage)
