"""Checkers for chapter 7, *The Transformer* (``notebooks/07_transformer.ipynb``)."""

from __future__ import annotations

import torch

from . import NO_MODEL, Case, Checker, Mistake, seeded_randn

__all__ = [
    "check_encoder_layer",
    "check_pre_ln_decoder_layer",
    "check_prefix_lm_mask",
    "check_transformer_parameter_count",
]

_randn = seeded_randn(7, torch.float64)


# --- Exercise: an encoder layer from its parts (try first, before the chapter builds it) -----------------

_D, _F, _H = 8, 16, 2


def _modules(seed, d=_D, h=_H, d_ff=_F, norms=2):
    """A chapter-5 attention (or two), an FFN and LayerNorms with random (not default) parameters."""
    from torch import nn

    from ..attention import MultiHeadAttention

    with torch.random.fork_rng(), torch.no_grad():  # the notebook's own random stream is left alone
        torch.manual_seed(seed)
        attentions = [MultiHeadAttention(d, h).double() for _ in range(2)]
        for attention in attentions:
            for p in attention.parameters():
                p.add_(0.1 * torch.randn_like(p))
        w1, w2 = nn.Linear(d, d_ff).double(), nn.Linear(d_ff, d).double()
        layer_norms = [nn.LayerNorm(d).double() for _ in range(norms)]
        for norm in layer_norms:
            norm.weight.copy_(1 + 0.3 * torch.randn(d, dtype=torch.float64))
            norm.bias.copy_(0.3 * torch.randn(d, dtype=torch.float64))
        ffn = nn.Sequential(w1, nn.ReLU(), w2)
    return attentions, ffn, layer_norms


def _pad(lengths, size):
    return torch.arange(size)[None, :] >= lengths[:, None]  # (B, size): True at padding


def _encoder_layer(x, src_lengths, attention, ffn, norm1, norm2):
    mask = _pad(src_lengths, x.shape[1])
    h = norm1(x + attention(x, x, x, key_padding_mask=mask))
    return norm2(h + ffn(h))


def _enc_no_mask(x, src_lengths, attention, ffn, norm1, norm2):
    h = norm1(x + attention(x, x, x))
    return norm2(h + ffn(h))


def _enc_mask_off_by_one(x, src_lengths, attention, ffn, norm1, norm2):
    mask = torch.arange(x.shape[1])[None, :] > src_lengths[:, None]
    h = norm1(x + attention(x, x, x, key_padding_mask=mask))
    return norm2(h + ffn(h))


def _enc_mask_inverted(x, src_lengths, attention, ffn, norm1, norm2):
    mask = ~_pad(src_lengths, x.shape[1])
    h = norm1(x + attention(x, x, x, key_padding_mask=mask))
    return norm2(h + ffn(h))


def _enc_pre_ln(x, src_lengths, attention, ffn, norm1, norm2):
    mask = _pad(src_lengths, x.shape[1])
    n = norm1(x)
    h = x + attention(n, n, n, key_padding_mask=mask)
    return h + ffn(norm2(h))


def _enc_ffn_on_input(x, src_lengths, attention, ffn, norm1, norm2):
    mask = _pad(src_lengths, x.shape[1])
    h = norm1(x + attention(x, x, x, key_padding_mask=mask))
    return norm2(h + ffn(x))


def _enc_no_residual(x, src_lengths, attention, ffn, norm1, norm2):
    mask = _pad(src_lengths, x.shape[1])
    h = norm1(attention(x, x, x, key_padding_mask=mask))
    return norm2(ffn(h))


def _enc_one_norm(x, src_lengths, attention, ffn, norm1, norm2):
    mask = _pad(src_lengths, x.shape[1])
    h = norm1(x + attention(x, x, x, key_padding_mask=mask))
    return norm1(h + ffn(h))


def _encoder_case(name, seed, B, S, lengths):
    (attention, _), ffn, (norm1, norm2) = _modules(seed)
    return Case(name, (_randn(B, S, _D), torch.tensor(lengths), attention, ffn, norm1, norm2))


check_encoder_layer = Checker(
    "encoder_layer",
    reference=_encoder_layer,
    cases=[
        _encoder_case("one sentence, no padding (B=1, S=4)", 1, 1, 4, [4]),
        _encoder_case("two sentences, the second padded (lengths 5 and 3)", 2, 2, 5, [5, 3]),
        _encoder_case("three sentences, lengths 6, 1 and 4", 3, 3, 6, [6, 1, 4]),
    ],
    mistakes=[
        Mistake(
            "no padding mask",
            "the attention must not read the padded source positions: pass key_padding_mask, True where "
            "position >= length (torch.arange(S) >= src_lengths[:, None] builds it).",
            _enc_no_mask,
        ),
        Mistake(
            "padding mask off by one",
            "positions 0 .. length - 1 are real, so padding starts AT position length: "
            "mask arange(S) >= length, not >.",
            _enc_mask_off_by_one,
        ),
        Mistake(
            "padding mask inverted",
            "True means 'ignore this key': the mask is True at the padding, not at the real tokens.",
            _enc_mask_inverted,
        ),
        Mistake(
            "pre-LN instead of post-LN",
            "the paper's layer normalizes after the residual sum: H = LayerNorm(X + MultiHead(X, X, X)), "
            "out = LayerNorm(H + FFN(H)).",
            _enc_pre_ln,
        ),
        Mistake(
            "FFN applied to the layer's input",
            "the two sublayers are stacked, not side by side: the FFN reads H, the output of the first Add & Norm.",
            _enc_ffn_on_input,
        ),
        Mistake(
            "no residual connections",
            "each sublayer's output is ADDED to its input before the LayerNorm: LayerNorm(x + sublayer(x)).",
            _enc_no_residual,
        ),
        Mistake(
            "one LayerNorm for both sublayers",
            "each Add & Norm has its own LayerNorm with its own gain and bias: "
            "norm1 after the attention, norm2 after the FFN.",
            _enc_one_norm,
        ),
    ],
    atol=1e-9,
    rtol=1e-7,
    refuses=(
        "attnbook.transformer.*",
        "attnbook.masks.padding_mask",  # the text: build the padding mask from the lengths yourself
        "torch.nn.TransformerEncoderLayer",
        "torch.nn.TransformerEncoder",
        "torch.ops.aten._transformer_encoder_layer_fwd",
        "d2l.*",
    ),
)


# --- Exercise: a pre-LN decoder layer ---------------------------------------------------------------------


def _pre_ln_decoder_layer(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    norm1, norm2, norm3 = norms
    mask = _pad(src_lengths, memory.shape[1])
    h = norm1(y)
    y = y + self_attention(h, h, h, is_causal=True)
    y = y + cross_attention(norm2(y), memory, memory, key_padding_mask=mask)
    return y + ffn(norm3(y))


def _sublayers(memory, src_lengths, self_attention, cross_attention, ffn):
    """The decoder layer's three sublayers in order, each a function of the stream.

    The two mistakes below place the LayerNorms around them otherwise than pre-LN does.
    """
    mask = _pad(src_lengths, memory.shape[1])
    return (
        lambda h: self_attention(h, h, h, is_causal=True),
        lambda h: cross_attention(h, memory, memory, key_padding_mask=mask),
        ffn,
    )


def _dec_post_ln(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    for norm, sublayer in zip(norms, _sublayers(memory, src_lengths, self_attention, cross_attention, ffn)):
        y = norm(y + sublayer(y))
    return y


def _dec_normalized_residual(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    for norm, sublayer in zip(norms, _sublayers(memory, src_lengths, self_attention, cross_attention, ffn)):
        h = norm(y)
        y = h + sublayer(h)
    return y


def _dec_memory_normalized(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    norm1, norm2, norm3 = norms
    mask = _pad(src_lengths, memory.shape[1])
    h = norm1(y)
    y = y + self_attention(h, h, h, is_causal=True)
    m = norm2(memory)
    y = y + cross_attention(norm2(y), m, m, key_padding_mask=mask)
    return y + ffn(norm3(y))


def _dec_not_causal(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    norm1, norm2, norm3 = norms
    mask = _pad(src_lengths, memory.shape[1])
    h = norm1(y)
    y = y + self_attention(h, h, h)
    y = y + cross_attention(norm2(y), memory, memory, key_padding_mask=mask)
    return y + ffn(norm3(y))


def _dec_no_source_mask(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    norm1, norm2, norm3 = norms
    h = norm1(y)
    y = y + self_attention(h, h, h, is_causal=True)
    y = y + cross_attention(norm2(y), memory, memory)
    return y + ffn(norm3(y))


def _dec_final_norm(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    return norms[2](_pre_ln_decoder_layer(y, memory, src_lengths, self_attention, cross_attention, ffn, norms))


def _dec_cross_query_raw(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    norm1, norm2, norm3 = norms
    mask = _pad(src_lengths, memory.shape[1])
    h = norm1(y)
    y = y + self_attention(h, h, h, is_causal=True)
    y = y + cross_attention(y, memory, memory, key_padding_mask=mask)
    return y + ffn(norm3(y))


def _decoder_case(name, seed, B, T, S, lengths):
    (self_attention, cross_attention), ffn, norms = _modules(seed, norms=3)
    memory = _randn(B, S, _D)
    return Case(
        name, (_randn(B, T, _D), memory, torch.tensor(lengths), self_attention, cross_attention, ffn, tuple(norms))
    )


check_pre_ln_decoder_layer = Checker(
    "pre_ln_decoder_layer",
    reference=_pre_ln_decoder_layer,
    cases=[
        _decoder_case("one pair, no source padding (T=3, S=4)", 11, 1, 3, 4, [4]),
        _decoder_case("two pairs, source lengths 5 and 2 (T=4, S=5)", 12, 2, 4, 5, [5, 2]),
        _decoder_case("three pairs, T=5, S=3", 13, 3, 5, 3, [3, 1, 2]),
    ],
    mistakes=[
        Mistake(
            "post-LN instead",
            "that is the paper's (post-LN) layer; pre-LN normalizes what goes INTO each sublayer and adds the "
            "sublayer's output to the raw stream: y = y + sublayer(LayerNorm(y)).",
            _dec_post_ln,
        ),
        Mistake(
            "normalized residual",
            "the residual is the raw y, not LayerNorm(y): y + sublayer(LayerNorm(y)). The stream is never "
            "normalized inside a pre-LN stack; the stack's own final LayerNorm does it once.",
            _dec_normalized_residual,
        ),
        Mistake(
            "memory normalized by the layer",
            "norm2 belongs to the decoder's stream: the keys and values of the cross-attention are the memory "
            "as the encoder returned it (a pre-LN encoder normalizes it once, with its own final LayerNorm).",
            _dec_memory_normalized,
        ),
        Mistake(
            "no causal mask",
            "the decoder's self-attention must not see later target positions: call it with is_causal=True.",
            _dec_not_causal,
        ),
        Mistake(
            "source padding not masked",
            "in the cross-attention the keys are source positions: hide the padded ones with "
            "key_padding_mask = arange(S) >= src_lengths[:, None].",
            _dec_no_source_mask,
        ),
        Mistake(
            "a LayerNorm on the output",
            "a pre-LN layer returns the raw stream y + FFN(LayerNorm(y)); the one final LayerNorm belongs to the "
            "stack (Decoder.norm), after the last layer, not to every layer.",
            _dec_final_norm,
        ),
        Mistake(
            "cross-attention's query not normalized",
            "every sublayer reads the normalized stream, the cross-attention too: its queries are norm2(y); "
            "its keys and values are the memory.",
            _dec_cross_query_raw,
        ),
    ],
    atol=1e-9,
    rtol=1e-7,
    refuses=("attnbook.transformer.*", "torch.nn.TransformerDecoderLayer", "torch.nn.TransformerDecoder", "d2l.*"),
)


# --- Exercise: one mask for a decoder-only translator (source and target in one sequence) ---------------------


def _prefix_lm_mask(src_lengths, tgt_lengths, S, T, source_both_ways=True, source_reads_target=False, pads=(1, 1)):
    position = torch.arange(S + T)
    is_source = position < S
    ignore = position[None, :] > position[:, None]  # (S+T, S+T): a key after its query
    if source_both_ways:  # the source reads all of itself
        ignore = ignore & ~(is_source[:, None] & is_source[None, :])
    if source_reads_target:  # the mistake: source queries reading the target
        ignore = ignore & ~is_source[:, None]
    src_pad = (torch.arange(S)[None, :] >= src_lengths[:, None]) & bool(pads[0])  # (B, S)
    tgt_pad = (torch.arange(T)[None, :] >= tgt_lengths[:, None]) & bool(pads[1])  # (B, T)
    return ignore[None] | torch.cat([src_pad, tgt_pad], dim=1)[:, None, :]  # (B, S+T, S+T)


def _plm_reference(src_lengths, tgt_lengths, S, T):
    return _prefix_lm_mask(src_lengths, tgt_lengths, S, T)


def _plm_causal_everywhere(src_lengths, tgt_lengths, S, T):
    return _prefix_lm_mask(src_lengths, tgt_lengths, S, T, source_both_ways=False)


def _plm_source_reads_target(src_lengths, tgt_lengths, S, T):
    return _prefix_lm_mask(src_lengths, tgt_lengths, S, T, source_reads_target=True)


def _plm_source_padding_read(src_lengths, tgt_lengths, S, T):
    return _prefix_lm_mask(src_lengths, tgt_lengths, S, T, pads=(0, 1))


def _plm_target_padding_read(src_lengths, tgt_lengths, S, T):
    return _prefix_lm_mask(src_lengths, tgt_lengths, S, T, pads=(1, 0))


def _plm_encoder_decoder_pair(src_lengths, tgt_lengths, S, T):
    """The two masks of an encoder-decoder, pasted side by side: the source never reads itself."""
    mask = _prefix_lm_mask(src_lengths, tgt_lengths, S, T)
    mask[:, :S, :S] = True
    return mask


check_prefix_lm_mask = Checker(
    "prefix_lm_mask",
    reference=_plm_reference,
    cases=[
        Case("one pair, no padding, S=3, T=2", (torch.tensor([3]), torch.tensor([2]), 3, 2)),
        Case("padded both sides, S=4, T=3", (torch.tensor([4, 2]), torch.tensor([1, 3]), 4, 3)),
        Case("three pairs, S=3, T=4", (torch.tensor([1, 3, 2]), torch.tensor([4, 1, 2]), 3, 4)),
    ],
    mistakes=[
        Mistake(
            "causal everywhere",
            "the source is known before the first target word is written, so source positions read the whole real "
            "source, later words included, as an encoder's do; only the target is causal.",
            _plm_causal_everywhere,
        ),
        Mistake(
            "the source reads the target",
            "a source position must not read any target position: the target is what the model is asked to "
            "predict, and a source that saw it would pass it to every later word.",
            _plm_source_reads_target,
        ),
        Mistake(
            "source padding read",
            "the source's padding columns (j >= src_lengths[b], j < S) are not words: mask them for every query.",
            _plm_source_padding_read,
        ),
        Mistake(
            "target padding read",
            "the target's padding columns (S + t for t >= tgt_lengths[b]) are not words either: mask them too.",
            _plm_target_padding_read,
        ),
        Mistake(
            "the source cannot read itself",
            "in one sequence there is no encoder: the source reads itself through this mask, all of it, both ways.",
            _plm_encoder_decoder_pair,
        ),
    ],
    refuses=(
        "attnbook.transformer.*",
        "attnbook.attention.attention_mask",
        "torch.nn.Transformer.generate_square_subsequent_mask",
        "torch.nn.modules.transformer._generate_square_subsequent_mask",
        "torch.nn.attention.bias.causal_upper_left",
        "torch.nn.attention.bias.causal_lower_right",
        "torch.nn.attention.bias.CausalBias",
        "d2l.*",
    ),
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
    return (
        _count(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings)
        + tgt_vocab_size * d_model
    )


def _count_no_cross(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False):
    attention = 4 * d_model * d_model + 4 * d_model
    return _count(
        src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings
    ) - num_layers * (attention + 2 * d_model)


def _count_no_norms(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False):
    return (
        _count(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings)
        - num_layers * 5 * 2 * d_model
    )


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
            "h heads of width d_model / h share the same d_model x d_model projections: "
            "the count does not depend on h.",
            _count_per_head,
        ),
    ],
    refuses=(NO_MODEL, "attnbook.transformer.*", "attnbook.attention.*"),
)
