"""parse_tile_op keeps the op of each recently parsed call: the passes of one lowering parse the same unchanged call
again and again. The op of a call is a frozen dataclass built from the call alone, so the same call gives the same
op object; another call, even a structurally equal one, is parsed on its own."""

import tvm_ffi
from tvm import tirx

import tilelang  # noqa: F401  (registers the tile ops)
import tilelang.language as T
from tilelang_musa.tileop import Copy, Gemm, is_tile_op, parse_tile_op
from tilelang_musa.tileop import registry


def _tile_calls(func):
    calls = []

    def on_eval(node):
        if is_tile_op(node.value):
            calls.append(node.value)

    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, on_eval)])
    return calls


def _program():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 32), "float16")
            b = T.alloc_shared((32, 64), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            T.gemm(a, b, c)
            T.copy(c, C)

    return main


def test_the_same_call_gives_the_same_op_and_an_equal_call_an_equal_one():
    calls = _tile_calls(_program())
    ops = [parse_tile_op(call) for call in calls]
    assert [type(op) for op in ops].count(Copy) == 3 and any(isinstance(op, Gemm) for op in ops)
    again = [parse_tile_op(call) for call in _tile_calls(_program())]  # a second trace: other call objects
    for call, op in zip(calls, ops):
        assert parse_tile_op(call) is op
    assert [type(op) for op in again] == [type(op) for op in ops]
    assert all(other is not op for op, other in zip(ops, again))
    assert [op.loc for op in again] == [op.loc for op in ops]


def test_the_memo_keeps_a_bounded_number_of_calls_each_of_them_alive(monkeypatch):
    monkeypatch.setattr(registry, "_PARSED", type(registry._PARSED)())
    monkeypatch.setattr(registry, "_PARSED_KEPT", 3)
    calls = _tile_calls(_program())  # five tile ops
    ops = [parse_tile_op(call) for call in calls]
    assert list(registry._PARSED) == [call.__chandle__() for call in calls[-3:]]  # the oldest went first
    for call in calls[-3:]:
        kept, _ = registry._PARSED[call.__chandle__()]
        assert kept.same_as(call)  # held: its handle cannot name another object meanwhile
    assert parse_tile_op(calls[-1]) is ops[-1]
    again = parse_tile_op(calls[0])  # forgotten: parsed anew
    assert again is not ops[0] and type(again) is type(ops[0])
