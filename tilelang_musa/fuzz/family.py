"""A program family: description dataclass, generator, TileLang program, torch reference, shrinking steps."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any, ClassVar, Iterator

import torch


class Family:
    """Subclasses set `name` and `desc_type` and implement the methods below. A description is a frozen
    dataclass of plain values (ints, strs, bools, tuples), so `repr(desc)` is Python that rebuilds it."""

    name: ClassVar[str]
    desc_type: ClassVar[type]
    weight: ClassVar[float] = 1.0  # relative frequency in a mixed batch

    def generate(self, rng: random.Random, data_seed: int) -> Any:
        raise NotImplementedError

    def build(self, desc: Any):
        """The @T.prim_func for `desc`."""
        raise NotImplementedError

    def pass_configs(self, desc: Any) -> dict:
        return {}

    def arguments(self, desc: Any, gen: torch.Generator) -> list[torch.Tensor]:
        """Every kernel argument, in order: fresh random inputs and poisoned outputs."""
        raise NotImplementedError

    def reference(self, desc: Any, args: list[torch.Tensor]) -> dict[int, torch.Tensor]:
        """Expected contents of the outputs after the run (argument index -> tensor), from the inputs in `args`
        (as they were before the run)."""
        raise NotImplementedError

    def tolerance(self, desc: Any, index: int) -> tuple[float, float]:
        raise NotImplementedError

    def path(self, desc: Any, source: str) -> str:
        """The code path the compiled program took, from its device source (summarized per arch after a batch):
        the GEMM template family, the load kind of a pipeline, ...; "" where the family has none."""
        return ""

    def rejected_on(self, desc: Any, arch: str) -> str | None:
        """A regular expression the compile error of `desc` on `arch` must match when the program is one the
        compiler must refuse there (a construct the arch lacks); None when it must compile and match torch."""
        return None

    def shrink(self, desc: Any) -> Iterator[Any]:
        """Simpler descriptions to try, most promising first (the shrinker keeps the first that still fails)."""
        return iter(())

    # --- helpers shared by families
    @staticmethod
    def replace(desc: Any, **changes: Any) -> Any:
        return dataclasses.replace(desc, **changes)


FAMILIES: dict[str, Family] = {}


def register(cls: type[Family]) -> type[Family]:
    FAMILIES[cls.name] = cls()
    return cls


def load_path(source: str, threads: int) -> str:
    """How a program's global -> shared copies were issued: "tme" (copy-engine loads), "ldlms" (asynchronous
    pieces) or "sync" (element copies); "+producer" where the compiler added a producer squad to the `threads` the
    program launched (automatic warp specialization)."""
    kind = "tme" if "tl::tma_load" in source else "ldlms" if "tl::cp_async" in source else "sync"
    bounds = re.search(r"__launch_bounds__\((\d+)", source)
    return kind + ("+producer" if bounds and int(bounds.group(1)) > threads else "")


def family_of(desc: Any) -> Family:
    return FAMILIES[desc.family]


def to_plain(desc: Any) -> dict:
    """JSON-able form of a description (tuples become lists)."""
    return {"family": desc.family, "fields": dataclasses.asdict(desc)}


def from_plain(data: dict) -> Any:
    fam = FAMILIES[data["family"]]

    def tuples(v):
        return tuple(tuples(x) for x in v) if isinstance(v, list) else v

    return fam.desc_type(**{k: tuples(v) for k, v in data["fields"].items()})


def smaller(n: int, floor: int = 1) -> list[int]:
    """Candidate smaller sizes for a shrinker: the floor, half, and one less (distinct, < n)."""
    out = []
    for c in (floor, n // 2, n - 1):
        if floor <= c < n and c not in out:
            out.append(c)
    return out
