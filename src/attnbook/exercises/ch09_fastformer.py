"""Checkers for chapter 9, *Fastformer* (``notebooks/09_fastformer.ipynb``)."""

from __future__ import annotations

import copy
import functools
import math
import types

import numpy as np
import torch

from . import NO_MODEL, Case, Checker, Mistake, seeded_randn

__all__ = [
    "check_global_query",
    "check_global_keys_packed",
    "check_fastformer_step",
    "check_fastformer_parameter_count",
    "check_step_multiplications",
]

_randn = seeded_randn(9, torch.float64)
#: The chapter's checks compute in float64: one tolerance for all of them that compare values.
_FLOAT64 = {"atol": 1e-9, "rtol": 1e-8}
#: What they refuse: the packaged Fastformer (and d2l's).
_FASTFORMER = ("attnbook.fastformer.*", "d2l.*")


def _heads(x, num_heads):
    """``(B, N, d)`` -> ``(B, N, H, d_h)``: head ``h`` owns features ``h d_h .. (h + 1) d_h - 1``."""
    B, N, d = x.shape
    return x.reshape(B, N, num_heads, d // num_heads)


# --- Exercise: the global query ------------------------------------------------------------------


def _global_query(q, scores, num_heads):
    B, N, d = q.shape
    weights = torch.softmax(scores, dim=1)  # over the positions, one softmax per head
    return (weights[..., None] * _heads(q, num_heads)).sum(dim=1).reshape(B, d)


def _gq_softmax_over_heads(q, scores, num_heads):
    B, N, d = q.shape
    weights = torch.softmax(scores, dim=-1)
    return (weights[..., None] * _heads(q, num_heads)).sum(dim=1).reshape(B, d)


def _gq_heads_interleaved(q, scores, num_heads):
    B, N, d = q.shape
    weights = torch.softmax(scores, dim=1)
    return (weights[:, :, None, :] * q.reshape(B, N, d // num_heads, num_heads)).sum(dim=1).reshape(B, d)


def _gq_one_weight_per_position(q, scores, num_heads):
    weights = torch.softmax(scores.mean(dim=-1), dim=1)  # (B, N): one N-vector of weights for every feature
    return (weights[..., None] * q).sum(dim=1)


check_global_query = Checker(
    "global_query",
    reference=_global_query,
    cases=[
        Case("B=1, N=3, d=4, 2 heads", (_randn(1, 3, 4), _randn(1, 3, 2), 2)),
        Case("B=2, N=5, d=6, 3 heads", (_randn(2, 5, 6), _randn(2, 5, 3), 3)),
        Case("one head", (_randn(2, 4, 3), _randn(2, 4, 1), 1)),
    ],
    mistakes=[
        Mistake(
            "softmax over the heads",
            "alpha is a distribution over the N positions, one per head: take the softmax over dim=1 of the "
            "(B, N, H) scores, not over the heads.",
            _gq_softmax_over_heads,
        ),
        Mistake(
            "heads interleaved",
            "head h owns the consecutive features h*d_h .. (h+1)*d_h - 1: "
            "view q as (B, N, H, d_h), heads before features.",
            _gq_heads_interleaved,
        ),
        Mistake(
            "one weight per position for all heads",
            "each head has its own weights: pool head h's slice of q "
            "with head h's softmax, not with one shared set of weights.",
            _gq_one_weight_per_position,
        ),
    ],
    **_FLOAT64,
    refuses=_FASTFORMER,
)


# --- Exercise: the global keys of sentences packed into one row --------------------------------------------------


def _packed_keys(k, q_global, weight, bias, num_heads, segments, own_query=True, by_segment=True, zero_empty=True):
    B, N, d = k.shape
    G = q_global.shape[1]
    member = segments[..., None] == torch.arange(1, G + 1)  # (B, N, G): position i belongs to sentence g
    q_at = member.to(k.dtype) @ q_global if own_query else q_global[:, :1].expand(-1, N, -1)  # (B, N, d)
    if not by_segment:  # the mistake: every sentence pools the whole row (its real positions)
        member = (segments > 0)[..., None].expand(-1, -1, G)
    p = k * q_at  # p_i = k_i ⊙ q̄ of its own sentence
    scores = (p @ weight.T + bias) / math.sqrt(d // num_heads)  # (B, N, H)
    scores = scores[:, :, None, :].masked_fill(~member[..., None], -math.inf)  # (B, N, G, H)
    beta = torch.softmax(scores, dim=1)
    if zero_empty:
        beta = beta.nan_to_num(0.0)  # a sentence with no position: 0/0 -> 0
    pooled = torch.einsum("bngh,bnhe->bghe", beta, p.reshape(B, N, num_heads, d // num_heads))
    return pooled.reshape(B, G, d)


def _global_keys_packed(k, q_global, weight, bias, num_heads, segments):
    return _packed_keys(k, q_global, weight, bias, num_heads, segments)


def _gkp_whole_row(k, q_global, weight, bias, num_heads, segments):
    return _packed_keys(k, q_global, weight, bias, num_heads, segments, by_segment=False)


def _gkp_first_query(k, q_global, weight, bias, num_heads, segments):
    return _packed_keys(k, q_global, weight, bias, num_heads, segments, own_query=False)


def _gkp_nan(k, q_global, weight, bias, num_heads, segments):
    return _packed_keys(k, q_global, weight, bias, num_heads, segments, zero_empty=False)


def _unscaled_packed(k, q_global, weight, bias, num_heads, segments):
    d_h = k.shape[-1] // num_heads
    return _packed_keys(k, q_global, weight * math.sqrt(d_h), bias * math.sqrt(d_h), num_heads, segments)


def _gkp_case(name, segments, G, d=6, H=3):
    segments = torch.tensor(segments)
    B, N = segments.shape
    return Case(
        name,
        (_randn(B, N, d), _randn(B, G, d), _randn(H, d, scale=0.6), _randn(H, scale=0.3), H, segments),
    )


check_global_keys_packed = Checker(
    "global_keys_packed",
    reference=_global_keys_packed,
    cases=[
        _gkp_case("one row, two sentences of 3 and 2 tokens, 1 padding", [[1, 1, 1, 2, 2, 0]], 2),
        _gkp_case("two rows, three sentences each, padding at the end", [[1, 1, 2, 3, 3, 3], [1, 2, 2, 2, 3, 0]], 3),
        _gkp_case(
            "a row with one sentence and a sentence slot left empty", [[1, 1, 1, 1, 0, 0], [1, 2, 2, 0, 0, 0]], 2
        ),
    ],
    mistakes=[
        Mistake(
            "one pooling over the whole row",
            "sentences packed into one row must not read each other: sentence g's softmax runs over ITS positions "
            "only (segments == g), so mask the scores per sentence, (B, N, G, H), before the softmax over N.",
            _gkp_whole_row,
        ),
        Mistake(
            "mixed with the first sentence's global query",
            "each position is mixed with the global query of its own sentence: p_i = k_i ⊙ q̄_g for g = segments[i] "
            "(a one-hot of the segments times q_global picks it).",
            _gkp_first_query,
        ),
        Mistake(
            "NaN for an empty sentence",
            "a sentence slot with no position has nothing to pool: a softmax over only -inf is 0/0 = NaN; "
            "its global key is zero (nan_to_num(0.0) after the softmax, or a finite fill and zeroed weights).",
            _gkp_nan,
        ),
        Mistake(
            "scores not scaled",
            "divide the scores by sqrt(d_h), the head width, as in the layer (key_att(p) / sqrt(d_h)).",
            _unscaled_packed,
        ),
    ],
    **_FLOAT64,
    refuses=_FASTFORMER,
)


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


def _numel(state, seen=None) -> int:
    """How many numbers ``state`` holds, whatever holds them: tensors, NumPy arrays, numbers, containers, objects
    (``SimpleNamespace``, dataclasses, classes with ``__slots__``, and the attributes of their classes), classes,
    ``functools.partial`` s, and functions (their closures, defaults and the data in the globals they read).

    Every number counts each time it is held: a step counter and ``num_heads`` are two numbers even when they are
    equal (small integers are one object in Python). Other objects count once, however often they are reached.
    """
    seen = set() if seen is None else seen
    if state is None or isinstance(state, (str, bytes, types.ModuleType, types.BuiltinFunctionType)):
        return 0
    if isinstance(state, (bool, int, float, complex, np.generic)):
        return 1
    if id(state) in seen:
        return 0
    seen.add(id(state))
    if isinstance(state, torch.Tensor):
        return state.numel()
    if isinstance(state, np.ndarray):
        return int(state.size) if state.dtype != object else sum(_numel(v, seen) for v in state.flat)
    if isinstance(state, dict) or type(state).__name__ == "mappingproxy":
        return sum(_numel(k, seen) + _numel(v, seen) for k, v in state.items())
    if isinstance(state, (tuple, list, set, frozenset)) or type(state).__name__ == "deque":
        return sum(_numel(v, seen) for v in state)
    if isinstance(state, functools.partial):
        return _numel(state.func, seen) + _numel(state.args, seen) + _numel(state.keywords, seen)
    if isinstance(state, types.MethodType):
        return _numel(state.__func__, seen) + _numel(state.__self__, seen)
    if isinstance(state, types.FunctionType):
        cells = [c.cell_contents for c in (state.__closure__ or ()) if _filled(c) and c.cell_contents is not state]
        data = [state.__globals__.get(name) for name in _names_read(state.__code__)]
        data = [value for value in data if not callable(value) and not isinstance(value, types.ModuleType)]
        return _numel(cells + data, seen) + _numel((state.__defaults__, state.__kwdefaults__), seen)
    if isinstance(state, type):
        return _class_data(state, seen)
    total = _numel(getattr(state, "__dict__", {}), seen) + _class_data(type(state), seen)
    for name in getattr(type(state), "__slots__", ()):
        total += _numel(getattr(state, name, None), seen)
    return total


def _filled(cell) -> bool:
    try:
        return cell.cell_contents is not _EMPTY
    except ValueError:  # an empty cell
        return False


_EMPTY = object()


def _names_read(code) -> set:
    """The global names a function's code (and the code nested in it) reads."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


def _class_data(cls: type, seen: set) -> int:
    """The numbers a learner's class holds in its class attributes (PyTorch's and Python's own classes hold none
    of the learner's)."""
    if cls.__module__ in ("builtins", "types") or cls.__module__.startswith(("torch", "numpy", "collections")):
        return 0
    total = 0
    for klass in cls.__mro__[:-1]:
        for name, value in vars(klass).items():
            if not name.startswith("__") and not callable(value) and not isinstance(value, _DESCRIPTORS):
                total += _numel(value, seen)
    return total


#: Class attributes that are no state: properties, and the member descriptors of ``__slots__``.
_DESCRIPTORS = (property, types.MemberDescriptorType, types.GetSetDescriptorType, staticmethod, classmethod)


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
                    raise TypeError(f"{self.name} must return a pair (output, state), got {type(result).__name__}")
                out, state = result
                outputs.append(out)
                sizes.append(_numel((state, fn, layer)))  # what the state holds, and whatever else may hold it
        return {"outputs": torch.stack(outputs, dim=1), "state grows with the length": sizes[-1] > sizes[1]}


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


# --- Exercise: how many parameters? ------------------------------------------------------------------------


def _fastformer_parameter_count(d_model, num_heads, share_value=True):
    count = 3 * (d_model * d_model + d_model) + 2 * (
        d_model * num_heads + num_heads
    )  # query, key, transform; query_att, key_att
    return count if share_value else count + d_model * d_model + d_model


def _pc_no_biases(d_model, num_heads, share_value=True):
    count = 3 * d_model * d_model + 2 * d_model * num_heads
    return count if share_value else count + d_model * d_model


def _pc_slice_scorers(d_model, num_heads, share_value=True):
    count = 3 * (d_model * d_model + d_model) + 2 * (d_model + num_heads)  # each head scoring only its d_h features
    return count if share_value else count + d_model * d_model + d_model


def _pc_value_always(d_model, num_heads, share_value=True):
    return 3 * (d_model * d_model + d_model) + 2 * (d_model * num_heads + num_heads) + d_model * d_model + d_model


check_fastformer_parameter_count = Checker(
    "fastformer_parameter_count",
    reference=_fastformer_parameter_count,
    cases=[
        Case("the authors' d_model=256 and 16 heads", (256, 16)),
        Case("d_model=64, 4 heads", (64, 4)),
        Case("d_model=64, 4 heads, values with their own projection", (64, 4), {"share_value": False}),
    ],
    mistakes=[
        Mistake(
            "biases forgotten",
            "each of the five linear layers has a bias: d for query, key and transform, H for query_att and key_att.",
            _pc_no_biases,
        ),
        Mistake(
            "each head scores only its slice",
            "query_att and key_att are Linear(d, H): each of the H scores reads the whole d-vector, so each layer has "
            "d*H weights, not d_h per head.",
            _pc_slice_scorers,
        ),
        Mistake(
            "a value projection counted",
            "the authors' values reuse the queries' projection (share_value=True): "
            "there is no value layer unless share_value=False.",
            _pc_value_always,
        ),
    ],
    refuses=(NO_MODEL, "attnbook.fastformer.*"),
)


# --- Exercise: what one more token costs, each model with what it keeps -------------------------------------------


def _multiplications(N, d, H):
    """The whole-sequence counts of the chapter's cost section (one forward pass over N tokens)."""
    fastformer = 3 * N * d * d + 2 * N * d * H + 2 * N * d + 2 * N * d
    softmax = 4 * N * d * d + 2 * N * N * d
    linear = 4 * N * d * d + 2 * N * d * (d // H) + N * d
    return fastformer, softmax, linear


def _step_multiplications(N, d, H):
    d_h = d // H
    fastformer = (
        3 * d * d + 2 * d * H + 2 * d + 2 * d
    )  # the new token's projections, scorers, two pooling updates, two ⊙
    softmax = 4 * d * d + 2 * (N + 1) * d  # its four projections; q·k and the weighted sum over the N + 1 cached keys
    linear = 4 * d * d + 2 * d * d_h + d  # its four projections; S_h += φ(k)vᵀ and φ(q)ᵀS_h per head; φ(q)·z
    return fastformer, softmax, linear


def _sm_no_cache(N, d, H):
    fastformer, softmax, linear = _step_multiplications(N, d, H)
    return fastformer, softmax + 2 * N * d * d, linear


def _sm_new_key_forgotten(N, d, H):
    fastformer, softmax, linear = _step_multiplications(N, d, H)
    return fastformer, softmax - 2 * d, linear


def _sm_whole_prefix_pooled(N, d, H):
    fastformer, softmax, linear = _step_multiplications(N, d, H)
    return fastformer + 2 * N * d, softmax, linear


def _sm_whole_layer(N, d, H):
    fastformer, softmax, linear = _step_multiplications(N, d, H)
    return _multiplications(N + 1, d, H)[0], softmax, linear


def _sm_one_big_state(N, d, H):
    fastformer, softmax, linear = _step_multiplications(N, d, H)
    return fastformer, softmax, linear - 2 * d * (d // H) + 2 * d * d


check_step_multiplications = Checker(
    "step_multiplications",
    reference=_step_multiplications,
    cases=[
        Case("N=10 tokens kept, d=4, H=2", (10, 4, 2)),
        Case("N=4096, d=256, H=16", (4096, 256, 16)),
        Case("the first token: N=0, d=8, H=1", (0, 8, 1)),
    ],
    mistakes=[
        Mistake(
            "keys and values projected again",
            "with a cache, softmax attention projects only the new token (four d x d products) and reads the N "
            "cached keys and values: the old ones are never multiplied by W_k or W_v again.",
            _sm_no_cache,
        ),
        Mistake(
            "the new key forgotten",
            "the new token's query reads N + 1 keys, its own included: (N + 1) d for the scores and as many for the "
            "weighted sum.",
            _sm_new_key_forgotten,
        ),
        Mistake(
            "the prefix pooled again",
            "a recurrent Fastformer updates its running sums with the new token only: d multiplications per pooling, "
            "whatever N; pooling the whole prefix again is what its state spares.",
            _sm_whole_prefix_pooled,
        ),
        Mistake(
            "the whole layer run again",
            "that is the cost of a forward pass over all N + 1 tokens; one step projects, scores and pools the new "
            "token only.",
            _sm_whole_layer,
        ),
        Mistake(
            "one d x d state for all heads",
            "each head keeps its own d_h x d_h state: updating and reading them costs 2 d d_h over all heads, "
            "not 2 d^2.",
            _sm_one_big_state,
        ),
    ],
    atol=0,
    rtol=0,
    refuses=(NO_MODEL, "attnbook.fastformer.*"),
)
