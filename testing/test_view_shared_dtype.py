"""T.view of a shared tile as another dtype (issue 39): `v = T.view(s, shape, "int8")` names the tile's bytes as other
elements (`signed char* v = reinterpret_cast<signed char*>(s);`). Every pass that reasons about shared memory treats
the two names as one storage: a write through one and a read through the other by another thread get a barrier
(ThreadSync compares the bytes they touch), the tile stays in use while its view is (shared-memory planning), a
pipelined loop versions the view with its tile, and the tile keeps its row-major bytes (no swizzle chosen for it)."""

import pytest
import torch
import tvm
from tvm.script import tirx as S

import tilelang
import tilelang.language as T
from conftest import line_of, poison, rand
from tilelang_musa.transform.thread_sync import ThreadSync

ARCHS = ["mp_31", "mp_22"]
N = 128


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    monkeypatch.setenv("TILELANG_SIM_SEED", "5")


SYNC = "tirx.tvm_storage_sync"


@pytest.mark.parametrize("scope", ["shared", "shared.dyn"])
def test_thread_sync_orders_the_tile_and_its_view_by_their_bytes(scope):
    """Thread tx stores half tx and loads byte tx (half tx // 2): a barrier, though both indices are `tx`; a load of
    bytes 2 tx, 2 tx + 1 (its own half) needs none, nor does a store through the view of the bytes it loaded; the
    shown accesses come back as they were."""
    @S.prim_func(private=True)
    def before(A: S.handle("float16", "global"), B: S.handle("int8", "global")):
        Ag = S.decl_buffer((128,), "float16", data=A)
        Bg = S.decl_buffer((256,), "int8", data=B)
        tx = S.launch_thread("threadIdx.x", 128)
        T_ = S.alloc_buffer((128,), "float16", scope=scope)
        V = S.decl_buffer((256,), "int8", data=T_.data, scope=scope)
        T_[tx] = Ag[tx]
        Bg[S.Ramp(tx * 2, 1, 2)] = V[S.Ramp(tx * 2, 1, 2)]
        Bg[tx] = V[tx]

    @S.prim_func(private=True)
    def expected(A: S.handle("float16", "global"), B: S.handle("int8", "global")):
        Ag = S.decl_buffer((128,), "float16", data=A)
        Bg = S.decl_buffer((256,), "int8", data=B)
        tx = S.launch_thread("threadIdx.x", 128)
        T_ = S.alloc_buffer((128,), "float16", scope=scope)
        V = S.decl_buffer((256,), "int8", data=T_.data, scope=scope)
        T_[tx] = Ag[tx]
        Bg[S.Ramp(tx * 2, 1, 2)] = V[S.Ramp(tx * 2, 1, 2)]
        S.evaluate(S.call_intrin("int32", SYNC, scope))
        Bg[tx] = V[tx]

    got = ThreadSync(scope)(tvm.IRModule({"main": before}))["main"]
    tvm.ir.assert_structural_equal(got, expected)


def tile_then_view(scope):
    """Thread t stores half t; thread t then loads byte t, which is half t // 2: another thread's."""
    @T.prim_func
    def main(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "int8")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            S = T.alloc_shared((N,), "float16", scope=scope)
            V = T.view(S, (2 * N,), "int8")
            S[tx] = A[tx]
            B[tx] = V[tx]

    return main


def view_then_tile(scope):
    """Bytes stored through the int8 view (thread t: bytes t and N + t), halves loaded through the tile."""
    @T.prim_func
    def main(W: T.Tensor((2 * N,), "int8"), B: T.Tensor((N,), "float16")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            S = T.alloc_shared((N,), "float16", scope=scope)
            V = T.view(S, (2 * N,), "int8")
            for r in T.serial(2):
                V[r * N + tx] = W[r * N + tx]
            B[tx] = S[N - 1 - tx]

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("scope", ["shared.dyn", "shared"])
def test_a_store_to_the_tile_and_a_load_through_its_view_are_ordered(arch, scope, checked):
    kernel = tilelang.compile(tile_then_view(scope), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "signed char* V = reinterpret_cast<signed char*>(S);" in source, source
    # the same index `tx` through both names: a barrier all the same (byte tx is half tx // 2)
    store, load = source.index("S[(int)threadIdx.x] = A"), source.index("= V[(int)threadIdx.x]")
    assert "__syncthreads();" in source[store:load], source
    a, b = rand((N,), torch.float16, 1), torch.full((N,), 90, dtype=torch.int8)
    kernel(a, b)
    assert torch.equal(b, a.view(torch.int8)[:N])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("scope", ["shared.dyn", "shared"])
def test_stores_through_the_view_and_a_load_of_the_tile_are_ordered(arch, scope, checked):
    kernel = tilelang.compile(view_then_tile(scope), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    store, load = source.index("V[(r * 128) + ((int)threadIdx.x)] = W"), source.index("= S[127 - ((int)threadIdx.x)]")
    assert "__syncthreads();" in source[store:load], source
    halves = rand((N,), torch.float16, 2)
    b = poison((N,), torch.float16)
    kernel(halves.view(torch.int8), b)
    assert torch.equal(b.view(torch.int16), halves.flip(0).view(torch.int16))


def test_without_the_barrier_checked_mode_reports_the_race(checked):
    """The same kernel with the barriers switched off: the simulator names the race between the two names."""
    kernel = tilelang.compile(tile_then_view("shared.dyn"), target="musa -arch=mp_31",
                              pass_configs={"tl.disable_thread_storage_sync": True})
    assert "__syncthreads" not in kernel.get_kernel_source()
    with pytest.raises(Exception, match=r"data race on byte \d+ of shared `S`"):
        kernel(rand((N,), torch.float16, 1), torch.full((N,), 90, dtype=torch.int8))


def annotated_view_program():
    """Upstream's test_tilelang_language_view.py program (a layout annotated on the view), the rows read reversed."""
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 128), T.int8)):
        with T.Kernel(1, threads=128) as _:
            A_stage = T.alloc_shared((2, 64, 64), T.float16, scope="shared.dyn")
            A_i8 = T.view(A_stage, (2, 64, 128), dtype=T.int8)
            T.annotate_layout({A_i8: T.Layout((2, 64, 128), lambda s, i, j: [s, i, j])})
            for i, j in T.Parallel(64, 64):
                A_stage[0, i, j] = A[i, j]
            for i, j in T.Parallel(64, 128):
                B[i, j] = A_i8[0, 63 - i, j]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_view_with_an_annotated_layout(arch, checked):
    kernel = tilelang.compile(annotated_view_program(), out_idx=-1, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "signed char* A_i8 = reinterpret_cast<signed char*>(A_stage);" in source, source
    assert "__syncthreads();" in source, source
    a = rand((64, 64), torch.float16, 3)
    torch.testing.assert_close(kernel(a), a.flip(0).contiguous().view(torch.int8), rtol=0, atol=0)


def lifetimes_program():
    """S2 is used between S1's store and the last load through S1's view: the two may not share bytes."""
    @T.prim_func
    def main(A: T.Tensor((N,), "float16"), C: T.Tensor((2 * N,), "float32"), B: T.Tensor((2 * N,), "int8"),
             D: T.Tensor((2 * N,), "float32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            S1 = T.alloc_shared((N,), "float16")
            V = T.view(S1, (2 * N,), "int8")
            S2 = T.alloc_shared((2 * N,), "float32")
            S1[tx] = A[tx]
            for r in T.serial(2):
                S2[r * N + tx] = C[r * N + tx]
            for r in T.serial(2):
                D[r * N + tx] = S2[2 * N - 1 - r * N - tx]
            for r in T.serial(2):
                B[r * N + tx] = V[2 * N - 1 - r * N - tx]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_the_tile_stays_in_use_while_its_view_is(arch, checked):
    kernel = tilelang.compile(lifetimes_program(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "half_t* S1 = reinterpret_cast<half_t*>(buf_dyn_shmem);" in source, source
    assert "float* S2 = reinterpret_cast<float*>(buf_dyn_shmem);" not in source, source  # not on S1's bytes
    a, c = rand((N,), torch.float16, 4), rand((2 * N,), torch.float32, 5)
    b, d = torch.full((2 * N,), 90, dtype=torch.int8), poison((2 * N,), torch.float32)
    kernel(a, c, b, d)
    assert torch.equal(b, a.view(torch.int8).flip(0))
    assert torch.equal(d, c.flip(0))


KT = 4


def pipelined_program():
    """Bytes loaded into S by a pipelined T.copy, read as halves through the view V in the next stage."""
    @T.prim_func
    def main(A: T.Tensor((KT * 32, 64), T.int8), B: T.Tensor((32, 32), T.float32)):
        with T.Kernel(1, threads=128) as _:
            S = T.alloc_shared((32, 64), T.int8)
            V = T.view(S, (32, 32), dtype=T.float16)
            acc = T.alloc_fragment((32, 32), T.float32)
            T.clear(acc)
            for k in T.Pipelined(KT, num_stages=2):
                T.copy(A[k * 32:(k + 1) * 32, :], S)
                for i, j in T.Parallel(32, 32):
                    acc[i, j] += V[31 - i, j]
            T.copy(acc, B)

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_pipelined_loop_versions_the_view_with_its_tile(arch, checked):
    kernel = tilelang.compile(pipelined_program(), out_idx=-1, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "half_t* V = reinterpret_cast<half_t*>(S);" in source, source
    # two versions of S (2048 bytes each): version k & 1 read through V at 1024 halves a version
    assert "(k & 1) * 1024)" in source, source
    halves = rand((KT * 32, 32), torch.float16, 6)
    b = kernel(halves.view(torch.int8))
    torch.testing.assert_close(b, halves.float().view(KT, 32, 32).flip(1).sum(0), rtol=1e-5, atol=1e-5)


def test_a_swizzle_an_op_needs_on_a_viewed_tile_is_an_error():
    """An SQMMA gemm (mp_31) needs its operand tile swizzled: the view would read the bytes out of order."""
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32"),
             D: T.Tensor((64, 128), "int8")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            A_bytes = T.view(A_s, (64, 128), "int8")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            T.copy(acc, C)
            T.copy(A_bytes, D)

    with pytest.raises(tilelang.CompileError, match=r"shared tile `A_s` is also named `A_bytes` \(int8\), but an op "
                                                    r"on it needs `A_s` stored in a layout of its own") as raised:
        tilelang.compile(main, target="musa -arch=mp_31")
    assert raised.value.loc is not None and raised.value.loc.lineno == line_of(
        test_a_swizzle_an_op_needs_on_a_viewed_tile_is_an_error, "A_bytes = T.view")


def reinterpret_program(shape, dtype, new_shape, new_dtype, layout=None):
    """Upstream main's shared_reinterpret_view_test: written through the tile (in the layout annotated on it), read
    through its view as another dtype, which has no layout of its own."""
    @T.prim_func
    def main(A: T.Tensor(shape, dtype), B: T.Tensor(new_shape, new_dtype)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared(shape, dtype)
            A_view = T.view(A_shared, new_shape, dtype=new_dtype)
            T.annotate_layout({A_shared: layout(A_shared) if layout else tilelang.layout.make_swizzled_layout(A_shared)})
            T.copy(A, A_shared)
            T.copy(A_view, B)

    return main


def transposed(tile):
    rows, cols = (int(e) for e in tile.ty.shape)
    return T.Layout((rows, cols), lambda i, j: [j, i])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("shape, dtype, new_shape, new_dtype, layout", [
    ((64, 64), "float32", (64, 128), "bfloat16", None),  # upstream's narrowing case
    ((64, 128), "bfloat16", (64, 64), "float32", None),  # upstream's widening case
    ((64, 128), "int8", (64, 32), "int32", None),
    ((32, 64), "float32", (32, 128), "int16", transposed),  # narrowing: any layout keeps an element's parts
], ids=["narrowing", "widening", "int8_as_int32", "transposed_narrowing"])
def test_a_view_of_a_laid_out_tile_reads_its_bytes(arch, shape, dtype, new_shape, new_dtype, layout, checked):
    """The view's layout is derived from the tile's: the bytes read are those written, in the tile's row-major
    order (upstream main's shared_view_*_numeric[swizzled])."""
    kernel = tilelang.compile(reinterpret_program(shape, dtype, new_shape, new_dtype, layout), out_idx=-1,
                              target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    if layout is None and arch == "mp_31":  # the TME store reads the view in the derived swizzle, not linearly
        assert "tl::tma_store<0," not in source and "tl::tma_store<" in source
    elif layout is None:  # the view's reads go through the swizzle
        reads = [line for line in source.splitlines() if "A_view" in line and "A_view = " not in line]
        assert reads and all("^" in line for line in reads)
    a = torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(31), dtype=torch.int8) \
        if dtype == "int8" else rand(shape, getattr(torch, dtype), 31)
    b = kernel(a)
    ref = a.view(getattr(torch, new_dtype)).view(new_shape)
    assert torch.equal(b.view(torch.uint8), ref.contiguous().view(torch.uint8))


def test_a_wider_view_of_a_layout_that_splits_its_elements_is_an_error_at_the_view():
    """A bfloat16 tile stored transposed: the two halves of a float32 of the view are not next to each other."""
    main = reinterpret_program((64, 128), "bfloat16", (64, 64), "float32", transposed)
    with pytest.raises(tilelang.CompileError, match=r"its view `A_view` as float32 has no layout of its own, nor one "
                                                    r"derived from `A_shared`'s: the tile's layout does not keep each "
                                                    r"float32 element's 2 bfloat16 elements together \(tile elements "
                                                    r"0 \.\. 1, coordinates \(0, 0\), are stored at 0, 64\)") as raised:
        tilelang.compile(main, target="musa -arch=mp_31")
    assert raised.value.loc is not None and raised.value.loc.lineno == line_of(reinterpret_program, "A_view = T.view")


def test_the_derived_layout_of_a_swizzle_is_the_swizzle_of_the_view_dtype():
    """Swizzles permute 16-byte chunks: a float32 tile's swizzle read as bfloat16 is the bfloat16 swizzle of the
    same granularity over the same bytes."""
    from tilelang_musa.layout import make_xor_swizzle_layout
    from tilelang_musa.layout.dtype_view import reinterpreted_layout

    for granularity in (16, 32, 64):
        tile = make_xor_swizzle_layout((64, 64), "float32", granularity)
        derived = reinterpreted_layout(tile, "float32", (64, 128), "bfloat16")
        assert derived.is_equal(make_xor_swizzle_layout((64, 128), "bfloat16", granularity))
        back = reinterpreted_layout(derived, "bfloat16", (64, 64), "float32")
        assert back.is_equal(tile)


def fp4_bytes_program(rows=16, k=256):
    """Upstream's fp4 case: values cast into a float4_e2m1fn tile, its bytes copied out through a uint8 view; the
    same values cast straight into a float4_e2m1fn tensor are the reference."""
    @T.prim_func
    def main(A: T.Tensor((rows, k), T.bfloat16), B: T.Tensor((rows, k // 2), T.uint8),
             C: T.Tensor((rows, k), T.float4_e2m1fn)):
        with T.Kernel(1, threads=256):
            A_frag = T.alloc_fragment((rows, k), T.bfloat16)
            S = T.alloc_shared((rows, k), T.float4_e2m1fn)
            S_u8 = T.view(S, (rows, k // 2), dtype=T.uint8)
            T.copy(A, A_frag)
            for i, j in T.Parallel(rows, k):
                S[i, j] = T.cast(A_frag[i, j], T.float4_e2m1fn)
            T.copy(S_u8, B)
            for i, j in T.Parallel(rows, k):
                C[i, j] = T.cast(A_frag[i, j], T.float4_e2m1fn)

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_the_bytes_of_an_fp4_tile_through_a_uint8_view(arch, checked):
    # checked mode tracks the nibble stores of tl::fp4_e2m1_store (test_fp4_nibble_checked.py): the TME store of
    # mp_31 reads the view's bytes, all of whose nibbles were written
    kernel = tilelang.compile(fp4_bytes_program(), target=f"musa -arch={arch}")
    assert "tl::fp4_e2m1_store(&buf_dyn_shmem[" in kernel.get_kernel_source()
    a = rand((16, 256), torch.bfloat16, 7) * 3
    b, c = torch.full((16, 128), 90, dtype=torch.uint8), torch.full((16, 128), 91, dtype=torch.uint8)
    kernel(a, b, c)
    assert torch.equal(b, c)


def zero_then_bytes(scope):
    """Thread t zeroes half t, then stores byte t through the view (in half t // 2, another thread's zero): a
    write after write across names, which TVM's analysis leaves to SyncWriteAfterWrite."""
    @T.prim_func
    def main(W: T.Tensor((N,), "int8"), B: T.Tensor((2 * N,), "int8")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            S = T.alloc_shared((N,), "float16", scope=scope)
            V = T.view(S, (2 * N,), "int8")
            S[tx] = T.float16(0)
            V[tx] = W[tx]
            for r in T.serial(2):
                B[r * N + tx] = V[r * N + tx]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_write_through_the_view_after_a_write_of_the_tile_is_ordered(arch, checked):
    kernel = tilelang.compile(zero_then_bytes("shared.dyn"), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    zero, store = source.index("S[(int)threadIdx.x] = "), source.index("V[(int)threadIdx.x] = W")
    assert "__syncthreads();" in source[zero:store], source
    w, b = torch.randint(-128, 128, (N,), dtype=torch.int8), torch.full((2 * N,), 90, dtype=torch.int8)
    kernel(w, b)
    assert torch.equal(b, torch.cat([w, torch.zeros(N, dtype=torch.int8)]))


def view_inside_pipelined_program():
    """Bytes and scales loaded by pipelined T.copys into tiles allocated inside the loop, each read through a view
    declared inside it (SGLang's paged MQA logits kernel does so); the trip count is T.dynamic, so the prologue and
    epilogue run each statement under a guard."""
    M = T.dynamic("M")

    @T.prim_func
    def main(A: T.Tensor((M, 32 * 64 + 32 * 4), T.uint8), B: T.Tensor((M, 32, 32), T.float32)):
        with T.Kernel(1, threads=128) as _:
            for k in T.Pipelined(M, num_stages=2):
                S = T.alloc_shared((32 * 64,), T.uint8)
                T.copy(A[k, 0:32 * 64], S)
                V = T.view(S, (32, 32), dtype=T.float16)
                scale_bytes = T.alloc_shared((32 * 4,), T.uint8)
                T.copy(A[k, 32 * 64:32 * 64 + 32 * 4], scale_bytes)
                scales = T.view(scale_bytes, (32,), dtype=T.float32)
                out = T.alloc_fragment((32, 32), T.float32)
                for i, j in T.Parallel(32, 32):
                    out[i, j] = V[31 - i, j] * scales[i]
                T.copy(out, B[k, :, :])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_view_declared_inside_a_pipelined_loop_names_its_tile_in_every_stage(arch, checked):
    # the declaration, a statement of the body, was guarded in the epilogue (`if (k < M) { float* scales = ...; }`),
    # so the reads after it named nothing: a view is declared once, before the loop, as its tile is allocated
    kernel = tilelang.compile(view_inside_pipelined_program(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert source.count("half_t* V = reinterpret_cast<half_t*>(") == 1, source
    assert source.count("float* scales = reinterpret_cast<float*>(scale_bytes);") == 1, source
    for m in (1, 2, 5):
        halves = rand((m, 32, 32), torch.float16, 7 + m)
        scales = rand((m, 32), torch.float32, 17 + m)
        a = torch.cat([halves.view(torch.uint8).view(m, -1), scales.view(torch.uint8).view(m, -1)], dim=1)
        b = poison((m, 32, 32), torch.float32)
        kernel(a, b)
        torch.testing.assert_close(b, halves.float().flip(1) * scales[:, :, None], rtol=1e-6, atol=1e-6)
