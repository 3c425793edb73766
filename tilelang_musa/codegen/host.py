"""The host wrapper printed after the kernel in the same MUSA source file.

    extern "C" int call(<kernel params>, musaStream_t stream)   launches the kernel(s) in order (sets the dynamic
                                                                 shared memory attribute when above 48 KiB; a
                                                                 kernel with T.sync_grid cooperatively)
    extern "C" int call_packed(void** args, int n, void* stream) uniform entry used by the launcher
    extern "C" const char* get_last_error()                     text of the last failure

A kernel with TME copies also takes one `MUtensorDescriptor` per global tensor they use (`tl.tme_descriptors`):
`call` builds each with muTensorDescriptorEncode from the tensor's pointer, shape and strides (static, or
expressions of the scalar parameters) before launching, and fails naming the tensor if the driver refuses it.

The same text compiles with mcc and, against the simulator headers, with the host C++ compiler.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx

from .. import _native
from ..errors import CompileError
from ..ir.attrs import DESCRIPTORS_ATTR
from .types import c_type

DEFAULT_DYNAMIC_SMEM = 48 * 1024  # above this a kernel must opt in with musaFuncSetAttribute


@dataclass(frozen=True)
class HostParam:
    name: str
    c_type: str  # e.g. "float*" or "int"
    is_pointer: bool

    @property
    def c_name(self) -> str:
        return host_name(self.name)


@functools.lru_cache(maxsize=None)
def host_name(name: str) -> str:
    """The C name of a program parameter in the host wrapper: the user's own, unless C++ cannot take it (a keyword
    such as `do` or `new`, a name of the template library, not an identifier), then a sanitised one ending in
    `_arg`. (The device kernel's names come from the printer's NameTable, which renames the same way.)"""
    if _native.get_global_func("tilelang_musa.codegen.is_valid_identifier")(name):
        return name
    base = re.sub(r"\W", "_", name).strip("_") or "param"
    return f"p_{base}_arg" if base[0].isdigit() else f"{base}_arg"


@dataclass(frozen=True)
class LaunchConfig:
    grid: tuple[str, str, str]  # C expressions over the scalar params
    block: tuple[int, int, int]
    dynamic_smem_bytes: int | str  # a C expression over the scalar params when a shared tile is sized at run time


def host_params(func: tirx.PrimFunc) -> list[HostParam]:
    params = []
    for var in func.params:
        ty = var.ty
        if isinstance(ty, tirx.BufferType):
            params.append(HostParam(var.name, f"{c_type(ty.dtype.dtype)}*", True))
        elif isinstance(ty, tvm.ir.PointerType):  # T.ptr; untyped (element type void) as `void*`
            elem = ty.element_type
            typed = isinstance(elem, tvm.ir.PrimType) and str(elem.dtype) not in ("", "void")
            params.append(HostParam(var.name, f"{c_type(elem.dtype)}*" if typed else "void*", True))
        else:
            params.append(HostParam(var.name, c_type(ty.dtype), False))
    return params


_BINARY = {tirx.Add: "+", tirx.Sub: "-", tirx.Mul: "*", tirx.Div: "/", tirx.Mod: "%",
           tirx.RShift: ">>", tirx.LShift: "<<", tirx.BitwiseAnd: "&", tirx.BitwiseOr: "|"}
_CALLS = {tirx.FloorDiv: "tl_host_floordiv", tirx.FloorMod: "tl_host_floormod", tirx.Min: "tl_host_min",
          tirx.Max: "tl_host_max"}


def _c_expr(expr) -> str:
    """C text of a launch-extent expression over the scalar parameters (64-bit host arithmetic)."""
    if isinstance(expr, int):
        return str(expr)
    if isinstance(expr, tirx.IntImm):
        return str(int(expr.value))
    if isinstance(expr, tvm.ir.expr.Var):
        return f"(long long){host_name(expr.name)}"
    if isinstance(expr, tirx.Cast):
        return _c_expr(expr.value)
    for cls, op in _BINARY.items():
        if isinstance(expr, cls):
            return f"({_c_expr(expr.a)} {op} {_c_expr(expr.b)})"
    for cls, fn in _CALLS.items():
        if isinstance(expr, cls):
            return f"{fn}({_c_expr(expr.a)}, {_c_expr(expr.b)})"
    raise NotImplementedError(f"launch extent {expr} cannot be printed for the host")


_HOST_HELPERS = """static inline long long tl_host_floordiv(long long a, long long b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}
static inline long long tl_host_floormod(long long a, long long b) { return a - tl_host_floordiv(a, b) * b; }
static inline long long tl_host_min(long long a, long long b) { return a < b ? a : b; }
static inline long long tl_host_max(long long a, long long b) { return a > b ? a : b; }
"""


def launch_config(func: tirx.PrimFunc, extents: dict[str, object], dynamic_smem_bytes: Any) -> LaunchConfig:
    grid = tuple(_c_expr(extents.get(f"blockIdx.{d}", 1)) for d in "xyz")
    block = tuple(int(extents.get(f"threadIdx.{d}", 1)) for d in "xyz")
    smem = int(dynamic_smem_bytes) if isinstance(dynamic_smem_bytes, (int, tirx.IntImm)) else _c_expr(dynamic_smem_bytes)
    return LaunchConfig(grid, block, smem)  # type: ignore[arg-type]


# The descriptor's element type: the float types by name, other types by width (a copy moves bytes).
_TME_DTYPES = {"float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT32", "float64": "FLOAT64",
               "int32": "INT32", "int64": "INT64"}
_TME_DTYPES_BY_BITS = {8: "UINT8", 16: "UINT16", 32: "UINT32", 64: "UINT64"}


@dataclass(frozen=True)
class TmeDescriptor:
    name: str  # the kernel parameter, e.g. desc_A
    tensor: str  # the host parameter it describes
    data_type: str  # MUtensorDescriptorDataType enumerator
    dims: tuple[str, ...]  # C expressions, innermost dimension first
    strides: tuple[str, ...]  # C expressions: byte strides of dims 1.. (innermost first)


def tme_descriptors(func: tirx.PrimFunc) -> list[TmeDescriptor]:
    """The TME descriptors a device function takes (recorded by LowerTmeCopy), in parameter order."""
    if func.attrs is None or DESCRIPTORS_ATTR not in func.attrs:
        return []
    out = []
    for name, (tensor, dtype, dims, strides) in sorted(func.attrs[DESCRIPTORS_ATTR].items(), key=lambda kv: str(kv[0])):
        dtype = str(dtype)
        kind = _TME_DTYPES.get(dtype) or _TME_DTYPES_BY_BITS[tvm.DataType(dtype).bits]
        out.append(TmeDescriptor(str(name), str(tensor), f"MU_TENSOR_DESCRIPTOR_DATA_TYPE_{kind}",
                                 tuple(_c_expr(d) for d in dims), tuple(_c_expr(s) for s in strides)))
    return out


def _print_descriptor(kernel: str, desc: TmeDescriptor) -> list[str]:
    rank = len(desc.dims)
    strides = ", ".join(f"(muuint64_t){s}" for s in desc.strides) or "0"
    return [
        f"    alignas(64) MUtensorDescriptor {desc.name};",
        "    {",
        f"      muuint64_t dims[{rank}] = {{{', '.join(f'(muuint64_t){d}' for d in desc.dims)}}};",
        f"      muuint64_t strides[{max(rank - 1, 1)}] = {{{strides}}};",
        (f"      MUresult res = muTensorDescriptorEncode(&{desc.name}, {desc.data_type}, {rank}, (void*){host_name(desc.tensor)}, "
         "dims, strides, MU_TENSOR_DESCRIPTOR_INTERLEAVE_NONE, 0);"),
        "      if (res != MUSA_SUCCESS) {",
        (f'        snprintf(tl_error_buf, sizeof(tl_error_buf), "{kernel}: cannot build the TME descriptor of tensor '
         f'`{desc.tensor}` (muTensorDescriptorEncode returned %d): its address and byte strides must be multiples '
         'of 16", (int)res);'),
        "        return -1;",
        "      }",
        "    }",
    ]


@dataclass(frozen=True)
class KernelLaunch:
    name: str  # the __global__ function
    launch: LaunchConfig
    descriptors: tuple[TmeDescriptor, ...] = ()  # its parameters after the program's own
    cooperative: bool = False  # it waits at a grid barrier (T.sync_grid): musaLaunchCooperativeKernel


# A kernel with a grid barrier needs every block resident at once: a cooperative launch, which the driver refuses
# (musaErrorCooperativeLaunchTooLarge) for a grid larger than the device holds.
_LAUNCH = {False: "musaLaunchKernel", True: "musaLaunchCooperativeKernel"}


def _print_launch(kernel: KernelLaunch, args: str) -> list[str]:
    """Set the dynamic shared memory attribute if needed, launch, and return -1 with the error on failure."""
    name, smem = kernel.name, kernel.launch.dynamic_smem_bytes
    lines = ["  {"]
    for desc in kernel.descriptors:
        lines += _print_descriptor(name, desc)
    args = ", ".join([a for a in args.split(", ") if a != "nullptr"] + [f"&{d.name}" for d in kernel.descriptors]) \
        or "nullptr"
    lines += [
        f"    dim3 grid({', '.join(kernel.launch.grid)});",
        f"    dim3 block({', '.join(str(b) for b in kernel.launch.block)});",
        f"    size_t smem = {smem};",
    ]
    if isinstance(smem, str) or smem > DEFAULT_DYNAMIC_SMEM:
        # a run-time size opts in when it needs to; a size over the device's limit fails here, with the size
        runtime = isinstance(smem, str)
        lines += [f"    if (smem > {DEFAULT_DYNAMIC_SMEM}) {{"] if runtime else []
        lines += [
            f"    musaError_t attr_err = musaFuncSetAttribute({name}, musaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);",
            "    if (attr_err != musaSuccess) {",
            f'      snprintf(tl_error_buf, sizeof(tl_error_buf), "{name}: cannot set %zu bytes of dynamic shared memory: %s", smem, musaGetErrorString(attr_err));',
            "      return -1;",
            "    }",
        ] + (["    }"] if runtime else [])
    lines += [
        f"    void* args[] = {{{args}}};",
        f"    musaError_t err = {_LAUNCH[kernel.cooperative]}({name}, grid, block, args, smem, stream);",
        "    if (err != musaSuccess) {",
        f'      snprintf(tl_error_buf, sizeof(tl_error_buf), "{name}: %s", musaGetErrorString(err));',
        "      return -1;",
        "    }",
        "  }",
    ]
    return lines


def _check_distinct_c_names(params: list[HostParam]) -> None:
    seen: dict[str, str] = {}
    for p in params:
        if p.c_name in seen:
            raise CompileError(f"kernel parameters `{seen[p.c_name]}` and `{p.name}` would both be `{p.c_name}` in the "
                             "generated C (a C++ keyword is renamed with `_arg`): rename one of them")
        seen[p.c_name] = p.name


def print_host(kernels: list[KernelLaunch], params: list[HostParam]) -> str:
    """The host wrapper: `call` launches the kernels in order on one stream (a program with several T.Kernel
    scopes is several kernels, each seeing the writes of the ones before)."""
    # No __restrict__ here (it means something only on the kernel's parameters): `&A` of a restrict-qualified
    # pointer does not convert to void* implicitly in clang-based compilers such as mcc, only in g++.
    _check_distinct_c_names(params)
    sig = ", ".join(f"{p.c_type} {p.c_name}" for p in params)
    sig = f"{sig}, musaStream_t stream" if sig else "musaStream_t stream"
    args = ", ".join(f"&{p.c_name}" for p in params) or "nullptr"
    unpack = ",\n      ".join(
        f"({p.c_type})(*(void**)args[{i}])" if p.is_pointer else f"*({p.c_type}*)args[{i}]"
        for i, p in enumerate(params)
    )
    first = kernels[0].name
    lines = [
        "static char tl_error_buf[1024];",
        "",
        'extern "C" const char* get_last_error() { return tl_error_buf; }',
        "",
    ]
    if any("tl_host_" in g for k in kernels for g in (*k.launch.grid, str(k.launch.dynamic_smem_bytes))) or \
            any("tl_host_" in e for k in kernels for d in k.descriptors for e in d.dims + d.strides):
        lines += [_HOST_HELPERS]
    lines += [f'extern "C" int call({sig}) {{']
    for kernel in kernels:
        lines += _print_launch(kernel, args)
    lines += [
        "  return 0;",
        "}",
        "",
        'extern "C" int call_packed(void** args, int num_args, void* stream) {',
        f"  if (num_args != {len(params)}) {{",
        f'    snprintf(tl_error_buf, sizeof(tl_error_buf), "{first}: expected {len(params)} arguments, got %d", num_args);',
        "    return -1;",
        "  }",
    ]
    call_args = f"{unpack},\n      (musaStream_t)stream" if params else "(musaStream_t)stream"
    lines += [f"  return call({call_args});", "}", ""]
    return "\n".join(lines)
