"""The compile options: one typed, frozen object built once from a user's `pass_configs`.

Every PassConfigKey the compiler reads is a field here, carrying its key, default and doc (docs/_ext builds the
PassConfig table from them); the passes and tile ops read attributes (`options.disable_vectorize`), never keys.
`CompileOptions.of` accepts a dict in any spelling pass_config.normalize_pass_configs accepts (it validates the
keys and warns once for keys without effect on MUSA) or a CompileOptions, so a pass can be called as
`LayoutInference({})` as well as from the pipeline. `given` keeps the normalized dict the user asked for, for the
kernel cache key and the kernel's metadata.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from .pass_config import PassConfigKey as K
from .pass_config import _truthy, normalize_pass_configs


def _flag(key: K, doc: str, default: bool = False) -> Any:
    """A switch: a truthy value of `key` ("1", "true", True, 1...) turns it on."""
    return field(default=default, metadata={"key": key, "doc": doc, "flag": True})


def _value(key: K, doc: str) -> Any:
    """A value taken as given (None when unset); its reader parses and checks it."""
    return field(default=None, hash=False, metadata={"key": key, "doc": doc, "flag": False})


@dataclass(frozen=True)
class CompileOptions:
    given: Mapping[K, Any] = field(default_factory=dict, hash=False, repr=False)
    # Gemm instruction paths.
    disable_sqmma: bool = _flag(K.TL_DISABLE_SQMMA, "no T.gemm uses mp_31's SQMMA (TL_DISABLE_WGMMA means the same)")
    disable_ph1_wmma: bool = _flag(K.TL_DISABLE_PH1_WMMA, "no T.gemm uses mp_31's WMMA")
    # Safety guards.
    disable_safe_memory_access: bool = _flag(K.TL_DISABLE_SAFE_MEMORY_ACCESS,
                                             "global accesses that may leave their tensor are not guarded")
    disable_safe_copy_predication: bool = _flag(K.TL_DISABLE_SAFE_COPY_PREDICATION,
                                                "T.copy elements outside the tensor are not predicated off")
    disable_safe_robust_copy_predication: bool = _flag(K.TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION,
                                                       "robust (bounds-checked) asynchronous copies are not "
                                                       "predicated besides")
    disable_thread_storage_sync: bool = _flag(K.TL_DISABLE_THREAD_STORAGE_SYNC,
                                              "no barrier is inserted for shared memory: the user writes them")
    # Indices.
    disable_index_type_promotion: bool = _flag(K.TL_DISABLE_INDEX_TYPE_PROMOTION,
                                               "32-bit indices that may overflow are not widened to 64 bits")
    config_index_bitwidth: Any = _value(K.TL_CONFIG_INDEX_BITWIDTH, "the index width, 32 or 64")
    # Scheduling.
    disable_warp_specialized: bool = _flag(K.TL_DISABLE_WARP_SPECIALIZED,
                                           "pipelined TME loops are not warp specialized")
    disable_tma_lower: bool = _flag(K.TL_DISABLE_TMA_LOWER, "no T.copy is lowered to a TME copy implicitly")
    enable_async_copy: bool = _flag(K.TL_ENABLE_ASYNC_COPY, "pipelined loads may be asynchronous copies",
                                    default=True)
    disable_vectorize: bool = _flag(K.TIR_DISABLE_VECTORIZE, "no loop is vectorized")
    stream_k: Any = _value(K.TL_STREAM_K, "a stream-K schedule of data-parallel GEMM kernels: True (one persistent "
                           "block per MP) or a number of persistent blocks; False or unset: the grid as written")
    disable_buffer_init_check: bool = _flag(K.TL_DISABLE_BUFFER_INIT_CHECK, "no warning for shared, fragment or "
                                            "local buffers read before anything writes them (VerifyBufferInit)")
    disable_shared_memory_reuse: bool = _flag(K.TL_DISABLE_SHARED_MEMORY_REUSE,
                                              "every shared tile has its own bytes of the arena, even where the "
                                              "lifetimes of two tiles do not overlap")
    enable_aggressive_shared_memory_merge: bool = _flag(
        K.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE,
        "the finer plan of the dynamic arena even where the kernel fits without it: tiles used only in one "
        "block-uniform branch, and the compiler's temporaries statement by statement inside the loops and branches "
        "every thread runs alike (by default only a kernel past the target's limit gets it)")
    # Device compiler.
    enable_fast_math: bool = _flag(K.TL_ENABLE_FAST_MATH, "the device compiler runs with fast math")
    disable_fast_math: bool = _flag(K.TL_DISABLE_FAST_MATH, "fast math stays off (wins over enable_fast_math)")
    device_compile_flags: Any = _value(K.TL_DEVICE_COMPILE_FLAGS, "extra device compiler flags (a string or list)")
    # Debugging output.
    emit_line_directives: bool = _flag(K.TL_EMIT_LINE_DIRECTIVES, "the MUSA C has a `#line N \"file.py\"` before "
                                       "each statement's code, naming the user's line (ir/source_lines.py)")
    enable_dump_ir: bool = _flag(K.TL_ENABLE_DUMP_IR, "the IR is written after every pass")
    dump_ir_path: Any = _value(K.TL_DUMP_IR_PATH, "where TL_ENABLE_DUMP_IR writes")
    musa_kernels_output_dir: Any = _value(K.MUSA_KERNELS_OUTPUT_DIR,
                                          "a folder that keeps each kernel's source and library")
    pass_profile: bool = _flag(K.TL_PASS_PROFILE, "the time of every pass is reported")
    pass_profile_threshold_ms: Any = _value(K.TL_PASS_PROFILE_THRESHOLD_MS,
                                            "passes faster than this are left out of the report")

    @classmethod
    def of(cls, configs: CompileOptions | Mapping[Any, Any] | None) -> CompileOptions:
        """The options of `configs`: itself when it is already options, else the validated dict's."""
        if isinstance(configs, CompileOptions):
            return configs
        given = normalize_pass_configs(configs)
        values = {}
        for f in option_fields():
            raw = given.get(f.metadata["key"], f.default)
            values[f.name] = _truthy(raw) if f.metadata["flag"] else raw
        return cls(given=given, **values)

    def with_(self, **changes: Any) -> CompileOptions:
        """These options with some fields changed (and `given` changed to match)."""
        keys = {f.name: f.metadata["key"] for f in option_fields()}
        return dataclasses.replace(self, given={**self.given, **{keys[n]: v for n, v in changes.items()}}, **changes)


def option_fields() -> tuple[dataclasses.Field, ...]:
    """The fields that stand for a PassConfigKey (all but `given`)."""
    return tuple(f for f in dataclasses.fields(CompileOptions) if "key" in f.metadata)


def key_of(name: str) -> K:
    """The PassConfigKey of the option named `name` (for messages that tell the user what to set)."""
    return next(f.metadata["key"] for f in option_fields() if f.name == name)


def field_of(key: K) -> dataclasses.Field | None:
    """The option that reads `key`, None for keys without one (no effect, or the same effect as another)."""
    return next((f for f in option_fields() if f.metadata["key"] is key), None)


__all__ = ["CompileOptions", "field_of", "key_of", "option_fields"]
