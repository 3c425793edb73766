"""Language names upstream scripts write: `T.alloc_var` used as a scalar, on-chip buffer annotations of macros,
`T.cumsum` / `T.cummax` on fragments, warp reductions and elections, named `T.sync_threads`, `T.thread_return`, and the
atomics `T.atomic_addx2/x4`, `T.atomic_load/store` and `memory_order`. Each is compiled for both arches, its
MUSA C checked, and run in the simulator against torch."""

import pytest
import tvm
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.diagnostics import TileLangWarning
from tilelang_musa.launcher.spec import KernelLaunchError

ARCHS = ["mp_31", "mp_22"]


def compile_for(func, arch, **kwargs):
    return tilelang.compile(func, target=f"musa -arch={arch}", **kwargs)


@pytest.mark.parametrize("arch", ARCHS)
def test_alloc_var_reads_as_a_scalar(arch):
    N = 128

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), I: T.Tensor((N,), "int32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            x = T.alloc_var("float32")
            idx = T.alloc_var("int32")
            idx = I[tx]
            x = A[idx]
            y = x  # the value now, not the variable
            x += 1.0
            if x > 0.5:
                x = x * 2
            B[idx] = T.max(x, y) if idx < 64 else -x

    kernel = compile_for(main, arch)
    a, perm = rand((N,), torch.float32, 1), torch.randperm(N, generator=torch.Generator().manual_seed(2)).int()
    b = poison((N,), torch.float32)
    kernel(a, perm, b)
    y = a[perm.long()]
    x = y + 1
    x = torch.where(x > 0.5, x * 2, x)
    ref = torch.empty(N)
    ref[perm.long()] = torch.where(perm < 64, torch.maximum(x, y), -x)
    torch.testing.assert_close(b, ref)


@pytest.mark.parametrize("arch", ARCHS)
def test_macro_buffer_annotations_are_checked(arch, monkeypatch):
    from tilelang_musa import diagnostics

    monkeypatch.setattr(diagnostics, "_WARNED", set())  # the warning is once per process and site
    @T.macro
    def load(s: T.SharedBuffer([64], "float32"), f: T.FragmentBuffer([64], "float32")):
        T.copy(s, f)

    def program(n):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=64):
                s = T.alloc_shared((n,), "float32")
                f = T.alloc_fragment((n,), "float32")
                T.copy(A, s)
                load(s, f)
                for i in T.Parallel(n):
                    f[i] = f[i] * 2
                T.copy(f, B)

        return main

    a, b = rand((64,), torch.float32, 3), poison((64,), torch.float32)
    compile_for(program(64), arch)(a, b)
    torch.testing.assert_close(b, a * 2)
    # A stale annotation (as upstream's own scripts carry) warns; the macro works on the tiles it is given.
    with pytest.warns(TileLangWarning, match=r"@T.macro `load`: argument `s` \(s\) does not match its annotation: "
                                             r"its shape is \(128,\), not \(64,\)"):
        stale = program(128)
    a, b = rand((128,), torch.float32, 4), poison((128,), torch.float32)
    compile_for(stale, arch)(a, b)
    torch.testing.assert_close(b, a * 2)
    with pytest.raises(tilelang.CompileError, match=r"T.SharedBuffer annotates a @T.macro parameter"):
        @T.prim_func
        def bad(A: T.SharedBuffer((64,), "float32")):
            with T.Kernel(1, threads=64):
                pass


@pytest.mark.parametrize("arch", ARCHS)
def test_cumsum_of_a_fragment(arch):
    M, N = 4, 64

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((N,), "float32")
            for r in T.serial(M):
                T.copy(A[r, :], f)
                for i in T.Parallel(N):
                    f[i] = f[i] * 2
                T.cumsum(f, dim=0, reverse=True)
                T.copy(f, B[r, :])

    kernel = compile_for(main, arch)
    assert "tl::Scan1D<128, tl::SumOp, true>::run" in kernel.get_kernel_source()
    a, b = rand((M, N), torch.float32, 4), poison((M, N), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, (a * 2).flip(1).cumsum(1).flip(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_cummax_of_a_fragment_and_of_a_shared_tile(arch):
    """Running maxima along rows of a fragment (through shared memory) and down the columns of a shared tile,
    in reverse; inputs are all negative, so a scan that starts from 0 instead of the lowest value shows."""
    M, N = 16, 48

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((M, N), "float16")
            s = T.alloc_shared((M, N), "float16")
            T.copy(A, f)
            T.cummax(f, dim=1)
            T.copy(f, B)
            T.copy(A, s)
            T.cummax(s, dim=0, reverse=True)
            T.copy(s, C)

    kernel = compile_for(main, arch)
    src = kernel.get_kernel_source()
    assert "tl::Scan2D<128, 1, tl::MaxOp, false>::run" in src and "tl::Scan2D<128, 0, tl::MaxOp, true>::run" in src
    a = -rand((M, N), torch.float16, 5).abs() - 0.5
    b, c = poison((M, N), torch.float16), poison((M, N), torch.float16)
    kernel(a, b, c)
    torch.testing.assert_close(b, a.cummax(1).values, rtol=0, atol=0)
    torch.testing.assert_close(c, a.flip(0).cummax(0).values.flip(0), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_warp_reductions_and_election(arch):
    N = 256

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), K: T.Tensor((N,), "int32"), S: T.Tensor((N,), "float32"),
             M: T.Tensor((N,), "float32"), L: T.Tensor((N,), "float32"), X: T.Tensor((N,), "int32"),
             E: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            S[tx] = T.warp_reduce_sum(A[tx])
            M[tx] = T.warp_reduce_max(A[tx])
            L[tx] = T.warp_reduce_min(A[tx])
            X[tx] = T.warp_reduce_bitor(K[tx])
            E[tx] = T.if_then_else(T.shuffle_elect(64), 1, 0)

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    assert "tl::WarpReduce<tl::SumOp>" in source and "tl::WarpReduce<tl::BitOrOp>" in source
    a = rand((N,), torch.float32, 5)
    k = torch.randint(0, 1 << 20, (N,), generator=torch.Generator().manual_seed(6), dtype=torch.int32)
    outs = [poison((N,), torch.float32) for _ in range(3)]
    x, e = torch.full((N,), -1, dtype=torch.int32), torch.full((N,), -1, dtype=torch.int32)
    kernel(a, k, *outs, x, e)
    groups = a.view(-1, 32)

    def each(v):
        return v.unsqueeze(1).expand(-1, 32).reshape(-1)

    torch.testing.assert_close(outs[0], each(groups.sum(1)), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outs[1], each(groups.amax(1)))
    torch.testing.assert_close(outs[2], each(groups.amin(1)))
    ors = [0] * (N // 32)
    for i, v in enumerate(k.tolist()):
        ors[i // 32] |= v
    assert x.tolist() == [ors[i // 32] for i in range(N)]
    assert e.tolist() == [int(i % 64 == 0) for i in range(N)]


@pytest.mark.parametrize("arch", ARCHS)
def test_warp_reduce_of_an_alloc_var(arch):
    """`v = T.warp_reduce_sum(v)` on a `T.alloc_var` scalar (the CTA RMSNorm idiom of production MUSA kernels)
    reduces the variable's value: it was passed by address (`tl::WarpReduce<tl::SumOp>(&v)`), a build error."""
    N = 128

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), S: T.Tensor((N,), "float32"), M: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            total = T.alloc_var("float32")
            peak = T.alloc_var("float32")
            total = A[tx] * 2.0
            peak = A[tx]
            total = T.warp_reduce_sum(total)
            peak = T.warp_reduce_max(peak)
            S[tx] = total
            M[tx] = peak

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    assert "tl::WarpReduce<tl::SumOp>(total)" in source and "tl::WarpReduce<tl::MaxOp>(peak)" in source
    a = rand((N,), torch.float32, 7)
    s, m = poison((N,), torch.float32), poison((N,), torch.float32)
    kernel(a, s, m)
    groups = a.view(-1, 32)
    torch.testing.assert_close(s, (2 * groups.sum(1)).repeat_interleave(32), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(m, groups.amax(1).repeat_interleave(32))


@pytest.mark.parametrize("arch", ARCHS)
def test_named_sync_threads_and_thread_return(arch):
    N = 128

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            s = T.alloc_shared((N,), "float32")
            s[tx] = A[tx]
            T.sync_threads(1, N)  # every thread arrives: a block barrier
            if tx >= 100:
                T.thread_return()
            B[tx] = s[N - 1 - tx] + 1

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    assert "__syncthreads();" in source and "return;" in source
    a, b = rand((N,), torch.float32, 7), poison((N,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b[:100], a.flip(0)[:100] + 1)
    assert b[100:].isnan().all()

    # A barrier that threads which returned never reach: the simulator names it rather than hanging.
    @T.prim_func
    def divergent(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            if tx >= 100:
                T.thread_return()
            T.sync_threads()
            B[tx] = A[tx]

    with pytest.raises(KernelLaunchError, match=r"divergent __syncthreads: this thread exited"):
        compile_for(divergent, arch)(a, poison((N,), torch.float32))

    # A barrier over part of the block is an asynchronous barrier on mp_31 (test_async_barrier.py), none on mp_22.
    if arch == "mp_22":
        @T.prim_func
        def partial(A: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=N):
                T.sync_threads(1, 64)

        with pytest.raises(tilelang.CompileError, match=r"a barrier over 64 of the block's 128 threads"):
            compile_for(partial, arch)


@pytest.mark.parametrize("arch", ARCHS)
def test_lane_atomics_ordered_atomics_and_whole_element_access(arch):
    N = 256

    @T.prim_func
    def main(A: T.Tensor((N,), "float16"), C: T.Tensor((8,), "float16"), F: T.Tensor((4,), "float32"),
             G: T.Tensor((N,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            i = bx * 128 + tx
            lanes = T.alloc_local((4,), "float16")
            for k in T.serial(4):
                lanes[k] = A[(i * 4 + k) % N]
            T.atomic_addx4(C[(tx % 2) * 4], lanes[0])
            T.atomic_add(F[tx % 4], 1.0, memory_order="release")
            v = T.atomic_load(G[i], memory_order="acquire")
            T.atomic_store(G[i], v * 2 + 1)

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    for text in ("tl::AtomicAddx4(&C[", "tl::fence_before<3>();", "tl::fence_after<3>();", "tl::AtomicLoad<2>(",
                 "tl::AtomicStore<5>("):
        assert text in source
    a = rand((N,), torch.float16, 8)
    c, f, g = torch.zeros(8, dtype=torch.float16), torch.zeros(4), torch.arange(N, dtype=torch.int32)
    kernel(a, c, f, g)
    ref = torch.zeros(8)
    for i in range(N):
        for k in range(4):
            ref[(i % 2) * 4 + k] += a[(i * 4 + k) % N].float()
    torch.testing.assert_close(c.float(), ref, rtol=2e-2, atol=0.25)
    assert f.tolist() == [64.0] * 4
    assert g.tolist() == [2 * i + 1 for i in range(N)]

    with pytest.raises(tilelang.CompileError, match=r"T.atomic_add does not support memory_order='strict'; expected one of relaxed"):
        @T.prim_func
        def bad(F: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=4):
                T.atomic_add(F[0], 1.0, memory_order="strict")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_bitwise_reductions(arch, dtype):
    M, N = 16, 64

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), R: T.Tensor((3, M), dtype)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((M, N), dtype)
            r_and = T.alloc_fragment((M,), dtype)
            r_or = T.alloc_fragment((M,), dtype)
            r_xor = T.alloc_fragment((M,), dtype)
            T.copy(A, f)
            T.reduce_bitand(f, r_and, dim=1)
            T.reduce_bitor(f, r_or, dim=1)
            T.reduce_bitxor(f, r_xor, dim=1)
            T.copy(r_and, R[0, :])
            T.copy(r_or, R[1, :])
            T.copy(r_xor, R[2, :])

    kernel = compile_for(main, arch)
    assert "AllReduce<tl::BitXorOp" in kernel.get_kernel_source()
    g = torch.Generator().manual_seed(9)
    bits = torch.randint(0, 1 << 16, (M, N), generator=g) | (torch.randint(0, 2, (M, N), generator=g) << 30)
    a = (bits | 0x10001).to(torch.int32)  # bit 0 and 16 set everywhere: the and is not zero
    out = torch.full((3, M), -7, dtype=torch.int32)
    kernel(a.view(getattr(torch, dtype)), out.view(getattr(torch, dtype)))
    rows = a.tolist()
    for m, row in enumerate(rows):
        x_and, x_or, x_xor = -1, 0, 0
        for v in row:
            x_and, x_or, x_xor = x_and & v, x_or | v, x_xor ^ v
        assert out[:, m].tolist() == [x_and, x_or, x_xor]

    with pytest.raises(tilelang.CompileError, match=r"T.reduce_bitor: src and dst must be integers"):
        @T.prim_func
        def floats(A: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128):
                f = T.alloc_fragment((M, N), "float32")
                r = T.alloc_fragment((M,), "float32")
                T.copy(A, f)
                T.reduce_bitor(f, r, dim=1)


def _directed(exact: torch.Tensor, mode: str) -> torch.Tensor:
    """float64 values rounded to float32 toward +inf ("ru"), -inf ("rd") or zero ("rz")."""
    import numpy as np

    nearest = exact.float()
    toward = {"ru": np.inf, "rd": -np.inf}
    if mode == "rz":
        return torch.where(exact >= 0, _directed(exact, "rd"), _directed(exact, "ru"))
    step = torch.from_numpy(np.nextafter(nearest.numpy(), np.float32(toward[mode])).astype(np.float32))
    keep = nearest.double() >= exact if mode == "ru" else nearest.double() <= exact
    return torch.where(keep, nearest, step)


@pytest.mark.parametrize("arch", ARCHS)
def test_ieee_rounding_and_fast_math(arch):
    N = 256

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), O: T.Tensor((9, N), "float32"),
             H: T.Tensor((N,), "float16")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            a = A[tx]
            b = B[tx]
            O[0, tx] = T.ieee_add(a, b)
            O[1, tx] = T.ieee_add(a, b, rounding_mode="rz")
            O[2, tx] = T.ieee_mul(a, b, "ru")
            O[3, tx] = T.ieee_mul(a, b, "rd")
            O[4, tx] = T.ieee_fdiv(a, b, "ru")
            O[5, tx] = T.ieee_fmaf(a, b, a, "rd")
            O[6, tx] = T.ieee_fsqrt(T.abs(a), "rz")
            O[7, tx] = T.__exp(a)
            O[8, tx] = T.__log(T.abs(b))
            H[tx] = T.__sin(T.Cast("float16", a))

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    for builtin in ("__fadd_rn(", "__fadd_rz(", "__fmul_ru(", "__fdiv_ru(", "__fmaf_rd(", "__fsqrt_rz(", "__expf(",
                    "__logf(", "__sinf("):
        assert builtin in source
    a, b = rand((N,), torch.float32, 10), rand((N,), torch.float32, 11)
    o, h = poison((9, N), torch.float32), poison((N,), torch.float16)
    kernel(a, b, o, h)
    ad, bd = a.double(), b.double()
    assert torch.equal(o[0], a + b)
    assert torch.equal(o[1], _directed(ad + bd, "rz"))
    assert torch.equal(o[2], _directed(ad * bd, "ru")) and torch.equal(o[3], _directed(ad * bd, "rd"))
    assert torch.equal(o[4], _directed(ad / bd, "ru"))
    assert torch.equal(o[5], _directed(ad * bd + ad, "rd"))  # the exact product and sum fit a double here
    assert torch.equal(o[6], _directed(ad.abs().sqrt(), "rz"))
    assert not torch.equal(o[2], o[3])
    torch.testing.assert_close(o[7], a.exp())
    torch.testing.assert_close(o[8], b.abs().log())
    torch.testing.assert_close(h.float(), a.half().float().sin(), rtol=1e-3, atol=1e-3)

    with pytest.raises(tilelang.CompileError, match=r"T.ieee_add: Invalid rounding mode 'rx': not one of rn, rz, ru, rd"):
        @T.prim_func
        def bad(A: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=N):
                A[0] = T.ieee_add(A[0], A[1], "rx")
    # Outside a kernel too: an expression, or the same error.
    assert "__fadd_rz" in str(T.ieee_add(1.0, 2.0, "rz"))
    with pytest.raises(ValueError, match="Invalid rounding mode"):
        T.ieee_mul(1.0, 2.0, "xy")


@pytest.mark.parametrize("arch", ARCHS)
def test_unroll_forms(arch):
    N = 128

    @T.prim_func
    def main(A: T.Tensor((N, 8), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            acc = T.alloc_var("float32", 0)
            for k in T.unroll(8, explicit=True):  # unrolled in the IR: no loop left
                acc += A[tx, k]
            for k in T.unroll(0, 8, unroll_factor=2):
                acc += A[tx, k] * 2
            for k in T.unroll(8):
                acc += A[tx, k] * 4
            B[tx] = acc

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    assert source.count(" < 8; ++k") == 2  # two loops kept, the explicit one unrolled in the IR
    assert "#pragma unroll 2\n" in source and "#pragma unroll\n" in source
    a, b = rand((N, 8), torch.float32, 12), poison((N,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.sum(1) * 7, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_kernel_annotated_pass_configs_and_compile_flags(arch, monkeypatch, capfd):
    N = 128

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        T.annotate_pass_configs({tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
        T.annotate_compile_flags(["-DTL_KERNEL_FLAG=1"])
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            B[tx] = A[tx] * 2

    monkeypatch.setenv("TILELANG_PRINT_DEVICE_COMPILE_COMMAND", "1")
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    # The flags are this kernel's alone: a precompiled prelude for them would serve one build, and precompiling it
    # costs more than parsing the templates once.
    monkeypatch.setenv("TILELANG_SIM_NO_PRELUDE", "1")
    kernel = compile_for(main, arch, compile_flags=["-DTL_CALLER_FLAG=1"],
                         pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: False})
    command = capfd.readouterr().err
    # the kernel's own settings win over the caller's, and its flags come after the caller's
    assert kernel.pass_configs[tilelang.PassConfigKey.TL_ENABLE_FAST_MATH] is True
    assert command.index("-DTL_CALLER_FLAG=1") < command.index("-DTL_KERNEL_FLAG=1")
    a, b = rand((N,), torch.float32, 13), poison((N,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2)

    with pytest.raises(tilelang.CompileError, match=r"T.annotate_pass_configs: unknown pass config key 'tl.no_such_key'"):
        @T.prim_func
        def bad(A: T.Tensor((N,), "float32")):
            T.annotate_pass_configs({"tl.no_such_key": True})
            with T.Kernel(1, threads=N):
                pass


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("zeroing_thread", [0, 5, 127])
def test_atomic_on_shared_memory_is_ordered_with_plain_accesses(arch, zeroing_thread):
    """`s[0] = 0` by one thread, then every thread's `T.atomic_add(s[0], 1)`, then a read: the atomic takes s[0]
    by address, which TVM's barrier analysis does not see; barriers must still separate the three (the upstream
    split-K GEMV pattern)."""

    @T.prim_func
    def main(C: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding(0)
            s = T.alloc_shared((1,), "float32")
            if tx == zeroing_thread:
                s[0] = 0
            T.atomic_add(s[0], 1.0)
            if tx == 0:
                C[0] = s[0]

    kernel = compile_for(main, arch)
    body = kernel.get_kernel_source().split("tl::AtomicAdd(&s[0]")
    assert body[0].rstrip().endswith("__syncthreads();")
    assert body[1].split(";", 1)[1].lstrip().startswith("__syncthreads();")
    c = poison((1,), torch.float32)
    kernel(c)
    assert c.item() == 128.0


@pytest.mark.parametrize("arch", ARCHS)
def test_fp8_tensors_and_conversions_are_bit_exact(arch):
    N = 4096

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float8_e4m3fn"), Z: T.Tensor((N,), "float8_e5m2"),
             W: T.Tensor((N,), "float32"), V: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float8_e4m3fn")):
        with T.Kernel(N // 256, threads=128) as bx:
            s = T.alloc_shared((256,), "float8_e4m3fn")
            for i in T.Parallel(256):
                Y[bx * 256 + i] = T.cast(X[bx * 256 + i], "float8_e4m3fn")
                Z[bx * 256 + i] = T.cast(X[bx * 256 + i], "float8_e5m2")
            for i in T.Parallel(256):
                W[bx * 256 + i] = T.cast(Y[bx * 256 + i], "float32")
                V[bx * 256 + i] = T.cast(Z[bx * 256 + i], "float32")
            T.sync_threads()  # other threads of the block wrote Y (global memory: no automatic barrier)
            T.copy(Y[bx * 256:(bx + 1) * 256], s)  # 16 fp8 lanes per 128-bit access
            T.copy(s, C[bx * 256:(bx + 1) * 256])

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    assert "fp8_e4_t* __restrict__ Y" in source and "fp8_e5_t* __restrict__ Z" in source
    assert "tl::vec<fp8_e4_t, 16>" in source
    # magnitudes from far below the smallest subnormal to beyond both formats' range, and the special values
    g = torch.Generator().manual_seed(14)
    x = torch.randn(N, generator=g) * torch.pow(2.0, torch.randint(-26, 20, (N,), generator=g).float())
    x[:10] = torch.tensor([float("inf"), float("-inf"), float("nan"), 470.0, 464.0, 448.0, 61440.0, 57344.0, -0.0,
                           2.0 ** -10])
    y, z = torch.empty(N, dtype=torch.float8_e4m3fn), torch.empty(N, dtype=torch.float8_e5m2)
    w, v, c = poison((N,), torch.float32), poison((N,), torch.float32), torch.empty(N, dtype=torch.float8_e4m3fn)
    kernel(x, y, z, w, v, c)
    ry, rz = x.to(torch.float8_e4m3fn), x.to(torch.float8_e5m2)
    assert torch.equal(y.view(torch.uint8), ry.view(torch.uint8))
    assert torch.equal(z.view(torch.uint8), rz.view(torch.uint8))
    torch.testing.assert_close(w, ry.float(), equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(v, rz.float(), equal_nan=True, rtol=0, atol=0)
    assert torch.equal(c.view(torch.uint8), ry.view(torch.uint8))


@pytest.mark.parametrize("arch", ARCHS)
def test_strided_tensor_parameters(arch):
    M, N = 64, 48
    row_stride = T.dynamic("row_stride")

    @T.prim_func
    def main(A: T.StridedTensor((M, N), (1, M), "float32"), B: T.StridedTensor[(M, N), (row_stride, 1), "float32"],
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 16, threads=128) as bx:
            for i, j in T.Parallel(16, N):
                C[bx * 16 + i, j] = A[bx * 16 + i, j] + B[bx * 16 + i, j] * 2

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    assert "int row_stride)" in source
    # A's columns are M apart and B's rows row_stride apart (unknown alignment): neither is read as vectors
    assert "float4*>(A" not in source and "float4*>(B" not in source
    a = rand((N, M), torch.float32, 15).t()  # a transposed view: strides (1, M)
    b = rand((M, 80), torch.float32, 16)[:, 7:7 + N]  # a column slice: strides (80, 1), 28 bytes in
    c = poison((M, N), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a + b * 2)
    with pytest.raises(ValueError, match=r"A stride of dim 0 must be 1; got 48"):
        kernel(a.contiguous(), b, c)


def test_misaligned_tensor_is_rejected_before_a_vector_access():
    N = 1024

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(N // 256, threads=64) as bx:
            for i in T.Parallel(256):
                C[bx * 256 + i] = A[bx * 256 + i] * 2

    kernel = compile_for(main, "mp_31")
    assert "reinterpret_cast<float4*>" in kernel.get_kernel_source()
    a = rand((N + 4,), torch.float32, 17)
    c = poison((N,), torch.float32)
    with pytest.raises(ValueError, match=r"A is read or written 16 bytes at a time, but its data starts 4 bytes past"):
        kernel(a[1:N + 1], c)
    kernel(a[4:], c)  # 16 bytes in: aligned
    torch.testing.assert_close(c, a[4:] * 2)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_vector_of_lanes_not_a_power_of_two_needs_its_types_alignment(arch):
    """`A[T.Ramp(6 * t, 1, 6)]`: 24-byte float32x6 accesses; tl::vec<float, 6> is 8-byte aligned, so the tensor
    must start on 8 bytes (it was an internal error: a 24-byte alignment)."""
    M, W = 32, 6

    @T.prim_func
    def six_lanes(A: T.Tensor((M * W,), "float32"), C: T.Tensor((M * W,), "float32")):
        with T.Kernel(1, threads=M):
            t = T.get_thread_binding()
            lanes = T.Ramp(t * W, 1, W)
            C[lanes] = A[lanes] * T.Broadcast(T.float32(2), W)

    kernel = compile_for(six_lanes, arch)
    assert "tl::vec<float, 6>" in kernel.get_kernel_source()
    a, c = rand((M * W + 2,), torch.float32, 18), poison((M * W,), torch.float32)
    kernel(a[2:], c)  # 8 bytes in: aligned for 6 lanes
    torch.testing.assert_close(c, a[2:] * 2)
    with pytest.raises(ValueError, match=r"A is read or written 8 bytes at a time, but its data starts 4 bytes past"):
        kernel(a[1:M * W + 1], c)


@pytest.mark.parametrize("arch", ARCHS)
def test_none_for_a_tensor_the_kernel_never_touches(arch):
    N = 256

    def program(has_bias):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), Bias: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(N):
                    if has_bias:
                        C[i] = A[i] + Bias[i]
                    else:
                        C[i] = A[i] * 2

        return main

    a, c = rand((N,), torch.float32, 18), poison((N,), torch.float32)
    compile_for(program(False), arch)(a, None, c)
    torch.testing.assert_close(c, a * 2)
    with pytest.raises(TypeError, match=r"Bias: Tensor\[\(256,\), float32\] expects a torch.Tensor; got NoneType"):
        compile_for(program(True), arch)(a, None, c)


@pytest.mark.parametrize("arch", ARCHS)
def test_none_for_the_only_tensor_that_gives_a_size(arch):
    """A size (here Scale's row stride) that only a tensor left out as None would give: passed as 0 when the kernel
    never reads it; a ValueError naming it when the kernel does."""
    N, G = 64, 4
    n, stride = T.dynamic("n"), T.dynamic("stride")

    def program(has_scale, reads_stride):
        @T.prim_func
        def main(A: T.Tensor((n, G), "float32"), Scale: T.StridedTensor((n, G), (stride, 1), "float32"),
                 C: T.Tensor((n, G), "float32")):
            with T.Kernel(n, threads=32) as bx:
                for j in T.Parallel(G):
                    if has_scale:
                        C[bx, j] = A[bx, j] * Scale[bx, j]
                    elif reads_stride:
                        C[bx, j] = A[bx, j] + T.Cast("float32", stride)
                    else:
                        C[bx, j] = A[bx, j] * 2

        return main

    a, c = rand((N, G), torch.float32, 18), poison((N, G), torch.float32)
    kernel = compile_for(program(False, False), arch)
    body = kernel.get_kernel_source().split("int stride) {")[1]
    assert "stride" not in body, body  # a parameter of the kernel, read nowhere
    kernel(a, None, c)
    torch.testing.assert_close(c, a * 2)
    scale = rand((N, 2 * G), torch.float32, 19)[:, :G]
    compile_for(program(True, False), arch)(a, scale, c)
    torch.testing.assert_close(c, a * scale)
    with pytest.raises(ValueError, match=r"nothing determines the size stride, which the kernel reads"):
        compile_for(program(False, True), arch)(a, None, c)


@pytest.mark.parametrize("arch", ARCHS)
def test_mul_half_float_to_bfloat16_x4_explicit_and_recognised(arch):
    N = 512

    @T.prim_func
    def main(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "bfloat16"),
             D: T.Tensor((N,), "bfloat16")):
        with T.Kernel(N // 128, threads=32) as bx:
            tx = T.get_thread_binding()
            offset = bx * 128 + tx * 4
            C[offset:offset + 4] = T.mul_half_float_to_bfloat16_x4(A[offset:offset + 4], B[offset:offset + 4])
            for i in T.Parallel(128):  # the same product, written as casts: fused once vectorized
                D[bx * 128 + i] = T.Cast("bfloat16", T.Cast("float32", A[bx * 128 + i]) * B[bx * 128 + i])

    kernel = compile_for(main, arch)
    assert kernel.get_kernel_source().count("tl::mul_half_float_to_bfloat16_x4(") == 2
    a, b = rand((N,), torch.float16, 19), rand((N,), torch.float32, 20)
    c, d = poison((N,), torch.bfloat16), poison((N,), torch.bfloat16)
    kernel(a, b, c, d)
    ref = (a.float() * b).bfloat16()
    assert torch.equal(c, ref) and torch.equal(d, ref)

    with pytest.raises(tilelang.CompileError, match=r"T.mul_half_float_to_bfloat16_x4: rhs must be float32x4; got "
                                                    r"float16x4"):
        @T.prim_func
        def wrong_type(A: T.Tensor((N,), "float16"), C: T.Tensor((N,), "bfloat16")):
            with T.Kernel(1, threads=32):
                C[0:4] = T.mul_half_float_to_bfloat16_x4(A[0:4], A[4:8])
    with pytest.raises(tilelang.CompileError, match=r"a vector access needs a unit-step slice of exactly 4 elements"):
        @T.prim_func
        def wrong_width(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "bfloat16")):
            with T.Kernel(1, threads=32):
                C[0:8] = T.mul_half_float_to_bfloat16_x4(A[0:4], B[0:4])


def test_fuse_accelerated_ops_pass():
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script import builder as Tb
    from tilelang_musa.transform.fuse_accelerated_ops import fuse_accelerated_ops
    from tvm import tirx

    def build(fused: bool):
        with IRBuilder() as ib:
            with Tb.prim_func():
                Tb.func_name("f")
                a = Tb.arg("A", Tb.buffer((4,), "float16"))
                b = Tb.arg("B", Tb.buffer((4,), "float32"))
                c = Tb.arg("C", Tb.buffer((4,), "bfloat16"))
                ramp = tirx.Ramp(tirx.const(0, "int32"), 1, 4)
                x, y = a[ramp], b[ramp]
                value = (tirx.call_extern("bfloat16x4", "tl::mul_half_float_to_bfloat16_x4", x, y) if fused
                         else tirx.Cast("bfloat16x4", y * tirx.Cast("float32x4", x)))
                Tb.buffer_store(c, value, [ramp])
        return ib.get()

    tvm.ir.assert_structural_equal(fuse_accelerated_ops(build(False)), build(True))
    unfused = build(True)
    assert fuse_accelerated_ops(unfused).same_as(unfused)


@pytest.mark.parametrize("arch", ARCHS)
def test_copy_of_one_element_per_thread(arch):
    N = 64

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float16")):
        with T.Kernel(1, threads=N):
            s = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            T.copy(A[tx], s[N - 1 - tx])  # each thread its own element
            T.copy(s[tx], B[tx])  # with the dtype change of a copy

    kernel = compile_for(main, arch)
    assert "s[63 - ((int)threadIdx.x)] = A[(int)threadIdx.x];" in kernel.get_kernel_source()
    a, b = rand((N,), torch.float32, 21), poison((N,), torch.float16)
    kernel(a, b)
    assert torch.equal(b, a.flip(0).half())


@pytest.mark.parametrize("arch", ARCHS)
def test_prim_func_parameters_annotated_in_the_body(arch):
    def make(N, dtype):
        @T.prim_func
        def main(A, B: T.Tensor((N,), dtype), C):
            A: T.Tensor[(N,), dtype]  # upstream's lazy form: parameters keep their signature order
            C: T.Tensor((N,), dtype)
            with T.Kernel(1, threads=128):
                for i in T.Parallel(N):
                    C[i] = A[i] - B[i]

        return main

    kernel = compile_for(make(256, "float32"), arch)
    assert "main_kernel(float* __restrict__ A, float* __restrict__ B, float* __restrict__ C)" in \
        kernel.get_kernel_source()
    a, b, c = rand((256,), torch.float32, 22), rand((256,), torch.float32, 23), poison((256,), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a - b)

    with pytest.raises(tilelang.CompileError, match=r"the annotation of parameter `A` must use names defined outside"):
        @T.prim_func
        def local_size(A):
            n = 64
            A: T.Tensor[(n,), "float32"]
            with T.Kernel(1, threads=64):
                pass


@pytest.mark.parametrize("arch", ARCHS)
def test_a_body_annotation_uses_a_size_the_body_declares_first(arch):
    """Upstream main's func_attrs: `m = T.dynamic("m")` at the top of a @T.prim_func body, then `A: T.Tensor[[m],
    ...]`; the body's m is the annotation's (one size, bound from A), and outputs shaped by it are allocated."""
    @T.prim_func
    def kernel(A, B, C):
        m = T.dynamic("m")
        A: T.Tensor[[m], T.float32]
        B: T.Tensor[[m * 2 + 1], T.float32]
        C: T.Tensor[[m + 1], T.float32]
        with T.Kernel(1, threads=1):
            for i in T.serial(m * 2 + 1):
                B[i] = A[i % m] + 1.0
            for i in T.serial(m + 1):
                C[i] = T.cast(i, T.float32)

    compiled = tilelang.compile(kernel, out_idx=[1, 2], target=f"musa -arch={arch}")
    # `A[i % m]` is a Let (the remainder bound once) printed as a lambda: bare in the subscript it read `A[[&]...`,
    # an attribute to clang and mcc
    source = compiled.get_kernel_source()
    assert "A[([&]() -> int {" in source and "[[" not in source
    a = rand((19,), torch.float32, 30)
    b, c = compiled(a)
    torch.testing.assert_close(b, a.repeat(3)[:39] + 1.0)
    torch.testing.assert_close(c, torch.arange(20, dtype=torch.float32))


@pytest.mark.parametrize("arch", ARCHS)
def test_reshape_and_view(arch):
    M, N, K = 64, 64, 32

    @T.prim_func
    def main(A: T.Tensor((M * K,), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32"),
             D: T.Tensor((M * N,), "float32"), E: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=128):
            a_flat = T.alloc_shared((M * K,), "float16")
            a_tile = T.reshape(a_flat, (M, K))  # a gemm operand seen through a view
            b_tile = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(T.reshape(A, (M, K)), a_tile)
            T.copy(B, b_tile)
            T.clear(acc)
            T.gemm(a_tile, b_tile, acc)
            T.copy(acc, C)
            T.sync_threads()  # C (global) was written by other threads of the block
            flat = T.view(C, (M * N,))
            for i in T.Parallel(M * N):
                D[i] = flat[i] * 2
            bits = T.view(C, (M * N,), "int32")  # another dtype: a reinterpreting pointer
            for i in T.Parallel(4):
                E[i] = bits[i]

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    assert "a_tile" not in source.split("extern \"C\" int call")[0]  # a view is a name, not storage
    assert "int* bits = reinterpret_cast<int*>(C);" in source
    a, b = rand((M * K,), torch.float16, 24), rand((K, N), torch.float16, 25)
    c, d, e = poison((M, N), torch.float32), poison((M * N,), torch.float32), torch.zeros(4, dtype=torch.int32)
    kernel(a, b, c, d, e)
    torch.testing.assert_close(c, a.view(M, K).float() @ b.float(), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(d, c.flatten() * 2)
    assert torch.equal(e, c.flatten()[:4].view(torch.int32))

    with pytest.raises(tilelang.CompileError, match=r"`A` \[2048\] float32 holds 8192 bytes, the view \[64, 33\] "
                                                    r"float32 8448"):
        @T.prim_func
        def wrong_size(A: T.Tensor((M * K,), "float32")):
            with T.Kernel(1, threads=128):
                T.reshape(A, (M, K + 1))


def test_lower_buffer_views_pass():
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script import builder as Tb
    from tvm import tirx
    from tilelang_musa.ir.attrs import VIEWS_ATTR
    from tilelang_musa.transform.lower_buffer_views import lower_buffer_views

    def build(through_view: bool):
        with IRBuilder() as ib:
            with Tb.prim_func():
                Tb.func_name("f")
                a = Tb.arg("A", Tb.buffer((128,), "float32"))
                v = Tb.buffer((4, 32), "float32")
                i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
                if through_view:
                    Tb.buffer_store(v, v[i, j] + 1.0, [i, j])
                else:
                    Tb.buffer_store(a, a[i * 32 + j] + 1.0, [i * 32 + j])
        func = ib.get()
        return func.with_attr(VIEWS_ATTR, {v: a}) if through_view else func

    tvm.ir.assert_structural_equal(lower_buffer_views(build(True)), build(False), map_free_vars=True)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("threads", [32, 256])
def test_reducers(arch, threads):
    """Each thread adds its iterations to its copy; T.finalize_reducer combines the copies (with shared memory
    once the block exceeds 32 threads)."""
    M, N = 64, 32

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((N,), "float32"), Mx: T.Tensor((N,), "float32"),
             C: T.Tensor((M,), "int32")):
        with T.Kernel(1, threads=threads):
            total = T.alloc_reducer((N,), "float32", op="sum", replication="all")
            peak = T.alloc_reducer((N,), "float32", op="max")
            count = T.alloc_reducer((M,), "int32", op="sum")
            T.fill(total, 0)
            T.reducer_init(peak)
            T.clear(count)
            for i, j in T.Parallel(M, N):
                total[j] += X[i, j]
                T.reducer_update(peak[j], X[i, j])
            for i in T.Parallel(M):  # indexed by every loop variable: still each iteration once
                count[i] += T.if_then_else(X[i, 0] > 0, 1, 0)
            T.finalize_reducer(total)
            peak_result = T.alloc_fragment((N,), "float32")
            T.finalize_reducer(peak, peak_result)  # an epoch closes into a destination
            T.finalize_reducer(count)
            T.copy(total, S)
            T.copy(peak_result, Mx)
            T.copy(count, C)

    kernel = compile_for(main, arch)
    assert f"AllReduce<tl::SumOp, {threads}, 1," in kernel.get_kernel_source()
    x = rand((M, N), torch.float32, 26)
    s, mx, c = poison((N,), torch.float32), poison((N,), torch.float32), torch.full((M,), -1, dtype=torch.int32)
    kernel(x, s, mx, c)
    torch.testing.assert_close(s, x.sum(0), rtol=1e-5, atol=1e-5)
    assert torch.equal(mx, x.amax(0))
    assert torch.equal(c, (x[:, 0] > 0).int())

    with pytest.raises(tilelang.CompileError, match=r"T.finalize_reducer: .* is not a reducer"):
        @T.prim_func
        def not_a_reducer(X: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=32):
                f = T.alloc_fragment((N,), "float32")
                T.finalize_reducer(f)


@pytest.mark.parametrize("arch", ARCHS)
def test_e8m0_scale_tensors_match_torch(arch):
    N = 4096

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), E: T.Tensor((N,), T.float8_e8m0fnu), W: T.Tensor((N,), "float32")):
        with T.Kernel(N // 256, threads=128) as bx:
            for i in T.Parallel(256):
                E[bx * 256 + i] = T.cast(X[bx * 256 + i], "float8_e8m0fnu")
            for i in T.Parallel(256):
                W[bx * 256 + i] = T.cast(E[bx * 256 + i], "float32")

    kernel = compile_for(main, arch)
    assert "fp8_e8_t* __restrict__ E" in kernel.get_kernel_source()
    g = torch.Generator().manual_seed(27)
    bits = torch.randint(-2 ** 31, 2 ** 31 - 1, (N,), generator=g, dtype=torch.int64).to(torch.int32)
    x = bits.view(torch.float32).clone()  # every exponent, subnormals, infinities and NaNs
    x[:6] = torch.tensor([1.5, 1.25, 3.0, 2.0 ** -127, 3 * 2.0 ** -128, -2.0])
    e, w = torch.empty(N, dtype=torch.float8_e8m0fnu), poison((N,), torch.float32)
    kernel(x, e, w)
    ref = x.to(torch.float8_e8m0fnu)
    assert torch.equal(e.view(torch.uint8), ref.view(torch.uint8))
    torch.testing.assert_close(w, ref.float(), equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_transpose_of_shared_tiles(arch):
    """Upstream's shared-memory transpose: B's tile (bx, by) is A's tile (by, bx) transposed; and a fragment
    transposed into a shared tile of another dtype."""
    M, N, bM, bN = 96, 64, 32, 64

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((N, M), "float16"), C: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            tile = T.alloc_shared((bM, bN), "float16")
            tile_t = T.alloc_shared((bN, bM), "float16")
            frag = T.alloc_fragment((bM, bN), "float16")
            wide_t = T.alloc_shared((bN, bM), "float32")
            T.copy(A[by * bM:(by + 1) * bM, bx * bN:(bx + 1) * bN], tile)
            T.transpose(tile, tile_t)
            T.copy(tile_t, B[bx * bN:(bx + 1) * bN, by * bM:(by + 1) * bM])
            T.copy(tile, frag)
            T.transpose(frag, wide_t)
            T.copy(wide_t, C[bx * bN:(bx + 1) * bN, by * bM:(by + 1) * bM])

    kernel = compile_for(main, arch)
    a = rand((M, N), torch.float16, 32)
    b, c = poison((N, M), torch.float16), poison((N, M), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(b, a.T, rtol=0, atol=0)
    torch.testing.assert_close(c, a.T.float(), rtol=0, atol=0)

    with pytest.raises(tilelang.CompileError, match="last two dimensions swapped"):
        @T.prim_func
        def bad(A: T.Tensor((M, N), "float16")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((bM, bN), "float16")
                T.transpose(s, s)


@pytest.mark.parametrize("arch", ARCHS)
def test_alloc_var_as_a_condition(arch):
    """Upstream's alloc_var_cmp: `cond = T.alloc_var(T.bool); cond = x == 2; if cond:` (and in `and`/`not`)."""
    N = 128

    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            cond = T.alloc_var(T.bool)
            cond = A[tx] % 3 == 2
            if cond:
                B[tx] = 1
            elif not cond and A[tx] > 0:
                B[tx] = 2
            else:
                B[tx] = 0

    kernel = compile_for(main, arch)
    a = torch.randint(-50, 50, (N,), generator=torch.Generator().manual_seed(33), dtype=torch.int32)
    b = torch.full((N,), -7, dtype=torch.int32)
    kernel(a, b)
    assert torch.equal(b, torch.where(a % 3 == 2, 1, torch.where(a > 0, 2, 0)).int())


@pytest.mark.parametrize("arch", ARCHS)
def test_all_of_and_any_of_masks(arch):
    """Upstream's block-sparse pattern: `if T.all_of(Mask[by, k, :])` over a global region, a shared copy of it and
    a thread-private one; `T.any_of` likewise."""
    M, K, D = 64, 4, 5

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), Mask: T.Tensor((M // 16, K, D), "bool"),
             B: T.Tensor((M, K), "float32")):
        with T.Kernel(M // 16, threads=64) as by:
            shared_mask = T.alloc_shared((D,), "bool")
            local_mask = T.alloc_local((D,), "bool")
            for k in T.serial(K):
                T.copy(Mask[by, k, :], shared_mask)
                T.copy(Mask[by, k, :], local_mask)
                for i in T.Parallel(16):
                    B[by * 16 + i, k] = 0.0
                    if T.all_of(Mask[by, k, :]):
                        B[by * 16 + i, k] = A[by * 16 + i, k]
                    if T.any_of(shared_mask) and not T.all_of(local_mask):
                        B[by * 16 + i, k] = -A[by * 16 + i, k]

    kernel = compile_for(main, arch)
    src = kernel.get_kernel_source()
    assert "tl::all_of(&Mask[" in src and "tl::any_of(&shared_mask[0], 5)" in src and "tl::all_of(&local_mask[0], 5)" in src
    a = rand((M, K), torch.float32, 34)
    mask = torch.rand((M // 16, K, D), generator=torch.Generator().manual_seed(35)) < 0.7
    mask[0, 0] = True  # some all-true rows
    mask[1, 1] = False  # and all-false ones
    b = poison((M, K), torch.float32)
    kernel(a, mask, b)
    every = mask.all(-1).repeat_interleave(16, 0)
    some = mask.any(-1).repeat_interleave(16, 0)
    torch.testing.assert_close(b, torch.where(some & ~every, -a, torch.where(every, a, torch.zeros_like(a))))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_block_sparse_gemm_guarded_by_all_of_pipelines_with_barriers_inside_the_branch(arch):
    """`if T.all_of(BlockMask[by, bx, k, :]):` around the loads and the gemm of a pipelined loop: the condition is
    the same in every thread (tl::all_of reads global memory at block-uniform addresses), so the barriers between
    the shared-tile copies and the gemm go inside the branch (it was rejected as a thread-dependent branch)."""
    M = N = K = 64
    bm = bn = bk = 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             BlockMask: T.Tensor((M // bm, N // bn, K // bk, 2), "bool"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), "float16")
            B_shared = T.alloc_shared((bk, bn), "float16")
            C_local = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_local)
            for k in T.Pipelined(K // bk, num_stages=2):
                if T.all_of(BlockMask[by, bx, k, :]):
                    T.copy(A[by * bm, k * bk], A_shared)
                    T.copy(B[k * bk, bx * bn], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * bm, bx * bn])

    kernel = compile_for(main, arch)
    src = kernel.get_kernel_source()
    assert "if (tl::all_of(&BlockMask[" in src, src
    a, b = rand((M, K), torch.float16, 36), rand((K, N), torch.float16, 37)
    mask = torch.rand((M // bm, N // bn, K // bk, 2), generator=torch.Generator().manual_seed(38)) < 0.8
    mask[0, 0, 0] = True
    mask[1, 1, 1] = False
    c = poison((M, N), torch.float32)
    kernel(a, b, mask, c)
    keep = mask.all(-1)  # [bm-row, bn-col, k-block]
    expected = torch.zeros(M, N)
    for i in range(M // bm):
        for j in range(N // bn):
            for k in range(K // bk):
                if keep[i, j, k]:
                    expected[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += \
                        a[i * bm:(i + 1) * bm, k * bk:(k + 1) * bk].float() @ b[k * bk:(k + 1) * bk, j * bn:(j + 1) * bn].float()
    torch.testing.assert_close(c, expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ARCHS)
def test_alloc_var_initialised_from_another(arch):
    """Upstream's var_init: `b = T.alloc_var(T.int32, init=a)` takes a's value at that point."""

    @T.prim_func
    def main(A: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=1):
            a = T.alloc_var(T.int32, init=1)
            b = T.alloc_var(T.int32, init=a)
            a = 2
            d = T.alloc_var(T.float32, init=a)
            A[0] = b
            A[1] = T.cast(d * 1.5, "int32")

    kernel = compile_for(main, arch)
    out = torch.full((2,), -7, dtype=torch.int32)
    kernel(out)
    assert out.tolist() == [1, 3]


@pytest.mark.parametrize("arch", ARCHS)
def test_tvmscript_parallel_is_a_one_dimensional_t_parallel(arch):
    """`for i in T.parallel(n)` (and `T.parallel(0, n)`) compiles as `T.Parallel(n)`."""

    def scale(loop):
        @T.prim_func
        def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
            with T.Kernel(1, threads=64):
                for i in loop():
                    B[i] = A[i] * 3.0

        return compile_for(main, arch)

    lower = scale(lambda: T.parallel(256))
    assert lower.get_kernel_source() == scale(lambda: T.Parallel(256)).get_kernel_source()
    assert lower.get_kernel_source() == scale(lambda: T.parallel(0, 256)).get_kernel_source()
    a, b = rand((256,), torch.float32, 39), poison((256,), torch.float32)
    lower(a, b)
    torch.testing.assert_close(b, a * 3.0)


def test_tvmscript_parallel_with_a_nonzero_start_is_an_error_at_the_loop():
    with pytest.raises(tilelang.CompileError, match=r"T.parallel\(4, 256\): a start other than 0 is not supported"):
        @T.prim_func
        def main(A: T.Tensor((256,), "float32")):
            with T.Kernel(1, threads=64):
                for i in T.parallel(4, 256):
                    A[i] = 0.0
