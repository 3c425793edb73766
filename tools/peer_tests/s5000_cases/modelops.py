"""modelops: FlashAttention forward (bhsd) and sparse MLA prefill/decode v1/v2; each kernel module carries its own
torch reference and check (assert_close / its cosine-similarity check), called here at small sizes."""

from s5000_cases import Case

PKG = "benchmark.mp31.modelops.kernels"

CASES = [
    # the published configuration (block 256x128, 512 threads, 1 stage) at a simulator-sized sequence
    Case("modelops_mha_fwd_bhsd", "modelops/kernels/example_mha_fwd_bhsd.py",
         f"from {PKG} import example_mha_fwd_bhsd as m\n"
         "m.DEVICE = 'cpu'  # as the peer's runner sets it (modelops/benchmark_cases.py)\n"
         "m.main(batch=1, heads=2, seq_q=256, seq_kv=256, dim=128, is_causal=False)\n"
         "m.main(batch=1, heads=1, seq_q=256, seq_kv=512, dim=128, is_causal=False)"),
    # (not causal: the kernel's causal path masks by the permuted key order of K's annotated layout and reduces
    # each block's max with clear=True, so a fully masked row is exp2(-inf + inf) = NaN; the peer runs it non-causal)
    Case("modelops_sparse_mla_fwd_v1", "modelops/kernels/sparse_mla_fwd_pipelined_v1.py",
         f"from {PKG} import sparse_mla_fwd_pipelined_v1 as m\n"
         "m.test_sparse_mla_fwd_v1(S=64, SKV=256, H=64, HKV=1, DQK=576, DV=512, topk=128)"),
    Case("modelops_sparse_mla_fwd_v2", "modelops/kernels/sparse_mla_fwd_pipelined_v2.py",
         f"from {PKG} import sparse_mla_fwd_pipelined_v2 as m\n"
         "m.test_sparse_mla_fwd_v2(S=64, SKV=256, H=64, HKV=1, DQK=576, DV=512, topk=128)"),
    Case("modelops_sparse_mla_decode_v1", "modelops/kernels/sparse_mla_decode_fwd_pipelined_v1.py",
         f"from {PKG} import sparse_mla_decode_fwd_pipelined_v1 as m\n"
         "m.test_sparse_mla_fwd(B=2, S=1, SKV=256, H=64, HKV=1, DQK=576, DV=512, topk=128)"),
    Case("modelops_sparse_mla_decode_v2", "modelops/kernels/sparse_mla_decode_fwd_pipelined_v2.py",
         f"from {PKG} import sparse_mla_decode_fwd_pipelined_v2 as m\n"
         "m.test_sparse_mla_fwd(B=1, S=64, SKV=256, H=64, HKV=1, DQK=576, DV=512, topk=128)"),
]
