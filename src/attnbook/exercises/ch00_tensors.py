"""Checkers for chapter 0, *Tensors, shapes and softmax* (``notebooks/00_tensors.ipynb``)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import LOG_SOFTMAX_HOMES, Case, Checker, Mistake

__all__ = ["check_stable_log_softmax", "check_penalized_scores"]


# --- Exercise: a log-softmax that neither overflows nor underflows ----------------------------------------------------


def _stable_log_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    shifted = x - x.amax(dim=dim, keepdim=True)
    return shifted - shifted.exp().sum(dim=dim, keepdim=True).log()


def _log_of_softmax(x, dim=-1):
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    return (e / e.sum(dim=dim, keepdim=True)).log()


def _log_softmax_no_shift(x, dim=-1):
    return x - x.exp().sum(dim=dim, keepdim=True).log()


def _log_softmax_shift_forgotten(x, dim=-1):
    shifted = x - x.amax(dim=dim, keepdim=True)
    return x - shifted.exp().sum(dim=dim, keepdim=True).log()


def _log_softmax_global_max(x, dim=-1):
    shifted = x - x.max()
    return shifted - shifted.exp().sum(dim=dim, keepdim=True).log()


check_stable_log_softmax = Checker(
    "stable_log_softmax",
    reference=_stable_log_softmax,
    cases=[
        Case("small scores, one row", (torch.tensor([[1.0, 2.0, 3.0]]),)),
        Case(
            "a score far below the others: its softmax is 0 in float32, its log is not",
            (torch.tensor([[0.0, -200.0, 1.0]]),),
        ),
        Case("scores of 1000 that overflow exp in float32", (torch.tensor([[1000.0, 1001.0, 1002.0]]),)),
        Case("rows far apart: one near 0, one near 1000", (torch.tensor([[0.0, 1.0, 2.0], [1000.0, 1001.0, 999.0]]),)),
        Case("along the first axis (dim=0)", (torch.tensor([[1.0, 5.0], [3.0, 2.0], [0.0, 9.0]]),), {"dim": 0}),
        Case("a (B, T, S) tensor of scores", (torch.linspace(-3, 3, 24).reshape(2, 3, 4),)),
    ],
    mistakes=[
        Mistake(
            "log of the softmax",
            "a weight too small for float32 becomes 0, and log(0) = -inf, although its log is an ordinary number "
            "such as -200; work with logs throughout: log_softmax(x) = (x - m) - log(sum(exp(x - m))).",
            _log_of_softmax,
        ),
        Mistake(
            "no shift",
            "exp of a large score overflows to inf; subtract each row's maximum m before exp, "
            "and keep it out of the log.",
            _log_softmax_no_shift,
        ),
        Mistake(
            "the shift taken out of the sum only",
            "log(sum(exp(x))) = m + log(sum(exp(x - m))): when the sum is computed from the shifted scores, "
            "subtract the log from the shifted scores too (or add m back).",
            _log_softmax_shift_forgotten,
        ),
        Mistake(
            "one maximum for the whole tensor",
            "the maximum of the whole tensor leaves rows far below it with exp(...) == 0 everywhere and log(0) = -inf; "
            "take the maximum along `dim` only, with keepdim=True.",
            _log_softmax_global_max,
        ),
    ],
    forbidden={
        "torch.log_softmax": lambda x, dim=-1: torch.log_softmax(x, dim),
        "torch.nn.functional.log_softmax": lambda x, dim=-1: F.log_softmax(x, dim=dim),
        "torch.special.log_softmax": lambda x, dim=-1: torch.special.log_softmax(x, dim),
        "torch.Tensor.log_softmax": lambda x, dim=-1: x.log_softmax(dim),
        "torch.logsumexp": lambda x, dim=-1: x - torch.logsumexp(x, dim, keepdim=True),
        "torch.Tensor.logsumexp": lambda x, dim=-1: x - x.logsumexp(dim, keepdim=True),
    },
    refuses=(
        "torch.ops.aten._log_softmax",
        "torch.ops.aten.special_log_softmax",
        "torch.ops.aten.special_logsumexp",
        "torch.nn.LogSoftmax",
        LOG_SOFTMAX_HOMES,
    ),
)


# --- Exercise: scaled scores with a penalty for distance -------------------------------------------------------------


def _penalized_scores(queries: torch.Tensor, keys: torch.Tensor, slope: float) -> torch.Tensor:
    T, S = queries.shape[-2], keys.shape[-2]
    distance = (torch.arange(S)[None, :] - torch.arange(T)[:, None]).abs()  # (T, S): |j - i|
    return queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1]) - slope * distance


def _penalty_signed(queries, keys, slope):
    T, S = queries.shape[-2], keys.shape[-2]
    offset = torch.arange(S)[None, :] - torch.arange(T)[:, None]
    return queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1]) - slope * offset


def _penalty_unscaled(queries, keys, slope):
    T, S = queries.shape[-2], keys.shape[-2]
    distance = (torch.arange(S)[None, :] - torch.arange(T)[:, None]).abs()
    return queries @ keys.transpose(-2, -1) - slope * distance


def _penalty_added(queries, keys, slope):
    T, S = queries.shape[-2], keys.shape[-2]
    distance = (torch.arange(S)[None, :] - torch.arange(T)[:, None]).abs()
    return queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1]) + slope * distance


_gen = torch.Generator().manual_seed(0)


def _penalized_case(n):
    g = torch.Generator().manual_seed(n)
    return Case(
        f"{n} queries and {n} keys", (torch.randn(2, n, 4, generator=g), torch.randn(2, n, 4, generator=g), 0.5)
    )


def _penalized_looped(queries, keys, slope):
    """Right, but one Python step per query and key: the mistake 'a Python loop'."""
    T, S = queries.shape[-2], keys.shape[-2]
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    out = scores.clone()
    for i in range(T):
        for j in range(S):
            out[:, i, j] = scores[:, i, j] - slope * abs(j - i)
    return out


check_penalized_scores = Checker(
    "penalized_scores",
    reference=_penalized_scores,
    cases=[
        Case("zero vectors: the penalty alone, T=2, S=4, slope 1", (torch.zeros(1, 2, 4), torch.zeros(1, 4, 4), 1.0)),
        Case(
            "B=2, T=3 queries, S=5 keys, d=4, slope 0.5",
            (torch.randn(2, 3, 4, generator=_gen), torch.randn(2, 5, 4, generator=_gen), 0.5),
        ),
        Case(
            "B=3, T=4, S=2, d=16, slope 2",
            (torch.randn(3, 4, 16, generator=_gen), torch.randn(3, 2, 16, generator=_gen), 2.0),
        ),
    ],
    mistakes=[
        Mistake(
            "the offset, not the distance",
            "a key two places before the query is as far as one two places after it: the penalty is "
            "slope * |j - i|, the absolute value of the offset grid.",
            _penalty_signed,
        ),
        Mistake("no scaling", "divide the dot products by sqrt(d) before subtracting the penalty.", _penalty_unscaled),
        Mistake(
            "the penalty added",
            "distant keys must score *lower*: subtract slope * |j - i| from the scaled scores.",
            _penalty_added,
        ),
    ],
    refuses=("d2l.*",),
    loop_free=("positions", _penalized_case),
    looped=_penalized_looped,
)
