"""Reductions: T.reduce_sum/max/min/abssum/absmax along either dim of a tile (or a 1-D tile into one element),
clear or not (then the output's old contents are an input), fragment or shared operands, with the kept dim tiled
over blocks with a tail; accumulation in the input dtype or in float32; a reduced dim longer than the tile, reduced
chunk by chunk (clear=False in a serial loop) with the last chunk masked by the kind's identity."""

import random
from dataclasses import dataclass
from typing import ClassVar

import torch

import tilelang.language as T

from ..family import Family, register, smaller
from ..tensors import TOLERANCE, TORCH_DTYPES, poisoned, random_tensor

KINDS = ("sum", "max", "min", "abssum", "absmax")
# powers of two: a row spread over a non-power-of-two of threads is a documented CompileError
REDUCED = (8, 16, 32, 64, 128, 256)
REF = {"sum": lambda x, d: x.sum(d), "max": lambda x, d: x.amax(d), "min": lambda x, d: x.amin(d),
       "abssum": lambda x, d: x.abs().sum(d), "absmax": lambda x, d: x.abs().amax(d)}
COMBINE = {"sum": torch.add, "abssum": torch.add, "max": torch.maximum, "absmax": torch.maximum,
           "min": torch.minimum}
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}  # half an ulp of 1: the relative error of one rounding


def accumulation_atol(kind: str, terms: int, u: float) -> float:
    """Four standard deviations of the rounding error of a sum of `terms` N(0, 1) inputs (their absolute values for
    abssum) accumulated in a 16-bit float in the worst order, one after another: each addition rounds its partial
    sum S_k by a relative error uniform in [-u, u] (variance u^2 / 3), so Var = u^2 / 3 * sum_k E[S_k^2], with
    E[S_k^2] = k for N(0, 1) terms and (0.8 k)^2 + 0.36 k for |N(0, 1)| ones. The error does not shrink with the
    result: a sum that cancels to 0.4 still carries the roundings of partial sums of magnitude ~ sqrt(k), so a
    tolerance relative to the result alone is too tight (program 4332 of seed 42002: 256 bfloat16 terms summed to
    0.4375 where the float32 sum is 0.4040, exactly the bfloat16 accumulation the kernel's order gives)."""
    if kind == "sum":
        second_moments = terms * (terms + 1) / 2
    else:
        second_moments = sum(0.64 * k * k + 0.36 * k for k in range(1, terms + 1))
    return 4.0 * u * (second_moments / 3.0) ** 0.5


@dataclass(frozen=True)
class ReduceDesc:
    family: ClassVar[str] = "reduce"
    kind: str
    reduced: int  # extent of the reduced dim (whole, one tile)
    kept: int  # extent of the kept dim (0: a 1-D input reduced into one element)
    block: int  # tile of the kept dim
    dim: int  # which dim of the 2-D tile is reduced
    clear: bool
    src_scope: str
    dst_scope: str
    dtype: str  # input and output dtype
    acc_dtype: str  # dtype of the tiles the reduction runs on
    threads: int
    data_seed: int
    total: int = 0  # > 0: the reduced dim of the input is this long, reduced in chunks of `reduced` by a serial
    # loop (clear=False into the result), the chunk past the end masked with the kind's identity

    @property
    def length(self):
        return self.total or self.reduced

    @property
    def in_shape(self):
        if not self.kept:
            return (self.reduced,)
        return (self.kept, self.length) if self.dim == 1 else (self.length, self.kept)

    @property
    def out_shape(self):
        return (self.kept,) if self.kept else (1,)


@register
class Reduce(Family):
    name = "reduce"
    desc_type = ReduceDesc

    def generate(self, rng: random.Random, data_seed: int) -> ReduceDesc:
        dtype = rng.choice(("float32", "float32", "float16", "bfloat16"))
        one_d = rng.random() < 0.15
        block = rng.choice((1, 2, 4, 8, 16, 32, 64))
        kept = 0 if one_d else rng.choice((block, 3 * block, rng.randint(1, 3 * block)))
        reduced = rng.choice(REDUCED)
        total = 0 if one_d or rng.random() < 0.7 else rng.choice((2 * reduced, rng.randint(reduced + 1, 4 * reduced)))
        return ReduceDesc(total=total, kind=rng.choice(KINDS), reduced=reduced, kept=kept, block=block,
                          dim=rng.choice((0, 1)), clear=rng.random() < 0.6,
                          src_scope=rng.choice(("fragment", "fragment", "shared")),
                          dst_scope=rng.choice(("fragment", "fragment", "shared")), dtype=dtype,
                          acc_dtype=rng.choice(("float32", dtype)), threads=rng.choice((32, 64, 128, 256)),
                          data_seed=data_seed)

    def build(self, desc):
        in_shape, out_shape, dt = desc.in_shape, desc.out_shape, desc.dtype

        @T.prim_func
        def main(A: T.Tensor(in_shape, dt), O: T.Tensor(out_shape, dt)):
            _reduce_body(desc, A, O)

        return main

    def arguments(self, desc, gen):
        a = random_tensor(desc.in_shape, desc.dtype, gen)
        o = poisoned(desc.out_shape, desc.dtype) if desc.clear else random_tensor(desc.out_shape, desc.dtype, gen)
        return [a, o]

    def reference(self, desc, args):
        a, o = args[0].float(), args[1].float()
        r = REF[desc.kind](a, desc.dim if desc.kept else 0)
        if not desc.kept:
            r = r.reshape(1)
        if not desc.clear:
            r = COMBINE[desc.kind](o.to(TORCH_DTYPES[desc.acc_dtype]).float(), r)
        return {1: r.to(TORCH_DTYPES[desc.dtype])}

    def tolerance(self, desc, index):
        worst = desc.dtype if desc.acc_dtype == "float32" else desc.acc_dtype
        rtol, atol = TOLERANCE[worst]
        if worst == "float32":
            return (max(rtol, 1e-5), max(atol, 1e-4))
        if desc.kind in ("sum", "abssum") and desc.acc_dtype in UNIT_ROUNDOFF:
            terms = desc.length + (0 if desc.clear else 1)
            atol = max(atol, accumulation_atol(desc.kind, terms, UNIT_ROUNDOFF[desc.acc_dtype]))
        return (rtol, atol)

    def shrink(self, desc):
        r = self.replace
        if desc.total:
            yield r(desc, total=0)
            for t in smaller(desc.total, desc.reduced + 1):
                yield r(desc, total=t)
        if desc.src_scope != "fragment":
            yield r(desc, src_scope="fragment")
        if desc.dst_scope != "fragment":
            yield r(desc, dst_scope="fragment")
        if not desc.clear:
            yield r(desc, clear=True)
        if desc.kind != "sum":
            yield r(desc, kind="sum")
        if desc.acc_dtype != desc.dtype:
            yield r(desc, acc_dtype=desc.dtype)
        if desc.dtype != "float32":
            yield r(desc, dtype="float32", acc_dtype="float32")
        for m in smaller(desc.kept):
            yield r(desc, kept=m)
        for b in smaller(desc.block):
            yield r(desc, block=b)
        for n in REDUCED:
            if n < desc.reduced:
                yield r(desc, reduced=n, total=desc.total and max(desc.total, n + 1))
        if desc.threads > 32:
            yield r(desc, threads=desc.threads // 2)


IDENTITY = {"sum": 0.0, "abssum": 0.0, "absmax": 0.0, "max": float("-inf"), "min": float("inf")}


def _alloc(scope, shape, dtype):
    return T.alloc_shared(shape, dtype) if scope == "shared" else T.alloc_fragment(shape, dtype)


@T.macro
def _reduce_body(desc, A, O):
    reduce = getattr(T, f"reduce_{desc.kind}")
    if not desc.kept:
        with T.Kernel(1, threads=desc.threads):
            F = _alloc(desc.src_scope, (desc.reduced,), desc.acc_dtype)
            R = _alloc(desc.dst_scope, (1,), desc.acc_dtype)
            T.copy(A, F)
            if not desc.clear:
                T.copy(O, R)
            reduce(F, R, dim=0, clear=desc.clear)
            T.copy(R, O)
    elif desc.total:
        _chunked_body(desc, A, O, reduce)
    else:
        bk = desc.block
        tile = (bk, desc.reduced) if desc.dim == 1 else (desc.reduced, bk)
        with T.Kernel(T.ceildiv(desc.kept, bk), threads=desc.threads) as bx:
            F = _alloc(desc.src_scope, tile, desc.acc_dtype)
            R = _alloc(desc.dst_scope, (bk,), desc.acc_dtype)
            if desc.dim == 1:
                T.copy(A[bx * bk, 0], F)
            else:
                T.copy(A[0, bx * bk], F)
            if not desc.clear:
                T.copy(O[bx * bk], R)
            reduce(F, R, dim=desc.dim, clear=desc.clear)
            T.copy(R, O[bx * bk])


@T.macro
def _chunked_body(desc, A, O, reduce):
    bk, rc = desc.block, desc.reduced
    tile = (bk, rc) if desc.dim == 1 else (rc, bk)
    identity = T.cast(IDENTITY[desc.kind], desc.acc_dtype)
    with T.Kernel(T.ceildiv(desc.kept, bk), threads=desc.threads) as bx:
        F = _alloc(desc.src_scope, tile, desc.acc_dtype)
        R = _alloc(desc.dst_scope, (bk,), desc.acc_dtype)
        if desc.clear:
            T.fill(R, identity)
        else:
            T.copy(O[bx * bk], R)
        for c in T.serial(T.ceildiv(desc.total, rc)):
            if desc.dim == 1:
                T.copy(A[bx * bk, c * rc], F)
                for i, j in T.Parallel(bk, rc):
                    F[i, j] = T.if_then_else(c * rc + j < desc.total, F[i, j], identity)
            else:
                T.copy(A[c * rc, bx * bk], F)
                for i, j in T.Parallel(rc, bk):
                    F[i, j] = T.if_then_else(c * rc + i < desc.total, F[i, j], identity)
            reduce(F, R, dim=desc.dim, clear=False)
        T.copy(R, O[bx * bk])
