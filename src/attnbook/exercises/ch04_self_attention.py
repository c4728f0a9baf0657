"""Checkers for chapter 4, *Self-attention* (``notebooks/04_self_attention.ipynb``)."""

from __future__ import annotations

import math

import torch

from . import Case, Checker, Mistake

__all__ = ["check_self_attention", "check_masked_attention", "check_unshuffle", "check_conv_layers_to_connect"]

_gen = torch.Generator().manual_seed(4)


def _randn(*shape):
    return torch.randn(*shape, generator=_gen)


# --- Exercise: self-attention from one sequence -------------------------------------------


def _self_attention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def _sa_unscaled(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def _sa_model_width(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1) @ v


def _sa_softmax_over_queries(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2) @ v


def _sa_raw_values(x, w_q, w_k, w_v):
    q, k = x @ w_q, x @ w_k
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ x


check_self_attention = Checker(
    "self_attention",
    reference=_self_attention,
    cases=[
        Case("one sequence of 3 tokens, d=4 projected to d_k=2", (_randn(1, 3, 4), _randn(4, 2), _randn(4, 2), _randn(4, 4))),
        Case("B=2 sequences of 5 tokens, d=6, d_k=3, d_v=6", (_randn(2, 5, 6), _randn(6, 3), _randn(6, 3), _randn(6, 6))),
        Case("d_v differs from d: d=4, d_k=8, d_v=2", (_randn(2, 4, 4), _randn(4, 8), _randn(4, 8), _randn(4, 2))),
    ],
    mistakes=[
        Mistake("no scaling", "divide the scores by sqrt(d_k) before the softmax.", _sa_unscaled),
        Mistake(
            "scaled by the model width",
            "d_k is the width of the projected queries and keys, (x @ w_q).shape[-1], not the width of x.",
            _sa_model_width,
        ),
        Mistake(
            "softmax over the queries",
            "each query's weights must sum to one over the keys: take the softmax along the last axis (dim=-1).",
            _sa_softmax_over_queries,
        ),
        Mistake("values not projected", "the values are x @ w_v, not x itself.", _sa_raw_values),
    ],
)


# --- Exercise: attention with a key-padding mask -------------------------------------------


def _masked_attention(q, k, v, key_padding_mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = key_padding_mask[:, None, :]  # (B, 1, S): the same keys hidden from every query
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    weights = weights.nan_to_num(0.0)  # a query with no key left gets zero weights, not NaN
    return weights @ v


def _ma_inverted(q, k, v, key_padding_mask):
    return _masked_attention(q, k, v, ~key_padding_mask)


def _ma_zeroed_after(q, k, v, key_padding_mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1).masked_fill(key_padding_mask[:, None, :], 0.0)
    return weights @ v


def _ma_unscaled(q, k, v, key_padding_mask):
    return _masked_attention(q * math.sqrt(q.shape[-1]), k, v, key_padding_mask)


def _mask(*rows):
    return torch.tensor(rows, dtype=torch.bool)


check_masked_attention = Checker(
    "masked_attention",
    reference=_masked_attention,
    cases=[
        Case(
            "B=2, T=2 queries, S=4 keys, the second sequence has 2 padded keys",
            (_randn(2, 2, 4), _randn(2, 4, 4), _randn(2, 4, 3), _mask([False] * 4, [False, False, True, True])),
        ),
        Case(
            "B=3, T=3, S=5, different lengths",
            (_randn(3, 3, 8), _randn(3, 5, 8), _randn(3, 5, 2), _mask([False] * 5, [False] * 3 + [True] * 2, [False] + [True] * 4)),
        ),
        Case(
            "a sequence that is all padding: zero output, not NaN",
            (_randn(2, 2, 4), _randn(2, 3, 4), _randn(2, 3, 4), _mask([False, True, True], [True, True, True])),
        ),
    ],
    mistakes=[
        Mistake(
            "mask inverted",
            "True in a key-padding mask means *ignore this key*: fill the scores where the mask is True.",
            _ma_inverted,
        ),
        Mistake(
            "zeroed after the softmax",
            "setting weights to zero after the softmax leaves rows that no longer sum to one; "
            "fill the masked scores with -inf before the softmax instead.",
            _ma_zeroed_after,
        ),
        Mistake("no scaling", "divide the scores by sqrt(d_k), the width of the queries.", _ma_unscaled),
    ],
)


# --- Exercise: undo a shuffle --------------------------------------------------------------


def _unshuffle(outputs, perm):
    return outputs[:, torch.argsort(perm)]


def _unshuffle_again(outputs, perm):
    return outputs[:, perm]


def _unshuffle_features(outputs, perm):
    return outputs[:, :, torch.argsort(perm)]


check_unshuffle = Checker(
    "unshuffle",
    reference=_unshuffle,
    cases=[
        Case("3 tokens of width 3, perm = [2, 0, 1]", (_randn(1, 3, 3), torch.tensor([2, 0, 1]))),
        Case("B=2, 5 tokens of width 4", (_randn(2, 5, 4), torch.tensor([3, 0, 4, 1, 2]))),
        Case("B=2, 6 tokens of width 6, perm of order 2", (_randn(2, 6, 6), torch.tensor([1, 0, 3, 2, 5, 4]))),
    ],
    mistakes=[
        Mistake(
            "shuffled again",
            "outputs[:, perm] applies the shuffle a second time; the token that went to place i came from "
            "perm[i], so put it back with the inverse permutation, torch.argsort(perm).",
            _unshuffle_again,
        ),
        Mistake("the wrong axis", "the tokens are axis 1 of (B, T, d); the features (axis 2) were never shuffled.", _unshuffle_features),
    ],
)


# --- Exercise: how many convolution layers connect the first and the last token? ------------


def _conv_layers_to_connect(n, k):
    return math.ceil((n - 1) / (k - 1))


def _conv_floor(n, k):
    return (n - 1) // (k - 1)


def _conv_n_over_k(n, k):
    return math.ceil(n / k)


check_conv_layers_to_connect = Checker(
    "conv_layers_to_connect",
    reference=_conv_layers_to_connect,
    cases=[
        Case("n=2 tokens, kernel 3", (2, 3)),
        Case("n=9 tokens, kernel 3", (9, 3)),
        Case("n=8 tokens, kernel 3", (8, 3)),
        Case("n=100 tokens, kernel 5", (100, 5)),
    ],
    mistakes=[
        Mistake(
            "rounded down",
            "a layer that only almost reaches the first token does not connect it: round the number of layers up.",
            _conv_floor,
        ),
        Mistake(
            "a layer reaches k tokens further",
            "each layer widens what a position sees by k - 1 (k - 1 neighbours, not k): after L layers the "
            "last position sees 1 + L (k - 1) tokens.",
            _conv_n_over_k,
        ),
    ],
)
