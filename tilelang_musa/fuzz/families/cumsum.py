"""T.cumsum along either dim of a shared tile or a fragment, in place or into another tile, forward or reversed,
with the other dim tiled over blocks with a tail. Inputs are small integers, so the sums are exact."""

import random
from dataclasses import dataclass
from typing import ClassVar

import tilelang.language as T

from ..family import Family, register, smaller
from ..tensors import TORCH_DTYPES, poisoned, random_tensor


@dataclass(frozen=True)
class CumsumDesc:
    family: ClassVar[str] = "cumsum"
    scanned: int  # extent of the scanned dim (whole, one tile)
    kept: int  # extent of the other dim (0: 1-D)
    block: int
    dim: int
    reverse: bool
    scope: str
    in_place: bool
    dtype: str
    threads: int
    data_seed: int

    @property
    def shape(self):
        if not self.kept:
            return (self.scanned,)
        return (self.kept, self.scanned) if self.dim == 1 else (self.scanned, self.kept)

    @property
    def tile(self):
        if not self.kept:
            return (self.scanned,)
        return (self.block, self.scanned) if self.dim == 1 else (self.scanned, self.block)


@register
class Cumsum(Family):
    name = "cumsum"
    desc_type = CumsumDesc
    weight = 0.6

    def generate(self, rng: random.Random, data_seed: int) -> CumsumDesc:
        one_d = rng.random() < 0.25
        block = rng.choice((1, 4, 8, 16, 32))
        return CumsumDesc(scanned=rng.choice((8, 17, 32, 40, 64, 100, 128, 256)),
                          kept=0 if one_d else rng.choice((block, 2 * block, rng.randint(1, 3 * block))),
                          block=block, dim=rng.choice((0, 1)), reverse=rng.random() < 0.4,
                          scope=rng.choice(("shared", "shared", "fragment")), in_place=rng.random() < 0.5,
                          dtype=rng.choice(("float32", "float32", "float16", "int32")),
                          threads=rng.choice((32, 64, 128, 256)), data_seed=data_seed)

    def build(self, desc):
        shape, dt = desc.shape, desc.dtype

        @T.prim_func
        def main(A: T.Tensor(shape, dt), B: T.Tensor(shape, dt)):
            _cumsum_body(desc, A, B)

        return main

    def arguments(self, desc, gen):
        return [random_tensor(desc.shape, desc.dtype, gen, integral=True, low=-4, high=4),
                poisoned(desc.shape, desc.dtype)]

    def reference(self, desc, args):
        a = args[0].double()
        d = desc.dim if desc.kept else 0
        r = a.flip(d).cumsum(d).flip(d) if desc.reverse else a.cumsum(d)
        return {1: r.to(TORCH_DTYPES[desc.dtype])}

    def tolerance(self, desc, index):
        return (0, 0)  # small integers: exact in every dtype used

    def shrink(self, desc):
        r = self.replace
        if desc.scope != "shared":
            yield r(desc, scope="shared")
        if not desc.in_place:
            yield r(desc, in_place=True)
        if desc.reverse:
            yield r(desc, reverse=False)
        if desc.dtype != "float32":
            yield r(desc, dtype="float32")
        for m in smaller(desc.kept):
            yield r(desc, kept=m)
        for b in smaller(desc.block):
            yield r(desc, block=b)
        for n in smaller(desc.scanned, 2):
            yield r(desc, scanned=n)
        if desc.threads > 32:
            yield r(desc, threads=desc.threads // 2)


def _alloc(scope, shape, dtype):
    return T.alloc_shared(shape, dtype) if scope == "shared" else T.alloc_fragment(shape, dtype)


@T.macro
def _cumsum_body(desc, A, B):
    bk = desc.block
    grid = T.ceildiv(desc.kept, bk) if desc.kept else 1
    with T.Kernel(grid, threads=desc.threads) as bx:
        S = _alloc(desc.scope, desc.tile, desc.dtype)
        D = S if desc.in_place else _alloc(desc.scope, desc.tile, desc.dtype)
        if not desc.kept:
            T.copy(A, S)
        elif desc.dim == 1:
            T.copy(A[bx * bk, 0], S)
        else:
            T.copy(A[0, bx * bk], S)
        if desc.in_place:
            T.cumsum(S, dim=desc.dim if desc.kept else 0, reverse=desc.reverse)
        else:
            T.cumsum(S, D, dim=desc.dim if desc.kept else 0, reverse=desc.reverse)
        if not desc.kept:
            T.copy(D, B)
        elif desc.dim == 1:
            T.copy(D, B[bx * bk, 0])
        else:
            T.copy(D, B[0, bx * bk])
