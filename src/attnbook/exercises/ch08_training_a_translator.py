"""Checkers for chapter 8, *Training a translator* (``notebooks/08_training_a_translator.ipynb``)."""

from __future__ import annotations

import math

import torch

from . import Case, Checker, Mistake

__all__ = ["check_warmup_rate", "check_smoothed_loss", "check_penalized_score", "check_beam_step", "check_cached_attention_step"]

_gen = torch.Generator().manual_seed(8)


def _randn(*shape):
    return torch.randn(*shape, generator=_gen, dtype=torch.float64)


# --- Exercise: the warm-up schedule ----------------------------------------------------


def _warmup_rate(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def _rate_max(step, d_model, warmup):
    return d_model**-0.5 * max(step**-0.5, step * warmup**-1.5)


def _rate_warmup_half_power(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-0.5)


def _rate_no_width(step, d_model, warmup):
    return min(step**-0.5, step * warmup**-1.5)


check_warmup_rate = Checker(
    "warmup_rate",
    reference=_warmup_rate,
    cases=[
        Case("step 1 of 4000, d_model 512", (1, 512, 4000)),
        Case("the peak, step = warmup", (4000, 512, 4000)),
        Case("long after the peak", (40000, 512, 4000)),
        Case("a small model, mid warm-up", (50, 64, 200)),
    ],
    mistakes=[
        Mistake(
            "max instead of min",
            "the rate is the SMALLER of the two curves: step**-0.5 is huge at the start and step * warmup**-1.5 grows "
            "without end later; min(...) keeps the rising line during warm-up and the decay after it.",
            _rate_max,
        ),
        Mistake(
            "warmup**-0.5",
            "the rising line is step * warmup**-1.5, so that it meets step**-0.5 exactly at step = warmup "
            "(warmup * warmup**-1.5 = warmup**-0.5).",
            _rate_warmup_half_power,
        ),
        Mistake(
            "no d_model factor",
            "multiply by d_model**-0.5: wider models take smaller steps.",
            _rate_no_width,
        ),
    ],
    atol=1e-12,
    rtol=1e-9,
)


# --- Exercise: label-smoothed loss with padding -----------------------------------------


def _smoothed_loss(logits, targets, eps, pad_id):
    V = logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)  # (N, V)
    q = torch.full_like(log_probs, eps / (V - 2))
    q[:, pad_id] = 0.0
    q.scatter_(1, targets[:, None], 1.0 - eps)
    per_token = -(q * log_probs).sum(dim=-1)  # (N,)
    real = targets != pad_id
    return per_token[real].mean()


def _loss_backwards(logits, targets, eps, pad_id):
    V = logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    q = torch.full_like(log_probs, (1.0 - eps) / (V - 2))
    q[:, pad_id] = 0.0
    q.scatter_(1, targets[:, None], eps)
    real = targets != pad_id
    return -(q * log_probs).sum(-1)[real].mean()


def _loss_pytorch_style(logits, targets, eps, pad_id):
    real = targets != pad_id
    return torch.nn.functional.cross_entropy(logits[real], targets[real], label_smoothing=eps)


def _loss_counts_padding(logits, targets, eps, pad_id):
    V = logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    q = torch.full_like(log_probs, eps / (V - 2))
    q[:, pad_id] = 0.0
    q.scatter_(1, targets[:, None], 1.0 - eps)
    return -(q * log_probs).sum(-1).mean()


def _loss_pad_gets_mass(logits, targets, eps, pad_id):
    V = logits.shape[-1]
    log_probs = torch.log_softmax(logits, dim=-1)
    q = torch.full_like(log_probs, eps / (V - 1))
    q.scatter_(1, targets[:, None], 1.0 - eps)
    real = targets != pad_id
    return -(q * log_probs).sum(-1)[real].mean()


_targets = torch.tensor([4, 2, 7, 0, 0, 5])
check_smoothed_loss = Checker(
    "smoothed_loss",
    reference=_smoothed_loss,
    cases=[
        Case("no padding, eps = 0 (plain cross-entropy)", (_randn(3, 6), torch.tensor([4, 2, 5]), 0.0, 0)),
        Case("no padding, eps = 0.1", (_randn(3, 6), torch.tensor([4, 2, 5]), 0.1, 0)),
        Case("two padding positions, eps = 0.1", (_randn(6, 9), _targets, 0.1, 0)),
        Case("<pad> is id 3, eps = 0.3", (_randn(5, 8), torch.tensor([3, 5, 2, 3, 7]), 0.3, 3)),
    ],
    mistakes=[
        Mistake(
            "smoothing backwards",
            "the TRUE class gets 1 - eps and the others share eps (a formula some notes write the other way round); "
            "with eps = 0.1 the right answer gets 0.9.",
            _loss_backwards,
        ),
        Mistake(
            "PyTorch's label_smoothing",
            "F.cross_entropy(label_smoothing=eps) spreads eps over ALL V classes, the true one and <pad> included, so the "
            "true class gets 1 - eps + eps/V; here the true class gets exactly 1 - eps and eps is shared by the V - 2 "
            "classes that are neither the true one nor <pad>.",
            _loss_pytorch_style,
        ),
        Mistake(
            "padding counted",
            "positions whose target is <pad> are not words: leave them out, and average over the real tokens only.",
            _loss_counts_padding,
        ),
        Mistake(
            "<pad> gets mass",
            "<pad> is never a correct next token: give it 0 and share eps over the V - 2 other classes.",
            _loss_pad_gets_mass,
        ),
    ],
    atol=1e-9,
    rtol=1e-7,
)


# --- Exercise: the length penalty ------------------------------------------------------


def _penalized_score(log_probs, lengths, alpha):
    return log_probs / ((5 + lengths) / 6) ** alpha


def _score_multiplied(log_probs, lengths, alpha):
    return log_probs * ((5 + lengths) / 6) ** alpha


def _score_plain_power(log_probs, lengths, alpha):
    return log_probs / lengths**alpha


def _score_forgets_alpha(log_probs, lengths, alpha):
    return log_probs / ((5 + lengths) / 6)


check_penalized_score = Checker(
    "penalized_score",
    reference=_penalized_score,
    cases=[
        Case("alpha = 0: the log-probabilities themselves", (torch.tensor([-1.0, -2.5]), torch.tensor([3.0, 7.0]), 0.0)),
        Case("alpha = 0.6", (torch.tensor([-1.0, -2.5, -4.0]), torch.tensor([1.0, 7.0, 12.0]), 0.6)),
        Case("alpha = 1.5", (torch.tensor([-3.0, -3.0]), torch.tensor([2.0, 9.0]), 1.5)),
    ],
    mistakes=[
        Mistake(
            "multiplied",
            "divide by lp(Y): log-probabilities are negative, so dividing by a number that grows with the length "
            "raises the score of long translations; multiplying would punish them further.",
            _score_multiplied,
        ),
        Mistake(
            "|Y| ** alpha",
            "Wu et al.'s penalty is ((5 + |Y|) / 6) ** alpha: the 5 softens it for short sentences and it is 1 for a "
            "one-token translation; plain |Y| ** alpha is the older length normalization.",
            _score_plain_power,
        ),
        Mistake(
            "alpha ignored",
            "raise ((5 + |Y|) / 6) to the power alpha: alpha = 0 must give the plain log-probabilities.",
            _score_forgets_alpha,
        ),
    ],
)


# --- Exercise: one step of beam search ---------------------------------------------------


def _beam_step(beam_log_probs, next_log_probs, k):
    V = next_log_probs.shape[-1]
    candidates = (beam_log_probs[:, None] + next_log_probs).reshape(-1)  # (k_old * V,)
    top, index = candidates.topk(k)
    return top, index // V, index % V


def _step_per_beam(beam_log_probs, next_log_probs, k):
    best, token = (beam_log_probs[:, None] + next_log_probs).max(dim=-1)  # the best extension of each beam
    top, origin = best.topk(k)
    return top, origin, token[origin]


def _step_forgets_history(beam_log_probs, next_log_probs, k):
    V = next_log_probs.shape[-1]
    top, index = next_log_probs.reshape(-1).topk(k)
    return beam_log_probs[index // V] + top, index // V, index % V


def _step_swapped_indices(beam_log_probs, next_log_probs, k):
    V = next_log_probs.shape[-1]
    top, index = (beam_log_probs[:, None] + next_log_probs).reshape(-1).topk(k)
    return top, index % V, index // V


def _log_softmax_rows(x):
    return torch.log_softmax(x, dim=-1)


check_beam_step = Checker(
    "beam_step",
    reference=_beam_step,
    cases=[
        Case(
            "2 beams, 4 tokens, the best two extensions come from the same beam",
            (torch.tensor([-0.1, -2.0]), torch.log(torch.tensor([[0.5, 0.4, 0.05, 0.05], [0.97, 0.01, 0.01, 0.01]])), 2),
        ),
        Case("3 beams, 7 tokens", (torch.tensor([-0.5, -0.9, -1.2]), _log_softmax_rows(2 * _randn(3, 7)), 3)),
        Case(
            "a strong beam with a flat next distribution against a weak beam with a sharp one",
            (torch.tensor([-0.2, -1.5]), torch.log(torch.tensor([[0.3, 0.3, 0.2, 0.2], [0.01, 0.97, 0.01, 0.01]])), 2),
        ),
    ],
    mistakes=[
        Mistake(
            "best extension of each beam",
            "rank ALL k * V extensions together: the best two may both extend the same beam, and another beam then "
            "drops out. Flatten (k, V) to k * V before topk.",
            _step_per_beam,
        ),
        Mistake(
            "history ignored",
            "add each beam's running log-probability to its next-token log-probabilities BEFORE ranking: a hypothesis "
            "is ranked by log p of the whole prefix, not of its last token.",
            _step_forgets_history,
        ),
        Mistake(
            "origin and token swapped",
            "in the flattened (k * V) index i, the beam is i // V and the token is i % V.",
            _step_swapped_indices,
        ),
    ],
)


# --- Exercise: one step of attention with a key-value cache --------------------------------


def _cached_attention_step(q, k_new, v_new, cache_k, cache_v):
    keys = torch.cat([cache_k, k_new], dim=1)  # (B, t + 1, d)
    values = torch.cat([cache_v, v_new], dim=1)
    weights = torch.softmax(q @ keys.transpose(1, 2) / math.sqrt(q.shape[-1]), dim=-1)  # (B, 1, t + 1)
    return weights @ values, keys, values


def _cache_without_new(q, k_new, v_new, cache_k, cache_v):
    weights = torch.softmax(q @ cache_k.transpose(1, 2) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ cache_v, torch.cat([cache_k, k_new], 1), torch.cat([cache_v, v_new], 1)


def _cache_unscaled(q, k_new, v_new, cache_k, cache_v):
    keys, values = torch.cat([cache_k, k_new], 1), torch.cat([cache_v, v_new], 1)
    return torch.softmax(q @ keys.transpose(1, 2), dim=-1) @ values, keys, values


def _cache_wrong_axis(q, k_new, v_new, cache_k, cache_v):
    keys, values = torch.cat([cache_k, k_new], 1), torch.cat([cache_v, v_new], 1)
    weights = torch.softmax(q @ keys.transpose(1, 2) / math.sqrt(q.shape[-1]), dim=1)
    return weights @ values, keys, values


def _cache_prepends(q, k_new, v_new, cache_k, cache_v):
    keys, values = torch.cat([k_new, cache_k], 1), torch.cat([v_new, cache_v], 1)
    weights = torch.softmax(q @ keys.transpose(1, 2) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ values, keys, values


check_cached_attention_step = Checker(
    "cached_attention_step",
    reference=_cached_attention_step,
    cases=[
        Case("the first step: an empty cache", (_randn(2, 1, 4), _randn(2, 1, 4), _randn(2, 1, 4), _randn(2, 0, 4), _randn(2, 0, 4))),
        Case("B=2, 3 cached positions, d=4", (_randn(2, 1, 4), _randn(2, 1, 4), _randn(2, 1, 4), _randn(2, 3, 4), _randn(2, 3, 4))),
        Case("B=1, 5 cached positions, d=8", (_randn(1, 1, 8), _randn(1, 1, 8), _randn(1, 1, 8), _randn(1, 5, 8), _randn(1, 5, 8))),
    ],
    mistakes=[
        Mistake(
            "new position left out",
            "a decoder position attends to itself too (the causal mask hides only the FUTURE): append the new key and "
            "value to the cache first, then attend over all t + 1 of them.",
            _cache_without_new,
        ),
        Mistake(
            "not scaled",
            "divide the scores by sqrt(d) as in scaled dot-product attention; the cache changes where keys come from, "
            "not how they are scored.",
            _cache_unscaled,
        ),
        Mistake(
            "softmax over the wrong axis",
            "the weights of the one query must sum to 1 over the keys: softmax over the last axis (t + 1), not axis 1.",
            _cache_wrong_axis,
        ),
        Mistake(
            "new key put first",
            "keep the cache in time order: append the new key and value at the END (torch.cat([cache, new], dim=1)), "
            "so that position i of the cache is always token i.",
            _cache_prepends,
        ),
    ],
    atol=1e-9,
    rtol=1e-7,
)
