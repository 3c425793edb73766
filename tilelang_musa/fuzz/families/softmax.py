"""Softmax-like fused loops over rows: row max, exp (or exp2 of a log2(e)-scaled value), row sum, divide (or the
log-softmax form), in a float32 fragment between inputs and outputs of any float dtype; rows tiled over blocks
with a tail; an optional scale of the logits."""

import math
import random
from dataclasses import dataclass
from typing import ClassVar

import torch

import tilelang.language as T

from ..family import Family, register, smaller
from ..tensors import TOLERANCE, TORCH_DTYPES, poisoned, random_tensor

LOG2E = 1.4426950408889634
ROW = (16, 32, 64, 128, 256)  # powers of two: a row over a non-power-of-two of threads is a documented error


@dataclass(frozen=True)
class SoftmaxDesc:
    family: ClassVar[str] = "softmax"
    M: int
    N: int  # row length (whole rows per block)
    bm: int
    threads: int
    dtype: str  # input and output
    scale: float
    use_exp2: bool
    log: bool  # log-softmax: x - max - log(sum)
    data_seed: int


@register
class Softmax(Family):
    name = "softmax"
    desc_type = SoftmaxDesc
    weight = 0.8

    def generate(self, rng: random.Random, data_seed: int) -> SoftmaxDesc:
        bm = rng.choice((1, 2, 4, 8, 16, 32))
        return SoftmaxDesc(M=rng.choice((bm, 2 * bm, rng.randint(1, 3 * bm))), N=rng.choice(ROW), bm=bm,
                           threads=rng.choice((32, 64, 128, 256)),
                           dtype=rng.choice(("float32", "float32", "float16", "bfloat16")),
                           scale=rng.choice((1.0, 1.0, 0.125, 2.0)), use_exp2=rng.random() < 0.4,
                           log=rng.random() < 0.3, data_seed=data_seed)

    def build(self, desc):
        shape, dt = (desc.M, desc.N), desc.dtype

        @T.prim_func
        def main(X: T.Tensor(shape, dt), Y: T.Tensor(shape, dt)):
            _softmax_body(desc, X, Y)

        return main

    def arguments(self, desc, gen):
        return [random_tensor((desc.M, desc.N), desc.dtype, gen), poisoned((desc.M, desc.N), desc.dtype)]

    def reference(self, desc, args):
        x = args[0].double() * desc.scale
        y = torch.log_softmax(x, 1) if desc.log else torch.softmax(x, 1)
        return {1: y.to(TORCH_DTYPES[desc.dtype])}

    def tolerance(self, desc, index):
        return (1e-5, 1e-5) if desc.dtype == "float32" else TOLERANCE[desc.dtype]

    def shrink(self, desc):
        r = self.replace
        if desc.log:
            yield r(desc, log=False)
        if desc.use_exp2:
            yield r(desc, use_exp2=False)
        if desc.scale != 1.0:
            yield r(desc, scale=1.0)
        if desc.dtype != "float32":
            yield r(desc, dtype="float32")
        for m in smaller(desc.M):
            yield r(desc, M=m)
        for n in ROW:
            if n < desc.N:
                yield r(desc, N=n)
        for b in smaller(desc.bm):
            yield r(desc, bm=b)
        if desc.threads > 32:
            yield r(desc, threads=desc.threads // 2)


@T.macro
def _softmax_body(desc, X, Y):
    bm, N = desc.bm, desc.N
    with T.Kernel(T.ceildiv(desc.M, bm), threads=desc.threads) as bx:
        x = T.alloc_fragment((bm, N), "float32")
        m = T.alloc_fragment((bm,), "float32")
        s = T.alloc_fragment((bm,), "float32")
        T.copy(X[bx * bm, 0], x)
        if desc.scale != 1.0:
            for i, j in T.Parallel(bm, N):
                x[i, j] = x[i, j] * desc.scale
        T.reduce_max(x, m, dim=1)
        e = T.alloc_fragment((bm, N), "float32")
        for i, j in T.Parallel(bm, N):
            if desc.use_exp2:
                e[i, j] = T.exp2((x[i, j] - m[i]) * LOG2E)
            else:
                e[i, j] = T.exp(x[i, j] - m[i])
        T.reduce_sum(e, s, dim=1)
        for i, j in T.Parallel(bm, N):
            if desc.log:
                e[i, j] = x[i, j] - m[i] - T.log(s[i])
            else:
                e[i, j] = e[i, j] / s[i]
        T.copy(e, Y[bx * bm, 0])
