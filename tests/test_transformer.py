"""The Transformer: equal to torch.nn's layers and model, causal, blind to padding, cached decoding exact, clear errors.

Every comparison with PyTorch runs in float64 with random (non-trivial) weights
copied across, on padded batches, for both ``norm_first`` values, over several
randomized configurations; gradients are compared too.
"""

from __future__ import annotations

import math
import random
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.decode import Uncached, greedy_decode
from attnbook.masks import causal_mask, padding_mask
from attnbook.train import load_checkpoint, read_checkpoint, save_checkpoint, train
from attnbook.transformer import (
    AddNorm,
    AttentionMaps,
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    PositionwiseFFN,
    Transformer,
    TransformerConfig,
    TransformerState,
)
from toy_seq2seq import BOS, EOS, PAD, batches_of, one_thread, reversal_pairs  # noqa: F401 (fixture)

ATOL = 1e-11
SEEDS = [0, 1, 2, 3, 4]


# --- random configurations and inputs -------------------------------------------------------------


def _random_sizes(seed: int) -> dict:
    """A configuration drawn at random: width, heads, layers, FFN width, batch and lengths."""
    rng = random.Random(seed)
    heads = rng.choice([1, 2, 3, 4])
    d_model = heads * rng.choice([2, 4, 6, 8])
    return {
        "d_model": d_model,
        "num_heads": heads,
        "num_layers": rng.randint(1, 3),
        "d_ff": rng.choice([8, 16, 20, 40]),
        "B": rng.randint(2, 4),
        "S": rng.randint(3, 9),
        "T": rng.randint(2, 8),
        "rng": rng,
    }


def _lengths(rng: random.Random, B: int, L: int) -> torch.Tensor:
    """Lengths in 1..L with at least one full row and at least one padded row (when L > 1)."""
    lengths = [L] + [rng.randint(1, L) for _ in range(B - 1)]
    if L > 1:
        lengths[-1] = rng.randint(1, L - 1)
    rng.shuffle(lengths)
    return torch.tensor(lengths)


def _randomize(module: nn.Module, seed: int) -> None:
    """Give every parameter a random, non-trivial value (LayerNorm gains around 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=p.dtype)
            if p.dim() >= 2:
                p.copy_(noise / math.sqrt(p.shape[-1]))
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * noise)
            else:
                p.copy_(0.2 * noise)


def _x(seed: int, *shape) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# --- copying our weights into PyTorch's modules ---------------------------------------------------


def _copy_mha(ours, ref) -> None:
    ref.in_proj_weight.copy_(ours.in_proj.weight)
    ref.in_proj_bias.copy_(ours.in_proj.bias)
    ref.out_proj.weight.copy_(ours.out_proj.weight)
    ref.out_proj.bias.copy_(ours.out_proj.bias)


def _copy_linear_or_norm(ours, ref) -> None:
    ref.weight.copy_(ours.weight)
    ref.bias.copy_(ours.bias)


# Parameter names: ours -> torch.nn's, for layers; gradients are compared through this map.
ENCODER_LAYER_NAMES = {
    "self_attention.in_proj.weight": "self_attn.in_proj_weight",
    "self_attention.in_proj.bias": "self_attn.in_proj_bias",
    "self_attention.out_proj.weight": "self_attn.out_proj.weight",
    "self_attention.out_proj.bias": "self_attn.out_proj.bias",
    "ffn.w1.weight": "linear1.weight",
    "ffn.w1.bias": "linear1.bias",
    "ffn.w2.weight": "linear2.weight",
    "ffn.w2.bias": "linear2.bias",
    "add_norm1.norm.weight": "norm1.weight",
    "add_norm1.norm.bias": "norm1.bias",
    "add_norm2.norm.weight": "norm2.weight",
    "add_norm2.norm.bias": "norm2.bias",
}
DECODER_LAYER_NAMES = {
    **{k: v for k, v in ENCODER_LAYER_NAMES.items() if not k.startswith("add_norm2")},
    **{
        k.replace("self_attention", "cross_attention"): v.replace("self_attn", "multihead_attn")
        for k, v in ENCODER_LAYER_NAMES.items()
        if k.startswith("self_attention")
    },
    "add_norm2.norm.weight": "norm2.weight",
    "add_norm2.norm.bias": "norm2.bias",
    "add_norm3.norm.weight": "norm3.weight",
    "add_norm3.norm.bias": "norm3.bias",
}


def _name_map(ours: nn.Module) -> dict[str, str]:
    """Every parameter name of our stack or layer -> the name of the same tensor in torch.nn's module."""
    names = {}
    for name, _ in ours.named_parameters():
        if isinstance(ours, (EncoderLayer, DecoderLayer)):
            table = ENCODER_LAYER_NAMES if isinstance(ours, EncoderLayer) else DECODER_LAYER_NAMES
            names[name] = table[name]
        elif name.startswith("norm."):
            names[name] = name
        else:  # layers.{i}.rest
            _, i, rest = name.split(".", 2)
            table = ENCODER_LAYER_NAMES if isinstance(ours, Encoder) else DECODER_LAYER_NAMES
            names[name] = f"layers.{i}.{table[rest]}"
    return names


def _copy_into(ours: nn.Module, ref: nn.Module) -> None:
    ref_params = dict(ref.named_parameters())
    with torch.no_grad():
        for name, p in ours.named_parameters():
            ref_params[_name_map(ours)[name]].copy_(p)


def _assert_grads_equal(ours: nn.Module, ref: nn.Module, prefix: str = "") -> None:
    ref_params = dict(ref.named_parameters())
    mapping = _name_map(ours)
    for name, p in ours.named_parameters():
        q = ref_params[prefix + mapping[name]]
        assert p.grad is not None, f"no gradient reached {name}"
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=ATOL, msg=lambda m: f"gradient of {name}: {m}")


def _torch_encoder_layer(s, norm_first):
    return nn.TransformerEncoderLayer(
        s["d_model"],
        s["num_heads"],
        s["d_ff"],
        dropout=0.0,
        activation="relu",
        batch_first=True,
        norm_first=norm_first,
        dtype=torch.float64,
    )


def _torch_decoder_layer(s, norm_first):
    return nn.TransformerDecoderLayer(
        s["d_model"],
        s["num_heads"],
        s["d_ff"],
        dropout=0.0,
        activation="relu",
        batch_first=True,
        norm_first=norm_first,
        dtype=torch.float64,
    )


# --- the building blocks ---------------------------------------------------------------------------


def test_ffn_is_two_linear_maps_with_relu_between_the_same_at_every_position():
    torch.manual_seed(0)
    ffn = PositionwiseFFN(6, 10).double()
    x = _x(1, 2, 5, 6)
    by_hand = torch.relu(x @ ffn.w1.weight.T + ffn.w1.bias) @ ffn.w2.weight.T + ffn.w2.bias
    torch.testing.assert_close(ffn(x), by_hand, rtol=0, atol=1e-14)
    # position-wise: a 1x1 convolution over the sequence, and any position alone gives the same
    conv1 = F.conv1d(x.transpose(1, 2), ffn.w1.weight[:, :, None], ffn.w1.bias)
    conv = F.conv1d(torch.relu(conv1), ffn.w2.weight[:, :, None], ffn.w2.bias).transpose(1, 2)
    torch.testing.assert_close(ffn(x), conv, rtol=0, atol=1e-13)
    # one row alone or among ten: another shape, so another kernel may round another way (Intel AMX does)
    torch.testing.assert_close(ffn(x[:, 3:4]), ffn(x)[:, 3:4], rtol=1e-14, atol=1e-15)
    assert ffn.w1.weight.shape == (10, 6) and ffn.w2.weight.shape == (6, 10)


@pytest.mark.parametrize("norm_first", [False, True])
def test_add_norm_post_and_pre(norm_first):
    torch.manual_seed(0)
    add_norm = AddNorm(8, norm_first=norm_first).double()
    _randomize(add_norm, 3)
    x = _x(2, 3, 4, 8)
    f = nn.Linear(8, 8).double()
    ln = add_norm.norm
    expected = x + f(ln(x)) if norm_first else ln(x + f(x))
    torch.testing.assert_close(add_norm(x, f), expected, rtol=1e-14, atol=1e-15)
    # extras returned by the sublayer pass through
    y, extra = add_norm(x, lambda h: (f(h), "weights"))
    assert extra == "weights"
    torch.testing.assert_close(y, expected, rtol=1e-14, atol=1e-15)
    # post-LN output is normalized (before gain and bias); pre-LN output is not
    z = AddNorm(8, norm_first=norm_first).double()(x, f)
    if not norm_first:
        torch.testing.assert_close(z.mean(-1), torch.zeros(3, 4, dtype=torch.float64), rtol=0, atol=1e-12)


def test_layer_norm_epsilon_is_inside_the_square_root():
    x = _x(4, 2, 3, 8)
    ln = AddNorm(8, eps=1e-5).double().norm
    by_hand = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    torch.testing.assert_close(ln(x), by_hand, rtol=0, atol=1e-14)


# --- equality with torch.nn: layers ------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("seed", SEEDS)
def test_encoder_layer_equals_torch_with_gradients(seed, norm_first):
    s = _random_sizes(seed)
    ours = EncoderLayer(s["d_model"], s["num_heads"], s["d_ff"], norm_first=norm_first).double()
    _randomize(ours, seed)
    ref = _torch_encoder_layer(s, norm_first)
    _copy_into(ours, ref)
    B, S = s["B"], s["S"]
    mask = padding_mask(_lengths(s["rng"], B, S), S)
    x1 = _x(seed + 10, B, S, s["d_model"]).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    got = ours(x1, mask)
    expected = ref(x2, src_key_padding_mask=mask)
    torch.testing.assert_close(got, expected, rtol=0, atol=ATOL)
    grad = _x(seed + 20, *got.shape)
    got.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=0, atol=ATOL)
    _assert_grads_equal(ours, ref)
    # the weights path gives the same output
    out, w = ours(x1, mask, need_weights=True)
    torch.testing.assert_close(out, got, rtol=0, atol=ATOL)
    assert w.shape == (B, s["num_heads"], S, S)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("seed", SEEDS)
def test_decoder_layer_equals_torch_with_gradients(seed, norm_first):
    s = _random_sizes(seed)
    ours = DecoderLayer(s["d_model"], s["num_heads"], s["d_ff"], norm_first=norm_first).double()
    _randomize(ours, seed + 1)
    ref = _torch_decoder_layer(s, norm_first)
    _copy_into(ours, ref)
    B, S, T = s["B"], s["S"], s["T"]
    src_padding_mask = padding_mask(_lengths(s["rng"], B, S), S)
    tgt_padding_mask = padding_mask(_lengths(s["rng"], B, T), T)
    x1 = _x(seed + 30, B, T, s["d_model"]).requires_grad_()
    m1 = _x(seed + 31, B, S, s["d_model"]).requires_grad_()
    x2, m2 = (t.detach().clone().requires_grad_() for t in (x1, m1))
    got = ours(x1, m1, src_padding_mask, tgt_padding_mask)
    expected = ref(
        x2,
        m2,
        tgt_mask=causal_mask(T),
        tgt_key_padding_mask=tgt_padding_mask,
        memory_key_padding_mask=src_padding_mask,
        tgt_is_causal=True,
    )
    torch.testing.assert_close(got, expected, rtol=0, atol=ATOL)
    grad = _x(seed + 40, *got.shape)
    got.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=0, atol=ATOL)
    torch.testing.assert_close(m1.grad, m2.grad, rtol=0, atol=ATOL)
    _assert_grads_equal(ours, ref)
    out, w_self, w_cross = ours(x1, m1, src_padding_mask, tgt_padding_mask, need_weights=True)
    torch.testing.assert_close(out, got, rtol=0, atol=ATOL)
    assert w_self.shape == (B, s["num_heads"], T, T) and w_cross.shape == (B, s["num_heads"], T, S)
    assert torch.all(w_self.triu(diagonal=1) == 0), "a query attended to a later position"
    assert torch.all(w_cross.masked_select(src_padding_mask[:, None, None, :].expand_as(w_cross)) == 0)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_encoder_layer_equals_torch_in_eval_mode_without_grad(norm_first):
    """In eval mode without gradients PyTorch takes its fused fast path; real positions still agree."""
    s = _random_sizes(7)
    ours = EncoderLayer(s["d_model"], s["num_heads"], s["d_ff"], norm_first=norm_first).double().eval()
    _randomize(ours, 7)
    ref = _torch_encoder_layer(s, norm_first).eval()
    _copy_into(ours, ref)
    mask = padding_mask(torch.tensor([s["S"], 2]), s["S"])
    x = _x(3, 2, s["S"], s["d_model"])
    with torch.no_grad():
        got, expected = ours(x, mask), ref(x, src_key_padding_mask=mask)
    torch.testing.assert_close(got[~mask], expected[~mask], rtol=0, atol=ATOL)


# --- equality with torch.nn: stacks and the whole model ----------------------------------------------


def _torch_transformer(s, norm_first):
    with warnings.catch_warnings():  # torch warns that a pre-LN encoder cannot use nested tensors
        warnings.simplefilter("ignore", UserWarning)
        ref = nn.Transformer(
            s["d_model"],
            s["num_heads"],
            s["num_layers"],
            s["num_layers"],
            s["d_ff"],
            dropout=0.0,
            activation="relu",
            batch_first=True,
            norm_first=norm_first,
            dtype=torch.float64,
        )
    if not norm_first:
        # torch.nn.Transformer always ends both stacks with a LayerNorm; the paper's post-LN model
        # has none (every layer already ends with one), and neither do we.
        ref.encoder.norm = None
        ref.decoder.norm = None
    return ref


class TorchTransformer(nn.Module):
    """Our embeddings, positions and tied output around torch.nn.Transformer: the reference model."""

    def __init__(self, ours: Transformer, core: nn.Transformer) -> None:
        super().__init__()
        self.ours, self.core = ours, core

    def forward(self, src, src_padding_mask, tgt_in):
        o = self.ours
        x = o.positional(o.src_embedding(src) * o.scale)
        y = o.positional(o.tgt_embedding(tgt_in) * o.scale)
        T = tgt_in.shape[1]
        out = self.core(
            x,
            y,
            tgt_mask=causal_mask(T),
            src_key_padding_mask=src_padding_mask,
            memory_key_padding_mask=src_padding_mask,
            tgt_is_causal=True,
        )
        return F.linear(out, o.tgt_embedding.weight)


def _model_and_batch(seed: int, norm_first: bool, share: bool = False, **overrides):
    s = _random_sizes(seed)
    V_src = s["rng"].randint(5, 12)
    V_tgt = V_src if share else s["rng"].randint(5, 12)
    config = TransformerConfig(
        V_src,
        V_tgt,
        d_model=s["d_model"],
        num_heads=s["num_heads"],
        num_layers=s["num_layers"],
        d_ff=s["d_ff"],
        dropout=0.0,
        norm_first=norm_first,
        share_embeddings=share,
        max_len=32,
        **overrides,
    )
    torch.manual_seed(seed)
    model = Transformer(config).double()
    _randomize(model, seed + 100)
    g = torch.Generator().manual_seed(seed)
    B, S, T = s["B"], s["S"], s["T"]
    src_lengths, tgt_lengths = _lengths(s["rng"], B, S), _lengths(s["rng"], B, T)
    src_padding_mask, tgt_padding_mask = padding_mask(src_lengths, S), padding_mask(tgt_lengths, T)
    src = torch.randint(1, V_src, (B, S), generator=g).masked_fill(src_padding_mask, PAD)
    tgt_in = torch.randint(1, V_tgt, (B, T), generator=g).masked_fill(tgt_padding_mask, PAD)
    return model, s, src, src_padding_mask, tgt_in, tgt_padding_mask


def test_a_stack_takes_its_layers_options_by_position_or_by_name_and_runs_their_inputs_either_way():
    d, h, ff = 8, 2, 16
    by_position = Decoder(d, h, 2, ff, 0.0, True)  # dropout, norm_first as the layer takes them
    torch.manual_seed(0)
    by_name = Decoder(d, h, 2, ff, dropout=0.0, norm_first=True)
    torch.manual_seed(0)
    again = Decoder(d, h, 2, ff, 0.0, True)
    assert by_position.norm is not None and by_name.norm is not None  # pre-LN: the final LayerNorm
    assert Decoder(d, h, 2, ff).norm is None and Encoder(d, h, 1, ff, 0.0, False).norm is None
    assert all(layer.add_norm3.norm_first for layer in by_name.layers)
    x, memory = torch.randn(2, 3, d), torch.randn(2, 4, d)
    memory_padding_mask = torch.tensor([[False, False, False, True], [False, False, False, False]])
    positional = again(x, memory, memory_padding_mask)
    named = again(x, memory, memory_padding_mask=memory_padding_mask)
    torch.testing.assert_close(named, positional, rtol=0, atol=0)  # exact: the same operations on the same inputs
    assert not torch.allclose(positional, again(x, memory)), "the padding mask passed by position was not used"
    with pytest.raises(TypeError, match="bogus"):
        Encoder(d, h, 1, ff, bogus=1)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("seed", SEEDS)
def test_stacks_equal_torch_with_gradients(seed, norm_first):
    s = _random_sizes(seed + 50)
    args = (s["d_model"], s["num_heads"], s["num_layers"], s["d_ff"])
    encoder, decoder = Encoder(*args, norm_first=norm_first).double(), Decoder(*args, norm_first=norm_first).double()
    _randomize(encoder, seed)
    _randomize(decoder, seed + 1)
    ref = _torch_transformer(s, norm_first)
    _copy_into(encoder, ref.encoder)
    _copy_into(decoder, ref.decoder)
    B, S, T = s["B"], s["S"], s["T"]
    src_padding_mask = padding_mask(_lengths(s["rng"], B, S), S)
    x1, y1 = _x(seed, B, S, s["d_model"]).requires_grad_(), _x(seed + 1, B, T, s["d_model"]).requires_grad_()
    x2, y2 = (t.detach().clone().requires_grad_() for t in (x1, y1))
    got = decoder(y1, encoder(x1, src_padding_mask), src_padding_mask)
    expected = ref(
        x2,
        y2,
        tgt_mask=causal_mask(T),
        src_key_padding_mask=src_padding_mask,
        memory_key_padding_mask=src_padding_mask,
        tgt_is_causal=True,
    )
    torch.testing.assert_close(got, expected, rtol=0, atol=ATOL)
    grad = _x(seed + 2, *got.shape)
    got.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=0, atol=ATOL)
    torch.testing.assert_close(y1.grad, y2.grad, rtol=0, atol=ATOL)
    _assert_grads_equal(encoder, ref.encoder)
    _assert_grads_equal(decoder, ref.decoder)
    assert (encoder.norm is not None) == norm_first and (decoder.norm is not None) == norm_first


@pytest.mark.parametrize("share", [False, True], ids=["separate-embeddings", "shared-embeddings"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("seed", SEEDS)
def test_model_equals_torch_transformer_with_gradients(seed, norm_first, share):
    model, s, src, src_padding_mask, tgt_in, _ = _model_and_batch(seed, norm_first, share)
    twin, _, _, _, _, _ = _model_and_batch(seed, norm_first, share)  # same weights, its own gradients
    core = _torch_transformer(s, norm_first)
    _copy_into(twin.encoder, core.encoder)
    _copy_into(twin.decoder, core.decoder)
    ref = TorchTransformer(twin, core)
    got, expected = model(src, src_padding_mask, tgt_in), ref(src, src_padding_mask, tgt_in)
    assert got.shape == (s["B"], s["T"], model.config.tgt_vocab_size)
    torch.testing.assert_close(got, expected, rtol=0, atol=ATOL)
    target = torch.randint(0, model.config.tgt_vocab_size, got.shape[:2], generator=torch.Generator().manual_seed(seed))
    F.cross_entropy(got.flatten(0, 1), target.flatten()).backward()
    F.cross_entropy(expected.flatten(0, 1), target.flatten()).backward()
    _assert_grads_equal(model.encoder, core.encoder)
    _assert_grads_equal(model.decoder, core.decoder)
    for name in ("src_embedding", "tgt_embedding"):
        torch.testing.assert_close(getattr(model, name).weight.grad, getattr(twin, name).weight.grad, rtol=0, atol=ATOL)


def test_output_is_tied_and_shared_as_configured():
    tied = Transformer(TransformerConfig(7, 9, d_model=8, num_heads=2, num_layers=1, d_ff=16))
    assert tied.output.weight is tied.tgt_embedding.weight and tied.src_embedding is not tied.tgt_embedding
    assert tied.output.bias is None
    shared = Transformer(TransformerConfig(9, 9, d_model=8, num_heads=2, num_layers=1, d_ff=16, share_embeddings=True))
    assert shared.src_embedding.weight is shared.tgt_embedding.weight is shared.output.weight
    n_tied = sum(p.numel() for p in tied.parameters())
    n_shared = sum(p.numel() for p in shared.parameters())
    assert n_tied - n_shared == 7 * 8  # the source matrix is the only difference


def _parameter_count(V_src, V_tgt, d, h, L, d_ff, shared):
    attention = 4 * d * d + 4 * d
    ffn = 2 * d * d_ff + d_ff + d
    norm = 2 * d
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    embeddings = V_tgt * d + (0 if shared else V_src * d)  # the output projection is the target matrix
    return embeddings + L * (encoder_layer + decoder_layer)


@pytest.mark.parametrize("norm_first", [False, True])
def test_parameter_count_of_the_paper_base_model(norm_first):
    config = TransformerConfig(37000, 37000, share_embeddings=True, norm_first=norm_first)
    with torch.device("meta"):  # shapes only: no memory, no time spent on 63 M random numbers
        model = Transformer(config)
    count = sum(p.numel() for p in model.parameters())
    expected = _parameter_count(37000, 37000, 512, 8, 6, 2048, True) + (2 * 2 * 512 if norm_first else 0)
    assert count == expected
    if not norm_first:
        assert count == 63_082_496
    small = Transformer(TransformerConfig(11, 13, d_model=12, num_heads=3, num_layers=2, d_ff=20))
    assert sum(p.numel() for p in small.parameters()) == _parameter_count(11, 13, 12, 3, 2, 20, False)


def test_embedding_initialization_keeps_logits_moderate():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(1000, 1000, d_model=256, num_heads=8, num_layers=2, d_ff=512, dropout=0.0))
    std = model.tgt_embedding.weight.std().item()
    assert abs(std - 256**-0.5) < 0.05 * 256**-0.5
    src = torch.randint(4, 1000, (4, 10))
    with torch.no_grad():
        logits = model(src, None, src)
    assert logits.std().item() < 3.0, "scaled embeddings of std 1 and a tied output should give logits of order 1"


# --- what the masks promise ---------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("seed", SEEDS)
def test_no_logit_depends_on_a_later_target_token(seed, norm_first):
    model, s, src, src_padding_mask, tgt_in, _ = _model_and_batch(seed, norm_first)
    model.eval()
    base = model(src, src_padding_mask, tgt_in)
    g = torch.Generator().manual_seed(seed + 7)
    V = model.config.tgt_vocab_size
    for t in range(s["T"] - 1):
        changed = tgt_in.clone()
        changed[:, t + 1 :] = torch.randint(0, V, changed[:, t + 1 :].shape, generator=g)
        torch.testing.assert_close(
            model(src, src_padding_mask, changed)[:, : t + 1], base[:, : t + 1], rtol=0, atol=ATOL
        )
    # and through gradients: the decoder's output at t has no derivative with respect to inputs after t
    memory = model.encode(src, src_padding_mask).detach()
    y = _x(seed, s["B"], s["T"], s["d_model"]).requires_grad_()
    out = model.decoder(y, memory, src_padding_mask)
    for t in range(s["T"]):
        (grad,) = torch.autograd.grad(out[:, t].sum(), y, retain_graph=True)
        assert torch.all(grad[:, t + 1 :] == 0), f"the output at {t} depends on a later input"
        assert torch.all(grad[:, : t + 1].abs().sum(-1) > 0), f"the output at {t} ignores an earlier input"


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("seed", SEEDS)
def test_padding_content_never_changes_real_logits(seed, norm_first):
    model, s, src, src_padding_mask, tgt_in, tgt_padding_mask = _model_and_batch(seed, norm_first)
    model.eval()
    g = torch.Generator().manual_seed(seed + 3)
    noisy_src = torch.where(
        src_padding_mask, torch.randint(0, model.config.src_vocab_size, src.shape, generator=g), src
    )
    noisy_tgt = torch.where(
        tgt_padding_mask, torch.randint(0, model.config.tgt_vocab_size, tgt_in.shape, generator=g), tgt_in
    )
    # exact: token ids are integers, and new ones were drawn wherever there is padding
    assert not torch.equal(noisy_src, src) or not src_padding_mask.any()
    real = ~tgt_padding_mask
    base = model(src, src_padding_mask, tgt_in)
    for tgt_padding in (None, tgt_padding_mask):
        got = model(noisy_src, src_padding_mask, noisy_tgt, tgt_padding_mask=tgt_padding)
        torch.testing.assert_close(got[real], base[real], rtol=0, atol=ATOL)
    # a sentence padded in a batch is translated as it would be alone
    for b in range(s["B"]):
        n_src, n_tgt = int(real_len(src_padding_mask[b])), int(real_len(tgt_padding_mask[b]))
        alone = model(src[b : b + 1, :n_src], None, tgt_in[b : b + 1, :n_tgt])
        torch.testing.assert_close(alone[0], base[b, :n_tgt], rtol=0, atol=ATOL)


def real_len(mask_row: torch.Tensor) -> int:
    return int((~mask_row).sum())


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_encode_then_decode_equals_forward(seed):
    model, _, src, src_padding_mask, tgt_in, _ = _model_and_batch(seed, seed % 2 == 1)
    model.eval()
    memory = model.encode(src, src_padding_mask)
    torch.testing.assert_close(
        model.decode(tgt_in, memory, src_padding_mask), model(src, src_padding_mask, tgt_in), rtol=1e-13, atol=1e-14
    )
    logits, maps = model(src, src_padding_mask, tgt_in, need_weights=True)
    torch.testing.assert_close(logits, model(src, src_padding_mask, tgt_in), rtol=0, atol=ATOL)
    L, h = model.config.num_layers, model.config.num_heads
    B, S, T = src.shape[0], src.shape[1], tgt_in.shape[1]
    assert isinstance(maps, AttentionMaps) and len(maps.encoder) == len(maps.decoder) == len(maps.cross) == L
    assert (
        maps.encoder[0].shape == (B, h, S, S)
        and maps.decoder[0].shape == (B, h, T, T)
        and maps.cross[0].shape == (B, h, T, S)
    )
    for w in (*maps.encoder, *maps.cross):
        assert torch.all(w.masked_select(src_padding_mask[:, None, None, :].expand_as(w)) == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)), rtol=0, atol=1e-12)


# --- decoding one token at a time: the key-value cache -----------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("seed", SEEDS)
def test_cached_steps_equal_forward_and_uncached_steps(seed, norm_first):
    model, s, src, src_padding_mask, tgt_in, _ = _model_and_batch(seed, norm_first)
    model.eval()
    logits, maps = model(src, src_padding_mask, tgt_in, need_weights=True)
    states = {cache: model.start(src, src_padding_mask, cache=cache) for cache in (True, False)}
    for t in range(s["T"]):
        for cache in (True, False):
            step_logits, states[cache] = model.step(tgt_in[:, t], states[cache])
            torch.testing.assert_close(
                step_logits, logits[:, t], rtol=0, atol=ATOL, msg=lambda m: f"cache={cache}, step {t}: {m}"
            )
            expected_attention = maps.cross[-1][:, :, t].mean(dim=1)
            torch.testing.assert_close(states[cache].attention, expected_attention, rtol=0, atol=ATOL)
    cached = states[True]
    h, d_k = model.config.num_heads, model.config.d_model // model.config.num_heads
    assert cached.position == s["T"] and torch.equal(cached.tokens, tgt_in)
    assert len(cached.keys) == model.config.num_layers
    assert all(k.shape == (s["B"], h, s["T"], d_k) for k in cached.keys + cached.values)
    assert all(k.shape == (s["B"], h, s["S"], d_k) for k in cached.memory_keys + cached.memory_values)
    assert states[False].keys == [] and not states[False].cached


def test_cross_keys_values_are_computed_once_per_sentence(monkeypatch):
    model, s, src, src_padding_mask, tgt_in, _ = _model_and_batch(0, False)
    model.eval()
    calls = []
    for layer in model.decoder.layers:
        original = layer.cross_attention.project_key_value
        monkeypatch.setattr(layer.cross_attention, "project_key_value", lambda m, f=original: calls.append(1) or f(m))
    state = model.start(src, src_padding_mask)
    assert len(calls) == model.config.num_layers
    for t in range(s["T"]):
        _, state = model.step(tgt_in[:, t], state)
    assert len(calls) == model.config.num_layers, "a step recomputed the source keys and values"


@pytest.mark.parametrize("cache", [True, False], ids=["cached", "uncached"])
@pytest.mark.parametrize("seed", SEEDS[:3])
def test_select_expands_and_reorders_rows(seed, cache):
    model, s, src, src_padding_mask, tgt_in, _ = _model_and_batch(seed, seed % 2 == 0)
    model.eval()
    B, T = s["B"], s["T"]
    split = max(1, T // 2)
    state = model.start(src, src_padding_mask, cache=cache)
    for t in range(split):
        _, state = model.step(tgt_in[:, t], state)
    index = torch.tensor([B - 1, 0, 0, B - 1, 1 % B])  # repeats (beams) and a new order
    picked = state.select(index)
    assert picked.batch_size == len(index) and picked.position == split and picked.cached == cache
    expected = model(src[index], src_padding_mask[index], tgt_in[index])
    for t in range(split, T):
        logits, picked = model.step(tgt_in[index, t], picked)
        torch.testing.assert_close(logits, expected[:, t], rtol=0, atol=ATOL)
    # selecting leaves the original state untouched
    logits, _ = model.step(tgt_in[:, split], state)
    torch.testing.assert_close(logits, model(src, src_padding_mask, tgt_in)[:, split], rtol=0, atol=ATOL)
    # a state selected right after start (expanding a batch into beams) decodes like the expanded batch
    fresh = model.start(src, src_padding_mask, cache=cache).select(index)
    logits, _ = model.step(tgt_in[index, 0], fresh)
    torch.testing.assert_close(logits, expected[:, 0], rtol=0, atol=ATOL)


class _Uncached(nn.Module):
    """The same model, decoding without the key-value cache."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def start(self, src, src_padding_mask=None):
        return self.model.start(src, src_padding_mask, cache=False)

    def step(self, tokens, state):
        return self.model.step(tokens, state)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_greedy_decoding_is_the_same_cached_and_uncached(norm_first):
    model, s, src, src_padding_mask, _, _ = _model_and_batch(3, norm_first)
    cached = greedy_decode(model, src, src_padding_mask, max_len=12, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    uncached = greedy_decode(_Uncached(model), src, src_padding_mask, max_len=12, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    assert torch.equal(cached.tokens, uncached.tokens) and torch.equal(cached.lengths, uncached.lengths)
    assert cached.attention is not None and cached.attention.shape == (s["B"], cached.tokens.shape[1], s["S"])
    torch.testing.assert_close(cached.attention, uncached.attention, rtol=0, atol=ATOL)
    # and the library's generic reference, which re-runs the whole model on the prefix at every step
    generic = greedy_decode(Uncached(model), src, src_padding_mask, max_len=12, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    assert torch.equal(cached.tokens, generic.tokens)
    # teacher forcing the decoded tokens reproduces the greedy choices (which never write <pad> or <bos>)
    tgt_in = torch.cat([torch.full((s["B"], 1), BOS), cached.tokens[:, :-1]], dim=1)
    logits = model(src, src_padding_mask, tgt_in).index_fill(-1, torch.tensor([PAD, BOS]), float("-inf"))
    for b in range(s["B"]):
        n = int(cached.lengths[b])
        assert torch.equal(logits[b, :n].argmax(-1), cached.tokens[b, :n])


def test_float32_cached_decoding_agrees():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(20, 20, d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.0)).eval()
    src = torch.randint(4, 20, (3, 9))
    tgt = torch.randint(4, 20, (3, 7))
    logits = model(src, None, tgt)
    state = model.start(src)
    for t in range(7):
        step, state = model.step(tgt[:, t], state)
        torch.testing.assert_close(step, logits[:, t], rtol=1e-4, atol=1e-5)


# --- training, checkpoints, dropout ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_train_learns_reversal_and_checkpoint_round_trip(tmp_path, norm_first):
    pairs = reversal_pairs(384, vocab_size=10, max_len=6, seed=1)
    train_batches, valid = batches_of(pairs[:320], 32), batches_of(pairs[320:], 64)
    torch.manual_seed(0)
    config = TransformerConfig(
        10, 10, d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.0, norm_first=norm_first, max_len=16
    )
    model = Transformer(config)
    history = train(model, train_batches, valid, epochs=5, lr=5e-3, plot=False, verbose=False)
    losses = [e.valid_loss for e in history.epochs]
    assert losses[-1] < 0.6 * losses[0], f"validation loss did not fall enough: {losses}"
    path = save_checkpoint(tmp_path / "transformer.pt", model, note="ch7")
    rebuilt = Transformer(TransformerConfig(**read_checkpoint(path)["config"]))
    assert load_checkpoint(path, rebuilt) == {"note": "ch7"}
    assert rebuilt.output.weight is rebuilt.tgt_embedding.weight, "loading must keep the tie"
    batch = valid[0]
    model.eval()
    rebuilt.eval()
    torch.testing.assert_close(
        rebuilt(batch.src, batch.src_padding_mask, batch.tgt_in), model(batch.src, batch.src_padding_mask, batch.tgt_in)
    )
    decoded = greedy_decode(rebuilt, batch.src, batch.src_padding_mask, max_len=10)
    assert decoded.tokens.shape[0] == batch.src.shape[0]


def test_dropout_acts_only_in_training_and_where_configured():
    torch.manual_seed(0)
    config = TransformerConfig(12, 12, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.3)
    model = Transformer(config)
    src = torch.randint(4, 12, (2, 6))
    model.train()
    # exact: two draws of dropout's mask drop other units, on every processor
    assert not torch.equal(model(src, None, src), model(src, None, src))
    model.eval()
    assert torch.equal(model(src, None, src), model(src, None, src))
    drops = {name: m.p for name, m in model.named_modules() if isinstance(m, nn.Dropout)}
    assert drops["positional.dropout"] == 0.3 and drops["encoder.layers.0.add_norm1.dropout"] == 0.3
    assert drops["encoder.layers.0.ffn.dropout"] == 0.0  # the paper drops nowhere else
    assert model.encoder.layers[0].self_attention.dropout == 0.0
    torch_like = Transformer(
        TransformerConfig(
            12, 12, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.3, attention_dropout=0.3, ffn_dropout=0.3
        )
    )
    assert (
        torch_like.decoder.layers[0].cross_attention.dropout == 0.3
        and torch_like.decoder.layers[0].ffn.dropout.p == 0.3
    )


# --- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"d_model": 30, "num_heads": 4}, ValueError, "divisible by num_heads"),
        ({"d_model": 9, "num_heads": 3}, ValueError, "even"),
        ({"src_vocab_size": 0}, ValueError, "src_vocab_size must be >= 1"),
        ({"tgt_vocab_size": 7.5}, TypeError, "tgt_vocab_size must be an int"),
        ({"share_embeddings": True, "tgt_vocab_size": 11}, ValueError, "sizes differ"),
        ({"pad_id": 10}, ValueError, "pad_id 10 is outside"),
        ({"dropout": 1.0}, ValueError, "dropout must be a probability"),
        ({"norm_first": 1}, TypeError, "norm_first must be True or False"),
        ({"num_layers": 0}, ValueError, "num_layers must be >= 1"),
        ({"max_len": 0}, ValueError, "max_len must be >= 1"),
    ],
)
def test_bad_configurations_are_named(kwargs, error, words):
    base = {"src_vocab_size": 10, "tgt_vocab_size": 10, "d_model": 8, "num_heads": 2, "num_layers": 1, "d_ff": 16}
    with pytest.raises(error) as info:
        TransformerConfig(**{**base, **kwargs})
    assert words in str(info.value)


def test_transformer_needs_its_config():
    with pytest.raises(TypeError, match="TransformerConfig"):
        Transformer({"src_vocab_size": 10})


@pytest.fixture
def small():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(10, 12, d_model=8, num_heads=2, num_layers=1, d_ff=16, max_len=8)).eval()
    src = torch.randint(4, 10, (2, 5))
    return model, src, padding_mask(torch.tensor([5, 3]), 5)


def test_bad_masks_are_named(small):
    model, src, mask = small
    tgt = torch.randint(4, 12, (2, 4))
    with pytest.raises(TypeError, match="src_padding_mask must be a bool tensor"):
        model(src, mask.long(), tgt)
    with pytest.raises(ValueError, match="src_padding_mask must have the shape of its tokens"):
        model(src, mask[:, :4], tgt)
    with pytest.raises(ValueError, match="src_padding_mask must have the shape of its tokens"):
        model(src, mask[None], tgt)
    with pytest.raises(TypeError, match="tgt_padding_mask must be a bool tensor"):
        model(src, mask, tgt, tgt_padding_mask=torch.zeros(2, 4))
    with pytest.raises(ValueError, match="tgt_padding_mask must have the shape"):
        model(src, mask, tgt, tgt_padding_mask=torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="all padding"):
        model(src, torch.tensor([[False] * 5, [True] * 5]), tgt)
    with pytest.raises(TypeError, match="src_padding_mask must be a bool tensor"):
        model.start(src, mask.float())


def test_bad_tokens_are_named(small):
    model, src, mask = small
    tgt = torch.randint(4, 12, (2, 4))
    with pytest.raises(IndexError, match=r"src token ids contain the index 10, outside the vocabulary of size 10"):
        model(src.masked_fill(mask, 10), mask, tgt)
    with pytest.raises(IndexError, match=r"tgt_in token ids contain the index -1"):
        model(src, mask, tgt.masked_fill(tgt == tgt[0, 0], -1))
    with pytest.raises(TypeError, match="integer token indices"):
        model(src.float(), mask, tgt)
    with pytest.raises(ValueError, match=r"src must have shape \(B, length\)"):
        model.encode(src[0])
    with pytest.raises(ValueError, match="tgt_in must have shape"):
        model(src, mask, tgt[:1])
    with pytest.raises(ValueError, match="memory must have shape"):
        model.decode(tgt, torch.zeros(2, 5, 6))


def test_too_long_sequences_are_named(small):
    model, src, mask = small
    long = torch.randint(4, 10, (2, 9))
    with pytest.raises(ValueError, match=r"src reaches position 8.*max_len=8"):
        model(long, None, long[:, :3])
    with pytest.raises(ValueError, match=r"tgt_in reaches position 8.*max_len=8"):
        model(src, mask, torch.randint(4, 12, (2, 9)))
    for cache in (True, False):
        state = model.start(src, mask, cache=cache)
        tokens = torch.full((2,), BOS)
        for _ in range(8):  # positions 0..7 are fine
            logits, state = model.step(tokens, state)
            tokens = logits.argmax(-1)
        with pytest.raises(ValueError, match=r"cannot decode position 8.*max_len=8"):
            model.step(tokens, state)


def test_bad_steps_and_selections_are_named(small):
    model, src, mask = small
    state = model.start(src, mask)
    with pytest.raises(ValueError, match=r"one token per sentence, shape \(B,\)"):
        model.step(torch.ones(2, 1, dtype=torch.long), state)
    with pytest.raises(ValueError, match="3 tokens for a state of 2 sentences"):
        model.step(torch.ones(3, dtype=torch.long), state)
    with pytest.raises(IndexError, match="outside the vocabulary"):
        model.step(torch.tensor([1, 12]), state)
    with pytest.raises(TypeError, match="TransformerState"):
        model.step(torch.ones(2, dtype=torch.long), {"memory": None})
    with pytest.raises(IndexError, match=r"row indices must be in \[0, 2\)"):
        state.select(torch.tensor([0, 2]))
    with pytest.raises(IndexError, match=r"row indices must be in \[0, 2\)"):
        state.select(torch.tensor([-1, 0]))
    with pytest.raises(TypeError, match="1-D tensor of integer row indices"):
        state.select(torch.tensor([True, False]))
    assert isinstance(state.select(torch.tensor([1])), TransformerState)


def test_layers_reject_bad_widths():
    with pytest.raises(ValueError, match="divisible"):
        EncoderLayer(10, 3, 16)
    with pytest.raises(ValueError, match="d_ff must be an int >= 1"):
        PositionwiseFFN(8, 0)
    layer = DecoderLayer(8, 2, 16)
    with pytest.raises(ValueError, match="width 6"):
        layer(torch.zeros(1, 3, 8), torch.zeros(1, 4, 6))
