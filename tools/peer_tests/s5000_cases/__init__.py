"""The S5000 kernel set's cases, one module a family (s5000.py runs them)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    kernel: str  # the kernel file under benchmark/mp31 the case exercises
    code: str  # Python run from the staged tree's root: calls the kernel, checks it against torch, exits non-zero


FAMILIES = ("modelops", "gdn", "sparse_mla", "tilekernels")
CASES: list[Case] = [case for family in FAMILIES
                     for case in importlib.import_module(f"s5000_cases.{family}").CASES]
