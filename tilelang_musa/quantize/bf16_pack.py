"""Two bfloat16 values in one uint32 (the first in bits 15-0, the second in bits 31-16), packed from and unpacked to
float32 in TIR: a bfloat16 is the high half of a float32's bits."""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ._bits import const


def _tir_f32x2_to_bf16x2_to_u32(v0: Any, v1: Any, round_to_even: bool = True) -> Any:
    """v0, v1 (float32) as bfloat16 bits packed in a uint32. With round_to_even, each float's bits get
    0x7FFF + (bit 16) before the shift (round to nearest, ties to even; NaN payloads are not special-cased);
    without it they are truncated."""
    u32 = "uint32"
    halves = []
    for value in (v0, v1):
        bits = tirx.reinterpret(u32, value)
        if round_to_even:
            bits = bits + (((bits >> const(16, u32)) & const(1, u32)) + const(0x7FFF, u32))
        halves.append((bits >> const(16, u32)) & const(0xFFFF, u32))
    return halves[0] | (halves[1] << const(16, u32))


def _tir_u32_to_bf16x2_to_f32x2(x: Any) -> tuple[Any, Any]:
    """The two bfloat16 halves of a uint32 (low half first) as float32 values."""
    u32 = "uint32"
    low, high = x & const(0xFFFF, u32), (x >> const(16, u32)) & const(0xFFFF, u32)
    return tuple(tirx.reinterpret("float32", half << const(16, u32)) for half in (low, high))
