"""The kernel launcher: checks the caller's tensors against a kernel's `ParamSpec`s, allocates its outputs and
calls the compiled library's `call_packed` on the right stream. See `_launcher.pyx` for the full contract.

    launcher = Launcher("add.so", [ParamSpec("A", "tensor", "float32", ("N",)),
                                   ParamSpec("C", "tensor", "float32", ("N",), is_output=True),
                                   ParamSpec("N", "scalar", "int32")],
                        device="cpu", kernel_name="add", scalar_bindings=["N"])
    c = launcher(a)   # N = a.shape[0]; C allocated and returned
"""

from .assume import AssumeViolation, HostAssume, HostExpr
from .spec import SCALAR_DTYPES, DimExpr, KernelLaunchError, ParamSpec, UnboundSizeError, torch_dtype

try:
    from ._launcher import Launcher
except ImportError as _err:  # the extension is built by CMake at install time
    raise ImportError(
        "tilelang_musa.launcher._launcher (the Cython launcher) is not built; install the package with "
        "`pip install .` so that CMake compiles it"
    ) from _err

__all__ = ["AssumeViolation", "DimExpr", "HostAssume", "HostExpr", "KernelLaunchError", "Launcher", "ParamSpec", "SCALAR_DTYPES", "UnboundSizeError", "torch_dtype"]
