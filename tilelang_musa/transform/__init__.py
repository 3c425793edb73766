"""Lowering passes, one per file; `pipeline.py` holds the order.

Only the configuration is imported eagerly: tile ops (tileop/) read pass configs and are themselves
lowered by a pass here, so the pipeline is imported on first use."""

from tvm.ir.transform import PassContext  # noqa: F401 - upstream's tilelang.transform.PassContext

from ..ir.pass_config import PassConfigKey, normalize_pass_configs
from .simplify import Simplify, apply_simplify, simplify_prim_func


def lower(*args, **kwargs):
    """See `pipeline.lower`."""
    from .pipeline import lower as _lower

    return _lower(*args, **kwargs)


def lower_program(*args, **kwargs):
    """See `pipeline.lower_program`."""
    from .pipeline import lower_program as _lower_program

    return _lower_program(*args, **kwargs)


def program_passes(program, target, configs):
    """See `pipeline.program_passes`. The pipeline is imported only where one of them is asked for (tl.stream_k):
    a cache hit in a fresh process imports no pass."""
    from ..ir.options import CompileOptions

    if not CompileOptions.of(configs).stream_k:
        return program
    from .pipeline import program_passes as _program_passes

    return _program_passes(program, target, configs)


def LegalizeNegativeIndex():  # noqa: N802 - upstream's pass name
    """See `legalize_negative_index.py`."""
    from .legalize_negative_index import LegalizeNegativeIndex as _pass

    return _pass()


def ThreadSync(scope: str):  # noqa: N802 - upstream's pass name
    """See `thread_sync.py`: barriers before the accesses to `scope` ("shared", "shared.dyn") that need them."""
    from .thread_sync import ThreadSync as _pass

    return _pass(scope)


def VerifyBufferInit():  # noqa: N802 - upstream's pass name
    """See `verify_buffer_init.py`: warns of on-chip buffers read before anything writes them (honours
    TL_DISABLE_BUFFER_INIT_CHECK of the enclosing PassContext)."""
    from .verify_buffer_init import VerifyBufferInit as _pass

    return _pass()


__all__ = ["LegalizeNegativeIndex", "ThreadSync", "VerifyBufferInit", "PassConfigKey", "PassContext", "Simplify", "apply_simplify",
           "lower", "lower_program", "normalize_pass_configs", "program_passes", "simplify_prim_func"]
