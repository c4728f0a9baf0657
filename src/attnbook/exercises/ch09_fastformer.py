"""Checkers for chapter 9, *Fastformer* (``notebooks/09_fastformer.ipynb``)."""

from __future__ import annotations

import math

import torch

from . import Case, Checker, Mistake

__all__ = [
    "check_global_query",
    "check_global_key",
    "check_running_global_query",
    "check_fastformer_parameter_count",
    "check_multiplications",
]

_gen = torch.Generator().manual_seed(9)


def _randn(*shape, scale=1.0):
    return torch.randn(*shape, generator=_gen, dtype=torch.float64) * scale


def _heads(x, num_heads):
    """``(B, N, d)`` -> ``(B, N, H, d_h)``: head ``h`` owns features ``h d_h .. (h + 1) d_h - 1``."""
    B, N, d = x.shape
    return x.reshape(B, N, num_heads, d // num_heads)


# --- Exercise: the global query ------------------------------------------------------------------


def _global_query(q, scores, num_heads):
    B, N, d = q.shape
    weights = torch.softmax(scores, dim=1)  # over the positions, one softmax per head
    return (weights[..., None] * _heads(q, num_heads)).sum(dim=1).reshape(B, d)


def _gq_softmax_over_heads(q, scores, num_heads):
    B, N, d = q.shape
    weights = torch.softmax(scores, dim=-1)
    return (weights[..., None] * _heads(q, num_heads)).sum(dim=1).reshape(B, d)


def _gq_heads_interleaved(q, scores, num_heads):
    B, N, d = q.shape
    weights = torch.softmax(scores, dim=1)
    return (weights[:, :, None, :] * q.reshape(B, N, d // num_heads, num_heads)).sum(dim=1).reshape(B, d)


def _gq_one_weight_per_position(q, scores, num_heads):
    weights = torch.softmax(scores.mean(dim=-1), dim=1)  # (B, N): one N-vector of weights for every feature
    return (weights[..., None] * q).sum(dim=1)


check_global_query = Checker(
    "global_query",
    reference=_global_query,
    cases=[
        Case("B=1, N=3, d=4, 2 heads", (_randn(1, 3, 4), _randn(1, 3, 2), 2)),
        Case("B=2, N=5, d=6, 3 heads", (_randn(2, 5, 6), _randn(2, 5, 3), 3)),
        Case("one head", (_randn(2, 4, 3), _randn(2, 4, 1), 1)),
    ],
    mistakes=[
        Mistake(
            "softmax over the heads",
            "alpha is a distribution over the N positions, one per head: take the softmax over dim=1 of the "
            "(B, N, H) scores, not over the heads.",
            _gq_softmax_over_heads,
        ),
        Mistake(
            "heads interleaved",
            "head h owns the consecutive features h*d_h .. (h+1)*d_h - 1: view q as (B, N, H, d_h), heads before features.",
            _gq_heads_interleaved,
        ),
        Mistake(
            "one weight per position for all heads",
            "each head has its own weights: pool head h's slice of q with head h's softmax, not with one shared set of weights.",
            _gq_one_weight_per_position,
        ),
    ],
    atol=1e-10,
    rtol=1e-8,
)


# --- Exercise: mixing and the global key -------------------------------------------------------------


def _global_key(k, q_global, weight, bias, num_heads):
    B, N, d = k.shape
    p = k * q_global[:, None, :]  # p_i = k_i ⊙ q̄
    scores = (p @ weight.T + bias) / math.sqrt(d // num_heads)  # (B, N, H): each head scores the whole p_i
    beta = torch.softmax(scores, dim=1)
    return (beta[..., None] * _heads(p, num_heads)).sum(dim=1).reshape(B, d)


def _gk_pools_keys(k, q_global, weight, bias, num_heads):
    B, N, d = k.shape
    p = k * q_global[:, None, :]
    beta = torch.softmax((p @ weight.T + bias) / math.sqrt(d // num_heads), dim=1)
    return (beta[..., None] * _heads(k, num_heads)).sum(dim=1).reshape(B, d)


def _gk_unscaled(k, q_global, weight, bias, num_heads):
    B, N, d = k.shape
    p = k * q_global[:, None, :]
    beta = torch.softmax(p @ weight.T + bias, dim=1)
    return (beta[..., None] * _heads(p, num_heads)).sum(dim=1).reshape(B, d)


def _gk_slice_scores(k, q_global, weight, bias, num_heads):
    B, N, d = k.shape
    d_h = d // num_heads
    p = k * q_global[:, None, :]
    ph = _heads(p, num_heads)  # (B, N, H, d_h)
    w = weight.reshape(num_heads, num_heads, d_h).diagonal(dim1=0, dim2=1).T  # head h's weights on its own slice
    beta = torch.softmax(((ph * w).sum(-1) + bias) / math.sqrt(d_h), dim=1)
    return (beta[..., None] * ph).sum(dim=1).reshape(B, d)


def _gk_case(name, B, N, d, H):
    return Case(name, (_randn(B, N, d), _randn(B, d), _randn(H, d, scale=0.7), _randn(H), H))


check_global_key = Checker(
    "global_key",
    reference=_global_key,
    cases=[
        _gk_case("B=1, N=3, d=4, 2 heads", 1, 3, 4, 2),
        _gk_case("B=2, N=6, d=6, 3 heads", 2, 6, 6, 3),
        _gk_case("B=2, N=4, d=8, 4 heads", 2, 4, 8, 4),
    ],
    mistakes=[
        Mistake(
            "pooled the keys instead of p",
            "the global key is the beta-weighted sum of the mixed vectors p_i = k_i * q_global, not of the keys k_i.",
            _gk_pools_keys,
        ),
        Mistake("no scaling", "divide the scores key_att(p_i) by sqrt(d_h), the head width, before the softmax.", _gk_unscaled),
        Mistake(
            "each head scores only its slice",
            "key_att maps the whole d-vector p_i to H scores: score_h = weight[h] . p_i + bias[h], with all d features "
            "(p @ weight.T + bias), not only head h's slice.",
            _gk_slice_scores,
        ),
    ],
    atol=1e-10,
    rtol=1e-8,
)


# --- Exercise: the causal global query, as a recurrence ------------------------------------------------


def _running_global_query(q, scores, num_heads):
    B, N, d = q.shape
    allowed = torch.ones(N, N, dtype=torch.bool).tril()  # row i sees positions j <= i
    s = scores.transpose(1, 2)[:, :, None, :].expand(B, num_heads, N, N)  # (B, H, i, j)
    weights = torch.softmax(s.masked_fill(~allowed, -math.inf), dim=-1)
    heads = _heads(q, num_heads).transpose(1, 2)  # (B, H, N, d_h)
    return (weights @ heads).transpose(1, 2).reshape(B, N, d)


def _rq_looks_ahead(q, scores, num_heads):
    B, N, d = q.shape
    e = torch.exp(scores - scores.amax(dim=1, keepdim=True))  # (B, N, H)
    numerator = torch.cumsum(e[..., None] * _heads(q, num_heads), dim=1)
    return (numerator / e.sum(dim=1)[:, None, :, None]).reshape(B, N, d)


def _rq_excludes_itself(q, scores, num_heads):
    B, N, d = q.shape
    full = _running_global_query(q, scores, num_heads)
    return torch.cat([torch.zeros_like(full[:, :1]), full[:, :-1]], dim=1)


def _rq_overflows(q, scores, num_heads):
    B, N, d = q.shape
    e = torch.exp(scores)
    numerator = torch.cumsum(e[..., None] * _heads(q, num_heads), dim=1)
    return (numerator / torch.cumsum(e, dim=1)[..., None]).reshape(B, N, d)


def _rq_global_max(q, scores, num_heads):
    B, N, d = q.shape
    e = torch.exp(scores - scores.amax(dim=1, keepdim=True))
    numerator = torch.cumsum(e[..., None] * _heads(q, num_heads), dim=1)
    return (numerator / torch.cumsum(e, dim=1)[..., None]).reshape(B, N, d)


_rising = torch.stack([torch.linspace(-800.0, 800.0, 6, dtype=torch.float64)] * 2, dim=-1)[None]  # (1, 6, 2)

check_running_global_query = Checker(
    "running_global_query",
    reference=_running_global_query,
    cases=[
        Case("B=1, N=4, d=4, 2 heads", (_randn(1, 4, 4), _randn(1, 4, 2), 2)),
        Case("B=2, N=6, d=6, 3 heads", (_randn(2, 6, 6), _randn(2, 6, 3), 3)),
        Case("scores of a few hundred (exp overflows in float64 above 709)", (_randn(2, 5, 4), _randn(2, 5, 2, scale=400.0), 2)),
        Case("scores rising from -800 to 800 (the late maximum is 1,600 above the first score)", (_randn(1, 6, 4), _rising, 2)),
    ],
    mistakes=[
        Mistake(
            "looks ahead",
            "row i must be normalized by the weights of positions 0..i only (a running sum), not by the sum over the "
            "whole sequence, which reads positions after i.",
            _rq_looks_ahead,
        ),
        Mistake(
            "excludes itself",
            "position i pools the positions j <= i, itself included; the first row is q_0, not zero.",
            _rq_excludes_itself,
        ),
        Mistake(
            "overflows",
            "exp of a score above ~709 is inf in float64 (88 in float32): keep a running maximum m_i of the scores "
            "and rescale the running sums by exp(m_old - m_new) when it grows.",
            _rq_overflows,
        ),
        Mistake(
            "global maximum",
            "subtracting the maximum over the whole sequence looks ahead, and underflows: early positions whose scores "
            "lie far below a later maximum get exp(...) = 0 and a 0/0. Use a running maximum, position by position.",
            _rq_global_max,
        ),
    ],
    atol=1e-9,
    rtol=1e-8,
)


# --- Exercise: how many parameters? ------------------------------------------------------------------------


def _fastformer_parameter_count(d_model, num_heads, share_value=True):
    count = 3 * (d_model * d_model + d_model) + 2 * (d_model * num_heads + num_heads)  # query, key, transform; query_att, key_att
    return count if share_value else count + d_model * d_model + d_model


def _pc_no_biases(d_model, num_heads, share_value=True):
    count = 3 * d_model * d_model + 2 * d_model * num_heads
    return count if share_value else count + d_model * d_model


def _pc_slice_scorers(d_model, num_heads, share_value=True):
    count = 3 * (d_model * d_model + d_model) + 2 * (d_model + num_heads)  # each head scoring only its d_h features
    return count if share_value else count + d_model * d_model + d_model


def _pc_value_always(d_model, num_heads, share_value=True):
    return 3 * (d_model * d_model + d_model) + 2 * (d_model * num_heads + num_heads) + d_model * d_model + d_model


check_fastformer_parameter_count = Checker(
    "fastformer_parameter_count",
    reference=_fastformer_parameter_count,
    cases=[
        Case("the authors' d_model=256 and 16 heads", (256, 16)),
        Case("d_model=64, 4 heads", (64, 4)),
        Case("d_model=64, 4 heads, values with their own projection", (64, 4), {"share_value": False}),
    ],
    mistakes=[
        Mistake("biases forgotten", "each of the five linear layers has a bias: d for query, key and transform, H for query_att and key_att.", _pc_no_biases),
        Mistake(
            "each head scores only its slice",
            "query_att and key_att are Linear(d, H): each of the H scores reads the whole d-vector, so each layer has "
            "d*H weights, not d_h per head.",
            _pc_slice_scorers,
        ),
        Mistake(
            "a value projection counted",
            "the authors' values reuse the queries' projection (share_value=True): there is no value layer unless share_value=False.",
            _pc_value_always,
        ),
    ],
)


# --- Exercise: count the multiplications ------------------------------------------------------------------------


def _multiplications(N, d, H):
    fastformer = 3 * N * d * d + 2 * N * d * H + 2 * N * d + 2 * N * d  # projections, scorers, two poolings, two ⊙
    softmax = 4 * N * d * d + 2 * N * N * d  # projections, Q Kᵀ and the weighted sum of V over all heads
    return fastformer, softmax


def _mul_seed_square(N, d, H):
    return (N * d) ** 2, 4 * N * d * d + 2 * N * N * d


def _mul_no_poolings(N, d, H):
    return 3 * N * d * d + 2 * N * d * H, 4 * N * d * d + 2 * N * N * d


def _mul_scores_only(N, d, H):
    return 3 * N * d * d + 2 * N * d * H + 4 * N * d, 4 * N * d * d + N * N * d


check_multiplications = Checker(
    "multiplications",
    reference=_multiplications,
    cases=[
        Case("N=10, d=4, H=2", (10, 4, 2)),
        Case("N=4096, d=256, H=16", (4096, 256, 16)),
        Case("N=1, d=8, H=1", (1, 8, 1)),
    ],
    mistakes=[
        Mistake(
            "the notes' O(N d)^2",
            "nothing in Fastformer multiplies every position-feature pair with every other: the projections cost "
            "N*d*d each and the poolings and element-wise products N*d each.",
            _mul_seed_square,
        ),
        Mistake(
            "poolings and element-wise products forgotten",
            "add N*d for each pooling (every entry of q, then of p, times its weight) and N*d for each element-wise "
            "product (k * q_global, k_global * q).",
            _mul_no_poolings,
        ),
        Mistake(
            "softmax attention's weighted sum forgotten",
            "softmax attention multiplies twice over N x N pairs: Q Kᵀ (N*N*d over all heads) and the weights times V (N*N*d again).",
            _mul_scores_only,
        ),
    ],
    atol=0,
    rtol=0,
)
