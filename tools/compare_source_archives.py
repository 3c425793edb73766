"""Compare two archives of generated MUSA C (TILELANG_SOURCE_ARCHIVE_DIR; see testing/conftest.py), optionally
after normalizing the spelling of MUSA's built-in vector types back to `tl::vec<T, N>`.

A printer change that may only change type spellings is checked by archiving the same test files before and after
it, then:

    python tools/compare_source_archives.py BEFORE/generated_kernels AFTER/generated_kernels --builtin-vectors

The archive names a source `kernel.arch.hash`; sources are compared as sets of texts per (kernel, arch). Exit
status 0 when every normalized text of AFTER is in BEFORE and vice versa; otherwise the first differing lines.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections import defaultdict
from pathlib import Path

# MUSA's built-in vector type -> the tl::vec spelling of the same dtype x lanes (src/codegen/musa_types.cc).
_ELEMENTS = {
    "char": "signed char", "uchar": "unsigned char", "short": "short", "ushort": "unsigned short",
    "int": "int", "uint": "unsigned int", "float": "float",
}
BUILTIN_VECTORS = {f"{prefix}{n}": f"tl::vec<{elem}, {n}>" for prefix, elem in _ELEMENTS.items() for n in (2, 3, 4)}
BUILTIN_VECTORS.update({
    "longlong2": "tl::vec<int64_t, 2>", "ulonglong2": "tl::vec<uint64_t, 2>", "double2": "tl::vec<double, 2>",
    "half2": "tl::vec<half_t, 2>", "__mt_bfloat162": "tl::vec<bfloat16_t, 2>",
})
_BUILTIN_WORD = re.compile(r"(?<![\w:])(" + "|".join(sorted(BUILTIN_VECTORS, key=len, reverse=True)) + r")(?!\w)")


def strip_access_parentheses(text: str) -> str:
    """`(*reinterpret_cast<T*>(p))` -> `*reinterpret_cast<T*>(p)`: a vector access is parenthesized as an operand
    but not as a call argument, and `tl::vec_of(...)` makes an operand a call argument."""
    def matching(pos: int) -> int:  # the `)` closing the `(` at pos
        depth = 0
        for k in range(pos, len(text)):
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            if depth == 0:
                return k
        return len(text)

    opening = "(*reinterpret_cast<"
    out, i = [], 0
    while (start := text.find(opening, i)) >= 0:
        end = matching(start)
        argument = text.find("*>(", start) + 2
        is_call = start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_")
        if is_call or matching(argument) != end - 1:  # a call's, or holding more than the access: keep them
            out.append(text[i:start + 1])
            i = start + 1
            continue
        out.append(text[i:start])
        out.append(text[start + 1:end])
        i = end + 1
    out.append(text[i:])
    return "".join(out)


def normalize_builtin_vectors(text: str) -> str:
    """The text as the tl::vec-only printer wrote it, up to the parentheses around vector accesses: no
    `tl::vec_of` wrappers, tl::vec type names."""
    text = re.sub(r"tl::vec_of\((\w+)\)", r"\1", text)  # a bound vector's name
    text = text.replace("tl::vec_of(", "(")
    return strip_access_parentheses(_BUILTIN_WORD.sub(lambda m: BUILTIN_VECTORS[m.group(1)], text))


def load(archive: Path, normalize) -> dict[tuple[str, str], dict[str, str]]:
    texts: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for path in sorted(archive.iterdir()):
        parts = path.name.split(".")
        if len(parts) < 3:
            continue
        text = path.read_text()
        texts[(parts[0], parts[1])][normalize(text)] = path.name
    return texts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--builtin-vectors", action="store_true",
                        help="normalize AFTER's built-in vector types (float4, half2, ...) to tl::vec first")
    args = parser.parse_args(argv)
    before = load(args.before, strip_access_parentheses if args.builtin_vectors else (lambda t: t))
    after = load(args.after, normalize_builtin_vectors if args.builtin_vectors else (lambda t: t))
    total = sum(len(v) for v in after.values())
    same = differing = 0
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key, {}), after.get(key, {})
        for text, name in new.items():
            if text in old:
                same += 1
                continue
            differing += 1
            print(f"AFTER {name}: no identical source in BEFORE for {key[0]} on {key[1]}")
            if old:
                closest = difflib.get_close_matches(text, list(old), n=1, cutoff=0.0)[0]
                diff = difflib.unified_diff(closest.splitlines(), text.splitlines(), old[closest], name, lineterm="", n=0)
                print("\n".join(list(diff)[:12]))
        for text, name in old.items():
            if text not in new:
                differing += 1
                print(f"BEFORE {name}: no identical source in AFTER for {key[0]} on {key[1]}")
    print(f"{same} of {total} sources identical{' after normalizing built-in vector types' if args.builtin_vectors else ''}"
          f"; {differing} differ")
    return 0 if differing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
