"""A GEMM that moves its tiles by hand, in Moore Threads' style for the MTT S5000 (mp_31): a producer squad loads A
and B tiles with the copy engine (TME) into a `num_stages`-deep ring of shared tiles, a consumer squad runs SQMMA on
them, and two barriers per stage hand each slot back and forth:

    full[s]   the producer's loads of slot s have landed        (producer arrives; TME adds the bytes)
    empty[s]  the consumer has finished reading slot s          (consumer arrives)

Round r of slot s is the (r + 1)-th use of that slot, and waits are on the parity of a barrier's phase: the
consumer waits `full[s]` with parity r & 1, the producer waits `empty[s]` with parity (r & 1) ^ 1, so its first wait
on each slot passes at once (the "previous" phase of a fresh barrier counts as completed). Nothing here is inserted
by the compiler: the arrivals, the waits and the parities are the program's. Without a MUSA device it runs in the
CPU simulator, where the TME data lands only when its barrier's phase completes: a wait left out reads poison.

    python examples/async/gemm_tme_ring.py
"""

import tilelang
import tilelang.language as T
import torch

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"

SQUAD = 128  # threads of a squad (4 warps of 32 on mp_31): the unit of SQMMA and of T.ws


@tilelang.jit(target="musa -arch=mp_31", out_idx=[2])
def gemm_tme_ring(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=2, dtype="float16",
                  accum_dtype="float"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=2 * SQUAD) as (bx, by):
            A_shared = T.alloc_shared((num_stages, block_M, block_K), dtype)
            B_shared = T.alloc_shared((num_stages, block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            full = T.alloc_barrier([1] * num_stages)  # one arrival: the producer's elected thread
            empty = T.alloc_barrier([SQUAD] * num_stages)  # the consumer squad's four warps
            tx = T.get_thread_binding()

            with T.ws(1):  # the producer squad
                for k in T.serial(T.ceildiv(K, block_K)):
                    s = k % num_stages
                    T.barrier_wait(empty[s], ((k // num_stages) & 1) ^ 1)
                    # Tiles past the end of A or B (the K tail) are filled with zeros by the copy engine.
                    T.tma_copy(A[by * block_M:(by + 1) * block_M, k * block_K:(k + 1) * block_K],
                               A_shared[s, :, :], barrier=full[s])
                    T.tma_copy(B[k * block_K:(k + 1) * block_K, bx * block_N:(bx + 1) * block_N],
                               B_shared[s, :, :], barrier=full[s])
                    if tx == SQUAD:
                        T.barrier_arrive(full[s])

            with T.ws(0):  # the consumer squad
                T.clear(C_local)
                for k in T.serial(T.ceildiv(K, block_K)):
                    s = k % num_stages
                    T.barrier_wait(full[s], (k // num_stages) & 1)
                    T.gemm(A_shared[s, :, :], B_shared[s, :, :], C_local)
                    T.barrier_arrive(empty[s])
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def main(M=256, N=256, K=200):
    kernel = gemm_tme_ring(M, N, K)
    print(kernel.get_kernel_source())
    A = torch.randn((M, K), dtype=torch.float16, device=device)
    B = torch.randn((K, N), dtype=torch.float16, device=device)
    C = kernel(A, B)
    ref = (A.float() @ B.float()).to(torch.float16)
    torch.testing.assert_close(C.float(), ref.float(), rtol=1e-2, atol=1e-2)
    print(f"gemm_tme_ring {M}x{N}x{K}: matches torch on {device}")


if __name__ == "__main__":
    main()
