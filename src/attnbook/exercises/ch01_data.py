"""Checkers for chapter 1, *Sequence-to-sequence data* (``notebooks/01_data.ipynb``)."""

from __future__ import annotations

import math
from collections import Counter

import torch

from ..data import collate
from ..metrics import bleu_stats, brevity_penalty, clipped_matches
from . import Case, Checker, Mistake

__all__ = ["check_decoder_input_and_target", "check_clipped_precision_multi", "check_corpus_brevity_penalty"]


# --- Exercise: the decoder's input and target from a padded tensor -------------------------------------------------


def _decoder_input_and_target(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    B, T = tgt.shape
    tgt_in = torch.cat([torch.full((B, 1), bos_id, dtype=tgt.dtype), tgt], dim=1)  # <bos> y_1 .. y_n, then padding
    tgt_out = torch.cat([tgt, torch.full((B, 1), pad_id, dtype=tgt.dtype)], dim=1)
    tgt_out[torch.arange(B), lengths] = eos_id  # <eos> right after each sentence's last word
    return tgt_in, tgt_out


def _eos_at_the_end(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    B, T = tgt.shape
    tgt_in = torch.cat([torch.full((B, 1), bos_id, dtype=tgt.dtype), tgt], dim=1)
    return tgt_in, torch.cat([tgt, torch.full((B, 1), eos_id, dtype=tgt.dtype)], dim=1)


def _eos_over_last_word(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    B, T = tgt.shape
    tgt_in = torch.cat([torch.full((B, 1), bos_id, dtype=tgt.dtype), tgt], dim=1)
    tgt_out = torch.cat([tgt, torch.full((B, 1), pad_id, dtype=tgt.dtype)], dim=1)
    tgt_out[torch.arange(B), lengths - 1] = eos_id
    return tgt_in, tgt_out


def _input_and_target_swapped(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    tgt_in, tgt_out = _decoder_input_and_target(tgt, lengths, bos_id, eos_id, pad_id)
    return tgt_out, tgt_in


def _pair_with_collate(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    batch = collate([([4], row[:n].tolist()) for row, n in zip(tgt, lengths.tolist())], pad_id, bos_id, eos_id)
    return batch.tgt_in, batch.tgt_out


def _dit_case(n):
    lengths = torch.arange(n) % 4 + 1
    tgt = (torch.arange(n * 4).reshape(n, 4) % 7 + 3) * (torch.arange(4)[None, :] < lengths[:, None])
    return Case(f"{n} sentences", (tgt, lengths))


def _dit_looped(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    """Right, but one Python step per sentence: the mistake 'a Python loop'."""
    B, T = tgt.shape
    tgt_in = torch.cat([torch.full((B, 1), bos_id, dtype=tgt.dtype), tgt], dim=1)
    tgt_out = torch.cat([tgt, torch.full((B, 1), pad_id, dtype=tgt.dtype)], dim=1)
    for b in range(B):
        tgt_out[b, lengths[b]] = eos_id
    return tgt_in, tgt_out


check_decoder_input_and_target = Checker(
    "decoder_input_and_target",
    reference=_decoder_input_and_target,
    cases=[
        Case("one sentence of 3 words, no padding", (torch.tensor([[7, 8, 9]]), torch.tensor([3]))),
        Case(
            "lengths 4, 2 and 1, padded to 4",
            (torch.tensor([[5, 6, 7, 8], [9, 5, 0, 0], [6, 0, 0, 0]]), torch.tensor([4, 2, 1])),
        ),
        Case(
            "other special ids: <bos>=10, <eos>=11, <pad>=12",
            (torch.tensor([[5, 6, 12], [7, 8, 9]]), torch.tensor([2, 3])),
            {"bos_id": 10, "eos_id": 11, "pad_id": 12},
        ),
    ],
    mistakes=[
        Mistake(
            "<eos> at the end of the row",
            "a short sentence ends before the padding: its <eos> goes right after its last word, at column "
            "lengths[b], and the padding stays after it.",
            _eos_at_the_end,
        ),
        Mistake(
            "<eos> over the last word",
            "columns count from 0, so a sentence of n words has them in columns 0 .. n - 1 and its <eos> in column n.",
            _eos_over_last_word,
        ),
        Mistake(
            "input and target swapped",
            "the decoder reads <bos> y_1 .. y_n (the input starts with <bos>) and must predict y_1 .. y_n <eos> "
            "(the target ends with <eos>); return (input, target) in that order.",
            _input_and_target_swapped,
        ),
    ],
    forbidden={"attnbook.data.collate": _pair_with_collate},
    refuses=("attnbook.data.batches.*", "d2l.*"),
    loop_free=("sentences", _dit_case),
    looped=_dit_looped,
)


# --- Exercise: clipped precision against several references --------------------------------------------------------


def _grams(tokens, n):
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _clipped_precision_multi(hypothesis, references, n):
    hyp = _grams(hypothesis, n)
    most = Counter()
    for reference in references:
        for gram, count in _grams(reference, n).items():
            most[gram] = max(most[gram], count)
    return sum(min(count, most[gram]) for gram, count in hyp.items()), sum(hyp.values())


def _multi_counts_added(hypothesis, references, n):
    hyp, total = _grams(hypothesis, n), Counter()
    for reference in references:
        total += _grams(reference, n)
    return sum(min(count, total[gram]) for gram, count in hyp.items()), sum(hyp.values())


def _multi_first_only(hypothesis, references, n):
    return _clipped_precision_multi(hypothesis, references[:1], n)


def _multi_best_reference(hypothesis, references, n):
    return max((_clipped_precision_multi(hypothesis, [r], n) for r in references), key=lambda mt: mt[0])


def _multi_unclipped(hypothesis, references, n):
    seen = set().union(*(_grams(r, n) for r in references))
    hyp = _grams(hypothesis, n)
    return sum(count for gram, count in hyp.items() if gram in seen), sum(hyp.values())


def _multi_with_library(hypothesis, references, n):
    return clipped_matches(hypothesis, references, n)


def _multi_with_bleu_stats(hypothesis, references, n):
    stats = bleu_stats([list(hypothesis)], [[list(r) for r in references]], max_order=n)
    return stats.matches[n - 1], stats.totals[n - 1]


def _s(text):
    return text.split()


check_clipped_precision_multi = Checker(
    "clipped_precision_multi",
    reference=_clipped_precision_multi,
    cases=[
        Case("one reference, unigrams", (_s("le chat dort ."), [_s("le chat noir dort .")], 1)),
        Case(
            "the hypothesis is the second reference", (_s("un chat dort"), [_s("le chien dort"), _s("un chat dort")], 1)
        ),
        Case("'le' three times, once in each reference", (_s("le le le chat"), [_s("le chat"), _s("un chat")], 1)),
        Case(
            "'le' twice in the hypothesis, once in each of two references",
            (_s("le chat voit le chien"), [_s("le chat voit un chien"), _s("un chat voit le chien")], 1),
        ),
        Case(
            "each reference shares different bigrams with the hypothesis",
            (_s("le petit chat noir dort"), [_s("le petit chat dort"), _s("un chat noir dort")], 2),
        ),
        Case("a hypothesis shorter than n", (_s("oui"), [_s("oui merci"), _s("oui")], 2)),
    ],
    mistakes=[
        Mistake(
            "counts added over the references",
            "a hypothesis n-gram counts at most as often as the *one* reference that has it most often: take the "
            "maximum of the reference counts, not their sum.",
            _multi_counts_added,
        ),
        Mistake(
            "the best single reference",
            "the clipping limit is taken n-gram by n-gram over all references, so different n-grams may be matched in "
            "different references; do not pick one whole reference.",
            _multi_best_reference,
        ),
        Mistake(
            "the first reference only",
            "every reference is a correct translation: an n-gram is matched if any of them has it.",
            _multi_first_only,
        ),
        Mistake(
            "not clipped",
            "a repeated hypothesis n-gram matches at most as many times as the reference with the most copies has it.",
            _multi_unclipped,
        ),
    ],
    forbidden={
        "attnbook.metrics.clipped_matches": _multi_with_library,
        "attnbook.metrics.bleu_stats": _multi_with_bleu_stats,
    },
    refuses=("attnbook.metrics.d2l_bleu", "attnbook.metrics.corpus_bleu", "sacrebleu.*", "d2l.*"),
)


# --- Exercise: the brevity penalty of a corpus with several references per sentence -------------------------------


def _closest(hyp_len, ref_lens):
    return min(ref_lens, key=lambda r: (abs(r - hyp_len), r))


def _bp(c, r):
    if c >= r:
        return 1.0
    return 0.0 if c == 0 else math.exp(1 - r / c)


def _corpus_brevity_penalty(hyp_lens, ref_lens):
    c = sum(hyp_lens)
    r = sum(_closest(h, refs) for h, refs in zip(hyp_lens, ref_lens))
    return _bp(c, r)


def _bp_averaged(hyp_lens, ref_lens):
    return sum(_bp(h, _closest(h, refs)) for h, refs in zip(hyp_lens, ref_lens)) / len(hyp_lens)


def _bp_shortest(hyp_lens, ref_lens):
    return _bp(sum(hyp_lens), sum(min(refs) for refs in ref_lens))


def _bp_ties_longer(hyp_lens, ref_lens):
    return _bp(sum(hyp_lens), sum(min(refs, key=lambda r: (abs(r - h), -r)) for h, refs in zip(hyp_lens, ref_lens)))


def _bp_first(hyp_lens, ref_lens):
    return _bp(sum(hyp_lens), sum(refs[0] for refs in ref_lens))


def _bp_empty_is_one(hyp_lens, ref_lens):
    c = sum(hyp_lens)
    r = sum(_closest(h, refs) for h, refs in zip(hyp_lens, ref_lens))
    return 1.0 if c >= r or c == 0 else math.exp(1 - r / c)


def _bp_with_library(hyp_lens, ref_lens):
    return brevity_penalty(sum(hyp_lens), sum(_closest(h, refs) for h, refs in zip(hyp_lens, ref_lens)))


def _bp_with_bleu_stats(hyp_lens, ref_lens):
    stats = bleu_stats([["a"] * h for h in hyp_lens], [[["b"] * r for r in refs] for refs in ref_lens], max_order=1)
    return _bp(stats.hyp_len, stats.ref_len)


check_corpus_brevity_penalty = Checker(
    "corpus_brevity_penalty",
    reference=_corpus_brevity_penalty,
    cases=[
        Case("one sentence, one reference, shorter", ([8], [[10]])),
        Case("two sentences: one short, one long, one reference each", ([5, 12], [[10], [10]])),
        Case("the closest of three references: 9 tokens against 6, 10 and 14", ([9], [[14, 6, 10]])),
        Case("a tie: 9 tokens against 8 and 10", ([9, 4], [[10, 8], [7]])),
        Case("an empty hypothesis in a corpus", ([0, 3], [[4], [3, 5]])),
        Case("every hypothesis empty: c = 0", ([0, 0], [[4], [3, 5]])),
    ],
    mistakes=[
        Mistake(
            "averaged over sentences",
            "BLEU pools the lengths: c is the total hypothesis length and r the total of the chosen reference "
            "lengths, and the penalty is computed once, from c and r, not averaged over sentences.",
            _bp_averaged,
        ),
        Mistake(
            "the shortest reference",
            "each sentence counts the reference whose length is closest to its hypothesis, not the shortest one.",
            _bp_shortest,
        ),
        Mistake(
            "ties to the longer one", "on a tie, the shorter reference counts (sacreBLEU's rule).", _bp_ties_longer
        ),
        Mistake("the first reference only", "choose among all the references, by length.", _bp_first),
        Mistake(
            "an empty corpus scored 1",
            "as c shrinks to 0, 1 - r/c falls to minus infinity and exp(1 - r/c) to 0: with c = 0 (and r > 0) the "
            "penalty is 0.0, not 1.0. Guard the division: exp(1 - r/c) has no value at c = 0.",
            _bp_empty_is_one,
        ),
    ],
    forbidden={
        "attnbook.metrics.brevity_penalty": _bp_with_library,
        "attnbook.metrics.bleu_stats": _bp_with_bleu_stats,
    },
    refuses=(
        "attnbook.metrics._closest_length",
        "attnbook.metrics.corpus_bleu",
        "attnbook.metrics.sacrebleu_bleu",
        "sacrebleu.*",
        "d2l.*",
    ),
)
