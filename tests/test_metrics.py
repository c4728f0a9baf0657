"""BLEU: the teaching implementation equals sacreBLEU (tokenize="none") to 1e-6; d2l's sentence BLEU beside it."""

from __future__ import annotations

import math
import random

import pytest
import sacrebleu

from attnbook.metrics import (
    BleuStats,
    bleu_stats,
    brevity_penalty,
    clipped_matches,
    corpus_bleu,
    d2l_bleu,
    ngrams,
    sacrebleu_bleu,
)


def reference_bleu(hyps, refs_per_hyp, smooth):
    """sacreBLEU on whitespace-joined tokens; refs_per_hyp[i] is a list of references for hypothesis i."""
    k = max(len(r) for r in refs_per_hyp)
    streams = [[refs[j] if j < len(refs) else None for refs in refs_per_hyp] for j in range(k)]
    return sacrebleu.corpus_bleu(hyps, streams, tokenize="none", smooth_method=smooth, force=True).score


def random_sentence(rng, vocab, max_len):
    return " ".join(rng.choice(vocab) for _ in range(rng.randint(0, max_len)))


@pytest.mark.parametrize("smooth", ["exp", "none"])
def test_equals_sacrebleu_on_random_corpora(smooth):
    rng = random.Random(1234)
    for _ in range(400):
        vocab = [f"w{i}" for i in range(rng.randint(2, 12))]
        n = rng.randint(1, 8)
        max_len = rng.choice([3, 6, 15, 30])
        hyps = [random_sentence(rng, vocab, max_len) for _ in range(n)]
        refs = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, max_len))) for _ in range(n)]
        ours = corpus_bleu(hyps, refs, smooth=smooth)
        theirs = reference_bleu(hyps, [[r] for r in refs], smooth)
        assert abs(ours - theirs) < 1e-6, (hyps, refs, ours, theirs)
        tokens = corpus_bleu([h.split() for h in hyps], [r.split() for r in refs], smooth=smooth)
        assert abs(tokens - theirs) < 1e-6


@pytest.mark.parametrize("smooth", ["exp", "none"])
def test_equals_sacrebleu_with_several_references(smooth):
    rng = random.Random(99)
    for _ in range(200):
        vocab = list("abcdefg")
        n = rng.randint(1, 6)
        hyps = [random_sentence(rng, vocab, 12) for _ in range(n)]
        refs = [
            [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 12))) for _ in range(rng.randint(1, 3))]
            for _ in range(n)
        ]
        ours = corpus_bleu(hyps, refs, smooth=smooth)
        assert abs(ours - reference_bleu(hyps, refs, smooth)) < 1e-6, (hyps, refs)
        tokenized = corpus_bleu([h.split() for h in hyps], [[r.split() for r in rs] for rs in refs], smooth=smooth)
        assert abs(tokenized - ours) < 1e-12


def test_equals_sacrebleu_on_translations_of_the_corpus():
    from attnbook.data import generate_pairs

    rng = random.Random(0)
    pairs = generate_pairs(200, seed=9)
    refs = [p.tgt_tokens for p in pairs]
    hyps = []
    for ref in refs:  # damaged translations: words dropped, swapped, repeated
        hyp = [w for w in ref if rng.random() > 0.15]
        if len(hyp) > 2 and rng.random() < 0.5:
            i = rng.randrange(len(hyp) - 1)
            hyp[i], hyp[i + 1] = hyp[i + 1], hyp[i]
        hyps.append(hyp + [hyp[-1]] * rng.randint(0, 2) if hyp else hyp)
    for smooth in ("exp", "none"):
        ours = corpus_bleu(hyps, refs, smooth=smooth)
        assert abs(ours - sacrebleu_bleu(hyps, refs, smooth=smooth)) < 1e-6
        assert 20 < ours < 95


@pytest.mark.parametrize(
    "hyps, refs",
    [
        (["the cat sat on the mat"], ["the cat sat on the mat"]),  # identical
        ([""], ["the cat sat on the mat"]),  # empty hypothesis
        (["", ""], ["a b c d", "e f g h"]),  # every hypothesis empty
        (["the cat"], ["the cat sat on the mat"]),  # shorter: no 3- or 4-grams at all
        (["the cat sat on the mat today and tomorrow"], ["the cat sat on the mat"]),  # longer
        (["the the the the the the the"], ["the cat is on the mat"]),  # repeated word, clipped
        (["x y z w"], ["a b c d"]),  # nothing matches
        (["a b c d e"], ["a x c x e"]),  # unigrams only: smoothing decides
        (["a b c d", "e"], ["a b c d", "e"]),  # one short sentence among long ones
        (["a"], ["a"]),  # one token: no bigram anywhere
    ],
)
@pytest.mark.parametrize("smooth", ["exp", "none"])
def test_edge_cases_equal_sacrebleu(hyps, refs, smooth):
    assert abs(corpus_bleu(hyps, refs, smooth=smooth) - reference_bleu(hyps, [[r] for r in refs], smooth)) < 1e-6


def test_the_pieces_by_hand():
    # Papineni et al.'s example: seven "the" against a reference with two of them
    assert clipped_matches("the the the the the the the".split(), ["the cat is on the mat".split()], 1) == (2, 7)
    assert clipped_matches(
        "the the the the the the the".split(), ["the cat is on the mat".split(), "there is a cat on the mat".split()], 1
    ) == (2, 7)
    assert ngrams(["a", "b", "a", "b"], 2) == {("a", "b"): 2, ("b", "a"): 1}
    assert brevity_penalty(10, 10) == 1.0 and brevity_penalty(12, 10) == 1.0 and brevity_penalty(0, 5) == 0.0
    assert brevity_penalty(5, 10) == pytest.approx(math.exp(1 - 10 / 5))
    assert corpus_bleu(["le chat dort ."], ["le chat dort ."]) == pytest.approx(100.0)
    stats = bleu_stats(["a b c d e".split()], ["a b c d f".split()])
    assert stats == BleuStats(matches=[4, 3, 2, 1], totals=[5, 4, 3, 2], hyp_len=5, ref_len=5)
    expected = 100 * (4 / 5 * 3 / 4 * 2 / 3 * 1 / 2) ** 0.25
    assert corpus_bleu(["a b c d e"], ["a b c d f"]) == pytest.approx(expected, abs=1e-9)
    # exp smoothing: the k-th order without a match counts 1 / (2**k * total)
    smoothed = 100 * (3 / 5 * 1 / (2 * 4) * 1 / (4 * 3) * 1 / (8 * 2)) ** 0.25
    assert corpus_bleu(["a b c d e"], ["a x c x e"], smooth="exp") == pytest.approx(smoothed, abs=1e-9)
    assert corpus_bleu(["a b c d e"], ["a x c x e"], smooth="none") == 0.0


def test_corpus_bleu_pools_counts_rather_than_averaging_sentences():
    hyps, refs = ["a b c d", "x"], ["a b c d", "y z"]
    per_sentence = sum(corpus_bleu([h], [r]) for h, r in zip(hyps, refs)) / 2
    assert corpus_bleu(hyps, refs) != pytest.approx(per_sentence)


def test_d2l_bleu_equals_d2l_and_differs_from_corpus_bleu():
    from d2l import torch as d2l

    rng = random.Random(5)
    for _ in range(300):
        vocab = list("abcdef")
        hyp = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 10)))
        ref = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 10)))
        for k in (1, 2, 4):
            assert d2l_bleu(hyp, ref, k) == pytest.approx(d2l.bleu(hyp, ref, k), abs=1e-12)
            assert d2l_bleu(hyp.split(), ref.split(), k) == pytest.approx(d2l.bleu(hyp, ref, k), abs=1e-12)
    # a two-word translation: d2l gives it full marks with k=2, corpus BLEU cannot (no 3- or 4-grams)
    assert d2l_bleu("il dort", "il dort", k=2) == 1.0
    assert corpus_bleu(["il dort"], ["il dort"]) == 0.0
    assert d2l_bleu([], ["a"]) == 0.0


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_bleu(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="empty corpus"):
        corpus_bleu([], [])
    with pytest.raises(TypeError, match="do not mix"):
        corpus_bleu(["a b", ["a", "b"]], ["a b", "a b"])
    with pytest.raises(TypeError, match="token lists too"):
        corpus_bleu([["a", "b"]], ["a b"])
    with pytest.raises(ValueError, match="smooth must be"):
        corpus_bleu(["a"], ["a"], smooth="floor")
    with pytest.raises(ValueError, match="without spaces"):
        corpus_bleu([["a b"]], [["a"]])
    with pytest.raises(TypeError, match="list of sentences"):
        corpus_bleu("a b c", "a b c")
    with pytest.raises(ValueError, match="empty list"):
        corpus_bleu(["a"], [[]])
