"""Atomics into global memory: element atomics scattering into bins (a histogram: T.atomic_add / max / min of an
input value at an index computed from another input), and region atomics of rows into one output row from every
block; float32, int32, float16 (small integer values: exact sums) or bfloat16 (max / min)."""

import random
from dataclasses import dataclass
from typing import ClassVar

import torch

import tilelang.language as T

from ..family import Family, register, smaller
from ..tensors import TORCH_DTYPES, random_tensor

INIT = {"add": 0, "max": -1e30, "min": 1e30}
INT_INIT = {"add": 0, "max": -(2 ** 30), "min": 2 ** 30}
HALF_INIT = {"add": 0, "max": -1e4, "min": 1e4}


@dataclass(frozen=True)
class AtomicDesc:
    family: ClassVar[str] = "atomic"
    form: str  # "element" (scatter into bins) or "region" (rows into one row)
    kind: str  # add / max / min
    n: int  # elements (element form) or rows (region form)
    width: int  # bins (element form) or row length (region form)
    block: int  # elements or rows per block
    threads: int
    dtype: str
    data_seed: int


@register
class Atomic(Family):
    name = "atomic"
    desc_type = AtomicDesc
    weight = 0.8

    def generate(self, rng: random.Random, data_seed: int) -> AtomicDesc:
        form = rng.choice(("element", "region"))
        if form == "element":
            block = rng.choice((64, 128, 256))
            n, width = rng.randint(1, 4 * block), rng.choice((1, 7, 16, 64))
        else:
            block = rng.choice((1, 2, 8, 32))
            n, width = rng.randint(1, 4 * block), rng.choice((8, 40, 64, 100))
        kind = rng.choice(("add", "add", "max", "min"))
        dtype = rng.choice(("float32", "float32", "int32", "int32", "float16", "bfloat16"))
        if dtype == "bfloat16" and kind == "add":
            dtype = "float16"
        if dtype == "float16" and kind == "add":
            n = min(n, 512)  # integer values in [-4, 4]: every partial sum stays exact in float16
        return AtomicDesc(form=form, kind=kind, n=n, width=width, block=block, threads=rng.choice((64, 128, 256)),
                          dtype=dtype, data_seed=data_seed)

    def build(self, desc):
        dt = desc.dtype
        if desc.form == "element":
            n = desc.n

            @T.prim_func
            def main(V: T.Tensor((n,), dt), Idx: T.Tensor((n,), "int32"), H: T.Tensor((desc.width,), dt)):
                _element_body(desc, V, Idx, H)
        else:
            shape = (desc.n, desc.width)

            @T.prim_func
            def main(A: T.Tensor(shape, dt), Out: T.Tensor((desc.width,), dt)):
                _region_body(desc, A, Out)

        return main

    def _init(self, desc):
        value = (INT_INIT if desc.dtype == "int32" else HALF_INIT if desc.dtype in ("float16", "bfloat16")
                 else INIT)[desc.kind]
        return torch.full((desc.width,), value, dtype=TORCH_DTYPES[desc.dtype])

    def arguments(self, desc, gen):
        half = desc.dtype in ("float16", "bfloat16")  # small integers: exact in any order of the atomics
        if desc.form == "element":
            v = random_tensor((desc.n,), desc.dtype, gen, integral=half, low=-4, high=4)
            idx = torch.randint(0, desc.width, (desc.n,), generator=gen, dtype=torch.int32)
            return [v, idx, self._init(desc)]
        return [random_tensor((desc.n, desc.width), desc.dtype, gen, integral=half, low=-4, high=4),
                self._init(desc)]

    def reference(self, desc, args):
        out = args[-1].clone().double()
        if desc.form == "element":
            v, idx = args[0].double(), args[1].long()
            reduce = {"add": "sum", "max": "amax", "min": "amin"}[desc.kind]
            out = out.scatter_reduce(0, idx, v, reduce=reduce, include_self=True)
        else:
            a = args[0].double()
            out = {"add": lambda: out + a.sum(0), "max": lambda: torch.maximum(out, a.amax(0)),
                   "min": lambda: torch.minimum(out, a.amin(0))}[desc.kind]()
        return {len(args) - 1: out.to(TORCH_DTYPES[desc.dtype])}

    def tolerance(self, desc, index):
        return (1e-5, 1e-5) if desc.dtype == "float32" and desc.kind == "add" else (0, 0)

    def shrink(self, desc):
        r = self.replace
        if desc.kind != "add":
            yield r(desc, kind="add")
        if desc.dtype != "int32":
            yield r(desc, dtype="int32")
        if desc.dtype in ("float16", "bfloat16"):
            yield r(desc, dtype="float32")
        for v in smaller(desc.n):
            yield r(desc, n=v)
        for v in smaller(desc.width):
            yield r(desc, width=v)
        for v in smaller(desc.block):
            yield r(desc, block=v)
        if desc.threads > 64:
            yield r(desc, threads=desc.threads // 2)


@T.macro
def _element_body(desc, V, Idx, H):
    b = desc.block
    atomic = getattr(T, f"atomic_{desc.kind}")
    with T.Kernel(T.ceildiv(desc.n, b), threads=desc.threads) as bx:
        for i in T.Parallel(b):
            if bx * b + i < desc.n:
                atomic(H[Idx[bx * b + i]], V[bx * b + i])


@T.macro
def _region_body(desc, A, Out):
    b, w = desc.block, desc.width
    atomic = getattr(T, f"atomic_{desc.kind}")
    with T.Kernel(T.ceildiv(desc.n, b), threads=desc.threads) as bx:
        for r in T.serial(b):
            if bx * b + r < desc.n:
                atomic(Out[0:w], A[bx * b + r, 0:w])
