"""Profiling: `kernel.get_profiler()` and `tilelang.profiler.do_bench`."""

from .bench import do_bench
from .profiler import Profiler
from .tensor_supply import TensorSupplyType

__all__ = ["Profiler", "TensorSupplyType", "do_bench"]
