"""Explicit warp specialization: a block of two squads (`T.ws`), one the producer loading column tiles of A (K with
a tail) into shared memory, the other the consumer accumulating them into a float32 fragment it stores at the end.
Hand-off styles: `sync` (whole-block `T.sync_threads()` between the regions: both arches), `barrier` (a ring of
full/empty async barriers, the producer's plain T.copy then 128 arrivals) and `tma` (a ring filled by `T.tma_copy`
with its transaction bytes, one arrival): the last two exist on mp_31 only, and mp_22 must refuse them by name.
Automatic warp specialization (a T.Pipelined loop of TME loads on mp_31) is the `pipeline` family's default."""

import random
from dataclasses import dataclass
from typing import ClassVar

import torch

import tilelang.language as T

from ..family import Family, load_path, register, smaller
from ..tensors import poisoned, random_tensor

SQUAD = 128
MODES = ("sync", "barrier", "tma")


@dataclass(frozen=True)
class WarpSpecDesc:
    family: ClassVar[str] = "warpspec"
    M: int
    K: int
    bm: int
    bk: int
    producer: int  # squad index of the producer (the consumer is the other one)
    mode: str  # one of MODES
    stages: int  # ring depth (barrier / tma)
    dtype: str
    data_seed: int


@register
class WarpSpec(Family):
    name = "warpspec"
    desc_type = WarpSpecDesc

    def generate(self, rng: random.Random, data_seed: int) -> WarpSpecDesc:
        dtype = rng.choice(("float16", "bfloat16", "float32"))
        mode = rng.choice(MODES)
        bm, bk = rng.choice((8, 16, 32, 64)), rng.choice((16, 32, 64))
        elems = 16 // (4 if dtype == "float32" else 2)
        # TME: the global rows a multiple of 16 bytes; the tail is filled with zeros by the copy engine
        K = elems * rng.randint(1, 5 * bk // elems) if mode == "tma" else rng.randint(1, 5 * bk)
        M = bm * rng.randint(1, 3) if rng.random() < 0.5 else rng.randint(1, 3 * bm)
        return WarpSpecDesc(M=M, K=K, bm=bm, bk=bk, producer=rng.choice((0, 1)), mode=mode,
                            stages=rng.choice((1, 2, 3)), dtype=dtype, data_seed=data_seed)

    def rejected_on(self, desc, arch):
        if desc.mode != "sync" and arch in ("mp_21", "mp_22"):
            return r"mp_22"
        return None

    def path(self, desc, source):
        return load_path(source, 2 * SQUAD)

    def build(self, desc):
        dt, out = desc.dtype, (desc.M, desc.bk)

        @T.prim_func
        def main(A: T.Tensor((desc.M, desc.K), dt), O: T.Tensor(out, "float32")):
            if desc.mode == "sync":
                _sync_body(desc, A, O)
            else:
                _ring_body(desc, A, O)

        return main

    def arguments(self, desc, gen):
        return [random_tensor((desc.M, desc.K), desc.dtype, gen), poisoned((desc.M, desc.bk), "float32")]

    def reference(self, desc, args):
        tiles = -(-desc.K // desc.bk)
        a = torch.nn.functional.pad(args[0].double(), (0, tiles * desc.bk - desc.K))
        return {1: a.reshape(desc.M, tiles, desc.bk).sum(1).float()}

    def tolerance(self, desc, index):
        return (1e-4, 1e-4)

    def shrink(self, desc):
        r = self.replace
        if desc.mode == "barrier":
            yield r(desc, mode="sync")
        if desc.stages > 1:
            yield r(desc, stages=1)
        if desc.producer != 1:
            yield r(desc, producer=1)
        if desc.dtype != "float32" and desc.mode != "tma":
            yield r(desc, dtype="float32")
        for f in ("M", "K"):
            for v in smaller(getattr(desc, f)):
                if f != "K" or desc.mode != "tma" or v % 8 == 0:
                    yield r(desc, **{f: v})
        for f in ("bm", "bk"):
            if getattr(desc, f) > 8 and not (f == "bk" and desc.bk <= 16):
                yield r(desc, **{f: getattr(desc, f) // 2})


@T.macro
def _sync_body(desc, A, O):
    bm, bk = desc.bm, desc.bk
    with T.Kernel(T.ceildiv(desc.M, bm), threads=2 * SQUAD) as by:
        S = T.alloc_shared((bm, bk), desc.dtype)
        acc = T.alloc_fragment((bm, bk), "float32")
        with T.ws(1 - desc.producer):
            T.clear(acc)
        for k in T.serial(T.ceildiv(desc.K, bk)):
            with T.ws(desc.producer):
                T.copy(A[by * bm, k * bk], S)
            T.sync_threads()
            with T.ws(1 - desc.producer):
                for i, j in T.Parallel(bm, bk):
                    acc[i, j] += T.cast(S[i, j], "float32")
            T.sync_threads()
        with T.ws(1 - desc.producer):
            T.copy(acc, O[by * bm, 0])


@T.macro
def _ring_body(desc, A, O):
    bm, bk, R = desc.bm, desc.bk, desc.stages
    with T.Kernel(T.ceildiv(desc.M, bm), threads=2 * SQUAD) as by:
        S = T.alloc_shared((R, bm, bk), desc.dtype)
        acc = T.alloc_fragment((bm, bk), "float32")
        full = T.alloc_barrier([1 if desc.mode == "tma" else SQUAD] * R)
        empty = T.alloc_barrier([SQUAD] * R)
        tx = T.get_thread_binding()
        with T.ws(desc.producer):
            for k in T.serial(T.ceildiv(desc.K, bk)):
                s = k % R
                T.barrier_wait(empty[s], ((k // R) & 1) ^ 1)
                if desc.mode == "tma":
                    T.tma_copy(A[by * bm:(by + 1) * bm, k * bk:(k + 1) * bk], S[s, :, :], barrier=full[s])
                    if tx == desc.producer * SQUAD:
                        T.barrier_arrive(full[s])
                else:
                    T.copy(A[by * bm, k * bk], S[s, :, :])
                    T.barrier_arrive(full[s])
        with T.ws(1 - desc.producer):
            T.clear(acc)
            for k in T.serial(T.ceildiv(desc.K, bk)):
                s = k % R
                T.barrier_wait(full[s], (k // R) & 1)
                for i, j in T.Parallel(bm, bk):
                    acc[i, j] += T.cast(S[s, i, j], "float32")
                T.barrier_arrive(empty[s])
            T.copy(acc, O[by * bm, 0])
