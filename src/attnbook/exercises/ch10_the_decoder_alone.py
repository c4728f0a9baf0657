"""Checkers for chapter 10, *The decoder alone* (``notebooks/10_the_decoder_alone.ipynb``)."""

from __future__ import annotations

import torch

from . import NO_MODEL, Case, Checker, Mistake, seeded_randn

__all__ = [
    "check_decoder_parameters",
    "check_append_rotary_keys",
    "check_target_loss_mask",
    "check_kv_cache_bytes",
]

_randn = seeded_randn(10, torch.float64)
#: The chapter's checks compute in float64: one tolerance for all of them that compare values.
_FLOAT64 = {"atol": 1e-9, "rtol": 1e-8}
#: What they refuse: the chapter's packaged model and its helpers (parameter_count, rotate_pairs, cache_numbers).
_DECODER_ONLY = ("attnbook.decoder_only.*",)


# --- Exercise: the parameters of a decoder-only model with grouped-query attention ---------------


def _count(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len, **mistake):
    kv_heads = num_heads if mistake.get("all_heads") else num_kv_heads
    kv = 2 * kv_heads * (d_model // num_heads)
    bias = 0 if mistake.get("no_bias") else 1
    attention = (d_model + bias) * (d_model + kv) + (d_model + bias) * d_model
    ffn = (d_model + bias) * d_ff + (d_ff + bias) * d_model
    norms = 0 if mistake.get("no_norms") else 2 * 2 * d_model
    output = vocab_size * d_model if mistake.get("untied") else 0
    final = 0 if mistake.get("no_final") else 2 * d_model
    return num_layers * (attention + ffn + norms) + vocab_size * d_model + max_len * d_model + output + final


def _decoder_parameters(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    head_dim = d_model // num_heads
    attention = (d_model + 1) * (d_model + 2 * num_kv_heads * head_dim) + (d_model + 1) * d_model
    ffn = (d_model + 1) * d_ff + (d_ff + 1) * d_model
    layer = attention + ffn + 4 * d_model  # two LayerNorms, a gain and a bias each
    return num_layers * layer + (vocab_size + max_len) * d_model + 2 * d_model


def _dp_all_heads(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    return _count(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len, all_heads=True)


def _dp_untied(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    return _count(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len, untied=True)


def _dp_no_bias(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    return _count(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len, no_bias=True)


def _dp_no_norms(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    return _count(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len, no_norms=True)


def _dp_no_final(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    return _count(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len, no_final=True)


check_decoder_parameters = Checker(
    "decoder_parameters",
    reference=_decoder_parameters,
    cases=[
        Case("GPT-2 small: 12 layers of width 768, 12 heads", (50257, 768, 12, 12, 12, 3072, 1024)),
        Case("4 key-value heads for 12 query heads", (50257, 768, 12, 12, 4, 3072, 1024)),
        Case("a small model, one key-value head", (1000, 64, 2, 4, 1, 256, 64)),
    ],
    mistakes=[
        Mistake(
            "keys and values for every query head",
            "with num_kv_heads key-value heads, in_proj makes d_model query features but only "
            "2 * num_kv_heads * (d_model // num_heads) key and value features.",
            _dp_all_heads,
        ),
        Mistake(
            "the output projection counted",
            "the output projection is tied to the token embedding: one matrix, counted once.",
            _dp_untied,
        ),
        Mistake("biases forgotten", "every linear map of a layer (in_proj, out_proj, w1, w2) has a bias.", _dp_no_bias),
        Mistake(
            "LayerNorms forgotten",
            "each layer has two LayerNorms, with a gain and a bias of d_model numbers each.",
            _dp_no_norms,
        ),
        Mistake(
            "the final LayerNorm forgotten",
            "a pre-LN stack ends with one more LayerNorm (2 * d_model numbers), before the output projection.",
            _dp_no_final,
        ),
    ],
    refuses=(NO_MODEL, *_DECODER_ONLY),
)


# --- Exercise: appending to a cache with rotary positions ----------------------------------------


def _rotate(x, start, base=10000.0, halves=False):
    T, d_k = x.shape[-2], x.shape[-1]
    frequencies = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angles = torch.arange(start, start + T, dtype=torch.float64)[:, None] * frequencies
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if halves:  # the first half of the features paired with the second half
        a, b = x[..., : d_k // 2], x[..., d_k // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def _append_rotary_keys(past_keys, new_keys, base=10000.0):
    return torch.cat([past_keys, _rotate(new_keys, past_keys.shape[-2], base)], dim=-2)


def _ark_from_zero(past_keys, new_keys, base=10000.0):
    return torch.cat([past_keys, _rotate(new_keys, 0, base)], dim=-2)


def _ark_all_again(past_keys, new_keys, base=10000.0):
    return _rotate(torch.cat([past_keys, new_keys], dim=-2), 0, base)


def _ark_unrotated(past_keys, new_keys, base=10000.0):
    return torch.cat([past_keys, new_keys], dim=-2)


def _ark_halves(past_keys, new_keys, base=10000.0):
    return torch.cat([past_keys, _rotate(new_keys, past_keys.shape[-2], base, halves=True)], dim=-2)


check_append_rotary_keys = Checker(
    "append_rotary_keys",
    reference=_append_rotary_keys,
    cases=[
        Case("two keys after three cached, d_k = 4", (_randn(1, 1, 3, 4), _randn(1, 1, 2, 4))),
        Case("two heads, two new keys after five", (_randn(2, 2, 5, 6), _randn(2, 2, 2, 6))),
        Case("an empty cache", (_randn(1, 2, 0, 4), _randn(1, 2, 3, 4))),
        Case("another base", (_randn(1, 1, 4, 8), _randn(1, 1, 1, 8)), {"base": 100.0}),
    ],
    mistakes=[
        Mistake(
            "new keys rotated as if at position 0",
            "a key appended after t cached ones sits at position t: rotate the new keys by the angles of positions "
            "t, t + 1, ..., where t = past_keys.shape[-2].",
            _ark_from_zero,
        ),
        Mistake(
            "the cache rotated again",
            "the cached keys are rotated already, once, at their own positions: rotate only the new keys and "
            "append them; rotating the whole cache again turns the old keys twice.",
            _ark_all_again,
        ),
        Mistake(
            "new keys appended unrotated",
            "with rotary positions the cache holds rotated keys: rotate the new keys before appending them.",
            _ark_unrotated,
        ),
        Mistake(
            "halves paired instead of neighbours",
            "the chapter's rotation turns the pairs of neighbouring features (2i, 2i + 1), as chapter 6's "
            "sinusoids come in sin/cos pairs, not feature i with feature i + d_k / 2.",
            _ark_halves,
        ),
    ],
    refuses=(NO_MODEL, *_DECODER_ONLY),
    **_FLOAT64,
)


# --- Exercise: the loss mask of translation as language modelling --------------------------------


def _target_loss_mask(tokens, sep_id, pad_id, *, shifted=True, with_sep=False, with_pad=False, everywhere=False):
    after = (tokens == sep_id).long().cumsum(dim=1) > 0  # at or after the separator
    target = after & (tokens != sep_id) if not with_sep else after
    if everywhere:
        target = torch.ones_like(target)
    if not with_pad:
        target = target & (tokens != pad_id)
    return target[:, 1:] if shifted else target[:, :-1]


def _tlm(tokens, sep_id, pad_id):
    return _target_loss_mask(tokens, sep_id, pad_id)


def _tlm_unshifted(tokens, sep_id, pad_id):
    return _target_loss_mask(tokens, sep_id, pad_id, shifted=False)


def _tlm_separator(tokens, sep_id, pad_id):
    return _target_loss_mask(tokens, sep_id, pad_id, with_sep=True)


def _tlm_padding(tokens, sep_id, pad_id):
    return _target_loss_mask(tokens, sep_id, pad_id, with_pad=True)


def _tlm_everywhere(tokens, sep_id, pad_id):
    return _target_loss_mask(tokens, sep_id, pad_id, everywhere=True)


# <bos>=1, <eos>=2, <pad>=0, separator 3; words from 4 up
_TLM_ONE = torch.tensor([[1, 4, 5, 3, 6, 7, 2]])
_TLM_PADDED = torch.tensor([[1, 4, 5, 6, 3, 7, 8, 9, 2, 0, 0], [1, 4, 3, 5, 2, 0, 0, 0, 0, 0, 0]])

check_target_loss_mask = Checker(
    "target_loss_mask",
    reference=_tlm,
    cases=[
        Case("one pair, no padding", (_TLM_ONE, 3, 0)),
        Case("two pairs with padding", (_TLM_PADDED, 3, 0)),
        Case(
            "the separator with another id",
            (torch.where(_TLM_PADDED == 3, 9, torch.where(_TLM_PADDED == 9, 3, _TLM_PADDED)), 9, 0),
        ),
    ],
    mistakes=[
        Mistake(
            "not shifted",
            "position t predicts token t + 1: the mask of the (B, T - 1) predictions says whether tokens[:, 1:] "
            "are target tokens, not tokens[:, :-1].",
            _tlm_unshifted,
        ),
        Mistake(
            "the separator counted",
            "the separator is given, as part of the prompt, not something to translate: the loss counts the "
            "target tokens after it (and the target's <eos>), not the prediction of the separator itself.",
            _tlm_separator,
        ),
        Mistake(
            "padding counted",
            "padding after <eos> is no target token: leave those predictions out of the loss.",
            _tlm_padding,
        ),
        Mistake(
            "the source counted too",
            "that is the plain language-modelling loss over the whole sequence; translation as language modelling "
            "counts only the target, after the separator.",
            _tlm_everywhere,
        ),
    ],
    refuses=(NO_MODEL, *_DECODER_ONLY),
)


# --- Exercise: the size of a grouped-query cache -------------------------------------------------


def _kv_cache_bytes(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    head_dim = d_model // num_heads
    return 2 * num_layers * num_kv_heads * head_dim * length * batch_size * bytes_per_number


def _kcb_all_heads(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    return _kv_cache_bytes(num_layers, d_model, num_heads, num_heads, length, batch_size, bytes_per_number)


def _kcb_keys_only(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    return _kv_cache_bytes(num_layers, d_model, num_heads, num_kv_heads, length, batch_size, bytes_per_number) // 2


def _kcb_one_layer(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    return _kv_cache_bytes(1, d_model, num_heads, num_kv_heads, length, batch_size, bytes_per_number)


def _kcb_model_width(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    return 2 * num_layers * num_kv_heads * d_model * length * batch_size * bytes_per_number


check_kv_cache_bytes = Checker(
    "kv_cache_bytes",
    reference=_kv_cache_bytes,
    cases=[
        Case("GPT-2 small's shape, 1,024 tokens, one head per group", (12, 768, 12, 12, 1024)),
        Case("4 key-value heads for 12 query heads", (12, 768, 12, 4, 1024)),
        Case(
            "one key-value head, a batch of 8 in float32",
            (24, 1024, 16, 1, 512),
            {"batch_size": 8, "bytes_per_number": 4},
        ),
    ],
    mistakes=[
        Mistake(
            "every query head cached",
            "with grouped-query attention only the num_kv_heads key-value heads are computed and kept; the query "
            "heads of a group all read the same one.",
            _kcb_all_heads,
        ),
        Mistake(
            "values forgotten",
            "the cache keeps a key *and* a value per head, per token, per layer: a factor 2.",
            _kcb_keys_only,
        ),
        Mistake(
            "one layer",
            "every layer has its own attention, so its own keys and values: multiply by num_layers.",
            _kcb_one_layer,
        ),
        Mistake(
            "heads of width d_model",
            "a head has d_model // num_heads features: num_kv_heads heads of that width, not of width d_model.",
            _kcb_model_width,
        ),
    ],
    refuses=(NO_MODEL, *_DECODER_ONLY),
)
