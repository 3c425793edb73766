"""The simulator's hint for an output that comes back entirely poison (issue 41).

On the simulator the launcher fills the outputs it allocates with 0xFF bytes (NaN for floats, -1 for integers) so
that an element the kernel never writes is visible. An output that is still entirely NaN (or, for integers, 0xFF
bytes) after a default-mode launch usually means the kernel wrote nothing there, or computed it from memory nothing
wrote: checked mode names the first such read. One hint per kernel and output per process; the common case costs
one look at the first element.
"""

from __future__ import annotations

import torch

from .. import env
from ..diagnostics import warn_once


def _entirely_poison(out: torch.Tensor) -> bool:
    if out.numel() == 0:
        return False
    if out.is_floating_point():
        return bool(torch.isnan(out.reshape(-1)[0])) and bool(torch.isnan(out).all())
    storage = out.untyped_storage()
    if storage[0] != 0xFF:
        return False
    return bool((torch.empty(0, dtype=torch.uint8).set_(storage) == 0xFF).all())


def hint_if_poison(kernel_name: str, names: list, outputs: list) -> None:
    """After a simulated launch: the hint for each output in `outputs` (named `names`) that is entirely poison."""
    if env.SIM_CHECK.flag():
        return  # checked mode has reported what it can
    for name, out in zip(names, outputs):
        if _entirely_poison(out):
            warn_once(f"poison-output:{kernel_name}:{name}",
                      f"kernel '{kernel_name}': output `{name}` is entirely NaN / 0xFF bytes after the launch, as the "
                      "simulator poisons it before; if that is unexpected, TILELANG_SIM_CHECK=1 names the first "
                      "read of memory nothing wrote (buffer, element, line, thread)")
