"""Scaled dot-product attention, the function chapter 4 teaches: the formula, masks, PyTorch's kernel, order."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnbook.attention import scaled_dot_product_attention
from attnbook.masks import causal_mask, padding_mask


def _qkv(B=2, T=4, S=6, d=8, dv=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, T, d, generator=g, dtype=torch.float64),
        torch.randn(B, S, d, generator=g, dtype=torch.float64),
        torch.randn(B, S, dv, generator=g, dtype=torch.float64),
    )


def test_follows_the_formula_query_by_query():
    q, k, v = _qkv()
    out, w = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 4, 5) and w.shape == (2, 4, 6)
    for b in range(2):
        for t in range(4):
            scores = torch.stack([q[b, t] @ k[b, s] / math.sqrt(8) for s in range(6)])
            alpha = torch.softmax(scores, 0)
            torch.testing.assert_close(w[b, t], alpha)
            torch.testing.assert_close(out[b, t], sum(alpha[s] * v[b, s] for s in range(6)))


@pytest.mark.parametrize("masked", ["none", "padding", "causal"])
def test_equals_pytorch_kernel(masked):
    q, k, v = _qkv(T=6, S=6)
    mask = {"none": None, "padding": padding_mask(torch.tensor([6, 2]), 6)[:, None, :], "causal": causal_mask(6)}[
        masked
    ]
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def test_equals_d2l_dot_product_attention_with_valid_lengths():
    from d2l import torch as d2l

    q, k, v = _qkv(seed=3)
    lengths = torch.tensor([6, 3])
    theirs = d2l.DotProductAttention(0.0).eval()(q, k, v, lengths)
    ours, w = scaled_dot_product_attention(q, k, v, padding_mask(lengths, 6)[:, None, :])
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)
    assert torch.all(w[1, :, 3:] == 0)


def test_masked_keys_get_no_weight_and_their_values_do_not_matter():
    q, k, v = _qkv(seed=1)
    mask = padding_mask(torch.tensor([6, 3]), 6)[:, None, :]
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(w[1, :, 3:] == 0)
    v2, k2 = v.clone(), k.clone()
    v2[1, 3:], k2[1, 3:] = 1e6, -1e6
    # a leak of any weight onto the changed keys would move the output by far more than the rounding allowed here
    torch.testing.assert_close(scaled_dot_product_attention(q, k2, v2, mask)[0], out, rtol=1e-13, atol=1e-13)


def test_all_masked_query_gets_zero_output_not_nan():
    q, k, v = _qkv()
    out, w = scaled_dot_product_attention(q, k, v, torch.ones(2, 1, 6, dtype=torch.bool))
    assert torch.all(out == 0) and torch.all(w == 0)


def test_self_attention_is_permutation_equivariant():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 7, 8, generator=g, dtype=torch.float64)
    w_q, w_k, w_v = (torch.randn(8, 8, generator=g, dtype=torch.float64) for _ in range(3))

    def self_attention(x):
        return scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)[0]

    perm = torch.randperm(7, generator=g)
    torch.testing.assert_close(self_attention(x[:, perm]), self_attention(x)[:, perm], rtol=0, atol=1e-12)


def test_dropout_drops_weights_but_returns_them_undropped():
    torch.manual_seed(0)
    q, k, v = _qkv()
    out, w = scaled_dot_product_attention(q, k, v, dropout=0.5)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, dtype=torch.float64))
    assert not torch.allclose(out, scaled_dot_product_attention(q, k, v)[0])


def test_bad_shapes_get_clear_errors():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="query width 8 and key width 3"):
        scaled_dot_product_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="got 6 keys and 5 values"):
        scaled_dot_product_attention(q, k, v[:, :5])
    with pytest.raises(ValueError, match="same leading"):
        scaled_dot_product_attention(q, k[:1], v[:1])
    with pytest.raises(ValueError, match="at least 2 axes"):
        scaled_dot_product_attention(q[0, 0], k, v)
    with pytest.raises(TypeError, match="bool"):
        scaled_dot_product_attention(q, k, v, torch.zeros(2, 1, 6))
