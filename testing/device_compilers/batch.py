"""Many generated sources checked by one compiler process (compile_kernels.py).

A batch is one translation unit: the `#include` lines its sources open with (the same lines for all of them), then
each source included in turn by its path, its kernels renamed apart by a macro (`#define main_kernel
tl_batch3_main_kernel`). The sources' own includes are then no-ops (the headers' `#pragma once` and include guards),
so the compiler sees each source's text as it would alone, and its diagnostics name the source's own lines.

That holds only while no source can reach another, so a source is batched only if its top level holds nothing but
its includes (before anything else), comments and `extern "C" __global__` kernel definitions, and its bodies no
preprocessor directive but `#pragma` (what the code generator writes). Any other source is compiled alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# A kernel definition's first line, as the code generator prints it: the name is the word before the parameters.
_KERNEL = re.compile(r'extern "C" __global__ .*?(\w+)\([^()]*\)\s*\{$')
_LITERAL = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
PREFIX = "tl_batch"


@dataclass(frozen=True)
class BatchShape:
    """What a batch needs of a source: the `#include` lines it opens with and the names of its kernels."""

    includes: tuple[str, ...]
    kernels: tuple[str, ...]


def batch_shape(text: str) -> BatchShape | None:
    """The shape of a source that can share a translation unit with others, or None if it must be compiled alone."""
    if "/*" in text or "\\\n" in text:  # block comments and continued lines would hide code from the scan below
        return None
    includes: list[str] = []
    kernels: list[str] = []
    depth = 0
    for line in text.splitlines():
        code = _LITERAL.sub('""', line).split("//")[0].strip()
        if not code:
            continue
        if depth == 0:
            if code.startswith("#include"):
                if kernels:
                    return None  # an include after a kernel: the shared includes would come before it
                includes.append(line.strip())
                continue
            kernel = _KERNEL.fullmatch(line.strip())
            if kernel is None or kernel.group(1).startswith(PREFIX):
                return None
            kernels.append(kernel.group(1))
        elif code.startswith("#") and not code.startswith("#pragma"):
            return None
        depth += code.count("{") - code.count("}")
        if depth < 0:
            return None
    if depth != 0 or not kernels or len(set(kernels)) != len(kernels):
        return None  # a source that defines a kernel twice must fail as itself
    return BatchShape(tuple(includes), tuple(kernels))


def batch_text(includes: tuple[str, ...], members: list[tuple[Path, BatchShape]]) -> str:
    """The translation unit that checks `members` (paths and shapes, all opening with `includes`) together."""
    lines = ["// Generated sources checked in one compiler process (testing/device_compilers/batch.py).", *includes]
    for index, (path, shape) in enumerate(members):
        for name in shape.kernels:
            # A kernel named like a macro of the headers cannot be renamed: the batch fails, and is checked source
            # by source.
            lines += [f"#ifdef {name}", f'#error "{name} is a macro: {path.name} cannot be checked in a batch"',
                      "#endif", f"#define {name} {PREFIX}{index}_{name}"]
        lines.append(f'#include "{path}"')
        lines += [f"#undef {name}" for name in shape.kernels]
    return "\n".join(lines) + "\n"


def even_chunks(items: list, size: int) -> list[list]:
    """`items` split, in order, into the fewest chunks of at most `size`, their lengths differing by one at most."""
    count = -(-len(items) // max(size, 1))
    bounds = [len(items) * k // count for k in range(count + 1)] if items else [0]
    return [items[bounds[k]:bounds[k + 1]] for k in range(len(bounds) - 1)]
