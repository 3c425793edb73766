"""Group-limited top-k routing of a mixture-of-experts layer (DeepSeek-V3's router), one kernel: for each token's
expert logits [E], the experts it is sent to and their weights.

    score[e]    = sigmoid(logit[e])                    what the weights are made of
    choice[e]   = score[e] + bias[e]                   what experts are chosen by (the load-balancing bias)
    group g     = experts [g * E / G, (g + 1) * E / G); its rank = the sum of its two largest choices
    the `topk_group` best groups stay; among their experts the `topk` largest choices win (descending)
    weight[k]   = score[expert_k] / sum over the winners of score * routed_scaling

A block owns `block_T` tokens. The choices go to a shared tile, where each (token, group) pair finds its two
largest members with a serial loop; the best groups are picked in `topk_group` rounds of `T.reduce_max` on a
[block_T, G] fragment, then the winners in `topk` rounds on [block_T, E] (each round: the maximum, its column by
a second `T.reduce_max` over the columns equal to it, its score read from a shared copy of the scores, that
element masked to -inf). Rows are expected to hold distinct values (ties would be masked
together). Only the device string is MUSA's; without a MUSA device it runs
in the CPU simulator.

    python examples/moe/moe_routing.py --tokens 256 --experts 256 --groups 8 --topk-group 4 --topk 8
"""

import argparse

import torch

import tilelang
import tilelang.language as T

device = "musa" if hasattr(torch, "musa") and torch.musa.is_available() else "cpu"


@tilelang.jit(out_idx=[2, 3])
def moe_routing(num_tokens, num_experts, num_groups, topk_group, topk, routed_scaling=2.5, block_T=16,
                threads=128):
    group_size = num_experts // num_groups
    assert group_size * num_groups == num_experts and group_size >= 2
    neg_inf = -T.infinity("float32")

    @T.prim_func
    def main(
        logits: T.Tensor((num_tokens, num_experts), "float32"),
        bias: T.Tensor((num_experts,), "float32"),
        topk_idx: T.Tensor((num_tokens, topk), "int32"),
        topk_weight: T.Tensor((num_tokens, topk), "float32"),
    ):
        with T.Kernel(T.ceildiv(num_tokens, block_T), threads=threads) as bx:
            score = T.alloc_fragment((block_T, num_experts), "float32")
            choice = T.alloc_fragment((block_T, num_experts), "float32")
            choice_s = T.alloc_shared((block_T, num_experts), "float32")
            group_rank = T.alloc_fragment((block_T, num_groups), "float32")
            group_kept = T.alloc_shared((block_T, num_groups), "int32")
            column = T.alloc_fragment((block_T, num_experts), "int32")
            group_col = T.alloc_fragment((block_T, num_groups), "int32")
            best = T.alloc_fragment((block_T,), "float32")
            best_col = T.alloc_fragment((block_T,), "int32")
            score_s = T.alloc_shared((block_T, num_experts), "float32")
            chosen_score = T.alloc_fragment((block_T, topk), "float32")
            total = T.alloc_fragment((block_T,), "float32")

            T.copy(logits[bx * block_T, 0], score)
            for t, e in T.Parallel(block_T, num_experts):
                score[t, e] = 1.0 / (1.0 + T.exp(-score[t, e]))
                choice[t, e] = score[t, e] + bias[e]
            T.copy(choice, choice_s)
            T.copy(score, score_s)  # each round's winner's score is one read of it

            # each group's rank: the sum of its two largest choices
            for t, g in T.Parallel(block_T, num_groups):
                first = T.alloc_var("float32", init=neg_inf)
                second = T.alloc_var("float32", init=neg_inf)
                for e in T.serial(group_size):
                    v = choice_s[t, g * group_size + e]
                    if v > first:
                        second = first
                        first = v
                    elif v > second:
                        second = v
                group_rank[t, g] = first + second
                group_kept[t, g] = 0

            # the topk_group best groups
            for _ in T.serial(topk_group):
                T.reduce_max(group_rank, best, dim=1, clear=True)
                for t, g in T.Parallel(block_T, num_groups):
                    group_col[t, g] = T.if_then_else(group_rank[t, g] == best[t], g, -1)
                T.reduce_max(group_col, best_col, dim=1, clear=True)
                for t, g in T.Parallel(block_T, num_groups):
                    if g == best_col[t]:
                        group_rank[t, g] = neg_inf
                        group_kept[t, g] = 1

            # the experts of the other groups are out
            for t, e in T.Parallel(block_T, num_experts):
                if group_kept[t, e // group_size] == 0:
                    choice[t, e] = neg_inf

            # the topk winners among the rest, in descending order of choice
            for k in T.serial(topk):
                T.reduce_max(choice, best, dim=1, clear=True)
                for t, e in T.Parallel(block_T, num_experts):
                    column[t, e] = T.if_then_else(choice[t, e] == best[t], e, -1)
                T.reduce_max(column, best_col, dim=1, clear=True)
                for t, e in T.Parallel(block_T, num_experts):
                    if e == best_col[t]:
                        choice[t, e] = neg_inf
                for t in T.Parallel(block_T):
                    chosen_score[t, k] = score_s[t, best_col[t]]
                    if bx * block_T + t < num_tokens:
                        topk_idx[bx * block_T + t, k] = best_col[t]

            T.reduce_sum(chosen_score, total, dim=1, clear=True)
            for t, k in T.Parallel(block_T, topk):
                if bx * block_T + t < num_tokens:
                    topk_weight[bx * block_T + t, k] = chosen_score[t, k] / total[t] * routed_scaling

    return main


def ref_program(logits, bias, num_groups, topk_group, topk, routed_scaling=2.5):
    """DeepSeek-V3's routing in torch: (expert indices [T, topk] int32, weights [T, topk] float32)."""
    score = logits.float().sigmoid()
    choice = score + bias.float()
    tokens, experts = choice.shape
    grouped = choice.view(tokens, num_groups, experts // num_groups)
    group_rank = grouped.topk(2, dim=-1).values.sum(-1)
    kept = torch.zeros_like(group_rank).scatter_(1, group_rank.topk(topk_group, dim=-1).indices, 1.0)
    mask = kept.repeat_interleave(experts // num_groups, dim=1).bool()
    idx = choice.masked_fill(~mask, float("-inf")).topk(topk, dim=-1).indices
    weight = score.gather(1, idx)
    return idx.to(torch.int32), weight / weight.sum(-1, keepdim=True) * routed_scaling


def main(tokens=256, experts=256, groups=8, topk_group=4, topk=8):
    logits = torch.randn((tokens, experts), dtype=torch.float32, device=device)
    bias = torch.randn((experts,), dtype=torch.float32, device=device) * 0.1
    kernel = moe_routing(tokens, experts, groups, topk_group, topk)
    idx, weight = kernel(logits, bias)
    ref_idx, ref_weight = ref_program(logits, bias, groups, topk_group, topk)
    torch.testing.assert_close(idx, ref_idx, rtol=0, atol=0)
    torch.testing.assert_close(weight, ref_weight, rtol=1e-5, atol=1e-5)
    print(f"MoE routing of {tokens} tokens over {experts} experts ({groups} groups, {topk_group} kept, top-{topk}): "
          f"matches torch on {device}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--experts", type=int, default=256)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--topk-group", type=int, default=4)
    parser.add_argument("--topk", type=int, default=8)
    args = parser.parse_args()
    main(args.tokens, args.experts, args.groups, args.topk_group, args.topk)
