"""The stages of a compile, their files, and the metadata that lets a kernel reload without running them.

    tir      the program as given (TVMScript)                                        <kernel>.tir.py
    lowered  the device function(s) after the pass pipeline (TVMScript)              <kernel>.lowered.py
    mu       the MUSA translation unit the toolchain builds: template includes, the
             device kernels (C++ printer) and the host wrapper `call_packed`         <kernel>.mu
    host     what the host side needs to launch it: the parameters (ParamSpecs), the
             size parameters bound from tensor shapes, each kernel's launch          <kernel>.host.json
    bin      the library built from `mu` by the backend's toolchain                  <kernel>.so

`<kernel>` is the program's global symbol (`@tilelang.jit(name=...)` sets it), cut to a file system's name length
with a hash of the whole symbol where it is longer (`file_stem`). A cache entry holds these files
and `metadata.json` (`KernelMetadata`): key, target, backend, options, the host stage, the stage files, and where
the device kernels and the host wrapper sit in `mu` (None when `mu` was replaced).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..launcher import ParamSpec
from ..launcher.assume import HostAssume

STAGES = ("tir", "lowered", "mu", "host", "bin")
STAGE_SUFFIX = {"tir": "tir.py", "lowered": "lowered.py", "mu": "mu", "host": "host.json", "bin": "so"}
REPLACEABLE = ("lowered", "mu", "host", "bin")  # `tir` is the program itself: pass another one instead
METADATA = "metadata.json"
FORMAT = 1  # of metadata.json; part of the cache key


MAX_STEM_BYTES = 200  # a file name is at most 255 bytes on common file systems; the longest suffix is 14


def file_stem(kernel: str) -> str:
    """The stem of a kernel's files: its global symbol, or where that is too long for a file name, its start and a
    hash of the whole (distinct symbols keep distinct stems)."""
    if len(kernel.encode()) <= MAX_STEM_BYTES:
        return kernel
    return f"{kernel[:MAX_STEM_BYTES - 17]}-{hashlib.sha256(kernel.encode()).hexdigest()[:16]}"


def stage_file(kernel: str, stage: str) -> str:
    return f"{file_stem(kernel)}.{STAGE_SUFFIX[stage]}"


@dataclass(frozen=True)
class Launch:
    """One `__global__` kernel of the program and how the host wrapper launches it."""

    name: str
    grid: tuple[str, ...]  # C expressions over the scalar parameters
    block: tuple[int, ...]
    dynamic_smem_bytes: int | str  # bytes, or a C expression over the scalar parameters (a run-time tile size)


@dataclass(frozen=True)
class HostInfo:
    """The `host` stage."""

    params: tuple[ParamSpec, ...]
    size_params: tuple[str, ...]  # scalar parameters (T.dynamic sizes) taken from the tensors' shapes
    launches: tuple[Launch, ...]  # in launch order
    local_bytes: int = 0  # per-thread local arrays (the simulator sizes its fiber stacks by it)
    assumes: tuple[HostAssume, ...] = ()  # the `T.assume`s the launcher checks at every call (host_assumes.py)

    def to_json(self) -> dict[str, Any]:
        return {"params": [asdict(p) for p in self.params], "size_params": list(self.size_params),
                "launches": [asdict(launch) for launch in self.launches], "local_bytes": self.local_bytes,
                "assumes": [asdict(a) for a in self.assumes]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "HostInfo":
        return cls(tuple(ParamSpec(**p) for p in data["params"]), tuple(data["size_params"]),
                   tuple(Launch(d["name"], tuple(d["grid"]), tuple(d["block"]), d["dynamic_smem_bytes"])
                         for d in data["launches"]),
                   int(data.get("local_bytes", 0)), tuple(HostAssume(**a) for a in data.get("assumes", ())))


@dataclass(frozen=True)
class KernelMetadata:
    name: str  # the program's global symbol: the stem of the stage files
    target: dict[str, Any]  # the Target as JSON (its str)
    execution_backend: str
    toolchain: str  # Toolchain.identity() of the toolchain that built `bin`
    options: dict[str, Any]  # out_idx, pass_configs, compile_flags, fast_math
    host: HostInfo
    sections: dict[str, list[int]] | None  # "device" / "host": [start, end) in `mu`; None when `mu` was replaced
    replaced: tuple[str, ...] = ()  # stages whose output came from TILELANG_REPLACE_* instead
    key: str | None = None  # the cache key (None: built with the cache off)
    version: str = ""  # of tilelang_musa
    stages: dict[str, str] = field(default_factory=dict)  # stage -> file name in the entry
    # Line of `mu` -> the user's (file, line) where `mu` has no `#line` directives (source_lines.table_to_json):
    # the simulator's reports name the user's line from it. None: no table (another backend, a replaced source).
    user_lines: dict | None = None
    # The user's lines of the statements of the program that built the entry (program_lines.py), in the order a
    # structurally equal program served from the cache has its own: `user_lines` is moved to that one's lines.
    program_lines: list | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["host"] = self.host.to_json()
        data["replaced"] = list(self.replaced)
        data["format"] = FORMAT
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "KernelMetadata":
        if data.get("format") != FORMAT:
            raise ValueError(f"kernel metadata format {data.get('format')!r}; this tilelang_musa reads {FORMAT}")
        fields = {k: v for k, v in data.items() if k != "format"}
        fields["host"] = HostInfo.from_json(data["host"])
        fields["replaced"] = tuple(data.get("replaced", ()))
        return cls(**fields)

    def write(self, directory: Path) -> None:
        (directory / METADATA).write_text(json.dumps(self.to_json(), indent=1, sort_keys=True))

    @classmethod
    def read(cls, directory: Path) -> "KernelMetadata":
        return cls.from_json(json.loads((directory / METADATA).read_text()))


def plain(value: Any) -> Any:
    """`value` as JSON can hold it (options are user data: tuples become lists, anything else its str)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return str(value)
