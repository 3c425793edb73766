"""`T.alloc_var` state carried across loop iterations: each thread owns a row and walks its columns in order with
a T.serial loop (directly over global memory, or over column tiles staged in shared memory by an outer loop,
the state living on across tiles), updating one or two scalars: a running sum, max, count of positives, a
linear recurrence (v = v * a + x) or a pair (sum and max); it stores the running value per column (a scan) or only
the final one. Initialised through `init=` or by an assignment before the loop."""

import random
from dataclasses import dataclass
from typing import ClassVar

import torch

import tilelang.language as T

from ..family import Family, register, smaller
from ..tensors import poisoned, random_tensor

KINDS = ("sum", "max", "count", "recur", "pair")
ALPHA = 0.75


@dataclass(frozen=True)
class CarriedDesc:
    family: ClassVar[str] = "carried"
    M: int
    N: int
    threads: int
    kind: str
    scan: bool  # store the running value after every column (else only the final value)
    tiled: int  # 0: read A directly; > 0: columns staged in shared tiles this wide by an outer loop
    init_kw: bool  # T.alloc_var(dtype, init=...) instead of an assignment
    data_seed: int

    @property
    def dtype(self):
        return "int32" if self.kind == "count" else "float32"

    @property
    def out_shape(self):
        return (self.M, self.N) if self.scan else (self.M,)


@register
class Carried(Family):
    name = "carried"
    desc_type = CarriedDesc

    def generate(self, rng: random.Random, data_seed: int) -> CarriedDesc:
        threads = rng.choice((32, 64, 128))
        tiled = rng.choice((0, 0, 4, 8, 16))
        return CarriedDesc(M=rng.choice((threads, rng.randint(1, 3 * threads))), N=rng.randint(1, 48),
                           threads=threads, kind=rng.choice(KINDS), scan=rng.random() < 0.5, tiled=tiled,
                           init_kw=rng.random() < 0.5, data_seed=data_seed)

    def build(self, desc):
        out = desc.out_shape

        @T.prim_func
        def main(A: T.Tensor((desc.M, desc.N), "float32"), O: T.Tensor(out, desc.dtype)):
            _carried_body(desc, A, O)

        return main

    def arguments(self, desc, gen):
        return [random_tensor((desc.M, desc.N), "float32", gen), poisoned(desc.out_shape, desc.dtype)]

    def reference(self, desc, args):
        a = args[0].float()
        cols, v, w = [], None, None
        for j in range(desc.N):
            x = a[:, j]
            if desc.kind == "sum":
                v = x if v is None else v + x
            elif desc.kind == "max":
                v = x if v is None else torch.maximum(v, x)
            elif desc.kind == "count":
                v = (x > 0).int() if v is None else v + (x > 0).int()
            elif desc.kind == "recur":
                v = x if v is None else v * ALPHA + x
            else:
                v = x if v is None else v + x
                w = x if w is None else torch.maximum(w, x)
            cols.append(v + w if desc.kind == "pair" else v)
        if desc.scan:
            return {1: torch.stack(cols, 1)}
        return {1: cols[-1]}

    def tolerance(self, desc, index):
        return (0, 0) if desc.kind == "count" else (1e-5, 1e-5)

    def shrink(self, desc):
        r = self.replace
        if desc.tiled:
            yield r(desc, tiled=0)
        if desc.scan:
            yield r(desc, scan=False)
        if desc.init_kw:
            yield r(desc, init_kw=False)
        if desc.kind != "sum":
            yield r(desc, kind="sum")
        for v in smaller(desc.M):
            yield r(desc, M=v)
        for v in smaller(desc.N):
            yield r(desc, N=v)
        if desc.threads > 32:
            yield r(desc, threads=desc.threads // 2)


# The first column seeds the state (v = x0), so every kind starts from its first element, not from an identity.
@T.macro
def _update(desc, v, w, x):
    if desc.kind == "sum" or desc.kind == "pair":
        v[0] = v[0] + x
    elif desc.kind == "max":
        v[0] = T.max(v[0], x)
    elif desc.kind == "count":
        v[0] = v[0] + T.if_then_else(x > T.float32(0), 1, 0)
    else:
        v[0] = v[0] * T.float32(ALPHA) + x
    if desc.kind == "pair":
        w[0] = T.max(w[0], x)


@T.macro
def _emit(desc, O, v, w, r, j):
    if desc.kind == "pair":
        O[r, j] = v[0] + w[0]
    else:
        O[r, j] = v[0]


@T.macro
def _carried_body(desc, A, O):
    M, N, threads, dt = desc.M, desc.N, desc.threads, desc.dtype
    with T.Kernel(T.ceildiv(M, threads), threads=threads) as bx:
        tx = T.get_thread_binding()
        r = bx * threads + tx
        S = T.alloc_shared((threads, max(desc.tiled, 1)), "float32")
        if desc.init_kw:
            v = T.alloc_var(dt, init=0)
            w = T.alloc_var("float32", init=-1e30)
        else:
            v = T.alloc_var(dt)
            w = T.alloc_var("float32")
            v[0] = T.cast(0, dt)
            w[0] = T.float32(-1e30)
        if desc.tiled:
            for t in T.serial(T.ceildiv(N, desc.tiled)):
                T.copy(A[bx * threads, t * desc.tiled], S)
                if r < M:
                    for c in T.serial(desc.tiled):
                        j = t * desc.tiled + c
                        if j < N:
                            _step(desc, O, v, w, r, j, S[tx, c])
        else:
            if r < M:
                for j in T.serial(N):
                    _step(desc, O, v, w, r, j, A[r, j])
        if not desc.scan:
            if r < M:
                if desc.kind == "pair":
                    O[r] = v[0] + w[0]
                else:
                    O[r] = v[0]


@T.macro
def _step(desc, O, v, w, r, j, x):
    if j == 0:
        if desc.kind == "count":
            v[0] = T.if_then_else(x > T.float32(0), 1, 0)
        else:
            v[0] = x
        w[0] = x
    else:
        _update(desc, v, w, x)
    if desc.scan:
        _emit(desc, O, v, w, r, j)
