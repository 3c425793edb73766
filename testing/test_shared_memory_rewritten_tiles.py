"""Shared tiles that hold nothing from one iteration of a loop to the next share bytes with the loop's other tiles,
and a gemm accumulator stored in halves needs no layout exchange (deepseek_v32's sparse_mla_bwd pattern).

In each iteration the kernel gathers a block of `KV` rows into `kv_s` (a T.Parallel nest writing every element),
scores them against `q_s` (`p = q kv^T`), casts `p` through `p_s` and accumulates `acc = p^T q`, then stores `acc`
half by half through `acc_s` (`if r < BS // 2: acc_s[r, d] = acc[r + s * BS // 2, d]` in a serial loop over
`s`). Three findings of the example, each checked here on mp_22 and mp_31:

- the nest over `acc_s` reads `acc` at a row offset its serial loop fixes: it runs where `acc` lives (this gemm's
  accumulator layout repeats its threads within 16 rows on both arches, so the thread of row `r` holds row `r + 16`
  too) instead of going through a shared tile of the whole accumulator (`acc_exchange`);
- `kv_s`, `p_s` and `acc_s` are each written whole before anything reads them in an iteration
  (MarkRewrittenTiles), and used one after the other: past the target's limit they share bytes, with a barrier
  between one's last read and the next one's first write, and one before the next iteration's first write;
- a kernel that fits keeps each tile's own bytes.
"""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

H, BS, D, STEPS = 32, 32, 64, 3
HALF = BS // 2
TILE_BYTES = {"q_s": H * D * 2, "kv_s": BS * D * 2, "p_s": H * BS * 2, "acc_s": HALF * D * 4}
APART = 16384  # every tile its own bytes (14,336, acc_s at its swizzle's 4 KiB alignment): the plan before
SHARED = TILE_BYTES["q_s"] + max(TILE_BYTES["kv_s"], TILE_BYTES["p_s"], TILE_BYTES["acc_s"])  # 8,192
ARCHES = ["mp_22", "mp_31"]


def _split_store_kernel():
    @T.prim_func
    def main(Q: T.Tensor((H, D), "float16"), KV: T.Tensor((STEPS * BS, D), "float16"),
             Rows: T.Tensor((STEPS * BS,), "int32"), Out: T.Tensor((STEPS * BS, D), "float32")):
        with T.Kernel(1, threads=128) as _:
            q_s = T.alloc_shared((H, D), "float16")
            kv_s = T.alloc_shared((BS, D), "float16")
            p_s = T.alloc_shared((H, BS), "float16")
            acc_s = T.alloc_shared((HALF, D), "float32")
            p = T.alloc_fragment((H, BS), "float32")
            acc = T.alloc_fragment((BS, D), "float32")
            T.copy(Q, q_s)
            for i in T.serial(STEPS):
                for r, d in T.Parallel(BS, D):
                    kv_s[r, d] = KV[Rows[i * BS + r], d]
                T.gemm(q_s, kv_s, p, transpose_B=True, clear_accum=True)
                T.copy(p, p_s)
                T.gemm(p_s, q_s, acc, transpose_A=True, clear_accum=True)
                for s in range(2):
                    for r, d in T.Parallel(BS, D):
                        if r < HALF:
                            acc_s[r, d] = acc[r + s * HALF, d]
                    for r, d in T.Parallel(HALF, D):
                        Out[i * BS + s * HALF + r, d] = acc_s[r, d]

    return main


def _offset(source: str, tile: str) -> int:
    match = re.search(rf"\* {tile} = reinterpret_cast<\w+\*>\(buf_dyn_shmem(?: \+ (\d+))?\);", source)
    assert match, f"{tile} is not placed in the dynamic arena"
    return int(match.group(1) or 0)


def _reference(q, kv, rows):
    out = torch.empty(STEPS * BS, D)
    for i in range(STEPS):
        block = kv[rows[i * BS:(i + 1) * BS].long()].float()
        p = (q.float() @ block.T).half().float()
        out[i * BS:(i + 1) * BS] = p.T @ q.float()
    return out


def _run(kernel, seed):
    q = rand((H, D), torch.float16, seed=seed) / 4
    kv = rand((STEPS * BS, D), torch.float16, seed=seed + 1) / 4
    rows = torch.randperm(STEPS * BS, generator=torch.Generator().manual_seed(seed + 2)).to(torch.int32)
    out = poison((STEPS * BS, D), torch.float32)
    kernel(q, kv, rows, out)
    torch.testing.assert_close(out, _reference(q, kv, rows), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("arch", ARCHES)
def test_tiles_rewritten_each_iteration_share_bytes_past_the_limit(arch, recwarn):
    kernel = tilelang.compile(_split_store_kernel(), target=f"musa -arch={arch} -max_shared_memory_per_block={SHARED}")
    source = kernel.get_kernel_source()
    assert kernel.metadata.host.launches[0].dynamic_smem_bytes == SHARED  # APART before
    assert _offset(source, "kv_s") == _offset(source, "p_s") == _offset(source, "acc_s") != _offset(source, "q_s")
    # the accumulator is read where it lives: no shared tile of it, no warning of one
    assert "acc_exchange" not in source
    assert not [w for w in recwarn if "exchange" in str(w.message)]
    loop = source[source.index("for (int i = 0;"):]
    # kv_s's last read (the second gemm reads q_s and p_s; p_s's write follows kv_s's gemm): barriers between
    kv_gemm, p_write = loop.index("(&q_s[0], &kv_s[0]"), loop.index("p_s[")
    assert "__syncthreads();" in loop[kv_gemm:p_write]
    acc_gemm, acc_write = loop.index("(&p_s[0], &q_s[0]"), loop.index("acc_s[")
    assert "__syncthreads();" in loop[acc_gemm:acc_write]
    # acc_s's last read of an iteration is followed by a barrier before the next iteration writes kv_s
    assert loop.index("__syncthreads();") < loop.index("kv_s[")
    _run(kernel, seed=11)


@pytest.mark.parametrize("arch", ARCHES)
def test_a_kernel_that_fits_keeps_each_tile_apart(arch):
    kernel = tilelang.compile(_split_store_kernel(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert kernel.metadata.host.launches[0].dynamic_smem_bytes == APART
    assert len({_offset(source, tile) for tile in TILE_BYTES}) == len(TILE_BYTES)
    assert "acc_exchange" not in source
    _run(kernel, seed=21)
