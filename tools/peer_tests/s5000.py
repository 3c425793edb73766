"""Run Moore Threads' S5000 kernel set in the simulator, the kernel modules unchanged but for device strings.

    python tools/peer_tests/s5000.py PEER_TREE [NAME ...] [--out DIR] [--jobs N] [--timeout S] [--list]

PEER_TREE is an extracted checkout of tile-ai/tilelang-musa. Its `benchmark/` package is staged under DIR/tree with
device strings rewritten to "cpu" (run.py's staging; torch_musa's queries answered by run.py's stand-in), so a
kernel module is imported as `benchmark.mp31.<family>.kernels.<name>` exactly as the peer's own runner imports it.
Each case (s5000_cases/<family>.py) calls the kernel's entry point at small sizes and checks it against a torch
reference: the kernel module's own where it has one, else ours (s5000_cases/*_reference.py, staged beside the
driver). A case passes when its process exits 0. The table (DIR/results.tsv) gives each case's outcome, its kernel
file and the last line of its error; the summary counts kernel files all of whose cases pass. Nothing of the
peer's tree is kept in this repository.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from examples import run_all  # noqa: E402  (the upstream-examples harness's process runner)
from run import CONFTEST, rewrite  # noqa: E402
from s5000_cases import CASES  # noqa: E402

PRELUDE = CONFTEST + '''
import sys
sys.path.insert(0, ".")
torch.manual_seed(0)
'''


def stage(tree: Path, out: Path) -> Path:
    """The peer's benchmark/ package, device strings rewritten, plus our references; returns the staged root."""
    root = out / "tree"
    for src in (tree / "benchmark").rglob("*"):
        target = root / src.relative_to(tree)
        if src.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif src.suffix == ".py":
            target.parent.mkdir(parents=True, exist_ok=True)
            text = rewrite(src.read_text(), cuda=False)
            target.write_text(text)
    for reference in (HERE / "s5000_cases").glob("*_reference.py"):
        shutil.copy(reference, root / reference.name)
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("names", nargs="*", help="cases to run (all when none)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/s5000_kernels"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1200)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()

    chosen = [c for c in CASES if not args.names or c.name in args.names]
    if args.list:
        print("\n".join(f"{c.name:40} {c.kernel}" for c in chosen))
        return 0
    root = stage(args.tree.resolve(), args.out)
    for case in chosen:
        folder = args.out / "cases" / case.name
        folder.mkdir(parents=True, exist_ok=True)
        # the driver runs from the staged root (so `benchmark.` imports resolve) but logs in its own folder
        (folder / "drive.py").write_text(PRELUDE + f"import os; os.chdir({str(root)!r}); sys.path.insert(0, '.')\n"
                                         + case.code + "\n")
    results = run_all({c.name: args.out / "cases" / c.name for c in chosen}, {}, args.jobs, args.timeout)
    lines = [f"{results[c.name][0]}\t{c.name}\t{c.kernel}\t{results[c.name][2]:.0f}\t{results[c.name][1]}"
             for c in chosen]
    (args.out / "results.tsv").write_text("\n".join(lines) + "\n")
    kernels = sorted({c.kernel for c in chosen})
    passing = [k for k in kernels if all(results[c.name][0] == "pass" for c in chosen if c.kernel == k)]
    print(f"\n{len(passing)} of {len(kernels)} kernel files pass "
          f"({sum(r[0] == 'pass' for r in results.values())} of {len(chosen)} cases); table in {args.out}/results.tsv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
