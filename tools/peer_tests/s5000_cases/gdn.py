"""gdn: the gated delta net kernels (chunk-local gate cumsum, the chunk KKT inverse, fused chunked prefill, decode,
multi-token-prediction decode), each called at small sizes as benchmark_cases.py calls it and checked against the
torch references in gdn_reference.py (the per-token recurrence for outputs and states)."""

from s5000_cases import Case

PKG = "benchmark.mp31.mate.kernels"

COMMON = "import torch\nimport torch.nn.functional as F\nfrom gdn_reference import *\n"

CASES = [
    # gates in (0, 1]; varlen (a tail chunk per sequence) and fixed-length reversed
    Case("gdn_chunk_local_cumsum", "mate/kernels/gdn_chunk_local_cumsum.py", COMMON +
         f"from {PKG}.gdn_chunk_local_cumsum import chunk_local_cumsum\n"
         "g = torch.exp(-torch.rand(1, 230, 4))\n"
         "cu = torch.tensor([0, 100, 230], dtype=torch.int32)\n"
         "check('varlen', chunk_local_cumsum(g, chunk_size=64, cu_seqlens=cu),\n"
         "      chunk_local_cumsum_ref(g, 64, cu), 1e-4, 1e-4)\n"
         "g = torch.exp(-torch.rand(2, 100, 3))\n"
         "check('fixed, reverse', chunk_local_cumsum(g, chunk_size=64, reverse=True),\n"
         "      chunk_local_cumsum_ref(g, 64, reverse=True), 1e-4, 1e-4)\n"),
    # (I + strictly_lower(beta K K^T))^-1 per 64-token chunk; K normalized as the benchmark makes it
    Case("gdn_kkt_solve", "mate/kernels/gdn_kkt_solve.py", COMMON +
         f"from {PKG}.gdn_kkt_solve import kkt_solve\n"
         "k = F.normalize(torch.randn(1, 200, 2, 128), dim=-1).to(torch.bfloat16)\n"
         "beta = torch.sigmoid(torch.randn(1, 200, 4))\n"
         "cu = torch.tensor([0, 70, 200], dtype=torch.int32)\n"
         "check('varlen', kkt_solve(k=k, b=beta, cu_seqlens=cu), kkt_solve_ref(k, beta, 64, cu), 3e-2, 3e-2)\n"
         "k = F.normalize(torch.randn(2, 96, 1, 128), dim=-1).to(torch.bfloat16)\n"
         "beta = torch.sigmoid(torch.randn(2, 96, 2))\n"
         "check('fixed', kkt_solve(k=k, b=beta), kkt_solve_ref(k, beta, 64), 3e-2, 3e-2)\n"),
    # the fused chunked prefill against the per-token recurrence: fed reference gate cumsums and KKT inverses
    # (gates of 1 too, so the initial state still shows at the end), then on three sequences as the benchmark
    # chains it, after the cumsum and KKT kernels
    Case("gdn_prefill", "mate/kernels/gdn_prefill.py", COMMON +
         f"from {PKG}.gdn_prefill import fused_chunk_gdn_prefill\n"
         f"from {PKG}.gdn_chunk_local_cumsum import chunk_local_cumsum\n"
         f"from {PKG}.gdn_kkt_solve import kkt_solve\n"
         "Hg, H, D = 2, 4, 128\n"
         "# (gate decay, through their cumsum and KKT kernels, batch, tokens, sequence ends or None: fixed length)\n"
         "for decay, chained, B, Tn, ends in ((1.0, False, 1, 200, [70]), (0.0, False, 1, 200, [70]),\n"
         "                                    (0.2, True, 1, 200, [70, 130]), (0.5, False, 2, 100, None)):\n"
         "    cu = None if ends is None else torch.tensor([0, *ends, Tn], dtype=torch.int32)\n"
         "    q = torch.randn(B, Tn, Hg, D).to(torch.bfloat16)\n"
         "    k = F.normalize(torch.randn(B, Tn, Hg, D), dim=-1).to(torch.bfloat16)\n"
         "    v = torch.randn(B, Tn, H, D).to(torch.bfloat16)\n"
         "    g = torch.exp(-decay * torch.rand(B, Tn, H))\n"
         "    beta = torch.sigmoid(torch.randn(B, Tn, H))\n"
         "    h0 = torch.randn(B if cu is None else len(cu) - 1, H, D, D)\n"
         "    if chained:\n"
         "        g_cumsum = chunk_local_cumsum(g, chunk_size=64, cu_seqlens=cu)\n"
         "        a = kkt_solve(k=k, b=beta, cu_seqlens=cu)\n"
         "    else:\n"
         "        g_cumsum = chunk_local_cumsum_ref(g, 64, cu)\n"
         "        a = kkt_solve_ref(k, beta, 64, cu).to(torch.bfloat16)\n"
         "    o, _, ht = fused_chunk_gdn_prefill(q=q, k=k, v=v, a=a, g=g_cumsum, b=beta, scale=D ** -0.5,\n"
         "        initial_state=h0, output_final_state=True, output_h=False, output_o=True, cu_seqlens=cu)\n"
         "    o_ref, ht_ref, _ = gdn_recurrence_ref(q, k, v, g, beta, h0, D ** -0.5, cu)\n"
         "    check(f'decay {decay} B={B} o', o, o_ref, 5e-2, 3e-2)\n"
         "    check(f'decay {decay} B={B} final state', ht, ht_ref, 5e-2, 3e-2)\n"
         "    if decay == 0.0:  # the initial state still shows: its [V, K] layout is checked\n"
         "        o_t, _, _ = gdn_recurrence_ref(q, k, v, g, beta, h0.transpose(-1, -2), D ** -0.5, cu)\n"
         "        assert (o_t - o_ref).abs().max() > 0.5, (o_t - o_ref).abs().max()\n"),
    # one token per sequence, state [B, HV, V, K] updated in place; B=2, 5 and 17 take different tile configs
    # (v_tile, stages, blocks per state: 8, 1, 8 / 8, 2, 2 / 4, 1, 8)
    Case("gdn_decode", "mate/kernels/gdn_decode.py", COMMON +
         f"from {PKG}.gdn_decode import run_gated_delta_rule_decode_vk_fp32\n"
         "for B, Hq, HV, D in ((2, 2, 4, 128), (5, 1, 2, 128), (17, 1, 1, 128)):\n"
         "    q = torch.randn(B, 1, Hq, D).to(torch.bfloat16)\n"
         "    k = torch.randn(B, 1, Hq, D).to(torch.bfloat16)\n"
         "    v = torch.randn(B, 1, HV, D).to(torch.bfloat16)\n"
         "    state = torch.randn(B, HV, D, D)\n"
         "    A_log = torch.randn(HV) * 0.1\n"
         "    dt_bias = torch.randn(HV) * 0.1\n"
         "    a = (torch.randn(B, 1, HV) * 0.1).to(torch.bfloat16)\n"
         "    b = torch.randn(B, 1, HV).to(torch.bfloat16)\n"
         "    out = torch.full((B, 1, HV, D), float('nan'), dtype=torch.bfloat16)\n"
         "    alpha, beta = decode_gates_ref(A_log, a, dt_bias, b)\n"
         "    o_ref, s_ref, _ = gdn_recurrence_ref(q, k, v, alpha, beta, state, D ** -0.5, use_qk_l2norm=True)\n"
         "    run_gated_delta_rule_decode_vk_fp32(q=q, k=k, v=v, state=state, A_log=A_log, a=a, dt_bias=dt_bias,\n"
         "        b=b, output=out, scale=D ** -0.5, use_qk_l2norm=True)\n"
         "    check(f'B={B} o', out, o_ref, 3e-2, 3e-2)\n"
         "    check(f'B={B} state', state, s_ref, 1e-3, 1e-3)\n"),
    # several tokens per sequence: state slots (one negative: padding), per-step states cached; then identity slots
    Case("gdn_mtp", "mate/kernels/gdn_mtp.py", COMMON +
         f"from {PKG}.gdn_mtp import run_gated_delta_rule_mtp_vk_fp32\n"
         "def run(B, Tn, Hq, HV, D, slots, cache, frozen=False):\n"
         "    q = torch.randn(B, Tn, Hq, D).to(torch.bfloat16)\n"
         "    k = torch.randn(B, Tn, Hq, D).to(torch.bfloat16)\n"
         "    v = torch.randn(B, Tn, HV, D).to(torch.bfloat16)\n"
         "    state = torch.randn(B, HV, D, D)\n"
         "    A_log = torch.randn(HV) * 0.1\n"
         "    dt_bias = (torch.randn(HV) * 0.1).to(torch.bfloat16)\n"
         "    a = (torch.randn(B, Tn, HV) * 0.1).to(torch.bfloat16)\n"
         "    b = (torch.randn(B, Tn, HV)).to(torch.bfloat16)\n"
         "    out = torch.full((B, Tn, HV, D), float('nan'), dtype=torch.bfloat16)\n"
         "    inter = torch.full((B, Tn, HV, D, D), float('nan')) if cache else None\n"
         "    alpha, beta = decode_gates_ref(A_log, a, dt_bias, b)\n"
         "    o_ref, s_ref, steps = gdn_recurrence_ref(q, k, v, alpha, beta, state, D ** -0.5, use_qk_l2norm=True,\n"
         "        state_slots=slots, keep_steps=True)\n"
         "    if frozen:  # disable_state_update: the pool is left as it was\n"
         "        s_ref = state.clone()\n"
         "    idx = None if slots is None else torch.tensor(slots, dtype=torch.int32)\n"
         "    run_gated_delta_rule_mtp_vk_fp32(q, k, v, state, A_log, a, dt_bias, b, idx, out, inter,\n"
         "        scale=D ** -0.5, disable_state_update=frozen, use_qk_l2norm=True)\n"
         "    check(f'B={B} T={Tn} o', out, o_ref, 3e-2, 3e-2)\n"
         "    check(f'B={B} T={Tn} state', state, s_ref, 1e-3, 1e-3)\n"
         "    if cache:\n"
         "        live = [n for n in range(B) if slots is None or slots[n] >= 0]\n"
         "        check('intermediate states', inter[live], steps[live], 1e-3, 1e-3)\n"
         "run(3, 3, 2, 4, 128, [2, -1, 0], True)\n"
         "run(9, 2, 1, 4, 128, None, False)\n"
         "run(2, 4, 1, 2, 128, [1, 0], True, frozen=True)\n"
         "run(20, 2, 2, 4, 128, list(range(19, -1, -1)), False)  # 80 work units: 32-row V tiles\n"),
]
