"""Checkers for chapter 5, *Multi-head attention* (``notebooks/05_multihead_attention.ipynb``)."""

from __future__ import annotations

import torch

from . import Case, Checker, Mistake

__all__ = ["check_split_heads", "check_merge_heads", "check_decoder_self_mask", "check_mha_parameter_count"]

_x_small = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
_x_wide = torch.randn(3, 5, 12, generator=torch.Generator().manual_seed(5))


# --- Exercise: split the heads -------------------------------------------------------------


def _split_heads(x, num_heads):
    B, T, d = x.shape
    return x.reshape(B, T, num_heads, d // num_heads).transpose(1, 2)


def _split_no_transpose(x, num_heads):
    B, T, d = x.shape
    return x.reshape(B, num_heads, T, d // num_heads)


def _split_interleaved(x, num_heads):
    B, T, d = x.shape
    return x.reshape(B, T, d // num_heads, num_heads).permute(0, 3, 1, 2)


check_split_heads = Checker(
    "split_heads",
    reference=_split_heads,
    cases=[
        Case("B=2, T=3, d=4 into 2 heads (entries numbered 0..23)", (_x_small, 2)),
        Case("B=3, T=5, d=12 into 3 heads", (_x_wide, 3)),
        Case("one head: nothing to split", (_x_wide, 1)),
    ],
    mistakes=[
        Mistake(
            "reshape without transpose",
            "reshaping (B, T, d) straight to (B, h, T, d_k) mixes tokens into heads; reshape to (B, T, h, d_k) "
            "first, then swap axes 1 and 2.",
            _split_no_transpose,
        ),
        Mistake(
            "heads interleaved",
            "head i owns the consecutive features i*d_k .. (i+1)*d_k - 1, not every h-th feature: "
            "reshape to (B, T, h, d_k), with h before d_k.",
            _split_interleaved,
        ),
    ],
)


# --- Exercise: merge the heads -------------------------------------------------------------


def _merge_heads(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)


def _merge_no_transpose(x):
    B, h, T, d_k = x.shape
    return x.reshape(B, T, h * d_k)


def _merge_interleaved(x):
    B, h, T, d_k = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, h * d_k)


check_merge_heads = Checker(
    "merge_heads",
    reference=_merge_heads,
    cases=[
        Case("B=1, 2 heads, T=3, d_k=2 (entries numbered)", (torch.arange(12.0).reshape(1, 2, 3, 2),)),
        Case("B=3, 4 heads, T=5, d_k=3", (_x_wide.reshape(3, 5, 4, 3).transpose(1, 2).contiguous(),)),
    ],
    mistakes=[
        Mistake(
            "reshape without transpose",
            "bring the tokens back in front of the heads first: (B, h, T, d_k) -> (B, T, h, d_k) with "
            "transpose(1, 2), then reshape to (B, T, h * d_k).",
            _merge_no_transpose,
        ),
        Mistake(
            "heads interleaved",
            "head i's features must land side by side in columns i*d_k .. (i+1)*d_k - 1: "
            "the order is (B, T, h, d_k), heads before features.",
            _merge_interleaved,
        ),
    ],
)


# --- Exercise: the mask of a decoder's self-attention ---------------------------------------------


def _decoder_self_mask(lengths, size):
    future = torch.ones(size, size, dtype=torch.bool).triu(diagonal=1)  # key j > query i
    padded = torch.arange(size)[None, :] >= lengths[:, None]  # (B, S): key j is padding
    return future[None, :, :] | padded[:, None, :]


def _dsm_past_hidden(lengths, size):
    past = torch.ones(size, size, dtype=torch.bool).tril(diagonal=-1)
    padded = torch.arange(size)[None, :] >= lengths[:, None]
    return past[None, :, :] | padded[:, None, :]


def _dsm_diagonal_hidden(lengths, size):
    future = torch.ones(size, size, dtype=torch.bool).triu(diagonal=0)
    padded = torch.arange(size)[None, :] >= lengths[:, None]
    return future[None, :, :] | padded[:, None, :]


def _dsm_no_padding(lengths, size):
    future = torch.ones(size, size, dtype=torch.bool).triu(diagonal=1)
    return future.expand(len(lengths), size, size).clone()


check_decoder_self_mask = Checker(
    "decoder_self_mask",
    reference=_decoder_self_mask,
    cases=[
        Case("one full sequence of 3 tokens", (torch.tensor([3]), 3)),
        Case("lengths 4 and 2, padded to 4", (torch.tensor([4, 2]), 4)),
        Case("lengths 5, 1 and 3, padded to 6", (torch.tensor([5, 1, 3]), 6)),
    ],
    mistakes=[
        Mistake(
            "past hidden instead of the future",
            "True means *ignore*: query i must ignore the keys j > i, which are above the diagonal (triu).",
            _dsm_past_hidden,
        ),
        Mistake(
            "each token hidden from itself",
            "a token may attend to itself: hide only j > i, with triu(diagonal=1).",
            _dsm_diagonal_hidden,
        ),
        Mistake(
            "padding forgotten",
            "combine the causal mask with the key-padding mask (keys at positions >= length) using |.",
            _dsm_no_padding,
        ),
    ],
)


# --- Exercise: how many parameters? ----------------------------------------------------------------


def _mha_parameter_count(d_model, num_heads, bias=True):
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def _count_per_head(d_model, num_heads, bias=True):
    return num_heads * _mha_parameter_count(d_model, num_heads, bias)


def _count_divided(d_model, num_heads, bias=True):
    return 4 * d_model * d_model // num_heads + (4 * d_model if bias else 0)


def _count_no_bias(d_model, num_heads, bias=True):
    return 4 * d_model * d_model


check_mha_parameter_count = Checker(
    "mha_parameter_count",
    reference=_mha_parameter_count,
    cases=[
        Case("d_model=64, one head, with biases", (64, 1)),
        Case("d_model=64, 8 heads, with biases", (64, 8)),
        Case("d_model=512, 8 heads, no biases", (512, 8), {"bias": False}),
    ],
    mistakes=[
        Mistake(
            "biases forgotten",
            "each of the four projections (W_q, W_k, W_v, W_o) has a bias of d_model numbers when bias=True.",
            _count_no_bias,
        ),
        Mistake(
            "a full-width layer per head",
            "the heads split d_model between them: h heads of width d_model / h use the same "
            "d_model x d_model matrices as one head.",
            _count_per_head,
        ),
        Mistake(
            "heads divide the weights",
            "each head has d_model / h of the columns of W_q, but all h heads together still fill d_model x d_model.",
            _count_divided,
        ),
    ],
)
