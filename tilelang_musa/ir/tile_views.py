"""Views of a shared tile as another dtype: `v = T.view(s, shape, dtype)` is a DeclBuffer over `s`'s storage
(`T.decl_buffer(shape, dtype, data=s.data)`), the same bytes under another name, element type and shape.

A same-dtype view is lowered to accesses of its tile (LowerBufferViews); a view of another dtype cannot be (an int8
element is half of a float16 one), so it stays a name of its own down to the printer (`signed char* v =
reinterpret_cast<signed char*>(s);`). Every pass that reasons about which bytes of shared memory an access touches
asks here which tile a name's bytes belong to: barrier placement (thread_sync.py), tile lifetimes
(shared_memory_lifetimes.py), swizzle choice and layouts (choose_shared_swizzle.py, lower_shared_layout.py) and
pipelining's buffer versions (inject_software_pipeline.py).
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from .utils import scope_of

SHARED_SCOPES = ("shared", "shared.dyn")


def viewed_buffer(decl: tirx.DeclBuffer) -> Any:
    """The buffer whose storage `decl` declares another name of (`data=s.data`), else None."""
    data = decl.data
    if isinstance(data, tvm.ir.Call) and isinstance(data.op, tvm.ir.Op) and str(data.op.name) == "tirx.buffer_data":
        return data.args[0]
    return None


def shared_tile_views(node: Any) -> dict:
    """Each view of a shared tile declared in `node` -> the tile (an allocation) whose bytes it names; a view of a
    view maps to the tile."""
    views: dict = {}

    def on_decl(decl: tirx.DeclBuffer) -> None:
        source = viewed_buffer(decl)
        if source is None or scope_of(decl.buffer) not in SHARED_SCOPES:
            return
        views[decl.buffer] = views.get(source, source)

    tvm_ffi.structural_walk(node, [(tirx.DeclBuffer, on_decl)], order="pre")
    return views


def viewed_tiles(node: Any) -> set:
    """The shared tiles `node` declares a view of."""
    return set(shared_tile_views(node).values())
