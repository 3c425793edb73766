"""The cycle model's timeline as a Chrome / Perfetto trace (JSON trace-event format).

`kernel.get_profiler().trace(path, sample_blocks=2)` runs the kernel once in the simulator with
TILELANG_SIM_PROFILE=3 (count, and record the timeline: src/tl_templates/sim/sim/timeline.h) and writes what the
sampled blocks did, in the cycle model's cycles, to `path`. Open it in https://ui.perfetto.dev or chrome://tracing.

One process per block (pid = the block's linear id + 1), one thread per warp (tid = warp + 1; its lane 0's clock,
as the model counts stalls) and two for the block's shared pipes: the tensor pipe's matrix instructions and the
async transfers (LDLMS, TME). The ids start at 1 because Perfetto takes pid 0 for the kernel's idle "swapper"
process (google/perfetto#394, #560); the names give the block and the warp. Slices ("X") are what a warp spent its cycles on: merged stretches of arithmetic and of
memory instructions, waits (global loads, block barriers, async barriers, copies, SQMMA groups, warp MMAs,
warp / squad collectives) and zero-length marks where it issued an SQMMA or MMA. Counters ("C") show the tensor
pipe busy and the transfers in flight. The time unit is the modelled cycle: 1 microsecond of trace time is one
cycle (the trace-event format's timestamps are microseconds).
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

# What a slice's `amount` counts, by kind (timeline.h's kinds; the others have none).
AMOUNT_NAMES = {"arithmetic": "instructions", "memory": "instructions", "sqmma": "flops", "mma": "flops",
                "ldlms": "bytes", "tme load": "bytes", "tme store": "bytes"}
# What a slice's `until` is, by kind.
UNTIL_NAMES = {"sqmma issue": "done_cycle", "mma issue": "done_cycle", "sqmma": "done_cycle", "mma": "done_cycle",
               "ldlms": "lands_cycle", "tme load": "lands_cycle", "tme store": "lands_cycle"}
CATEGORIES = {"arithmetic": "instructions", "memory": "instructions", "sqmma issue": "matrix", "mma issue": "matrix",
              "sqmma": "tensor pipe", "mma": "tensor pipe", "ldlms": "transfer", "tme load": "transfer",
              "tme store": "transfer"}  # the rest are waits
TRANSFER_KINDS = ("ldlms", "tme load", "tme store")
TIME_UNIT = "cycle (1 us of trace time = 1 modelled cycle)"


def read_timeline(library: Path) -> dict[str, Any]:
    """The timeline of the last launch traced by the kernel library at `library` (already loaded by its launcher:
    this opens the same copy), as timeline.h writes it."""
    lib = ctypes.CDLL(str(library))
    lib.tl_sim_last_trace.restype = ctypes.c_char_p
    timeline = json.loads(lib.tl_sim_last_trace().decode())
    if not timeline:
        raise RuntimeError("no launch was traced (TILELANG_SIM_PROFILE was not 3 when the kernel ran)")
    return timeline


def chrome_trace(timeline: dict[str, Any]) -> dict[str, Any]:
    """The trace-event JSON object of a timeline: metadata, slices and counters."""
    warps = -(-timeline["threads_per_block"] // timeline["warp_size"])
    track_names = [f"warp {w}" for w in range(warps)] + ["tensor pipe", "async transfers"]
    events: list[dict[str, Any]] = []
    for block, x, y, z in timeline["blocks"]:
        events.append(_metadata("process_name", block + 1, 1, name=f"block {block} ({x}, {y}, {z})"))
        events.append(_metadata("process_sort_index", block + 1, 1, sort_index=block))
        for track, name in enumerate(track_names):
            events.append(_metadata("thread_name", block + 1, track + 1, name=name))
            events.append(_metadata("thread_sort_index", block + 1, track + 1, sort_index=track))
    by_block: dict[int, list[list]] = {}
    for block, track, kind, start, end, amount, until in timeline["slices"]:
        args = {}
        if kind in AMOUNT_NAMES:
            args[AMOUNT_NAMES[kind]] = amount
        if kind in UNTIL_NAMES:
            args[UNTIL_NAMES[kind]] = until
        events.append({"name": kind, "cat": CATEGORIES.get(kind, "wait"), "ph": "X", "ts": start,
                       "dur": end - start, "pid": block + 1, "tid": track + 1, "args": args})
        by_block.setdefault(block, []).append([track, kind, start, end, until])
    for block, slices in by_block.items():
        events += _counters(block, slices, tensor_track=warps)
    dropped = timeline["dropped_slices"]
    if dropped:  # say so where the reader looks: on the timeline itself
        events.append({"name": f"trace capped at {timeline['max_slices']} slices: {dropped} dropped", "ph": "i",
                       "s": "g", "ts": 0, "pid": timeline["blocks"][0][0] + 1, "tid": 1})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"kernel": timeline["kernel"], "time_unit": TIME_UNIT,
                          "max_slices": timeline["max_slices"], "dropped_slices": dropped, "capped": dropped > 0}}


def write_trace(path: str | Path, timeline: dict[str, Any]) -> Path:
    """Write the Chrome / Perfetto trace of `timeline` to `path`; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(timeline)))
    return path


def _metadata(what: str, pid: int, tid: int, **args: Any) -> dict[str, Any]:
    return {"name": what, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _counters(block: int, slices: list[list], tensor_track: int) -> list[dict[str, Any]]:
    """The block's counter tracks: the tensor pipe busy (0 or 1) and the async transfers under way (from their
    first byte leaving to their landing)."""
    changes: dict[str, list[tuple[float, int]]] = {"tensor pipe busy": [], "transfers in flight": []}
    for track, kind, start, end, until in slices:
        if track == tensor_track:
            changes["tensor pipe busy"] += [(start, +1), (end, -1)]
        elif kind in TRANSFER_KINDS:
            changes["transfers in flight"] += [(start, +1), (until, -1)]
    events = []
    for name, deltas in changes.items():
        level = 0
        for ts, delta in sorted(deltas, key=lambda d: (d[0], d[1])):  # at one instant, ends before starts
            level += delta
            events.append({"name": name, "ph": "C", "ts": ts, "pid": block + 1, "args": {"value": level}})
    return events
