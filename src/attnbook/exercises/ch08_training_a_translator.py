"""Checkers for chapter 8, *Training a translator* (``notebooks/08_training_a_translator.ipynb``)."""

from __future__ import annotations

import math

import torch

from . import FUSED_ATTENTION, Case, Checker, Mistake, seeded_randn

__all__ = [
    "check_noam_lambda",
    "check_prior_smoothed_loss",
    "check_beam_step",
    "check_cross_attention_steps",
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


# --- Exercise: a cross-attention cache ------------------------------------------------------------------


def _split(x, num_heads):
    B, S, d = x.shape
    return x.reshape(B, S, num_heads, d // num_heads).transpose(1, 2)  # (B, h, S, d_k)


def _steps(y, src_padding_mask, q_proj, keys, values, scale, mask=True, softmax_dim=-1):
    """Attend from each target position in turn with the cached keys and values; merge the heads."""
    B, T, d = y.shape
    outputs = []
    for t in range(T):
        q = _split(q_proj(y[:, t : t + 1]), keys.shape[1])  # (B, h, 1, d_k)
        scores = q @ keys.transpose(-2, -1) / scale  # (B, h, 1, S)
        if mask:
            scores = scores.masked_fill(src_padding_mask[:, None, None, :], float("-inf"))
        weights = torch.nan_to_num(torch.softmax(scores, dim=softmax_dim))
        outputs.append((weights @ values).transpose(1, 2).reshape(B, 1, d))
    return torch.cat(outputs, dim=1)


def _cross_attention_steps(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    keys, values = _split(memory @ w_k + b_k, num_heads), _split(memory @ w_v + b_v, num_heads)  # once
    return _steps(y, src_padding_mask, lambda x: x @ w_q + b_q, keys, values, math.sqrt(keys.shape[-1]))


def _cas_no_transpose(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    B, S, d = memory.shape
    shape = (B, num_heads, S, d // num_heads)
    keys, values = (memory @ w_k + b_k).reshape(shape), (memory @ w_v + b_v).reshape(shape)
    return _steps(y, src_padding_mask, lambda x: x @ w_q + b_q, keys, values, math.sqrt(keys.shape[-1]))


def _cas_no_bias(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    keys, values = _split(memory @ w_k, num_heads), _split(memory @ w_v, num_heads)
    return _steps(y, src_padding_mask, lambda x: x @ w_q, keys, values, math.sqrt(keys.shape[-1]))


def _cas_values_with_w_k(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    keys = _split(memory @ w_k + b_k, num_heads)
    return _steps(y, src_padding_mask, lambda x: x @ w_q + b_q, keys, keys, math.sqrt(keys.shape[-1]))


def _cas_scaled_by_d(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    keys, values = _split(memory @ w_k + b_k, num_heads), _split(memory @ w_v + b_v, num_heads)
    return _steps(y, src_padding_mask, lambda x: x @ w_q + b_q, keys, values, math.sqrt(memory.shape[-1]))


def _cas_no_mask(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    keys, values = _split(memory @ w_k + b_k, num_heads), _split(memory @ w_v + b_v, num_heads)
    return _steps(y, src_padding_mask, lambda x: x @ w_q + b_q, keys, values, math.sqrt(keys.shape[-1]), mask=False)


def _cas_softmax_over_heads(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    keys, values = _split(memory @ w_k + b_k, num_heads), _split(memory @ w_v + b_v, num_heads)
    return _steps(y, src_padding_mask, lambda x: x @ w_q + b_q, keys, values, math.sqrt(keys.shape[-1]), softmax_dim=1)


def _cas_case(name, B, T, S, d, h, lengths):
    src_padding_mask = torch.arange(S)[None, :] >= torch.tensor(lengths)[:, None]
    weights = [_randn(d, d) if i % 2 == 0 else _randn(d) for i in range(6)]
    return Case(name, (_randn(B, T, d), _randn(B, S, d), src_padding_mask, *weights, h))


def _meets(labels: list[set], data: str, weights: set[str]) -> bool:
    """Whether an operation brings ``data`` (not yet projected) together with one of ``weights`` (not yet applied
    to it): the work of a projection, be it a matrix product, an einsum, or a multiply then a sum."""
    return any(data in a and not a & weights for a in labels) and any(a & weights and data not in a for a in labels)


def _products(fn, T):
    """How many projections of the memory, and how many of the target, ``fn`` computes on a case with ``T``
    target positions: every tensor is labelled with the inputs it was computed from (memory, y, the weights), the
    labels follow each operation, and an operation that first brings the memory and ``w_k`` or ``w_v`` (or the
    target and ``w_q``) together counts as one projection, whatever operation it is."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    case = _cas_case("T positions", 2, T, 4, 4, 2, [4, 3])
    y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, h = case.args
    labels = {id(t): {name} for t, name in [(y, "y"), (memory, "memory"), (w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v")]}
    kept = [y, memory, w_q, w_k, w_v]  # alive, so that no id is reused
    counts = {"memory": 0, "target": 0}

    class Labels(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            inputs = [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)]
            found = [labels.get(id(t), set()) for t in inputs]
            seen = set().union(*found) if found else set()
            if _meets(found, "memory", {"w_k", "w_v"}):
                counts["memory"] += 1
            if _meets(found, "y", {"w_q"}):
                counts["target"] += 1
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    labels[id(t)] = labels.get(id(t), set()) | seen
                    kept.append(t)
            return out

    with torch.no_grad(), Labels():
        fn(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, h)
    return counts


_NO_CACHE = (
    "the keys and values are computed again at every step. Compute them once, before the loop over the target "
    "positions, and reuse them: that is the cache."
)
_ALL_AT_ONCE = (
    "all the queries were projected at once, as in training. A decoder meets one position at a time: project "
    "the query of position t inside the loop over t."
)


def _uses_its_cache(fn):
    """The memory's keys and values are projected once, whatever the target length; the queries one at a time."""
    few, many = _products(fn, 2), _products(fn, 6)
    if many["memory"] > few["memory"]:
        return (
            "keys and values projected at every step",
            f"the memory was projected {few['memory']} times for 2 target positions and {many['memory']} times "
            f"for 6: {_NO_CACHE}",
        )
    if many["target"] <= few["target"]:
        times = f"{few['target']} time{'s' if few['target'] != 1 else ''}"
        if many["target"] != few["target"]:
            times += f" for 2 positions and {many['target']} for 6"
        else:
            times += ", whether it had 2 positions or 6"
        return ("the whole target at once", f"the target's queries were projected {times}: {_ALL_AT_ONCE}")
    return None


def _cas_no_cache(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    """Right numbers, but the keys and values projected again at every step."""
    outs = []
    for t in range(y.shape[1]):
        keys, values = _split(memory @ w_k + b_k, num_heads), _split(memory @ w_v + b_v, num_heads)
        outs.append(
            _steps(y[:, t : t + 1], src_padding_mask, lambda x: x @ w_q + b_q, keys, values, math.sqrt(keys.shape[-1]))
        )
    return torch.cat(outs, dim=1)


def _cas_all_at_once(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    """Right numbers, but every query projected at once, as in training."""
    keys, values = _split(memory @ w_k + b_k, num_heads), _split(memory @ w_v + b_v, num_heads)
    q = _split(y @ w_q + b_q, num_heads)  # (B, h, T, d_k)
    scores = (q @ keys.transpose(-2, -1) / math.sqrt(keys.shape[-1])).masked_fill(
        src_padding_mask[:, None, None], float("-inf")
    )
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
    B, T, d = y.shape
    return (weights @ values).transpose(1, 2).reshape(B, T, d)


check_cross_attention_steps = Checker(
    "cross_attention_steps",
    reference=_cross_attention_steps,
    cases=[
        _cas_case("one sentence, 2 target positions, no padding (S=3, d=4, 2 heads)", 1, 2, 3, 4, 2, [3]),
        _cas_case("two sentences, the second padded (T=3, S=5, d=6, 3 heads)", 2, 3, 5, 6, 3, [5, 2]),
        _cas_case("three sentences (T=2, S=4, d=8, 4 heads)", 3, 2, 4, 8, 4, [1, 4, 3]),
    ],
    mistakes=[
        Mistake(
            "heads split without a transpose",
            "reshape (B, S, d) to (B, S, h, d_k) so that head j gets features j*d_k .. (j+1)*d_k - 1 of every "
            "position, THEN transpose to (B, h, S, d_k); reshaping straight to (B, h, S, d_k) mixes positions.",
            _cas_no_transpose,
        ),
        Mistake(
            "biases forgotten", "the projections are x @ w + b, for the queries, the keys and the values.", _cas_no_bias
        ),
        Mistake(
            "values projected with w_k",
            "keys and values have their own matrices: values = memory @ w_v + b_v.",
            _cas_values_with_w_k,
        ),
        Mistake(
            "scaled by sqrt(d_model)",
            "each head's scores are divided by sqrt(d_k), the width of one head, not by sqrt(d_model).",
            _cas_scaled_by_d,
        ),
        Mistake(
            "source padding not masked",
            "set the scores of padded source keys to -inf before the softmax (src_padding_mask is True there), "
            "for every head: scores.masked_fill(src_padding_mask[:, None, None, :], -inf).",
            _cas_no_mask,
        ),
        Mistake(
            "softmax over the heads",
            "each head's weights for a query sum to 1 over the source keys: softmax over the last axis.",
            _cas_softmax_over_heads,
        ),
        Mistake("keys and values projected at every step", _NO_CACHE, _cas_no_cache),
        Mistake("the whole target at once", _ALL_AT_ONCE, _cas_all_at_once),
    ],
    atol=1e-9,
    rtol=1e-7,
    refuses=FUSED_ATTENTION,
    requirements=[_uses_its_cache],
)
