"""Checkers for chapter 9, *Fastformer* (``notebooks/09_fastformer.ipynb``)."""

from __future__ import annotations

import math

import torch

from . import NO_MODEL, Case, Checker, Mistake, seeded_randn
from .ch09_fastformer_step import _FASTFORMER, _FLOAT64, check_fastformer_step

__all__ = [
    "check_global_query",
    "check_global_keys_packed",
    "check_fastformer_step",  # its own module: ch09_fastformer_step
    "check_fastformer_parameter_count",
    "check_step_multiplications",
]

_randn = seeded_randn(9, torch.float64)


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
            "head h owns the consecutive features h*d_h .. (h+1)*d_h - 1: "
            "view q as (B, N, H, d_h), heads before features.",
            _gq_heads_interleaved,
        ),
        Mistake(
            "one weight per position for all heads",
            "each head has its own weights: pool head h's slice of q "
            "with head h's softmax, not with one shared set of weights.",
            _gq_one_weight_per_position,
        ),
    ],
    **_FLOAT64,
    refuses=_FASTFORMER,
)


# --- Exercise: the global keys of sentences packed into one row --------------------------------------------------


def _packed_keys(k, q_global, weight, bias, num_heads, segments, own_query=True, by_segment=True, zero_empty=True):
    B, N, d = k.shape
    G = q_global.shape[1]
    member = segments[..., None] == torch.arange(1, G + 1)  # (B, N, G): position i belongs to sentence g
    q_at = member.to(k.dtype) @ q_global if own_query else q_global[:, :1].expand(-1, N, -1)  # (B, N, d)
    if not by_segment:  # the mistake: every sentence pools the whole row (its real positions)
        member = (segments > 0)[..., None].expand(-1, -1, G)
    p = k * q_at  # p_i = k_i ⊙ q̄ of its own sentence
    scores = (p @ weight.T + bias) / math.sqrt(d // num_heads)  # (B, N, H)
    scores = scores[:, :, None, :].masked_fill(~member[..., None], -math.inf)  # (B, N, G, H)
    beta = torch.softmax(scores, dim=1)
    if zero_empty:
        beta = beta.nan_to_num(0.0)  # a sentence with no position: 0/0 -> 0
    pooled = torch.einsum("bngh,bnhe->bghe", beta, p.reshape(B, N, num_heads, d // num_heads))
    return pooled.reshape(B, G, d)


def _global_keys_packed(k, q_global, weight, bias, num_heads, segments):
    return _packed_keys(k, q_global, weight, bias, num_heads, segments)


def _gkp_whole_row(k, q_global, weight, bias, num_heads, segments):
    return _packed_keys(k, q_global, weight, bias, num_heads, segments, by_segment=False)


def _gkp_first_query(k, q_global, weight, bias, num_heads, segments):
    return _packed_keys(k, q_global, weight, bias, num_heads, segments, own_query=False)


def _gkp_nan(k, q_global, weight, bias, num_heads, segments):
    return _packed_keys(k, q_global, weight, bias, num_heads, segments, zero_empty=False)


def _unscaled_packed(k, q_global, weight, bias, num_heads, segments):
    d_h = k.shape[-1] // num_heads
    return _packed_keys(k, q_global, weight * math.sqrt(d_h), bias * math.sqrt(d_h), num_heads, segments)


def _gkp_case(name, segments, G, d=6, H=3):
    segments = torch.tensor(segments)
    B, N = segments.shape
    return Case(
        name,
        (_randn(B, N, d), _randn(B, G, d), _randn(H, d, scale=0.6), _randn(H, scale=0.3), H, segments),
    )


check_global_keys_packed = Checker(
    "global_keys_packed",
    reference=_global_keys_packed,
    cases=[
        _gkp_case("one row, two sentences of 3 and 2 tokens, 1 padding", [[1, 1, 1, 2, 2, 0]], 2),
        _gkp_case("two rows, three sentences each, padding at the end", [[1, 1, 2, 3, 3, 3], [1, 2, 2, 2, 3, 0]], 3),
        _gkp_case(
            "a row with one sentence and a sentence slot left empty", [[1, 1, 1, 1, 0, 0], [1, 2, 2, 0, 0, 0]], 2
        ),
    ],
    mistakes=[
        Mistake(
            "one pooling over the whole row",
            "sentences packed into one row must not read each other: sentence g's softmax runs over ITS positions "
            "only (segments == g), so mask the scores per sentence, (B, N, G, H), before the softmax over N.",
            _gkp_whole_row,
        ),
        Mistake(
            "mixed with the first sentence's global query",
            "each position is mixed with the global query of its own sentence: p_i = k_i ⊙ q̄_g for g = segments[i] "
            "(a one-hot of the segments times q_global picks it).",
            _gkp_first_query,
        ),
        Mistake(
            "NaN for an empty sentence",
            "a sentence slot with no position has nothing to pool: a softmax over only -inf is 0/0 = NaN; "
            "its global key is zero (nan_to_num(0.0) after the softmax, or a finite fill and zeroed weights).",
            _gkp_nan,
        ),
        Mistake(
            "scores not scaled",
            "divide the scores by sqrt(d_h), the head width, as in the layer (key_att(p) / sqrt(d_h)).",
            _unscaled_packed,
        ),
    ],
    **_FLOAT64,
    refuses=_FASTFORMER,
)


# --- Exercise: how many parameters? ------------------------------------------------------------------------


def _fastformer_parameter_count(d_model, num_heads, share_value=True):
    count = 3 * (d_model * d_model + d_model) + 2 * (
        d_model * num_heads + num_heads
    )  # query, key, transform; query_att, key_att
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
        Mistake(
            "biases forgotten",
            "each of the five linear layers has a bias: d for query, key and transform, H for query_att and key_att.",
            _pc_no_biases,
        ),
        Mistake(
            "each head scores only its slice",
            "query_att and key_att are Linear(d, H): each of the H scores reads the whole d-vector, so each layer has "
            "d*H weights, not d_h per head.",
            _pc_slice_scorers,
        ),
        Mistake(
            "a value projection counted",
            "the authors' values reuse the queries' projection (share_value=True): "
            "there is no value layer unless share_value=False.",
            _pc_value_always,
        ),
    ],
    refuses=(NO_MODEL, "attnbook.fastformer.*"),
)


# --- Exercise: what one more token costs, each model with what it keeps -------------------------------------------


def _multiplications(N, d, H):
    """The whole-sequence counts of the chapter's cost section (one forward pass over N tokens)."""
    fastformer = 3 * N * d * d + 2 * N * d * H + 2 * N * d + 2 * N * d
    softmax = 4 * N * d * d + 2 * N * N * d
    linear = 4 * N * d * d + 2 * N * d * (d // H) + N * d
    return fastformer, softmax, linear


def _step_multiplications(N, d, H):
    d_h = d // H
    fastformer = (
        3 * d * d + 2 * d * H + 2 * d + 2 * d
    )  # the new token's projections, scorers, two pooling updates, two ⊙
    softmax = 4 * d * d + 2 * (N + 1) * d  # its four projections; q·k and the weighted sum over the N + 1 cached keys
    linear = 4 * d * d + 2 * d * d_h + d  # its four projections; S_h += φ(k)vᵀ and φ(q)ᵀS_h per head; φ(q)·z
    return fastformer, softmax, linear


def _sm_no_cache(N, d, H):
    fastformer, softmax, linear = _step_multiplications(N, d, H)
    return fastformer, softmax + 2 * N * d * d, linear


def _sm_new_key_forgotten(N, d, H):
    fastformer, softmax, linear = _step_multiplications(N, d, H)
    return fastformer, softmax - 2 * d, linear


def _sm_whole_prefix_pooled(N, d, H):
    fastformer, softmax, linear = _step_multiplications(N, d, H)
    return fastformer + 2 * N * d, softmax, linear


def _sm_whole_layer(N, d, H):
    fastformer, softmax, linear = _step_multiplications(N, d, H)
    return _multiplications(N + 1, d, H)[0], softmax, linear


def _sm_one_big_state(N, d, H):
    fastformer, softmax, linear = _step_multiplications(N, d, H)
    return fastformer, softmax, linear - 2 * d * (d // H) + 2 * d * d


check_step_multiplications = Checker(
    "step_multiplications",
    reference=_step_multiplications,
    cases=[
        Case("N=10 tokens kept, d=4, H=2", (10, 4, 2)),
        Case("N=4096, d=256, H=16", (4096, 256, 16)),
        Case("the first token: N=0, d=8, H=1", (0, 8, 1)),
    ],
    mistakes=[
        Mistake(
            "keys and values projected again",
            "with a cache, softmax attention projects only the new token (four d x d products) and reads the N "
            "cached keys and values: the old ones are never multiplied by W_k or W_v again.",
            _sm_no_cache,
        ),
        Mistake(
            "the new key forgotten",
            "the new token's query reads N + 1 keys, its own included: (N + 1) d for the scores and as many for the "
            "weighted sum.",
            _sm_new_key_forgotten,
        ),
        Mistake(
            "the prefix pooled again",
            "a recurrent Fastformer updates its running sums with the new token only: d multiplications per pooling, "
            "whatever N; pooling the whole prefix again is what its state spares.",
            _sm_whole_prefix_pooled,
        ),
        Mistake(
            "the whole layer run again",
            "that is the cost of a forward pass over all N + 1 tokens; one step projects, scores and pools the new "
            "token only.",
            _sm_whole_layer,
        ),
        Mistake(
            "one d x d state for all heads",
            "each head keeps its own d_h x d_h state: updating and reading them costs 2 d d_h over all heads, "
            "not 2 d^2.",
            _sm_one_big_state,
        ),
    ],
    atol=0,
    rtol=0,
    refuses=(NO_MODEL, "attnbook.fastformer.*"),
)
