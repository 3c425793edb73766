"""The fixed split of Moore Threads' measured S5000 rows into a calibration half and a held-out half (issue 40).

    python benchmark/s5000_split.py          # prints each family's row count per half

The rows (benchmark/s5000_measured.jsonl) are the 285 lines of tile-ai/tilelang-musa's
`benchmark/mp31/baselines/{mate,modelops,tilekernels}.jsonl` at commit 475bf79063776fc268d01bb8cabde24a92d753f8,
each unchanged but for an added `baseline_file` naming the file it came from. They are measurement data, kept here
so the split is reproducible; none of that repository's code is.

The rule, declared before any figure of the model was looked at against these rows:
- a row's family is its (`kernel`, `operation`) pair;
- within a family the rows are ordered by their `params` (JSON with sorted keys), then by `time_us`;
- the rows at even positions (0, 2, 4, ...) are the calibration half, the odd ones held out.
A family of one row is thereby calibration only; the families with many shapes (GDN decode, MTP, prefill) give the
held-out half its rows. Only figures tagged [A] in tilelang_musa/profiler/arch_figures.py may be fitted, and only on
`calibration_rows()`; `held_out_rows()` is for reporting the error.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

ROWS = Path(__file__).resolve().parent / "s5000_measured.jsonl"


def family(row: dict) -> str:
    return f"{row['kernel']}:{row['operation']}"


def _ordered() -> dict[str, list[dict]]:
    families: dict[str, list[dict]] = collections.defaultdict(list)
    for line in ROWS.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            families[family(row)].append(row)
    for rows in families.values():
        rows.sort(key=lambda r: (json.dumps(r["params"], sort_keys=True), r["time_us"]))
    return families


def split() -> tuple[list[dict], list[dict]]:
    """(calibration, held_out): every row exactly once."""
    calibration, held_out = [], []
    for rows in _ordered().values():
        for position, row in enumerate(rows):
            (calibration if position % 2 == 0 else held_out).append(row)
    return calibration, held_out


def calibration_rows() -> list[dict]:
    return split()[0]


def held_out_rows() -> list[dict]:
    return split()[1]


if __name__ == "__main__":
    calibration, held_out = split()
    counts = collections.Counter((family(r), "calibration") for r in calibration)
    counts.update((family(r), "held out") for r in held_out)
    print(f"{'family':70} calibration  held out")
    for name in sorted({f for f, _ in counts}):
        print(f"{name:70} {counts[(name, 'calibration')]:11}  {counts[(name, 'held out')]:8}")
    print(f"{'total':70} {len(calibration):11}  {len(held_out):8}")
