"""Checkers for chapter 4, *Self-attention* (``notebooks/04_self_attention.ipynb``)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..attention import scaled_dot_product_attention
from ..masks import padding_mask
from . import FUSED_ATTENTION, NO_MODEL, Case, Checker, Mistake, seeded_randn

__all__ = [
    "check_two_source_attention",
    "check_local_global_attention",
    "check_unshuffle",
    "check_conv_layers_to_connect",
]

_randn = seeded_randn(4)


def _attend(q, k, v, ignore, scale_width=None, fill=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale_width or q.shape[-1])
    if ignore is None:
        return torch.softmax(scores, dim=-1) @ v
    if fill is not None:
        return torch.softmax(scores.masked_fill(ignore, fill), dim=-1) @ v
    weights = torch.softmax(scores.masked_fill(ignore, torch.finfo(scores.dtype).min), dim=-1).masked_fill(ignore, 0.0)
    return weights @ v


# --- Exercise: a target reading two sources at once --------------------------------------------------------------


def _two_sources(y, x1, mask1, x2, mask2, w_q, w_k, w_v, scale_width=None, pads=(True, True), joint=True, mean=True):
    q = y @ w_q
    if joint:  # one softmax over the keys of both sources
        x = torch.cat([x1, x2], dim=1)  # (B, S1 + S2, d_x)
        m1 = mask1 if pads[0] else torch.zeros_like(mask1)
        m2 = mask2 if pads[1] else torch.zeros_like(mask2)
        mask = torch.cat([m1, m2], dim=1)
        return _attend(q, x @ w_k, x @ w_v, mask[:, None, :], scale_width=scale_width)
    first = _attend(q, x1 @ w_k, x1 @ w_v, mask1[:, None, :], scale_width=scale_width)
    second = _attend(q, x2 @ w_k, x2 @ w_v, mask2[:, None, :], scale_width=scale_width)
    return (first + second) / 2 if mean else first + second


def _two_source_attention(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    return _two_sources(y, x1, mask1, x2, mask2, w_q, w_k, w_v)


def _ts_averaged(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    return _two_sources(y, x1, mask1, x2, mask2, w_q, w_k, w_v, joint=False)


def _ts_added(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    return _two_sources(y, x1, mask1, x2, mask2, w_q, w_k, w_v, joint=False, mean=False)


def _ts_second_padding_read(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    return _two_sources(y, x1, mask1, x2, mask2, w_q, w_k, w_v, pads=(True, False))


def _ts_first_padding_read(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    return _two_sources(y, x1, mask1, x2, mask2, w_q, w_k, w_v, pads=(False, True))


def _ts_model_width(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    return _two_sources(y, x1, mask1, x2, mask2, w_q, w_k, w_v, scale_width=y.shape[-1])


def _ts_with_torch(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    x, mask = torch.cat([x1, x2], dim=1), torch.cat([mask1, mask2], dim=1)
    return F.scaled_dot_product_attention(y @ w_q, x @ w_k, x @ w_v, attn_mask=~mask[:, None, :])


def _ts_with_library(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    x, mask = torch.cat([x1, x2], dim=1), torch.cat([mask1, mask2], dim=1)
    return scaled_dot_product_attention(y @ w_q, x @ w_k, x @ w_v, mask[:, None, :])[0]


def _ts_inputs(B, T, S1, S2, d_y, d_x, d_k, d_v, lengths1, lengths2):
    return (
        _randn(B, T, d_y),
        _randn(B, S1, d_x),
        padding_mask(torch.tensor(lengths1), S1),
        _randn(B, S2, d_x),
        padding_mask(torch.tensor(lengths2), S2),
        _randn(d_y, d_k) / math.sqrt(d_y),
        _randn(d_x, d_k) / math.sqrt(d_x),
        _randn(d_x, d_v) / math.sqrt(d_x),
    )


check_two_source_attention = Checker(
    "two_source_attention",
    reference=_two_source_attention,
    cases=[
        Case(
            "2 target tokens reading 3 + 2 source tokens, all widths 4, no padding",
            _ts_inputs(1, 2, 3, 2, 4, 4, 4, 4, [3], [2]),
        ),
        Case(
            "B=2, 4 target tokens (width 6) reading 5 + 3 tokens (width 8), lengths 5, 2 and 3, 1",
            _ts_inputs(2, 4, 5, 3, 6, 8, 2, 3, [5, 2], [3, 1]),
        ),
        Case(
            "B=2, 3 target tokens (width 8) reading 2 + 6 tokens (width 4), lengths 1, 2 and 6, 4",
            _ts_inputs(2, 3, 2, 6, 8, 4, 2, 5, [1, 2], [6, 4]),
        ),
    ],
    mistakes=[
        Mistake(
            "two softmaxes, averaged",
            "a target token has one budget of attention to share among all the keys it can read: join the keys (and "
            "the values, and the masks) of both sources along the sequence axis and take ONE softmax, so that a "
            "source with the better matches gets more of the weight.",
            _ts_averaged,
        ),
        Mistake(
            "two softmaxes, added",
            "adding two attention outputs gives weights that sum to 2; join the two sources' keys and take "
            "one softmax.",
            _ts_added,
        ),
        Mistake(
            "the second source's padding read",
            "join the masks as you join the keys, torch.cat([mask1, mask2], dim=1), so that the padding of both "
            "sources gets weight 0.",
            _ts_second_padding_read,
        ),
        Mistake(
            "the first source's padding read",
            "join the masks as you join the keys, torch.cat([mask1, mask2], dim=1), so that the padding of both "
            "sources gets weight 0.",
            _ts_first_padding_read,
        ),
        Mistake(
            "scaled by the model width",
            "d_k is the width of the projected queries and keys, (y @ w_q).shape[-1], not the width of y.",
            _ts_model_width,
        ),
    ],
    forbidden={
        "torch.nn.functional.scaled_dot_product_attention": _ts_with_torch,
        "attnbook.attention.scaled_dot_product_attention": _ts_with_library,
    },
    refuses=FUSED_ATTENTION,
)


# --- Exercise: local attention with one global token, for a padded batch -------------------------------------------


def _window_ignore(T, key_padding_mask, half_width, key_global=True, query_global=True, window=True, padding=True):
    position = torch.arange(T)
    outside = (position[:, None] - position[None, :]).abs() > half_width if window else torch.zeros(T, T, dtype=bool)
    if key_global:  # every query also reads token 0
        outside = outside & (position[None, :] != 0)
    if query_global:  # token 0 reads every token
        outside = outside & (position[:, None] != 0)
    return (
        outside[None] | key_padding_mask[:, None, :] if padding else outside[None].expand(len(key_padding_mask), -1, -1)
    )


def _local_global_attention(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _window_ignore(q.shape[1], key_padding_mask, half_width))


def _lg_band_only(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _window_ignore(q.shape[1], key_padding_mask, half_width, False, False))


def _lg_nobody_reads_it(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _window_ignore(q.shape[1], key_padding_mask, half_width, key_global=False))


def _lg_it_reads_its_window(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _window_ignore(q.shape[1], key_padding_mask, half_width, query_global=False))


def _lg_no_window(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _window_ignore(q.shape[1], key_padding_mask, half_width, window=False))


def _lg_padding_ignored(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _window_ignore(q.shape[1], key_padding_mask, half_width, padding=False))


def _lg_minus_inf(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _window_ignore(q.shape[1], key_padding_mask, half_width), fill=float("-inf"))


_q, _k, _v = _randn(2, 7, 4), _randn(2, 7, 4), _randn(2, 7, 3)

check_local_global_attention = Checker(
    "local_global_attention",
    reference=_local_global_attention,
    cases=[
        Case(
            "one sentence of 7 tokens, no padding, half-width 1",
            (_q[:1], _k[:1], _v[:1], padding_mask(torch.tensor([7]), 7), 1),
        ),
        Case("lengths 7 and 5, half-width 1", (_q, _k, _v, padding_mask(torch.tensor([7, 5]), 7), 1)),
        Case(
            "lengths 7 and 0 (a sentence that is all padding), half-width 2",
            (_q, _k, _v, padding_mask(torch.tensor([7, 0]), 7), 2),
        ),
    ],
    mistakes=[
        Mistake(
            "no global token",
            "token 0 is global both ways: every query reads key 0 whatever the distance, and query 0 reads every real "
            "key. A band alone leaves distant tokens connected only through a chain of windows.",
            _lg_band_only,
        ),
        Mistake(
            "the global token reads everyone, but nobody reads it",
            "a global token works both ways: also let every query read key 0 (clear column 0 of the band mask).",
            _lg_nobody_reads_it,
        ),
        Mistake(
            "the global token reads only its window",
            "query 0 must read every real key (clear row 0 of the band mask), or it gathers nothing from afar.",
            _lg_it_reads_its_window,
        ),
        Mistake(
            "window ignored",
            "apart from token 0, query i reads only the keys with |i - j| <= half_width.",
            _lg_no_window,
        ),
        Mistake(
            "padding ignored",
            "padded keys get weight 0 even inside a window or in the global column: combine the pattern with "
            "key_padding_mask[:, None, :] using |.",
            _lg_padding_ignored,
        ),
        Mistake(
            "-inf fill",
            "a sentence that is all padding leaves its queries no key, and -inf gives them NaN (0/0); fill with the "
            "most negative finite number and zero the masked weights, so that their output is 0.",
            _lg_minus_inf,
        ),
    ],
    refuses=("d2l.*",),  # attention with a mask is the building block here; the pattern is the answer
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
        Mistake(
            "the wrong axis",
            "the tokens are axis 1 of (B, T, d); the features (axis 2) were never shuffled.",
            _unshuffle_features,
        ),
    ],
    refuses=("d2l.*",),
)


# --- Exercise: how many convolution layers connect the first and the last token? ------------


def _conv_layers_to_connect(n, k):
    return math.ceil((n - 1) / (k - 1))


def _conv_floor(n, k):
    return (n - 1) // (k - 1)


def _conv_n_over_k(n, k):
    return math.ceil(n / k)


def _conv_at_least_one(n, k):
    return max(1, math.ceil((n - 1) / (k - 1)))


check_conv_layers_to_connect = Checker(
    "conv_layers_to_connect",
    reference=_conv_layers_to_connect,
    cases=[
        Case("n=2 tokens, kernel 3", (2, 3)),
        Case("n=9 tokens, kernel 3", (9, 3)),
        Case("n=8 tokens, kernel 3", (8, 3)),
        Case("n=100 tokens, kernel 5", (100, 5)),
        Case("n=1 token, kernel 3: nothing to connect", (1, 3)),
    ],
    mistakes=[
        Mistake(
            "rounded down",
            "a layer that only almost reaches the first token does not connect it: round the number of layers up.",
            _conv_floor,
        ),
        Mistake(
            "one layer at least",
            "a sentence of one token has its first and last token in the same place: no layer is needed, so 0.",
            _conv_at_least_one,
        ),
        Mistake(
            "a layer reaches k tokens further",
            "each layer widens what a position sees by k - 1 (k - 1 neighbours, not k): after L layers the "
            "last position sees 1 + L (k - 1) tokens.",
            _conv_n_over_k,
        ),
    ],
    refuses=(NO_MODEL, "torch.ops.aten.convolution", "torch.ops.aten.conv1d"),
)
