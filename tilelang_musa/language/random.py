"""Per-thread random numbers, upstream's names: `T.rng_init`, `T.rng_rand`, `T.rng_rand_float`.

They call murand, MUSA's port of cuRAND's device API (`murand_kernel.h`, same functions and numerics). `T.rng_init`
declares one generator state per thread and seeds it like `curand_init(seed, subsequence, offset, &state)`; the
`T.rng_rand*` calls after it draw from the most recent `T.rng_init` of the kernel. The generated code reads

    TL_RNG_DECLARE(murandStatePhilox4_32_10_t(), 0);                  // random.h: murandStatePhilox4_32_10_t tl_rng_state_0
    murand_init(seed, subsequence, offset, TL_RNG_STATE(0));
    A[i] = murand(TL_RNG_STATE(0));

so the codegen needs no rule of its own: both macros are plain `call_extern`s (tl_templates/musa/random.h).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from .builder import as_expr, kernel_trace

# upstream's (cuRAND) generator names -> murand's state types
GENERATORS = {
    "curandStatePhilox4_32_10_t": "murandStatePhilox4_32_10_t",
    "curandStateXORWOW_t": "murandStateXORWOW_t",
    "curandStateMRG32k3a_t": "murandStateMRG32k3a_t",
}
_DISTRIBUTIONS = ("uniform", "normal")


@dataclass(frozen=True)
class _Generator:
    index: int  # the state is tl_rng_state_<index>
    scope: Any  # the IRBuilder frame that was innermost at T.rng_init: the C++ block that declares the state
    lineno: int


# T.Kernel frame -> its generators in order of T.rng_init
_GENERATORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _u64(trace: Any, construct: str, what: str, value: Any) -> Any:
    value = as_expr(value)
    if isinstance(value, bool) or not isinstance(value, (int, tvm.ir.Expr)):
        raise trace.error(f"{construct}: {what} must be an integer; got {value!r}")
    if isinstance(value, int):
        if not 0 <= value < 2**64:
            raise trace.error(f"{construct}: {what} must be in [0, 2**64) (an unsigned 64-bit integer); got {value}")
        return tirx.const(value, "uint64")
    dtype = tvm.DataType(str(value.ty.dtype))
    if dtype.type_code not in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT) or dtype.lanes != 1:
        raise trace.error(f"{construct}: {what} must be an integer expression; got {value.ty.dtype}")
    return value if str(value.ty.dtype) == "uint64" else tirx.Cast("uint64", value)


def _state(index: int) -> Any:
    return tirx.call_extern("int32", "TL_RNG_STATE", tirx.const(index, "int32"))


def rng_init(seed: Any, seq: Any = None, off: Any = 0, generator: str = "curandStatePhilox4_32_10_t") -> None:
    """Declare this thread's generator and seed it as `curand_init(seed, seq, off, &state)` would: `seed` picks the
    sequence, `seq` the subsequence (default: the thread's `threadIdx.x + blockIdx.x * blockDim.x`), `off` the
    number of outputs skipped in it. `generator`: "curandStatePhilox4_32_10_t" (default), "curandStateXORWOW_t" or
    "curandStateMRG32k3a_t". A later `T.rng_init` starts a new generator for the calls after it.
    Example: T.rng_init(42, 0, bx * 128 + tx * 4)"""
    trace = kernel_trace("T.rng_init")
    if generator not in GENERATORS:
        names = ", ".join(f'"{name}"' for name in GENERATORS)
        raise trace.error(f"T.rng_init: unknown generator {generator!r}; expected one of {names}")
    kernel = trace.kernel
    if seq is None:
        seq = kernel.thread_vars[0] + kernel.block_vars[0] * kernel.threads[0]
    args = [_u64(trace, "T.rng_init", what, value) for what, value in (("seed", seed), ("seq", seq), ("off", off))]
    generators = _GENERATORS.setdefault(kernel, [])
    index = len(generators)
    scope = IRBuilder.current().frames[-1]
    generators.append(_Generator(index, scope, trace.loc.lineno if trace.loc is not None else 0))
    fresh = tirx.call_extern("int32", GENERATORS[generator])  # prints as `murandState..._t()`, a value of the type
    Tb.evaluate(tirx.call_extern("void", "TL_RNG_DECLARE", fresh, tirx.const(index, "int32")))
    Tb.evaluate(tirx.call_extern("void", "murand_init", *args, _state(index)))


def _current(construct: str) -> Any:
    trace = kernel_trace(construct)
    generators = _GENERATORS.get(trace.kernel)
    if not generators:
        raise trace.error(f"{construct}: no generator to draw from; call T.rng_init(seed, ...) earlier in the kernel")
    latest = generators[-1]
    if not any(frame.same_as(latest.scope) for frame in IRBuilder.current().frames):
        raise trace.error(f"{construct}: the generator of T.rng_init at line {latest.lineno} is out of scope here "
                          "(it was initialised inside a loop or branch that has ended); call T.rng_init in a block "
                          "that encloses this call")
    return _state(latest.index)


def rng_rand() -> Any:
    """A uint32 from the generator of the latest `T.rng_init` (`murand`); advances it by one output."""
    return tirx.call_extern("uint32", "murand", _current("T.rng_rand"))


def rng_rand_float(bit: int = 32, dist: str = "uniform") -> Any:
    """A float32 (`bit=32`) or float64 (`bit=64`) from the generator of the latest `T.rng_init`: uniform in (0, 1]
    (`murand_uniform[_double]`) or standard normal (`murand_normal[_double]`, Box-Muller: every second call returns
    the value the previous one computed)."""
    trace = kernel_trace("T.rng_rand_float")
    if isinstance(bit, bool) or bit not in (32, 64):
        raise trace.error(f"T.rng_rand_float: bit must be 32 or 64; got {bit!r}")
    if dist not in _DISTRIBUTIONS:
        raise trace.error(f'T.rng_rand_float: dist must be "uniform" or "normal"; got {dist!r}')
    state = _current("T.rng_rand_float")
    name = f"murand_{dist}" + ("_double" if bit == 64 else "")
    return tirx.call_extern(f"float{bit}", name, state)
