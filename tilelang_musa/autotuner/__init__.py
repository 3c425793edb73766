"""The autotuner: `@autotune(configs=...)` over `@tilelang.jit`, and `AutoTuner.from_kernel(...)...run()`.

Every config is compiled in parallel worker processes, or as Ray tasks (`executor="ray"`, on a local Ray instance
or a cluster: workers.py); invalid ones (compile errors, mismatches against `ref_prog`, crashes, timeouts) are
skipped with their error recorded; the best config's kernel is returned with its config and latency, and the
result is persisted so that a later run compiles only the best config. On a MUSA
device configs are timed with MUSA events; in the CPU simulator they are ranked by their modelled device time
(the simulator's performance model), or by a `cost_model` of your own. See tuner.py for the details.
"""

from .capture import get_autotune_inputs, set_autotune_inputs
from .decorator import AutoTuneImpl, autotune
from .param import AutotuneResult, CompileArgs, ProfileArgs, Trial
from .tuner import AutoTuner

__all__ = [
    "AutoTuneImpl", "AutoTuner", "AutotuneResult", "CompileArgs", "ProfileArgs", "Trial", "autotune",
    "get_autotune_inputs", "set_autotune_inputs",
]
