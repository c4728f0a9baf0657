"""Chapter 8's cross-attention cache exercise (``notebooks/08_training_a_translator.ipynb``).

Its checker measures the work the learner's decoder does, not only its numbers (:mod:`.measuring`), which makes it
the longest of the chapter's: it has this module to itself, and :mod:`.ch08_training_a_translator` exports it with
the chapter's other checkers.
"""

from __future__ import annotations

import math

import torch

from . import FUSED_ATTENTION, Case, Checker, Mistake, seeded_randn
from .measuring import count_projections
from .wording import Template, say

__all__ = ["check_cross_attention_steps"]

_randn = seeded_randn(84, torch.float64)


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


_NO_CACHE = (
    "the keys and values are computed again at every step. Compute them once, before the loop over the target "
    "positions, and reuse them: that is the cache."
)
_ALL_AT_ONCE = (
    "all the queries were projected at once, as in training. A decoder meets one position at a time: project "
    "the query of position t inside the loop over t."
)


def _projections(fn, T):
    """How many projections of the memory, and how many of the target, ``fn`` computes with ``T`` target positions."""
    case = _cas_case("T positions", 2, T, 4, 4, 2, [4, 3])
    y, memory, _, w_q, _, w_k, _, w_v, *_ = case.args
    return count_projections(
        fn,
        case.args,
        {"y": y, "memory": memory, "w_q": w_q, "w_k": w_k, "w_v": w_v},
        {"memory": ("memory", {"w_k", "w_v"}), "target": ("y", {"w_q"})},
    )


_MEMORY_AGAIN = Template(
    "the memory was projected {few} times for 2 target positions and {many} times for 6: {why}",
    "requirement",
    why="explanation",
)
_TARGET_FEWER = Template(
    "the target's queries were projected {times} for 2 positions and {many} for 6: {why}",
    "requirement",
    times="times",
    why="explanation",
)
_TARGET_SAME = Template(
    "the target's queries were projected {times}, whether it had 2 positions or 6: {why}",
    "requirement",
    times="times",
    why="explanation",
)
_ONE_TIME = Template("1 time", "times")
_TIMES = Template("{count} times", "times")


def _uses_its_cache(fn):
    """The memory's keys and values are projected once, whatever the target length; the queries one at a time."""
    few, many = _projections(fn, 2), _projections(fn, 6)
    if many["memory"] > few["memory"]:
        memory = say(_MEMORY_AGAIN, few=few["memory"], many=many["memory"], why=_NO_CACHE)
        return ("keys and values projected at every step", memory)
    if many["target"] <= few["target"]:
        times = _ONE_TIME if few["target"] == 1 else _TIMES.format(count=few["target"])
        fewer = many["target"] != few["target"]
        said = dict(times=times, many=many["target"], why=_ALL_AT_ONCE)
        return ("the whole target at once", say(_TARGET_FEWER if fewer else _TARGET_SAME, **said))
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
