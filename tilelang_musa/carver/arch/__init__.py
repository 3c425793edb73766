"""The device an upstream-style script tunes for: `driver` answers the MUSA runtime's queries; `CUDA` / `MUSA`
describe the arch a config helper (tilelang.carver.template) sizes tiles for."""

from . import driver  # noqa: F401
from .device import CDNA, CUDA, MUSA, auto_infer_current_arch  # noqa: F401
