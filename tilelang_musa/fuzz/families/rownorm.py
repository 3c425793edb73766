"""Reductions whose results the block uses: a tile of rows (tails in both dims) is loaded into a fragment or a
shared tile, reduced along its rows into a destination in a fragment or in shared memory (`T.reduce_max` /
`reduce_sum` / `reduce_absmax` / `reduce_min`), and the result broadcast back over the tile by a T.Parallel
(x - max, x / (sum |x|), ...); one to three such steps in sequence, each reusing or replacing the destination,
then the tile and the last row vector are both stored. The tail columns are masked with the reduction's identity
so that they do not take part."""

import random
from dataclasses import dataclass
from typing import ClassVar

import tilelang.language as T

from ..family import Family, register, smaller
from ..tensors import poisoned, random_tensor

# step: (reduction, how its result updates x)
STEPS = {
    "center_max": ("max", lambda x, r: x - r),
    "center_min": ("min", lambda x, r: x - r),
    "scale_absmax": ("absmax", lambda x, r: x / r),
    "shift_sum": ("sum", lambda x, r: x - r * 0.125),
}
IDENTITY = {"max": float("-inf"), "min": float("inf"), "absmax": 0.0, "sum": 0.0}
REF = {"max": lambda x: x.amax(1), "min": lambda x: x.amin(1), "absmax": lambda x: x.abs().amax(1),
       "sum": lambda x: x.sum(1)}
COLS = (8, 16, 32, 64, 128)  # powers of two: a row over a non-power-of-two of threads is a documented error


@dataclass(frozen=True)
class RowNormDesc:
    family: ClassVar[str] = "rownorm"
    M: int
    N: int  # <= cols: the row fits one tile, columns past N are masked
    rows: int
    cols: int
    threads: int
    src_scope: str  # "fragment" | "shared"
    dst_scope: str  # "fragment" | "shared"
    steps: tuple  # keys of STEPS
    fresh_dst: bool  # each step reduces into its own destination (else one destination reused)
    dtype: str  # input / output dtype; the tile is float32
    data_seed: int


@register
class RowNorm(Family):
    name = "rownorm"
    desc_type = RowNormDesc

    def generate(self, rng: random.Random, data_seed: int) -> RowNormDesc:
        rows, cols = rng.choice((1, 2, 4, 8, 16, 32)), rng.choice(COLS)
        M = rng.choice((rows, 3 * rows, rng.randint(1, 3 * rows)))
        N = rng.choice((cols, rng.randint(1, cols)))
        return RowNormDesc(M=M, N=N, rows=rows, cols=cols, threads=rng.choice((32, 64, 128, 256)),
                           src_scope=rng.choice(("fragment", "fragment", "shared")),
                           dst_scope=rng.choice(("fragment", "shared")),
                           steps=tuple(rng.choice(tuple(STEPS)) for _ in range(rng.randint(1, 3))),
                           fresh_dst=rng.random() < 0.5, dtype=rng.choice(("float32", "float16", "bfloat16")),
                           data_seed=data_seed)

    def build(self, desc):
        dt = desc.dtype

        @T.prim_func
        def main(A: T.Tensor((desc.M, desc.N), dt), O: T.Tensor((desc.M, desc.N), "float32"),
                 R: T.Tensor((desc.M,), "float32")):
            _rownorm_body(desc, A, O, R)

        return main

    def arguments(self, desc, gen):
        return [random_tensor((desc.M, desc.N), desc.dtype, gen), poisoned((desc.M, desc.N), "float32"),
                poisoned((desc.M,), "float32")]

    def reference(self, desc, args):
        x = args[0].double()
        r = None
        for step in desc.steps:
            kind, update = STEPS[step]
            r = REF[kind](x)
            x = update(x, r[:, None])
        return {1: x.float(), 2: r.float()}

    def tolerance(self, desc, index):
        return (1e-4, 1e-4)

    def shrink(self, desc):
        r = self.replace
        for i in range(len(desc.steps)):
            if len(desc.steps) > 1:
                yield r(desc, steps=desc.steps[:i] + desc.steps[i + 1:])
        if desc.fresh_dst:
            yield r(desc, fresh_dst=False)
        for f in ("src_scope", "dst_scope"):
            if getattr(desc, f) != "fragment":
                yield r(desc, **{f: "fragment"})
        if desc.dtype != "float32":
            yield r(desc, dtype="float32")
        for v in smaller(desc.M):
            yield r(desc, M=v)
        for v in smaller(desc.N):
            yield r(desc, N=v)
        for c in COLS:
            if desc.N <= c < desc.cols:
                yield r(desc, cols=c)
        if desc.rows > 1:
            yield r(desc, rows=desc.rows // 2)
        if desc.threads > 32:
            yield r(desc, threads=desc.threads // 2)


def _alloc(scope, shape):
    return T.alloc_shared(shape, "float32") if scope == "shared" else T.alloc_fragment(shape, "float32")


@T.macro
def _rownorm_body(desc, A, O, R):
    rows, cols, N = desc.rows, desc.cols, desc.N
    with T.Kernel(T.ceildiv(desc.M, rows), threads=desc.threads) as by:
        X = _alloc(desc.src_scope, (rows, cols))
        dsts = [_alloc(desc.dst_scope, (rows,)) for _ in (desc.steps if desc.fresh_dst else desc.steps[:1])]
        T.copy(A[by * rows, 0], X)
        for n, step in enumerate(desc.steps):  # a Python loop: the steps are unrolled
            kind, _ = STEPS[step]
            D = dsts[n if desc.fresh_dst else 0]
            for i, j in T.Parallel(rows, cols):
                X[i, j] = T.if_then_else(j < N, X[i, j], T.cast(IDENTITY[kind], "float32"))
            getattr(T, f"reduce_{kind}")(X, D, dim=1)
            for i, j in T.Parallel(rows, cols):
                if step == "center_max" or step == "center_min":
                    X[i, j] = X[i, j] - D[i]
                elif step == "scale_absmax":
                    X[i, j] = X[i, j] / D[i]
                else:
                    X[i, j] = X[i, j] - D[i] * T.float32(0.125)
        T.copy(X, O[by * rows, 0])
        T.copy(dsts[-1], R[by * rows])
