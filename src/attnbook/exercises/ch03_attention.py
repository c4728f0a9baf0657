"""Checkers for chapter 3, *Attention* (``notebooks/03_attention.ipynb``)."""

from __future__ import annotations

import math

import torch

from ..attention import masked_softmax
from ..masks import padding_mask
from . import FUSED_ATTENTION, Case, Checker, Mistake, seeded_randn

__all__ = [
    "check_masked_softmax_per_query",
    "check_general_attention",
    "check_diagonal_attention",
    "check_alignment_accuracy",
]

_randn = seeded_randn(3)


def _softmax_ignoring(scores, mask):
    """Chapter 3's masked softmax: the most negative finite fill, then exactly zero, never NaN."""
    return torch.softmax(scores.masked_fill(mask, torch.finfo(scores.dtype).min), dim=-1).masked_fill(mask, 0.0)


# --- Exercise: a masked softmax with a valid length per query ------------------------------------------------------


def _per_query_mask(scores, valid_lens):
    return torch.arange(scores.shape[-1]) >= valid_lens[..., None]  # (B, T, S): key j of query t is ignored


def _masked_softmax_per_query(scores, valid_lens):
    return _softmax_ignoring(scores, _per_query_mask(scores, valid_lens))


def _pq_minus_inf(scores, valid_lens):
    return torch.softmax(scores.masked_fill(_per_query_mask(scores, valid_lens), float("-inf")), dim=-1)


def _pq_not_zeroed(scores, valid_lens):
    return torch.softmax(scores.masked_fill(_per_query_mask(scores, valid_lens), -1e9), dim=-1)


def _pq_one_too_many(scores, valid_lens):
    return _softmax_ignoring(scores, torch.arange(scores.shape[-1]) > valid_lens[..., None])


def _pq_one_per_sentence(scores, valid_lens):
    return _softmax_ignoring(scores, torch.arange(scores.shape[-1]) >= valid_lens[:, :1, None])


def _pq_with_library(scores, valid_lens):
    return masked_softmax(scores, _per_query_mask(scores, valid_lens))


def _pq_with_padding_mask(scores, valid_lens):
    B, T, S = scores.shape
    return _softmax_ignoring(scores, padding_mask(valid_lens.reshape(-1), S).reshape(B, T, S))


check_masked_softmax_per_query = Checker(
    "masked_softmax_per_query",
    reference=_masked_softmax_per_query,
    cases=[
        Case(
            "one sentence, 3 queries seeing 1, 2 and 3 of 3 keys",
            (torch.tensor([[[1.0, 2.0, 3.0]] * 3]), torch.tensor([[1, 2, 3]])),
        ),
        Case("B=2, T=3, S=5, lengths [[3, 5, 1], [2, 2, 4]]", (_randn(2, 3, 5), torch.tensor([[3, 5, 1], [2, 2, 4]]))),
        Case("a query with no valid key at all", (_randn(2, 2, 3), torch.tensor([[2, 3], [0, 1]]))),
    ],
    mistakes=[
        Mistake(
            "-inf fill",
            "filling with -inf gives NaN for a query whose every key is masked (exp(-inf) sums to 0, and 0/0 is NaN); "
            "fill with the most negative finite number (torch.finfo(dtype).min) "
            "and set the masked weights to 0 afterwards.",
            _pq_minus_inf,
        ),
        Mistake(
            "masked weights not zeroed",
            "a large negative fill alone spreads the weight evenly over a row whose every key is masked: that query "
            "then reads padding. Set the masked weights to exactly 0 after the softmax.",
            _pq_not_zeroed,
        ),
        Mistake(
            "one key too many",
            "query t sees keys 0 .. valid_lens[b, t] - 1: mask the positions >= its length, not > it.",
            _pq_one_too_many,
        ),
        Mistake(
            "one length per sentence",
            "every query has its own length, valid_lens[b, t]: compare the key positions (S,) with "
            "valid_lens[..., None], shape (B, T, 1), so that the mask is (B, T, S).",
            _pq_one_per_sentence,
        ),
    ],
    forbidden={
        "attnbook.attention.masked_softmax": _pq_with_library,
        "attnbook.masks.padding_mask": _pq_with_padding_mask,
    },
    refuses=("attnbook.attention.attention_mask", "d2l.*"),
)


# --- Exercise: Luong's general score, queries and keys of different widths -----------------------------------------


def _general_attention(queries, keys, values, W, key_padding_mask):
    scores = queries @ W @ keys.transpose(-2, -1)  # (B, T, d_q) (d_q, d_k) (B, d_k, S) -> (B, T, S)
    weights = _softmax_ignoring(scores, key_padding_mask[:, None, :])
    return weights @ values, weights


def _general_W_transposed(queries, keys, values, W, key_padding_mask):
    weights = _softmax_ignoring(queries @ W.T @ keys.transpose(-2, -1), key_padding_mask[:, None, :])
    return weights @ values, weights


def _general_scaled(queries, keys, values, W, key_padding_mask):
    scores = queries @ W @ keys.transpose(-2, -1) / math.sqrt(keys.shape[-1])
    weights = _softmax_ignoring(scores, key_padding_mask[:, None, :])
    return weights @ values, weights


def _general_no_mask(queries, keys, values, W, key_padding_mask):
    weights = torch.softmax(queries @ W @ keys.transpose(-2, -1), dim=-1)
    return weights @ values, weights


def _general_softmax_over_queries(queries, keys, values, W, key_padding_mask):
    scores = (queries @ W @ keys.transpose(-2, -1)).masked_fill(
        key_padding_mask[:, None, :], torch.finfo(queries.dtype).min
    )
    weights = torch.softmax(scores, dim=-2).masked_fill(key_padding_mask[:, None, :], 0.0)
    return weights @ values, weights


def _general_inputs(B, T, S, d_q, d_k, d_v, lengths):
    return (
        _randn(B, T, d_q),
        _randn(B, S, d_k),
        _randn(B, S, d_v),
        _randn(d_q, d_k) / math.sqrt(d_q),
        padding_mask(torch.tensor(lengths), S),
    )


check_general_attention = Checker(
    "general_attention",
    reference=_general_attention,
    cases=[
        Case("one sentence, 2 queries and 3 keys of width 4, no padding", _general_inputs(1, 2, 3, 4, 4, 2, [3])),
        Case(
            "queries of width 6, keys of width 4; B=2, key lengths 5 and 3", _general_inputs(2, 3, 5, 6, 4, 2, [5, 3])
        ),
        Case(
            "queries of width 3, keys of width 8; B=2, key lengths 2 and 6", _general_inputs(2, 4, 6, 3, 8, 5, [2, 6])
        ),
    ],
    mistakes=[
        Mistake(
            "W on the wrong side",
            "W is (d_q, d_k): the score is q^T W k, so multiply the queries by W and the result by the keys "
            "transposed, queries @ W @ keys.transpose(-2, -1).",
            _general_W_transposed,
        ),
        Mistake(
            "scaled",
            "Luong's general score is q^T W k, without a division by sqrt(d): "
            "W is learned and can set the scale itself.",
            _general_scaled,
        ),
        Mistake(
            "padding ignored",
            "padded keys must get weight 0: apply the key-padding mask (B, S) to every query, as mask[:, None, :].",
            _general_no_mask,
        ),
        Mistake(
            "softmax over the queries",
            "each query's weights over the keys sum to one: the softmax runs along the last axis (the keys), dim=-1.",
            _general_softmax_over_queries,
        ),
    ],
    refuses=(
        FUSED_ATTENTION,
        "torch.nn.functional.bilinear",
        "torch.ops.aten._trilinear",
        "torch.nn.Bilinear",
        "attnbook.attention.AdditiveAttention",
    ),
)


# --- Exercise: attention that prefers the diagonal ----------------------------------------------------------------


def _diagonal_attention(scores, src_lengths, width):
    B, T, S = scores.shape
    t = torch.arange(T, dtype=scores.dtype)[None, :, None]  # (1, T, 1)
    centre = (
        t * (src_lengths - 1).to(scores.dtype)[:, None, None] / (T - 1)
    )  # (B, T, 1): t's place, scaled to the source
    j = torch.arange(S, dtype=scores.dtype)  # (S,)
    penalized = scores - (j - centre) ** 2 / (2 * width**2)
    return _softmax_ignoring(penalized, padding_mask(src_lengths, S)[:, None, :])


def _diagonal_padded_length(scores, src_lengths, width):
    B, T, S = scores.shape
    centre = torch.arange(T, dtype=scores.dtype)[None, :, None] * (S - 1) / (T - 1)
    penalized = scores - (torch.arange(S, dtype=scores.dtype) - centre) ** 2 / (2 * width**2)
    return _softmax_ignoring(penalized, padding_mask(src_lengths, S)[:, None, :])


def _diagonal_no_mask(scores, src_lengths, width):
    B, T, S = scores.shape
    centre = (
        torch.arange(T, dtype=scores.dtype)[None, :, None] * (src_lengths - 1).to(scores.dtype)[:, None, None] / (T - 1)
    )
    return torch.softmax(scores - (torch.arange(S, dtype=scores.dtype) - centre) ** 2 / (2 * width**2), dim=-1)


def _diagonal_width_not_squared(scores, src_lengths, width):
    B, T, S = scores.shape
    centre = (
        torch.arange(T, dtype=scores.dtype)[None, :, None] * (src_lengths - 1).to(scores.dtype)[:, None, None] / (T - 1)
    )
    penalized = scores - (torch.arange(S, dtype=scores.dtype) - centre) ** 2 / (2 * width)
    return _softmax_ignoring(penalized, padding_mask(src_lengths, S)[:, None, :])


def _diagonal_same_position(scores, src_lengths, width):
    B, T, S = scores.shape
    centre = torch.arange(T, dtype=scores.dtype)[None, :, None]
    penalized = scores - (torch.arange(S, dtype=scores.dtype) - centre) ** 2 / (2 * width**2)
    return _softmax_ignoring(penalized, padding_mask(src_lengths, S)[:, None, :])


check_diagonal_attention = Checker(
    "diagonal_attention",
    reference=_diagonal_attention,
    cases=[
        Case("zero scores, 3 target and 5 source words, width 1", (torch.zeros(1, 3, 5), torch.tensor([5]), 1.0)),
        Case("B=2, T=4, S=6, source lengths 6 and 4, width 2", (_randn(2, 4, 6), torch.tensor([6, 4]), 2.0)),
        Case("B=2, T=5, S=3, source lengths 3 and 2, width 0.5", (_randn(2, 5, 3), torch.tensor([3, 2]), 0.5)),
    ],
    mistakes=[
        Mistake(
            "the diagonal of the padded batch",
            "each sentence has its own diagonal: target word t sits t / (T - 1) of the way through the target, so its "
            "centre is t (L_b - 1) / (T - 1) with the sentence's own source length L_b, not the padded S.",
            _diagonal_padded_length,
        ),
        Mistake(
            "the same position in both sentences",
            "the source and the target have different lengths: the centre for target word t is t (L_b - 1) / (T - 1), "
            "the same fraction of the way through the source, not position t.",
            _diagonal_same_position,
        ),
        Mistake(
            "padding not masked",
            "the penalty lowers the padded keys' scores but does not remove them: give them weight 0 with the "
            "key-padding mask, as in a masked softmax.",
            _diagonal_no_mask,
        ),
        Mistake(
            "width not squared",
            "the Gaussian score of kernel regression is -(j - c)^2 / (2 width^2): square the width as well.",
            _diagonal_width_not_squared,
        ),
    ],
    refuses=("d2l.*",),
)


# --- Exercise: how often does attention point at an aligned word? ---------------------


def _alignment_accuracy(weights: torch.Tensor, links: torch.Tensor) -> float:
    strongest = weights.argmax(dim=-1, keepdim=True)  # (B, T, 1): the source position each target word attends to most
    hit = links.gather(-1, strongest).squeeze(-1)  # (B, T): is that position one of the word's aligned ones?
    linked = links.any(dim=-1)  # (B, T): target words with at least one aligned source word
    return (hit & linked).sum().item() / linked.sum().item()


def _alignment_counts_unlinked(weights, links):
    hit = links.gather(-1, weights.argmax(dim=-1, keepdim=True)).squeeze(-1)
    return hit.sum().item() / hit.numel()


def _alignment_argmax_over_targets(weights, links):
    strongest = weights.argmax(dim=1)[..., None]  # (B, S, 1)
    hit = links.gather(-1, strongest).squeeze(-1)
    linked = links.any(dim=-1)
    return (hit & linked).sum().item() / linked.sum().item()


def _alignment_mean_of_sentences(weights, links):
    hit = links.gather(-1, weights.argmax(dim=-1, keepdim=True)).squeeze(-1)
    linked = links.any(dim=-1)
    return ((hit & linked).sum(1) / linked.sum(1)).mean().item()


def _alignment_first_link_only(weights, links):
    first = links.long().argmax(dim=-1)  # the first aligned position of each target word
    linked = links.any(dim=-1)
    return ((weights.argmax(dim=-1) == first) & linked).sum().item() / linked.sum().item()


def _weights_pointing_at(positions: list[list[int]], S: int) -> torch.Tensor:
    """Attention weights (B, T, S) whose strongest key is ``positions[b][t]``, with some weight elsewhere."""
    B, T = len(positions), len(positions[0])
    w = torch.full((B, T, S), 0.1)
    for b, row in enumerate(positions):
        for t, s in enumerate(row):
            w[b, t, s] = 1.0
    return w / w.sum(-1, keepdim=True)


def _links(rows: list[list[tuple[int, ...]]], S: int) -> torch.Tensor:
    """Bool links (B, T, S) from, for each target word, the tuple of its aligned source positions."""
    links = torch.zeros(len(rows), len(rows[0]), S, dtype=torch.bool)
    for b, row in enumerate(rows):
        for t, sources in enumerate(row):
            for j in sources:
                links[b, t, j] = True
    return links


def _alignment_case(n):
    g = torch.Generator().manual_seed(n)
    weights = torch.rand(n, n, n, generator=g).softmax(-1)
    links = torch.rand(n, n, n, generator=g) > 0.6
    links[:, 0, 0] = True
    return Case(f"{n} sentences of {n} words", (weights, links))


def _alignment_looped(weights, links):
    """Right, but one Python step per target word: the mistake 'a Python loop'."""
    hits = linked = 0
    for b in range(weights.shape[0]):
        for t in range(weights.shape[1]):
            if links[b, t].any():
                linked += 1
                hits += bool(links[b, t, weights[b, t].argmax()])
    return hits / linked


check_alignment_accuracy = Checker(
    "alignment_accuracy",
    reference=_alignment_accuracy,
    cases=[
        Case(
            "one sentence, T = S = 3, one link per word",
            (_weights_pointing_at([[0, 2, 2]], 3), _links([[(0,), (1,), (2,)]], 3)),
        ),
        Case(
            "a target word with no aligned source word",
            (_weights_pointing_at([[0, 1, 1, 3]], 4), _links([[(0,), (1,), (), (2,)]], 4)),
        ),
        Case(
            "a word aligned to two source words",
            (_weights_pointing_at([[0, 2, 3]], 4), _links([[(0,), (1, 2), (3,)]], 4)),
        ),
        Case(
            "two sentences of different lengths; padding has no links",
            (
                _weights_pointing_at([[0, 1, 2, 3, 4, 0], [1, 0, 0, 0, 0, 0]], 6),
                _links([[(0,), (1,), (2,), (3,), (5,), (5,)], [(1,), (1,), (), (), (), ()]], 6),
            ),
        ),
    ],
    mistakes=[
        Mistake(
            "unlinked positions counted",
            "divide by the number of target words that HAVE an aligned source word (links.any(dim=-1)): "
            "a word that translates nothing, or padding, can be neither right nor wrong.",
            _alignment_counts_unlinked,
        ),
        Mistake(
            "argmax over the targets",
            "for each target word, look for its strongest SOURCE position: argmax along the last axis (S).",
            _alignment_argmax_over_targets,
        ),
        Mistake(
            "first link only",
            'a French word can translate several English words ("va" for "is going to"); attending to any of '
            "them is a hit, so look the strongest position up in `links` instead of comparing it with one position.",
            _alignment_first_link_only,
        ),
        Mistake(
            "mean of sentence means",
            "count hits and linked words over the whole batch, then divide once: "
            "a short sentence's words must not weigh more.",
            _alignment_mean_of_sentences,
        ),
    ],
    refuses=("d2l.*",),
    loop_free=("sentences and words", _alignment_case),
    looped=_alignment_looped,
)
