"""Copies between scopes with tails: global -> a chain of 1-3 shared/fragment tiles (each may change the dtype)
-> global, optionally through per-thread local rows at the end; tiles addressed by origin or by slice; 1-D or 2-D;
static or T.dynamic sizes."""

import random
from dataclasses import dataclass
from typing import ClassVar

import tilelang.language as T

from ..family import Family, register, smaller
from ..tensors import TOLERANCE, TORCH_DTYPES, poisoned, random_tensor

SCOPES = ("shared", "fragment")
DTYPES = ("float32", "float16", "bfloat16", "int32")


@dataclass(frozen=True)
class CopyDesc:
    family: ClassVar[str] = "copy"
    shape: tuple  # (N,) or (M, N)
    block: tuple
    threads: int
    src_dtype: str
    hops: tuple  # ((scope, dtype), ...) the tiles the data passes through, in order
    out_dtype: str
    via_local: bool  # 2-D only: the last tile is shared and each thread copies a row into a local array
    slice_form: bool  # copies written with slices (A[a:b, c:d]) instead of origins
    data_seed: int
    dynamic: bool = False  # the shape is T.dynamic: sizes and tails known only at launch


def _ok_cast(a: str, b: str) -> bool:
    # int <-> float is avoided (float -> int truncation of a rounded value would flake); float <-> float is fine
    return (a == "int32") == (b == "int32")


@register
class Copy(Family):
    name = "copy"
    desc_type = CopyDesc

    def generate(self, rng: random.Random, data_seed: int) -> CopyDesc:
        rank = rng.choice((1, 2, 2, 2))
        if rank == 1:
            block = (rng.choice((32, 64, 128, 256, 512)),)
        else:
            block = (rng.choice((4, 8, 16, 32, 64)), rng.choice((8, 16, 32, 64, 128)))
        shape = tuple(rng.choice((b, 3 * b, rng.randint(1, 3 * b))) for b in block)
        src = rng.choice(DTYPES)
        hops, cur = [], src
        for _ in range(rng.randint(1, 3)):
            d = rng.choice([x for x in DTYPES if _ok_cast(cur, x)] + [cur] * 2)
            hops.append((rng.choice(SCOPES), d))
            cur = d
        threads = rng.choice((32, 64, 128, 256))
        via_local = rank == 2 and rng.random() < 0.25
        if via_local:
            hops.append(("shared", cur))
            threads = max(threads, block[0])
            threads = 1 << (threads - 1).bit_length()
        out = rng.choice([x for x in DTYPES if _ok_cast(cur, x)] + [cur] * 2)
        return CopyDesc(shape=shape, block=block, threads=threads, src_dtype=src, hops=tuple(hops), out_dtype=out,
                        via_local=via_local, slice_form=rng.random() < 0.3, data_seed=data_seed,
                        dynamic=rng.random() < 0.25)

    def build(self, desc):
        shape = tuple(T.dynamic(n) for n in ("M", "N")[-len(desc.shape):]) if desc.dynamic else desc.shape
        src, out = desc.src_dtype, desc.out_dtype
        body = _copy_2d if len(shape) == 2 else _copy_1d

        @T.prim_func
        def main(A: T.Tensor(shape, src), B: T.Tensor(shape, out)):
            body(desc, A, B)

        return main

    def arguments(self, desc, gen):
        return [random_tensor(desc.shape, desc.src_dtype, gen), poisoned(desc.shape, desc.out_dtype)]

    def reference(self, desc, args):
        x = args[0]
        for _, d in desc.hops:
            x = x.to(TORCH_DTYPES[d])
        return {1: x.to(TORCH_DTYPES[desc.out_dtype])}

    def tolerance(self, desc, index):
        return (0, 0)  # casts round the same way in torch and in the kernel

    def shrink(self, desc):
        r = self.replace
        if desc.dynamic:
            yield r(desc, dynamic=False)
        if desc.via_local:
            yield r(desc, via_local=False, hops=desc.hops[:-1] or (("shared", desc.hops[-1][1]),))
        if desc.slice_form:
            yield r(desc, slice_form=False)
        for i in range(len(desc.hops) - (1 if desc.via_local else 0)):
            hops = desc.hops[:i] + desc.hops[i + 1:]
            if hops:
                yield r(desc, hops=hops)
        for i, (s, d) in enumerate(desc.hops):
            if s == "fragment" and not (desc.via_local and i == len(desc.hops) - 1):
                yield r(desc, hops=desc.hops[:i] + (("shared", d),) + desc.hops[i + 1:])
        if len(desc.shape) == 2 and not desc.via_local:
            yield r(desc, shape=desc.shape[1:], block=(max(32, desc.block[1]),))
        for d, n in enumerate(desc.shape):
            for m in smaller(n):
                yield r(desc, shape=desc.shape[:d] + (m,) + desc.shape[d + 1:])
        for d, b in enumerate(desc.block):
            if b > 8:
                yield r(desc, block=desc.block[:d] + (b // 2,) + desc.block[d + 1:])
        if desc.threads > 32 and not (desc.via_local and desc.threads // 2 < desc.block[0]):
            yield r(desc, threads=desc.threads // 2)
        if desc.src_dtype != "float32" and desc.src_dtype != "int32":
            yield r(desc, src_dtype="float32")


@T.macro
def _copy_2d(desc, A, B):
    M, N = B.shape  # ints, or the T.dynamic sizes
    bm, bn = desc.block
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=desc.threads) as (bx, by):
        tiles = [T.alloc_shared((bm, bn), d) if s == "shared" else T.alloc_fragment((bm, bn), d)
                 for s, d in desc.hops]
        if desc.slice_form:
            T.copy(A[by * bm:by * bm + bm, bx * bn:bx * bn + bn], tiles[0])
        else:
            T.copy(A[by * bm, bx * bn], tiles[0])
        for a, b in zip(tiles[:-1], tiles[1:]):  # a Python loop: range() would be a TIR loop
            T.copy(a, b)
        if desc.via_local:
            tx = T.get_thread_binding()
            row = T.alloc_local((bn,), desc.hops[-1][1])
            if tx < bm:
                T.copy(tiles[-1][tx, 0:bn], row)
                T.copy(row, B[by * bm + tx, bx * bn:bx * bn + bn])
        elif desc.slice_form:
            T.copy(tiles[-1], B[by * bm:by * bm + bm, bx * bn:bx * bn + bn])
        else:
            T.copy(tiles[-1], B[by * bm, bx * bn])


@T.macro
def _copy_1d(desc, A, B):
    (N,) = B.shape
    (bn,) = desc.block
    with T.Kernel(T.ceildiv(N, bn), threads=desc.threads) as bx:
        tiles = [T.alloc_shared((bn,), d) if s == "shared" else T.alloc_fragment((bn,), d) for s, d in desc.hops]
        if desc.slice_form:
            T.copy(A[bx * bn:bx * bn + bn], tiles[0])
        else:
            T.copy(A[bx * bn], tiles[0])
        for a, b in zip(tiles[:-1], tiles[1:]):  # a Python loop: range() would be a TIR loop
            T.copy(a, b)
        if desc.slice_form:
            T.copy(tiles[-1], B[bx * bn:bx * bn + bn])
        else:
            T.copy(tiles[-1], B[bx * bn])
