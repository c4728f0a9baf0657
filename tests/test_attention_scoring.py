"""Chapter 3's scoring modules: additive and scaled dot-product attention.

Our modules take bool masks (True = ignore) where d2l takes valid lengths; given
the same weights and inputs, both must compute the same thing.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from attnbook.attention import AdditiveAttention, DotProductAttention, attention_mask, masked_softmax
from attnbook.masks import padding_mask


@pytest.fixture(scope="module")
def d2l():
    with warnings.catch_warnings():  # d2l's own imports may warn; not ours to fix
        warnings.simplefilter("ignore")
        from d2l import torch as d2l_torch
    return d2l_torch


def _per_query_mask(valid_lens_2d: torch.Tensor, S: int) -> torch.Tensor:
    B, T = valid_lens_2d.shape
    return padding_mask(valid_lens_2d.reshape(-1), S).reshape(B, T, S)


def test_masked_softmax_equals_d2l_with_lengths_per_sentence_and_per_query(d2l):
    torch.manual_seed(0)
    scores = torch.randn(3, 4, 6)
    lens = torch.tensor([2, 6, 1])
    ours = masked_softmax(scores, padding_mask(lens, 6)[:, None, :])
    theirs = d2l.masked_softmax(scores.clone(), lens)  # d2l writes into its input
    assert torch.allclose(ours, theirs, atol=1e-7)
    lens2 = torch.tensor([[1, 2, 3, 6], [4, 4, 5, 6], [6, 1, 2, 3]])
    ours = masked_softmax(scores, _per_query_mask(lens2, 6))
    assert torch.allclose(ours, d2l.masked_softmax(scores.clone(), lens2), atol=1e-7)


def test_masked_softmax_all_masked_row_is_zero_where_d2l_is_uniform(d2l):
    scores = torch.randn(1, 2, 3)
    lens = torch.tensor([0])
    ours = masked_softmax(scores, padding_mask(lens, 3)[:, None, :])
    theirs = d2l.masked_softmax(scores.clone(), lens)
    assert torch.all(ours == 0) and not torch.isnan(ours).any()
    assert torch.allclose(theirs, torch.full_like(theirs, 1 / 3))  # d2l's -1e6 fill spreads weight evenly


def test_masked_softmax_never_nan_for_extreme_scores():
    scores = torch.tensor([[[1e30, -1e30, float("-inf")], [0.0, 0.0, 0.0]]])
    mask = torch.tensor([[[False, False, True], [True, True, True]]])
    weights = masked_softmax(scores, mask)
    assert not torch.isnan(weights).any()
    assert torch.allclose(weights, torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]))


def _copy_additive_into_d2l(ours: AdditiveAttention, d2l, queries, keys, values, lens):
    theirs = d2l.AdditiveAttention(num_hiddens=ours.w_v.in_features, dropout=0.0)
    theirs(queries, keys, values, lens)  # materialize d2l's lazy layers
    with torch.no_grad():
        theirs.W_q.weight.copy_(ours.W_q.weight)
        theirs.W_k.weight.copy_(ours.W_k.weight)
        theirs.w_v.weight.copy_(ours.w_v.weight)
    return theirs.eval()


@pytest.mark.parametrize("per_query", [False, True])
def test_additive_attention_equals_d2l(d2l, per_query):
    torch.manual_seed(1)
    B, T, S, dq, dk, dv, h = 2, 3, 7, 5, 4, 6, 8
    queries, keys, values = torch.randn(B, T, dq), torch.randn(B, S, dk), torch.randn(B, S, dv)
    ours = AdditiveAttention(dq, dk, h).eval()
    if per_query:
        lens = torch.tensor([[1, 4, 7], [7, 2, 3]])
        mask = _per_query_mask(lens, S)
    else:
        lens = torch.tensor([3, 7])
        mask = padding_mask(lens, S)  # a (B, S) key-padding mask
    theirs = _copy_additive_into_d2l(ours, d2l, queries, keys, values, lens)
    out, weights = ours(queries, keys, values, mask)
    expected = theirs(queries, keys, values, lens)
    assert out.shape == (B, T, dv) and weights.shape == (B, T, S)
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.allclose(weights, theirs.attention_weights, atol=1e-6)


@pytest.mark.parametrize("per_query", [False, True])
def test_dot_product_attention_equals_d2l(d2l, per_query):
    torch.manual_seed(2)
    B, T, S, d, dv = 3, 4, 5, 8, 2
    queries, keys, values = torch.randn(B, T, d), torch.randn(B, S, d), torch.randn(B, S, dv)
    if per_query:
        lens = torch.randint(1, S + 1, (B, T))
        mask = _per_query_mask(lens, S)
    else:
        lens = torch.tensor([1, 5, 3])
        mask = padding_mask(lens, S)
    theirs = d2l.DotProductAttention(dropout=0.0).eval()
    out, weights = DotProductAttention().eval()(queries, keys, values, mask)
    assert torch.allclose(out, theirs(queries, keys, values, lens), atol=1e-6)
    assert torch.allclose(weights, theirs.attention_weights, atol=1e-6)


def test_without_mask_both_equal_d2l(d2l):
    torch.manual_seed(3)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 6, 4), torch.randn(2, 6, 3)
    out, _ = DotProductAttention()(q, k, v)
    assert torch.allclose(out, d2l.DotProductAttention(0.0)(q, k, v, None), atol=1e-6)
    ours = AdditiveAttention(4, 4, 5)
    theirs = _copy_additive_into_d2l(ours, d2l, q, k, v, None)
    assert torch.allclose(ours(q, k, v)[0], theirs(q, k, v, None), atol=1e-6)


def test_dot_product_scores_are_scaled_by_sqrt_d():
    q = torch.tensor([[[1.0, 1.0, 1.0, 1.0]]])
    k = torch.tensor([[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]])
    _, weights = DotProductAttention()(q, k, torch.zeros(1, 2, 1))
    # scores 4/sqrt(4) = 2 and 0: softmax gives e^2 / (e^2 + 1)
    expected = torch.exp(torch.tensor(2.0)) / (torch.exp(torch.tensor(2.0)) + 1)
    assert torch.isclose(weights[0, 0, 0], expected)


@pytest.mark.parametrize("module", [AdditiveAttention(4, 4, 6), DotProductAttention()], ids=["additive", "dot"])
def test_masked_keys_and_values_do_not_matter(module):
    torch.manual_seed(4)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 3)
    mask = padding_mask(torch.tensor([2, 4]), 5)
    out, weights = module(q, k, v, mask)
    k2, v2 = k.clone(), v.clone()
    k2[mask], v2[mask] = 1e4, -1e4  # garbage in the padding
    out2, weights2 = module(q, k2, v2, mask)
    assert torch.allclose(out, out2, atol=1e-6) and torch.allclose(weights, weights2, atol=1e-6)
    assert torch.all(weights[mask[:, None, :].expand_as(weights)] == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3))


def test_additive_attention_with_precomputed_keys_is_the_same():
    torch.manual_seed(5)
    attn = AdditiveAttention(3, 5, 4)
    q, k = torch.randn(2, 1, 3), torch.randn(2, 6, 5)
    mask = padding_mask(torch.tensor([6, 3]), 6)
    a = attn(q, k, k, mask)
    b = attn(q, k, k, mask, projected_keys=attn.project_keys(k))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_dropout_acts_on_pooling_not_on_the_returned_weights():
    torch.manual_seed(6)
    q, k, v = torch.randn(1, 2, 4), torch.randn(1, 8, 4), torch.randn(1, 8, 3)
    attn = DotProductAttention(dropout=0.5).train()
    out, weights = attn(q, k, v)
    assert torch.allclose(weights.sum(-1), torch.ones(1, 2))
    assert not torch.allclose(out, weights @ v)
    attn.eval()
    out, weights = attn(q, k, v)
    assert torch.allclose(out, weights @ v)


def test_mask_shape_mismatch_is_a_clear_error():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    attn = DotProductAttention()
    with pytest.raises(ValueError, match=r"key-padding mask of shape \(B, S\) = \(2, 5\)"):
        attn(q, k, v, torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not broadcast"):
        attn(q, k, v, torch.zeros(2, 3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        attn(q, k, v, torch.zeros(2, 5))
    # a 2-D mask that would silently broadcast as (T, S) when B == T is refused
    with pytest.raises(ValueError, match="key-padding"):
        attention_mask(torch.zeros(3, 5, dtype=torch.bool), 2, 3, 5)


def test_bad_queries_keys_values_are_clear_errors():
    attn_dot, attn_add = DotProductAttention(), AdditiveAttention(4, 4, 3)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match="same width d"):
        attn_dot(q, torch.randn(2, 5, 3), v)
    with pytest.raises(ValueError, match="same length S"):
        attn_dot(q, k, torch.randn(2, 4, 4))
    with pytest.raises(ValueError, match="batch size"):
        attn_dot(q, torch.randn(1, 5, 4), torch.randn(1, 5, 4))
    with pytest.raises(ValueError, match=r"queries must have shape \(B, length, features\)"):
        attn_dot(torch.randn(3, 4), k, v)
    with pytest.raises(TypeError, match="floating-point"):
        attn_dot(q, k.long(), v)
    with pytest.raises(ValueError, match="queries have 5 features"):
        attn_add(torch.randn(2, 3, 5), k, v)
    with pytest.raises(ValueError, match="keys have 6 features"):
        attn_add(q, torch.randn(2, 5, 6), v)


def test_dot_product_attention_outputs_equal_pytorchs_fused_kernel():
    torch.manual_seed(7)
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 4)
    mask = padding_mask(torch.tensor([5, 2]), 5)
    out, _ = DotProductAttention()(q, k, v, mask)
    fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=~mask[:, None, :])  # True = take part
    assert torch.allclose(out, fused, atol=1e-6)
