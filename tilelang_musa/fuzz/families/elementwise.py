"""Elementwise chains: loads of 1-3 inputs of mixed dtypes, a chain of unary/binary/constant ops and casts,
stored with a cast; over T.Parallel on global memory, through fragments or shared tiles, or with the loop
order swapped (strided, not vectorizable); 1-D or 2-D with tails.

No `from __future__ import annotations` in family files: the kernels' parameter annotations must be evaluated
when they are defined (they read the description's shapes from the enclosing function)."""


import random
from dataclasses import dataclass
from typing import ClassVar

import torch

import tilelang.language as T

from ..family import Family, register, smaller
from ..tensors import FLOATS, TOLERANCE, TORCH_DTYPES, poisoned, random_tensor

BINARY = ("add", "sub", "mul", "max", "min")
UNARY = ("neg", "abs", "relu", "sq", "exp")
STYLES = ("global", "fragment", "shared", "strided")
# "tile_transpose" (2-D, square tiles dividing the shape): the tiles are read transposed, O's tile (by, bx) is
# f(X's tile (by, bx) transposed); a fragment read in another layout than it was written in
FLOAT_CONSTS = (0.5, 2.0, -1.5, 3.0, 0.25)
INT_CONSTS = (1, 2, -3, 5)


@dataclass(frozen=True)
class ElementwiseDesc:
    family: ClassVar[str] = "elementwise"
    shape: tuple  # (N,) or (M, N)
    block: tuple  # same rank
    threads: int
    in_dtypes: tuple  # one per input, 1..3
    ops: tuple  # ("bin", op, k) | ("const", op, value) | ("un", op) | ("cast", dtype)
    out_dtype: str
    style: str  # one of STYLES
    disable_vectorize: bool
    data_seed: int
    dynamic: bool = False  # the shape is T.dynamic: sizes and tails known only at launch


def _valid(in_dtypes: tuple, ops: tuple, out_dtype: str) -> bool:
    """The chain's rules: no float -> int cast (truncation of rounded values would flake), ints only meet ints
    (an int input enters a float chain through a cast), exp only first and only on float32."""
    cur = in_dtypes[0]
    for i, op in enumerate(ops):
        if op[0] == "cast":
            if cur in FLOATS and op[1] not in FLOATS:
                return False
            cur = op[1]
        elif op[0] == "bin":
            if op[2] >= len(in_dtypes) or (cur not in FLOATS and in_dtypes[op[2]] in FLOATS):
                return False
        elif op[0] == "un" and op[1] == "exp" and (i != 0 or cur != "float32"):
            return False
        elif op[0] == "const" and isinstance(op[2], float) != (cur in FLOATS):
            return False
    return not (cur in FLOATS and out_dtype not in FLOATS)


@register
class Elementwise(Family):
    name = "elementwise"
    desc_type = ElementwiseDesc
    weight = 1.2

    def generate(self, rng: random.Random, data_seed: int) -> ElementwiseDesc:
        rank = rng.choice((1, 2, 2))
        if rank == 1:
            block = (rng.choice((64, 128, 256, 512)),)
            shape = (rng.choice((block[0], 2 * block[0], rng.randint(1, 3 * block[0]))),)
        else:
            block = (rng.choice((4, 8, 16, 32)), rng.choice((8, 16, 32, 64)))
            shape = tuple(rng.choice((b, 2 * b, rng.randint(1, 3 * b))) for b in block)
        threads = rng.choice((32, 64, 128, 256))
        n_in = rng.choice((1, 2, 2, 3))
        in_dtypes = tuple(rng.choice(("float32", "float32", "float16", "bfloat16", "int32")) for _ in range(n_in))
        cur = in_dtypes[0]
        ops = []
        for i in range(rng.randint(1, 5)):
            kind = rng.choice(("bin", "bin", "const", "un", "cast"))
            if kind == "cast":
                ops.append(("cast", rng.choice([d for d in FLOATS if d != cur])))
                cur = ops[-1][1]
                continue
            if kind == "bin":
                k = rng.randrange(n_in)
                if cur not in FLOATS and in_dtypes[k] in FLOATS:
                    ops.append(("cast", "float32"))
                    cur = "float32"
                ops.append(("bin", rng.choice(BINARY), k))
            elif kind == "const":
                ops.append(("const", rng.choice(("add", "mul")),
                            rng.choice(FLOAT_CONSTS) if cur in FLOATS else rng.choice(INT_CONSTS)))
            else:
                un = rng.choice(UNARY)
                if un == "exp" and not (i == 0 and cur == "float32"):
                    un = "relu"
                if un == "sq" and any(o[:2] == ("un", "sq") for o in ops):
                    un = "abs"
                ops.append(("un", un))
        out_dtype = rng.choice([cur] + ([d for d in FLOATS] if cur in FLOATS else ["float32"]))
        style = rng.choice(STYLES)
        if rank == 2 and rng.random() < 0.2:
            b = rng.choice((8, 16, 32))
            block, shape, style = (b, b), (b * rng.randint(1, 3), b * rng.randint(1, 3)), "tile_transpose"
        desc = ElementwiseDesc(shape=shape, block=block, threads=threads, in_dtypes=in_dtypes, ops=tuple(ops),
                               out_dtype=out_dtype, style=style, disable_vectorize=rng.random() < 0.2,
                               data_seed=data_seed, dynamic=style != "tile_transpose" and rng.random() < 0.25)
        assert _valid(desc.in_dtypes, desc.ops, desc.out_dtype), desc
        return desc

    def pass_configs(self, desc):
        return {"tirx.disable_vectorize": True} if desc.disable_vectorize else {}

    def build(self, desc: ElementwiseDesc):
        return _program(desc)

    def arguments(self, desc, gen):
        ins = [random_tensor(desc.shape, d, gen) for d in desc.in_dtypes]
        return ins + [poisoned(desc.shape, desc.out_dtype)]

    def reference(self, desc, args):
        ins = args[:-1]
        if desc.style == "tile_transpose":
            ins = [_tile_transposed(x, desc.block[0]) for x in ins]
        x = ins[0]
        for op in desc.ops:
            if op[0] == "cast":
                x = x.to(TORCH_DTYPES[op[1]])
            elif op[0] == "bin":
                y = ins[op[2]].to(x.dtype)
                x = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "max": torch.maximum,
                     "min": torch.minimum}[op[1]](x, y)
            elif op[0] == "const":
                x = x + op[2] if op[1] == "add" else x * op[2]
            else:
                x = {"neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "sq": lambda v: v * v,
                     "exp": torch.exp}[op[1]](x)
        return {len(ins): x.to(TORCH_DTYPES[desc.out_dtype])}

    def tolerance(self, desc, index):
        # the loosest dtype the chain passed through
        dtypes = set(desc.in_dtypes) | {op[1] for op in desc.ops if op[0] == "cast"} | {desc.out_dtype}
        if all(d not in FLOATS for d in dtypes):
            return (0, 0)
        return max(TOLERANCE[d] for d in dtypes if d in FLOATS)

    def shrink(self, desc):
        return (d for d in self._candidates(desc) if _shape_ok(d))

    def _candidates(self, desc):
        r = self.replace
        for i in range(len(desc.ops)):  # fewer ops
            ops = desc.ops[:i] + desc.ops[i + 1:]
            if _valid(desc.in_dtypes, ops, desc.out_dtype):
                yield r(desc, ops=ops)
        used = {op[2] for op in desc.ops if op[0] == "bin"}
        if len(desc.in_dtypes) > 1 and (len(desc.in_dtypes) - 1) not in used:
            yield r(desc, in_dtypes=desc.in_dtypes[:-1])
        if desc.dynamic:
            yield r(desc, dynamic=False)
        if desc.style not in ("global", "tile_transpose"):
            yield r(desc, style="global")
        if desc.style == "tile_transpose":
            for d, n in enumerate(desc.shape):
                if n > desc.block[d]:
                    yield r(desc, shape=desc.shape[:d] + (n - desc.block[d],) + desc.shape[d + 1:])
            if desc.block[0] > 8:
                b = desc.block[0] // 2
                yield r(desc, block=(b, b))
        if desc.disable_vectorize:
            yield r(desc, disable_vectorize=False)
        if len(desc.shape) == 2:
            yield r(desc, shape=desc.shape[1:], block=(max(64, desc.block[1]),))
        for d, n in enumerate(desc.shape):  # smaller shapes, keeping a tail if there was one
            for m in smaller(n):
                yield r(desc, shape=desc.shape[:d] + (m,) + desc.shape[d + 1:])
        for d, b in enumerate(desc.block):
            if b > 8:
                yield r(desc, block=desc.block[:d] + (b // 2,) + desc.block[d + 1:])
        if desc.threads > 32:
            yield r(desc, threads=desc.threads // 2)
        for i, d in enumerate(desc.in_dtypes):
            if d != "float32":
                new = desc.in_dtypes[:i] + ("float32",) + desc.in_dtypes[i + 1:]
                if _valid(new, desc.ops, desc.out_dtype):
                    yield r(desc, in_dtypes=new)


def _shape_ok(desc) -> bool:
    if desc.style != "tile_transpose":
        return True
    b = desc.block
    return len(desc.shape) == 2 and b[0] == b[1] and all(n % b[0] == 0 for n in desc.shape)


def _tile_transposed(x, b: int):
    """x with every b x b tile transposed in place."""
    M, N = x.shape
    return x.reshape(M // b, b, N // b, b).transpose(1, 3).reshape(M, N)


def _shape(desc) -> tuple:
    """The kernel's tensor shape: the sizes, or T.dynamic variables standing for them."""
    if not desc.dynamic:
        return desc.shape
    return tuple(T.dynamic(name) for name in ("M", "N")[-len(desc.shape):])


def _chain(desc: ElementwiseDesc, loads: list):
    """The chain's expression from the loaded input values (a list of PrimExprs)."""
    x = loads[0]
    cur = desc.in_dtypes[0]
    for op in desc.ops:
        if op[0] == "cast":
            x = T.cast(x, op[1])
            cur = op[1]
        elif op[0] == "bin":
            y = loads[op[2]]
            if desc.in_dtypes[op[2]] != cur:
                y = T.cast(y, cur)
            x = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                 "max": T.max, "min": T.min}[op[1]](x, y)
        elif op[0] == "const":
            c = T.cast(op[2], cur) if cur in FLOATS else op[2]
            x = x + c if op[1] == "add" else x * c
        else:
            zero = T.cast(0, cur)
            x = {"neg": lambda v: -v, "abs": T.abs, "relu": lambda v: T.max(v, zero), "sq": lambda v: v * v,
                 "exp": T.exp}[op[1]](x)
    if cur != desc.out_dtype:
        x = T.cast(x, desc.out_dtype)
    return x


def _program(desc: ElementwiseDesc):
    n_in = len(desc.in_dtypes)
    shape, d = _shape(desc), desc.in_dtypes
    o = desc.out_dtype
    body = _body_1d if len(shape) == 1 else _body_2d
    if n_in == 1:
        @T.prim_func
        def main(X0: T.Tensor(shape, d[0]), O: T.Tensor(shape, o)):
            body(desc, [X0], O)
    elif n_in == 2:
        @T.prim_func
        def main(X0: T.Tensor(shape, d[0]), X1: T.Tensor(shape, d[1]), O: T.Tensor(shape, o)):
            body(desc, [X0, X1], O)
    else:
        @T.prim_func
        def main(X0: T.Tensor(shape, d[0]), X1: T.Tensor(shape, d[1]), X2: T.Tensor(shape, d[2]),
                 O: T.Tensor(shape, o)):
            body(desc, [X0, X1, X2], O)
    return main


@T.macro
def _body_2d(desc, xs, O):
    M, N = O.shape  # ints, or the T.dynamic sizes
    bm, bn = desc.block
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=desc.threads) as (bx, by):
        if desc.style == "global":
            for i, j in T.Parallel(bm, bn):
                O[by * bm + i, bx * bn + j] = _chain(desc, [x[by * bm + i, bx * bn + j] for x in xs])
        elif desc.style == "strided":
            for j, i in T.Parallel(bn, bm):
                O[by * bm + i, bx * bn + j] = _chain(desc, [x[by * bm + i, bx * bn + j] for x in xs])
        else:
            tiles = [T.alloc_shared((bm, bn), x.dtype) if desc.style == "shared" else
                     T.alloc_fragment((bm, bn), x.dtype) for x in xs]
            for x, t in zip(xs, tiles):
                T.copy(x[by * bm, bx * bn], t)
            out = T.alloc_fragment((bm, bn), desc.out_dtype)
            if desc.style == "tile_transpose":
                for i, j in T.Parallel(bm, bn):
                    out[i, j] = _chain(desc, [t[j, i] for t in tiles])
            else:
                for i, j in T.Parallel(bm, bn):
                    out[i, j] = _chain(desc, [t[i, j] for t in tiles])
            T.copy(out, O[by * bm, bx * bn])


@T.macro
def _body_1d(desc, xs, O):
    (N,) = O.shape
    (bn,) = desc.block
    with T.Kernel(T.ceildiv(N, bn), threads=desc.threads) as bx:
        if desc.style in ("global", "strided"):
            for j in T.Parallel(bn):
                O[bx * bn + j] = _chain(desc, [x[bx * bn + j] for x in xs])
        else:
            tiles = [T.alloc_shared((bn,), x.dtype) if desc.style == "shared" else
                     T.alloc_fragment((bn,), x.dtype) for x in xs]
            for x, t in zip(xs, tiles):
                T.copy(x[bx * bn], t)
            out = T.alloc_fragment((bn,), desc.out_dtype)
            for j in T.Parallel(bn):
                out[j] = _chain(desc, [t[j] for t in tiles])
            T.copy(out, O[bx * bn])
