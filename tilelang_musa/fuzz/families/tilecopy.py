"""Tiled copies with tails and dynamic extents: a 2-D or 3-D tensor (any dim T.dynamic: the extents of the copied
regions, and the trip count of the loop over them, known only at launch) walked tile by tile along its last dim
by a T.serial or T.Pipelined loop; each tile goes global -> shared (-> fragment) -> global, scaled on the way,
with origins or slices, the batch dim (3-D) indexed by the grid; a plain copy or a multiplication by a small integer
(the data are small integers, so every dtype is exact, int8 included)."""

import random
from dataclasses import dataclass
from typing import ClassVar

import tilelang.language as T

from ..family import Family, load_path, register, smaller
from ..tensors import poisoned, random_tensor


@dataclass(frozen=True)
class TileCopyDesc:
    family: ClassVar[str] = "tilecopy"
    shape: tuple  # (M, N) or (Bt, M, N)
    dynamic: tuple  # one bool per dim
    bm: int
    bn: int
    threads: int
    dtype: str
    loop: str  # "serial" | "pipelined"
    num_stages: int
    via_fragment: bool
    slice_form: bool
    scale: int  # the copy multiplies by this (1: a plain copy)
    data_seed: int


@register
class TileCopy(Family):
    name = "tilecopy"
    desc_type = TileCopyDesc

    def generate(self, rng: random.Random, data_seed: int) -> TileCopyDesc:
        bm, bn = rng.choice((1, 4, 8, 16, 32)), rng.choice((8, 16, 32, 64))
        dims = [rng.choice((bm, 2 * bm, rng.randint(1, 3 * bm))), rng.choice((bn, 3 * bn, rng.randint(1, 5 * bn)))]
        if rng.random() < 0.4:
            dims.insert(0, rng.randint(1, 3))
        return TileCopyDesc(shape=tuple(dims), dynamic=tuple(rng.random() < 0.5 for _ in dims), bm=bm, bn=bn,
                            threads=rng.choice((32, 64, 128, 256)),
                            dtype=rng.choice(("float32", "float16", "bfloat16", "int32", "int8")),
                            loop=rng.choice(("serial", "pipelined")), num_stages=rng.choice((1, 2, 3)),
                            via_fragment=rng.random() < 0.4, slice_form=rng.random() < 0.4,
                            scale=rng.choice((1, 1, 2, 3)), data_seed=data_seed)

    def path(self, desc, source):
        return load_path(source, desc.threads)

    def build(self, desc):
        names = ("Bt", "M", "N")[-len(desc.shape):]
        shape = tuple(T.dynamic(n) if d else s for n, d, s in zip(names, desc.dynamic, desc.shape))
        dt = desc.dtype

        @T.prim_func
        def main(A: T.Tensor(shape, dt), O: T.Tensor(shape, dt)):
            _tilecopy_body(desc, A, O)

        return main

    def arguments(self, desc, gen):
        return [random_tensor(desc.shape, desc.dtype, gen, integral=True, low=-5, high=5),
                poisoned(desc.shape, desc.dtype)]

    def reference(self, desc, args):
        return {1: args[0] * desc.scale}

    def tolerance(self, desc, index):
        return (0, 0)  # small integers times 1..3: exact in every dtype

    def shrink(self, desc):
        r = self.replace
        for d, dyn in enumerate(desc.dynamic):
            if dyn:
                yield r(desc, dynamic=desc.dynamic[:d] + (False,) + desc.dynamic[d + 1:])
        if len(desc.shape) == 3:
            yield r(desc, shape=desc.shape[1:], dynamic=desc.dynamic[1:])
        if desc.loop != "serial":
            yield r(desc, loop="serial")
        if desc.num_stages > 1:
            yield r(desc, num_stages=1)
        for f in ("via_fragment", "slice_form"):
            if getattr(desc, f):
                yield r(desc, **{f: False})
        if desc.scale != 1:
            yield r(desc, scale=1)
        if desc.dtype != "float32":
            yield r(desc, dtype="float32")
        for d, n in enumerate(desc.shape):
            for m in smaller(n):
                yield r(desc, shape=desc.shape[:d] + (m,) + desc.shape[d + 1:])
        if desc.bm > 1:
            yield r(desc, bm=desc.bm // 2)
        if desc.bn > 8:
            yield r(desc, bn=desc.bn // 2)
        if desc.threads > 32:
            yield r(desc, threads=desc.threads // 2)


def _at(desc, X, b, r, c, region):
    """X's tile origin (or, `region`, its bm x bn slice) at row r, column c of batch b (2-D: no batch index)."""
    if region:
        r, c = slice(r, r + desc.bm), slice(c, c + desc.bn)
    return X[b, r, c] if len(desc.shape) == 3 else X[r, c]


@T.macro
def _tile(desc, A, O, S, F, b, by, k):
    bm, bn = desc.bm, desc.bn
    T.copy(_at(desc, A, b, by * bm, k * bn, desc.slice_form), S)
    if desc.via_fragment or desc.scale != 1:
        T.copy(S, F)
        if desc.scale != 1:
            for i, j in T.Parallel(bm, bn):
                F[i, j] = F[i, j] * T.cast(desc.scale, desc.dtype)
        T.copy(F, _at(desc, O, b, by * bm, k * bn, desc.slice_form))
    else:
        T.copy(S, _at(desc, O, b, by * bm, k * bn, desc.slice_form))


@T.macro
def _tilecopy_body(desc, A, O):
    M, N = A.shape[-2:]
    Bt = A.shape[0] if len(desc.shape) == 3 else 1
    bm, bn, dt = desc.bm, desc.bn, desc.dtype
    with T.Kernel(T.ceildiv(M, bm), Bt, threads=desc.threads) as (by, b):
        S = T.alloc_shared((bm, bn), dt)
        F = T.alloc_fragment((bm, bn), dt)
        if desc.loop == "pipelined":
            for k in T.Pipelined(T.ceildiv(N, bn), num_stages=desc.num_stages):
                _tile(desc, A, O, S, F, b, by, k)
        else:
            for k in T.serial(T.ceildiv(N, bn)):
                _tile(desc, A, O, S, F, b, by, k)
