"""The kernel frontend: Python control flow over IR values, bindings, and errors that name the construct
and the user's source line."""

import re

import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import line_of, poison, rand


def _script(func):
    return func.script()


def test_static_if_is_python_and_dynamic_if_is_ir():
    flag = False

    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if flag:
                A[tx] = 1.0
            if tx < 64:
                A[tx] = 2.0
            else:
                A[tx] = 3.0

    text = _script(k)
    assert "T.float32(1.0)" not in text  # the static branch was not taken
    assert "if thread_x < 64" in text and "else" in text


def test_assignment_of_a_load_is_bound_once():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            x = A[tx]
            A[tx] = 0.0
            B[tx] = x

    text = _script(k)
    # x holds the value read before the store, not a re-read after it
    assert "x: T.let[T.float32] = A[thread_x]" in text
    assert "B[thread_x] = x" in text


def test_python_loops_unroll_and_range_is_a_serial_loop():
    @T.prim_func
    def k(A: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=32):
            for r in [0, 1]:
                for c in range(8):
                    A[r, c] = 0.0

    text = _script(k)
    assert text.count("for c in range(8)") == 2


def test_alloc_var_assignment_stores():
    @T.prim_func
    def k(A: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            v = T.alloc_var("int32", init=1)
            v = v[0] + 2
            v += 3
            A[T.get_thread_binding()] = v[0]

    text = _script(k)  # TVMScript prints a local.var buffer as a scalar
    assert "v: T.int32 = 1" in text and "v = v + 2" in text and "v = v + 3" in text
    assert "A[thread_x] = v" in text


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_loop_bounds_read_alloc_vars(arch):
    """`range(begin, end + 1)` and `T.serial(begin, end)` with T.alloc_var bounds read the variables' current
    values, once, before the loop (a persistent kernel's scheduled range loaded from metadata)."""
    @T.prim_func
    def k(M: T.Tensor((2,), "int32"), A: T.Tensor((32, 16), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            begin = T.alloc_var("int32")
            end = T.alloc_var("int32")
            begin = M[0]
            end = M[1]
            for i in range(begin, end + 1, 1):
                A[tx, i] = 1.0
            for i in T.serial(begin, end):
                A[tx, i] += 1.0

    kernel = tilelang.compile(k, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    # read once, before the loop (Python's range), into variables the passes cannot rewrite under the loop
    assert "const int i_begin = begin;" in source and "const int i_end = end + 1;" in source, source
    assert re.search(r"for \(int i = i_begin; ", source), source
    a = torch.zeros(32, 16)
    kernel(torch.tensor([3, 9], dtype=torch.int32), a)
    expected = torch.zeros(32, 16)
    expected[:, 3:10] = 1.0
    expected[:, 3:9] += 1.0
    torch.testing.assert_close(a, expected)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_range_with_a_step_strides_over_the_threads(arch):
    """`range(tid, n, num_threads)` (T.serial with a step): each thread takes every 128th index from its own."""
    @T.prim_func
    def k(M: T.Tensor((1,), "int32"), A: T.Tensor((1000,), "float32"), B: T.Tensor((1000,), "float32")):
        with T.Kernel(1, threads=128):
            tid = T.get_thread_binding()
            n = M[0]
            for i in range(tid, n * 2, 128):
                B[i] = A[i] * 3.0

    kernel = tilelang.compile(k, target=f"musa -arch={arch}")
    # a unit-step loop over the trip count, i = tid + k * 128 in the body (language/loop.py)
    assert "* 128)" in kernel.get_kernel_source() and "+= 128" not in kernel.get_kernel_source()
    a, b = rand((1000,), torch.float32, 3), poison((1000,), torch.float32)
    b[700:] = 0.0
    kernel(torch.tensor([350], dtype=torch.int32), a, b)
    torch.testing.assert_close(b, torch.cat([a[:700] * 3.0, torch.zeros(300)]))
    with pytest.raises(tilelang.CompileError, match="step 0 must be a nonzero compile-time int"):
        @T.prim_func
        def zero(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.serial(0, 8, 0):
                    A[i] = 0.0


def test_kernel_outside_prim_func_is_a_clear_error():
    with pytest.raises(tilelang.CompileError, match="inside a TileLang kernel"):
        T.Kernel(1, threads=128)


def test_error_points_at_the_users_line():
    def build():
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=2048):
                A[0] = 1.0

        return k

    with pytest.raises(tilelang.CompileError) as info:
        build()
    message = str(info.value)
    assert "2048 threads per block exceed" in message
    assert f"test_frontend.py:{line_of(build, 'threads=2048')}" in message
    assert "with T.Kernel(1, threads=2048):" in message


def test_unannotated_prim_func_parameter_is_named():
    with pytest.raises(tilelang.CompileError, match="parameter `A`"):
        @T.prim_func
        def k(A):
            pass


@tilelang.jit
def f(A, dtype="float32"):
    """An eager kernel with one size, N."""
    N = T.const("N")
    A: T.Tensor[(N,), dtype]
    with T.Kernel(1, threads=32):
        A[0] = 1.0


def test_eager_sizes_must_be_bound():
    with pytest.raises(tilelang.CompileError, match=r"T.const\('N'\) has no value"):
        f.compile()


def test_eager_compile_rejects_a_name_that_is_neither_a_parameter_nor_a_size():
    """`f.compile(N=..., target="musa")` once took `target` as a size and compiled for the default target."""
    with pytest.raises(TypeError, match=r"f.compile\(\): `target` is neither a parameter of `f` nor a size it "
                                        r"declares with T.const \(its sizes: N\)"):
        f.compile(N=64, target="musa -arch=mp_22")
    assert f.compile(N=64, dtype="float16") is not None


def test_eager_compile_names_an_unhashable_compile_option():
    """`f.compile(N=..., pass_configs={...})` (a tutorial's) was a bare "unhashable type: 'dict'" from the kernel
    cache before the trace could name the option."""
    with pytest.raises(TypeError, match=r"f.compile\(\): `pass_configs` is neither a parameter of `f` nor a size"):
        f.compile(N=64, pass_configs={"tl.disable_warp_specialized": True})


def test_parallel_extent_over_a_fragment_must_be_constant():
    # (a nest over global or shared memory may have run-time extents: test_parallel_partition.py)
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), m: T.int32):
        with T.Kernel(1, threads=64):
            F = T.alloc_fragment((64,), "float32")
            for i in T.Parallel(m):
                F[i] = 0.0
            T.copy(F, A)

    with pytest.raises(tilelang.CompileError, match="it indexes fragment buffer `F`, whose layout places each "
                       "iteration on a thread, so its extents must be compile-time constants") as info:
        tilelang.compile(k)
    assert "for i in T.Parallel(m):" in str(info.value)


def test_dtypes_are_strings_and_constructors():
    assert T.float16 == "float16" and isinstance(T.float16(1.5), tirx.FloatImm)
    with pytest.raises(tilelang.CompileError, match="float6"):
        T.Tensor((4,), "float6_e2m3fn")


@pytest.mark.parametrize("name", ["alloc_tmem", "alloc_wgmma_desc", "alloc_tcgen05_smem_desc", "ptx_ldmatrix", "ptx_mma"])
def test_nvidia_only_constructs_are_rejected_by_name(name):
    def build():
        @T.prim_func
        def k(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                getattr(T, name)(128)

    with pytest.raises(tilelang.UnsupportedError, match=rf"T.{name} .* not supported by TileLang-MUSA") as info:
        build()
    assert "getattr(T, name)(128)" in str(info.value)


def _scale_factory(dtype="float32", block=64):
    """The classic upstream pattern: a @tilelang.jit kernel defined inside a factory, whose defaults (and a nested
    prim_func's annotations) name the factory's locals, which are not the kernel's closure."""

    @tilelang.jit(out_idx=[-1])
    def scale(N, factor, dtype=dtype, threads: int = block):
        @T.prim_func
        def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
            with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
                for i in T.Parallel(threads):
                    B[bx * threads + i] = A[bx * threads + i] * factor

        return main

    return scale


def _eager_scale_factory(dtype="float32", block=128):
    @tilelang.jit
    def scale(A, factor, dtype=dtype, threads=block):
        N = T.const("N")
        A: T.Tensor[(N,), dtype]
        B = T.empty((N,), dtype)
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            for i in T.Parallel(threads):
                B[bx * threads + i] = A[bx * threads + i] * factor
        return B

    return scale


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_jit_kernel_defined_in_a_factory_sees_the_factorys_locals(arch, monkeypatch):
    import torch

    monkeypatch.setenv("TILELANG_TARGET", f"musa -arch={arch}")
    a = torch.randn(512, generator=torch.Generator().manual_seed(5))
    lazy = _scale_factory()(512, 3.0)
    torch.testing.assert_close(lazy(a), a * 3.0)
    assert "float* __restrict__ A" in lazy.get_kernel_source()
    eager = _eager_scale_factory("bfloat16")
    b = eager(a.to(torch.bfloat16), 2.0)
    torch.testing.assert_close(b, (a.to(torch.bfloat16).float() * 2.0).to(torch.bfloat16))


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_one_block_index_unpacked_as_a_tuple_and_a_barrier_id_expression(arch):
    """`with T.Kernel(4, threads=128) as (bx,):` (TileLang-MUSA's tests write it) and `T.sync_threads(T.int32(1))`."""

    @T.prim_func
    def main(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32")):
        with T.Kernel(4, threads=128) as (bx,):
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            s[tx] = A[bx * 128 + tx]
            barrier_id = T.int32(1)
            T.sync_threads(barrier_id)
            B[bx * 128 + tx] = s[127 - tx] + 1.0

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "__syncthreads();" in kernel.get_kernel_source()
    a, b = rand((512,), torch.float32, 43), poison((512,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.view(4, 128).flip(1).reshape(-1) + 1.0)


def test_chained_assignment_stores_one_value_to_each_target():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            A[tx] = B[tx] = C[tx] = A[tx] * 2.0 + 1.0  # evaluated once, before A[tx] is stored

    kernel = tilelang.compile(main, target="musa -arch=mp_31")
    a = rand((64,), torch.float32, 71)
    b, c = poison((64,), torch.float32), poison((64,), torch.float32)
    expected = a * 2.0 + 1.0
    kernel(a, b, c)
    for out in (a, b, c):
        torch.testing.assert_close(out, expected)


def test_clamp_takes_upstream_keywords():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            B[tx] = T.clamp(A[tx], min_val=-0.5, max_val=0.25)

    kernel = tilelang.compile(main, target="musa -arch=mp_22")
    a, b = rand((64,), torch.float32, 72), poison((64,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.clamp(-0.5, 0.25))


def test_prim_func_returns_the_outputs_it_allocates_with_empty():
    @T.prim_func
    def main(A):
        A: T.Tensor[[64], T.float32]
        B = T.empty([64], T.float32)
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            B[tx] = A[tx] + 1.0
        return B

    assert list(main.attrs["tilelang_out_idx"]) == [-1]
    kernel = tilelang.compile(main, target="musa -arch=mp_31")
    a = rand((64,), torch.float32, 73)
    torch.testing.assert_close(kernel(a), a + 1.0)
    with pytest.raises(ValueError, match="Out index conflict"):
        tilelang.compile(main, out_idx=[-1], target="musa -arch=mp_31")


@tilelang.jit
def _eager_with_signature_annotations(S: T.Tensor((8,), T.bfloat16), D: T.Tensor((4, 64), T.bfloat16)):
    with T.Kernel(1, threads=128):
        S_shared = T.alloc_shared((8,), T.bfloat16)
        S_fragment = T.alloc_fragment((8,), T.float32)
        D_shared = T.alloc_shared((4, 64), T.bfloat16)
        T.copy(S, S_shared)
        T.copy(S_shared, S_fragment)
        for k in T.serial(64):
            for i in T.Parallel(4):
                D_shared[i, k] = S_fragment[i]
        T.copy(D_shared, D)


def test_eager_kernel_with_tensor_annotations_in_its_signature():
    # @tilelang.jit on the kernel itself, its tensors annotated in the signature (upstream issue 1744's form).
    s, d = rand((8,), torch.bfloat16, 74), poison((4, 64), torch.bfloat16)
    _eager_with_signature_annotations(s, d)
    torch.testing.assert_close(d, s[:4].view(4, 1).repeat(1, 64))


def test_a_macro_from_another_module_reports_its_own_file(tmp_path, monkeypatch):
    """Errors inside a @T.macro defined in another module name that module's file and line, not the kernel's."""
    (tmp_path / "macro_elsewhere.py").write_text(
        "import tilelang.language as T\n"
        "\n"
        "\n"
        "@T.macro\n"
        "def bad(A):\n"
        "    T.sync_threads(99)  # line 6: no such barrier\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from macro_elsewhere import bad

    with pytest.raises(tilelang.CompileError) as info:
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=32):
                bad(A)

    assert "macro_elsewhere.py:6" in str(info.value), str(info.value)
