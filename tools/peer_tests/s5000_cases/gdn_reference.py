"""Torch references for the gated delta net (GDN) kernels: staged beside the gdn case drivers.

The recurrence (state S laid out [V, K], per head): S <- alpha_t * S; u = beta_t * (v_t - S k_t);
S <- S + u k_t^T; o_t = S q_t (q already scaled). Everything here runs in float32 (float64 for the inverse).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def seq_bounds(num_tokens, cu_seqlens=None):
    if cu_seqlens is None:
        return [(0, num_tokens)]
    cu = [int(x) for x in cu_seqlens.tolist()]
    return list(zip(cu[:-1], cu[1:]))


def chunk_local_cumsum_ref(g, chunk_size=64, cu_seqlens=None, reverse=False):
    """Per chunk of each sequence, the running sum of log(g) along tokens (g: [B, T, H], the gate in (0, 1])."""
    out = torch.empty_like(g, dtype=torch.float32)
    logg = torch.log(g.float())
    for bb in range(g.shape[0]):
        for start, end in seq_bounds(g.shape[1], cu_seqlens):
            for left in range(start, end, chunk_size):
                right = min(left + chunk_size, end)
                part = logg[bb, left:right]
                if reverse:
                    out[bb, left:right] = part.flip(0).cumsum(0).flip(0)
                else:
                    out[bb, left:right] = part.cumsum(0)
    return out.to(g.dtype)


def kkt_solve_ref(k, beta, chunk_size=64, cu_seqlens=None):
    """a[t, h, :] = row (t - chunk start) of (I + strictly_lower(diag(beta) K K^T))^-1 for t's chunk, K the chunk's
    keys of head h's key group; k: [B, T, Hg, K], beta: [B, T, H]. Columns past the chunk's end are zero."""
    B, Tn, Hg, _ = k.shape
    H = beta.shape[-1]
    a = torch.zeros((B, Tn, H, chunk_size), dtype=torch.float64)
    for bb in range(B):
        for start, end in seq_bounds(Tn, cu_seqlens):
            for left in range(start, end, chunk_size):
                right = min(left + chunk_size, end)
                n = right - left
                for h in range(H):
                    kc = k[bb, left:right, h // (H // Hg)].double()
                    m = torch.tril(beta[bb, left:right, h].double()[:, None] * (kc @ kc.T), -1)
                    a[bb, left:right, h, :n] = torch.linalg.inv(torch.eye(n, dtype=torch.float64) + m)
    return a


def gdn_recurrence_ref(q, k, v, alpha, beta, h0=None, scale=1.0, cu_seqlens=None, use_qk_l2norm=False,
                       state_slots=None, keep_steps=False):
    """The per-token gated delta rule. q, k: [B, T, Hq, K]; v: [B, T, HV, V]; alpha, beta: [B, T, HV];
    h0: [N, HV, V, K] (zeros when None). Sequences are the batch rows, or cu_seqlens' ranges of row 0 (N of them).
    state_slots (per sequence, optional) picks h0's row for each sequence; a negative slot gives zero output.
    Returns (o [B, T, HV, V] float32, final states [N, HV, V, K] float32, per-step states [B, T, HV, V, K] or None)."""
    q, k, v, alpha, beta = (x.float() for x in (q, k, v, alpha, beta))
    if use_qk_l2norm:
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q * scale
    B, Tn, Hq, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    group = HV // Hq
    seqs = ([(0, s, e) for s, e in seq_bounds(Tn, cu_seqlens)] if cu_seqlens is not None
            else [(b, 0, Tn) for b in range(B)])
    if h0 is None:
        h0 = torch.zeros((len(seqs), HV, V, K))
    final = h0.float().clone()
    o = torch.zeros((B, Tn, HV, V))
    steps = torch.zeros((B, Tn, HV, V, K)) if keep_steps else None
    for n, (bb, start, end) in enumerate(seqs):
        slot = n if state_slots is None else int(state_slots[n])
        if slot < 0:
            continue
        for h in range(HV):
            S = final[slot, h].clone()
            hq = h // group
            for t in range(start, end):
                S = S * alpha[bb, t, h]
                u = beta[bb, t, h] * (v[bb, t, h] - S @ k[bb, t, hq])
                S = S + torch.outer(u, k[bb, t, hq])
                o[bb, t, h] = S @ q[bb, t, hq]
                if keep_steps:
                    steps[bb, t, h] = S
            final[slot, h] = S
    return o, final, steps


def decode_gates_ref(A_log, a, dt_bias, b):
    """alpha = exp(-exp(A_log) * softplus(a + dt_bias)), beta = sigmoid(b): a, b [..., HV]; A_log, dt_bias [HV]."""
    x = a.float() + dt_bias.float()
    softplus = torch.where(x <= 20.0, torch.log1p(torch.exp(x)), x)
    alpha = torch.exp(-torch.exp(A_log.float()) * softplus)
    beta = torch.sigmoid(b.float())
    return alpha, beta


def check(name, got, want, atol, rtol):
    """assert_close with the worst relative error in the message."""
    got, want = got.double(), want.double()
    err = (got - want).abs().max().item()
    scale = want.abs().max().item()
    print(f"{name}: max abs err {err:.3g} (max |ref| {scale:.3g})")
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol, msg=lambda m: f"{name}: {m}")
