"""Large integer bindings stay bindings (ir/large_bindings.py): a pipelined loop replays one before the emitted units
that read it instead of substituting it into them (transform/pipeline_units.py), TVM's passes keep it
(transform/keep_large_bindings.py), and the analyzers still know its range (no bounds guard comes back). Before,
stream-K's pair binding was copied into every address of its 3-stage pipeline on mp_22: 114 KB of MUSA C, lines of
11 KB, half a minute of lowering."""

import re

import pytest
import torch
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import poison, rand
from test_software_pipeline import with_target
from tilelang_musa.ir.large_bindings import is_large, learn
from tilelang_musa.transform.inject_software_pipeline import inject_software_pipeline
from tilelang_musa.transform.keep_large_bindings import keep_large_bindings, restore_kept_bindings
from tilelang_musa.transform.pipeline_planning import pipeline_planning
from tilelang_musa.transform.remove_unused_binds import remove_unused_binds

ARCHS = ["mp_22", "mp_31"]


def _parsed(text):
    text = re.sub(r'"tl[.]loc": "[^"]*"(, )?', "", text).replace("annotations={}, ", "").replace(
        ", annotations={}", "").replace("attrs={}, ", "")
    return tvm.script.from_source(text, extra_vars={"T": tvm.script.tirx})


@T.prim_func
def staggered_sum(A: T.Tensor((64, 128), "float16"), Out: T.Tensor((64, 32), "float32")):
    with T.Kernel(2, threads=128) as bx:
        A_s = T.alloc_shared((64, 32), "float16")
        acc = T.alloc_fragment((64, 32), "float32")
        T.clear(acc)
        for k in T.Pipelined(4, num_stages=2):
            kk = T.int32()
            T.let(kk, (k + (bx * 3 + 1) % 4 + (bx * 5 + 2) % 3) % 4)  # large: kept, replayed per iteration
            col = T.int32()
            T.let(col, kk * 32)  # small: substituted
            T.copy(A[0, col], A_s)
            for i, j in T.Parallel(64, 32):
                acc[i, j] += T.Cast("float32", A_s[i, j])
        T.copy(acc, Out)


# mp_22, 2 stages over 4 iterations: the load of iteration k + 1 (stage 0) binds its own kk before it; the sum
# (stage 1) reads no binding
STAGGERED_SUM_PIPELINED = """
@T.prim_func
def staggered_sum(A: T.Buffer((64, 128), "float16"), Out: T.Buffer((64, 32), "float32")):
    bx = T.launch_thread("blockIdx.x", 2)
    thread_x = T.launch_thread("threadIdx.x", 128)
    A_s = T.alloc_buffer((2, 64, 32), "float16", scope="shared.dyn")
    acc = T.alloc_buffer((64, 32), scope="local.fragment")
    T.Call("tl.tileop.fill", [acc[0:64, 0:32], T.float32(0.0)], ret_ty="int32")
    kk: T.let[T.int32] = (T.Add(0, (bx * 3 + 1) % 4) + (bx * 5 + 2) % 3) % 4
    T.Call("tl.tileop.copy", [A[0:64, kk * 32:kk * 32 + 32], A_s[0, 0:64, 0:32]], attrs={"tl.async": "issue"}, ret_ty="int32")
    T.call_extern("int32", "tl::cp_async_commit")
    for k in T.serial(3):
        kk_1: T.let[T.int32] = (k + 1 + (bx * 3 + 1) % 4 + (bx * 5 + 2) % 3) % 4
        T.Call("tl.tileop.copy", [A[0:64, kk_1 * 32:kk_1 * 32 + 32], A_s[(k + 1) % 2, 0:64, 0:32]], attrs={"tl.async": "issue"}, ret_ty="int32")
        T.call_extern("int32", "tl::cp_async_commit")
        T.call_extern("int32", "tl::cp_async_wait<1>")
        T.tvm_storage_sync("shared")
        for i in T.parallel(64, annotations={"tl.parallel": True}):
            for j in T.parallel(32, annotations={"tl.parallel": True}):
                acc[i, j] = acc[i, j] + T.Cast("float32", A_s[k % 2, i, j])
    T.call_extern("int32", "tl::cp_async_commit")
    T.call_extern("int32", "tl::cp_async_wait<1>")
    T.tvm_storage_sync("shared")
    for i in T.parallel(64, annotations={"tl.parallel": True}):
        for j in T.parallel(32, annotations={"tl.parallel": True}):
            acc[i, j] = acc[i, j] + T.Cast("float32", A_s[1, i, j])
    T.call_extern("int32", "tl::cp_async_wait<0>")
    T.Call("tl.tileop.copy", [acc[0:64, 0:32], Out[0:64, 0:32]], ret_ty="int32")
"""


def test_a_large_binding_is_replayed_per_iteration_and_a_small_one_substituted():
    got = inject_software_pipeline(pipeline_planning(with_target(staggered_sum, "mp_22")), {})
    tvm.ir.assert_structural_equal(_parsed(got.without_attr("target").script()), _parsed(STAGGERED_SUM_PIPELINED))


def _three_bindings(keeps_x: bool) -> str:
    """x: large, read 16 times (substituted, it would add 15 x 22 nodes); y: small; z: large, read once."""
    x = "T.max(n, 2) * 3 + T.Select(n < 5, (n * 7 + 3) % 11, (n * 5 + 1) % 13)"
    z = "T.min(n, 2) * 3 + T.Select(n < 6, (n * 7 + 3) % 11, (n * 5 + 1) % 13)"
    if keeps_x:  # as StmtSimplify leaves it, the unread bindings dropped (RemoveUnusedBinds)
        lines = [f"    x: T.let[T.int32] = {x}"] + [f"    A[x + {i}] = n * 4 + 1" for i in range(16)] + [f"    A[{z}] = 0"]
    else:
        lines = [f"    x: T.let[T.int32] = {x}", "    y: T.let[T.int32] = n * 4 + 1", f"    z: T.let[T.int32] = {z}"]
        lines += [f"    A[x + {i}] = y" for i in range(16)] + ["    A[z] = 0"]
    return "\n".join(['@T.prim_func', 'def main(A: T.Buffer((64,), "int32"), n: T.int32):', *lines])


def test_stmt_simplify_keeps_a_large_binding_read_many_times_and_substitutes_the_others():
    before = _parsed(_three_bindings(keeps_x=False))
    assert is_large(before.body.seq[0].value) and not is_large(before.body.seq[1].value)
    kept = before.with_body(keep_large_bindings(before.body))
    simplified = tirx.transform.StmtSimplify()(tvm.IRModule({"main": kept}))["main"]
    got = simplified.with_body(restore_kept_bindings(remove_unused_binds(simplified.body)))
    tvm.ir.assert_structural_equal(got, _parsed(_three_bindings(keeps_x=True)).with_attr("global_symbol", "main"))
    # without the wrapper TVM substitutes x too
    plain = tirx.transform.StmtSimplify()(tvm.IRModule({"main": before}))["main"]
    assert all(isinstance(s, tirx.BufferStore) for s in remove_unused_binds(plain.body).seq)


def staggered_gemm(M, N, K, bm=64, bn=64, bk=32, num_stages=3):
    """A GEMM whose blocks walk the K tiles each in its own order: from a staggered start, odd blocks backwards (a
    large binding read by both loads)."""
    ks = K // bk

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(ks, num_stages=num_stages):
                kk = T.int32()
                T.let(kk, T.Select((bx + by) % 2 == 0, (k + bx * 3 + by) % ks, ks - 1 - (k + bx * 3 + by) % ks))
                T.copy(A[by * bm, kk * bk], A_s)
                T.copy(B[kk * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_gemm_with_a_large_pipelined_binding_proves_its_loads_in_bounds_and_matches_torch(arch):
    kernel = tilelang.compile(staggered_gemm(128, 128, 256), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    # (kk, read by two loads, is substituted into them at last: KeepLargeBindings keeps what would add more)
    if arch == "mp_22":
        # the loads' bounds are proved from kk's range (a Select of two `% 8`): every guard folds to true (a
        # guard on the block index stays as in any GEMM, until TVM folds it)
        guards = re.findall(r"cp_async_gs_conditional<16>\(.*, (.*)\);", src)
        assert guards and set(guards) == {"true"}, src
    a, b = rand((128, 256), torch.float16, 31), rand((256, 128), torch.float16, 32)
    c = poison((128, 128), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def scattered_tiles(tiles_per_block=4, rows=32, cols=64):
    """B's tile kk = A's tile k of the block's range, kk a permutation of the range (a large binding): the
    stores' bounds are proved from kk's range."""
    n = 2 * tiles_per_block

    @T.prim_func
    def main(A: T.Tensor((n * rows, cols), "float16"), B: T.Tensor((n * rows, cols), "float16")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((rows, cols), "float16")
            for k in T.Pipelined(tiles_per_block, num_stages=2):
                kk = T.int32()
                T.let(kk, bx * tiles_per_block + ((k + bx * 3 + 1) % tiles_per_block * 3 + 1) % tiles_per_block)
                T.copy(A[(bx * tiles_per_block + k) * rows, 0], S)
                T.copy(S, B[kk * rows, 0])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_stores_through_a_large_binding_are_proved_in_bounds_and_match_torch(arch):
    kernel = tilelang.compile(scattered_tiles(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    # no bounds guard on the tile's rows (kk, read once per emitted store, is substituted there at last:
    # substituting it copies nothing)
    assert not [line for line in src.splitlines() if line.strip().startswith("if") and "blockIdx" in line], src
    a = rand((256, 64), torch.float16, 33)
    b = poison((256, 64), torch.float16)
    kernel(a, b)
    expected = torch.empty_like(a)
    for bx in range(2):
        for k in range(4):
            kk = bx * 4 + ((k + bx * 3 + 1) % 4 * 3 + 1) % 4
            expected[kk * 32:(kk + 1) * 32] = a[(bx * 4 + k) * 32:(bx * 4 + k + 1) * 32]
    assert torch.equal(b, expected)


def column_offsets(n_tiles=4):
    """Out = the sums of A's and B's column tiles, each block walking them in its own order: the column offset
    itself is a large binding (a Select of two multiples of 32), whose alignment decides the loads' 16-byte
    pieces."""

    @T.prim_func
    def main(A: T.Tensor((64, 32 * n_tiles), "float16"), B: T.Tensor((64, 32 * n_tiles), "float16"),
             Out: T.Tensor((2, 64, 32), "float32")):
        with T.Kernel(2, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((64, 32), "float16")
            acc = T.alloc_fragment((64, 32), "float32")
            T.clear(acc)
            for k in T.Pipelined(n_tiles, num_stages=2):
                col = T.int32()
                T.let(col, T.Select(bx == 0, (k * 3 + 1) % n_tiles * 32, (n_tiles - 1 - (k * 3 + 2) % n_tiles) * 32))
                T.copy(A[0, col], A_s)
                T.copy(B[0, col], B_s)
                for i, j in T.Parallel(64, 32):
                    acc[i, j] += T.Cast("float32", A_s[i, j]) + T.Cast("float32", B_s[i, j])
            T.copy(acc, Out[bx, 0:64, 0:32])

    return main


def test_a_large_binding_as_a_column_offset_keeps_the_loads_16_byte_pieces():
    kernel = tilelang.compile(column_offsets(), target="musa -arch=mp_22")
    src = kernel.get_kernel_source()
    # the pieces' alignment is proved through `col`, a binding until TVM's passes (before, only the substituted
    # Select proved it)
    assert src.count("tl::cp_async_gs<16>(") == 4, src
    a, b = rand((64, 128), torch.float16, 34), rand((64, 128), torch.float16, 35)
    out = poison((2, 64, 32), torch.float32)
    kernel(a, b, out)
    tiles = (a.float() + b.float()).view(64, 4, 32).sum(dim=1)
    torch.testing.assert_close(out, torch.stack([tiles, tiles]), rtol=1e-3, atol=1e-3)


def test_a_large_float_or_pointer_binding_teaches_no_range():
    # SafeMemoryAccess learns every large binding; a float value has no integer bound (the analyzer's
    # const_int_bound rejected it: sparse attention's robust example stopped there).
    ana = tvm.sym.Analyzer()
    x = tirx.Var("x", "float32")
    value = x
    for k in range(40):
        value = value * x + tirx.FloatImm("float32", float(k))
    assert is_large(value)
    var = tirx.Var("v", "float32")
    learn(ana, var, value)
    ptr = tirx.Var("p", "handle")
    learn(ana, tirx.Var("q", "handle"), tirx.call_intrin("handle", "tirx.address_of", tirx.BufferLoad(
        tirx.decl_buffer((4,), "float32", data=ptr), [0])))
