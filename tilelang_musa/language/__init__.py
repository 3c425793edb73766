"""The TileLang language namespace, used as `import tilelang.language as T`."""

from .accelerated import mul_half_float_to_bfloat16_x4
from .annotate import annotate_compile_flags, annotate_layout, annotate_pass_configs
from .allocate import alloc_fragment, alloc_local, alloc_shared, alloc_var, const, dynamic, empty, symbolic
from .atomic import (
    atomic_add, atomic_addx2, atomic_addx4, atomic_load, atomic_max, atomic_min, atomic_store,
)
from .builtin import sync_threads, thread_return, use_swizzle, wait_sqmma, wait_wgmma
from .reducer import alloc_reducer, finalize_reducer, reducer_init, reducer_update
from .view import reshape, view
from .warp import (
    get_lane_idx, get_warp_idx, get_warp_idx_sync, shfl_down, shfl_sync, shfl_up, shfl_xor, shuffle_elect, sync_warp,
    warp_reduce_bitand, warp_reduce_bitor, warp_reduce_max, warp_reduce_min, warp_reduce_sum,
)
from .copy import copy
from .transpose import transpose
from .logical import all_of, any_of
from .vote import (
    __ffs, activemask, all_sync, any_sync, ballot, ballot_sync, syncthreads_and, syncthreads_count, syncthreads_or,
)
from .global_access import ldg32, ldg64, ldg128, ldg256, stg32, stg64, stg128, stg256
from .tir import (
    Let, PrimExpr, Select, Var, address_of, assume, attr, call_extern, call_intrin, comm_reducer, evaluate, grid,
    handle, let, match_buffer, reinterpret, thread_binding, tvm_thread_allreduce,
)
from .debug import device_assert, print
from .scan import cummax, cumsum
from .fastmath import (
    __cos, __exp, __exp10, __log, __log2, __log10, __sin, __tan, ieee_add, ieee_fdiv, ieee_fmaf, ieee_frcp, ieee_frsqrt,
    ieee_fsqrt, ieee_mul, ieee_sub,
)
from .fill import clear, fill
from .gemm import gemm
from .dtypes import (
    VECTOR_DTYPES, DType, bfloat16, boolean, double, dtype, float, float8_e4m3, float8_e4m3fn, float8_e5m2,
    float8_e8m0fnu, float16, float32, float64, half, int, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
)
from .kernel import Kernel, get_block_binding, get_block_bindings, get_thread_binding, get_thread_bindings
from .loop import Parallel, Pipelined, serial, unroll, vectorized
from .math import (
    Cast, abs, atan, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, cast, ceil, ceildiv, clamp, cos, cosh, erf,
    exp, exp2, exp10, floor, floordiv, floormod, fmod, if_then_else, infinity, isfinite, isinf, isnan, log, log1p,
    log2, log10, max, max_value, min, min_value, nearbyint, ninf, pow, round, rsqrt, shift_left, shift_right, sigmoid,
    sin, sinh, sqrt, tan, tanh, trunc,
)
from .prim_func import macro, prim_func
from ..layout import Fragment, GemmWarpPolicy, Layout
from .proxy import Buffer, FragmentBuffer, LocalBuffer, SharedBuffer, StridedTensor, Tensor
from .reduce import (
    reduce, reduce_absmax, reduce_abssum, reduce_bitand, reduce_bitor, reduce_bitxor, reduce_max, reduce_min, reduce_sum,
)

bool = boolean  # noqa: A001 - T.bool, as upstream
globals().update(VECTOR_DTYPES)  # T.float32x4, ...

from .int_operands import install as _install_int_operands  # noqa: E402

_install_int_operands()  # `x & 0xFFFFFFFF` on a uint32 / int64 expression (see int_operands.py)

from .unsupported import UNSUPPORTED  # noqa: E402

globals().update(UNSUPPORTED)  # T.alloc_tmem, T.set_max_nreg, ...: clear errors naming the construct

__all__ = [
    "Buffer", "FragmentBuffer", "LocalBuffer", "SharedBuffer", "Cast", "DType", "Fragment", "GemmWarpPolicy", "Kernel", "Layout", "Parallel", "Pipelined", "StridedTensor", "Tensor",
    "double", "dtype", "float", "half", "int", "PrimExpr", "Select", "Var", "address_of", "assume", "attr", "call_extern",
    "grid", "handle", "match_buffer", "thread_binding", "comm_reducer", "tvm_thread_allreduce",
    "call_intrin", "evaluate", "reinterpret", "Let", "let", "all_of", "any_of", "ldg32", "ldg64", "ldg128", "ldg256",
    "stg32", "stg64", "stg128", "stg256", "__ffs", "activemask", "all_sync", "any_sync", "ballot", "ballot_sync",
    "syncthreads_and", "syncthreads_count", "syncthreads_or",
    "get_lane_idx", "get_warp_idx", "get_warp_idx_sync", "shfl_down", "shfl_sync", "shfl_up", "shfl_xor", "sync_warp",
    "shuffle_elect", "thread_return", "warp_reduce_bitand", "warp_reduce_bitor", "warp_reduce_max", "warp_reduce_min",
    "warp_reduce_sum", "mul_half_float_to_bfloat16_x4", "reshape", "view", "alloc_reducer",
    "finalize_reducer", "reducer_init", "reducer_update", "__cos", "__exp", "__exp10", "__log", "__log2", "__log10", "__sin", "__tan", "ieee_add",
    "ieee_fdiv", "ieee_fmaf", "ieee_frcp", "ieee_frsqrt", "ieee_fsqrt", "ieee_mul", "ieee_sub",
    "abs", "atan", "isfinite", "isinf", "isnan", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "cosh", "erf", "exp10", "fmod",
    "log10", "log1p", "nearbyint", "shift_left", "shift_right", "sinh", "tan", "alloc_fragment", "annotate_compile_flags", "annotate_layout", "annotate_pass_configs", "atomic_add", "atomic_addx2", "atomic_addx4", "atomic_load", "atomic_max", "atomic_min", "atomic_store", "clear", "copy", "fill", "alloc_local", "alloc_shared", "alloc_var", "bfloat16", "bool", "boolean", "cast",
    "ceil", "ceildiv", "clamp", "const", "cos", "cummax", "cumsum", "device_assert", "dynamic", "empty", "exp", "exp2", "float16", "float32", "float64",
    "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "floor", "floordiv", "floormod", "gemm", "get_block_binding",
    "get_block_bindings", "get_thread_binding", "get_thread_bindings", "if_then_else", "infinity", "int16", "int32",
    "int64", "int8", "log", "log2", "macro", "max", "max_value", "min", "min_value", "ninf", "pow", "prim_func", "print",
    "reduce", "reduce_absmax", "reduce_abssum", "reduce_bitand", "reduce_bitor", "reduce_bitxor", "reduce_max", "reduce_min", "reduce_sum", "round", "rsqrt", "serial", "symbolic", "sync_threads", "sigmoid", "sin", "sqrt", "tanh", "transpose", "trunc", "uint16", "uint32", "uint64", "uint8",
    "unroll", "use_swizzle", "vectorized", "wait_sqmma", "wait_wgmma", *UNSUPPORTED, *VECTOR_DTYPES,
]

# `T` holds the language's names only: the modules that implement them stay importable by their full names
# (tilelang_musa.language.builder) but are not names a kernel can write.
import types as _types  # noqa: E402

for _name in [n for n, v in globals().items() if isinstance(v, _types.ModuleType) and not n.startswith("_")]:
    del globals()[_name]
del _name, _types, UNSUPPORTED, VECTOR_DTYPES, _install_int_operands
