"""`tilelang.carver`: what upstream scripts query about the device they tune for.

`tilelang.carver.arch.driver` answers device queries (persistent kernels size their grid by
`driver.get_num_sms()`); `tilelang.carver.template.MatmulTemplate` recommends GEMM tile configurations for the
MUSA arch in use (`arch.CUDA` / `arch.MUSA`), ranked by a simple occupancy rule, not by upstream's roller: for a
ranking by modelled time, hand them to `tilelang.autotune` (the simulator's performance model).
"""

from . import arch, roller, template  # noqa: F401
