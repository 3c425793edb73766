"""The MUSA C device printer (src/codegen/) and the device base header (src/tl_templates/musa/common.h).

Each kernel is a device PrimFunc built with the IRBuilder and run through the stock passes our pipeline runs
before codegen (FlattenBuffer, VectorizeLoop, StmtSimplify). Tests assert on the printed text and compile it
with `g++ -std=c++17 -fsyntax-only` against common.h and minimal stand-ins for the MUSA headers, for mp_22 and
mp_31; one test also compiles every kernel against the simulator's real headers.
"""

import contextlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.build import split_host_device_mods
from tvm.tirx.script import builder as Tb

from tilelang_musa._native import get_global_func
from tilelang_musa._paths import include_root, native_library

ARCH_MACRO = {"mp_22": 220, "mp_31": 310}
ARCH_WARP = {"mp_22": 128, "mp_31": 32}

# Stand-ins for the three MUSA headers common.h includes: just enough declarations for a host compiler.
STANDIN_HEADERS = {
    "musa_runtime.h": """
        #pragma once
        #include <math.h>
        #include <stdint.h>
        #define __global__
        #define __device__
        #define __host__
        #define __forceinline__ inline __attribute__((always_inline))
        #define __shared__
        #define __align__(n) __attribute__((aligned(n)))
        #define __launch_bounds__(...)
        struct standin_dim3 { unsigned int x, y, z; };
        extern standin_dim3 threadIdx, blockIdx, blockDim, gridDim;
        void __syncthreads();
        void __syncwarp(unsigned mask = 0xffffffffu);
        #define STANDIN_VECTORS(P, T, A2, A4) struct __attribute__((aligned(A2))) P##2 { T x, y; }; \\
          struct P##3 { T x, y, z; }; struct __attribute__((aligned(A4))) P##4 { T x, y, z, w; };
        STANDIN_VECTORS(char, signed char, 2, 4) STANDIN_VECTORS(uchar, unsigned char, 2, 4)
        STANDIN_VECTORS(short, short, 4, 8) STANDIN_VECTORS(ushort, unsigned short, 4, 8)
        STANDIN_VECTORS(int, int, 8, 16) STANDIN_VECTORS(uint, unsigned int, 8, 16)
        STANDIN_VECTORS(float, float, 8, 16) STANDIN_VECTORS(longlong, long long, 16, 16)
        STANDIN_VECTORS(ulonglong, unsigned long long, 16, 16) STANDIN_VECTORS(double, double, 16, 16)
    """,
    # 2-byte float types that convert to and from float, as the real headers' do, and their pairs.
    "musa_fp16.h": "#pragma once\nstruct half { unsigned short bits; half() = default; half(float f); "
                   "operator float() const; };\nstruct __attribute__((aligned(4))) half2 { half x, y; };\n",
    "musa_bf16.h": "#pragma once\nstruct __mt_bfloat16 { unsigned short bits; __mt_bfloat16() = default; "
                   "__mt_bfloat16(float f); operator float() const; };\n"
                   "struct __attribute__((aligned(4))) __mt_bfloat162 { __mt_bfloat16 x, y; };\n",
}
# Functions the test kernels call through call_extern.
EXTERN_DECLS = "__device__ float my_extern(float x, int n, const char* tag);\n__device__ float my_load(float* p);\n"


@pytest.fixture(scope="module")
def standin_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("musa_standin")
    for name, text in STANDIN_HEADERS.items():
        (d / name).write_text(textwrap.dedent(text))
    return d


def syntax_check(source: str, arch: str, header_dir: Path) -> None:
    """Compiles `source` after common.h, as the generated translation unit does; fails with g++'s output."""
    tu = '#include "tl_templates/musa/common.h"\n' + EXTERN_DECLS + source
    cmd = ["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", f"-D__MUSA_ARCH__={ARCH_MACRO[arch]}",
           f"-I{header_dir}", f"-I{include_root()}", "-"]
    result = subprocess.run(cmd, input=tu, capture_output=True, text=True)
    assert result.returncode == 0, f"g++ rejected the kernel:\n{result.stderr}\n--- source ---\n{tu}"


def print_kernel(func, arch="mp_31", name="main_kernel", lower=True) -> str:
    if lower:
        mod = tvm.IRModule({"main": func})
        for p in (tvm.tirx.transform.FlattenBuffer(), tvm.tirx.transform.VectorizeLoop(),
                  tvm.tirx.transform.StmtSimplify()):
            mod = p(mod)
        func = mod["main"]
    printer = get_global_func("tilelang_musa.codegen.print_device_kernel")
    return printer(func, name, {"arch": arch, "warp_size": ARCH_WARP[arch]})


def launch_info(func) -> dict:
    return dict(get_global_func("tilelang_musa.codegen.kernel_launch_info")(func))


def device_func(body, params, grid=(4,), block=(256,)):
    """A device PrimFunc: `params` is [(name, Tb.arg spec)], and `body(*args, blocks, threads)` runs under the
    thread bindings of `grid` and `block` (blockIdx/threadIdx IterVars listed x, y, z)."""
    with IRBuilder() as ib:
        with Tb.prim_func():
            Tb.func_name("main")
            args = [Tb.arg(name, spec) for name, spec in params]
            blocks = [Tb.env_thread(f"blockIdx.{a}") for a in "xyz"[: len(grid)]]
            threads = [Tb.env_thread(f"threadIdx.{a}") for a in "xyz"[: len(block)]]
            with contextlib.ExitStack() as stack:
                for iv, extent in zip(blocks + threads, list(grid) + list(block)):
                    stack.enter_context(Tb.launch_thread(iv, extent))
                body(*args, blocks, threads)
    return ib.get()


def buf(shape, dtype="float32"):
    return Tb.buffer(shape, dtype)


# ---- kernels (each covers one feature; also compiled together against the simulator headers) ------------------


def k_elementwise():
    def body(A, B, n, blocks, threads):
        bx, tx = blocks[0], threads[0]
        with Tb.serial(0, 4):
            with Tb.If(bx * 256 + tx < n):
                with Tb.Then():
                    Tb.buffer_store(B, A[bx * 256 + tx] + 1.0, [bx * 256 + tx])

    return device_func(body, [("A", buf((1024,))), ("B", buf((1024,))), ("n", Tb.int32())])


def k_vector_f32():
    def body(A, B, C, blocks, threads):
        bx, tx = blocks[0], threads[0]
        with Tb.vectorized(0, 4) as i:
            idx = bx * 1024 + tx * 4 + i
            Tb.buffer_store(C, A[idx] + B[idx], [idx])

    return device_func(body, [("A", buf((4096,))), ("B", buf((4096,))), ("C", buf((4096,)))])


def k_vector_f16():
    def body(A, B, blocks, threads):
        tx = threads[0]
        L = Tb.alloc_buffer((4,), "float16", scope="local")
        with Tb.vectorized(0, 4) as i:
            Tb.buffer_store(L, A[tx * 4 + i] * Tb.float16(2.0), [i])
        with Tb.vectorized(0, 4) as i:
            Tb.buffer_store(B, Tb.Cast("float32", L[i]), [tx * 4 + i])

    return device_func(body, [("A", buf((1024,), "float16")), ("B", buf((1024,)))], grid=(1,), block=(256,))


def k_shared():
    def body(A, B, blocks, threads):
        tx = threads[0]
        S = Tb.alloc_buffer((256,), "float32", scope="shared")
        Tb.buffer_store(S, A[tx], [tx])
        Tb.evaluate(Tb.tvm_storage_sync("shared"))
        Tb.buffer_store(B, S[255 - tx], [tx])

    return device_func(body, [("A", buf((256,))), ("B", buf((256,)))], grid=(1,))


def k_dynamic_shared():
    def body(A, B, blocks, threads):
        tx = threads[0]
        S = Tb.alloc_buffer((128,), "float32", scope="shared.dyn", annotations={"tl.dyn_smem_offset": 256})
        H = Tb.alloc_buffer((128,), "float16", scope="shared.dyn", annotations={"tl.dyn_smem_offset": 0})
        Tb.buffer_store(H, A[tx], [tx])
        Tb.buffer_store(S, Tb.Cast("float32", H[tx]), [tx])
        Tb.evaluate(Tb.tvm_storage_sync("shared.dyn"))
        Tb.buffer_store(B, S[127 - tx], [tx])

    return device_func(body, [("A", buf((128,), "float16")), ("B", buf((128,)))], grid=(1,), block=(128,))


def k_local_and_control():
    def body(A, B, n, blocks, threads):
        tx = threads[0]
        acc = Tb.alloc_buffer((1,), "float32", scope="local.var")
        frag = Tb.alloc_buffer((8,), "float32", scope="local.fragment")
        Tb.buffer_store(acc, Tb.float32(0), [0])
        with Tb.unroll(0, 8) as i:
            Tb.buffer_store(frag, A[tx * 8 + i], [i])
        with Tb.serial(0, 8) as i:
            Tb.buffer_store(acc, acc[0] + frag[i], [0])
        x = Tb.bind(tx * 2 - n)
        with Tb.If(x > 0):
            with Tb.Then():
                Tb.buffer_store(B, acc[0], [tx])
            with Tb.Else():
                with Tb.If(x == 0):
                    with Tb.Then():
                        Tb.buffer_store(B, Tb.float32(0), [tx])
                    with Tb.Else():
                        Tb.buffer_store(B, -acc[0], [tx])
        with Tb.While(acc[0] < 100.0):
            Tb.buffer_store(acc, acc[0] * 2.0, [0])
            with Tb.If(acc[0] > 50.0):
                with Tb.Then():
                    Tb.Break()

    return device_func(body, [("A", buf((1024,))), ("B", buf((128,))), ("n", Tb.int32())], grid=(1,), block=(128,))


def k_select_and_math():
    def body(A, B, n, blocks, threads):
        tx = threads[0]
        Tb.buffer_store(B, Tb.if_then_else(tx + 1 < n, A[tx + 1], Tb.exp(A[tx])), [tx])
        Tb.buffer_store(B, Tb.Select(tx > 3, Tb.float32(0.5), A[0]), [tx + 128])
        Tb.buffer_store(B, Tb.call_extern("float32", "my_extern", A[tx], n, tvm.ir.StringImm('say "hi"\n')), [tx])

    return device_func(body, [("A", buf((256,))), ("B", buf((256,))), ("n", Tb.int32())], grid=(1,), block=(128,))


def k_casts():
    def body(H, Bf, F, I, blocks, threads):
        tx = threads[0]
        Tb.buffer_store(F, Tb.Cast("float32", H[tx]) + Tb.Cast("float32", Bf[tx]), [tx])
        Tb.buffer_store(H, Tb.Cast("float16", Bf[tx]), [tx])
        Tb.buffer_store(Bf, Tb.Cast("bfloat16", I[tx]), [tx])
        Tb.buffer_store(I, Tb.Cast("int32", H[tx]) + Tb.Cast("int32", F[tx]), [tx])
        Tb.buffer_store(F, Tb.Cast("float32", Tb.Cast("int64", I[tx]) * Tb.int64(3)), [tx])

    return device_func(body, [("H", buf((128,), "float16")), ("Bf", buf((128,), "bfloat16")),
                              ("F", buf((128,))), ("I", buf((128,), "int32"))], grid=(1,), block=(128,))


def k_index_helpers():
    def body(A, B, n, blocks, threads):
        tx = threads[0]
        Tb.buffer_store(B, Tb.Cast("float32", Tb.floordiv(tx - n, 8) + Tb.floormod(tx - n, 8)), [tx])
        Tb.buffer_store(A, Tb.max(Tb.min(A[tx], Tb.float32(6.0)), Tb.float32(0.0)), [tx])
        Tb.buffer_store(B, Tb.Cast("float32", Tb.max(Tb.min(tx, n), 7)), [tx])

    return device_func(body, [("A", buf((128,))), ("B", buf((128,))), ("n", Tb.int32())], grid=(1,), block=(128,))


def k_bits_and_pointers():
    def body(I, F, blocks, threads):
        tx = threads[0]
        v = I[tx]
        mixed = Tb.bitwise_xor(Tb.shift_right(v, 1), Tb.shift_left(Tb.bitwise_not(v), 2))
        Tb.buffer_store(I, Tb.bitwise_or(Tb.bitwise_and(v, 3), mixed), [tx])
        Tb.buffer_store(F, Tb.reinterpret("float32", I[tx]), [tx])
        Tb.buffer_store(F, Tb.call_extern("float32", "my_load", Tb.address_of(F[tx + 1])), [tx])

    return device_func(body, [("I", buf((128,), "int32")), ("F", buf((129,)))], grid=(1,), block=(128,))


def k_grid_2d():
    def body(A, blocks, threads):
        bx, by = blocks
        tx, ty = threads
        Tb.buffer_store(A, Tb.float32(1), [by * 16 + ty, bx * 32 + tx])

    return device_func(body, [("A", buf((48, 64)))], grid=(2, 3), block=(32, 4))


def k_gather_scatter():
    def body(A, B, blocks, threads):
        tx = threads[0]
        with Tb.vectorized(0, 4) as i:
            Tb.buffer_store(B, A[tx * 8 + i * 2], [i * 64 + tx])

    return device_func(body, [("A", buf((1024,))), ("B", buf((256,)))], grid=(1,), block=(64,))


def k_let_and_shuffle():
    def body(A, blocks, threads):
        tx = threads[0]
        t = tirx.Var("t", "int32")
        Tb.buffer_store(A, Tb.Cast("float32", tirx.Let(t, tx * 2, t * t + t)), [tx])
        pick = tirx.Shuffle([tirx.Ramp(tx, 1, 4)], [tirx.IntImm("int32", 2)])
        Tb.buffer_store(A, Tb.Cast("float32", pick), [tx + 64])

    return device_func(body, [("A", buf((128,)))], grid=(1,), block=(64,))


ALL_KERNELS = [k_elementwise, k_vector_f32, k_vector_f16, k_shared, k_dynamic_shared, k_local_and_control,
               k_select_and_math, k_casts, k_index_helpers, k_bits_and_pointers, k_grid_2d, k_gather_scatter,
               k_let_and_shuffle]


@pytest.fixture(params=["mp_22", "mp_31"])
def arch(request) -> str:
    return request.param


# ---- kernel signature and thread indices ------------------------------------------------------------------------


def test_elementwise_prints_signature_with_launch_bounds_and_thread_builtins(arch, standin_dir):
    src = print_kernel(k_elementwise(), arch)
    assert src.startswith('extern "C" __global__ void __launch_bounds__(256, 1) main_kernel('
                          "float* __restrict__ A, float* __restrict__ B, int n) {\n")
    assert "if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < n) {" in src
    assert "B[(((int)blockIdx.x) * 256) + ((int)threadIdx.x)] = A[(((int)blockIdx.x) * 256) + " \
           "((int)threadIdx.x)] + 1.000000e+00f;" in src
    assert "#include" not in src and src.endswith("}\n")
    syntax_check(src, arch, standin_dir)


def test_2d_grid_and_block_bind_every_axis_and_multiply_launch_bounds(arch, standin_dir):
    func = k_grid_2d()
    src = print_kernel(func, arch)
    assert "__launch_bounds__(128, 1)" in src
    for builtin in ("blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"):
        assert f"((int){builtin})" in src
    info = launch_info(func)
    assert list(info["threads"]) == [32, 4, 1] and list(info["grid_vars"]) == [2, 3, 1]
    assert info["dynamic_smem_bytes"] == 0
    syntax_check(src, arch, standin_dir)


def test_symbolic_extents_reach_launch_info_and_drop_launch_bounds(standin_dir):
    with IRBuilder() as ib:
        with Tb.prim_func():
            Tb.func_name("main")
            A = Tb.arg("A", buf((4096,)))
            n = Tb.arg("n", Tb.int32())
            bx, tx = Tb.env_thread("blockIdx.x"), Tb.env_thread("threadIdx.x")
            with Tb.launch_thread(bx, (n + 127) // 128):
                with Tb.launch_thread(tx, n):
                    S = Tb.alloc_buffer((n,), "float32", scope="shared.dyn")
                    Tb.buffer_store(S, A[tx], [tx])
                    Tb.buffer_store(A, S[n - 1 - tx], [bx * 128 + tx])
    func = ib.get()
    src = print_kernel(func)
    assert src.startswith('extern "C" __global__ void main_kernel(float* __restrict__ A, int n) {')
    assert "float* buf = reinterpret_cast<float*>(buf_dyn_shmem);" in src
    info = launch_info(func)
    assert str(info["threads"][0]) == "n" and str(info["grid_vars"][0]) == "(n + 127) // 128"
    assert str(info["dynamic_smem_bytes"]) == "4 * n"
    syntax_check(src, "mp_31", standin_dir)


def test_parameter_names_are_sanitised_and_unique(standin_dir):
    def body(a, b, c, d, blocks, threads):
        Tb.buffer_store(a, Tb.Cast("float32", c + d), [threads[0]])

    func = device_func(body, [("a.b", buf((64,))), ("int", buf((64,))), ("x", Tb.int32()), ("x", Tb.int64())],
                       grid=(1,), block=(64,))
    src = print_kernel(func)
    assert "main_kernel(float* __restrict__ a_b, float* __restrict__ int_1, int x, int64_t x_1)" in src
    syntax_check(src, "mp_31", standin_dir)


def test_pointer_parameter_with_decl_buffer_aliases_the_pointer(standin_dir):
    with IRBuilder() as ib:
        with Tb.prim_func():
            Tb.func_name("main")
            P = Tb.arg("P", Tb.handle("float32"))
            Pb = Tb.decl_buffer((64,), "float32", data=P)
            tx = Tb.env_thread("threadIdx.x")
            with Tb.launch_thread(tx, 64):
                Tb.buffer_store(Pb, Pb[tx] * 3.0, [tx])
    src = print_kernel(ib.get())
    assert "main_kernel(float* __restrict__ P)" in src
    assert "P[(int)threadIdx.x] = P[(int)threadIdx.x] * 3.000000e+00f;" in src
    syntax_check(src, "mp_31", standin_dir)


# ---- vectors ------------------------------------------------------------------------------------------------------


def test_float32x4_loads_and_stores_go_through_float4_reinterpret_casts(arch, standin_dir):
    """Memory is viewed as MUSA's built-in float4; its lanes enter lane-wise arithmetic as a tl::vec."""
    src = print_kernel(k_vector_f32(), arch)
    base = "((((int)blockIdx.x) * 1024) + (((int)threadIdx.x) * 4))"
    assert f"*reinterpret_cast<float4*>(C + {base}) = " \
           f"tl::vec_of(*reinterpret_cast<float4*>(A + {base})) + " \
           f"tl::vec_of(*reinterpret_cast<float4*>(B + {base}));" in src
    assert "for (" not in src  # the vectorized loop became one vector statement
    syntax_check(src, arch, standin_dir)


def test_float16x4_vector_arithmetic_broadcasts_half_constants_and_vec_casts(arch, standin_dir):
    src = print_kernel(k_vector_f16(), arch)
    assert "__align__(16) half_t buf[4];" in src
    assert "tl::broadcast<half_t, 4>(half_t(2.000000e+00f))" in src
    assert "tl::vec_cast<float>(*reinterpret_cast<tl::vec<half_t, 4>*>(buf))" in src
    syntax_check(src, arch, standin_dir)


def test_strided_vector_access_gathers_and_scatters(arch, standin_dir):
    src = print_kernel(k_gather_scatter(), arch)
    assert "tl::scatter(B, tl::ramp<int, 4>((int)threadIdx.x, 64), " \
           "tl::gather(A, tl::ramp<int, 4>(((int)threadIdx.x) * 8, 2)));" in src
    syntax_check(src, arch, standin_dir)


def test_let_prints_as_local_lambda_and_shuffle_extracts_a_lane(arch, standin_dir):
    src = print_kernel(k_let_and_shuffle(), arch)
    assert "([&]() -> int { const int t = ((int)threadIdx.x) * 2; return (t + 1) * t; }())" in src
    assert "(float)tl::ramp<int, 4>((int)threadIdx.x, 1)[2]" in src
    syntax_check(src, arch, standin_dir)


# ---- memory ------------------------------------------------------------------------------------------------------


def test_shared_allocation_is_a_static_array_and_storage_sync_a_barrier(arch, standin_dir):
    src = print_kernel(k_shared(), arch)
    assert "  __shared__ __align__(16) float buf[256];\n" in src
    assert "  __syncthreads();\n" in src
    syntax_check(src, arch, standin_dir)


def test_dynamic_shared_allocations_are_views_of_one_extern_buffer_at_their_offsets(arch, standin_dir):
    func = k_dynamic_shared()
    src = print_kernel(func, arch)
    assert src.count("extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];") == 1
    assert "float* buf = reinterpret_cast<float*>(buf_dyn_shmem + 256);" in src
    assert "half_t* buf_1 = reinterpret_cast<half_t*>(buf_dyn_shmem);" in src
    assert launch_info(func)["dynamic_smem_bytes"] == 256 + 128 * 4
    syntax_check(src, arch, standin_dir)


def without_alloc_annotations(func):
    """`func` with every AllocBuffer's annotations dropped."""

    def strip(node, mutator):
        node = mutator.default_mutate(node)
        return tirx.AllocBuffer(node.buffer, annotations={})

    return tvm_ffi.structural_mutate(func, [(tirx.AllocBuffer, strip)])


def test_merged_dynamic_shared_memory_declares_typed_views(arch, standin_dir):
    """MergeSharedMemoryAllocations leaves one uint8 buffer and DeclBuffers over `buffer_data` of it."""
    func = k_dynamic_shared().with_attr("target", tvm.target.Target({"kind": "musa", "arch": arch}))
    # Drop our offset annotations: the pass computes its own layout.
    func = without_alloc_annotations(func)
    mod = tvm.IRModule({"main": func})
    for p in (tvm.tirx.transform.FlattenBuffer(), tvm.s_tir.transform.MergeSharedMemoryAllocations(),
              tvm.tirx.transform.StmtSimplify()):
        mod = p(mod)
    src = print_kernel(mod["main"], arch, lower=False)
    assert "reinterpret_cast<float*>(buf_dyn_shmem" in src
    assert "reinterpret_cast<half_t*>(buf_dyn_shmem" in src
    syntax_check(src, arch, standin_dir)


def test_local_arrays_loops_bind_if_else_and_while(arch, standin_dir):
    src = print_kernel(k_local_and_control(), arch)
    assert "  float buf = 0.000000e+00f;\n" in src  # local.var: one element, a C scalar starting at zero
    assert "  __align__(16) float buf_1[8];\n" in src  # local.fragment
    assert "#pragma unroll\n  for (int v = 0; v < 8; ++v) {" in src
    assert "for (int v_1 = 0; v_1 < 8; ++v_1) {" in src
    assert "const int v_2 = (((int)threadIdx.x) * 2) - n;" in src
    x = "((((int)threadIdx.x) * 2) - n)"  # StmtSimplify substitutes the Bind into its uses
    assert (f"  if (0 < {x}) {{\n    B[(int)threadIdx.x] = buf;\n"
            f"  }} else if ({x} == 0) {{\n    B[(int)threadIdx.x] = 0.000000e+00f;\n"
            "  } else {\n    B[(int)threadIdx.x] = buf * (-1.000000e+00f);\n  }\n") in src
    assert "while (buf < 1.000000e+02f) {" in src and "break;" in src
    syntax_check(src, arch, standin_dir)


def test_multi_dimensional_access_is_linearised_row_major(standin_dir):
    src = print_kernel(k_grid_2d(), lower=False)  # no FlattenBuffer: the store keeps its two indices
    assert "A[(((((int)blockIdx.y) * 16) + ((int)threadIdx.y)) * 64) + ((((int)blockIdx.x) * 32) + " \
           "((int)threadIdx.x))] = 1.000000e+00f;" in src
    syntax_check(src, "mp_31", standin_dir)


def test_volatile_shared_allocation_keeps_the_qualifier(standin_dir):
    def body(A, blocks, threads):
        R = Tb.alloc_buffer((64,), "float32", scope="shared", annotations={"tirx.volatile": True})
        Tb.buffer_store(R, A[threads[0]], [threads[0]])
        Tb.buffer_store(A, R[63 - threads[0]], [threads[0]])

    src = print_kernel(device_func(body, [("A", buf((64,)))], grid=(1,), block=(64,)))
    assert "__shared__ __align__(16) volatile float buf[64];" in src
    syntax_check(src, "mp_31", standin_dir)


# ---- expressions -------------------------------------------------------------------------------------------------


def test_select_if_then_else_math_and_extern_calls(arch, standin_dir):
    src = print_kernel(k_select_and_math(), arch)
    assert "B[(int)threadIdx.x] = ((((int)threadIdx.x) + 1) < n) ? A[((int)threadIdx.x) + 1] : " \
           "expf(A[(int)threadIdx.x]);" in src
    assert "(3 < ((int)threadIdx.x)) ? 5.000000e-01f : A[0]" in src
    assert 'my_extern(A[(int)threadIdx.x], n, "say \\"hi\\"\\n")' in src
    syntax_check(src, arch, standin_dir)


def test_casts_between_fp16_bf16_fp32_and_integers(arch, standin_dir):
    src = print_kernel(k_casts(), arch)
    assert "F[(int)threadIdx.x] = tl::cast<float>(H[(int)threadIdx.x]) + tl::cast<float>(Bf[(int)threadIdx.x]);" in src
    assert "H[(int)threadIdx.x] = tl::cast<half_t>(Bf[(int)threadIdx.x]);" in src
    assert "Bf[(int)threadIdx.x] = tl::cast<bfloat16_t>(I[(int)threadIdx.x]);" in src
    assert "tl::cast<int>(H[(int)threadIdx.x]) + ((int)F[(int)threadIdx.x])" in src
    assert "(float)(((int64_t)I[(int)threadIdx.x]) * 3LL)" in src
    syntax_check(src, arch, standin_dir)


def test_floordiv_floormod_min_max_use_template_helpers(arch, standin_dir):
    src = print_kernel(k_index_helpers(), arch)
    assert "tl::floordiv(((int)threadIdx.x) - n, 8) + tl::floormod(((int)threadIdx.x) - n, 8)" in src
    assert "tl::max(tl::min(A[(int)threadIdx.x], 6.000000e+00f), 0.000000e+00f)" in src
    assert "tl::max(tl::min((int)threadIdx.x, n), 7)" in src
    syntax_check(src, arch, standin_dir)


def test_bitwise_operators_reinterpret_and_address_of(arch, standin_dir):
    src = print_kernel(k_bits_and_pointers(), arch)
    i = "I[(int)threadIdx.x]"
    assert f"{i} = ({i} & 3) | (({i} >> 1) ^ ((~{i}) << 2));" in src
    assert f"F[(int)threadIdx.x] = tl::bit_cast<float>({i});" in src
    assert "F[(int)threadIdx.x] = my_load(&F[((int)threadIdx.x) + 1]);" in src
    syntax_check(src, arch, standin_dir)


@pytest.mark.parametrize("dtype,value,text", [
    ("float32", 0.1, "1.000000e-01f"),
    ("float32", 3.14159265, "3.1415927e+00f"),  # 7 digits do not read back as the same float; 8 do
    ("float32", 16777217.0, "1.6777216e+07f"),  # the float value (2^24), not the double one
    ("float32", -2.5, "(-2.500000e+00f)"),
    ("float64", 0.1, "1.000000e-01"),
    ("float64", 1.0 / 3.0, "3.333333333333333e-01"),  # shortest form that reads back exactly
    ("float32", float("inf"), "tl::infinity<float>()"),
    ("float32", float("-inf"), "(-tl::infinity<float>())"),
    ("float16", float("nan"), "tl::quiet_nan<half_t>()"),
    ("bfloat16", 1.0, "bfloat16_t(1.000000e+00f)"),
    ("int64", 5, "5LL"),
    ("int32", -2147483648, "(-2147483647 - 1)"),
    ("uint32", 7, "7u"),
    ("int8", -3, "((signed char)-3)"),
    ("bool", 1, "true"),
])
def test_constants_print_as_exact_literals(dtype, value, text, standin_dir):
    def body(A, blocks, threads):
        # A select keeps the literal an operand, so it prints with the parentheses an operand needs.
        Tb.buffer_store(A, Tb.Select(threads[0] < 3, tirx.const(value, dtype), A[0]), [threads[0]])

    src = print_kernel(device_func(body, [("A", buf((64,), dtype))], grid=(1,), block=(64,)), lower=False)
    assert f"A[(int)threadIdx.x] = (((int)threadIdx.x) < 3) ? {text} : A[0];" in src
    syntax_check(src, "mp_31", standin_dir)


@T.prim_func(s_tir=True)
def row_exp_sum(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128,), "float32")):
    for i in T.thread_binding(128, thread="blockIdx.x"):
        for k in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("red"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + T.exp(A[vi, vk])


def test_stock_tvm_pipeline_output_prints(arch, standin_dir):
    """The device function of TVM's own default pipeline for a `musa` target: pointer parameters, DeclBuffers,
    LowerThreadAllreduce's volatile shared tree with warp-scope syncs, and call_pure_extern("expf")."""
    target = tvm.target.Target({"kind": "musa", "arch": arch}, host="llvm")
    mod = tvm.tirx.transform.BindTarget(target)(tvm.IRModule({"main": row_exp_sum}))
    pipeline, _, finalize_device = tvm.tirx.get_default_tir_pipeline(target)
    _, device_mods = split_host_device_mods(pipeline(mod))
    (device_mod,) = [finalize_device()(m) for m in device_mods.values()]
    (func,) = device_mod.functions.values()
    src = print_kernel(func, arch, name="row_exp_sum_kernel", lower=False)
    assert src.startswith('extern "C" __global__ void __launch_bounds__(128, 1) row_exp_sum_kernel('
                          "float* __restrict__ A_ptr, float* __restrict__ B_ptr) {")
    assert "__shared__ __align__(16) volatile float red_buf0[128];" in src
    assert "red_buf0[(int)threadIdx.x] = expf(A_ptr[(((int)blockIdx.x) * 128) + ((int)threadIdx.x)]);" in src
    assert "__syncwarp();" in src  # the in-warp steps: below 64 lanes on mp_22, below 16 on mp_31
    assert "reduce_scope" not in src  # an analysis marker, not code
    syntax_check(src, arch, standin_dir)


def test_every_kernel_compiles_against_the_simulator_headers(arch):
    sim = include_root() / "tl_templates" / "sim"
    if not (sim / "musa_runtime.h").is_file():
        pytest.skip("the simulator headers (src/tl_templates/sim/) are not present")
    source = "".join(print_kernel(k(), arch, name=k.__name__) for k in ALL_KERNELS)
    syntax_check(source, arch, sim)


# ---- errors ------------------------------------------------------------------------------------------------------


def _assert_stmt(A, tx):
    with Tb.Assert(tx < 10, "out of range"):
        Tb.buffer_store(A, 1.0, [0, tx])


def _parallel_loop(A, tx):
    with Tb.parallel(0, 4) as i:
        Tb.buffer_store(A, 1.0, [i, tx])


def _vectorized_loop(A, tx):
    with Tb.vectorized(0, 4) as i:
        Tb.buffer_store(A, 1.0, [i, tx])


def _global_alloc(A, tx):
    Tb.buffer_store(Tb.alloc_buffer((4,), "float32", scope="global"), 1.0, [0])


def _unknown_intrinsic(A, tx):
    Tb.evaluate(Tb.tvm_warp_activemask())


def _grid_sync(A, tx):
    Tb.evaluate(Tb.tvm_storage_sync("global"))


def _virtual_thread(A, tx):
    with Tb.launch_thread(Tb.env_thread("vthread"), 2):
        Tb.buffer_store(A, 1.0, [0, tx])


def _two_unplaced_dyn_smem(A, tx):
    Tb.buffer_store(Tb.alloc_buffer((4,), "float32", scope="shared.dyn"), 1.0, [0])
    Tb.buffer_store(Tb.alloc_buffer((4,), "float32", scope="shared.dyn"), 1.0, [0])


@pytest.mark.parametrize("body,lower,message", [
    (_assert_stmt, True, "statement `tirx.AssertStmt` cannot be printed: device code cannot raise errors"),
    (_parallel_loop, True, "loop `v` is parallel; only serial and unrolled loops can be printed"),
    (_vectorized_loop, False, "loop `v` is vectorized (run VectorizeLoop)"),
    (_global_alloc, True, 'is allocated in scope "global", which a kernel cannot allocate'),
    (_unknown_intrinsic, True, "call `tirx.tvm_warp_activemask`: no MUSA print rule is registered"),
    (_grid_sync, True, 'call `tirx.tvm_storage_sync`: synchronisation of scope "global" is not supported'),
    (_virtual_thread, True, 'attr "virtual_thread" binds a loop variable and must be lowered before codegen'),
    (_two_unplaced_dyn_smem, True, '2 "shared.dyn" allocations, 2 of them without a `tl.dyn_smem_offset`'),
], ids=lambda p: p.__name__.strip("_") if callable(p) else None)
def test_unsupported_constructs_fail_naming_kernel_and_construct(body, lower, message):
    func = device_func(lambda A, blocks, threads: body(A, threads[0]), [("A", buf((64, 64)))], grid=(1,),
                       block=(64,))
    with pytest.raises(ValueError) as err:
        print_kernel(func, lower=lower, name="bad_kernel")
    assert str(err.value).startswith("MUSA codegen: kernel `bad_kernel`: ")
    assert message in str(err.value)


@pytest.mark.parametrize("options,error,message", [
    ({"arch": "sm_80"}, ValueError, 'option `arch` must look like "mp_22" or "mp_31"'),
    ({"arch": 31}, TypeError, "option `arch` must be a str"),
    ({"arch": "mp_31", "warp_size": 0}, TypeError, "option `warp_size` must be a positive int"),
])
def test_invalid_options_are_rejected(options, error, message):
    printer = get_global_func("tilelang_musa.codegen.print_device_kernel")
    with pytest.raises(error, match=re.escape(message)):
        printer(k_elementwise(), "main_kernel", options)


def test_unknown_options_are_ignored():
    printer = get_global_func("tilelang_musa.codegen.print_device_kernel")
    src = printer(k_elementwise(), "main_kernel", {"arch": "mp_22", "warp_size": 128, "fast_math": True})
    assert "main_kernel(" in src


@pytest.mark.parametrize("name", ["main", "2fast", "my-kernel", "threadIdx"])
def test_kernel_name_must_be_a_usable_identifier(name):
    with pytest.raises(ValueError, match="the kernel name is not a valid, unreserved C identifier"):
        print_kernel(k_elementwise(), name=name)


def test_a_second_copy_of_the_library_keeps_one_rule_table(tmp_path):
    """Loading the library again from another path re-runs its static initialisers; that must not fail."""
    copy = tmp_path / "libtilelang_musa_copy.so"
    copy.write_bytes(native_library().read_bytes())
    script = textwrap.dedent(f"""
        import ctypes, tvm, tvm_ffi
        ctypes.CDLL({str(native_library())!r}, ctypes.RTLD_GLOBAL)
        rules = list(tvm_ffi.get_global_func("tilelang_musa.codegen.list_call_rules")())
        ctypes.CDLL({str(copy)!r}, ctypes.RTLD_GLOBAL)
        assert list(tvm_ffi.get_global_func("tilelang_musa.codegen.list_call_rules")()) == rules
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_call_rule_table_lists_the_generic_intrinsics():
    rules = set(get_global_func("tilelang_musa.codegen.list_call_rules")())
    expected = {"tirx.call_extern", "tirx.call_pure_extern", "tirx.tvm_storage_sync", "tirx.reinterpret",
                "tirx.address_of", "tirx.buffer_data", "prim.if_then_else", "prim.likely", "tirx.exp", "prim.log2"}
    assert expected <= rules


# ---- common.h semantics (compiled and run on the host) ----------------------------------------------------------

CHECK_PRELUDE = r"""
#include "tl_templates/musa/common.h"
#include <stdio.h>
#define CHECK(cond) do { if (!(cond)) { printf("failed: %s\n", #cond); return 1; } } while (0)
"""

COMMON_H_CHECKS = CHECK_PRELUDE + r"""
int main() {
  // floordiv/floormod round toward -inf for every sign combination; truncmod keeps the dividend's sign.
  CHECK(tl::floordiv(-7, 2) == -4 && tl::floormod(-7, 2) == 1);
  CHECK(tl::floordiv(7, -2) == -4 && tl::floormod(7, -2) == -1);
  CHECK(tl::floordiv(-7, -2) == 3 && tl::floormod(-7, -2) == -1);
  CHECK(tl::floordiv(6, 3) == 2 && tl::floormod(-6, 3) == 0);
  CHECK(tl::floordiv((int64_t)-9, 4LL) == -3 && tl::floormod((int64_t)-9, 4LL) == 3);
  CHECK(tl::floordiv(-7.0f, 2.0f) == -4.0f && tl::floormod(-7.0f, 2.0f) == 1.0f);
  CHECK(tl::truncmod(-7, 2) == -1 && tl::truncmod(-7.5f, 2.0f) == -1.5f);
  CHECK(tl::min(3, 5) == 3 && tl::max(3.5f, -1.0f) == 3.5f);
  // Vectors: lane-wise operators, factories, gather/scatter and conversions.
  static_assert(sizeof(tl::vec<float, 4>) == 16 && alignof(tl::vec<float, 4>) == 16, "float4 layout");
  static_assert(alignof(tl::vec<float, 8>) == 16 && alignof(tl::vec<float, 3>) == 4, "capped alignment");
  tl::vec<int, 4> r = tl::ramp<int, 4>(-2, 3);  // -2 1 4 7
  CHECK(r[0] == -2 && r[3] == 7);
  tl::vec<int, 4> q = tl::floordiv(r, tl::broadcast<int, 4>(2));
  CHECK(q[0] == -1 && q[1] == 0 && q[2] == 2 && q[3] == 3);
  tl::vec<float, 4> f = tl::vec_cast<float>(r) * 0.5f + tl::broadcast<float, 4>(1.0f);
  CHECK(f[0] == 0.0f && f[3] == 4.5f);
  tl::vec<bool, 4> pos = f > tl::broadcast<float, 4>(1.0f);
  tl::vec<float, 4> s = tl::select(pos, f, tl::broadcast<float, 4>(-1.0f));
  CHECK(s[0] == -1.0f && s[1] == 1.5f && s[2] == 3.0f);
  float mem[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  tl::vec<float, 4> g = tl::gather(mem, tl::ramp<int, 4>(1, 2));
  CHECK(g[0] == 1 && g[3] == 7);
  tl::scatter(mem, tl::ramp<int, 4>(0, 2), tl::make_vec<float>(10, 11, 12, 13));
  CHECK(mem[0] == 10 && mem[6] == 13 && mem[1] == 1);
  CHECK(tl::bit_cast<unsigned int>(1.0f) == 0x3f800000u);
  CHECK(tl::infinity<float>() > 3.0e38f && tl::quiet_nan<double>() != tl::quiet_nan<double>());
  return 0;
}
"""


# The 16-bit float types need real conversions: these checks run against the simulator's musa_fp16.h/musa_bf16.h.
COMMON_H_HALF_CHECKS = CHECK_PRELUDE + r"""
int main() {
  half_t h = tl::cast<half_t>(-7);
  CHECK(tl::cast<float>(tl::cast<bfloat16_t>(h)) == -7.0f);  // half -> bfloat16 goes through float
  CHECK(tl::cast<int>(tl::floordiv(h, tl::cast<half_t>(2))) == -4);
  CHECK(tl::cast<float>(tl::floormod(h, tl::cast<half_t>(2))) == 1.0f);
  CHECK(tl::cast<float>(tl::max(h, half_t(3.5f))) == 3.5f);
  CHECK(tl::cast<float>(tl::infinity<half_t>()) > 65504.0f);
  bfloat16_t n = tl::quiet_nan<bfloat16_t>();
  CHECK(tl::cast<float>(n) != tl::cast<float>(n));
  tl::vec<half_t, 4> v = tl::ramp<half_t, 4>(half_t(1.0f), half_t(0.5f));  // 1 1.5 2 2.5
  tl::vec<half_t, 4> w = v * tl::broadcast<half_t, 4>(half_t(2.0f)) - v;
  tl::vec<float, 4> f = tl::vec_cast<float>(tl::min(v, w));
  CHECK(f[0] == 1.0f && f[3] == 2.5f);
  CHECK(tl::bit_cast<unsigned short>(half_t(1.0f)) == 0x3c00);
  static_assert(alignof(tl::vec<half_t, 4>) == 8, "half4 is 8-byte aligned");
  return 0;
}
"""


def compile_and_run(source: str, header_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "checks.cc").write_text(source)
    exe = tmp_path / "checks"
    build = subprocess.run(["g++", "-std=c++17", "-O1", "-D__MUSA_ARCH__=310", f"-I{header_dir}",
                            f"-I{include_root()}", str(tmp_path / "checks.cc"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


def test_common_header_helpers_are_exact_for_negative_operands_and_lane_wise_for_vectors(tmp_path, standin_dir):
    compile_and_run(COMMON_H_CHECKS, standin_dir, tmp_path)


def test_common_header_half_types_convert_through_float(tmp_path):
    sim = include_root() / "tl_templates" / "sim"
    if not (sim / "musa_fp16.h").is_file():
        pytest.skip("the simulator headers (src/tl_templates/sim/) are not present")
    compile_and_run(COMMON_H_HALF_CHECKS, sim, tmp_path)
