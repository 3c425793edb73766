"""The README GEMM's modelled timeline: its Chrome / Perfetto trace, and a picture of it.

    python benchmark/plot_timeline.py [--size 512 512 256] [--sample-blocks 1] [--trace FILE.json]
                                      [--png docs/images/readme_gemm_timeline.png]

Compiles examples/gemm/gemm.py's `matmul` (block 256 x 256 x 64, 512 threads, the default target mp_31), writes the
cycle model's trace of `sample_blocks` blocks (profiler.trace(); open it in https://ui.perfetto.dev) and renders it
with matplotlib: a row per warp (its lane 0) and per shared pipe, slices coloured by kind, cycles across.
docs/PERF_MODEL.md shows the picture this script made.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a file, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

COLOURS = {
    "arithmetic": "#4c9be8", "memory": "#9ecae1", "global load wait": "#fdd0a2", "barrier wait": "#636363",
    "async barrier wait": "#fd8d3c", "copy wait": "#a1d99b", "collective wait": "#bcbddc", "sqmma wait": "#de2d26",
    "mma wait": "#de2d26", "sqmma": "#756bb1", "mma": "#756bb1", "tme load": "#31a354", "tme store": "#006d2c",
    "ldlms": "#74c476",
}
MARKS = ("sqmma issue", "mma issue")  # zero-length: drawn as ticks
PIPE_KINDS = ("sqmma", "mma", "tme load", "tme store", "ldlms")


def readme_gemm(m: int, n: int, k: int):
    spec = importlib.util.spec_from_file_location("gemm", ROOT / "examples" / "gemm" / "gemm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.matmul.compile(M=m, N=n, K=k, block_M=256, block_N=256, block_K=64)


def plot(trace: dict, title: str, png: Path) -> None:
    events = trace["traceEvents"]
    tracks = sorted({(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"})
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    blocks = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    row = {track: i for i, track in enumerate(tracks)}
    fig, ax = plt.subplots(figsize=(12, 0.22 * len(tracks) + 1.6), dpi=90)
    spans: dict[str, dict[int, list[tuple[float, float]]]] = {}
    for e in events:
        if e["ph"] == "X" and e["name"] not in MARKS:
            spans.setdefault(e["name"], {}).setdefault(row[e["pid"], e["tid"]], []).append((e["ts"], e["dur"]))
    for kind, by_row in spans.items():
        for r, bars in by_row.items():
            ax.broken_barh(bars, (r - 0.4, 0.8), facecolors=COLOURS.get(kind, "grey"), edgecolor="white",
                           linewidth=0.6 if kind in PIPE_KINDS else 0)  # the pipes' back-to-back slices apart
    marks = [(e["ts"], row[e["pid"], e["tid"]]) for e in events if e["ph"] == "X" and e["name"] in MARKS]
    if marks:
        ax.scatter([t for t, _ in marks], [r for _, r in marks], marker="|", s=40, color="black", linewidths=0.8)
    ax.set_yticks(range(len(tracks)))
    labels = [names[t] if len(blocks) == 1 else f"{blocks[t[0]].split(' (')[0]}: {names[t]}" for t in tracks]
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("modelled cycles")
    ax.set_xlim(left=0)
    ax.set_title(title, fontsize=10)
    shown = [k for k in COLOURS if k in spans]
    handles = [Patch(color=COLOURS[k], label=k) for k in shown]
    if marks:
        handles.append(plt.Line2D([], [], color="black", marker="|", linestyle="", label="matrix issue"))
    ax.legend(handles=handles, fontsize=7, ncol=min(len(handles), 6), loc="upper center",
              bbox_to_anchor=(0.5, -0.12 if len(tracks) > 12 else -0.2), frameon=False)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, nargs=3, default=(512, 512, 256), metavar=("M", "N", "K"))
    parser.add_argument("--sample-blocks", type=int, default=1)
    parser.add_argument("--trace", type=Path, help="where to keep the trace JSON (default: a temporary file)")
    parser.add_argument("--png", type=Path, default=ROOT / "docs" / "images" / "readme_gemm_timeline.png")
    args = parser.parse_args()
    m, n, k = args.size
    kernel = readme_gemm(m, n, k)
    with tempfile.TemporaryDirectory() as scratch:
        path = kernel.get_profiler().trace(args.trace or Path(scratch) / "trace.json", sample_blocks=args.sample_blocks)
        trace = json.loads(path.read_text())
    arch = kernel.target.attrs["arch"]
    plot(trace, f"README GEMM {m}x{n}x{k}, block 256x256x64, {arch}: cycle model, "
                f"{args.sample_blocks} of {(m // 256) * (n // 256)} blocks", args.png)
    print(f"wrote {args.png}" + (f" and {args.trace}" if args.trace else ""))


if __name__ == "__main__":
    main()
