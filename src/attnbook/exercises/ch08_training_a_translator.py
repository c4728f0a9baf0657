"""Checkers for chapter 8, *Training a translator* (``notebooks/08_training_a_translator.ipynb``)."""

from __future__ import annotations

import torch

from . import Case, Checker, Mistake, seeded_randn
from .ch08_cross_attention_cache import check_cross_attention_steps

__all__ = [
    "check_noam_lambda",
    "check_prior_smoothed_loss",
    "check_beam_step",
    "check_cross_attention_steps",  # its own module: ch08_cross_attention_cache
]

_randn = seeded_randn(8, torch.float64)


# --- Exercise: the paper's schedule through LambdaLR ------------------------------------------------------


def _rate(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def _noam_lambda(s, d_model, warmup, base_lr):
    return _rate(s + 1, d_model, warmup) / base_lr


def _lambda_not_shifted(s, d_model, warmup, base_lr):
    return _rate(s, d_model, warmup) / base_lr


def _lambda_rate_itself(s, d_model, warmup, base_lr):
    return _rate(s + 1, d_model, warmup)


def _lambda_max(s, d_model, warmup, base_lr):
    step = s + 1
    return d_model**-0.5 * max(step**-0.5, step * warmup**-1.5) / base_lr


def _lambda_no_width(s, d_model, warmup, base_lr):
    step = s + 1
    return min(step**-0.5, step * warmup**-1.5) / base_lr


check_noam_lambda = Checker(
    "noam_lambda",
    reference=_noam_lambda,
    cases=[
        Case("counter 1 (the second optimizer step), d_model 512, warm-up 4000, lr 1e-3", (1, 512, 4000, 1e-3)),
        Case("counter 0: the very first step", (0, 512, 4000, 1e-3)),
        Case("the peak: counter 3999 is step 4000", (3999, 512, 4000, 1e-3)),
        Case("long after the peak, an optimizer created with lr = 1", (39999, 512, 4000, 1.0)),
        Case("a small model mid warm-up, lr 5e-4", (49, 64, 200, 5e-4)),
    ],
    mistakes=[
        Mistake(
            "counter not shifted",
            "LambdaLR counts from 0 and calls the function with 0 for the first optimizer step, while the paper counts "
            "steps from 1: use step = s + 1 (with s itself, the first step would divide by zero).",
            _lambda_not_shifted,
        ),
        Mistake(
            "the rate itself",
            "LambdaLR MULTIPLIES the optimizer's own learning rate by the function's value: return the paper's rate "
            "divided by base_lr, the lr the optimizer was created with.",
            _lambda_rate_itself,
        ),
        Mistake(
            "max instead of min",
            "the rate is the smaller of the two curves: min(step**-0.5, step * warmup**-1.5).",
            _lambda_max,
        ),
        Mistake("no d_model factor", "multiply by d_model**-0.5: wider models take smaller steps.", _lambda_no_width),
    ],
    atol=1e-12,
    rtol=1e-9,
    refuses=(
        "attnbook.train.noam_lr",
        "attnbook.train.NoamSchedule",
        "attnbook.translate.recipe.LinearDecaySchedule",
        "attnbook.train.paper_optimizer",
        "torch.optim.lr_scheduler.*",
        "d2l.*",
    ),
)


# --- Exercise: label smoothing towards the words' frequencies, with <pad> left out ------------------------------


def _prior_loss(logits, targets, eps, prior, pad_id, renormalize=True, use_prior=True, per_sentence=False, pads=False):
    V = logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    u = prior.to(log_probs.dtype) if use_prior else torch.ones(V, dtype=log_probs.dtype)
    if renormalize:
        u = u.clone()
        u[pad_id] = 0.0
        u = u / u.sum()  # a distribution over the classes other than <pad>
    else:  # the mistake: normalized first, <pad> zeroed after, its share lost
        u = u / u.sum()
        u = u.clone()
        u[pad_id] = 0.0
    q = eps * u + (1 - eps) * torch.nn.functional.one_hot(targets, V).to(log_probs.dtype)  # (B, T, V)
    per_token = -(q * log_probs).sum(-1)  # (B, T)
    real = targets != pad_id
    if pads:
        return per_token.mean()
    if per_sentence:
        return ((per_token * real).sum(1) / real.sum(1)).mean()
    return per_token[real].mean()


def _prior_smoothed_loss(logits, targets, eps, prior, pad_id):
    return _prior_loss(logits, targets, eps, prior, pad_id)


def _psl_uniform(logits, targets, eps, prior, pad_id):
    return _prior_loss(logits, targets, eps, prior, pad_id, use_prior=False)


def _psl_share_lost(logits, targets, eps, prior, pad_id):
    return _prior_loss(logits, targets, eps, prior, pad_id, renormalize=False)


def _psl_counts(logits, targets, eps, prior, pad_id):
    V = logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    u = prior.to(log_probs.dtype).clone()
    u[pad_id] = 0.0  # counts, never divided by their sum
    q = eps * u + (1 - eps) * torch.nn.functional.one_hot(targets, V).to(log_probs.dtype)
    return -(q * log_probs).sum(-1)[targets != pad_id].mean()


def _psl_sentence_means(logits, targets, eps, prior, pad_id):
    return _prior_loss(logits, targets, eps, prior, pad_id, per_sentence=True)


def _psl_padding_counted(logits, targets, eps, prior, pad_id):
    return _prior_loss(logits, targets, eps, prior, pad_id, pads=True)


_counts6 = torch.tensor([50.0, 0.0, 30.0, 10.0, 5.0, 5.0], dtype=torch.float64)  # <pad> counted 50 times

check_prior_smoothed_loss = Checker(
    "prior_smoothed_loss",
    reference=_prior_smoothed_loss,
    cases=[
        Case(
            "no padding, eps = 0: plain cross-entropy",
            (_randn(2, 3, 6), torch.tensor([[4, 2, 5], [3, 3, 2]]), 0.0, _counts6, 0),
        ),
        Case(
            "no padding, eps = 0.1, <pad> counted in the frequencies",
            (_randn(2, 3, 6), torch.tensor([[4, 2, 5], [3, 1, 2]]), 0.1, _counts6, 0),
        ),
        Case(
            "sentences of 4 and 1 tokens, eps = 0.2",
            (_randn(2, 4, 6), torch.tensor([[4, 2, 3, 5], [2, 0, 0, 0]]), 0.2, _counts6, 0),
        ),
        Case(
            "<pad> is id 3, three sentences, eps = 0.3",
            (
                _randn(3, 3, 8),
                torch.tensor([[5, 2, 3], [7, 3, 3], [1, 6, 4]]),
                0.3,
                torch.tensor([4.0, 1.0, 9.0, 20.0, 2.0, 2.0, 6.0, 1.0], dtype=torch.float64),
                3,
            ),
        ),
    ],
    mistakes=[
        Mistake(
            "uniform, not the frequencies",
            "that is Szegedy et al.'s uniform target; here eps is shared in proportion to how often each word occurs: "
            "u = prior / prior.sum(), over the classes other than <pad>.",
            _psl_uniform,
        ),
        Mistake(
            "<pad>'s share lost",
            "normalizing first and zeroing <pad> after leaves a target that sums to less than 1 when <pad> was "
            "counted: zero <pad> first, then divide by the sum of what remains.",
            _psl_share_lost,
        ),
        Mistake(
            "counts, not probabilities",
            "the frequencies are counts: divide them by their sum (without <pad>) so that u sums to 1.",
            _psl_counts,
        ),
        Mistake(
            "mean of the sentences' means",
            "average over the real tokens of the whole batch: "
            "a one-word sentence must not weigh as much as a long one.",
            _psl_sentence_means,
        ),
        Mistake(
            "padding positions counted",
            "positions whose target is <pad> carry no loss: leave them out of the sum and of the count.",
            _psl_padding_counted,
        ),
    ],
    atol=1e-9,
    rtol=1e-7,
    refuses=(
        "attnbook.train.sequence_loss",
        "attnbook.train.smoothed_targets",
        "attnbook.translate.recipe._SmoothedCrossEntropy",
        "d2l.*",
    ),
)


# --- Exercise: one beam search step for a batch, finished hypotheses frozen --------------------------------


def _candidates(log_p, lengths, finished, next_log_probs, eos_id, grow_frozen=False, freeze=True):
    B, k, V = next_log_probs.shape
    cand_lp = log_p[..., None] + next_log_probs  # (B, k, V)
    cand_len = (lengths + 1)[..., None].expand(B, k, V)
    if freeze:
        only_eos = torch.full((V,), float("-inf"), dtype=log_p.dtype)
        only_eos[eos_id] = 0.0
        cand_lp = torch.where(finished[..., None], log_p[..., None] + only_eos, cand_lp)
        if not grow_frozen:
            cand_len = torch.where(finished[..., None], lengths[..., None].expand(B, k, V), cand_len)
    return cand_lp, cand_len


def _select(cand_lp, cand_len, score, finished, eos_id, mark_finished=True):
    B, k, V = cand_lp.shape
    index = score.reshape(B, k * V).topk(k, dim=1).indices  # (B, k), best first
    return _take(cand_lp, cand_len, index, finished, eos_id, mark_finished)


def _take(cand_lp, cand_len, index, finished, eos_id, mark_finished=True):
    """The candidates at ``index (B, k)``, positions in each sentence's ``k * V`` candidates, and their origins."""
    B, k, V = cand_lp.shape
    origin, token = index // V, index % V
    new_finished = finished.gather(1, origin)
    if mark_finished:
        new_finished = new_finished | (token == eos_id)
    return (
        cand_lp.reshape(B, -1).gather(1, index),
        cand_len.reshape(B, -1).gather(1, index),
        new_finished,
        origin,
        token,
    )


def _penalty(lengths, alpha, dtype):
    return ((5 + lengths.to(dtype)) / 6) ** alpha


def _beam_step(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    cand_lp, cand_len = _candidates(log_p, lengths, finished, next_log_probs, eos_id)
    return _select(cand_lp, cand_len, cand_lp / _penalty(cand_len, alpha, cand_lp.dtype), finished, eos_id)


def _bs_no_penalty(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    cand_lp, cand_len = _candidates(log_p, lengths, finished, next_log_probs, eos_id)
    return _select(cand_lp, cand_len, cand_lp, finished, eos_id)


def _bs_penalty_multiplied(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    cand_lp, cand_len = _candidates(log_p, lengths, finished, next_log_probs, eos_id)
    return _select(cand_lp, cand_len, cand_lp * _penalty(cand_len, alpha, cand_lp.dtype), finished, eos_id)


def _bs_not_frozen(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    cand_lp, cand_len = _candidates(log_p, lengths, finished, next_log_probs, eos_id, freeze=False)
    return _select(cand_lp, cand_len, cand_lp / _penalty(cand_len, alpha, cand_lp.dtype), finished, eos_id)


def _bs_frozen_grows(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    cand_lp, cand_len = _candidates(log_p, lengths, finished, next_log_probs, eos_id, grow_frozen=True)
    return _select(cand_lp, cand_len, cand_lp / _penalty(cand_len, alpha, cand_lp.dtype), finished, eos_id)


def _bs_eos_not_finishing(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    cand_lp, cand_len = _candidates(log_p, lengths, finished, next_log_probs, eos_id)
    score = cand_lp / _penalty(cand_len, alpha, cand_lp.dtype)
    return _select(cand_lp, cand_len, score, finished, eos_id, mark_finished=False)


def _bs_per_beam(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    cand_lp, cand_len = _candidates(log_p, lengths, finished, next_log_probs, eos_id)
    score = cand_lp / _penalty(cand_len, alpha, cand_lp.dtype)
    best, token = score.max(dim=-1)  # the best extension of each beam, then the k best beams
    origin = best.topk(score.shape[1], dim=1).indices
    return _take(cand_lp, cand_len, origin * score.shape[-1] + token.gather(1, origin), finished, eos_id)


def _bs_swapped(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    new_lp, new_len, new_fin, origin, token = _beam_step(log_p, lengths, finished, next_log_probs, alpha, eos_id)
    return new_lp, new_len, new_fin, token, origin


def _beam_case(name, B, k, V, finished, lengths, alpha, sharp=2.0):
    log_p = -(_randn(B, k).abs() * 2 + 0.5)
    next_log_probs = torch.log_softmax(sharp * _randn(B, k, V), dim=-1)
    return Case(name, (log_p, torch.tensor(lengths), torch.tensor(finished), next_log_probs, alpha))


check_beam_step = Checker(
    "beam_step",
    reference=_beam_step,
    cases=[
        _beam_case("one sentence, 2 live beams, 5 tokens, alpha 0.6", 1, 2, 5, [[False, False]], [[3, 3]], 0.6),
        _beam_case(
            "two sentences, 3 beams, one finished 4-token hypothesis, alpha 1.0",
            2,
            3,
            6,
            [[True, False, False], [False, False, False]],
            [[4, 7, 7], [7, 7, 7]],
            1.0,
        ),
        _beam_case(
            "two sentences, 2 beams, finished hypotheses in both, alpha 2.0",
            2,
            2,
            7,
            [[False, True], [True, False]],
            [[9, 3], [2, 9]],
            2.0,
            sharp=3.0,
        ),
        _beam_case(
            "three sentences, 4 beams, 8 tokens, alpha 0.6",
            3,
            4,
            8,
            [[False, True, False, False], [False] * 4, [True, False, True, False]],
            [[6, 2, 6, 6], [6, 6, 6, 6], [3, 6, 5, 6]],
            0.6,
            sharp=3.0,
        ),
    ],
    mistakes=[
        Mistake(
            "finished hypotheses extended",
            "a hypothesis that has written <eos> is frozen: its only candidate is itself (one more <eos> with log "
            "probability 0, its length unchanged); every other token after <eos> must get -inf.",
            _bs_not_frozen,
        ),
        Mistake(
            "a frozen hypothesis grows",
            "a frozen hypothesis keeps its length: the repeated <eos> is not a token of the translation, and counting "
            "it would change its length penalty at every step.",
            _bs_frozen_grows,
        ),
        Mistake(
            "ranked by log p alone",
            "finished and live hypotheses of different lengths compete in the same beam, so rank every candidate by "
            "log p / ((5 + length) / 6) ** alpha, not by log p.",
            _bs_no_penalty,
        ),
        Mistake(
            "length penalty multiplied",
            "divide log p by lp(Y): log-probabilities are negative, so dividing by a number that grows with the length "
            "favours longer hypotheses; multiplying punishes them.",
            _bs_penalty_multiplied,
        ),
        Mistake(
            "<eos> does not finish",
            "a candidate whose token is <eos> is finished from now on: "
            "finished = finished[origin] | (token == eos_id).",
            _bs_eos_not_finishing,
        ),
        Mistake(
            "best extension of each beam",
            "rank all k * V candidates of a sentence together: the best two may extend the same beam. Flatten "
            "(B, k, V) to (B, k * V) before topk.",
            _bs_per_beam,
        ),
        Mistake(
            "origin and token swapped",
            "in the flattened index i of a sentence's k * V candidates, the beam is i // V and the token i % V.",
            _bs_swapped,
        ),
    ],
    atol=1e-9,
    rtol=1e-7,
    refuses=("attnbook.decode.beam_search", "attnbook.decode.Hypothesis", "attnbook.decode.BeamDecoded", "d2l.*"),
)
