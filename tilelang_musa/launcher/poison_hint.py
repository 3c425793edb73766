"""The simulator's hint for an output that comes back entirely poison (issue 41).

On the simulator the launcher fills the outputs it allocates with 0xFF bytes (NaN for floats, -1 for integers) so
that an element the kernel never writes is visible. An output whose every byte is still 0xFF after a default-mode
launch usually means the kernel wrote nothing there, or computed it from memory nothing wrote: checked mode names
the first such read. One hint per kernel and output per process; the common case costs one look at the first byte.

Only for dtypes whose all-ones pattern a kernel does not compute: float16/bfloat16/float32/float64, where it is a
NaN that no arithmetic produces (x86 and the simulator's conversions give the default NaN, 0x7FC00000 or
0xFFC00000 and their narrowings; a computed NaN output gets no hint), and bool (0xFF is neither true nor false as
torch stores them). Not for integers, where all-ones is -1 or the type's maximum (an int8 fill of -1), nor for the
8-bit floats, whose all-ones byte is a value (-240 in float8_e4m3fnuz) or the NaN a negative NaN narrows to.
"""

from __future__ import annotations

import torch

from .. import env
from ..diagnostics import warn_once

_HINTED = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool})


def _entirely_poison(out: torch.Tensor) -> bool:
    if out.numel() == 0 or out.dtype not in _HINTED:
        return False
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
