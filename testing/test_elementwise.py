"""The user's elementwise example end to end: compile for musa, check the MUSA C, run it in the simulator
against torch (fresh random inputs; N a multiple of the block, N with a tail, N = 1)."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


# The user's example, verbatim (../shared/seeds/tilelang-musa-guide.txt, "Elementwise Add").
@tilelang.jit
def elementwise_add(A, B, num_per_thread=8, threads=256, dtype="float32"):
    N = T.const("N")
    A: T.Tensor[(N,), dtype]
    B: T.Tensor[(N,), dtype]
    C = T.empty((N,), dtype)

    # 设置 grid size 和 block thread number
    with T.Kernel(T.ceildiv(N, threads * num_per_thread), threads=threads) as b_x:
        # thread block 级别执行代码
        for i, j in T.Parallel(threads, num_per_thread):
            offsets = (b_x * threads + i) * num_per_thread
            C[offsets + j] = A[offsets + j] + B[offsets + j]
    return C


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("n", [4096, 4097, 1])
def test_eager_elementwise_matches_torch(n, dtype):
    kernel = elementwise_add.compile(N=n, dtype=dtype)
    a, b = rand((n,), DTYPES[dtype], seed=1), rand((n,), DTYPES[dtype], seed=2)
    c = kernel(a, b)
    torch.testing.assert_close(c, a + b, rtol=1e-2, atol=1e-2)


def test_eager_call_with_tensors_takes_sizes_from_them():
    a, b = rand((5000,), torch.float32, 3), rand((5000,), torch.float32, 4)
    torch.testing.assert_close(elementwise_add(a, b), a + b)
    a2, b2 = rand((77,), torch.float32, 5), rand((77,), torch.float32, 6)
    torch.testing.assert_close(elementwise_add(a2, b2), a2 + b2)


@pytest.mark.parametrize("arch,warp", [("mp_31", 32), ("mp_22", 128)])
def test_generated_musa_c_structure(arch, warp):
    kernel = tilelang.compile(
        elementwise_add.compile(N=4096).program, target=f"musa -arch={arch}"
    )
    src = kernel.get_kernel_source()
    assert '#include "tl_templates/musa/common.h"' in src
    assert re.search(r'extern "C" __global__ void __launch_bounds__\(256, 1\) elementwise_add_kernel\(', src)
    assert "float* __restrict__ A" in src and "blockIdx.x" in src and "threadIdx.x" in src
    # 4096 = 2 blocks * 256 threads * 8: the accesses are in bounds (no guard) and 128-bit vectors
    assert "tl::vec_of(*reinterpret_cast<float4*>(A + " in src
    assert "4096" not in kernel.get_device_source()
    host = kernel.get_host_source()
    assert 'extern "C" int call(' in host and "musaLaunchKernel(elementwise_add_kernel" in host
    assert "dim3 grid(2, 1, 1)" in host and "dim3 block(256, 1, 1)" in host
    assert kernel.target.attrs["thread_warp_size"] == warp


def test_tail_is_guarded_and_guard_can_be_disabled():
    program = elementwise_add.compile(N=4097).program
    guarded = tilelang.compile(program).get_device_source()
    assert "< 4097" in guarded
    unguarded = tilelang.compile(
        program, pass_configs={tilelang.PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True}
    ).get_device_source()
    assert "< 4097" not in unguarded


def test_lazy_style_prim_func_with_out_idx():
    @tilelang.jit(out_idx=[-1])
    def scale_add(N, block, dtype="float16"):
        @T.prim_func
        def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
            with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
                for i in T.Parallel(block):
                    C[bx * block + i] = A[bx * block + i] * T.float16(2) + B[bx * block + i]
        return main

    kernel = scale_add(1000, 128)
    a, b = rand((1000,), torch.float16, 7), rand((1000,), torch.float16, 8)
    torch.testing.assert_close(kernel(a, b), a * 2 + b, rtol=1e-2, atol=1e-2)
    assert scale_add(1000, 128) is kernel  # cached per parameter values


def test_prim_func_with_caller_provided_output():
    @T.prim_func
    def copy_neg(A: T.Tensor((300,), "float32"), B: T.Tensor((300,), "float32")):
        with T.Kernel(3, threads=128) as bx:
            tx = T.get_thread_binding()
            if bx * 100 + tx < 300 and tx < 100:
                B[bx * 100 + tx] = -A[bx * 100 + tx]

    kernel = tilelang.compile(copy_neg)
    a = rand((300,), torch.float32, 9)
    b = torch.full((300,), float("nan"))
    assert kernel(a, b) is None
    torch.testing.assert_close(b, -a)


def test_serial_unroll_local_and_math():
    @T.prim_func
    def rowsum_exp(A: T.Tensor((64, 16), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            tx = T.get_thread_binding()
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for k in T.serial(16):
                acc[0] += T.exp(A[tx, k])
            for k in T.unroll(2):
                acc[0] = acc[0] + T.max(A[tx, k], 0.0) * 0
            B[tx] = acc[0]

    kernel = tilelang.compile(rowsum_exp)
    a = rand((64, 16), torch.float32, 10)
    b = torch.full((64,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, torch.exp(a).sum(1), rtol=1e-5, atol=1e-5)


def test_wrong_inputs_give_clear_errors():
    kernel = elementwise_add.compile(N=128)
    a, b = rand((128,), torch.float32), rand((128,), torch.float32)
    with pytest.raises(TypeError, match="A|B"):
        kernel(a)
    with pytest.raises(TypeError, match="dtype"):
        kernel(a.half(), b)
    with pytest.raises(ValueError, match="B"):
        kernel(a, rand((64,), torch.float32))
    with pytest.raises(ValueError, match="contiguous"):
        kernel(a, rand((256,), torch.float32)[::2])


def test_shared_memory_exchange_gets_a_barrier():
    @T.prim_func
    def reverse(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32")):
        with T.Kernel(2, threads=256) as bx:
            S = T.alloc_shared((256,), "float32")
            for i in T.Parallel(256):
                S[i] = A[bx * 256 + i]
            for i in T.Parallel(256):
                B[bx * 256 + i] = S[255 - i]

    kernel = tilelang.compile(reverse)
    src = kernel.get_device_source()
    assert "extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];" in src
    assert "__syncthreads" in src
    a = rand((512,), torch.float32, 11)
    b = torch.full((512,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, torch.cat([a[:256].flip(0), a[256:].flip(0)]))


def test_profiler_checks_and_times_the_kernel():
    kernel = elementwise_add.compile(N=1024)
    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    profiler.assert_allclose(lambda a, b: a + b, rtol=1e-5, atol=1e-5)
    with pytest.raises(AssertionError):
        profiler.assert_allclose(lambda a, b: a - b, rtol=1e-5, atol=1e-5)
    latency = profiler.do_bench(n_warmup=1, n_repeat=3)
    assert latency > 0
    assert len(profiler.do_bench(n_warmup=0, n_repeat=4, quantiles=[0.5, 0.9])) == 2


def test_large_dynamic_shared_memory_sets_the_attribute():
    @T.prim_func
    def stage(A: T.Tensor((16384,), "float32"), B: T.Tensor((16384,), "float32")):
        with T.Kernel(1, threads=256) as _:
            S = T.alloc_shared((16384,), "float32")  # 64 KiB: above the 48 KiB default
            for i in T.Parallel(16384):
                S[i] = A[i] * 2.0
            for i in T.Parallel(16384):
                B[i] = S[16383 - i]

    kernel = tilelang.compile(stage)
    assert "musaFuncSetAttribute(stage_kernel, musaFuncAttributeMaxDynamicSharedMemorySize" in kernel.get_host_source()
    assert "size_t smem = 65536;" in kernel.get_host_source()
    a = rand((16384,), torch.float32, 12)
    b = torch.full((16384,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, (a * 2).flip(0))
    # mp_22 allows 72 KiB per block: 64 KiB fits, 128 KiB does not, and the error names the buffer
    tilelang.compile(stage, target="musa -arch=mp_22")

    @T.prim_func
    def too_big(A: T.Tensor((32768,), "float32")):
        with T.Kernel(1, threads=256) as _:
            S = T.alloc_shared((32768,), "float32")
            for i in T.Parallel(32768):
                S[i] = A[i]
            for i in T.Parallel(32768):
                A[i] = S[i] + 1.0

    with pytest.raises(tilelang.CompileError, match=r"131072 bytes of shared memory .* 73728 .* S \(131072 B\)"):
        tilelang.compile(too_big, target="musa -arch=mp_22")


def test_big_local_arrays_get_a_big_enough_simulator_stack():
    @T.prim_func
    def local_sum(A: T.Tensor((32, 20000), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as _:
            tx = T.get_thread_binding()
            buf = T.alloc_local((20000,), "float32")  # 80 KB per thread: more than the default fiber stack
            for k in T.serial(20000):
                buf[k] = A[tx, k]
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for k in T.serial(20000):
                acc[0] += buf[19999 - k]
            B[tx] = acc[0]

    kernel = tilelang.compile(local_sum)
    a = rand((32, 20000), torch.float32, 13)
    b = torch.full((32,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a.flip(1).sum(1), rtol=1e-4, atol=1e-3)


def test_simulator_kernel_rejects_tensors_on_another_device():
    kernel = elementwise_add.compile(N=64)
    a = torch.empty(64, device="meta")
    with pytest.raises(ValueError, match="A"):
        kernel(a, a)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_vectorized_casts_and_select(arch):
    @T.prim_func
    def relu_cast(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float16")):
        with T.Kernel(4, threads=64) as bx:
            tx = T.get_thread_binding()
            row = bx * 16 + tx // 4
            for v in T.vectorized(8):
                col = (tx % 4) * 8 + v
                B[row, col] = T.cast(T.if_then_else(A[row, col] > 0, A[row, col], A[row, col] * 0.5), "float16")

    kernel = tilelang.compile(relu_cast, target=f"musa -arch={arch}")
    src = kernel.get_device_source()
    assert "half_t" in src
    a = rand((64, 32), torch.float32, 14)
    b = torch.full((64, 32), float("nan"), dtype=torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, torch.where(a > 0, a, a * 0.5).half())


def test_dynamic_sizes_come_from_the_tensors():
    n = T.dynamic("n")

    @T.prim_func
    def axpy(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), Z: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 256), threads=256) as bx:
            for i in T.Parallel(256):
                Z[bx * 256 + i] = X[bx * 256 + i] * 3.0 + Y[bx * 256 + i]

    kernel = tilelang.compile(axpy, out_idx=[-1])
    assert "int n" in kernel.get_device_source()
    for size in (1, 300, 4096):
        x, y = rand((size,), torch.float32, 15), rand((size,), torch.float32, 16)
        torch.testing.assert_close(kernel(x, y), x * 3 + y)
    with pytest.raises(ValueError, match="n"):
        kernel(rand((10,), torch.float32), rand((11,), torch.float32))


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_size_used_only_in_tensor_shapes_is_a_kernel_parameter(arch):
    """The grid is fixed, so `rows` appears only in the shapes; the copies' bounds guards still compare against it."""
    rows = T.dynamic("rows")

    @T.prim_func
    def head(A: T.Tensor((rows, 64), "float32"), B: T.Tensor((rows, 64), "float32")):
        with T.Kernel(4, threads=128) as bx:
            S = T.alloc_shared((16, 64), "float32")
            T.copy(A[bx * 16, 0], S)
            T.copy(S, B[bx * 16, 0])

    kernel = tilelang.compile(head, target=f"musa -arch={arch}")
    assert "int rows" in kernel.get_device_source()
    for size in (50, 64, 100):
        a = rand((size, 64), torch.float32, 17)
        b = torch.full((size, 64), float("nan"))
        kernel(a, b)
        torch.testing.assert_close(b[:64], a[:64])
        assert b[64:].isnan().all()  # beyond the 4 x 16 rows the grid covers: untouched


@tilelang.jit
def select_positive(data):
    N = T.dynamic("N")
    data: T.Tensor[[N], T.int32]
    out = T.empty([N], T.int32)
    with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
        tx = T.get_thread_binding()
        if bx * 64 + tx < N:
            cond = T.alloc_var(T.bool)
            cond = data[bx * 64 + tx] > 0
            out[bx * 64 + tx] = T.if_then_else(cond, 1, 0)
    return out


def test_upstream_jit_surface_sources_and_dynamic_sizes():
    """Eager kernels with a T.dynamic size take only the tensors; `f.get_kernel_source(N=...)`; a kernel's
    `get_kernel_source()` is the includes and kernels (upstream's kernel_only), the host wrapper apart; run_once."""
    for n in (100, 7):
        data = torch.randint(-5, 5, (n,), dtype=torch.int32, generator=torch.Generator().manual_seed(n))
        assert torch.equal(select_positive(data), (data > 0).int())
    src = elementwise_add.get_kernel_source(N=4096)
    assert "__global__" in src and "musaLaunchKernel" not in src
    kernel = elementwise_add.compile(N=4096)
    assert kernel.get_kernel_source() == src
    full = kernel.get_kernel_source(kernel_only=False)
    assert full.startswith(src) and full.endswith(kernel.get_host_source()) and "musaLaunchKernel" in full
    out = kernel.run_once()
    c = out if isinstance(out, torch.Tensor) else out[0]
    assert c.shape == (4096,) and not c.isnan().any()
