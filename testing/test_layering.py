"""The package's modules depend downward only, and no two of them import each other (docs/ARCHITECTURE.md).

Every module under tilelang_musa/ is parsed with `ast`; every import counts, at module level and inside functions,
relative or absolute (`tilelang.X` is the alias of `tilelang_musa.X`). `from pkg import name` imports the submodule
`pkg.name` when there is one, else `pkg` itself (its `__init__`).

(a) Layers. A module belongs to the longest entry of the table below that prefixes its dotted path (under
tilelang_musa; "<root>" is tilelang_musa/__init__.py alone). It may import modules of its own entry and of entries
of strictly lower rank, never of an equal or higher one:

    rank  entries
      0   _version, _paths, env, errors, diagnostics, math, rocm    (leaves)
      1   _native, executors       (loads the C++ library; runs tasks in forked processes or on Ray)
      2   target                   (arch table, detection)
      3   backend                  (upstream's target helpers)
      4   ir                       (the shared vocabulary: op names, annotation keys, PassConfig keys, IR helpers)
      5   layout                   (Layout / Fragment algebra)
      6   tileop                   (tile ops: infer_layout and lower)
      7   language, transform, intrinsics  (the frontend, the passes: neither imports the other; swizzle helpers)
      8   codegen, tools.trace     (the MUSA printer; IR diffs, lower trace and pass timing, which jit drives)
      9   launcher                 (tensor validation and launch; the profiler's tensor specs)
     10   profiler
     11   jit
     12   contrib, engine, cache   (upstream's names: lowering, postproc callbacks, the kernel cache)
     13   utils
     14   testing
     15   <root>
     16   autotuner, fuzz          (drive the whole compiler through the top-level package)

(b) Cycles. The graph of those imports between modules has no cycle. A package's `__init__` importing its own
submodules to re-export them is an ordinary edge (it creates no cycle unless a submodule imports a name from that
`__init__`; import it from the submodule that defines it).
"""

import ast
from pathlib import Path

PACKAGE = "tilelang_musa"
PACKAGE_DIR = Path(__file__).resolve().parents[1] / PACKAGE
ROOT = "<root>"

RANKS = {
    "_version": 0, "_paths": 0, "_wheel_patches": 0, "env": 0, "errors": 0, "diagnostics": 0, "log": 0, "math": 0, "rocm": 0,
    "_native": 1, "executors": 1, "instrumentation": 1,  # pass events and compile sessions: read by transform, jit
    "target": 2,
    "backend": 3, "musa": 3,  # musa: target predicates under Moore Threads' names
    "ir": 4,
    "layout": 5,
    "tileop": 6,
    "language": 7, "transform": 7, "intrinsics": 7,
    "codegen": 8, "quantize": 8, "cuda": 8,  # quantize: expression builders over language/ (dtypes), read by user programs
    "tools.trace": 8,  # IR diffs, lower trace, pass timing: jit's compile drives them (tools: upstream's names)
    "launcher": 9,
    "profiler": 10,
    "jit": 11,
    "contrib": 12, "engine": 12, "cache": 12, "carver": 12, "tools": 12,
    "utils": 13,
    "testing": 14,
    ROOT: 15,
    "autotuner": 16, "fuzz": 16,
}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__)."""
    out = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


MODULES = _modules()


def _known(name: str) -> str:
    """The innermost module of the package that `name` (a dotted path into it) lies in."""
    while name not in MODULES:
        name = name.rsplit(".", 1)[0]
    return name


def _absolute(name: str) -> str | None:
    if name == "tilelang" or name.startswith("tilelang."):
        name = PACKAGE + name[len("tilelang"):]
    return name if name == PACKAGE or name.startswith(PACKAGE + ".") else None


def _imports(module: str) -> list[tuple[str, int]]:
    """(imported module, line) for every import statement of `module` that names a module of the package."""
    path, is_package = MODULES[module]
    here = module.split(".") if is_package else module.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = _absolute(alias.name)
                if name is not None:
                    out.append((_known(name), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here[: len(here) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = _absolute(node.module or "")
                if base is None:
                    continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                out.append((submodule if submodule in MODULES else _known(base), node.lineno))
    return sorted({(target, line) for target, line in out if target != module})


def _layer(module: str) -> str:
    if module == PACKAGE:
        return ROOT
    rest = module[len(PACKAGE) + 1:]
    keys = [k for k in RANKS if k != ROOT and (rest == k or rest.startswith(k + "."))]
    assert keys, f"{module} is in no layer: add its package to RANKS in {Path(__file__).name}"
    return max(keys, key=len)


def test_every_module_imports_only_its_own_layer_or_lower_ones():
    violations = []
    for module in MODULES:
        layer = _layer(module)
        for target, line in _imports(module):
            other = _layer(target)
            if other != layer and RANKS[other] >= RANKS[layer]:
                violations.append(f"{MODULES[module][0].relative_to(PACKAGE_DIR.parent)}:{line}: {module} "
                                  f"({layer}, rank {RANKS[layer]}) imports {target} ({other}, rank {RANKS[other]})")
    assert not violations, "imports against the layer order:\n" + "\n".join(violations)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_two_modules_import_each_other():
    graph = {module: {target for target, _ in _imports(module)} for module in MODULES}
    cycles = _cycles(graph)
    described = []
    for component in cycles:
        members = set(component)
        edges = [f"    {m} -> {t} (line {line})" for m in component for t, line in _imports(m) if t in members]
        described.append(f"  {len(component)} modules: " + ", ".join(component) + "\n" + "\n".join(edges))
    assert not cycles, "import cycles:\n" + "\n".join(described)


def test_the_table_knows_every_package():
    """A new top-level module or package needs a rank (the layer tests would otherwise not see it)."""
    for module in MODULES:
        _layer(module)
