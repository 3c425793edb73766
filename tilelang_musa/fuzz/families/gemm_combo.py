"""GEMMs over every supported operand/accumulator dtype pair and transpose combination, drawn uniformly (the `gemm`
family favours the float16/bfloat16 shapes the matrix paths take): float16 / bfloat16 / float32 / float8_e4m3 /
float8_e5m2 into float32, int8 into int32, float16 into float16, bfloat16 into bfloat16; A and B each transposed or
not; on every instruction path the PassConfig selects. The pairs that round in the accumulator or the operands
(float8, a float16 / bfloat16 accumulator) get small integer data, so their result is exact and compared exactly;
the program itself is the `gemm` family's."""

import random
from dataclasses import dataclass
from typing import ClassVar

from ..family import register
from ..tensors import poisoned, random_tensor
from .gemm import PATHS, POLICIES, Gemm, GemmDesc

COMBOS = (("float16", "float32"), ("bfloat16", "float32"), ("float32", "float32"), ("float8_e4m3", "float32"),
          ("float8_e5m2", "float32"), ("int8", "int32"), ("float16", "float16"), ("bfloat16", "bfloat16"))


@dataclass(frozen=True)
class GemmComboDesc(GemmDesc):
    family: ClassVar[str] = "gemm_combo"

    @property
    def exact(self):
        """Small integer data: every product and partial sum is exact in the accumulator."""
        return self.dtype.startswith("float8") or self.accum in ("float16", "bfloat16") or self.dtype == "int8"


@register
class GemmCombo(Gemm):
    name = "gemm_combo"
    desc_type = GemmComboDesc
    weight = 1.0

    def generate(self, rng: random.Random, data_seed: int) -> GemmComboDesc:
        dtype, accum = rng.choice(COMBOS)
        bm, bn, bk = rng.choice((16, 32, 64)), rng.choice((16, 32, 64)), rng.choice((16, 32))
        # |sum| <= 4 K must stay exact: bfloat16 holds integers up to 256
        k_max = 64 if accum == "bfloat16" else 3 * bk
        M, N = (rng.choice((b, 2 * b, rng.randint(1, 2 * b))) for b in (bm, bn))
        K = rng.choice((bk, 2 * bk, rng.randint(1, k_max)))
        K = min(K, k_max)
        if accum == "float32" and dtype in ("float16", "bfloat16"):
            # the pairs the matrix paths take (SQMMA, WMMA, mp_22 MMA): tiles of at least 32 x 32, so that the
            # path the PassConfig names is the one taken (16-wide tiles fall back to FMA); after the draws, so the
            # batch's other programs stay the same
            bm, bn = max(bm, 32), max(bn, 32)
        return GemmComboDesc(M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, threads=rng.choice((128, 256)), dtype=dtype,
                             accum=accum, trans_A=rng.random() < 0.5, trans_B=rng.random() < 0.5,
                             policy=rng.choice(POLICIES), path=rng.choice(tuple(PATHS)),
                             scopes=rng.choice(("ss", "ss", "rs")), num_stages=rng.choice((1, 2)),
                             data_seed=data_seed)

    def arguments(self, desc, gen):
        if not desc.exact:
            return super().arguments(desc, gen)
        a_shape = (desc.K, desc.M) if desc.trans_A else (desc.M, desc.K)
        b_shape = (desc.N, desc.K) if desc.trans_B else (desc.K, desc.N)
        return [random_tensor(a_shape, desc.dtype, gen, integral=True, low=-2, high=2),
                random_tensor(b_shape, desc.dtype, gen, integral=True, low=-2, high=2),
                poisoned((desc.M, desc.N), desc.c_dtype)]

    def tolerance(self, desc, index):
        return (0, 0) if desc.exact else super().tolerance(desc, index)

    def shrink(self, desc):
        # the parent's steps, less those that change the dtype pair under test
        for cand in super().shrink(desc):
            if (cand.dtype, cand.accum) == (desc.dtype, desc.accum) and \
                    (cand.accum != "bfloat16" or cand.K <= 64):
                yield cand
