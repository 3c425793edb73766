"""The TileLang language namespace, used as `import tilelang.language as T`."""

from .accelerated import mul_half_float_to_bfloat16_x4
from .annotate import (
    annotate_compile_flags, annotate_layout, annotate_min_blocks_per_sm, annotate_pass_configs, annotate_restrict_buffers,
    annotate_safe_value,
)
from .annotate import annotate_l2_hit_ratio
from .math import align_up
from .allocate import alloc_buffer, alloc_fragment, alloc_local, alloc_shared, alloc_var, const, dynamic, empty, symbolic
from .dp4a import dp4a
from .atomic import (
    atomic_add, atomic_addx2, atomic_addx4, atomic_load, atomic_max, atomic_min, atomic_or, atomic_store,
)
from .extern import access_ptr, import_source, tvm_access_ptr, type_annotation
from .builtin import named_barrier_arrive, sync_grid, sync_threads, thread_return, tvm_storage_sync, use_swizzle, wait_sqmma, wait_wgmma
from .barrier import (
    alloc_barrier, barrier_arrive, barrier_wait, cp_async_barrier_noinc, mbarrier_arrive, mbarrier_arrive_expect_tx,
    mbarrier_expect_tx, mbarrier_wait_parity, ptx_arrive_barrier, ptx_arrive_barrier_expect_tx,
)
from .async_copy import async_copy, lma_wait, make_robust_desc, ptx_commit_group, ptx_cp_async, ptx_wait_group
from .register_alloc import (annotate_consumer_reg_alloc, annotate_producer_reg_dealloc, dec_max_nreg,
                             disable_warp_group_reg_alloc, inc_max_nreg, no_set_max_nreg, set_max_nreg)
from .pdl import pdl_sync, pdl_trigger
from .reducer import alloc_reducer, finalize_reducer, reducer_init, reducer_update
from .view import reshape, view
from .warp_specialize import ws
from .warpgroup import warpgroup_commit_batch, warpgroup_wait
from .fences import fence_proxy_async, warpgroup_fence_operand
from .warp import (
    get_lane_idx, get_warp_group_idx, get_warp_idx, get_warp_idx_sync, shfl_down, shfl_sync, shfl_up, shfl_xor,
    shuffle_elect, sync_warp, tvm_warp_shuffle, tvm_warp_shuffle_down, tvm_warp_shuffle_up, warp_reduce_bitand,
    warp_reduce_bitor, warp_reduce_max, warp_reduce_min, warp_reduce_sum,
)
from .copy import copy
from .tma import tma_copy, tma_store_arrive, tma_store_wait
from .transpose import transpose
from .im2col import c2d_im2col, im2col
from .logical import all_of, any_of
from .script_conditions import And, Else, If, Not, Or, Then
from .vote import (
    __ffs, __fns, activemask, all_sync, any_sync, ballot, ballot_sync, match_all_sync, match_any_sync, syncthreads_and,
    syncthreads_count, syncthreads_or,
)
from .pointer import alloc_global, make_tensor
from .global_access import __ldg, ldg32, ldg64, ldg128, ldg256, lds32, lds64, lds128, stg32, stg64, stg128, stg256, sts32, sts64, sts128
from .tir import (
    Broadcast, Let, PrimExpr, Ramp, Select, Shuffle, Var, address_of, assume, attr, call_extern, call_intrin, call_pure_extern, comm_reducer, evaluate, func_attr,
    extract_lane, grid, handle, let, match_buffer, reinterpret, tvm_thread_allreduce,
)
from .debug import device_assert, print
from .random import rng_init, rng_rand, rng_rand_float
from .scan import cummax, cumsum
from .fastmath import (
    __cos, __exp, __exp10, __log, __log2, __log10, __sin, __tan, fast_rcp, ieee_add, ieee_fdiv, ieee_fmaf, ieee_frcp, ieee_frsqrt,
    ieee_fsqrt, ieee_mul, ieee_sub,
)
from .fill import clear, fill
from .gemm import gemm, wgmma_gemm, wgmma_mma
from .gemm_sp import gemm_sp
from .dtypes import (
    VECTOR_DTYPES, DType, bfloat16, boolean, double, dtype, float, float4_e2m1fn, float4_e2m1fnx2, float8_e4m3, float8_e4m3fn,
    float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, float16, float32, float64, half, int, int2, int4,
    int8, int16, int32, int64, long, ptr, short,
    tfloat32, uint, uint2, uint4, uint8, uint16, uint32, uint64,
)
from .kernel import (
    Kernel, env_thread, get_block_binding, get_block_bindings, get_thread_binding, get_thread_bindings, launch_thread,
    thread_binding,
)
from .loop import Parallel, Pipelined, Serial, Unroll, While, parallel, serial, unroll, vectorized
from .runtime import loop_break
from .utils import index_to_coordinates
from .persistent import Persistent
from .tile_schedule import PersistentTileScheduler
from .packed import abs2, add2, fma2, max2, min2, mul2, sub2
from .math import (
    Cast, abs, acos, acosh, asin, asinh, atan, atan2, atanh, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, cast,
    ceil, ceildiv, clamp, clz, copysign, cos, cosh, erf, exp, exp2, exp10, floor, floordiv, floormod, fmod, hypot,
    if_then_else, infinity, isfinite, isinf, isnan, ldexp, log, log1p, log2, log10, max, max_value, min, min_value,
    nearbyint, nextafter, ninf, popcount, pow, round, rsqrt, shift_left, shift_right, sigmoid, sin, sinh, sqrt, tan,
    tanh, trunc, truncdiv, truncmod,
)
from .prim_func import Ref, macro, prim_func
from ..layout import Fragment, GemmWarpPolicy, Layout
from .proxy import Buffer, FragmentBuffer, LocalBuffer, SharedBuffer, StridedTensor, Tensor
from .reduce import (
    reduce, reduce_absmax, reduce_abssum, reduce_bitand, reduce_bitor, reduce_bitxor, reduce_max, reduce_min, reduce_sum,
)

bool = boolean  # noqa: A001 - T.bool, as upstream
globals().update(VECTOR_DTYPES)  # T.float32x4, ...

from .int_operands import install as _install_int_operands  # noqa: E402

_install_int_operands()  # `x & 0xFFFFFFFF` on a uint32 / int64 expression (see int_operands.py)
from .buffer_map import install as _install_buffer_map  # noqa: E402

_install_buffer_map()  # `func.buffer_map[func.params[0]]`, as upstream scripts read parameters (see buffer_map.py)

from .unsupported import UNSUPPORTED  # noqa: E402

globals().update(UNSUPPORTED)  # T.alloc_tmem, T.alloc_wgmma_desc, ...: clear errors naming the construct

__all__ = [
    "align_up", "annotate_l2_hit_ratio", "And", "Else", "If", "Not", "Or", "Then",
    "__cos", "__exp", "__exp10", "__ffs", "fast_rcp", "__fns", "__log", "__log10", "__log2", "__sin", "__tan", "abs", "activemask",
    "__ldg", "add2", "abs2", "fma2", "max2", "min2", "mul2", "sub2", "Broadcast", "Ramp", "Shuffle", "address_of", "all_of", "all_sync", "alloc_buffer", "alloc_fragment", "alloc_global", "alloc_local", "alloc_reducer",
    "alloc_shared", "alloc_var", "annotate_compile_flags", "annotate_layout", "annotate_min_blocks_per_sm",
    "annotate_pass_configs", "annotate_restrict_buffers", "annotate_safe_value", "any_of", "any_sync", "assume", "atan",
    "disable_warp_group_reg_alloc", "dp4a", "atomic_add", "atomic_addx2", "atomic_addx4", "atomic_load", "atomic_max", "atomic_min", "atomic_or", "atomic_store", "attr",
    "ballot", "ballot_sync", "bfloat16", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "bool", "boolean",
    "Buffer", "call_extern", "call_intrin", "call_pure_extern", "cast", "Cast", "ceil", "ceildiv", "clamp", "clear", "comm_reducer",
    "const", "copy", "cos", "cosh", "cummax", "cumsum", "device_assert", "double", "DType", "dtype", "dynamic", "empty",
    "env_thread",
    "erf", "evaluate", "exp", "exp10", "exp2", "fill", "finalize_reducer", "float", "float16", "float32",
    "float4_e2m1fn", "float4_e2m1fnx2", "float64", "float8_e4m3", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float8_e8m0fnu", "floor", "floordiv",
    "floormod", "fmod", "func_attr",
    "Fragment", "FragmentBuffer", "gemm", "gemm_sp", "wgmma_gemm", "wgmma_mma", "GemmWarpPolicy", "get_block_binding", "get_block_bindings", "get_lane_idx",
    "get_thread_binding", "get_thread_bindings", "get_warp_group_idx", "get_warp_idx", "get_warp_idx_sync", "grid", "half", "handle",
    "ieee_add", "ieee_fdiv", "ieee_fmaf", "ieee_frcp", "ieee_frsqrt", "ieee_fsqrt", "ieee_mul", "ieee_sub",
    "if_then_else", "infinity", "int", "int16", "int2", "int32", "int4", "int64", "int8", "isfinite", "isinf", "isnan", "Kernel",
    "launch_thread", "Layout", "ldg128", "ldg256", "ldg32", "ldg64", "lds128", "lds32", "lds64", "Let", "let", "LocalBuffer", "log", "log10",
    "log1p", "log2", "macro", "make_tensor", "match_all_sync", "match_any_sync", "match_buffer", "max", "max_value",
    "min",
    "min_value", "mul_half_float_to_bfloat16_x4", "nearbyint",
    "ninf", "no_set_max_nreg", "pdl_sync", "pdl_trigger", "set_max_nreg", "inc_max_nreg", "dec_max_nreg", "annotate_producer_reg_dealloc",
    "annotate_consumer_reg_alloc", "Parallel", "parallel", "Persistent", "PersistentTileScheduler", "Ref", "Pipelined", "pow", "prim_func", "PrimExpr", "print", "ptr", "reduce", "reduce_absmax",
    "reduce_abssum", "reduce_bitand", "reduce_bitor", "reduce_bitxor", "reduce_max", "reduce_min", "reduce_sum",
    "reducer_init", "reducer_update", "reinterpret", "extract_lane", "reshape", "rng_init", "rng_rand", "rng_rand_float", "round",
    "rsqrt", "Select", "serial", "Serial", "Unroll", "loop_break", "SharedBuffer", "short", "long", "uint",
    "shfl_down", "shfl_sync", "shfl_up", "shfl_xor", "tvm_warp_shuffle", "tvm_warp_shuffle_down",
    "tvm_warp_shuffle_up", "shift_left", "shift_right", "shuffle_elect", "sigmoid", "sin",
    "sinh", "sqrt", "import_source", "access_ptr", "tvm_access_ptr", "type_annotation", "stg128", "stg256", "stg32", "stg64", "sts128", "sts32", "sts64", "StridedTensor", "symbolic", "sync_threads", "sync_grid", "named_barrier_arrive", "sync_warp",
    "syncthreads_and", "syncthreads_count", "syncthreads_or", "tan", "tanh", "Tensor", "tfloat32", "thread_binding",
    "thread_return", "transpose", "tvm_storage_sync", "im2col", "c2d_im2col", "index_to_coordinates", "trunc", "tvm_thread_allreduce", "uint16", "uint2", "uint32", "uint4", "uint64", "uint8", "unroll",
    "tma_copy", "tma_store_arrive", "tma_store_wait",
    "use_swizzle", "Var", "vectorized", "view", "While",
    "acos", "acosh", "asin", "asinh", "atan2", "atanh", "copysign", "hypot", "ldexp", "nextafter", "truncdiv",
    "truncmod", "popcount", "clz",
    "alloc_barrier", "async_copy", "barrier_arrive", "barrier_wait", "cp_async_barrier_noinc", "lma_wait",
    "make_robust_desc", "mbarrier_arrive", "mbarrier_arrive_expect_tx", "mbarrier_expect_tx", "mbarrier_wait_parity",
    "ptx_arrive_barrier", "ptx_arrive_barrier_expect_tx", "ptx_commit_group", "ptx_cp_async", "ptx_wait_group", "wait_sqmma", "wait_wgmma", "warp_reduce_bitand", "warp_reduce_bitor",
    "warp_reduce_max", "warp_reduce_min", "warp_reduce_sum", "warpgroup_commit_batch", "warpgroup_wait", "ws",
    "fence_proxy_async", "warpgroup_fence_operand",
    *UNSUPPORTED, *VECTOR_DTYPES,
]

# `T` holds the language's names only: the modules that implement them stay importable by their full names
# (tilelang_musa.language.builder) but are not names a kernel can write.
import types as _types  # noqa: E402

for _name in [n for n, v in globals().items() if isinstance(v, _types.ModuleType) and not n.startswith("_")]:
    del globals()[_name]
del _name, _types, UNSUPPORTED, VECTOR_DTYPES, _install_int_operands, _install_buffer_map

# Upstream's submodule paths (`T.builtin.sync_threads()`): namespaces over the flat names, not modules.
import sys as _sys  # noqa: E402

from .module_paths import install as _install_module_paths  # noqa: E402

_install_module_paths(globals(), _sys.modules[__name__])
del _sys, _install_module_paths, module_paths  # the import set the implementation module as an attribute
