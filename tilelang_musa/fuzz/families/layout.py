"""Annotated layouts: tiles of a 2-D tensor (tails in both dims) pass global -> shared tile under an annotated
swizzle (`T.annotate_layout` with the bank swizzles, the SQMMA swizzle K- or MN-major, `make_swizzled_layout` or
row padding) -> fragment under an annotated `T.Fragment` (blocked, cyclic, column-major or replicated over the
block's threads) -> global, directly or back through the swizzled tile; on the way an elementwise step that reads
the fragment (its layout drives the loop) and possibly the shared tile."""

import random
from dataclasses import dataclass
from typing import ClassVar

import tilelang.language as T
from tilelang import layout as L

from ..family import Family, register, smaller
from ..tensors import poisoned, random_tensor

# shared layouts, with the row bytes each needs (a multiple of)
SHARED = {"none": 1, "quarter": 32, "half": 64, "full": 128, "sqmma_k": 16, "sqmma_mn": 16, "swizzled": 16,
          "padded": 1}
FRAGMENTS = ("none", "blocked", "cyclic", "colmajor", "replicated")
OPS = ("copy", "affine", "add_shared")
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4}


@dataclass(frozen=True)
class LayoutDesc:
    family: ClassVar[str] = "layout"
    M: int
    N: int
    rows: int
    cols: int
    threads: int
    dtype: str
    shared: str  # key of SHARED
    fragment: str  # one of FRAGMENTS
    op: str  # one of OPS
    out_via_shared: bool
    data_seed: int


@register
class Layout(Family):
    name = "layout"
    desc_type = LayoutDesc

    def generate(self, rng: random.Random, data_seed: int) -> LayoutDesc:
        dtype = rng.choice(tuple(BYTES))
        rows, cols = rng.choice((8, 16, 32, 64)), rng.choice((16, 32, 64, 128))
        threads = rng.choice([t for t in (32, 64, 128, 256) if t <= rows * cols])
        shared = rng.choice([k for k, b in SHARED.items() if cols * BYTES[dtype] % b == 0])
        M = rng.choice((rows, 2 * rows, rng.randint(1, 3 * rows)))
        N = rng.choice((cols, 2 * cols, rng.randint(1, 3 * cols)))
        return LayoutDesc(M=M, N=N, rows=rows, cols=cols, threads=threads, dtype=dtype, shared=shared,
                          fragment=rng.choice(FRAGMENTS), op=rng.choice(OPS), out_via_shared=rng.random() < 0.4,
                          data_seed=data_seed)

    def build(self, desc):
        dt = desc.dtype

        @T.prim_func
        def main(A: T.Tensor((desc.M, desc.N), dt), O: T.Tensor((desc.M, desc.N), dt)):
            _layout_body(desc, A, O)

        return main

    def arguments(self, desc, gen):
        return [random_tensor((desc.M, desc.N), desc.dtype, gen, integral=True, low=-6, high=6),
                poisoned((desc.M, desc.N), desc.dtype)]

    def reference(self, desc, args):
        a = args[0]
        return {1: {"copy": a, "affine": a * 2 + 1, "add_shared": a + a}[desc.op]}

    def tolerance(self, desc, index):
        return (0, 0)  # small integers: exact in every dtype

    def shrink(self, desc):
        r = self.replace
        if desc.out_via_shared:
            yield r(desc, out_via_shared=False)
        if desc.op != "copy":
            yield r(desc, op="copy")
        if desc.fragment != "none":
            yield r(desc, fragment="none")
        if desc.shared != "none":
            yield r(desc, shared="none")
        for f in ("M", "N"):
            for v in smaller(getattr(desc, f)):
                yield r(desc, **{f: v})
        if desc.threads > 32:
            yield r(desc, threads=desc.threads // 2)
        if desc.rows > 8 and desc.threads <= desc.rows // 2 * desc.cols:
            yield r(desc, rows=desc.rows // 2)


def shared_layout(desc, S):
    kind = desc.shared
    if kind == "quarter":
        return L.make_quarter_bank_swizzled_layout(S)
    if kind == "half":
        return L.make_half_bank_swizzled_layout(S)
    if kind == "full":
        return L.make_full_bank_swizzled_layout(S)
    if kind in ("sqmma_k", "sqmma_mn"):
        return L.make_sqmma_swizzled_layout(S, k_major=kind == "sqmma_k")
    if kind == "swizzled":
        return L.make_swizzled_layout(S)
    return L.make_padded_layout(S)


def fragment_layout(desc):
    rows, cols, threads = desc.rows, desc.cols, desc.threads
    per = rows * cols // threads
    kind = desc.fragment
    if kind == "blocked":
        return T.Fragment((rows, cols), forward_fn=lambda i, j: ((i * cols + j) // per, (i * cols + j) % per))
    if kind == "cyclic":
        return T.Fragment((rows, cols), forward_fn=lambda i, j: ((i * cols + j) % threads, (i * cols + j) // threads))
    if kind == "colmajor":
        return T.Fragment((rows, cols), forward_fn=lambda i, j: ((j * rows + i) // per, (j * rows + i) % per))
    # two replicas, each spread over half of the threads
    half, per2 = threads // 2, 2 * per
    return T.Fragment((rows, cols), forward_thread_fn=lambda i, j, rep: (i * cols + j) // per2 + rep * half,
                      replicate=2, forward_index_fn=lambda i, j: (i * cols + j) % per2)


@T.macro
def _layout_body(desc, A, O):
    rows, cols, dt = desc.rows, desc.cols, desc.dtype
    with T.Kernel(T.ceildiv(desc.N, cols), T.ceildiv(desc.M, rows), threads=desc.threads) as (bx, by):
        S = T.alloc_shared((rows, cols), dt)
        F = T.alloc_fragment((rows, cols), dt)
        if desc.shared != "none" and desc.fragment != "none":
            T.annotate_layout({S: shared_layout(desc, S), F: fragment_layout(desc)})
        elif desc.shared != "none":
            T.annotate_layout({S: shared_layout(desc, S)})
        elif desc.fragment != "none":
            T.annotate_layout({F: fragment_layout(desc)})
        T.copy(A[by * rows, bx * cols], S)
        T.copy(S, F)
        if desc.op == "affine":
            for i, j in T.Parallel(rows, cols):
                F[i, j] = F[i, j] * T.cast(2, dt) + T.cast(1, dt)
        elif desc.op == "add_shared":
            for i, j in T.Parallel(rows, cols):
                F[i, j] = F[i, j] + S[i, j]
        if desc.out_via_shared:
            T.copy(F, S)
            T.copy(S, O[by * rows, bx * cols])
        else:
            T.copy(F, O[by * rows, bx * cols])
