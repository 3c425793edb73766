"""Upstream TVM's `tirx.PrimFunc(params, body, ret_type=None, buffer_map=None, attrs=None, span=None)` and
`tirx.StringImm`, as TileOPs' trace pass uses them: it finds its marker calls by their StringImm first argument,
rewrites them with `ir_transform`, and rebuilds the function with `buffer_map=dict(func.buffer_map)` (stripping them)
or with a new output parameter mapped to a `tirx.decl_buffer` (recording into it). The rebuilt functions compile for
both arches and compute in the simulator what torch does."""

import pytest
import torch
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import rand
from tvm.tirx.stmt_functor import ir_transform  # a wheel patch: after `import tilelang`

ARCHS = ["mp_31", "mp_22"]
MARKER = "test_trace_marker"


def _marked_kernel():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            lane = T.get_thread_binding()
            T.evaluate(T.call_extern("handle", MARKER, 7, lane))
            B[lane] = A[lane] * T.float32(2.0)

    return main


def _is_marker(node):
    args = list(node.args) if isinstance(node, tirx.Call) else []
    return bool(args) and isinstance(args[0], tirx.StringImm) and args[0].value == MARKER


def test_string_imm_is_the_class_of_string_arguments():
    call = T.call_extern("handle", MARKER, 1)
    assert tirx.StringImm is tvm.ir.StringImm
    assert isinstance(call.args[0], tirx.StringImm) and call.args[0].value == MARKER


@pytest.mark.parametrize("arch", ARCHS)
def test_rebuilt_with_its_own_buffer_map_strips_the_markers(arch):
    """TileOPs' `trace.strip`: every marker becomes `Evaluate(0)`, the function rebuilt with upstream's keywords
    and its own buffer map; the same parameters, and the kernel computes without the marker."""
    main = _marked_kernel()

    def strip(node):
        if isinstance(node, tirx.Evaluate) and _is_marker(node.value):
            return tirx.Evaluate(tirx.IntImm("int32", 0))
        return node

    body = ir_transform(main.body, None, strip)
    stripped = tirx.PrimFunc(params=list(main.params), body=body, ret_type=main.ret_type,
                             buffer_map=dict(main.buffer_map), attrs=main.attrs)
    assert [p.name for p in stripped.params] == ["A", "B"]
    assert all(p.same_as(q) for p, q in zip(stripped.params, main.params))
    assert stripped.buffer_map[stripped.params[1]].shape == (64,)
    kernel = tilelang.compile(stripped, target=f"musa -arch={arch}")
    assert MARKER not in kernel.get_kernel_source()
    a, b = rand((64,), torch.float32), torch.full((64,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a * 2)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_handle_mapped_to_a_declared_buffer_becomes_that_tensor_parameter(arch):
    """TileOPs' `trace.lower`: a new handle parameter mapped to a `decl_buffer` that the rewritten markers store
    into; the parameter is that buffer, and the stores land in the tensor passed for it."""
    main = _marked_kernel()
    slots = tirx.decl_buffer((64,), "int32", name="slots", scope="global")
    handle = tirx.Var("slots_handle", "handle")

    def record(node):
        if isinstance(node, tirx.Evaluate) and _is_marker(node.value):
            event, lane = node.value.args[1], node.value.args[2]
            return tirx.BufferStore(slots, event * 100 + lane, [lane])
        return node

    body = ir_transform(main.body, None, record)
    traced = tirx.PrimFunc(list(main.params) + [handle], body, main.ret_type, {**main.buffer_map, handle: slots},
                           attrs=main.attrs)
    assert [p.name for p in traced.params] == ["A", "B", "slots"] and traced.params[2].same_as(slots)
    kernel = tilelang.compile(traced, target=f"musa -arch={arch}")
    a, b = rand((64,), torch.float32), torch.full((64,), float("nan"))
    recorded = torch.full((64,), -1, dtype=torch.int32)
    kernel(a, b, recorded)
    torch.testing.assert_close(b, a * 2)
    assert recorded.tolist() == [700 + k for k in range(64)]


def test_upstream_signature_and_its_errors():
    """The 4th positional argument is the buffer map, as upstream's; the wheel's order (attrs 4th) is refused by
    name rather than read as a map, and a map naming no parameter is an error."""
    main = _marked_kernel()
    plain = tirx.PrimFunc(main.params, main.body, main.ret_type, None, main.attrs)
    assert plain.attrs.same_as(main.attrs) and all(p.same_as(q) for p, q in zip(plain.params, main.params))
    with pytest.raises(TypeError, match="buffer_map .*must map parameters to buffers.*attrs="):
        tirx.PrimFunc(main.params, main.body, main.ret_type, main.attrs)
    stray = tirx.decl_buffer((4,), "float32", name="stray")
    with pytest.raises(ValueError, match="buffer_map names `h` \\(buffer `stray`\\).*parameters \\['A', 'B'\\]"):
        tirx.PrimFunc(main.params, main.body, buffer_map={tirx.Var("h", "handle"): stray})
    with pytest.raises(TypeError, match="not a buffer"):
        tirx.PrimFunc(main.params, main.body, buffer_map={main.params[0]: 3})
