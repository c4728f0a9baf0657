"""Checkers for chapter 5, *Multi-head attention* (``notebooks/05_multihead_attention.ipynb``)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..attention import MultiHeadAttention
from ..masks import causal_mask, padding_mask
from . import NO_MODEL, PYTORCH_ATTENTION, Case, Checker, Mistake

__all__ = [
    "check_grouped_query_attention",
    "check_gqa_parameter_count",
    "check_attention_with_head_gates",
    "check_new_queries_mask",
]


def _split(x, heads):
    B, T, width = x.shape
    return x.reshape(B, T, heads, width // heads).transpose(1, 2)  # (B, heads, T, d_k)


def _merge(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)


def _attend(q, k, v, scale_width=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale_width or q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


# --- Exercise: grouped-query attention -------------------------------------------------------------------------------


def _gqa(x, W_q, W_k, W_v, num_heads, num_kv_heads):
    q, k, v = _split(x @ W_q, num_heads), _split(x @ W_k, num_kv_heads), _split(x @ W_v, num_kv_heads)
    group = num_heads // num_kv_heads  # query heads per key-value head
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # query head i reads kv head i // group
    return _merge(_attend(q, k, v))


def _gqa_cycled(x, W_q, W_k, W_v, num_heads, num_kv_heads):
    q, k, v = _split(x @ W_q, num_heads), _split(x @ W_k, num_kv_heads), _split(x @ W_v, num_kv_heads)
    group = num_heads // num_kv_heads
    k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)  # head i reads kv head i % num_kv_heads
    return _merge(_attend(q, k, v))


def _gqa_no_transpose(x, W_q, W_k, W_v, num_heads, num_kv_heads):
    def split(t, heads):
        B, T, width = t.shape
        return t.reshape(B, heads, T, width // heads)

    q, k, v = split(x @ W_q, num_heads), split(x @ W_k, num_kv_heads), split(x @ W_v, num_kv_heads)
    group = num_heads // num_kv_heads
    out = _attend(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))
    B, h, T, d_k = out.shape
    return out.reshape(B, T, h * d_k)


def _gqa_model_width(x, W_q, W_k, W_v, num_heads, num_kv_heads):
    q, k, v = _split(x @ W_q, num_heads), _split(x @ W_k, num_kv_heads), _split(x @ W_v, num_kv_heads)
    group = num_heads // num_kv_heads
    out = _attend(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), scale_width=x.shape[-1])
    return _merge(out)


def _gqa_with_torch(x, W_q, W_k, W_v, num_heads, num_kv_heads):
    q, k, v = _split(x @ W_q, num_heads), _split(x @ W_k, num_kv_heads), _split(x @ W_v, num_kv_heads)
    return _merge(F.scaled_dot_product_attention(q, k, v, enable_gqa=True))


def _gqa_inputs(B, T, d, h, g, seed):
    gen = torch.Generator().manual_seed(seed)
    d_k = d // h
    x = torch.randn(B, T, d, generator=gen, dtype=torch.float64)
    W_q = torch.randn(d, d, generator=gen, dtype=torch.float64) / math.sqrt(d)
    W_k = torch.randn(d, g * d_k, generator=gen, dtype=torch.float64) / math.sqrt(d)
    W_v = torch.randn(d, g * d_k, generator=gen, dtype=torch.float64) / math.sqrt(d)
    return x, W_q, W_k, W_v, h, g


check_grouped_query_attention = Checker(
    "grouped_query_attention",
    reference=_gqa,
    cases=[
        Case("4 heads sharing 1 key-value head (multi-query), B=1, T=3, d=8", _gqa_inputs(1, 3, 8, 4, 1, 51)),
        Case("4 heads in 2 groups, B=2, T=4, d=8", _gqa_inputs(2, 4, 8, 4, 2, 52)),
        Case("6 heads in 3 groups, B=2, T=5, d=12", _gqa_inputs(2, 5, 12, 6, 3, 53)),
        Case("2 heads, 2 key-value heads (plain multi-head), B=1, T=4, d=8", _gqa_inputs(1, 4, 8, 2, 2, 54)),
    ],
    mistakes=[
        Mistake(
            "groups taken in turn",
            "the query heads of one group are neighbours: heads 0 .. h/g - 1 share key-value head 0, the next h/g "
            "share head 1, and so on (repeat_interleave along the head axis), not heads 0, g, 2g, ... (repeat).",
            _gqa_cycled,
        ),
        Mistake(
            "reshape without transpose",
            "reshaping (B, T, width) straight to (B, heads, T, d_k) mixes tokens into heads; reshape to "
            "(B, T, heads, d_k) first, then swap axes 1 and 2 (and the reverse when merging).",
            _gqa_no_transpose,
        ),
        Mistake(
            "scaled by the model width",
            "each head compares vectors of width d_k = d / num_heads: divide its scores by sqrt(d_k), not sqrt(d).",
            _gqa_model_width,
        ),
    ],
    atol=1e-9,
    forbidden={"torch.nn.functional.scaled_dot_product_attention": _gqa_with_torch},
    refuses=PYTORCH_ATTENTION,
)


# --- Exercise: the parameters of grouped-query attention ------------------------------------------------------------


def _gqa_parameter_count(d_model, num_heads, num_kv_heads, bias=True):
    kv_width = num_kv_heads * (d_model // num_heads)  # the keys' (and the values') projected width
    weights = 2 * d_model * d_model + 2 * d_model * kv_width  # W_q and W_o, then W_k and W_v
    return weights + ((2 * d_model + 2 * kv_width) if bias else 0)


def _count_as_mha(d_model, num_heads, num_kv_heads, bias=True):
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def _count_kv_once(d_model, num_heads, num_kv_heads, bias=True):
    kv_width = num_kv_heads * (d_model // num_heads)
    return 2 * d_model * d_model + d_model * kv_width + ((2 * d_model + kv_width) if bias else 0)


def _count_no_bias(d_model, num_heads, num_kv_heads, bias=True):
    return _gqa_parameter_count(d_model, num_heads, num_kv_heads, bias=False)


check_gqa_parameter_count = Checker(
    "gqa_parameter_count",
    reference=_gqa_parameter_count,
    cases=[
        Case("d_model=512, 8 heads, 8 key-value heads (multi-head), biases", (512, 8, 8)),
        Case("d_model=512, 8 heads, 2 key-value heads, biases", (512, 8, 2)),
        Case("d_model=64, 8 heads, 1 key-value head, no biases", (64, 8, 1), {"bias": False}),
    ],
    mistakes=[
        Mistake(
            "biases forgotten",
            "with bias=True each projection has a bias as wide as its output: d_model for W_q and W_o, "
            "num_kv_heads * d_k for W_k and for W_v.",
            _count_no_bias,
        ),
        Mistake(
            "counted as multi-head",
            "W_k and W_v project to num_kv_heads * d_k features, with d_k = d_model / num_heads, not to d_model: "
            "that is the saving.",
            _count_as_mha,
        ),
        Mistake(
            "keys and values counted once",
            "the key-value heads are shared among query heads, but keys and values still have a projection each.",
            _count_kv_once,
        ),
    ],
    refuses=(NO_MODEL, "attnbook.attention.*"),
)


# --- Exercise: multi-head attention with a gate on each head -------------------------------------------------------


def _head_gated(x, W_q, W_k, W_v, W_o, num_heads, gates):
    heads = _attend(
        _split(x @ W_q, num_heads), _split(x @ W_k, num_heads), _split(x @ W_v, num_heads)
    )  # (B, h, T, d_k)
    return _merge(heads * gates[None, :, None, None]) @ W_o


def _gated_after_output(x, W_q, W_k, W_v, W_o, num_heads, gates):
    heads = _attend(_split(x @ W_q, num_heads), _split(x @ W_k, num_heads), _split(x @ W_v, num_heads))
    out = _merge(heads) @ W_o
    B, T, d = out.shape
    return (out.reshape(B, T, num_heads, d // num_heads) * gates[:, None]).reshape(B, T, d)


def _gated_scores(x, W_q, W_k, W_v, W_o, num_heads, gates):
    q, k, v = _split(x @ W_q, num_heads), _split(x @ W_k, num_heads), _split(x @ W_v, num_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) * gates[None, :, None, None]
    return _merge(torch.softmax(scores, dim=-1) @ v) @ W_o


def _gated_no_transpose(x, W_q, W_k, W_v, W_o, num_heads, gates):
    def split(t):
        B, T, d = t.shape
        return t.reshape(B, num_heads, T, d // num_heads)

    heads = _attend(split(x @ W_q), split(x @ W_k), split(x @ W_v)) * gates[None, :, None, None]
    B, h, T, d_k = heads.shape
    return heads.reshape(B, T, h * d_k) @ W_o


def _gates_in_output_rows(W_o, gates, num_heads):
    return (
        W_o * gates.repeat_interleave(W_o.shape[0] // num_heads)[:, None]
    )  # row j of W_o reads feature j of the merge


def _gated_with_library(x, W_q, W_k, W_v, W_o, num_heads, gates):
    layer = MultiHeadAttention(x.shape[-1], num_heads, bias=False).to(x.dtype)
    with torch.no_grad():
        layer.in_proj.weight.copy_(torch.cat([W_q, W_k, W_v], dim=1).T)
        layer.out_proj.weight.copy_(_gates_in_output_rows(W_o, gates, num_heads).T)
        return layer(x, x, x)


def _gated_with_torch(x, W_q, W_k, W_v, W_o, num_heads, gates):
    layer = torch.nn.MultiheadAttention(x.shape[-1], num_heads, bias=False, batch_first=True).to(x.dtype)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.cat([W_q, W_k, W_v], dim=1).T)
        layer.out_proj.weight.copy_(_gates_in_output_rows(W_o, gates, num_heads).T)
        return layer(x, x, x, need_weights=False)[0]


def _gate_inputs(B, T, d, h, gates, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, d, generator=gen, dtype=torch.float64)
    W_q, W_k, W_v, W_o = (torch.randn(d, d, generator=gen, dtype=torch.float64) / math.sqrt(d) for _ in range(4))
    return x, W_q, W_k, W_v, W_o, h, torch.tensor(gates, dtype=torch.float64)


check_attention_with_head_gates = Checker(
    "attention_with_head_gates",
    reference=_head_gated,
    cases=[
        Case("2 heads, both open (gates 1, 1): plain multi-head attention", _gate_inputs(1, 3, 4, 2, [1.0, 1.0], 55)),
        Case("2 heads, the second switched off (gates 1, 0)", _gate_inputs(2, 4, 8, 2, [1.0, 0.0], 56)),
        Case("4 heads, gates 0.5, 0, 1, 2", _gate_inputs(2, 5, 8, 4, [0.5, 0.0, 1.0, 2.0], 57)),
    ],
    mistakes=[
        Mistake(
            "reshape without transpose",
            "reshaping (B, T, d) straight to (B, h, T, d_k) mixes tokens into heads; reshape to (B, T, h, d_k) "
            "first, then swap axes 1 and 2 (and the reverse when merging).",
            _gated_no_transpose,
        ),
        Mistake(
            "gate after the output projection",
            "W_o mixes the heads: after it, features i*d_k .. (i+1)*d_k - 1 no longer belong to head i. "
            "Scale each head's output (B, h, T, d_k) before merging and projecting.",
            _gated_after_output,
        ),
        Mistake(
            "gate on the scores",
            "a gate of 0 on the scores makes the head's weights uniform, not its output zero; scale the head's "
            "output, after its softmax and its average of the values.",
            _gated_scores,
        ),
    ],
    atol=1e-9,
    forbidden={
        "attnbook.attention.MultiHeadAttention": _gated_with_library,
        "torch.nn.MultiheadAttention": _gated_with_torch,
    },
    refuses=PYTORCH_ATTENTION,
)


# --- Exercise: the mask of new queries against a longer run of keys -----------------------------------------------


def _new_queries_mask(lengths, T, S):
    query_at = torch.arange(T)[:, None] + (S - T)  # (T, 1): query i stands at position S - T + i
    future = torch.arange(S)[None, :] > query_at  # (T, S): keys after the query
    padded = torch.arange(S)[None, :] >= lengths[:, None]  # (B, S): padded keys
    return future[None] | padded[:, None, :]


def _new_queries_top_left(lengths, T, S):
    future = torch.arange(S)[None, :] > torch.arange(T)[:, None]
    return future[None] | (torch.arange(S)[None, :] >= lengths[:, None])[:, None, :]


def _new_queries_own_key_hidden(lengths, T, S):
    future = torch.arange(S)[None, :] >= torch.arange(T)[:, None] + (S - T)
    return future[None] | (torch.arange(S)[None, :] >= lengths[:, None])[:, None, :]


def _new_queries_no_padding(lengths, T, S):
    future = torch.arange(S)[None, :] > torch.arange(T)[:, None] + (S - T)
    return future[None].expand(len(lengths), T, S).clone()


def _new_queries_with_library(lengths, T, S):
    return causal_mask(S)[S - T :][None] | padding_mask(lengths, S)[:, None, :]


check_new_queries_mask = Checker(
    "new_queries_mask",
    reference=_new_queries_mask,
    cases=[
        Case("one sequence, 3 queries against 3 keys", (torch.tensor([3]), 3, 3)),
        Case("one sequence, the last 2 of 5 positions as queries", (torch.tensor([5]), 2, 5)),
        Case("two sequences of 6 and 4 keys, the last 3 of 6 positions as queries", (torch.tensor([6, 4]), 3, 6)),
    ],
    mistakes=[
        Mistake(
            "aligned top-left",
            "the T queries are the *last* T of the S positions: query i stands at position S - T + i and may see "
            "keys 0 .. S - T + i. triu(diagonal=1) on a (T, S) grid puts it at position i instead (that is also what "
            "torch's is_causal=True does when T != S).",
            _new_queries_top_left,
        ),
        Mistake(
            "each query hidden from its own key",
            "a token may attend to itself: hide only the keys after it, j > S - T + i.",
            _new_queries_own_key_hidden,
        ),
        Mistake(
            "padding forgotten",
            "combine the causal part with the key-padding mask (keys at positions >= lengths[b]) using |.",
            _new_queries_no_padding,
        ),
    ],
    forbidden={"attnbook.masks.causal_mask": _new_queries_with_library},
    refuses=(
        "attnbook.attention.attention_mask",
        "torch.nn.attention.bias.causal_lower_right",
        "torch.nn.attention.bias.causal_upper_left",
        "torch.nn.attention.bias.CausalBias",
        "torch.nn.Transformer.generate_square_subsequent_mask",
        "torch.nn.modules.transformer._generate_square_subsequent_mask",
        "d2l.*",
    ),
)
