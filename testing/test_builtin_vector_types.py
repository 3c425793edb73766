"""Vector loads and stores print MUSA's built-in vector types (`float4`, `half2`, `char4`, ...) where the dtype x lanes
has one, as upstream's and Moore Threads' printers do, and `tl::vec<T, N>` where none exists. A built-in vector's
lanes enter lane-wise arithmetic through `tl::vec_of(...)`; a vector copied from memory to memory stays in the
built-in type. Run in the simulator against torch on mp_22 and mp_31."""

import pytest
import torch

import tilelang
import tilelang.language as T

ARCHS = ["mp_31", "mp_22"]
N = 64  # threads; each handles one vector

# dtype, lanes, the printed type, whether torch adds the dtype on CPU (else only the copy is checked)
CASES = [
    ("float32", 2, "float2", True),
    ("float32", 3, "float3", True),
    ("float32", 4, "float4", True),
    ("float64", 2, "double2", True),
    ("float16", 2, "half2", True),
    ("bfloat16", 2, "__mt_bfloat162", True),
    ("int8", 4, "char4", True),
    ("int8", 2, "char2", True),
    ("uint8", 4, "uchar4", True),
    ("int16", 4, "short4", True),
    ("uint16", 2, "ushort2", False),
    ("int32", 4, "int4", True),
    ("uint32", 3, "uint3", False),
    ("int64", 2, "longlong2", True),
    # no built-in type: 8 halves, 32-byte 64-bit vectors (deprecated by CUDA 13), 8-bit floats
    ("float16", 8, "tl::vec<half_t, 8>", True),
    ("int64", 4, "tl::vec<int64_t, 4>", True),
    ("float8_e4m3fn", 4, "tl::vec<fp8_e4_t, 4>", False),
]


def vector_program(dtype, lanes, arithmetic):
    """Thread t: C[t's lanes] = A + B (or A again) and D[t's lanes] = A, each one vector access."""

    @T.prim_func
    def vectors(A: T.Tensor((lanes * N,), dtype), B: T.Tensor((lanes * N,), dtype),
                C: T.Tensor((lanes * N,), dtype), D: T.Tensor((lanes * N,), dtype)):
        with T.Kernel(1, threads=N):
            t = T.get_thread_binding()
            v = T.Ramp(t * lanes, 1, lanes)
            if arithmetic:
                C[v] = A[v] + B[v]
            else:
                C[v] = B[v]
            D[v] = A[v]

    return vectors


def inputs(dtype, lanes):
    torch_dtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(lanes * 31 + len(dtype))
    if torch_dtype.is_floating_point:
        a, b = (torch.randn(lanes * N, generator=g).to(torch_dtype) for _ in range(2))
    else:
        low = 0 if dtype.startswith("uint") else -50
        a, b = (torch.randint(low, 50, (lanes * N,), generator=g).to(torch_dtype) for _ in range(2))
    fill = float("nan") if torch_dtype.is_floating_point else 77
    return a, b, torch.full((lanes * N,), fill).to(torch_dtype), torch.full((lanes * N,), fill).to(torch_dtype)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype,lanes,printed,arithmetic", CASES, ids=[f"{c[0]}x{c[1]}" for c in CASES])
def test_vector_accesses_print_the_builtin_type_and_run(arch, dtype, lanes, printed, arithmetic):
    kernel = tilelang.compile(vector_program(dtype, lanes, arithmetic), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    cast = f"reinterpret_cast<{printed}*>"
    # the copy stays in the printed type on both sides
    assert f"*{cast}(D + " in source and f"= *{cast}(A + " in source, source
    builtin = not printed.startswith("tl::vec")
    if arithmetic:
        operand = f"tl::vec_of(*{cast}(A + " if builtin else f"(*{cast}(A + "
        assert operand in source, source
    if builtin:
        assert "tl::vec<" not in source, source
    a, b, c, d = inputs(dtype, lanes)
    kernel(a, b, c, d)
    expected = a + b if arithmetic else b
    assert torch.equal(c.view(torch.uint8), expected.view(torch.uint8)), (c, expected)
    assert torch.equal(d.view(torch.uint8), a.view(torch.uint8))


@pytest.mark.parametrize("arch", ARCHS)
def test_builtin_and_tl_vec_views_of_memory_agree_lane_for_lane(arch):
    """A float4 load (through tl::vec_of) and a gathered tl::vec in one expression, stored as a float4: each lane
    stays in place, as torch computes it."""

    @T.prim_func
    def reverse(A: T.Tensor((4 * N,), "float32"), B: T.Tensor((4 * N,), "float32")):
        with T.Kernel(1, threads=N):
            t = T.get_thread_binding()
            for k in T.vectorized(4):
                B[t * 4 + k] = A[t * 4 + 3 - k] * 2.0 + A[t * 4 + k]

    kernel = tilelang.compile(reverse, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "*reinterpret_cast<float4*>(B + " in source and "tl::gather(A, " in source, source
    assert "tl::vec_of(*reinterpret_cast<float4*>(A + " in source, source
    a = torch.randn(4 * N)
    b = torch.full((4 * N,), float("nan"))
    kernel(a, b)
    ref = a.view(N, 4).flip(1).reshape(-1) * 2.0 + a
    torch.testing.assert_close(b, ref, rtol=0, atol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_bound_vector_is_declared_in_the_builtin_type(arch):
    """`b = A[0, 0:4]` binds a float32x4: declared `const float4 b` (Moore Threads' test_let_vectorize_load looks for
    `float4 b`), stored as it is, and read through tl::vec_of in arithmetic."""

    @T.prim_func
    def main(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (16, 16), dtype=T.float32, align=16)
        for _bx in T.thread_binding(1, thread="blockIdx.x"):
            for _tx in T.thread_binding(32, thread="threadIdx.x"):
                b = A[0, T.Ramp(0, 1, 4)]
                A[0, T.Ramp(4, 1, 4)] = b
                A[1, T.Ramp(0, 1, 4)] = b + A[0, T.Ramp(8, 1, 4)]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "const float4 b = *reinterpret_cast<float4*>(A);" in source, source
    assert "*reinterpret_cast<float4*>(A + 4) = b;" in source, source
    assert "= tl::vec_of(b) + tl::vec_of(*reinterpret_cast<float4*>(A + 8));" in source, source
    a = torch.randn(16, 16)
    ref = a.clone()
    ref[0, 4:8] = a[0, 0:4]
    ref[1, 0:4] = a[0, 0:4] + a[0, 8:12]
    kernel(a)
    assert torch.equal(a, ref)
