"""Software pipelines: a `T.Pipelined` loop with 1-4 stages over the column tiles of one or two inputs (K with a
tail, static or T.dynamic), each iteration copying the tiles into shared memory (optionally on to a fragment) and
accumulating an elementwise function of them into a float32 fragment; stored as the (M, bk) tile sums or reduced
to one value per row. Explicit `order=` / `stage=` lists, and the load paths by PassConfig: on mp_31 the default
(TME loads, warp-specialized with a producer squad), one squad (`tl.disable_warp_specialized`), LDLMS copies
(`tl.disable_tma_lower`); mp_22 takes LDLMS whatever the switches say."""

import random
from dataclasses import dataclass
from typing import ClassVar

import torch

import tilelang.language as T

from ..family import Family, load_path, register, smaller
from ..tensors import poisoned, random_tensor

CONFIGS = {
    "default": {},
    "one_squad": {"tl.disable_warp_specialized": True},
    "ldlms": {"tl.disable_tma_lower": True},
}
OPS = ("a", "a*b", "a+b", "a*a")  # each is 0 on the zero-filled tail, so the padded columns add nothing


@dataclass(frozen=True)
class PipelineDesc:
    family: ClassVar[str] = "pipeline"
    M: int
    K: int
    bm: int
    bk: int
    threads: int
    num_stages: int
    dtype: str
    op: str  # one of OPS ("b" reads a second input of A's shape)
    via_fragment: bool  # the A tile goes shared -> fragment before the compute
    out: str  # "tile": (M, bk) sums over the K tiles; "row": (M,), the tile sums reduced over bk
    config: str  # key of CONFIGS
    explicit_order: bool  # order= / stage= given (copies in stage 0, compute in the last stage)
    dynamic: bool  # M and K are T.dynamic
    data_seed: int

    @property
    def two_inputs(self):
        return "b" in self.op

    @property
    def out_shape(self):
        return (self.M, self.bk) if self.out == "tile" else (self.M,)

    @property
    def shared_bytes(self):
        """The shared tiles of an explicit schedule: a copy of each input tile per stage."""
        elem = 4 if self.dtype == "float32" else 2
        return self.num_stages * (2 if self.two_inputs else 1) * self.bm * self.bk * elem


@register
class Pipeline(Family):
    name = "pipeline"
    desc_type = PipelineDesc

    def generate(self, rng: random.Random, data_seed: int) -> PipelineDesc:
        dtype = rng.choice(("float16", "bfloat16", "float32"))
        bm, bk = rng.choice((8, 16, 32, 64)), rng.choice((16, 32, 64))
        elems = 16 // (4 if dtype == "float32" else 2)  # TME: rows of whole 16-byte units
        K = bk * rng.randint(1, 6) if rng.random() < 0.5 else elems * rng.randint(1, 6 * bk // elems)
        if rng.random() < 0.3:
            K = rng.randint(1, 6 * bk)  # any tail (rows not 16-byte multiples: plain copies instead of TME)
        M = bm * rng.randint(1, 3) if rng.random() < 0.5 else rng.randint(1, 3 * bm)
        desc = PipelineDesc(M=M, K=K, bm=bm, bk=bk, threads=rng.choice((64, 128, 128, 256)),
                            num_stages=rng.choice((1, 2, 2, 3, 4)), dtype=dtype, op=rng.choice(OPS),
                            via_fragment=rng.random() < 0.3, out=rng.choice(("tile", "row")),
                            config=rng.choice(tuple(CONFIGS)), explicit_order=rng.random() < 0.3,
                            dynamic=rng.random() < 0.3, data_seed=data_seed)
        # An explicit schedule is taken as written: its copies of the tiles must fit mp_22's 72 KiB (num_stages
        # alone is lowered to fewer stages, with a warning, where they do not). No further draw: the batch's
        # later programs stay the same.
        if desc.explicit_order and desc.shared_bytes > 72 * 1024:
            desc = self.replace(desc, explicit_order=False)
        return desc

    def pass_configs(self, desc):
        return dict(CONFIGS[desc.config])

    def path(self, desc, source):
        return load_path(source, desc.threads)

    def build(self, desc):
        shape = (T.dynamic("M"), T.dynamic("K")) if desc.dynamic else (desc.M, desc.K)
        out_shape = (shape[0], desc.bk) if desc.out == "tile" else (shape[0],)
        dt = desc.dtype

        if desc.two_inputs:
            @T.prim_func
            def main(A: T.Tensor(shape, dt), B: T.Tensor(shape, dt), O: T.Tensor(out_shape, "float32")):
                _pipeline_body(desc, A, B, O)
        else:
            @T.prim_func
            def main(A: T.Tensor(shape, dt), O: T.Tensor(out_shape, "float32")):
                _pipeline_body(desc, A, A, O)

        return main

    def arguments(self, desc, gen):
        ins = [random_tensor((desc.M, desc.K), desc.dtype, gen) for _ in range(2 if desc.two_inputs else 1)]
        return ins + [poisoned(desc.out_shape, "float32")]

    def reference(self, desc, args):
        a = args[0].double()
        b = args[1].double() if desc.two_inputs else a
        x = {"a": a, "a*b": a * b, "a+b": a + b, "a*a": a * a}[desc.op]
        tiles = -(-desc.K // desc.bk)
        x = torch.nn.functional.pad(x, (0, tiles * desc.bk - desc.K)).reshape(desc.M, tiles, desc.bk).sum(1)
        if desc.out == "row":
            x = x.sum(1)
        return {len(args) - 1: x.float()}

    def tolerance(self, desc, index):
        return (1e-4, 1e-4)  # float32 sums of a few terms, in another order than torch's

    def shrink(self, desc):
        r = self.replace
        if desc.dynamic:
            yield r(desc, dynamic=False)
        if desc.explicit_order:
            yield r(desc, explicit_order=False)
        if desc.via_fragment:
            yield r(desc, via_fragment=False)
        if desc.config != "default":
            yield r(desc, config="default")
        if desc.op != "a":
            yield r(desc, op="a")
        if desc.out != "tile":
            yield r(desc, out="tile")
        for s in range(1, desc.num_stages):
            yield r(desc, num_stages=s)
        if desc.dtype != "float32":
            yield r(desc, dtype="float32")
        for f in ("M", "K"):
            for v in smaller(getattr(desc, f)):
                yield r(desc, **{f: v})
        for f in ("bm", "bk"):
            if getattr(desc, f) > 8:
                yield r(desc, **{f: getattr(desc, f) // 2})
        if desc.threads > 64:
            yield r(desc, threads=desc.threads // 2)


@T.macro
def _pipeline_body(desc, A, B, O):
    M, K = A.shape
    bm, bk, dt = desc.bm, desc.bk, desc.dtype
    n_copies = 2 if desc.two_inputs else 1
    n_stmts = n_copies + (1 if desc.via_fragment else 0) + 1
    last = max(desc.num_stages - 1, 0)
    order = list(range(n_stmts)) if desc.explicit_order else None
    stage = [0] * n_copies + [last] * (n_stmts - n_copies) if desc.explicit_order else None
    with T.Kernel(T.ceildiv(M, bm), threads=desc.threads) as by:
        A_s = T.alloc_shared((bm, bk), dt)
        B_s = T.alloc_shared((bm, bk), dt)
        A_f = T.alloc_fragment((bm, bk), dt)
        acc = T.alloc_fragment((bm, bk), "float32")
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=desc.num_stages, order=order, stage=stage):
            T.copy(A[by * bm, k * bk], A_s)
            if desc.two_inputs:
                T.copy(B[by * bm, k * bk], B_s)
            if desc.via_fragment:
                T.copy(A_s, A_f)
            for i, j in T.Parallel(bm, bk):
                a = T.cast(A_f[i, j] if desc.via_fragment else A_s[i, j], "float32")
                if desc.op == "a":
                    acc[i, j] += a
                elif desc.op == "a*a":
                    acc[i, j] += a * a
                elif desc.op == "a*b":
                    acc[i, j] += a * T.cast(B_s[i, j], "float32")
                else:
                    acc[i, j] += a + T.cast(B_s[i, j], "float32")
        if desc.out == "tile":
            T.copy(acc, O[by * bm, 0])
        else:
            row = T.alloc_fragment((bm,), "float32")
            T.reduce_sum(acc, row, dim=1)
            T.copy(row, O[by * bm])
