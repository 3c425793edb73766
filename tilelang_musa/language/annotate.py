"""`T.annotate_layout({buffer: layout})`: fix a buffer's layout before inference; `T.annotate_pass_configs` and
`T.annotate_compile_flags`: settings the kernel carries to `tilelang.compile`; `T.annotate_min_blocks_per_sm`:
the kernel's `__launch_bounds__(threads, n)`; `T.annotate_safe_value({A: v})`: what out-of-bounds reads of a
global tensor return; `T.annotate_restrict_buffers(x, y)`: tensors that may alias (no `__restrict__`);
`T.annotate_l2_hit_ratio({A: r})`: checked, then without effect on MUSA (see there).

A Fragment fixes where a fragment's elements live (thread and slot); a Layout fixes how a shared tile is
stored (e.g. `tilelang.layout.make_sqmma_swizzled_layout(buf)`), or renumbers the elements of a global tensor
(every access `A[x]` reads `A[layout(x)]`, e.g. a row permutation). The map is recorded on the kernel (PrimFunc
attribute `tl.layout_annotations`) and read by LayoutInference, LowerSharedLayout and LowerGlobalLayout.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from ..ir.pass_config import normalize_pass_configs
from ..layout import Fragment, Layout
from ..tileop.region import TensorRegion, is_buffer
from ..diagnostics import warn_once
from .builder import current_trace, kernel_trace


def annotate_pass_configs(configs: dict) -> None:
    """Pass configs this kernel is always compiled with (`{PassConfigKey.X: value}`); they take precedence over
    the `pass_configs` given to `tilelang.compile` / `tilelang.jit`."""
    trace = current_trace("T.annotate_pass_configs")
    if not isinstance(configs, dict):
        raise trace.error(f"T.annotate_pass_configs takes a dict; got {configs!r}")
    try:
        normalized = normalize_pass_configs(configs)
    except ValueError as err:
        raise trace.error(f"T.annotate_pass_configs: {err}") from None
    trace.pass_configs.update({key.value: value for key, value in normalized.items()})


def annotate_compile_flags(flags) -> None:
    """Device-compiler flags this kernel is always compiled with (added after `compile_flags`)."""
    trace = current_trace("T.annotate_compile_flags")
    flags = [flags] if isinstance(flags, str) else list(flags)
    if not all(isinstance(f, str) for f in flags):
        raise trace.error(f"T.annotate_compile_flags takes a string or a list of strings; got {flags!r}")
    trace.compile_flags.extend(flags)


def annotate_min_blocks_per_sm(n: int) -> None:
    """Inside a kernel: ask the device compiler to fit `n` blocks of this kernel on one multiprocessor at once
    (`__launch_bounds__(threads, n)`: it limits registers per thread accordingly)."""
    trace = kernel_trace("T.annotate_min_blocks_per_sm")
    value = n if isinstance(n, int) and not isinstance(n, bool) else None
    if value is None or value <= 0:
        raise trace.error(f"T.annotate_min_blocks_per_sm({n!r}): the block count must be a positive int")
    previous = trace.kernel.min_blocks_per_sm
    if previous is not None and previous != value:
        raise trace.error(f"T.annotate_min_blocks_per_sm({value}): this kernel is already annotated with {previous}")
    trace.kernel.min_blocks_per_sm = value


def annotate_layout(layout_map: dict, allow_buffer_region: bool = False, allow_reannotation: bool = False) -> None:
    trace = kernel_trace("T.annotate_layout")
    for key, layout in layout_map.items():
        if isinstance(key, TensorRegion):
            if not allow_buffer_region:
                raise trace.error("T.annotate_layout: a buffer region was given; pass allow_buffer_region=True to "
                                  "annotate the region's buffer")
            key = key.source
        if not is_buffer(key):
            raise trace.error(f"T.annotate_layout: keys must be buffers; got {key!r}")
        scope = str(key.ty.storage_scope)
        if not isinstance(layout, Layout):
            raise trace.error(f"T.annotate_layout: the layout of `{key.name}` must be a T.Layout or T.Fragment; "
                              f"got {layout!r}")
        if scope == "local.fragment" and not isinstance(layout, Fragment):
            raise trace.error(f"T.annotate_layout: fragment `{key.name}` needs a T.Fragment (thread + slot)")
        if scope in ("shared", "shared.dyn", "global") and isinstance(layout, Fragment):
            raise trace.error(f"T.annotate_layout: {scope} buffer `{key.name}` needs a T.Layout, not a T.Fragment")
        if not all(isinstance(e, tirx.IntImm) for e in key.ty.shape):
            raise trace.error(f"T.annotate_layout: `{key.name}` has a shape known only at run time "
                              f"({list(key.ty.shape)}); layouts apply to buffers of constant shape")
        shape = [int(e) for e in key.ty.shape]
        if [int(e) for e in layout.input_shape] != shape:
            raise trace.error(f"T.annotate_layout: the layout's input shape {list(layout.input_shape)} differs from "
                              f"`{key.name}`'s shape {shape}")
        if scope == "global" and not layout.is_bijective():
            raise trace.error(f"T.annotate_layout: the layout of global tensor `{key.name}` must be a bijection onto "
                              f"its {layout.size()} elements (it renumbers them); got {layout!r}")
        if scope in ("shared", "shared.dyn"):
            collision = layout.first_collision()
            if collision is not None:  # two elements would share one address
                a, b = collision
                raise trace.error(f"T.annotate_layout: the layout of shared buffer `{key.name}` must be injective "
                                  f"(each element its own place), but {key.name}{list(a)} and {key.name}{list(b)} both "
                                  f"map to physical coordinates {[int(v) for v in layout.evaluate(*a)]}")
        if key in trace.layout_annotations and not allow_reannotation:
            raise trace.error(f"T.annotate_layout: `{key.name}` is already annotated; pass allow_reannotation=True "
                              "to replace its layout")
        trace.layout_annotations[key] = layout


def annotate_restrict_buffers(*buffers) -> None:
    """`T.annotate_restrict_buffers(x, y)`: the global tensors `x`, `y` may alias (overlapping views of one
    tensor), so their kernel parameters are printed without `__restrict__` (every other pointer parameter keeps
    it: the compiler may then reorder and cache their loads). Applies to every kernel of the program."""
    trace = current_trace("T.annotate_restrict_buffers")
    for buffer in buffers:
        if not is_buffer(buffer) or str(buffer.ty.storage_scope) != "global":
            raise trace.error(f"T.annotate_restrict_buffers: {buffer!r} must be a global tensor (a kernel "
                              "parameter); only parameters are restrict-qualified")
        if buffer.name not in trace.non_restrict:
            trace.non_restrict.append(buffer.name)


def annotate_safe_value(values: dict) -> None:
    """`T.annotate_safe_value({A: pad})`: reads of the global tensor `A` outside its bounds (a tile's tail, a shifted
    window) return `pad` instead of zero. Applies to the whole kernel."""
    trace = current_trace("T.annotate_safe_value")
    if not isinstance(values, dict):
        raise trace.error(f"T.annotate_safe_value takes a dict {{tensor: value}}; got {values!r}")
    for buffer, value in values.items():
        if not is_buffer(buffer) or str(buffer.ty.storage_scope) != "global":
            raise trace.error(f"T.annotate_safe_value: {buffer!r} must be a global tensor (a kernel parameter); "
                              "only global reads are guarded")
        dtype = str(buffer.ty.dtype.dtype)
        if isinstance(value, (bool, int, float)):
            value = tirx.const(value, dtype)
        elif not isinstance(value, tvm.ir.Expr):
            raise trace.error(f"T.annotate_safe_value: the value for `{buffer.name}` must be a number or an "
                              f"expression; got {value!r}")
        elif str(value.ty.dtype) != dtype:
            value = tirx.Cast(dtype, value)
        trace.safe_values[buffer.name] = value


def annotate_l2_hit_ratio(ratios: dict) -> None:
    """`T.annotate_l2_hit_ratio({A: 0.8})`: upstream sets a CUDA access-policy window so that this share of the
    global tensor A's accesses persist in L2. MUSA's runtime exposes no such window to a kernel launch (its only
    cache hints are per TME copy: `T.copy(..., eviction_policy=...)`), so the annotation is checked (global tensors,
    ratios in [0, 1]) and then has no effect; a warning says so once."""
    trace = current_trace("T.annotate_l2_hit_ratio")
    if not isinstance(ratios, dict):
        raise trace.error(f"T.annotate_l2_hit_ratio takes a dict {{tensor: ratio}}; got {ratios!r}")
    for buffer, ratio in ratios.items():
        if not is_buffer(buffer) or str(buffer.ty.storage_scope) != "global":
            raise trace.error(f"T.annotate_l2_hit_ratio: {buffer!r} must be a global tensor (a kernel parameter); "
                              "persistent L2 applies to global memory only")
        if not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise trace.error(f"T.annotate_l2_hit_ratio: the ratio for `{buffer.name}` must be a number in [0, 1]; "
                              f"got {ratio!r}")
    warn_once("annotate_l2_hit_ratio", "T.annotate_l2_hit_ratio has no effect on MUSA: its runtime has no L2 "
              "access-policy window for a launch (per-copy cache hints are T.copy(..., eviction_policy=...))")
