"""`T.ldg32/64/128/256(src, pred=None)` and `T.stg32/64/128/256(dst, value, pred=None)`: one explicit global
load or store of 32 to 256 bits, as raw 32-bit words (uint32, uint32x2, uint32x4, uint32x8), TileLang-MUSA's
names. `T.reinterpret(T.ldg64(X[i:i + 2]), T.float32x2)` reads two floats in one access; with `pred` false a
load gives zero bits and a store writes nothing (the memory is not touched).
`T.lds32/64/128(src)` and `T.sts32/64/128(dst, value)` are the same accesses to a shared buffer (upstream's
names; no predicate).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..tileop.region import to_region
from .builder import as_expr, current_trace

_WORDS = {32: 1, 64: 2, 128: 4, 256: 8}


def _word_dtype(bits: int) -> str:
    return "uint32" if bits == 32 else f"uint32x{_WORDS[bits]}"


def _address(construct: str, what: str, target: Any, bits: int, shared: bool = False) -> Any:
    """The address of `target`'s first element, after checking that it spans exactly `bits` bits (and, for the
    shared-memory forms, that it is a shared buffer)."""
    trace = current_trace(construct)
    region, _ = to_region(target, construct, what)
    if shared and not str(region.buffer.scope()).startswith("shared"):
        raise trace.error(f"{construct}: {what} {region.describe()} must be a shared buffer (its scope is "
                          f"{region.buffer.scope()!r}); T.ldg / T.stg access global memory")
    count = region.contiguous_count()
    elem_bits = tvm.DataType(region.dtype).bits
    if region.buffer in trace.layout_annotations or count is None or count * elem_bits != bits:
        raise trace.error(f"{construct}: {what} {region.describe()} must be {bits} contiguous bits "
                          f"({bits // elem_bits} x {region.dtype}, a slice of the innermost dimensions)")
    return tirx.address_of(region.buffer[tuple(region.mins)])


def _load_shared(bits: int):
    name = f"lds{bits}"

    def load(src: Any) -> Any:
        address = _address(f"T.{name}", "src", src, bits, shared=True)
        return tirx.call_extern(_word_dtype(bits), f"tl::load_shared_{bits}", address)

    load.__name__ = name
    load.__doc__ = f"One {bits}-bit shared-memory load of `src` ({_word_dtype(bits)})."
    return load


def _store_shared(bits: int):
    name = f"sts{bits}"

    def store(dst: Any, value: Any) -> None:
        construct = f"T.{name}"
        address = _address(construct, "dst", dst, bits, shared=True)
        Tb.evaluate(tirx.call_extern("int32", f"tl::store_shared_{bits}", address, _word(construct, bits, value)))

    store.__name__ = name
    store.__doc__ = f"One {bits}-bit shared-memory store of `value` ({_word_dtype(bits)}) to `dst`."
    return store


def _word(construct: str, bits: int, value: Any) -> Any:
    value = as_expr(value)
    if str(value.ty.dtype) != _word_dtype(bits):
        raise current_trace(construct).error(
            f"{construct}: the value must be {_word_dtype(bits)} (T.reinterpret it); got {value.ty.dtype}")
    return value


def _load(bits: int):
    name = f"ldg{bits}"

    def load(src: Any, pred: Any = None) -> Any:
        address = _address(f"T.{name}", "src", src, bits)
        if pred is None:
            return tirx.call_extern(_word_dtype(bits), f"tl::load_global_{bits}", address)
        return tirx.call_extern(_word_dtype(bits), f"tl::load_global_{bits}_conditional", address,
                                tirx.Cast("bool", as_expr(pred)))

    load.__name__ = name
    load.__doc__ = f"One {bits}-bit global load of `src` ({_word_dtype(bits)}); zero bits where `pred` is false."
    return load


def _store(bits: int):
    name = f"stg{bits}"

    def store(dst: Any, value: Any, pred: Any = None) -> None:
        construct = f"T.{name}"
        address = _address(construct, "dst", dst, bits)
        value = _word(construct, bits, value)
        if pred is None:
            call = tirx.call_extern("int32", f"tl::store_global_{bits}", address, value)
        else:
            call = tirx.call_extern("int32", f"tl::store_global_{bits}_conditional", address, value,
                                    tirx.Cast("bool", as_expr(pred)))
        Tb.evaluate(call)

    store.__name__ = name
    store.__doc__ = f"One {bits}-bit global store of `value` ({_word_dtype(bits)}) to `dst`; none where `pred` is 0."
    return store


ldg32, ldg64, ldg128, ldg256 = (_load(b) for b in _WORDS)
stg32, stg64, stg128, stg256 = (_store(b) for b in _WORDS)
lds32, lds64, lds128 = (_load_shared(b) for b in (32, 64, 128))
sts32, sts64, sts128 = (_store_shared(b) for b in (32, 64, 128))


def __ldg(load: Any, index: Any = None) -> Any:
    """`T.__ldg(x[i])` (or `T.__ldg(x, i)`): the element read through the read-only data path, printed as
    `__ldg(&x[i])` (CUDA's intrinsic, which MUSA keeps): for data the kernel never writes."""
    from ..tileop.region import TensorLoad

    trace = current_trace("T.__ldg")
    if index is not None:
        indices = index if isinstance(index, (list, tuple)) else [index]
        load = tirx.BufferLoad(load, [as_expr(i) for i in indices]) if isinstance(load, tirx.Buffer) else None
    if not isinstance(load, TensorLoad) or str(load.source.scope()) != "global":
        raise trace.error(f"T.__ldg takes one element of a global tensor (`T.__ldg(x[i])` or `T.__ldg(x, i)`)")
    if any(isinstance(i, tirx.Ramp) for i in load.indices):
        raise trace.error("T.__ldg reads one element; T.ldg64 / T.ldg128 read wider pieces")
    return tirx.call_extern(str(load.source.dtype), "__ldg", tirx.address_of(load))
