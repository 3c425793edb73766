"""Ahead-of-time C: a compiled kernel as a C header and a C source that a C or C++ program calls without Python.

    <name>.h   int <name>(<the kernel's parameters>, void* stream);   0, or -1 with <name>_last_error() saying why
               const char* <name>_last_error(void);
               int <name>_load(void);                                  loads the library now (else at the first call)
    <name>.c   the kernel library its backend built (mcc's: device code and its launch wrapper; the simulator's: the
               same MUSA C built for the CPU) embedded as bytes, loaded with dlopen from an anonymous file at the
               first call, and the typed entry point, which checks what C can (NULL tensors, the pointer alignment
               the kernel's vector accesses and TME descriptors need) and calls the library's `call_packed`.

Build the program with `cc main.c <name>.c -ldl -lpthread`. Every symbol is prefixed with `<name>`, and the
library is opened with RTLD_LOCAL, so several kernels live in one program. Shapes are those the kernel was compiled
for (the header lists them); sizes of `T.dynamic` dimensions are parameters the caller passes. The simulator's
kernels take host memory and ignore `stream`; a MUSA device's take device memory and a musaStream_t (NULL: the
default stream), and need the MUSA runtime (libmusart) where the dynamic loader finds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._version import __version__
from ..errors import TileLangError
from ..launcher import HostAssume, HostExpr, ParamSpec
from .kernel import JITKernel

# C types of tensor elements a C program spells natively; the others (16- and 8-bit floats) are `void*`.
_C_ELEMENT = {
    "float32": "float", "float64": "double", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
    "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "bool": "uint8_t",
}
# Scalars are passed by address to `call_packed`, which reads them as their MUSA C type: any C type of the same
# size and representation works, so 16-bit float scalars are their bits.
_C_SCALAR = {**_C_ELEMENT, "float16": "uint16_t", "bfloat16": "uint16_t"}
_C_RESERVED = frozenset(
    "main auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while "
    "bool class delete new operator private protected public template this throw try virtual namespace".split())


@dataclass(frozen=True)
class AotSources:
    header: str
    source: str


def _c_param(param: ParamSpec) -> str:
    if param.kind == "scalar":
        if param.dtype not in _C_SCALAR:
            raise TileLangError(f"aot: scalar parameter {param.name} has dtype {param.dtype}, which has no C type")
        return f"{_C_SCALAR[param.dtype]} {param.name}"
    element = _C_ELEMENT.get(param.dtype, "void") if param.kind == "tensor" else "void"
    return f"{element}* {param.name}"


def _describe(param: ParamSpec, size_params: tuple[str, ...]) -> str:
    if param.kind == "scalar":
        what = "a size: the extent named so in the tensors' shapes" if param.name in size_params else "a scalar"
        bits = " (its bits)" if param.dtype in ("float16", "bfloat16") else ""
        return f"{param.name}: {param.dtype}{bits}, {what}"
    if param.kind == "pointer":
        return f"{param.name}: a raw pointer ({param.dtype} elements)"
    shape = ", ".join(str(d) for d in param.shape)
    layout = "row-major" if param.strides is None else f"strides ({', '.join(str(s) for s in param.strides)})"
    role = ("scratch that must hold zero bytes at each launch (inter-block flags)" if param.zeroed else
            "scratch the kernel writes before reading (any content)" if param.is_workspace else
            "output" if param.is_output else "input")
    notes = [role]
    if param.unused:
        notes.append("unused by the kernel: may be NULL")
    elif param.align > 1:
        notes.append(f"{param.align}-byte aligned")
    return f"{param.name}: {param.dtype}[{shape}], {layout}; {'; '.join(notes)}"


def _guard(name: str) -> str:
    return f"TILELANG_AOT_{name.upper()}_H"


def print_header(kernel: JITKernel, name: str) -> str:
    meta = kernel.metadata
    params = kernel.params
    signature = ", ".join([_c_param(p) for p in params] + ["void* stream"])
    described = "\n".join(f" *   {_describe(p, meta.host.size_params)}" for p in params) or " *   (none)"
    launches = "\n".join(f" *   {launch.name}<<<({', '.join(launch.grid)}), ({', '.join(map(str, launch.block))}), "
                         f"{launch.dynamic_smem_bytes}>>>" for launch in meta.host.launches)
    memory = ("host memory (the CPU simulator)" if kernel.backend.device == "cpu" else "MUSA device memory")
    target = f"musa -arch={kernel.target.attrs['arch']}"
    return f"""\
/* {name}.h: the TileLang kernel `{meta.name}` for {target}, built by `{kernel.backend.name}`.
 * Generated by tilelang_musa {__version__} (python -m tilelang.tools.aot); pair with {name}.c.
 *
 * Parameters, in order (tensors in {memory}):
{described}
 * Launches, in order:
{launches}
 */
#ifndef {_guard(name)}
#define {_guard(name)}

#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

#define {name.upper()}_TARGET "{target}"
#define {name.upper()}_BACKEND "{kernel.backend.name}"

/* Runs the kernel; 0 on success, else -1 and {name}_last_error() says why. `stream`: a musaStream_t (NULL: the
 * default stream); the simulator ignores it and returns when the kernel has finished. */
int {name}({signature});

/* The reason for the last failure of {name} or {name}_load (not thread-safe: one message for the process). */
const char* {name}_last_error(void);

/* Loads the embedded kernel library, as the first call does; 0 on success, else -1. */
int {name}_load(void);

#ifdef __cplusplus
}}
#endif

#endif /* {_guard(name)} */
"""


def _byte_rows(data: bytes, per_row: int = 20) -> str:
    return ",\n".join("  " + ",".join(str(b) for b in data[i:i + per_row]) for i in range(0, len(data), per_row))


def _checks(name: str, params: list[ParamSpec]) -> list[str]:
    lines = []
    for p in params:
        if p.kind == "scalar" or p.unused:
            continue
        lines += [f"  if ({p.name} == NULL) return {name}_fail(\"{name}: {p.kind} {p.name} is NULL\");"]
        if p.align > 1:
            lines += [f"  if ((uintptr_t){p.name} % {p.align} != 0)",
                      f"    return {name}_fail(\"{name}: {p.name} must be {p.align}-byte aligned\");"]
    return lines


# T.assume conditions over integer scalars in C (int64_t, as the launcher's unbounded integers for the sizes C can
# pass); the dividing ops are helpers that note a zero divisor, which breaks the assume as in the launcher.
_C_OPS = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "floordiv": "{n}_floordiv({}, {}, &zero)",
          "floormod": "{n}_floormod({}, {}, &zero)", "div": "{n}_truncdiv({}, {}, &zero)",
          "mod": "{n}_truncmod({}, {}, &zero)", "min": "{n}_min({}, {})", "max": "{n}_max({}, {})",
          "eq": "({} == {})", "ne": "({} != {})", "lt": "({} < {})", "le": "({} <= {})", "gt": "({} > {})",
          "ge": "({} >= {})", "and": "({} && {})", "or": "({} || {})", "not": "(!{})", "select": "({} ? {} : {})",
          "int": "{}", "bool": "({} != 0)"}


def _c_expr(name: str, x: object) -> str | None:
    """`x` as C over the integer scalar parameters, or None where it is not integer arithmetic."""
    if isinstance(x, HostExpr):
        args = [_c_expr(name, a) for a in x.args]
        if x.op not in _C_OPS or None in args:
            return None
        return _C_OPS[x.op].format(*args, n=name)
    if isinstance(x, str):
        return f"(int64_t){x}"
    return f"(int64_t){x}" if isinstance(x, int) else None


def _percent(text: str) -> str:
    return text.replace("%", "%%")  # a literal in a printf format


def _assume_source(name: str, params: list[ParamSpec], assumes: tuple[HostAssume, ...]) -> tuple[str, list[str]]:
    """The helpers and the entry's checks of the kernel's host-evaluable `T.assume`s (launcher/assume.py) whose
    symbols are all integer scalar parameters (the sizes among them); an assume over a floating-point scalar is
    left to the caller, and the header's comment says so."""
    ints = {p.name for p in params if p.kind == "scalar" and p.dtype in _C_SCALAR
            and not p.dtype.startswith(("float", "bfloat"))}
    lines = []
    for assume in assumes:
        condition = _c_expr(name, assume.condition) if set(assume.symbols) <= ints else None
        text = assume.text.replace("\\", "\\\\").replace('"', '\\"').replace("*/", "* /")
        if condition is None:
            lines.append(f"  /* not checked here (not integer arithmetic over the parameters): Assume: {text} */")
            continue
        shown = ", ".join(f"{s} = %lld" for s in assume.symbols)
        values = "".join(f", (long long){s}" for s in assume.symbols)
        where = f" (T.assume at {assume.where})".replace("\\", "/").replace('"', "'") if assume.where else ""
        lines += ["  {",
                  "    int zero = 0;",
                  f"    if (!{condition} || zero) {{",
                  f"      snprintf({name}_error, sizeof {name}_error, \"{name}: Assume: {_percent(text)} does not "
                  f"hold for this call: {shown}{_percent(where)}\"{values});",
                  "      return -1;",
                  "    }",
                  "  }"]
    if not lines:
        return "", []
    helpers = f"""\
/* TIR's integer division and remainder for the T.assume checks: floor rounding, or C's truncating one. */
static inline int64_t {name}_floordiv(int64_t a, int64_t b, int* zero) {{
  if (b == 0) {{ *zero = 1; return 0; }}
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}}
static inline int64_t {name}_floormod(int64_t a, int64_t b, int* zero) {{
  if (b == 0) {{ *zero = 1; return 0; }}
  return a % b + (((a % b != 0) && ((a % b < 0) != (b < 0))) ? b : 0);
}}
static inline int64_t {name}_truncdiv(int64_t a, int64_t b, int* zero) {{
  if (b == 0) {{ *zero = 1; return 0; }}
  return a / b;
}}
static inline int64_t {name}_truncmod(int64_t a, int64_t b, int* zero) {{
  if (b == 0) {{ *zero = 1; return 0; }}
  return a % b;
}}
static inline int64_t {name}_min(int64_t a, int64_t b) {{ return a < b ? a : b; }}
static inline int64_t {name}_max(int64_t a, int64_t b) {{ return a > b ? a : b; }}

"""
    return helpers, lines


def print_source(kernel: JITKernel, name: str) -> str:
    params = kernel.params
    library = kernel.library_path.read_bytes()
    return f"""\
/* {name}.c: the TileLang kernel `{kernel.metadata.name}` ({name}.h), its library embedded.
 * Generated by tilelang_musa {__version__} (python -m tilelang.tools.aot). Link with -ldl -lpthread. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "{name}.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel library ({len(library)} bytes), as `{kernel.backend.name}` built it. */
static const unsigned char {name}_library[{len(library)}] = {{
{_byte_rows(library)}
}};

static int (*{name}_call_packed)(void** args, int num_args, void* stream);
static const char* (*{name}_library_error)(void);
static char {name}_error[1024];
static pthread_once_t {name}_once = PTHREAD_ONCE_INIT;

static int {name}_fail(const char* message) {{
  snprintf({name}_error, sizeof {name}_error, "%s", message);
  return -1;
}}

static int {name}_write_all(int fd) {{
  size_t done = 0;
  while (done < sizeof {name}_library) {{
    ssize_t n = write(fd, {name}_library + done, sizeof {name}_library - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += (size_t)n;
  }}
  return 0;
}}

{_loader_source(name)}{_entry_source(name, params, kernel.metadata.host.assumes)}"""


def _loader_source(name: str) -> str:
    """The C that writes the embedded library out, loads it once and looks up its entry points."""
    return f"""\
/* An anonymous in-memory file (memfd) holding the library, or where there is none (no memfd, no /proc, or built
 * with -DTILELANG_AOT_NO_MEMFD) a temporary file in $TMPDIR deleted once loaded. A memfd stays open: its
 * /proc/self/fd path must never name another library. */
static void* {name}_open_library(void) {{
  char path[512];
  void* handle = NULL;
  int fd = -1;
#if defined(SYS_memfd_create) && !defined(TILELANG_AOT_NO_MEMFD)
  fd = (int)syscall(SYS_memfd_create, "{name}", 0);
  if (fd >= 0) {{
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if ({name}_write_all(fd) == 0) handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle != NULL) return handle;
    close(fd);
  }}
#endif
  {{
    const char* dir = getenv("TMPDIR");
    int length = snprintf(path, sizeof path, "%s/{name}.XXXXXX", dir != NULL && *dir != '\\0' ? dir : "/tmp");
    fd = length > 0 && (size_t)length < sizeof path ? mkstemp(path) : -1;
    if (fd < 0) {{
      snprintf({name}_error, sizeof {name}_error, "{name}: cannot create %s: %s", path, strerror(errno));
      return NULL;
    }}
    if ({name}_write_all(fd) == 0) {{
      handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (handle == NULL) snprintf({name}_error, sizeof {name}_error, "{name}: %s", dlerror());
    }} else {{
      snprintf({name}_error, sizeof {name}_error, "{name}: cannot write %s: %s", path, strerror(errno));
    }}
    unlink(path);
    close(fd);
  }}
  return handle;
}}

static void {name}_load_once(void) {{
  void* handle = {name}_open_library();
  if (handle == NULL) return;
  /* through void** : ISO C has no conversion between object and function pointers */
  *(void**)&{name}_call_packed = dlsym(handle, "call_packed");
  *(void**)&{name}_library_error = dlsym(handle, "get_last_error");
  if ({name}_call_packed == NULL || {name}_library_error == NULL) {{
    {name}_call_packed = NULL;
    {name}_fail("{name}: the embedded library has no call_packed/get_last_error");
  }}
}}

int {name}_load(void) {{
  pthread_once(&{name}_once, {name}_load_once);
  return {name}_call_packed != NULL ? 0 : -1;
}}

const char* {name}_last_error(void) {{
  return {name}_error;
}}

"""


def _entry_source(name: str, params: list, assumes: tuple[HostAssume, ...] = ()) -> str:
    """The C entry point: the checks of the arguments and of the kernel's `T.assume`s, then the call through the
    loaded library."""
    signature = ", ".join([_c_param(p) for p in params] + ["void* stream"])
    args = ", ".join(f"(void*)&{p.name}" for p in params)
    arg_array = f"void* args[] = {{{args}}};" if params else "void** args = NULL;"
    helpers, assume_checks = _assume_source(name, params, assumes)
    checks = "\n".join(_checks(name, params) + assume_checks)
    return f"""\
{helpers}int {name}({signature}) {{
  if ({name}_load() != 0) return -1;
{checks}
  {arg_array}
  int rc = {name}_call_packed(args, {len(params)}, stream);
  if (rc != 0) {name}_fail({name}_library_error());
  return rc;
}}
"""


def write_aot(kernel: JITKernel, directory: str | Path, name: str | None = None) -> tuple[Path, Path]:
    """Write `<name>.h` and `<name>.c` for `kernel` into `directory` (`name`: the kernel's by default)."""
    name = name or kernel.name
    if not name.isidentifier() or not name.isascii() or name in _C_RESERVED:
        raise TileLangError(f"aot: the name {name!r} must be a C identifier other than main or a keyword (it names "
                            "the entry point and prefixes every symbol)")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    header, source = directory / f"{name}.h", directory / f"{name}.c"
    header.write_text(print_header(kernel, name))
    source.write_text(print_source(kernel, name))
    return header, source
