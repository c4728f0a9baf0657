"""BLEU per length bucket (chapters 2 and 3)."""

from __future__ import annotations

import math

import pytest
import sacrebleu

from attnbook.metrics import bleu_by_length


def test_each_bucket_is_sacrebleu_on_its_own_sentences():
    refs = [
        "le chat dort .",
        "il mange une pomme verte .",
        "nous avons vu la très grande maison rouge hier .",
        "elle part .",
    ]
    hyps = ["le chat dort .", "il mange une pomme .", "nous avons vu la grande maison hier .", "elle arrive ."]
    lengths = [4, 6, 10, 3]
    scores = bleu_by_length(hyps, refs, lengths, edges=[4, 8, 12])
    assert [(s.low, s.high, s.count) for s in scores] == [(1, 4, 2), (5, 8, 1), (9, 12, 1)]
    assert [s.label for s in scores] == ["1–4", "5–8", "9–12"]
    for bucket, members in zip(scores, [[0, 3], [1], [2]]):
        expected = sacrebleu.corpus_bleu(
            [hyps[i] for i in members], [[refs[i] for i in members]], tokenize="none", force=True
        ).score
        assert math.isclose(bucket.bleu, expected, abs_tol=1e-9)


def test_token_lists_and_empty_buckets():
    scores = bleu_by_length([["a", "b", "c", "d"]], [["a", "b", "c", "d"]], [2], edges=[2, 5])
    assert scores[0].bleu == pytest.approx(100.0) and scores[1].count == 0 and math.isnan(scores[1].bleu)


def test_bad_arguments():
    with pytest.raises(ValueError, match="must match"):
        bleu_by_length(["a"], ["a", "b"], [1], [3])
    with pytest.raises(ValueError, match="increasing positive"):
        bleu_by_length(["a"], ["a"], [1], [5, 3])
    with pytest.raises(ValueError, match="longer than the last edge"):
        bleu_by_length(["a"], ["a"], [9], [5])
