"""Checkers for chapter 0, *Tensors, shapes and softmax* (``notebooks/00_tensors.ipynb``)."""

from __future__ import annotations

import math

import torch

from . import Case, Checker, Mistake

__all__ = ["check_stable_softmax", "check_scaled_scores"]


# --- Exercise: a softmax that never overflows ---------------------------------


def _stable_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=dim, keepdim=True)


def _softmax_no_shift(x, dim=-1):
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)


def _softmax_global_max(x, dim=-1):
    e = (x - x.max()).exp()
    return e / e.sum(dim=dim, keepdim=True)


def _softmax_wrong_axis(x, dim=-1):
    shifted = x - x.amax(dim=0, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=0, keepdim=True)


check_stable_softmax = Checker(
    "stable_softmax",
    reference=_stable_softmax,
    cases=[
        Case("small scores, one row", (torch.tensor([[1.0, 2.0, 3.0]]),)),
        Case("a batch of rows (B=2, S=3)", (torch.tensor([[0.0, 1.0, 2.0], [2.0, 0.0, -1.0]]),)),
        Case("scores of 1000 that overflow exp in float32", (torch.tensor([[1000.0, 1001.0, 1002.0]]),)),
        Case(
            "rows far apart: one near 0, one near 1000",
            (torch.tensor([[0.0, 1.0, 2.0], [1000.0, 1001.0, 999.0]]),),
        ),
        Case("softmax over the first axis (dim=0)", (torch.tensor([[1.0, 5.0], [3.0, 2.0], [0.0, 9.0]]),), {"dim": 0}),
        Case("a (B, T, S) tensor of scores", (torch.linspace(-3, 3, 24).reshape(2, 3, 4),)),
    ],
    mistakes=[
        Mistake(
            "no shift",
            "exp of a large score overflows to inf and inf/inf is nan; subtract each row's maximum "
            "(x.amax(dim=dim, keepdim=True)) before taking exp.",
            _softmax_no_shift,
        ),
        Mistake(
            "one maximum for the whole tensor",
            "subtracting the maximum of the whole tensor leaves rows far below it with exp(...) == 0 "
            "everywhere, so they divide 0 by 0; take the maximum along `dim` only, with keepdim=True.",
            _softmax_global_max,
        ),
        Mistake(
            "always the first axis",
            "the maximum and the sum must run along the `dim` argument, not along axis 0.",
            _softmax_wrong_axis,
        ),
    ],
)


# --- Exercise: batched, scaled dot-product scores ------------------------------


def _scaled_scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    d = queries.shape[-1]
    return queries @ keys.transpose(-2, -1) / math.sqrt(d)


def _scores_unscaled(queries, keys):
    return queries @ keys.transpose(-2, -1)


def _scores_divided_by_d(queries, keys):
    return queries @ keys.transpose(-2, -1) / queries.shape[-1]


def _scores_scaled_by_length(queries, keys):
    return queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-2])


def _scores_keys_first(queries, keys):
    return keys @ queries.transpose(-2, -1) / math.sqrt(queries.shape[-1])


_gen = torch.Generator().manual_seed(0)
_Q = torch.randn(2, 3, 4, generator=_gen)
_K = torch.randn(2, 5, 4, generator=_gen)
_Q16 = torch.randn(3, 2, 16, generator=_gen)
_K16 = torch.randn(3, 6, 16, generator=_gen)

check_scaled_scores = Checker(
    "scaled_scores",
    reference=_scaled_scores,
    cases=[
        Case(
            "two queries and two keys, d=4",
            (
                torch.tensor([[[1.0, 0.0, 2.0, 1.0], [0.0, 1.0, 0.0, 0.0]]]),
                torch.tensor([[[2.0, 1.0, 1.0, 0.0], [1.0, 3.0, 0.0, 1.0]]]),
            ),
        ),
        Case("B=2, T=3 queries, S=5 keys, d=4", (_Q, _K)),
        Case("B=3, T=2 queries, S=6 keys, d=16", (_Q16, _K16)),
    ],
    mistakes=[
        Mistake("no scaling", "divide the dot products by sqrt(d), the square root of the last axis of the queries.", _scores_unscaled),
        Mistake("divided by d", "the scale is sqrt(d), not d: it keeps the scores' variance near 1 when q and k have unit variance.", _scores_divided_by_d),
        Mistake("scaled by the length", "d is the width of each vector, queries.shape[-1], not the number of queries.", _scores_scaled_by_length),
        Mistake("keys first", "the result is (B, T, S): one row per query, so compute queries @ keys.transpose(-2, -1).", _scores_keys_first),
    ],
)
