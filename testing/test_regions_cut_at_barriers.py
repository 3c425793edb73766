"""mp_22 has no barrier over part of a block. Two TileOPs kernels met one inside a region of part of the block:
- fft.py's butterfly `for st: if tx < half: u = s[j]; v = s[l]; s[j] = u + v; s[l] = u - v` then T.sync_threads():
  a false hazard. Each thread reaches its own pair; branch_disjointness compared the points of every stage together
  (a loop whose body has a barrier outside the branch: only one iteration's points are compared now), and
  SyncWriteAfterWrite could not prove the two stores disjoint (their indices read the stage: it now knows the loops
  and conditions around the sequence).
- permute_align.py's small kernel `if tx >= 256: zero my row; count tokens into my row at flat[...]`: the index reads
  a load, so a barrier is really placed; the region is cut around a block barrier (split_regions_at_barriers.py)."""

import pytest
import torch
import tvm
from tvm import tirx
from tvm.script import tirx as Tb

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.transform.range_barriers import range_barriers

ARCHS = ["mp_22", "mp_31"]


def _sync():
    return tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))


def _func(body, tx, arch="mp_22"):
    iv = tirx.IterVar(tvm.ir.Range(0, 256), tx, 1, "threadIdx.x")
    func = tirx.PrimFunc([], tirx.AttrStmt(iv, "thread_extent", 256, body))
    return func.with_attr("target", tvm.target.Target({"kind": "musa", "arch": arch}))


def test_a_region_is_cut_at_its_barrier_and_a_pure_binding_bound_again():
    tx = tvm.ir.expr.Var("tx", "int32")
    s = Tb.buffer([256], "float32", scope="shared")
    out = Tb.buffer([256], "float32", scope="global")
    row = tvm.ir.expr.Var("row", "int32")
    cond = tx >= 64
    before = _func(tirx.IfThenElse(cond, tirx.SeqStmt([
        tirx.Bind(row, tx - 64),
        tirx.BufferStore(s, tirx.const(1.0, "float32"), [row]),
        _sync(),
        tirx.BufferStore(out, s[191 - row], [row])]), None), tx)
    row2 = tvm.ir.expr.Var("row", "int32")
    expected = _func(tirx.SeqStmt([
        tirx.IfThenElse(cond, tirx.SeqStmt([tirx.Bind(row, tx - 64),
                                            tirx.BufferStore(s, tirx.const(1.0, "float32"), [row])]), None),
        _sync(),
        tirx.IfThenElse(cond, tirx.SeqStmt([tirx.Bind(row2, tx - 64),
                                            tirx.BufferStore(out, s[191 - row2], [row2])]), None)]), tx)
    tvm.ir.assert_structural_equal(range_barriers(before).body, expected.body, map_free_vars=True)


def test_a_uniform_loop_around_the_barrier_moves_outside_the_region():
    tx = tvm.ir.expr.Var("tx", "int32")
    k = tvm.ir.expr.Var("k", "int32")
    s = Tb.buffer([256], "float32", scope="shared")
    cond = tx < 64

    def loop(body):
        return tirx.For(k, 0, 4, tirx.ForKind.SERIAL, body)

    a = tirx.BufferStore(s, tirx.const(1.0, "float32"), [tx + k])
    b = tirx.BufferStore(s, s[63 - tx] + tirx.const(1.0, "float32"), [tx + 64])
    before = _func(tirx.IfThenElse(cond, loop(tirx.SeqStmt([a, _sync(), b])), None), tx)
    expected = _func(loop(tirx.SeqStmt([tirx.IfThenElse(cond, a, None), _sync(), tirx.IfThenElse(cond, b, None)])),
                     tx)
    tvm.ir.assert_structural_equal(range_barriers(before).body, expected.body, map_free_vars=True)
    on_mp31 = range_barriers(_func(tirx.IfThenElse(cond, loop(tirx.SeqStmt([a, _sync(), b])), None), tx, "mp_31"))
    assert "tvm_storage_sync(\"shared\", 1, 64)" in str(on_mp31).replace("'", '"'), on_mp31  # a barrier over the range


def test_a_value_loaded_before_the_barrier_and_used_after_it_keeps_the_error():
    tx = tvm.ir.expr.Var("tx", "int32")
    s = Tb.buffer([256], "float32", scope="shared")
    out = Tb.buffer([256], "float32", scope="global")
    v = tvm.ir.expr.Var("v", "float32")
    before = _func(tirx.IfThenElse(tx < 64, tirx.SeqStmt([
        tirx.Bind(v, s[tx + 1]), _sync(), tirx.BufferStore(s, v, [tx]), tirx.BufferStore(out, v, [tx])]), None), tx)
    with pytest.raises(Exception, match="mp_22 has no barrier over part of a block"):  # (through TVM's mutator)
        range_barriers(before)


FILL, EXPERTS, TOKENS = 128, 4, 16
WORKERS = 32


def _fill_and_workers():
    """permute_align's small kernel, shaped: a fill group beside a worker group; each worker zeroes and counts
    into its own row of `cnts`, at a column read from global memory; worker e then sums column e."""
    @T.prim_func
    def main(flat: T.Tensor((TOKENS,), "int32"), filled: T.Tensor((FILL,), "int32"),
             counts: T.Tensor((EXPERTS,), "int32")):
        with T.Kernel(1, threads=FILL + WORKERS):
            tx = T.get_thread_binding()
            cnts = T.alloc_shared([(WORKERS + 1) * EXPERTS], "int32")
            if tx < FILL:
                filled[tx] = -7
            if tx >= FILL:
                wid = tx - FILL
                for i in T.serial(EXPERTS):
                    cnts[wid * EXPERTS + i] = 0
                for i in T.serial(T.ceildiv(TOKENS, WORKERS)):
                    idx = wid + i * WORKERS
                    if idx < TOKENS:
                        eid = flat[idx]
                        cnts[wid * EXPERTS + eid] = cnts[wid * EXPERTS + eid] + 1
            T.sync_threads()
            if tx >= FILL:
                wid = tx - FILL
                if wid < EXPERTS:
                    total = T.alloc_var("int32")
                    total = 0
                    for k in T.serial(WORKERS):
                        total = total + cnts[k * EXPERTS + wid]
                    counts[wid] = total

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_fill_group_beside_a_worker_group_matches_torch(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")  # the race detector checks the barriers placed
    kernel = tilelang.compile(_fill_and_workers(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    if arch == "mp_22":
        assert "barrier_sync" not in source and source.count("__syncthreads") >= 2, source
    flat = torch.randint(0, EXPERTS, (TOKENS,), dtype=torch.int32, generator=torch.Generator().manual_seed(3))
    filled, counts = torch.full((FILL,), -12345, dtype=torch.int32), torch.full((EXPERTS,), -12345, dtype=torch.int32)
    kernel(flat, filled, counts)
    assert bool((filled == -7).all())
    torch.testing.assert_close(counts, torch.bincount(flat.long(), minlength=EXPERTS).int())


N, THREADS = 64, 256


def _butterflies():
    """fft.py's in-shared-memory stages, on real and imaginary parts, in `if i < N // 2` of a wider block."""
    stages = N.bit_length() - 1

    @T.prim_func
    def main(xr: T.Tensor((N,), "float32"), xi: T.Tensor((N,), "float32"),
             yr: T.Tensor((N,), "float32"), yi: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=THREADS):
            sr = T.alloc_shared([N], "float32")
            si = T.alloc_shared([N], "float32")
            for i in T.Parallel(THREADS):
                if i < N:
                    rev = T.alloc_var("int32")
                    tmp = T.alloc_var("int32")
                    rev = 0
                    tmp = i
                    for _b in T.serial(stages):
                        rev = (rev << 1) | (tmp & 1)
                        tmp = tmp >> 1
                    sr[i] = xr[rev]
                    si[i] = xi[rev]
            T.sync_threads()
            for st in range(stages):
                m = 1 << (st + 1)
                h = 1 << st
                for i in T.Parallel(THREADS):
                    if i < N // 2:
                        j = (i // h) * m + i % h
                        angle = -6.283185307179586 * T.cast(i % h, "float32") / T.cast(m, "float32")
                        wr = T.cos(angle)
                        wi = T.sin(angle)
                        ur = sr[j]
                        ui = si[j]
                        tr = sr[j + h] * wr - si[j + h] * wi
                        ti = sr[j + h] * wi + si[j + h] * wr
                        sr[j] = ur + tr
                        si[j] = ui + ti
                        sr[j + h] = ur - tr
                        si[j + h] = ui - ti
                T.sync_threads()
            for i in T.Parallel(THREADS):
                if i < N:
                    yr[i] = sr[i]
                    yi[i] = si[i]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_fft_butterflies_need_no_barrier_inside_their_region_and_match_torch(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(_butterflies(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    region = source[source.index(f"if (((int)threadIdx.x) < {N // 2})"):]
    region = region[:region.index("\n    }\n")]
    assert "sync" not in region and "barrier" not in region, region
    xr, xi = rand((N,), torch.float32, 4), rand((N,), torch.float32, 5)
    yr, yi = poison((N,), torch.float32), poison((N,), torch.float32)
    kernel(xr, xi, yr, yi)
    want = torch.fft.fft(torch.complex(xr, xi).to(torch.complex128))
    torch.testing.assert_close(torch.complex(yr, yi).to(torch.complex128), want, atol=1e-4, rtol=1e-4)
