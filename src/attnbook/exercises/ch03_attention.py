"""Checkers for chapter 3, *Attention* (``notebooks/03_attention.ipynb``)."""

from __future__ import annotations

import math

import torch

from . import Case, Checker, Mistake

__all__ = ["check_masked_softmax_lengths", "check_additive_scores", "check_dot_product_attention", "check_alignment_accuracy"]

_gen = torch.Generator().manual_seed(3)


def _randn(*shape):
    return torch.randn(*shape, generator=_gen)


# --- Exercise: a masked softmax from valid lengths -------------------------------------


def _masked_softmax_lengths(scores: torch.Tensor, valid_lens: torch.Tensor) -> torch.Tensor:
    S = scores.shape[-1]
    mask = torch.arange(S)[None, None, :] >= valid_lens[:, None, None]  # (B, 1, S), True = ignore
    filled = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=-1).masked_fill(mask, 0.0)


def _softmax_minus_inf(scores, valid_lens):
    mask = torch.arange(scores.shape[-1])[None, None, :] >= valid_lens[:, None, None]
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)


def _softmax_large_negative(scores, valid_lens):
    mask = torch.arange(scores.shape[-1])[None, None, :] >= valid_lens[:, None, None]
    return torch.softmax(scores.masked_fill(mask, -1e9), dim=-1)


def _softmax_keeps_one_too_many(scores, valid_lens):
    mask = torch.arange(scores.shape[-1])[None, None, :] > valid_lens[:, None, None]
    return torch.softmax(scores.masked_fill(mask, -1e9), dim=-1).masked_fill(mask, 0.0)


def _softmax_masks_queries(scores, valid_lens):
    mask = torch.arange(scores.shape[-2])[None, :, None] >= valid_lens[:, None, None]  # over T, not S
    return torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)


check_masked_softmax_lengths = Checker(
    "masked_softmax_lengths",
    reference=_masked_softmax_lengths,
    cases=[
        Case("one query, 2 of 4 keys valid", (torch.tensor([[[1.0, 2.0, 3.0, 4.0]]]), torch.tensor([2]))),
        Case("B=2, T=3, S=5, lengths 3 and 5", (_randn(2, 3, 5), torch.tensor([3, 5]))),
        Case("a sentence with no valid key at all", (_randn(2, 2, 3), torch.tensor([2, 0]))),
    ],
    mistakes=[
        Mistake(
            "-inf fill",
            "filling with -inf gives NaN when every key of a row is masked (exp(-inf) sums to 0, and 0/0 is NaN); "
            "fill with the most negative finite number (torch.finfo(dtype).min) and set the masked weights to 0 afterwards.",
            _softmax_minus_inf,
        ),
        Mistake(
            "masked weights not zeroed",
            "a large negative fill alone spreads the weight evenly over a row where every key is masked: that sentence "
            "then reads its padding. Set the masked weights to exactly 0 after the softmax.",
            _softmax_large_negative,
        ),
        Mistake(
            "one key too many",
            "valid keys are positions 0 .. len - 1: mask positions >= len, not > len.",
            _softmax_keeps_one_too_many,
        ),
        Mistake(
            "queries masked instead of keys",
            "the lengths say which KEYS are real: mask along the last axis (S), so every query ignores the padded keys.",
            _softmax_masks_queries,
        ),
    ],
)


# --- Exercise: additive scores ----------------------------------------------------------


def _additive_scores(queries, keys, W_q, W_k, w_v):
    q = queries @ W_q.T  # (B, T, h)
    k = keys @ W_k.T  # (B, S, h)
    return torch.tanh(q[:, :, None, :] + k[:, None, :, :]) @ w_v  # (B, T, S)


def _additive_no_tanh(queries, keys, W_q, W_k, w_v):
    return ((queries @ W_q.T)[:, :, None, :] + (keys @ W_k.T)[:, None, :, :]) @ w_v


def _additive_tanh_last(queries, keys, W_q, W_k, w_v):
    return torch.tanh(((queries @ W_q.T)[:, :, None, :] + (keys @ W_k.T)[:, None, :, :]) @ w_v)


def _additive_keys_first(queries, keys, W_q, W_k, w_v):
    return torch.tanh((queries @ W_q.T)[:, None, :, :] + (keys @ W_k.T)[:, :, None, :]) @ w_v  # (B, S, T)


def _additive_weights_untransposed(queries, keys, W_q, W_k, w_v):
    return torch.tanh((queries @ W_q)[:, :, None, :] + (keys @ W_k)[:, None, :, :]) @ w_v


_h = 4
check_additive_scores = Checker(
    "additive_scores",
    reference=_additive_scores,
    cases=[
        Case(
            "B=1, T=2 queries, S=3 keys, all widths 4",
            (_randn(1, 2, 4), _randn(1, 3, 4), _randn(_h, 4), _randn(_h, 4), _randn(_h)),
        ),
        Case(
            "queries of width 3, keys of width 5, h=4",
            (_randn(2, 2, 3), _randn(2, 6, 5), _randn(_h, 3), _randn(_h, 5), _randn(_h)),
        ),
        Case(
            "large projections that saturate tanh",
            (5 * _randn(2, 3, 4), 5 * _randn(2, 3, 4), _randn(_h, 4), _randn(_h, 4), _randn(_h)),
        ),
    ],
    mistakes=[
        Mistake(
            "no tanh",
            "without the tanh the score is w_v·W_q q + w_v·W_k k: a part that depends only on the query (the same for "
            "every key, so the softmax cancels it) plus a part that depends only on the key; the query could no "
            "longer change which key wins. Apply tanh to the sum before w_v.",
            _additive_no_tanh,
        ),
        Mistake(
            "tanh after w_v",
            "the tanh is the hidden layer of a small network: tanh(W_q q + W_k k), then the dot product with w_v.",
            _additive_tanh_last,
        ),
        Mistake(
            "keys before queries",
            "the scores are (B, T, S): one row per query, one column per key. Put the queries on axis 1 "
            "(q[:, :, None, :]) and the keys on axis 2 (k[:, None, :, :]).",
            _additive_keys_first,
        ),
        Mistake(
            "projection not transposed",
            "W_q has shape (h, d_q), like nn.Linear's weight: project with queries @ W_q.T.",
            _additive_weights_untransposed,
        ),
    ],
)


# --- Exercise: scaled dot-product attention with a key-padding mask -----------------------


def _dot_product_attention(queries, keys, values, key_padding_mask):
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(d)  # (B, T, S)
    mask = key_padding_mask[:, None, :]  # (B, 1, S)
    weights = torch.softmax(scores.masked_fill(mask, torch.finfo(scores.dtype).min), dim=-1).masked_fill(mask, 0.0)
    return weights @ values, weights


def _dot_unscaled(queries, keys, values, key_padding_mask):
    scores = queries @ keys.transpose(1, 2)
    mask = key_padding_mask[:, None, :]
    weights = torch.softmax(scores.masked_fill(mask, torch.finfo(scores.dtype).min), dim=-1).masked_fill(mask, 0.0)
    return weights @ values, weights


def _dot_mask_ignored(queries, keys, values, key_padding_mask):
    weights = torch.softmax(queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1]), dim=-1)
    return weights @ values, weights


def _dot_softmax_over_queries(queries, keys, values, key_padding_mask):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    mask = key_padding_mask[:, None, :]
    weights = torch.softmax(scores.masked_fill(mask, torch.finfo(scores.dtype).min), dim=1).masked_fill(mask, 0.0)
    return weights @ values, weights


def _dot_mask_inverted(queries, keys, values, key_padding_mask):
    return _dot_product_attention(queries, keys, values, ~key_padding_mask)


def _kpm(lengths, S):
    return torch.arange(S)[None, :] >= torch.tensor(lengths)[:, None]


check_dot_product_attention = Checker(
    "dot_product_attention",
    reference=_dot_product_attention,
    cases=[
        Case("no padding, d=4", (_randn(1, 2, 4), _randn(1, 3, 4), _randn(1, 3, 2), _kpm([3], 3))),
        Case("two sentences with 2 and 4 real keys, d=8", (_randn(2, 3, 8), _randn(2, 4, 8), _randn(2, 4, 3), _kpm([2, 4], 4))),
        Case("wide vectors, d=64", (_randn(2, 2, 64), _randn(2, 5, 64), _randn(2, 5, 2), _kpm([5, 3], 5))),
    ],
    mistakes=[
        Mistake(
            "not scaled",
            "divide the scores by sqrt(d), d = queries.shape[-1], so that wide vectors do not saturate the softmax.",
            _dot_unscaled,
        ),
        Mistake(
            "mask ignored",
            "padded keys got weight: set their scores to a very negative number before the softmax "
            "(and their weights to 0 after it), using key_padding_mask[:, None, :] so it broadcasts over queries.",
            _dot_mask_ignored,
        ),
        Mistake(
            "softmax over the queries",
            "each query's weights over the keys must sum to 1: take the softmax along the last axis (dim=-1).",
            _dot_softmax_over_queries,
        ),
        Mistake(
            "mask inverted",
            "the mask is True where a key must be IGNORED (padding), PyTorch's convention; do not invert it.",
            _dot_mask_inverted,
        ),
    ],
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
            "a French word can translate several English words (\"va\" for \"is going to\"); attending to any of "
            "them is a hit, so look the strongest position up in `links` instead of comparing it with one position.",
            _alignment_first_link_only,
        ),
        Mistake(
            "mean of sentence means",
            "count hits and linked words over the whole batch, then divide once: a short sentence's words must not weigh more.",
            _alignment_mean_of_sentences,
        ),
    ],
)
