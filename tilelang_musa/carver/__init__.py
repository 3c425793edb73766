"""`tilelang.carver`: what upstream scripts query about the device they tune for.

Only the device queries (`tilelang.carver.arch.driver`) are here: persistent kernels size their grid by
`driver.get_num_sms()`. Upstream's roller (the MatmulTemplate / recommend_hints config search) is not provided:
MUSA tuning goes through `tilelang.autotune`, which ranks configs by the simulator's performance model.
"""

from . import arch  # noqa: F401
