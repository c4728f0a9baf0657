"""Checkers for chapter 7, *The Transformer* (``notebooks/07_transformer.ipynb``)."""

from __future__ import annotations

import torch

from . import Case, Checker, Mistake

__all__ = ["check_ffn", "check_post_ln", "check_pre_ln", "check_decoder_masks", "check_transformer_parameter_count"]

_g = torch.Generator().manual_seed(7)


def _randn(*shape, scale=1.0):
    return scale * torch.randn(*shape, generator=_g, dtype=torch.float64)


# --- Exercise: the position-wise feed-forward network ----------------------------------------------------

_D, _F = 4, 6
_ffn_params = (_randn(_D, _F), _randn(_F), _randn(_F, _D), _randn(_D))  # w1 (d, d_ff), b1, w2 (d_ff, d), b2


def _ffn(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2


def _ffn_no_relu(x, w1, b1, w2, b2):
    return (x @ w1 + b1) @ w2 + b2


def _ffn_relu_at_the_end(x, w1, b1, w2, b2):
    return torch.relu(torch.relu(x @ w1 + b1) @ w2 + b2)


def _ffn_relu_before_bias(x, w1, b1, w2, b2):
    return torch.relu(x @ w1) @ w2 + b1 @ w2 + b2


check_ffn = Checker(
    "ffn",
    reference=_ffn,
    cases=[
        Case("one token (B=1, T=1, d_model=4, d_ff=6)", (_randn(1, 1, _D), *_ffn_params)),
        Case("B=2, T=3: every position alike", (_randn(2, 3, _D), *_ffn_params)),
        Case("large negative inputs (the ReLU cuts)", (_randn(2, 5, _D, scale=4.0), *_ffn_params)),
    ],
    mistakes=[
        Mistake(
            "no ReLU",
            "without the ReLU the two linear maps collapse into one: FFN(x) = max(0, x W1 + b1) W2 + b2.",
            _ffn_no_relu,
        ),
        Mistake(
            "ReLU on the output too",
            "the ReLU acts on the hidden layer only; the output x W2 + b2 must be able to go negative.",
            _ffn_relu_at_the_end,
        ),
        Mistake(
            "ReLU before the bias",
            "add b1 before the ReLU: max(0, x W1 + b1), not max(0, x W1) + b1.",
            _ffn_relu_before_bias,
        ),
    ],
)


# --- Exercise: the post-LN sublayer connection ---------------------------------------------------------


def _layer_norm(x, gain, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return gain * (x - mean) / torch.sqrt(var + eps) + bias


def _post_ln(x, y, gain, bias, eps=1e-5):
    return _layer_norm(x + y, gain, bias, eps)


def _post_ln_no_residual(x, y, gain, bias, eps=1e-5):
    return _layer_norm(y, gain, bias, eps)


def _post_ln_eps_outside(x, y, gain, bias, eps=1e-5):
    z = x + y
    mean = z.mean(dim=-1, keepdim=True)
    std = z.var(dim=-1, unbiased=False, keepdim=True).sqrt()
    return gain * (z - mean) / (std + eps) + bias


def _post_ln_unbiased(x, y, gain, bias, eps=1e-5):
    z = x + y
    return gain * (z - z.mean(dim=-1, keepdim=True)) / torch.sqrt(z.var(dim=-1, keepdim=True) + eps) + bias


def _post_ln_wrong_axis(x, y, gain, bias, eps=1e-5):
    z = x + y
    mean = z.mean(dim=1, keepdim=True)
    var = z.var(dim=1, unbiased=False, keepdim=True)
    return gain * (z - mean) / torch.sqrt(var + eps) + bias


def _post_ln_norm_first(x, y, gain, bias, eps=1e-5):
    return _layer_norm(x, gain, bias, eps) + y


_d = 5
_gain, _bias = 1 + _randn(_d, scale=0.3), _randn(_d, scale=0.3)
_x_small_spread = 1.0 + _randn(2, 3, _d, scale=0.05)  # features close together: eps matters

check_post_ln = Checker(
    "post_ln",
    reference=_post_ln,
    cases=[
        Case("B=2, T=3, d=5, gain 1, bias 0", (_randn(2, 3, _d), _randn(2, 3, _d), torch.ones(_d, dtype=torch.float64), torch.zeros(_d, dtype=torch.float64))),
        Case("learned gain and bias", (_randn(2, 4, _d), _randn(2, 4, _d), _gain, _bias)),
        Case("small spread with a large eps = 0.1", (_x_small_spread, 0.5 * _x_small_spread, _gain, _bias), {"eps": 0.1}),
    ],
    mistakes=[
        Mistake("no residual", "add the input back before normalizing: LayerNorm(x + y), not LayerNorm(y).", _post_ln_no_residual),
        Mistake(
            "variance over the tokens",
            "LayerNorm normalizes each token over its d_model features (the last axis, dim=-1), "
            "not over the positions of the sequence.",
            _post_ln_wrong_axis,
        ),
        Mistake(
            "normalized before adding",
            "that is neither post-LN nor pre-LN: post-LN normalizes the sum, LayerNorm(x + y).",
            _post_ln_norm_first,
        ),
        Mistake(
            "unbiased variance",
            "LayerNorm divides by d, not d - 1: use x.var(dim=-1, unbiased=False) (or the mean of the squared deviations).",
            _post_ln_unbiased,
        ),
        Mistake(
            "epsilon outside the square root",
            "PyTorch's LayerNorm (and ours) divides by sqrt(var + eps), not by sqrt(var) + eps.",
            _post_ln_eps_outside,
        ),
    ],
)


# --- Exercise: the pre-LN sublayer connection ------------------------------------------------------------

_W_sub = _randn(_d, _d, scale=0.5)


def _sublayer_linear(h):
    return h @ _W_sub


def _sublayer_tanh(h):
    return torch.tanh(2 * h) + 0.3


def _pre_ln(x, sublayer, gain, bias, eps=1e-5):
    return x + sublayer(_layer_norm(x, gain, bias, eps))


def _pre_ln_as_post(x, sublayer, gain, bias, eps=1e-5):
    return _layer_norm(x + sublayer(x), gain, bias, eps)


def _pre_ln_no_residual(x, sublayer, gain, bias, eps=1e-5):
    return sublayer(_layer_norm(x, gain, bias, eps))


def _pre_ln_normalized_residual(x, sublayer, gain, bias, eps=1e-5):
    h = _layer_norm(x, gain, bias, eps)
    return h + sublayer(h)


def _pre_ln_norm_output(x, sublayer, gain, bias, eps=1e-5):
    return x + _layer_norm(sublayer(x), gain, bias, eps)


check_pre_ln = Checker(
    "pre_ln",
    reference=_pre_ln,
    cases=[
        Case("a linear sublayer, gain 1, bias 0", (_randn(2, 3, _d, scale=3.0), _sublayer_linear, torch.ones(_d, dtype=torch.float64), torch.zeros(_d, dtype=torch.float64))),
        Case("a nonlinear sublayer, learned gain and bias", (_randn(3, 2, _d, scale=3.0), _sublayer_tanh, _gain, _bias)),
    ],
    mistakes=[
        Mistake(
            "post-LN instead",
            "pre-LN normalizes the sublayer's input and leaves the sum alone: x + sublayer(LayerNorm(x)).",
            _pre_ln_as_post,
        ),
        Mistake(
            "no residual",
            "add x back: x + sublayer(LayerNorm(x)). The residual stream is what makes pre-LN easy to train.",
            _pre_ln_no_residual,
        ),
        Mistake(
            "normalized residual",
            "the residual is the raw x, not LayerNorm(x): the stream itself is never normalized inside the stack.",
            _pre_ln_normalized_residual,
        ),
        Mistake(
            "normalized the sublayer's output",
            "normalize the sublayer's input, not its output: x + sublayer(LayerNorm(x)).",
            _pre_ln_norm_output,
        ),
    ],
)


# --- Exercise: the decoder's two masks -------------------------------------------------------------------


def _decoder_masks(src_lengths, tgt_lengths, S, T):
    future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    tgt_pad = torch.arange(T)[None, :] >= tgt_lengths[:, None]  # (B, T)
    src_pad = torch.arange(S)[None, :] >= src_lengths[:, None]  # (B, S)
    self_mask = future[None] | tgt_pad[:, None, :]  # (B, T, T)
    cross_mask = src_pad[:, None, :].expand(-1, T, -1).clone()  # (B, T, S): every query, the same source padding
    return self_mask, cross_mask


def _dm_causal_cross(src_lengths, tgt_lengths, S, T):
    self_mask, cross = _decoder_masks(src_lengths, tgt_lengths, S, T)
    return self_mask, cross | torch.ones(T, S, dtype=torch.bool).triu(diagonal=1)


def _dm_cross_target_lengths(src_lengths, tgt_lengths, S, T):
    self_mask, _ = _decoder_masks(src_lengths, tgt_lengths, S, T)
    pad = torch.arange(S)[None, :] >= tgt_lengths[:, None]
    return self_mask, pad[:, None, :].expand(-1, T, -1).clone()


def _dm_no_causal(src_lengths, tgt_lengths, S, T):
    _, cross = _decoder_masks(src_lengths, tgt_lengths, S, T)
    tgt_pad = torch.arange(T)[None, :] >= tgt_lengths[:, None]
    return tgt_pad[:, None, :].expand(-1, T, -1).clone(), cross


def _dm_padding_on_queries(src_lengths, tgt_lengths, S, T):
    self_mask, _ = _decoder_masks(src_lengths, tgt_lengths, S, T)
    tgt_pad = torch.arange(T)[None, :] >= tgt_lengths[:, None]  # (B, T): padded *queries*
    return self_mask, tgt_pad[:, :, None].expand(-1, -1, S).clone()


check_decoder_masks = Checker(
    "decoder_masks",
    reference=_decoder_masks,
    cases=[
        Case("one pair, no padding, S=4, T=3", (torch.tensor([4]), torch.tensor([3]), 4, 3)),
        Case("padded both sides, S=5, T=4", (torch.tensor([5, 2]), torch.tensor([2, 4]), 5, 4)),
        Case("three pairs, S=3, T=6", (torch.tensor([1, 3, 2]), torch.tensor([6, 1, 4]), 3, 6)),
    ],
    mistakes=[
        Mistake(
            "causal cross-attention",
            "cross-attention may look at every source position: the whole source is known before decoding "
            "starts. Only its padding is masked.",
            _dm_causal_cross,
        ),
        Mistake(
            "cross mask from the target lengths",
            "the keys of cross-attention are source positions: mask j >= src_lengths[b], a (B, T, S) mask.",
            _dm_cross_target_lengths,
        ),
        Mistake(
            "no causal mask",
            "the decoder's self-attention must also hide the future, key j > query i: combine triu(diagonal=1) with the padding.",
            _dm_no_causal,
        ),
        Mistake(
            "padding masked on the queries",
            "a mask hides keys (the last axis); mask the padded source keys for every query, not the padded target queries.",
            _dm_padding_on_queries,
        ),
    ],
)


# --- Exercise: counting the parameters of a configuration -------------------------------------------------


def _count(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False):
    attention = 4 * d_model * d_model + 4 * d_model  # W_q, W_k, W_v, W_o and their biases
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model  # W1, b1, W2, b2
    norm = 2 * d_model  # gain and bias
    encoder = num_layers * (attention + ffn + 2 * norm)
    decoder = num_layers * (2 * attention + ffn + 3 * norm)
    embeddings = tgt_vocab_size * d_model  # the output projection is this matrix too
    if not share_embeddings:
        embeddings += src_vocab_size * d_model
    return embeddings + encoder + decoder


def _count_untied(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False):
    return _count(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings) + tgt_vocab_size * d_model


def _count_no_cross(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False):
    attention = 4 * d_model * d_model + 4 * d_model
    return _count(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings) - num_layers * (attention + 2 * d_model)


def _count_no_norms(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False):
    return _count(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings) - num_layers * 5 * 2 * d_model


def _count_per_head(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False):
    extra = num_layers * 3 * (num_heads - 1) * (4 * d_model * d_model + 4 * d_model)
    return _count(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings) + extra


def _count_no_share(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False):
    return _count(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, False)


check_transformer_parameter_count = Checker(
    "transformer_parameter_count",
    reference=_count,
    cases=[
        Case("tiny: V=10/12, d=8, 2 heads, 1 layer, d_ff=16", (10, 12, 8, 2, 1, 16)),
        Case("V=100/120, d=32, 4 heads, 2 layers, d_ff=64", (100, 120, 32, 4, 2, 64)),
        Case("shared vocabulary of 50, d=16, 4 heads, 3 layers", (50, 50, 16, 4, 3, 64), {"share_embeddings": True}),
    ],
    mistakes=[
        Mistake(
            "sharing ignored",
            "with share_embeddings=True the source embedding is the target matrix too: count V x d_model once.",
            _count_no_share,
        ),
        Mistake(
            "output layer counted separately",
            "the output projection is tied to the target embedding: the same V x d_model matrix, counted once.",
            _count_untied,
        ),
        Mistake(
            "cross-attention forgotten",
            "each decoder layer has two attentions (causal self-attention and cross-attention) and three LayerNorms.",
            _count_no_cross,
        ),
        Mistake(
            "LayerNorms forgotten",
            "each LayerNorm has a gain and a bias of d_model numbers: two per encoder layer, three per decoder layer.",
            _count_no_norms,
        ),
        Mistake(
            "a full-width attention per head",
            "h heads of width d_model / h share the same d_model x d_model projections: the count does not depend on h.",
            _count_per_head,
        ),
    ],
)
