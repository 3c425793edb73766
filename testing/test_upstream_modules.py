"""Upstream TileLang's helper modules that scripts import besides the language: `tilelang.env` (the `env` object),
`tilelang.engine` (postproc callbacks, `lower`), `tilelang.intrinsics` (shared-tile swizzles),
`tilelang.transform.simplify_prim_func`, `tilelang.language.fp8`, `tilelang.language.dtypes._all_dtypes`,
`tilelang.rocm.target`, `tilelang.musa.target`, `tilelang.cuda.intrinsics.layout`, and `JITFunction.par_compile`."""

import importlib
import logging
import os

import pytest
import torch
import tvm
import tvm_ffi
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import poison, rand

MP31 = "musa -arch=mp_31"
MP22 = "musa -arch=mp_22"


def _add_one(n=256, dtype="float32"):
    @T.prim_func
    def add_one(x: T.Tensor((n,), dtype), y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                y[bx * 128 + i] = x[bx * 128 + i] + T.cast(1, dtype)

    return add_one


# -- tilelang.env


def test_env_object_reads_the_environment_and_forced_values_win(monkeypatch):
    from tilelang.env import env

    assert env is tilelang.env
    monkeypatch.delenv("TILELANG_PRINT_ON_COMPILATION", raising=False)
    assert env.TILELANG_PRINT_ON_COMPILATION == "1"
    monkeypatch.setenv("TILELANG_PRINT_ON_COMPILATION", "0")
    assert env.TILELANG_PRINT_ON_COMPILATION == "0" and not env.is_print_on_compilation_enabled()
    try:
        env.TILELANG_PRINT_ON_COMPILATION = "1"
        assert env.TILELANG_PRINT_ON_COMPILATION == "1" and env.PRINT_ON_COMPILATION.flag()
    finally:
        env.TILELANG_PRINT_ON_COMPILATION = None
    assert env.TILELANG_PRINT_ON_COMPILATION == "0"


def test_forced_cache_dir_moves_the_kernel_cache_and_the_tmp_dir(tmp_path, monkeypatch):
    from tilelang.env import env
    from tilelang_musa.jit import cache

    monkeypatch.delenv("TILELANG_TMP_DIR", raising=False)
    try:
        env.TILELANG_CACHE_DIR = str(tmp_path / "c")
        assert cache.cache_dir() == tmp_path / "c"
        assert env.TILELANG_TMP_DIR == os.path.join(str(tmp_path / "c"), "tmp")
    finally:
        env.TILELANG_CACHE_DIR = None
    assert cache.cache_dir() != tmp_path / "c"


def test_uncached_kernels_build_in_the_tmp_dir_and_compiles_are_logged(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("TILELANG_TMP_DIR", str(tmp_path / "t"))
    monkeypatch.setattr(logging.getLogger("tilelang"), "propagate", True)  # to caplog's root handler
    tilelang.disable_cache()
    try:
        with caplog.at_level(logging.INFO, logger="tilelang"):
            kernel = tilelang.compile(_add_one(), out_idx=-1, target=MP31)
    finally:
        tilelang.enable_cache()
    assert kernel.directory.parent == tmp_path / "t"
    assert any("begins to compile kernel `add_one`" in r.getMessage() for r in caplog.records)


# -- tilelang.engine


@pytest.fixture
def musa_postproc():
    """Registers the callback it is given for the test only: none stays behind, since any registered callback makes
    the simulator build the kernels as printed instead of their checked print (the sanitizer tests of the same
    worker would then see no error)."""
    from tilelang.engine.callback import register_musa_postproc

    yield register_musa_postproc
    tvm_ffi.remove_global_func("tilelang_callback_musa_postproc")


@pytest.mark.parametrize("target", [MP31, MP22])
def test_musa_postproc_callback_rewrites_the_source_that_is_built_and_shown(target, musa_postproc):
    calls = []

    def mark(code, tgt):
        calls.append(str(tgt.attrs["arch"]))
        return "// POSTPROC_MARK\n" + code.replace("1.000000e+00f", "2.000000e+00f")

    musa_postproc(mark)
    tilelang.disable_cache()
    try:
        kernel = tilelang.compile(_add_one(), out_idx=-1, target=target)
    finally:
        tilelang.enable_cache()
    source = kernel.get_kernel_source()
    assert calls == [target.split("=")[1]] and source.startswith("// POSTPROC_MARK\n")
    assert "2.000000e+00f" in source and "call_packed" not in source  # the host wrapper is not its business
    x = rand((256,), torch.float32)
    torch.testing.assert_close(kernel(x), x + 2)  # what runs is the callback's output


def test_postproc_decorators_and_the_ones_for_other_languages():
    from tilelang.engine.callback import register_hip_postproc_callback, register_musa_postproc_callback

    @register_musa_postproc_callback(override=True)
    def keep(code, _):
        return code

    assert tvm_ffi.get_global_func("tilelang_callback_musa_postproc") is not None
    tvm_ffi.remove_global_func("tilelang_callback_musa_postproc")  # see the musa_postproc fixture
    with pytest.raises(tilelang.UnsupportedError, match="no HIP code"):
        @register_hip_postproc_callback
        def hip(code, _):
            return code


@pytest.mark.parametrize("target", [MP31, MP22])
def test_lower_gives_the_kernel_source_and_device_module_without_a_build(target):
    artifact = tilelang.lower(_add_one(), target=target)
    assert artifact is not None and artifact.rt_mod is None
    signature = [line for line in artifact.kernel_source.splitlines() if "__global__" in line]
    assert len(signature) == 1 and "add_one_kernel(float* __restrict__ x, float* __restrict__ y)" in signature[0]
    assert "call_packed" in artifact.host_source and "call_packed" not in artifact.kernel_source
    assert [gv.name_hint for gv in artifact.device_mod.functions] == ["add_one_kernel"]
    assert [p.name for p in artifact.params] == ["x", "y"]
    engine = importlib.import_module("tilelang.engine")  # imported here: the attribute exists only once it is
    assert engine.lower is tilelang.lower


# -- tilelang.intrinsics


def test_get_swizzle_layout_xors_16_byte_vectors_with_the_row():
    from tilelang.intrinsics import get_swizzle_layout

    # float16, 64-element rows (128 bytes): 8 vectors of 8 elements, XORed with row % 8.
    assert get_swizzle_layout(3, 9, 64, "float16") == (0, 3, (1 ^ 3) * 8 + 1)
    # 32-element rows (64 bytes): 4 vectors, two rows a phase.
    assert get_swizzle_layout(5, 0, 32, "float16") == (0, 5, (0 ^ 2) * 8)
    # wider than 128 bytes: column tiles of 128 bytes.
    assert get_swizzle_layout(1, 70, 128, "float16") == (1, 1, (0 ^ 1) * 8 + 6)
    with pytest.raises(ValueError, match="multiple of 32 bytes"):
        get_swizzle_layout(0, 0, 4, "float16")


@pytest.mark.parametrize("target", [MP31, MP22])
def test_mma_swizzle_layout_on_a_shared_tile_keeps_the_values(target):
    from tilelang.intrinsics import make_mma_swizzle_layout

    @T.prim_func
    def through_shared(a: T.Tensor((32, 64), "float16"), b: T.Tensor((32, 64), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((32, 64), "float16")
            T.annotate_layout({tile: make_mma_swizzle_layout(tile)})
            T.copy(a, tile)
            for i, j in T.Parallel(32, 64):
                b[i, j] = tile[i, j] * T.float16(2)

    kernel = tilelang.compile(through_shared, target=target)
    assert "^" in kernel.get_kernel_source()  # the XOR of the swizzle
    a, b = rand((32, 64), torch.float16), poison((32, 64), torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2)


def test_mma_swizzle_layout_is_the_identity_for_short_rows():
    from tilelang.intrinsics import make_mma_swizzle_layout

    class Tile:
        shape, dtype = (16, 16), "float16"  # 32-byte rows

    layout = make_mma_swizzle_layout(Tile())
    assert [int(v) for v in layout.map_forward_index([3, 5])] == [3, 5]


# -- tilelang.transform.simplify_prim_func, language helpers, rocm


def test_simplify_prim_func_folds_the_programs_arithmetic():
    from tilelang.transform import simplify_prim_func

    @simplify_prim_func
    def build():
        @T.prim_func
        def f(x: T.Tensor((8,), "int32")):
            with T.Kernel(1, threads=8) as _:
                for i in T.serial(8):
                    x[i] = i * 4 // 4 + (2 + 3)

        return f

    func = build()
    assert isinstance(func, tirx.PrimFunc)
    script = func.script()
    assert "i * 4 // 4" not in script and "i + 5" in script


def test_determine_fp8_type_is_the_ocp_formats():
    from tilelang.language.fp8 import determine_fp8_type, determine_torch_fp8_type

    assert determine_fp8_type() == T.float8_e4m3fn and determine_fp8_type("e5m2") == T.float8_e5m2
    assert determine_torch_fp8_type("e5m2") is torch.float8_e5m2
    with pytest.raises(ValueError):
        determine_fp8_type("e3m4")
    from tilelang.utils import determine_fp8_type as from_utils  # upstream's tilelibrary tests import it there

    assert from_utils() == determine_fp8_type() and from_utils("e5m2") == determine_fp8_type("e5m2")


def test_all_dtypes_names_dtypes_of_T_that_are_tvm_datatypes():
    from tilelang.language.dtypes import _all_dtypes

    for name in _all_dtypes:
        assert isinstance(getattr(T, name), tvm.DataType), name
    assert (T.short, T.long, T.uint) == ("int16", "int64", "uint32") and T.float16x4.lanes == 4


def test_rocm_is_never_available():
    from tilelang.rocm.target import check_hip_availability

    assert check_hip_availability() is False


def test_musa_target_predicates_name_the_arch(monkeypatch):
    from tilelang.musa.target import check_musa_availability, target_is_musa, target_is_ph1, target_is_qy2

    assert target_is_qy2(MP22) and not target_is_ph1(MP22)
    assert target_is_ph1(tvm.target.Target({"kind": "musa", "arch": "mp_31"})) and not target_is_qy2(MP31)
    assert target_is_musa("musa") and not target_is_musa("cuda")
    monkeypatch.setenv("TILELANG_SIM_ARCH", "mp_22")  # a bare "musa" is the device at hand
    assert target_is_qy2("musa")
    assert check_musa_availability() is False  # no torch_musa here


def test_swizzle_helpers_at_upstreams_cuda_module_paths():
    from tilelang.cuda.intrinsics import get_swizzle_layout
    from tilelang.cuda.intrinsics.layout.mma_layout import make_mma_swizzle_layout
    from tilelang.cuda.intrinsics.layout.utils import get_swizzle_layout as from_utils
    from tilelang.intrinsics import get_swizzle_layout as portable, make_mma_swizzle_layout as portable_mma

    assert get_swizzle_layout is from_utils is portable and make_mma_swizzle_layout is portable_mma


def test_engine_lower_is_tilelang_lower():
    from tilelang.engine.lower import lower

    assert lower is tilelang.lower


# -- par_compile


def test_par_compile_returns_working_kernels_in_config_order():
    @tilelang.jit(out_idx=-1, target=MP31)
    def scale(n, factor):
        @T.prim_func
        def main(x: T.Tensor((n,), "float32"), y: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(n):
                    y[i] = x[i] * factor

        return main

    configs = [(128, 2.0), {"n": 256, "factor": 3.0}]
    kernels = scale.par_compile(configs, num_workers=2)
    for (n, factor), kernel in zip([(128, 2.0), (256, 3.0)], kernels):
        x = rand((n,), torch.float32)
        torch.testing.assert_close(kernel(x), x * factor)
    with pytest.raises(ValueError, match="tuple or a dict"):
        scale.par_compile([128])


def test_buffer_map_gives_each_tensor_parameters_buffer():
    n = T.dynamic("n")

    @T.prim_func
    def f(a: T.Tensor((n, 8), "float16"), table: T.Tensor([4], T.ptr), k: T.int32):
        with T.Kernel(1, threads=32):
            a[0, 0] = T.float16(k)

    buffers = f.buffer_map
    a, table, k = f.params[:3]  # then the T.dynamic size n, a scalar parameter
    assert k not in buffers and buffers[table].dtype == "int64" and list(buffers[table].shape) == [4]
    assert buffers[a].dtype == T.float16 and buffers[a].shape[1] == 8 and buffers[a].shape[0].name == "n"


def test_datatype_is_tvms():
    from tilelang import DataType

    assert DataType is tvm.DataType and DataType("float16").bits == 16


def test_cache_views_forget_their_backends_kernels_only():
    from tilelang.cache import _dispatch_map, cached

    kernel = cached(_add_one(128), out_idx=-1, target=MP31, execution_backend="sim")
    assert kernel is tilelang.compile(_add_one(128), out_idx=-1, target=MP31, execution_backend="sim")
    assert len(_dispatch_map["sim"]._memory_cache) >= 1
    _dispatch_map["tvm_ffi"]._memory_cache.clear()  # the device launcher's: the simulator's kernels stay
    assert len(_dispatch_map["sim"]._memory_cache) >= 1
    _dispatch_map["sim"]._memory_cache.clear()
    assert len(_dispatch_map["sim"]._memory_cache) == 0
    again = tilelang.compile(_add_one(128), out_idx=-1, target=MP31, execution_backend="sim")  # from disk
    assert again is not kernel and again.directory == kernel.directory


def test_expressions_answer_dtype_as_older_tir_did():
    # upstream's dequantize helpers: `assert val.dtype == T.uint8`, `tirx.const(..., val.dtype)`
    from tvm import tirx

    byte = tirx.Var("byte", "uint8")
    assert byte.dtype == T.uint8 and (byte >> 4).dtype == "uint8"
    assert tirx.IntImm("int8", 3).dtype == T.int8
    assert tirx.Cast("float16", byte).dtype == T.float16
    assert tirx.PrimExpr is tirx.Expr
