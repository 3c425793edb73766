"""The Cython launcher, against tiny kernel libraries built with the host C++ compiler.

Each library exports the uniform entry `int call_packed(void** args, int num_args, void* stream)` and
`get_last_error()`, as a generated kernel library does, and runs a plain CPU loop. The libraries also record the
stream they were given (`last_stream()`), and reject a wrong argument count, so packing errors fail loudly.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import shutil
import subprocess
import threading

import pytest
import torch

from tilelang_musa.launcher import KernelLaunchError, Launcher, ParamSpec

CXX = os.environ.get("CXX", "g++")

_PROLOGUE = r"""
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
static std::string g_error;
static void* g_stream = reinterpret_cast<void*>(1);
extern "C" const char* get_last_error(void) { return g_error.c_str(); }
extern "C" void* last_stream(void) { return g_stream; }
#define EXPECT_ARGS(n)                                                            \
  g_stream = stream;                                                              \
  if (num_args != (n)) {                                                          \
    g_error = "expected " #n " args, got " + std::to_string(num_args);            \
    return 2;                                                                     \
  }
#define ARG(type, i) (*static_cast<type*>(args[i]))
"""

KERNELS = {
    # A, B, C: float32[N]; N: int32. C = A + B.
    "add": """
extern "C" int call_packed(void** args, int num_args, void* stream) {
  EXPECT_ARGS(4)
  float* A = ARG(float*, 0); float* B = ARG(float*, 1); float* C = ARG(float*, 2);
  for (int32_t i = 0; i < ARG(int32_t, 3); ++i) C[i] = A[i] + B[i];
  return 0;
}""",
    # X: float32[N]; S, D: float32[N] outputs; N: int32 between them. S = X + 1, D = 2 X.
    "two_outputs": """
extern "C" int call_packed(void** args, int num_args, void* stream) {
  EXPECT_ARGS(4)
  float* X = ARG(float*, 0); float* S = ARG(float*, 1); float* D = ARG(float*, 3);
  for (int32_t i = 0; i < ARG(int32_t, 2); ++i) { S[i] = X[i] + 1.0f; D[i] = 2.0f * X[i]; }
  return 0;
}""",
    # N: int32 (caller-given); Y: int32[N] output. Y[i] = i.
    "iota": """
extern "C" int call_packed(void** args, int num_args, void* stream) {
  EXPECT_ARGS(2)
  int32_t* Y = ARG(int32_t*, 1);
  for (int32_t i = 0; i < ARG(int32_t, 0); ++i) Y[i] = i;
  return 0;
}""",
    # A: float32[M, N] with row stride sA; Out: float32[M]; M, N, sA: int32. Out[m] = sum_n A[m, n].
    "rowsum": """
extern "C" int call_packed(void** args, int num_args, void* stream) {
  EXPECT_ARGS(5)
  const float* A = ARG(float*, 0); float* Out = ARG(float*, 1);
  int32_t M = ARG(int32_t, 2), N = ARG(int32_t, 3), sA = ARG(int32_t, 4);
  for (int32_t m = 0; m < M; ++m) {
    float acc = 0.0f;
    for (int32_t n = 0; n < N; ++n) acc += A[m * sA + n];
    Out[m] = acc;
  }
  return 0;
}""",
    # X: 16-bit float[M, N]; Y: same, output; M, N: int64. Y = -X, by flipping the sign bit (exact for fp16, bf16).
    "negate16": """
extern "C" int call_packed(void** args, int num_args, void* stream) {
  EXPECT_ARGS(4)
  const uint16_t* X = ARG(uint16_t*, 0); uint16_t* Y = ARG(uint16_t*, 1);
  for (int64_t i = 0; i < ARG(int64_t, 2) * ARG(int64_t, 3); ++i) Y[i] = X[i] ^ 0x8000u;
  return 0;
}""",
    # Out: float64[8]; then one scalar of each C type, written back to Out as doubles (16-bit floats as raw bits).
    "scalars": """
extern "C" int call_packed(void** args, int num_args, void* stream) {
  EXPECT_ARGS(9)
  double* Out = ARG(double*, 0);
  Out[0] = ARG(bool, 1) ? 1.0 : 0.0;
  Out[1] = ARG(int8_t, 2);
  Out[2] = ARG(uint32_t, 3);
  Out[3] = static_cast<double>(ARG(int64_t, 4));
  Out[4] = ARG(float, 5);
  Out[5] = ARG(double, 6);
  Out[6] = ARG(uint16_t, 7);
  Out[7] = ARG(uint16_t, 8);
  return 0;
}""",
    "fail": """
extern "C" int call_packed(void** args, int num_args, void* stream) {
  g_error = "simulated launch failure: grid dim 0 is zero";
  return -1;
}""",
}


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    """name -> path of the built library, for every kernel in KERNELS (compiled once per test module)."""
    if shutil.which(CXX) is None:
        pytest.skip(f"no host C++ compiler ({CXX}) to build the test kernels")
    root = tmp_path_factory.mktemp("kernels")
    paths = {}
    for name, body in KERNELS.items():
        src = root / f"{name}.cc"
        src.write_text(_PROLOGUE + body)
        paths[name] = str(root / f"lib{name}.so")
        subprocess.run([CXX, "-std=c++17", "-O1", "-shared", "-fPIC", str(src), "-o", paths[name]], check=True)
    return paths


def last_stream(lib_path):
    fn = ctypes.CDLL(lib_path).last_stream
    fn.restype = ctypes.c_void_p
    return fn()


def tensor(name, dtype, shape, **kw):
    return ParamSpec(name, "tensor", dtype, shape, **kw)


def scalar(name, dtype):
    return ParamSpec(name, "scalar", dtype)


def add_params(c_is_output):
    return [tensor("A", "float32", ("N",)), tensor("B", "float32", ("N",)),
            tensor("C", "float32", ("N",), is_output=c_is_output), scalar("N", "int32")]


@pytest.fixture
def add_passed(libs):
    """add with every parameter passed by the caller: add(A, B, C, N)."""
    return Launcher(libs["add"], add_params(False), "cpu", kernel_name="add")


@pytest.fixture
def add_alloc(libs):
    """add with C allocated and N taken from the tensors: C = add(A, B)."""
    return Launcher(libs["add"], add_params(True), "cpu", kernel_name="add", scalar_bindings=["N"])


@pytest.fixture
def rowsum(libs):
    params = [tensor("A", "float32", ("M", "N"), strides=("sA", 1)), tensor("Out", "float32", ("M",), is_output=True),
              scalar("M", "int32"), scalar("N", "int32"), scalar("sA", "int32")]
    return Launcher(libs["rowsum"], params, "cpu", kernel_name="rowsum", scalar_bindings=("M", "N", "sA"))


def rand(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# ---- results ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 37, 1000])
def test_add_writes_caller_passed_output_and_passes_null_stream(add_passed, libs, n):
    a, b = rand(n, seed=0), rand(n, seed=1)
    c = torch.full((n,), float("nan"))
    assert add_passed(a, b, c, n) is None
    torch.testing.assert_close(c, a + b)
    assert last_stream(libs["add"]) is None


@pytest.mark.parametrize("n", [0, 5, 513])
def test_output_allocated_with_symbolic_dim_and_bound_scalar(add_alloc, n):
    a, b = rand(n, seed=2), rand(n, seed=3)
    c = add_alloc(a, b)
    assert c.shape == (n,) and c.dtype == torch.float32 and c.device.type == "cpu"
    torch.testing.assert_close(c, a + b)


def test_several_outputs_return_a_list_in_parameter_order(libs):
    params = [tensor("X", "float32", ("N",)), tensor("S", "float32", ("N",), is_output=True),
              scalar("N", "int32"), tensor("D", "float32", ("N",), is_output=True)]
    launcher = Launcher(libs["two_outputs"], params, "cpu", kernel_name="two_outputs", scalar_bindings=["N"])
    x = rand(23, seed=4)
    outputs = launcher(x)
    assert isinstance(outputs, list)  # as upstream's adapters (v0.1.13 and main) return them
    s, d = outputs
    torch.testing.assert_close(s, x + 1)
    torch.testing.assert_close(d, 2 * x)


def test_output_sized_by_caller_scalar(libs):
    launcher = Launcher(libs["iota"], [scalar("N", "int32"), tensor("Y", "int32", ("N",), is_output=True)], "cpu")
    assert torch.equal(launcher(11), torch.arange(11, dtype=torch.int32))


def test_negative_output_size_from_a_scalar_is_named(libs):
    launcher = Launcher(libs["iota"], [scalar("N", "int32"), tensor("Y", "int32", ("N",), is_output=True)], "cpu")
    with pytest.raises(ValueError, match=r"Y: Tensor\[\(N,\), int32\] \(output\) would have dim 0 = `N` = -3 "
                                         r"\(N = -3\); sizes cannot be negative"):
        launcher(-3)


def test_strided_input_binds_its_stride_symbol(rowsum):
    base = rand(6, 64, seed=5)
    view = base[:, 3:20]  # strides (64, 1): not contiguous, but matches strides=("sA", 1)
    assert rowsum.bind_shapes(view) == {"M": 6, "N": 17, "sA": 64}
    torch.testing.assert_close(rowsum(view), view.sum(dim=1))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_float_tensors(libs, dtype):
    params = [tensor("X", dtype, ("M", "N")), tensor("Y", dtype, ("M", "N"), is_output=True),
              scalar("M", "int64"), scalar("N", "int64")]
    launcher = Launcher(libs["negate16"], params, "cpu", kernel_name="negate16", scalar_bindings=["M", "N"])
    x = rand(7, 9, seed=6, dtype=getattr(torch, dtype))
    y = launcher(x)
    assert y.dtype == x.dtype
    assert torch.equal(y, -x)


def test_scalars_are_packed_as_their_c_types(libs):
    names = [("flag", "bool"), ("i8", "int8"), ("u32", "uint32"), ("i64", "int64"), ("f32", "float32"),
             ("f64", "float64"), ("h", "float16"), ("bf", "bfloat16")]
    params = [tensor("Out", "float64", (8,))] + [scalar(n, t) for n, t in names]
    launcher = Launcher(libs["scalars"], params, "cpu", kernel_name="scalars")
    out = torch.full((8,), float("nan"), dtype=torch.float64)
    launcher(out, True, -128, 2**32 - 1, -(2**40), 0.1, 0.1, 1.5, -2.75)
    bits = [torch.tensor(v, dtype=t).view(torch.int16).item() & 0xFFFF
            for v, t in ((1.5, torch.float16), (-2.75, torch.bfloat16))]
    expected = [1.0, -128.0, 2.0**32 - 1, -(2.0**40), float(torch.tensor(0.1, dtype=torch.float32)), 0.1] + bits
    assert out.tolist() == expected


def test_concurrent_calls_do_not_share_argument_storage(add_alloc):
    inputs = [(rand(300 + i, seed=10 + i), rand(300 + i, seed=20 + i)) for i in range(4)]
    failures = []

    def worker(a, b):
        for _ in range(25):
            if not torch.equal(add_alloc(a, b), a + b):
                failures.append(a.shape)

    threads = [threading.Thread(target=worker, args=ab) for ab in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_launcher_pickles_by_its_spec(add_alloc):
    clone = pickle.loads(pickle.dumps(add_alloc))
    assert clone.params == add_alloc.params and clone.arg_names == ("A", "B")
    a, b = rand(9, seed=7), rand(9, seed=8)
    torch.testing.assert_close(clone(a, b), a + b)


# ---- argument errors ----------------------------------------------------------------------------------------


def test_wrong_argument_count_names_kernel_and_parameters(add_passed, add_alloc):
    with pytest.raises(TypeError, match=r"kernel 'add' takes 4 argument\(s\) \(A, B, C, N\), got 2"):
        add_passed(torch.zeros(3), torch.zeros(3))
    with pytest.raises(TypeError, match=r"\(A, B\), got 3; C is an output allocated and returned by the launcher"):
        add_alloc(torch.zeros(3), torch.zeros(3), torch.zeros(3))


def test_dtype_mismatch(add_alloc):
    with pytest.raises(TypeError, match=r"B expects dtype float32 \(torch.float32\); got torch.float64"):
        add_alloc(torch.zeros(3), torch.zeros(3, dtype=torch.float64))


def test_non_tensor_argument(add_alloc):
    with pytest.raises(TypeError, match=r"A: Tensor\[\(N,\), float32\] expects a torch.Tensor; got list"):
        add_alloc([1.0, 2.0], torch.zeros(2))


def test_rank_mismatch(add_alloc):
    with pytest.raises(ValueError, match=r"A: Tensor\[\(N,\), float32\] expects 1 dims; got 2 \(shape \(2, 3\)\)"):
        add_alloc(torch.zeros(2, 3), torch.zeros(6))


def test_static_dim_mismatch(libs):
    params = [tensor("A", "float32", (8,)), tensor("B", "float32", (8,)), tensor("C", "float32", (8,)),
              scalar("N", "int32")]
    launcher = Launcher(libs["add"], params, "cpu", kernel_name="add8")
    with pytest.raises(ValueError, match=r"kernel 'add8': B dim 0 must be 8; got 7"):
        launcher(torch.zeros(8), torch.zeros(7), torch.zeros(8), 8)


def test_symbol_conflict_between_tensors(add_alloc):
    with pytest.raises(ValueError, match=r"symbol N is 10 from A.shape\[0\] but 12 from B.shape\[0\]"):
        add_alloc(torch.zeros(10), torch.zeros(12))


def test_caller_scalar_must_agree_with_the_dim_it_names(add_passed):
    # Otherwise the kernel would run past the end of the tensors.
    with pytest.raises(ValueError, match=r"symbol N is 10 from A.shape\[0\] but 11 from the scalar argument N"):
        add_passed(torch.zeros(10), torch.zeros(10), torch.zeros(10), 11)


def test_simulator_rejects_non_cpu_tensors(add_alloc):
    with pytest.raises(ValueError, match=r"the simulator backend runs on CPU tensors; got a meta tensor for B"):
        add_alloc(torch.zeros(4), torch.zeros(4, device="meta"))


def test_musa_backend_rejects_cpu_tensors(libs):
    launcher = Launcher(libs["add"], add_params(True), "musa", kernel_name="add", scalar_bindings=["N"])
    with pytest.raises(ValueError, match=r"the musa backend runs on MUSA tensors; got a cpu tensor for A"):
        launcher(torch.zeros(4), torch.zeros(4))


def test_non_contiguous_tensor_rejected(add_alloc):
    with pytest.raises(ValueError, match=r"A must be contiguous \(row-major\); got strides \(2,\)"):
        add_alloc(torch.zeros(8)[::2], torch.zeros(4))


def test_stride_mismatch_rejected(rowsum):
    with pytest.raises(ValueError, match=r"A stride of dim 1 must be 1; got 4 \(strides \(1, 4\)\)"):
        rowsum(torch.zeros(3, 4).t())


@pytest.mark.parametrize("value, error, message", [
    (2.5, TypeError, r"scalar N \(int32\) expects an int; got float 2.5"),
    ("3", TypeError, r"scalar N \(int32\) expects an int; got str '3'"),
    (True, TypeError, r"scalar N \(int32\) expects an int; got bool True"),
    (2**31, ValueError, r"scalar N = 2147483648 is out of range for int32 \[-2147483648, 2147483647\]"),
])
def test_scalar_type_and_range_checked(libs, value, error, message):
    launcher = Launcher(libs["iota"], [scalar("N", "int32"), tensor("Y", "int32", ("N",), is_output=True)], "cpu")
    with pytest.raises(error, match=message):
        launcher(value)


def test_float_and_bool_scalars_checked(libs):
    names = [("flag", "bool"), ("i8", "int8"), ("u32", "uint32"), ("i64", "int64"), ("f32", "float32"),
             ("f64", "float64"), ("h", "float16"), ("bf", "bfloat16")]
    launcher = Launcher(libs["scalars"], [tensor("Out", "float64", (8,))] + [scalar(n, t) for n, t in names], "cpu")
    out = torch.zeros(8, dtype=torch.float64)
    good = [True, 1, 1, 1, 1.0, 1.0, 1.0, 1.0]
    for index, bad, error, message in [
        (0, 1, TypeError, r"scalar flag \(bool\) expects a bool; got int 1"),
        (2, -1, ValueError, r"scalar u32 = -1 is out of range for uint32"),
        (4, "x", TypeError, r"scalar f32 \(float32\) expects a real number; got str"),
        (4, 1e39, ValueError, r"scalar f32 = 1e\+39 overflows float32"),
        (6, 70000.0, ValueError, r"scalar h = 70000.0 overflows float16"),
    ]:
        args = list(good)
        args[index] = bad
        with pytest.raises(error, match=message):
            launcher(out, *args)


def test_nonzero_return_raises_kernel_launch_error(libs):
    launcher = Launcher(libs["fail"], [tensor("A", "float32", (4,))], "cpu", kernel_name="broken")
    with pytest.raises(KernelLaunchError, match=r"kernel 'broken' failed \(call_packed returned -1\): "
                                                r"simulated launch failure: grid dim 0 is zero"):
        launcher(torch.zeros(4))
    assert issubclass(KernelLaunchError, RuntimeError)


# ---- construction errors ------------------------------------------------------------------------------------


def test_library_without_the_entry_points_is_rejected(tmp_path, libs):
    src = tmp_path / "partial.cc"
    src.write_text('extern "C" int call_packed(void** a, int n, void* s) { return 0; }\n')
    lib = tmp_path / "libpartial.so"
    subprocess.run([CXX, "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    with pytest.raises(OSError, match=r"does not export `const char\* get_last_error\(void\)` with C linkage"):
        Launcher(str(lib), [], "cpu")
    with pytest.raises(FileNotFoundError, match=r"kernel 'k': library .*missing.so does not exist"):
        Launcher(str(tmp_path / "missing.so"), [], "cpu", kernel_name="k")


def test_unresolvable_output_symbol_is_rejected(libs):
    params = [tensor("A", "float32", ("N",)), tensor("C", "float32", ("M",), is_output=True)]
    with pytest.raises(ValueError, match=r"output C: Tensor\[\(M,\), float32\] \(output\) uses M, which no input"):
        Launcher(libs["add"], params, "cpu")


def test_bad_scalar_bindings_are_rejected(libs):
    with pytest.raises(ValueError, match=r"scalar_bindings names 'K', which is not a scalar parameter"):
        Launcher(libs["add"], add_params(True), "cpu", scalar_bindings=["K"])
    params = [tensor("A", "float32", ("N",)), scalar("N", "float32")]
    with pytest.raises(ValueError, match=r"scalar_bindings names N, a float32 parameter"):
        Launcher(libs["add"], params, "cpu", scalar_bindings=["N"])
    params = [tensor("C", "float32", ("N",), is_output=True), scalar("N", "int32")]
    with pytest.raises(ValueError, match=r"no input tensor has a dim or stride named N"):
        Launcher(libs["add"], params, "cpu", scalar_bindings=["N"])


def test_unknown_device_is_rejected(libs):
    with pytest.raises(ValueError, match=r"device must be 'cpu' \(simulator\) or 'musa'; got 'cuda'"):
        Launcher(libs["add"], add_params(False), "cuda")


def test_invalid_param_specs_are_rejected():
    with pytest.raises(ValueError, match=r"parameter A: kind must be 'tensor', 'scalar' or 'pointer'"):
        ParamSpec("A", "vector", "float32")
    with pytest.raises(ValueError, match=r"tensor parameter A: no torch dtype corresponds to the TVM dtype 'int2'"):
        ParamSpec("A", "tensor", "int2", (4,))  # int4 / uint4: packed bytes, as float4_e2m1fn
    with pytest.raises(ValueError, match=r"scalar parameter N cannot be an output"):
        ParamSpec("N", "scalar", "int32", is_output=True)
    with pytest.raises(ValueError, match=r"parameter A: 1 strides for 2 dims"):
        ParamSpec("A", "tensor", "float32", ("M", "N"), strides=(1,))
    with pytest.raises(ValueError, match=r"parameter A: shape\[1\] = 'N-1' is not a symbol name"):
        ParamSpec("A", "tensor", "float32", ("M", "N-1"))
