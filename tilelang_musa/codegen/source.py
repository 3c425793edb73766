"""Assembles one MUSA translation unit: the template include, the device kernel printed by the C++
printer (`codegen_musa.cc`), and the host wrapper printed by `host.py`."""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import tirx

from .. import _native
from ..ir.attrs import IMPORTED_SOURCES_ATTR, MIN_BLOCKS_ATTR, NON_RESTRICT_ATTR, SIZE_ATTR
from ..ir.ops import SYNC_GRID_OP
from ..ir.source_lines import blank_line_directives, strip_line_directives, user_lines_of_plain
from ..ir.utils import as_int, buffer_size, dtype_bytes, scope_of, thread_info
from ..target import arch_of
from .host import HostParam, KernelLaunch, LaunchConfig, host_params, launch_config, print_host, tme_descriptors

# The device template library; each header includes common.h.
TEMPLATE_HEADERS = ("common.h", "atomic.h", "reduce.h", "scan.h", "debug.h", "gemm_mp22_mma.h",
                    "gemm_mp31_wmma.h", "gemm_mp31_sqmma.h")
HEADER = "".join(f'#include "tl_templates/musa/{h}"\n' for h in TEMPLATE_HEADERS) + "#include <cstdio>\n"
# Only kernels that draw random numbers (T.rng_init) include murand: curand_kernel.h-like headers are heavy.
RANDOM_HEADER = '#include "tl_templates/musa/random.h"\n'
# Likewise the asynchronous-copy and robust-descriptor templates, for kernels that call them.
ASYNC_COPY_HEADER = '#include "tl_templates/musa/async_copy.h"\n'
ASYNC_COPY_MARKERS = ("tl::barrier_", "tl::cp_async_", "tl::robust_copy", "tl::make_robust_desc", "tl::lma_wait")
# And the TME templates (with the driver header that declares MUtensorDescriptor), for kernels with TME copies.
TME_HEADER = '#include "tl_templates/musa/tme.h"\n'
TME_MARKERS = ("tl::tma_", "MUtensorDescriptor")
# And the lane exchange of fragment stores (tileop/lane_exchange.py).
LANE_EXCHANGE_HEADER = '#include "tl_templates/musa/lane_exchange.h"\n'
# And the grid group of a cooperative launch (T.sync_grid), as Moore Threads' printer includes it.
COOPERATIVE_GROUPS_HEADER = "#include <cooperative_groups.h>\n"
COOPERATIVE_GROUPS_MARKER = "cooperative_groups::"
# And the conversions with a chosen rounding (T.cast(..., round=, sat=, rbits=)).
CAST_ROUNDING_HEADER = '#include "tl_templates/musa/cast_rounding.h"\n'
CAST_ROUNDING_MARKERS = ("tl::convert_rounded<", "tl::convert_stochastic<")


@dataclass(frozen=True)
class KernelSource:
    kernel_name: str
    device: str  # the __global__ kernel
    host: str  # call / call_packed / get_last_error
    params: list[HostParam]
    launch: LaunchConfig  # the first kernel's
    local_bytes: int  # per-thread local arrays (registers / local memory)
    checked_device: str | None = None  # `device` as the simulator's sanitizer build prints it (same lines)
    imported: str = ""  # the program's T.import_source texts, placed between the headers and the kernels
    # For a source printed without `#line` directives: line of `device` (1-based) -> the user's (file, line), so the
    # simulator's reports name the user's line without the directives in the printed C (user_line_table=True).
    device_user_lines: dict | None = None

    @property
    def text(self) -> str:
        return self._unit(self.device)

    @property
    def checked_text(self) -> str | None:
        """The translation unit the simulator builds: `text` with its accesses checked, line for line."""
        return None if self.checked_device is None else self._unit(self.checked_device)

    def _unit(self, device: str) -> str:
        header = HEADER + (RANDOM_HEADER if "TL_RNG_STATE(" in self.device else "")
        header += ASYNC_COPY_HEADER if any(m in self.device for m in ASYNC_COPY_MARKERS) else ""
        header += TME_HEADER if any(m in self.device for m in TME_MARKERS) else ""
        header += LANE_EXCHANGE_HEADER if "tl::exchange_lane_bits<" in self.device else ""
        header += CAST_ROUNDING_HEADER if any(m in self.device for m in CAST_ROUNDING_MARKERS) else ""
        header += COOPERATIVE_GROUPS_HEADER if COOPERATIVE_GROUPS_MARKER in self.device else ""
        unit = f"{header}{self.imported}\n{device}\n"
        if "\n#line " in self.device:  # the host wrapper is numbered as the unit's own lines again (the sanitizer
            # build, whose directives are blanked, gets the same directive: it keeps the two line for line)
            unit += f'#line {unit.count(chr(10)) + 2} "{self.kernel_name}.mu"\n'
        return f"{unit}\n{self.host}"


def kernel_names(name: str, count: int) -> list[str]:
    """`<name>_kernel`, then `<name>_kernel_1`, ... for a program of several kernels."""
    return [f"{name}_kernel" + (f"_{k}" if k else "") for k in range(count)]


def generate(funcs: tirx.PrimFunc | list[tirx.PrimFunc], target: tvm.target.Target, name: str,
             sim_checks: bool = False, line_directives: bool = False, user_line_table: bool = False) -> KernelSource:
    """One translation unit for the device functions of one program (one per T.Kernel scope, launched in order);
    they share the program's parameters. `sim_checks`: also print the simulator's sanitizer build of the kernels
    (every global and shared access bounds-checked and seen by the race detector, local arrays poisoned).
    `line_directives`: a `#line N "file.py"` before the code of each statement (ir/source_lines.py); the sanitizer
    build has them blanked, so that its reports name the generated line (the kernel object adds the user's).
    `user_line_table` (without `line_directives`): the kernels are printed with directives once, and both the
    source without them and `device_user_lines` (its lines -> the user's) come from that print. The printer writes
    a directive as a line of its own and changes nothing else (MusaPrinter::Line), so the directives' lines left
    out are the print without them, byte for byte (testing/test_line_directives.py checks it on real kernels)."""
    funcs = [funcs] if isinstance(funcs, tirx.PrimFunc) else list(funcs)
    arch = arch_of(target)
    printer = _native.get_global_func("tilelang_musa.codegen.print_device_kernel")
    options = {"arch": arch.name, "warp_size": int(target.attrs["thread_warp_size"])}
    if line_directives:
        options["line_directives"] = True
    devices, checked, launches, lined = [], [], [], []
    for index, (func, kernel_name) in enumerate(zip(funcs, kernel_names(name, len(funcs)))):
        descriptors = tuple(tme_descriptors(func))
        kernel_options = dict(options, min_blocks_per_sm=_min_blocks_per_sm(func, index),
                              tme_descriptors=[d.name for d in descriptors], non_restrict_params=_non_restrict(func))
        if user_line_table and not line_directives:
            lined.append(str(printer(func, kernel_name, dict(kernel_options, line_directives=True))).rstrip() + "\n")
            devices.append(strip_line_directives(lined[-1]))
        else:
            devices.append(str(printer(func, kernel_name, kernel_options)).rstrip() + "\n")
        if sim_checks:
            text = str(printer(func, kernel_name, dict(kernel_options, sim_checks=True))).rstrip() + "\n"
            checked.append(blank_line_directives(text) if line_directives else text)
        smem = func.attrs[SIZE_ATTR] if func.attrs is not None and SIZE_ATTR in func.attrs else 0
        launches.append(KernelLaunch(kernel_name, launch_config(func, thread_info(func).extents, smem), descriptors,
                                     _has_grid_barrier(func)))
    params = host_params(funcs[0])
    device = "\n".join(devices)
    table = user_lines_of_plain("\n".join(lined)) if lined else None
    return KernelSource(launches[0].name, device, print_host(launches, params), params,
                        launches[0].launch, max(_local_bytes(f) for f in funcs),
                        "\n".join(checked) if sim_checks else None, _imported_sources(funcs), table)


def _has_grid_barrier(func: tirx.PrimFunc) -> bool:
    """Whether the kernel calls T.sync_grid: it is launched cooperatively."""
    found: list[bool] = []

    def on_call(call):
        if isinstance(call.op, tvm.ir.Op) and str(call.op.name) == SYNC_GRID_OP:
            found.append(True)

    tvm_ffi.structural_walk(func.body, [(tvm.ir.Call, on_call)])
    return bool(found)


def _imported_sources(funcs: list[tirx.PrimFunc]) -> str:
    """The distinct T.import_source texts of the program's kernels, in first-use order, each ending a line."""
    texts: list[str] = []
    for func in funcs:
        if func.attrs is not None and IMPORTED_SOURCES_ATTR in func.attrs:
            texts += [str(t) for t in func.attrs[IMPORTED_SOURCES_ATTR] if str(t) not in texts]
    return "".join(t if t.endswith("\n") else t + "\n" for t in texts)


def _min_blocks_per_sm(func: tirx.PrimFunc, index: int) -> int:
    """The kernel's T.annotate_min_blocks_per_sm (one value per kernel of the program, in launch order), else 1."""
    values = func.attrs[MIN_BLOCKS_ATTR] if func.attrs is not None and MIN_BLOCKS_ATTR in func.attrs else []
    return int(values[index]) if index < len(values) else 1


def _non_restrict(func: tirx.PrimFunc) -> list[str]:
    """The tensor parameters T.annotate_restrict_buffers said may alias: printed without `__restrict__`."""
    return [str(n) for n in func.attrs[NON_RESTRICT_ATTR]] if func.attrs is not None and NON_RESTRICT_ATTR in func.attrs else []


_LOCAL_SCOPES = ("local", "local.fragment", "local.var", "warp")


def _local_bytes(func: tirx.PrimFunc) -> int:
    total = 0

    def on_alloc(node):
        nonlocal total
        if scope_of(node.buffer) in _LOCAL_SCOPES:
            count = as_int(buffer_size(node.buffer))
            total += (count or 0) * dtype_bytes(node.buffer.ty.dtype.dtype)

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, on_alloc)])
    return total
