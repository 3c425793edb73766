"""Programmatic dependent launch (PDL) in upstream's spelling: `T.pdl_trigger()` and `T.pdl_sync()`.

On NVIDIA Hopper a kernel may let the next kernel of its stream start before it ends (`T.pdl_trigger()`,
griddepcontrol.launch_dependents), and that next kernel then waits for its predecessor's writes where it needs them
(`T.pdl_sync()`, griddepcontrol.wait). Both change when a kernel starts, never what it computes. MUSA launches the
kernels of a stream one after the other: a kernel starts after its predecessor has ended and its writes are visible.
So `T.pdl_sync()` asks for what every MUSA launch already gives (silent), and `T.pdl_trigger()` asks for an overlap
MUSA cannot give: it is accepted, emits nothing and says so once per process.
"""

from __future__ import annotations

from ..diagnostics import warn_once
from .builder import kernel_trace


def pdl_trigger() -> None:
    """Let the next kernel of the stream start before this one ends (NVIDIA's programmatic dependent launch). A
    no-op on MUSA, whose stream runs kernels one after the other, with a one-time warning.
    Example: T.pdl_trigger()  # after this kernel's last store"""
    trace = kernel_trace("T.pdl_trigger")
    where = f"at {trace.loc}: " if trace.loc is not None else ""
    warn_once("pdl-trigger", f"{where}T.pdl_trigger: MUSA has no programmatic dependent launch (a stream's kernels "
                             "run one after the other); the next kernel starts when this one ends, results are "
                             "unchanged")


def pdl_sync() -> None:
    """Wait until the previous kernel of the stream has ended and its writes are visible (NVIDIA's
    programmatic dependent launch). A no-op on MUSA, where every kernel starts only then.
    Example: T.pdl_sync()  # before reading what the previous kernel wrote"""
    kernel_trace("T.pdl_sync")
