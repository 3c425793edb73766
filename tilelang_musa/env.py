"""Every `TILELANG_*` environment variable the package reads, with its type, in one place.

Read at use time (not import time) so that tests and scripts can set them late. Booleans accept
1/true/yes/on (case-insensitive).

Upstream's spelling works too: `from tilelang.env import env` (this module) and `env.TILELANG_CACHE_DIR` reads the
variable as a string (its default when unset); assigning `env.TILELANG_CACHE_DIR = "..."` forces that value for
this process, over the environment, for the package's own reads as well (`None` lifts it).
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

_TRUE = ("1", "true", "yes", "on")


@dataclass(eq=False)
class _Var:
    name: str
    doc: str
    default: str | Callable[[], str] | None = None  # a callable: derived from other variables when read
    _forced_value: Any = None  # `env.<name> = value`: wins over the environment until reset to None

    def raw(self) -> str | None:
        if self._forced_value is not None:
            return str(self._forced_value)
        value = os.environ.get(self.name)
        if value not in (None, ""):
            return value
        return self.default() if callable(self.default) else self.default

    # Read and assigned as an attribute of this module under its variable's name (`env.TILELANG_CACHE_DIR`).
    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self if obj is None else self.raw()

    def __set__(self, obj: Any, value: Any) -> None:
        self._forced_value = value

    def flag(self) -> bool:
        value = self.raw()
        return value is not None and value.strip().lower() in _TRUE

    def path(self) -> Path | None:
        value = self.raw()
        return Path(value).expanduser() if value else None

    def list(self) -> list[str]:
        value = self.raw()
        return [part for part in (value or "").split(",") if part]


MUSA_HOME = _Var("MUSA_HOME", "root of the MUSA SDK (mcc in $MUSA_HOME/bin)")
MUSA_PATH = _Var("MUSA_PATH", "alias of MUSA_HOME")
CACHE_DIR = _Var("TILELANG_CACHE_DIR", "kernel cache root", str(Path("~/.tilelang/cache").expanduser()))
TMP_DIR = _Var("TILELANG_TMP_DIR", "where kernels compiled with the cache off are built (default: <cache root>/tmp)",
               lambda: os.path.join(CACHE_DIR.raw(), "tmp"))
PRINT_ON_COMPILATION = _Var("TILELANG_PRINT_ON_COMPILATION",
                            "1: log each kernel compile (logger 'tilelang', level INFO) with its out_idx", "1")
DISABLE_CACHE = _Var("TILELANG_DISABLE_CACHE", "disable the kernel cache")
PRINT_DEVICE_COMPILE_COMMAND = _Var("TILELANG_PRINT_DEVICE_COMPILE_COMMAND", "print the mcc / host compiler command")
REPLACE_MUSAC = _Var("TILELANG_REPLACE_MUSAC",
                     "compile this .mu file instead of the generated source (replaces the `mu` stage)")
DUMP_STAGES = _Var(
    "TILELANG_DUMP_STAGES",
    "write every compile stage's output into this directory: <kernel>.tir.py, .lowered.py, .mu, .host.json, .so",
)
REPLACE_STAGES = _Var(
    "TILELANG_REPLACE_STAGES",
    "a directory of stage outputs named as TILELANG_DUMP_STAGES writes them (<kernel>.lowered.py, .mu, .host.json, "
    ".so): each file there replaces that stage's output, and the later stages start from it",
)
MCC_EXTRA_ARGS = _Var("TILELANG_MCC_EXTRA_ARGS", "comma-separated extra arguments for mcc")
DUMP_KERNEL_SOURCE = _Var("TILELANG_DUMP_KERNEL_SOURCE", "write the generated MUSA source to this path")
SOURCE_ARCHIVE_DIR = _Var(
    "TILELANG_SOURCE_ARCHIVE_DIR",
    "keep every generated MUSA source in this directory as <kernel>.<arch>.<hash>.mu (e.g. to build them with mcc)",
)
TARGET = _Var("TILELANG_TARGET", "default compile target, e.g. musa or 'musa -arch=mp_22'")
VERBOSE = _Var("TILELANG_VERBOSE", "verbose compilation output")
EXECUTION_BACKEND = _Var(
    "TILELANG_EXECUTION_BACKEND",
    "force the execution backend, over the script's execution_backend=: 'sim' (CPU simulator) or 'cython' (MUSA "
    "device)",
)
SIM_CXX = _Var("TILELANG_SIM_CXX", "host C++ compiler for the simulator backend", "g++")
SIM_ARCH = _Var("TILELANG_SIM_ARCH",
                 "the arch the simulated MUSA device is (default mp_31): where no MUSA device is present, a target "
                 "that names no arch ('musa', 'auto') compiles for it")
TEMPLATES = _Var("TILELANG_TEMPLATES", "a directory holding tl_templates/ to build kernels against instead of the "
                 "package's (development: another revision's headers, as benchmark/bench_simulator.py does)")
SIM_NO_PRELUDE = _Var("TILELANG_SIM_NO_PRELUDE", "1: parse the templates in each simulator build, no precompiled prelude")
SIM_NO_RUNTIME = _Var("TILELANG_SIM_NO_RUNTIME",
                      "1: build each simulator kernel library with its own copy of the simulator instead of linking "
                      "the prebuilt runtime (jit/sim_runtime.py)")
# Read by the simulator itself at every launch (src/tl_templates/sim/sim/config.h); declared here for the record.
SIM_STACK_KB = _Var("TILELANG_SIM_STACK_KB", "stack of each simulated thread, KiB (at least what the kernel needs)")
SIM_WORKERS = _Var("TILELANG_SIM_WORKERS", "OS threads running a launch's blocks in the simulator (default: cores)")
SIM_EXEC = _Var("TILELANG_SIM_EXEC",
                "how the simulator runs a block's threads: auto (default; a loop where no thread can wait, else "
                "fibers), fibers, or loop (refused for a kernel that can wait)")
SIM_CHECK = _Var("TILELANG_SIM_CHECK", "1: checked mode (race detector, threads in a seeded random order)")
SIM_PROFILE = _Var("TILELANG_SIM_PROFILE",
                    "1: count each launch's memory requests and matrix instructions and print them; 2: count only; "
                    "3: count and record the cycle model's timeline (profiler/trace.py)")
SIM_PROFILE_BLOCKS = _Var("TILELANG_SIM_PROFILE_BLOCKS",
                           "while counting (TILELANG_SIM_PROFILE), run only this many of a grid's blocks, evenly spaced")
SIM_SEED = _Var("TILELANG_SIM_SEED", "checked mode's scheduling seed, a whole number (default 1); errors name it")
SIM_WATCHDOG_S = _Var("TILELANG_SIM_WATCHDOG_S",
                      "seconds a simulated launch may go without progress (a thread switch, a barrier); default 60")
DUMP_IR = _Var("TILELANG_DUMP_IR", "write the IR after every pass into TILELANG_DUMP_IR_PATH (or ./tilelang_ir)")
DUMP_LAYOUTS = _Var("TILELANG_DUMP_LAYOUTS", "1: print LayoutInference's decisions to stderr (each fragment's "
                    "layout, each T.Parallel loop's plan, the exchanges), each with the reason it was chosen")
DUMP_IR_PATH = _Var("TILELANG_DUMP_IR_PATH", "directory of TILELANG_DUMP_IR's files (default ./tilelang_ir)")
PASS_DIFF = _Var("TILELANG_PASS_DIFF",
                  "print the IR diff of every lowering pass that changed it: 1/terminal, html (a report in "
                  "TILELANG_PASS_DIFF_OUTPUT), both; 0/off: none")
PASS_DIFF_OUTPUT = _Var("TILELANG_PASS_DIFF_OUTPUT", "directory of TILELANG_PASS_DIFF=html reports",
                        "tmp/pass_diff_output")
PASS_TIMING = _Var("TILELANG_PASS_TIMING",
                   "1: print to stderr, for every compile, a table of the time each lowering pass (ours and TVM's), "
                   "the MUSA source printing and the build took (tools/pass_timing.py)")
PASS_PROFILE = _Var("TILELANG_PASS_PROFILE", "upstream's name of TILELANG_PASS_TIMING")
JIT_DIAGNOSTICS = _Var("TILELANG_JIT_DIAGNOSTICS",
                       "1: log (logger tilelang.jit.diagnostics, level INFO) the start, end and time of every compile "
                       "stage (jit/diagnostics.py)")
PASS_TIMING_THRESHOLD_MS = _Var("TILELANG_PASS_TIMING_THRESHOLD_MS",
                                "TILELANG_PASS_TIMING's table leaves out passes faster than this many milliseconds",
                                lambda: PASS_PROFILE_THRESHOLD_MS.raw() or "0")
PASS_PROFILE_THRESHOLD_MS = _Var("TILELANG_PASS_PROFILE_THRESHOLD_MS",
                                 "upstream's name of TILELANG_PASS_TIMING_THRESHOLD_MS")
LOWER_TRACE = _Var("TL_LOWER_TRACE",
                   "upstream's lower trace: the IR before and after every lowering pass of a compile and the MUSA "
                   "source last; 1/html (a report in TL_LOWER_TRACE_DIR), terminal, both; 0/off: none")
LOWER_TRACE_DIR = _Var("TL_LOWER_TRACE_DIR", "directory of TL_LOWER_TRACE's HTML reports",
                       os.path.join("tmp", "lower_trace_dir"))
FRONTEND_DEBUG = _Var("TILELANG_FRONTEND_DEBUG", "show full tracebacks for kernel errors")
AUTO_TUNING_DISABLE_CACHE = _Var("TILELANG_AUTO_TUNING_DISABLE_CACHE",
                                 "neither read nor write persisted tuning results")
AUTO_TUNING_CPU_COUNTS = _Var("TILELANG_AUTO_TUNING_CPU_COUNTS", "autotuner worker processes (-1: automatic)", "-1")
AUTO_TUNING_CPU_UTILITIES = _Var("TILELANG_AUTO_TUNING_CPU_UTILITIES", "fraction of the CPUs the autotuner uses",
                                 "0.9")
AUTO_TUNING_MAX_CPU_COUNT = _Var("TILELANG_AUTO_TUNING_MAX_CPU_COUNT", "cap on autotuner worker processes (-1: none)",
                                 "-1")
AUTO_TUNING_EXECUTOR = _Var("TILELANG_AUTO_TUNING_EXECUTOR",
                            "where the autotuner evaluates configs when executor= is not given: local (forked "
                            "processes, default) or ray (Ray tasks; RAY_ADDRESS picks the cluster)", "local")


def musa_home() -> Path | None:
    return MUSA_HOME.path() or MUSA_PATH.path()


ALL = [v for v in list(globals().values()) if isinstance(v, _Var)]


def exported() -> dict[str, str]:
    """The TILELANG_* variables a process started for this one should see (a Ray worker, a child): those of the
    environment, with the values forced by assignment (`env.TILELANG_CACHE_DIR = ...`) over them."""
    out = {k: v for k, v in os.environ.items() if k.startswith("TILELANG_")}
    out.update({v.name: str(v._forced_value) for v in ALL
                if v._forced_value is not None and v.name.startswith("TILELANG_")})
    return out


_PASS_DIFF_OFF = ("", "0", "false", "no", "off")


def get_pass_diff_mode() -> str | None:
    """TILELANG_PASS_DIFF as a mode: None (off), "terminal", "html" or "both". Any other value that is not an
    off value means terminal, as a plain `1` does."""
    value = (PASS_DIFF.raw() or "").strip().lower()
    if value in _PASS_DIFF_OFF:
        return None
    return value if value in ("html", "both") else "terminal"


def is_pass_profile_enabled() -> bool:
    """TILELANG_PASS_TIMING, or upstream's TILELANG_PASS_PROFILE, is on."""
    return PASS_TIMING.flag() or PASS_PROFILE.flag()


def get_pass_profile_threshold_ms() -> float:
    """TILELANG_PASS_TIMING_THRESHOLD_MS (else TILELANG_PASS_PROFILE_THRESHOLD_MS) in milliseconds; 0 when unset."""
    return parse_threshold_ms(PASS_TIMING_THRESHOLD_MS.raw() or "0", PASS_TIMING_THRESHOLD_MS.name)


def parse_threshold_ms(value: Any, name: str) -> float:
    """A pass-timing threshold: a finite number of milliseconds, at least 0; anything else is an error naming it."""
    try:
        ms = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of milliseconds, got {value!r}") from None
    if not 0 <= ms < float("inf"):
        raise ValueError(f"{name} must be a finite number of milliseconds, at least 0; got {value!r}")
    return ms


def parse_lower_trace_mode(value: str | None) -> str | None:
    """A TL_LOWER_TRACE value as a mode, as upstream reads it: None (off: unset, 0, off, false, no), "terminal",
    "html" or "both"; 1/on/true/yes and any other value mean "html"."""
    text = (value or "").strip().lower()
    if text in _PASS_DIFF_OFF:
        return None
    return text if text in ("terminal", "both") else "html"


def get_lower_trace_mode() -> str | None:
    return parse_lower_trace_mode(LOWER_TRACE.raw())


def get_lower_trace_dir() -> str:
    return LOWER_TRACE_DIR.raw() or os.path.join("tmp", "lower_trace_dir")


def is_print_on_compilation_enabled() -> bool:
    return PRINT_ON_COMPILATION.flag()


class _Environment(types.ModuleType):
    """This module's type: each variable is also its attribute `TILELANG_...` (read, or assigned to force it)."""


for _v in ALL:
    setattr(_Environment, _v.name, _v)
sys.modules[__name__].__class__ = _Environment
env = sys.modules[__name__]  # upstream's `from tilelang.env import env`
