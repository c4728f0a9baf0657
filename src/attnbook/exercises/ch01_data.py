"""Checkers for chapter 1, *Sequence-to-sequence data* (``notebooks/01_data.ipynb``)."""

from __future__ import annotations

import math
from collections import Counter

import torch

from . import Case, Checker, Mistake

__all__ = ["check_mask_from_lengths", "check_clipped_precision", "check_bp"]


# --- Exercise: the padding mask from the lengths ---------------------------------------


def _mask_from_lengths(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    positions = torch.arange(max_len)
    return positions[None, :] >= lengths[:, None]


def _mask_inverted(lengths, max_len):
    return torch.arange(max_len)[None, :] < lengths[:, None]


def _mask_off_by_one(lengths, max_len):
    return torch.arange(max_len)[None, :] > lengths[:, None]


def _mask_as_integers(lengths, max_len):
    return (torch.arange(max_len)[None, :] >= lengths[:, None]).long()


def _mask_longest_only(lengths, max_len):
    return torch.arange(int(lengths.max()))[None, :] >= lengths[:, None]


check_mask_from_lengths = Checker(
    "mask_from_lengths",
    reference=_mask_from_lengths,
    cases=[
        Case("two sentences of 2 and 3 tokens, padded to 4", (torch.tensor([2, 3]), 4)),
        Case("three sentences, one filling the whole width", (torch.tensor([1, 4, 2]), 4)),
        Case("padded wider than the longest sentence (max_len=6)", (torch.tensor([3, 1]), 6)),
        Case("an empty sentence (length 0)", (torch.tensor([0, 2]), 3)),
    ],
    mistakes=[
        Mistake(
            "True marks the words",
            "in PyTorch's convention True means *ignore*: the mask is True at the padding, "
            "positions >= length, and False on the real tokens.",
            _mask_inverted,
        ),
        Mistake(
            "off by one",
            "position `length` is already padding (positions count from 0), so compare with >=, not >.",
            _mask_off_by_one,
        ),
        Mistake(
            "0/1 integers instead of booleans",
            "masks are bool tensors; attention code checks the dtype. Leave the comparison's result as it is, "
            "without .long() or .int().",
            _mask_as_integers,
        ),
        Mistake(
            "width of the longest sentence",
            "the mask must be max_len wide, like the padded batch, even when every sentence is shorter: "
            "use torch.arange(max_len).",
            _mask_longest_only,
        ),
    ],
)


# --- Exercise: clipped n-gram precision -------------------------------------------------


def _ngram_counts(tokens, n):
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _clipped_precision(hypothesis: list[str], reference: list[str], n: int) -> tuple[int, int]:
    hyp, ref = _ngram_counts(hypothesis, n), _ngram_counts(reference, n)
    matches = sum(min(count, ref[gram]) for gram, count in hyp.items())
    return matches, sum(hyp.values())


def _precision_unclipped(hypothesis, reference, n):
    hyp, ref = _ngram_counts(hypothesis, n), _ngram_counts(reference, n)
    return sum(count for gram, count in hyp.items() if gram in ref), sum(hyp.values())


def _precision_distinct(hypothesis, reference, n):
    hyp, ref = _ngram_counts(hypothesis, n), _ngram_counts(reference, n)
    return sum(1 for gram in hyp if gram in ref), len(hyp)


def _precision_short_window(hypothesis, reference, n):
    hyp = Counter(tuple(hypothesis[i : i + n]) for i in range(len(hypothesis) - n))
    ref = Counter(tuple(reference[i : i + n]) for i in range(len(reference) - n))
    return sum(min(c, ref[g]) for g, c in hyp.items()), sum(hyp.values())


check_clipped_precision = Checker(
    "clipped_precision",
    reference=_clipped_precision,
    cases=[
        Case("unigrams of a perfect translation", ("le chat dort .".split(), "le chat dort .".split(), 1)),
        Case("seven 'the' against two in the reference", ("the the the the the the the".split(), "the cat is on the mat".split(), 1)),
        Case("bigrams, one of them repeated", ("the cat the cat on the mat".split(), "the cat is on the mat".split(), 2)),
        Case("a hypothesis shorter than n", (["hello"], ["hello", "world"], 2)),
    ],
    mistakes=[
        Mistake(
            "no clipping",
            "an n-gram counts at most as many times as it occurs in the reference: "
            "take min(count in hypothesis, count in reference).",
            _precision_unclipped,
        ),
        Mistake(
            "distinct n-grams",
            "count every occurrence in the hypothesis (a Counter), not each different n-gram once; "
            "the total is the number of n-gram positions, len(hypothesis) - n + 1.",
            _precision_distinct,
        ),
        Mistake(
            "the last n-gram is missing",
            "a sentence of L tokens has L - n + 1 n-grams: range(len(tokens) - n + 1).",
            _precision_short_window,
        ),
    ],
)


# --- Exercise: the brevity penalty -------------------------------------------------------


def _bp(hyp_len: int, ref_len: int) -> float:
    if hyp_len >= ref_len:
        return 1.0
    if hyp_len == 0:
        return 0.0
    return math.exp(1 - ref_len / hyp_len)


def _bp_no_cap(hyp_len, ref_len):
    return math.exp(1 - ref_len / hyp_len) if hyp_len else 0.0


def _bp_upside_down(hyp_len, ref_len):
    return 1.0 if hyp_len >= ref_len else math.exp(1 - hyp_len / ref_len)


def _bp_ratio(hyp_len, ref_len):
    return 1.0 if hyp_len >= ref_len else hyp_len / ref_len


check_bp = Checker(
    "bp",
    reference=_bp,
    cases=[
        Case("as long as the reference", (10, 10)),
        Case("longer than the reference", (12, 10)),
        Case("half as long as the reference", (5, 10)),
        Case("nine words for ten", (9, 10)),
        Case("an empty hypothesis", (0, 4)),
    ],
    mistakes=[
        Mistake(
            "a bonus for long hypotheses",
            "BLEU only penalizes translations that are too short; from exp(1 - r/c) a long one would get a "
            "factor above 1. Return 1.0 when hyp_len >= ref_len.",
            _bp_no_cap,
        ),
        Mistake(
            "ratio upside down",
            "the penalty is exp(1 - r / c), reference length over hypothesis length, so it falls quickly "
            "as the hypothesis gets shorter.",
            _bp_upside_down,
        ),
        Mistake(
            "the plain length ratio",
            "the penalty is the exponential exp(1 - r / c), not c / r.",
            _bp_ratio,
        ),
    ],
)
