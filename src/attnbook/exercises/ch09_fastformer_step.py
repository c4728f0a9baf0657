"""Chapter 9's exercise on the causal Fastformer layer run one token at a time (``notebooks/09_fastformer.ipynb``).

Its checker runs a step function over whole sequences and measures the state it keeps (:mod:`.measuring`), which
makes it the longest of the chapter's: it has this module to itself, and :mod:`.ch09_fastformer` exports it with the
chapter's other checkers (and shares its tolerance and what it refuses).
"""

from __future__ import annotations

import copy
import math

import torch

from . import Case, Checker, Mistake, seeded_randn
from .measuring import state_size
from .wording import Template, say

__all__ = ["check_fastformer_step"]

_randn = seeded_randn(93, torch.float64)
#: The chapter's checks compute in float64: one tolerance for all of them that compare values.
_FLOAT64 = {"atol": 1e-9, "rtol": 1e-8}
#: What they refuse: the packaged Fastformer (and d2l's).
_FASTFORMER = ("attnbook.fastformer.*", "d2l.*")


# --- Exercise: the causal layer, one token at a time ------------------------------------------------


class _RunningPool:
    """One running softmax pooling per head: the maximum ``m``, ``ℓ = Σ e^{s-m}`` and ``a = Σ e^{s-m} v``."""

    @classmethod
    def update(cls, state, scores, values, num_heads):
        """``scores`` ``(B, H)`` and ``values`` ``(B, d)`` of the new token; returns (pooled ``(B, d)``, new state)."""
        B, d = values.shape
        state = cls.accumulate(state, scores, values.reshape(B, num_heads, d // num_heads))
        total, acc = state[-2:]
        return (acc / total[..., None]).reshape(B, d), state

    @staticmethod
    def accumulate(state, scores, v):
        """The state after the new token's ``scores`` ``(B, H)`` and values per head ``v`` ``(B, H, d / H)``."""
        if state is None:
            return scores, torch.ones_like(scores), v
        m_old, total, acc = state
        m = torch.maximum(m_old, scores)
        rescale, w = torch.exp(m_old - m), torch.exp(scores - m)
        return m, total * rescale + w, acc * rescale[..., None] + w[..., None] * v


def _fastformer_step(layer, x_t, state, *, scale_by=None, previous_query=False, add_query=True, pool=_RunningPool):
    H = layer.num_heads
    scale = math.sqrt(layer.head_dim if scale_by is None else scale_by)
    query_state, key_state, last_q_global = (None, None, None) if state is None else state
    q = layer.query(x_t)  # (B, d)
    q_global, query_state = pool.update(query_state, layer.query_att(q) / scale, q, H)
    mixer = q_global
    if previous_query:  # the mistake: the global query as it stood one step before
        mixer = torch.zeros_like(q_global) if last_q_global is None else last_q_global
    p = layer.key(x_t) * mixer
    k_global, key_state = pool.update(key_state, layer.key_att(p) / scale, p, H)
    out = layer.transform(k_global * q) + (q if add_query else 0)
    return out, (query_state, key_state, q_global)


def _fs_reference(layer, x_t, state):
    return _fastformer_step(layer, x_t, state)


def _fs_whole_prefix(layer, x_t, state):
    seen = x_t[:, None] if state is None else torch.cat([state, x_t[:, None]], dim=1)
    inner = None
    for t in range(seen.shape[1]):  # the whole prefix pooled again at every step
        out, inner = _fastformer_step(layer, seen[:, t], inner)
    return out, seen


class _OverflowingPool(_RunningPool):
    @staticmethod
    def accumulate(state, scores, v):
        w = torch.exp(scores)  # no running maximum: inf above ~709 in float64
        return (w, w[..., None] * v) if state is None else (state[0] + w, state[1] + w[..., None] * v)


class _UnrescaledPool(_RunningPool):
    @staticmethod
    def accumulate(state, scores, v):
        if state is None:  # the first token: as the running pool
            return _RunningPool.accumulate(state, scores, v)
        m_old, total, acc = state
        m = torch.maximum(m_old, scores)
        w = torch.exp(scores - m)  # the old sums keep their old reference: they are not rescaled
        return m, total + w, acc + w[..., None] * v


def _fs_overflows(layer, x_t, state):
    return _fastformer_step(layer, x_t, state, pool=_OverflowingPool)


def _fs_unrescaled(layer, x_t, state):
    return _fastformer_step(layer, x_t, state, pool=_UnrescaledPool)


def _fs_previous_query(layer, x_t, state):
    return _fastformer_step(layer, x_t, state, previous_query=True)


def _fs_no_query(layer, x_t, state):
    return _fastformer_step(layer, x_t, state, add_query=False)


def _fs_scale_d(layer, x_t, state):
    return _fastformer_step(layer, x_t, state, scale_by=layer.d_model)


#: The parts of the result the checker compares, and the error of a step that returns no pair.
_OUTPUTS = Template("outputs", "key")
_GROWS = Template("state grows with the length", "key")
_NO_PAIR = Template("{name} must return a pair (output, state), got {kind}", "error")


class _StepChecker(Checker):
    """Runs a step function ``fn(layer, x_t, state) -> (output_t, state)`` over a whole sequence.

    The result compared is the outputs of every step, stacked ``(B, N, d)``, and
    whether the state grew with the length (a recurrent layer's must not).
    """

    def _run(self, fn, case, record=None):
        layer, x = copy.deepcopy(case.args)
        state, outputs, sizes = None, [], []
        with torch.no_grad():
            for t in range(x.shape[1]):
                x_t = x[:, t]
                with self._watch(record):
                    result = fn(layer, x_t, state)
                if result is None:
                    return None
                if not isinstance(result, tuple) or len(result) != 2:
                    raise TypeError(say(_NO_PAIR, name=self.name, kind=type(result).__name__))
                out, state = result
                outputs.append(out)
                sizes.append(state_size((state, fn, layer)))  # what the state holds, and whatever else may hold it
        return {say(_OUTPUTS): torch.stack(outputs, dim=1), say(_GROWS): sizes[-1] > sizes[1]}


def _layer(d, H, seed, att_scale=1.0):
    from attnbook.fastformer import FastSelfAttention

    torch.manual_seed(seed)
    layer = FastSelfAttention(d, H).double()
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(_randn(*p.shape, scale=0.5))
        layer.query_att.weight.mul_(att_scale)
        layer.key_att.weight.mul_(att_scale)
    return layer


check_fastformer_step = _StepChecker(
    "fastformer_step",
    reference=_fs_reference,
    cases=[
        Case("one head, d=4, B=1, 5 tokens", (_layer(4, 1, 0), _randn(1, 5, 4))),
        Case("3 heads, d=6, B=2, 7 tokens", (_layer(6, 3, 1), _randn(2, 7, 6))),
        Case(
            "scores of several thousand (exp overflows above 709)", (_layer(6, 2, 2, att_scale=800.0), _randn(2, 6, 6))
        ),
    ],
    mistakes=[
        Mistake(
            "keeps the whole prefix",
            "a recurrent layer carries a state of fixed size: per head and per pooling, the running maximum of the "
            "scores, the running sum of their exponentials and the running weighted sum of the pooled features. "
            "Keeping the tokens seen so far and pooling them again at every step is the quadratic cost again.",
            _fs_whole_prefix,
        ),
        Mistake(
            "mixes the key with the previous global query",
            "p_t = k_t * q_global_t, with the global query that already includes token t (the causal layer pools "
            "positions <= t, itself included): update the query's pooling first, then mix.",
            _fs_previous_query,
        ),
        Mistake(
            "no rescaling when the maximum grows",
            "when the running maximum grows from m_old to m, the sums kept so far are referenced to m_old: multiply "
            "both by exp(m_old - m) before adding the new token's exp(s - m).",
            _fs_unrescaled,
        ),
        Mistake(
            "+ q forgotten",
            "the output is transform(k_global * q_t) + q_t: the token's own query is added back.",
            _fs_no_query,
        ),
        Mistake(
            "scaled by sqrt(d)",
            "the authors' code divides the scores by sqrt(d_h), the head width (layer.head_dim), not by sqrt(d) "
            "as the paper's equations write.",
            _fs_scale_d,
        ),
        Mistake(
            "overflows",
            "exp of a score above ~709 is inf in float64 (88 in float32), and inf / inf is NaN: keep the running "
            "maximum m of the scores and store the sums as sums of exp(s - m).",
            _fs_overflows,
        ),
    ],
    **_FLOAT64,
    refuses=_FASTFORMER,
)
