"""GEMMs: random M, N, K (multiples of the tiles or with tails), tiles, dtypes (float16 / bfloat16 / float32 with a
float32 accumulator, float16 with a float16 one, int8 with int32), transposes, warp policies, operand scopes
(shared or fragment), the instruction path chosen through PassConfig (SQMMA, WMMA, MMA on mp_22, FMA), pipeline
stages, T.use_swizzle, an elementwise epilogue on the accumulator and a cast on the store."""

import random
import re
from dataclasses import dataclass
from typing import ClassVar

import torch

import tilelang.language as T

from ..family import Family, register, smaller
from ..tensors import TOLERANCE, TORCH_DTYPES, poisoned, random_tensor

# PassConfig per path: mp_31 takes SQMMA by default, WMMA without SQMMA, FMA without both; mp_22 has MMA (or FMA
# for shapes it cannot tile) and ignores the two switches.
PATHS = {
    "default": {},
    "no_sqmma": {"tl.disable_sqmma": True},
    "fma": {"tl.disable_sqmma": True, "tl.disable_ph1_wmma": True},
}
DTYPES = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "int8": "int32", "f16acc": "float16"}
POLICIES = ("Square", "FullRow", "FullCol")


@dataclass(frozen=True)
class GemmDesc:
    family: ClassVar[str] = "gemm"
    M: int
    N: int
    K: int
    bm: int
    bn: int
    bk: int
    threads: int
    dtype: str  # operand dtype
    accum: str  # accumulator (and output) dtype
    trans_A: bool
    trans_B: bool
    policy: str
    path: str  # key of PATHS
    scopes: str  # "ss", "rs" (A in a fragment), "rr"
    num_stages: int
    data_seed: int
    epilogue: str = "none"  # "none" | "relu" | "affine": a T.Parallel over the accumulator before the store
    out_dtype: str = ""  # dtype of C when it differs from the accumulator's (cast by the final T.copy)
    swizzle: int = 0  # T.use_swizzle panel size (0: none); negative: order="col"

    @property
    def c_dtype(self):
        return self.out_dtype or self.accum


@register
class Gemm(Family):
    name = "gemm"
    desc_type = GemmDesc
    weight = 1.5

    def generate(self, rng: random.Random, data_seed: int) -> GemmDesc:
        if rng.random() < 0.7:
            # shapes and dtypes the instruction paths take (float16/bfloat16 into float32, tiles of whole
            # instruction groups); FMA still takes over where a path declines
            key = rng.choice(("float16", "bfloat16"))
            bm, bn, bk = rng.choice((32, 64, 128)), rng.choice((32, 64, 128)), rng.choice((16, 32, 64))
        else:
            key = rng.choice(("float16", "bfloat16", "float32", "int8", "f16acc"))
            bm, bn, bk = rng.choice((16, 32, 64, 128)), rng.choice((16, 32, 64, 128)), rng.choice((16, 32, 64))
        dtype, accum = ("float16" if key == "f16acc" else key), DTYPES[key]
        if rng.random() < 0.6:  # multiples of the tiles
            M, N, K = bm * rng.randint(1, 3), bn * rng.randint(1, 3), bk * rng.randint(1, 4)
        else:  # tails in some dims
            M, N, K = (rng.randint(1, 3 * b) if rng.random() < 0.6 else b * rng.randint(1, 2) for b in (bm, bn, bk))
        scopes = rng.choice(("ss", "ss", "ss", "rs", "rr"))
        return GemmDesc(M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, threads=rng.choice((128, 128, 256)), dtype=dtype,
                        accum=accum, trans_A=rng.random() < 0.4, trans_B=rng.random() < 0.4,
                        policy=rng.choice(POLICIES), path=rng.choice(tuple(PATHS)), scopes=scopes,
                        num_stages=rng.choice((1, 2, 3)), data_seed=data_seed,
                        epilogue=rng.choice(("none", "none", "relu", "affine")),
                        out_dtype=rng.choice(("", "", "float16", "bfloat16")) if accum == "float32" else "",
                        swizzle=rng.choice((0, 0, 2, 4, -2, -4)))

    def pass_configs(self, desc):
        return dict(PATHS[desc.path])

    def path(self, desc, source):
        """The GEMM template family (`tl::gemm_<family>[_nowait]<...>`), or "fma" (a loop of scalar FMAs)."""
        m = re.search(r"tl::gemm_(\w+?)(?:_nowait)?<", source)
        return m.group(1) if m else "fma"

    def build(self, desc):
        a_shape = (desc.K, desc.M) if desc.trans_A else (desc.M, desc.K)
        b_shape = (desc.N, desc.K) if desc.trans_B else (desc.K, desc.N)
        dt, acc = desc.dtype, desc.c_dtype
        c_shape = (desc.M, desc.N)

        @T.prim_func
        def main(A: T.Tensor(a_shape, dt), B: T.Tensor(b_shape, dt), C: T.Tensor(c_shape, acc)):
            _gemm_body(desc, A, B, C)

        return main

    def arguments(self, desc, gen):
        a_shape = (desc.K, desc.M) if desc.trans_A else (desc.M, desc.K)
        b_shape = (desc.N, desc.K) if desc.trans_B else (desc.K, desc.N)
        return [random_tensor(a_shape, desc.dtype, gen), random_tensor(b_shape, desc.dtype, gen),
                poisoned((desc.M, desc.N), desc.c_dtype)]

    def reference(self, desc, args):
        a, b = args[0].double(), args[1].double()
        a = a.T if desc.trans_A else a
        b = b.T if desc.trans_B else b
        c = (a @ b).to(TORCH_DTYPES[desc.accum])
        if desc.epilogue == "relu":
            c = torch.relu(c)
        elif desc.epilogue == "affine":
            c = c * 2 + 1 if desc.accum == "int32" else c * 0.5 + 1.0
        return {2: c.to(TORCH_DTYPES[desc.c_dtype])}

    def tolerance(self, desc, index):
        if desc.dtype == "int8":
            return (0, 0)
        if desc.dtype == "float32" and desc.path == "fma" and not desc.out_dtype:
            return (1e-5, 1e-5)
        # a float16 / bfloat16 store rounds a sum taken in another order than torch's: one ulp either way
        return max((1e-2, 1e-2), TOLERANCE.get(desc.out_dtype, (0, 0)))

    def shrink(self, desc):
        r = self.replace
        if desc.epilogue != "none":
            yield r(desc, epilogue="none")
        if desc.out_dtype:
            yield r(desc, out_dtype="")
        if desc.swizzle:
            yield r(desc, swizzle=0)
        if desc.scopes != "ss":
            yield r(desc, scopes="ss")
        if desc.num_stages != 1:
            yield r(desc, num_stages=1)
        if desc.policy != "Square":
            yield r(desc, policy="Square")
        if desc.trans_A:
            yield r(desc, trans_A=False)
        if desc.trans_B:
            yield r(desc, trans_B=False)
        if desc.dtype != "float16" and desc.dtype != "int8":
            yield r(desc, dtype="float16", accum="float32", out_dtype="")
        if desc.accum == "float16":
            yield r(desc, accum="float32", out_dtype="")
        for f, floor in (("M", 1), ("N", 1), ("K", 1)):
            for v in smaller(getattr(desc, f), floor):
                yield r(desc, **{f: v})
        for f in ("bm", "bn", "bk"):
            if getattr(desc, f) > 16:
                yield r(desc, **{f: getattr(desc, f) // 2})
        if desc.threads > 128:
            yield r(desc, threads=128)


@T.macro
def _gemm_body(desc, A, B, C):
    bm, bn, bk = desc.bm, desc.bn, desc.bk
    a_tile = (bk, bm) if desc.trans_A else (bm, bk)
    b_tile = (bn, bk) if desc.trans_B else (bk, bn)
    with T.Kernel(T.ceildiv(desc.N, bn), T.ceildiv(desc.M, bm), threads=desc.threads) as (bx, by):
        if desc.swizzle:
            T.use_swizzle(panel_size=abs(desc.swizzle), order="row" if desc.swizzle > 0 else "col")
        A_s = T.alloc_shared(a_tile, desc.dtype) if desc.scopes[0] == "s" else T.alloc_fragment(a_tile, desc.dtype)
        B_s = T.alloc_shared(b_tile, desc.dtype) if desc.scopes[1] == "s" else T.alloc_fragment(b_tile, desc.dtype)
        C_f = T.alloc_fragment((bm, bn), desc.accum)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(desc.K, bk), num_stages=desc.num_stages):
            if desc.trans_A:
                T.copy(A[k * bk, by * bm], A_s)
            else:
                T.copy(A[by * bm, k * bk], A_s)
            if desc.trans_B:
                T.copy(B[bx * bn, k * bk], B_s)
            else:
                T.copy(B[k * bk, bx * bn], B_s)
            T.gemm(A_s, B_s, C_f, transpose_A=desc.trans_A, transpose_B=desc.trans_B,
                   policy=getattr(T.GemmWarpPolicy, desc.policy))
        if desc.epilogue == "relu":
            for i, j in T.Parallel(bm, bn):
                C_f[i, j] = T.max(C_f[i, j], T.cast(0, desc.accum))
        elif desc.epilogue == "affine":
            for i, j in T.Parallel(bm, bn):
                if desc.accum == "int32":
                    C_f[i, j] = C_f[i, j] * 2 + 1
                else:
                    C_f[i, j] = C_f[i, j] * T.cast(0.5, desc.accum) + T.cast(1.0, desc.accum)
        T.copy(C_f, C[by * bm, bx * bn])
