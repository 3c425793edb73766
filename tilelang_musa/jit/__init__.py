"""JIT: compile(), @jit, JITKernel, the kernel cache, the toolchains, export and AOT (the launcher is ../launcher)."""

from .cache import disable_cache, enable_cache, is_cache_enabled
from .compile import CompiledArtifact, compile, lower
from .jit import JITFunction, jit

JITImpl = JITFunction  # upstream's name of what @tilelang.jit returns (scripts annotate with it)
from .kernel import JITKernel, load_library
from .par_compile import par_compile

__all__ = ["CompiledArtifact", "JITFunction", "JITImpl", "JITKernel", "compile", "disable_cache", "enable_cache",
           "is_cache_enabled", "jit", "load_library", "lower", "par_compile"]
