"""Checkers for chapter 4, *Self-attention* (``notebooks/04_self_attention.ipynb``)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..attention import DotProductAttention, scaled_dot_product_attention
from ..masks import padding_mask
from . import FUSED_ATTENTION, NO_MODEL, Case, Checker, Mistake

__all__ = ["check_cross_attention", "check_local_attention", "check_unshuffle", "check_conv_layers_to_connect"]

_gen = torch.Generator().manual_seed(4)


def _randn(*shape):
    return torch.randn(*shape, generator=_gen)


def _attend(q, k, v, ignore, scale_width=None, fill=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale_width or q.shape[-1])
    if ignore is None:
        return torch.softmax(scores, dim=-1) @ v
    if fill is not None:
        return torch.softmax(scores.masked_fill(ignore, fill), dim=-1) @ v
    weights = torch.softmax(scores.masked_fill(ignore, torch.finfo(scores.dtype).min), dim=-1).masked_fill(ignore, 0.0)
    return weights @ v


# --- Exercise: cross-attention between two sequences of different lengths ------------------------------------------


def _cross_attention(y, x, x_padding_mask, w_q, w_k, w_v):
    return _attend(y @ w_q, x @ w_k, x @ w_v, x_padding_mask[:, None, :])


def _cross_no_mask(y, x, x_padding_mask, w_q, w_k, w_v):
    return _attend(y @ w_q, x @ w_k, x @ w_v, None)


def _cross_model_width(y, x, x_padding_mask, w_q, w_k, w_v):
    return _attend(y @ w_q, x @ w_k, x @ w_v, x_padding_mask[:, None, :], scale_width=y.shape[-1])


def _cross_values_unprojected(y, x, x_padding_mask, w_q, w_k, w_v):
    return _attend(y @ w_q, x @ w_k, x, x_padding_mask[:, None, :])


def _cross_with_library(y, x, x_padding_mask, w_q, w_k, w_v):
    return scaled_dot_product_attention(y @ w_q, x @ w_k, x @ w_v, x_padding_mask[:, None, :])[0]


def _cross_with_module(y, x, x_padding_mask, w_q, w_k, w_v):
    return DotProductAttention()(y @ w_q, x @ w_k, x @ w_v, x_padding_mask)[0]


def _cross_with_torch(y, x, x_padding_mask, w_q, w_k, w_v):
    return F.scaled_dot_product_attention(y @ w_q, x @ w_k, x @ w_v, attn_mask=~x_padding_mask[:, None, :])


def _cross_inputs(B, T, S, d_y, d_x, d_k, d_v, lengths):
    return (
        _randn(B, T, d_y),
        _randn(B, S, d_x),
        padding_mask(torch.tensor(lengths), S),
        _randn(d_y, d_k) / math.sqrt(d_y),
        _randn(d_x, d_k) / math.sqrt(d_x),
        _randn(d_x, d_v) / math.sqrt(d_x),
    )


check_cross_attention = Checker(
    "cross_attention",
    reference=_cross_attention,
    cases=[
        Case(
            "2 target tokens reading 3 source tokens, all widths 4, no padding", _cross_inputs(1, 2, 3, 4, 4, 4, 4, [3])
        ),
        Case(
            "B=2, 4 target tokens (width 6) reading 5 source tokens (width 8), source lengths 5 and 2",
            _cross_inputs(2, 4, 5, 6, 8, 2, 3, [5, 2]),
        ),
        Case(
            "B=2, 3 target tokens (width 8) reading 6 source tokens (width 4), source lengths 1 and 6",
            _cross_inputs(2, 3, 6, 8, 4, 2, 5, [1, 6]),
        ),
    ],
    mistakes=[
        Mistake(
            "padding ignored",
            "the source's padded tokens must get weight 0: mask the keys with x_padding_mask[:, None, :], "
            "(B, 1, S), the same for every target token.",
            _cross_no_mask,
        ),
        Mistake(
            "scaled by the model width",
            "d_k is the width of the projected queries and keys, (y @ w_q).shape[-1], not the width of y.",
            _cross_model_width,
        ),
        Mistake(
            "values not projected",
            "the values are x @ w_v, width d_v: a target token gathers projected source vectors.",
            _cross_values_unprojected,
        ),
    ],
    forbidden={
        "attnbook.attention.scaled_dot_product_attention": _cross_with_library,
        "attnbook.attention.DotProductAttention": _cross_with_module,
        "torch.nn.functional.scaled_dot_product_attention": _cross_with_torch,
    },
    refuses=FUSED_ATTENTION,
)


# --- Exercise: local (windowed) attention with padding ---------------------------------------------------------------


def _local_ignore(T, key_padding_mask, half_width, strict=False):
    position = torch.arange(T)
    distance = (position[:, None] - position[None, :]).abs()
    outside = distance >= half_width if strict else distance > half_width  # (T, T)
    return outside[None] | key_padding_mask[:, None, :]  # (B, T, T)


def _local_attention(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _local_ignore(q.shape[1], key_padding_mask, half_width))


def _local_no_padding(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _local_ignore(q.shape[1], torch.zeros_like(key_padding_mask), half_width))


def _local_no_window(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, key_padding_mask[:, None, :])


def _local_too_narrow(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _local_ignore(q.shape[1], key_padding_mask, half_width, strict=True))


def _local_minus_inf(q, k, v, key_padding_mask, half_width):
    return _attend(q, k, v, _local_ignore(q.shape[1], key_padding_mask, half_width), fill=float("-inf"))


_q, _k, _v = _randn(2, 6, 4), _randn(2, 6, 4), _randn(2, 6, 3)

check_local_attention = Checker(
    "local_attention",
    reference=_local_attention,
    cases=[
        Case(
            "one sentence of 5 tokens, no padding, half-width 1",
            (_q[:1, :5], _k[:1, :5], _v[:1, :5], padding_mask(torch.tensor([5]), 5), 1),
        ),
        Case("lengths 6 and 4, half-width 2", (_q, _k, _v, padding_mask(torch.tensor([6, 4]), 6), 2)),
        Case(
            "lengths 6 and 2, half-width 1: query 4 of the short sentence sees only padding",
            (_q, _k, _v, padding_mask(torch.tensor([6, 2]), 6), 1),
        ),
    ],
    mistakes=[
        Mistake(
            "window ignored",
            "each query i sees only the keys j with |i - j| <= half_width: "
            "combine the band with the padding mask using |.",
            _local_no_window,
        ),
        Mistake(
            "window one too narrow",
            "the window includes its edges: keys at distance exactly half_width are seen; mask |i - j| > half_width.",
            _local_too_narrow,
        ),
        Mistake(
            "padding ignored",
            "padded keys inside a window must still get weight 0: combine the band with key_padding_mask[:, None, :].",
            _local_no_padding,
        ),
        Mistake(
            "-inf fill",
            "a query whose window holds only padding has no key left, and -inf gives it NaN (0/0); fill with the most "
            "negative finite number and zero the masked weights, so its output is 0.",
            _local_minus_inf,
        ),
    ],
    refuses=("d2l.*",),  # attention with a mask is the building block here; the mask is the answer
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
    refuses=(NO_MODEL, "torch.ops.aten.convolution", "torch.ops.aten.conv1d"),
)
