"""The cheating learner: one-line answers that call code which already does the job must all be refused.

For every checked exercise whose answer exists as code (in the library, PyTorch, d2l or sacreBLEU), each entry of
``CHEATS`` is the whole body of a learner's function, reaching the packaged answer one way or another: under
another module's name (``torch._C._nn``, ``torch.ops.aten``, ``torch.special``, ``torch._VF``), as an alias, a
default argument, a closure, a ``functools.partial``, a bound method, a subclass, a function rebuilt from the
same code object, a name looked up by string. Each must be refused, with a message that names what was called;
the ones marked as answers are first shown to be right on every case, so that the refusal, not a wrong number,
is what stops them. Every reference solution still passes.
"""

from __future__ import annotations

import functools
import importlib
import math
import pkgutil
import types
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnbook.exercises as exercises
from attnbook import attention as A
from attnbook import fastformer as FF
from attnbook import positional as P
from attnbook import train as TR
from attnbook import transformer as TF
from attnbook.exercises import LIBRARY_MISTAKE, compare
from attnbook.masks import causal_mask, padding_mask

for _module in pkgutil.iter_modules(exercises.__path__):
    importlib.import_module(f"attnbook.exercises.{_module.name}")
CHECKERS = exercises.registry()

#: checker name -> [(how, learner's function, is it a right answer on every case?)]
CHEATS: dict[str, list[tuple[str, object, bool]]] = {}


def cheat(name: str, how: str, exact: bool = True):
    def register(fn):
        CHEATS.setdefault(name, []).append((how, fn, exact))
        return fn

    return register


def ways_to_reach(fn):
    """The same Python function reached as a learner might: an alias, a partial, a closure, a copy of its code,
    a lookup by string, a default argument."""
    module = importlib.import_module(fn.__module__)
    copy = types.FunctionType(fn.__code__, fn.__globals__, "renamed", fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__

    def closure(*args, **kwargs):
        return fn(*args, **kwargs)

    def default_argument(*args, _hidden=fn, **kwargs):
        return _hidden(*args, **kwargs)

    return [
        ("alias", fn),
        ("functools.partial", functools.partial(fn)),
        ("closure", closure),
        ("function rebuilt from its code object", copy),
        ("looked up by string", getattr(module, fn.__name__[:3] + fn.__name__[3:])),
        ("default argument", default_argument),
    ]


# --- chapter 0 ---------------------------------------------------------------------------------------------------

_LOG_SOFTMAX = [
    ("torch.log_softmax", lambda x, dim: torch.log_softmax(x, dim)),
    ("F.log_softmax", lambda x, dim: F.log_softmax(x, dim=dim)),
    ("torch.special.log_softmax", lambda x, dim: torch.special.log_softmax(x, dim)),
    ("Tensor.log_softmax", lambda x, dim: x.log_softmax(dim)),
    ("torch._C._VariableFunctions.log_softmax", lambda x, dim: torch._C._VariableFunctions.log_softmax(x, dim)),
    ("torch.ops.aten.log_softmax.int", lambda x, dim: torch.ops.aten.log_softmax.int(x, dim)),
    ("torch.ops.aten._log_softmax", lambda x, dim: torch.ops.aten._log_softmax(x, dim, False)),
    ("nn.LogSoftmax", lambda x, dim: nn.LogSoftmax(dim)(x)),
    ("a subclass of nn.LogSoftmax", lambda x, dim: type("Mine", (nn.LogSoftmax,), {})(dim)(x)),
    ("torch.logsumexp", lambda x, dim: x - torch.logsumexp(x, dim, keepdim=True)),
    ("torch.special.logsumexp", lambda x, dim: x - torch.special.logsumexp(x, dim, keepdim=True)),
    ("Tensor.logsumexp", lambda x, dim: x - x.logsumexp(dim, keepdim=True)),
    ("torch.ops.aten.logsumexp", lambda x, dim: x - torch.ops.aten.logsumexp(x, [dim], True)),
    ("functools.partial of torch.log_softmax", lambda x, dim: functools.partial(torch.log_softmax, dim=dim)(x)),
]
for _how, _f in _LOG_SOFTMAX:
    cheat("stable_log_softmax", _how)(lambda x, dim=-1, _f=_f: _f(x, dim))


# --- chapter 1 ---------------------------------------------------------------------------------------------------


def _collate_answer(collate):
    def decoder_input_and_target(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
        batch = collate([([4], row[:n].tolist()) for row, n in zip(tgt, lengths.tolist())], pad_id, bos_id, eos_id)
        return batch.tgt_in, batch.tgt_out

    return decoder_input_and_target


from attnbook.data import batches as _batches  # noqa: E402

for _how, _f in ways_to_reach(_batches.collate):
    cheat("decoder_input_and_target", f"attnbook.data.collate, {_how}")(_collate_answer(_f))


def _sacrebleu_counts(hypothesis, references, n):
    from sacrebleu.metrics import BLEU

    bleu = BLEU(tokenize="none", max_ngram_order=max(n, 4))
    score = bleu.corpus_score([" ".join(hypothesis)], [[" ".join(r)] for r in references])
    return score.counts[n - 1], score.totals[n - 1]


cheat("clipped_precision_multi", "sacreBLEU's own counts")(_sacrebleu_counts)
from attnbook import metrics as M  # noqa: E402

for _how, _f in ways_to_reach(M.clipped_matches):
    cheat("clipped_precision_multi", f"attnbook.metrics.clipped_matches, {_how}")(
        lambda hypothesis, references, n, _f=_f: _f(hypothesis, references, n)
    )
cheat("clipped_precision_multi", "attnbook.metrics.bleu_stats")(
    lambda hypothesis, references, n: (
        M.bleu_stats([hypothesis], [references], max(n, 4)).matches[n - 1],
        M.bleu_stats([hypothesis], [references], max(n, 4)).totals[n - 1],
    )
)


def _sacrebleu_bp(hyp_lens, ref_lens):
    from sacrebleu.metrics.bleu import BLEU

    r = sum(min(refs, key=lambda r: (abs(r - c), r)) for c, refs in zip(hyp_lens, ref_lens))
    return BLEU.compute_bleu([0] * 4, [1] * 4, sum(hyp_lens), r).bp


cheat("corpus_brevity_penalty", "sacreBLEU's compute_bleu", exact=False)(_sacrebleu_bp)
for _how, _f in ways_to_reach(M.brevity_penalty):
    cheat("corpus_brevity_penalty", f"attnbook.metrics.brevity_penalty, {_how}", exact=False)(
        lambda hyp_lens, ref_lens, _f=_f: _f(
            sum(hyp_lens), sum(min(refs, key=lambda r: (abs(r - c), r)) for c, refs in zip(hyp_lens, ref_lens))
        )
    )
cheat("corpus_brevity_penalty", "attnbook.metrics._closest_length", exact=False)(
    lambda hyp_lens, ref_lens: math.exp(
        min(0.0, 1 - sum(M._closest_length(c, r) for c, r in zip(hyp_lens, ref_lens)) / max(sum(hyp_lens), 1))
    )
)


# --- chapter 2 ---------------------------------------------------------------------------------------------------


def _per_word(nll_of):
    """A learner's best_candidate from a packaged per-token loss ``nll_of(logits (N, T, V), targets (N, T), pad)``."""

    def best_candidate(logits, targets, pad_id=0):
        B, K, T, V = logits.shape
        nll = nll_of(logits.reshape(B * K, T, V), targets.reshape(B * K, T), pad_id).reshape(B, K, T)
        scores = -nll.sum(-1) / (targets != pad_id).sum(-1)
        return scores, scores.argmax(-1)

    return best_candidate


_CE = [
    ("F.cross_entropy", lambda lo, t, p: F.cross_entropy(lo.transpose(1, 2), t, ignore_index=p, reduction="none")),
    (
        "torch._C._nn.cross_entropy_loss",
        lambda lo, t, p: torch._C._nn.cross_entropy_loss(lo.transpose(1, 2), t, None, 0, p),
    ),
    (
        "F.nll_loss",
        lambda lo, t, p: F.nll_loss(lo.log_softmax(-1).transpose(1, 2), t, ignore_index=p, reduction="none"),
    ),
    (
        "nn.CrossEntropyLoss",
        lambda lo, t, p: nn.CrossEntropyLoss(ignore_index=p, reduction="none")(lo.transpose(1, 2), t),
    ),
    (
        "attnbook.train.sequence_loss, candidate by candidate",
        lambda lo, t, p: torch.stack(
            [
                torch.cat([TR.sequence_loss(lo[i, None, : j + 1], t[i, None, : j + 1], p, reduction="sum")[None]])
                - (TR.sequence_loss(lo[i, None, :j], t[i, None, :j], p, reduction="sum") if j else 0)
                for i in range(len(t))
                for j in range(t.shape[1])
            ]
        ).reshape(t.shape),
    ),
]
for _how, _f in _CE:
    cheat("best_candidate", _how)(_per_word(_f))

_GRU = [
    ("torch.gru_cell", torch.gru_cell),
    ("torch._VF.gru_cell", lambda *a: torch._VF.gru_cell(*a)),
    ("torch._C._VariableFunctions.gru_cell", torch._C._VariableFunctions.gru_cell),
    ("torch.ops.aten.gru_cell.default", torch.ops.aten.gru_cell.default),
    ("torch.ops.aten.gru_cell", torch.ops.aten.gru_cell),
]
for _how, _f in _GRU:
    cheat("gru_step", _how)(lambda x, h, W_ih, W_hh, b_ih, b_hh, _f=_f: _f(x, h, W_ih, W_hh, b_ih, b_hh))


class _MyCell(nn.GRUCell):
    """A subclass: its own name, GRUCell's code."""


def _gru_module(cls):
    def gru_step(x, h, W_ih, W_hh, b_ih, b_hh):
        cell = cls(x.shape[1], h.shape[1]).to(x.dtype)
        with torch.no_grad():
            for name, value in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), (W_ih, W_hh, b_ih, b_hh)):
                getattr(cell, name).copy_(value)
        return cell(x, h)

    return gru_step


cheat("gru_step", "nn.GRUCell with the given weights")(_gru_module(nn.GRUCell))
cheat("gru_step", "a subclass of nn.GRUCell")(_gru_module(_MyCell))
_CELL = {}


def _gru_prebuilt(x, h, W_ih, W_hh, b_ih, b_hh, _cells=_CELL):
    """A cell built outside the function (a default argument): only its forward runs inside."""
    return torch._VF.gru_cell(x, h, W_ih, W_hh, b_ih, b_hh)


cheat("gru_step", "torch._VF through a default argument")(_gru_prebuilt)

from attnbook import decode as D  # noqa: E402

cheat("trim_after_eos", "attnbook.decode.cut_at_eos, row by row", exact=False)(
    lambda ids, eos_id=2, pad_id=0: torch.stack(
        [
            torch.tensor(D.cut_at_eos(row, eos_id) + [pad_id] * (len(row) - len(D.cut_at_eos(row, eos_id))))
            for row in ids
        ]
    )
)


# --- chapter 3 ---------------------------------------------------------------------------------------------------


def _per_query(use):
    def masked_softmax_per_query(scores, valid_lens):
        return use(scores, torch.arange(scores.shape[-1]) >= valid_lens[..., None])

    return masked_softmax_per_query


for _how, _f in ways_to_reach(A.masked_softmax):
    cheat("masked_softmax_per_query", f"attnbook.attention.masked_softmax, {_how}")(_per_query(_f))


def _d2l_masked_softmax(scores, valid_lens):
    import d2l.torch as d2l

    return d2l.masked_softmax(scores, valid_lens)


cheat("masked_softmax_per_query", "d2l.masked_softmax", exact=False)(_d2l_masked_softmax)


def _general_bilinear(queries, keys, values, W, key_padding_mask):
    T, S = queries.shape[1], keys.shape[1]
    q = queries[:, :, None].expand(-1, -1, S, -1).contiguous()
    k = keys[:, None].expand(-1, T, -1, -1).contiguous()
    scores = F.bilinear(q, k, W[None]).squeeze(-1)
    weights = A.masked_softmax(scores, key_padding_mask[:, None, :])
    return weights @ values, weights


cheat("general_attention", "F.bilinear for the scores")(_general_bilinear)


def _general_sdpa(queries, keys, values, W, key_padding_mask):
    weights = A.masked_softmax((queries @ W) @ keys.transpose(1, 2), key_padding_mask[:, None, :])
    out = F.scaled_dot_product_attention(queries @ W, keys, values, attn_mask=~key_padding_mask[:, None, :], scale=1.0)
    return out, weights


cheat("general_attention", "F.scaled_dot_product_attention for the outputs")(_general_sdpa)


# --- chapter 4 ---------------------------------------------------------------------------------------------------


def _cross(call):
    def two_source_attention(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
        x, mask = torch.cat([x1, x2], dim=1), torch.cat([mask1, mask2], dim=1)
        return call(y @ w_q, x @ w_k, x @ w_v, mask)

    return two_source_attention


_BOUND = A.DotProductAttention().forward  # a bound method, made before the learner's function runs
_SDPA = [
    (
        "F.scaled_dot_product_attention",
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=~m[:, None]),
    ),
    (
        "torch._C._nn.scaled_dot_product_attention",
        lambda q, k, v, m: torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask=~m[:, None]),
    ),
    (
        "torch.ops.aten.scaled_dot_product_attention",
        lambda q, k, v, m: torch.ops.aten.scaled_dot_product_attention(q, k, v, attn_mask=~m[:, None]),
    ),
    (
        "torch.ops.aten._scaled_dot_product_attention_math",
        lambda q, k, v, m: torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=~m[:, None])[0],
    ),
    (
        "attnbook.attention.scaled_dot_product_attention",
        lambda q, k, v, m: A.scaled_dot_product_attention(q, k, v, m[:, None])[0],
    ),
    ("attnbook.attention.DotProductAttention", lambda q, k, v, m: A.DotProductAttention()(q, k, v, m[:, None])[0]),
    (
        "a bound method of DotProductAttention",
        lambda q, k, v, m, _bound=_BOUND: _bound(q, k, v, m[:, None])[0],
    ),
]
for _how, _f in _SDPA:
    cheat("two_source_attention", _how, exact="_math" not in _how)(_cross(_f))


def _d2l_cross(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    import d2l.torch as d2l

    x, mask = torch.cat([x1, x2], dim=1), torch.cat([mask1, mask2], dim=1)
    return d2l.DotProductAttention(0.0).eval()(y @ w_q, x @ w_k, x @ w_v, (~mask).sum(1))


cheat("two_source_attention", "d2l.DotProductAttention", exact=False)(_d2l_cross)


def _conv_probe(n, k):
    signal, layers = torch.zeros(1, 1, n), 0
    signal[0, 0, 0] = 1.0
    while signal[0, 0, -1] == 0:
        signal = F.conv1d(F.pad(signal, (k - 1, 0)), torch.ones(1, 1, k))
        layers += 1
    return layers


cheat("conv_layers_to_connect", "F.conv1d, layer by layer")(_conv_probe)


def _conv_modules(n, k):
    conv = nn.Conv1d(1, 1, k, bias=False)
    nn.init.ones_(conv.weight)
    signal, layers = torch.zeros(1, 1, n), 0
    signal[0, 0, 0] = 1.0
    with torch.no_grad():
        while signal[0, 0, -1] == 0:
            signal, layers = conv(F.pad(signal, (k - 1, 0))), layers + 1
    return layers


cheat("conv_layers_to_connect", "nn.Conv1d, layer by layer")(_conv_modules)


# --- chapter 5 ---------------------------------------------------------------------------------------------------


def _gqa(call):
    def grouped_query_attention(x, W_q, W_k, W_v, num_heads, num_kv_heads):
        B, T, _ = x.shape

        def heads(t, h):
            return t.reshape(B, T, h, -1).transpose(1, 2)

        out = call(heads(x @ W_q, num_heads), heads(x @ W_k, num_kv_heads), heads(x @ W_v, num_kv_heads))
        return out.transpose(1, 2).reshape(B, T, -1)

    return grouped_query_attention


for _how, _f in [
    (
        "F.scaled_dot_product_attention(enable_gqa=True)",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
    ),
    (
        "torch.ops.aten.scaled_dot_product_attention(enable_gqa=True)",
        lambda q, k, v: torch.ops.aten.scaled_dot_product_attention(q, k, v, enable_gqa=True),
    ),
]:
    cheat("grouped_query_attention", _how)(_gqa(_f))


def _count_modules(d_model, num_heads, num_kv_heads, bias=True):
    d_kv = d_model // num_heads * num_kv_heads
    layers = [nn.Linear(d_model, d_model, bias), nn.Linear(d_model, d_kv, bias), nn.Linear(d_model, d_kv, bias)]
    layers.append(nn.Linear(d_model, d_model, bias))
    return sum(p.numel() for layer in layers for p in layer.parameters())


cheat("gqa_parameter_count", "nn.Linear modules, counted")(_count_modules)


def _count_on_meta(d_model, num_heads, num_kv_heads, bias=True):
    with torch.device("meta"):
        return _count_modules(d_model, num_heads, num_kv_heads, bias)


cheat("gqa_parameter_count", "nn.Linear modules on the meta device")(_count_on_meta)


def _new_queries_causal_bias(lengths, T, S):
    from torch.nn.attention.bias import causal_lower_right

    allowed = causal_lower_right(T, S)._materialize()
    return ~allowed[None] | padding_mask(lengths, S)[:, None, :]


cheat("new_queries_mask", "torch.nn.attention.bias.causal_lower_right", exact=False)(_new_queries_causal_bias)
cheat("new_queries_mask", "attnbook.masks.causal_mask through a closure", exact=False)(
    lambda lengths, T, S, _c=causal_mask: _c(S)[S - T :][None] | padding_mask(lengths, S)[:, None, :]
)


# --- chapter 6 ---------------------------------------------------------------------------------------------------

for _how, _f in ways_to_reach(P.sinusoidal_table):
    cheat("sinusoid_table_by_hand", f"attnbook.positional.sinusoidal_table, {_how}")(
        lambda length, d, _f=_f: _f(length, d, dtype=torch.float64).float()
    )
cheat("sinusoid_table_by_hand", "SinusoidalPositionalEncoding on zeros")(
    lambda length, d: P.SinusoidalPositionalEncoding(d, max_len=length)(torch.zeros(1, length, d, dtype=torch.float64))[
        0
    ].float()
)


def _d2l_table(length, d):
    import d2l.torch as d2l

    return d2l.PositionalEncoding(d, 0.0, length).P[0, :length]


cheat("sinusoid_table_by_hand", "d2l.PositionalEncoding's table", exact=False)(_d2l_table)


def _rotate_default(x, positions, _rot=P.rotation_for_offset):
    """The forbidden function captured as a default argument: the name-based block never saw it."""
    d = x.shape[-1]
    turns = torch.stack([_rot(int(p), d, dtype=x.dtype) for p in positions])  # (T, d, d)
    return torch.einsum("tij,btj->bti", turns, x)


cheat("rotate_by_position", "rotation_for_offset as a default argument", exact=False)(_rotate_default)
for _how, _f in ways_to_reach(P.rotation_for_offset):
    cheat("rotate_by_position", f"attnbook.positional.rotation_for_offset, {_how}", exact=False)(
        lambda x, positions, _f=_f: torch.einsum(
            "tij,btj->bti", torch.stack([_f(int(p), x.shape[-1], dtype=x.dtype) for p in positions]), x
        )
    )
cheat("position_from_encoding", "the nearest row of the library's table", exact=False)(
    lambda pe: (pe[:, None] - P.sinusoidal_table(20000, pe.shape[-1], dtype=pe.dtype)[None]).abs().sum(-1).argmin(-1)
)


# --- chapter 7 ---------------------------------------------------------------------------------------------------


def _encoder_layer_library(x, src_lengths, attention, ffn, norm1, norm2):
    layer = TF.EncoderLayer(x.shape[-1], attention.num_heads, 4).to(x.dtype).eval()
    layer.self_attention, layer.ffn, layer.add_norm1.norm, layer.add_norm2.norm = attention, ffn, norm1, norm2
    return layer(x, padding_mask(src_lengths, x.shape[1]))


cheat("encoder_layer", "attnbook's EncoderLayer with the given parts")(_encoder_layer_library)


def _encoder_layer_unbound(x, src_lengths, attention, ffn, norm1, norm2):
    """EncoderLayer.forward called on a stand-in object: no EncoderLayer is ever built."""
    holder = SimpleNamespace(
        self_attention=attention,
        ffn=ffn,
        add_norm1=lambda x, y: norm1(x + y),
        add_norm2=lambda x, y: norm2(x + y),
        norm_first=False,
    )
    return TF.EncoderLayer.forward(holder, x, padding_mask(src_lengths, x.shape[1]))


cheat("encoder_layer", "EncoderLayer.forward on a stand-in object", exact=False)(_encoder_layer_unbound)


def _torch_encoder_layer(x, src_lengths, attention, ffn, norm1, norm2):
    d = x.shape[-1]
    layer = nn.TransformerEncoderLayer(d, attention.num_heads, ffn[0].out_features, 0.0, batch_first=True).to(x.dtype)
    layer.eval()
    return layer(x, src_key_padding_mask=padding_mask(src_lengths, x.shape[1]))


cheat("encoder_layer", "nn.TransformerEncoderLayer", exact=False)(_torch_encoder_layer)


def _decoder_layer_library(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    layer = TF.DecoderLayer(y.shape[-1], self_attention.num_heads, 4, norm_first=True).to(y.dtype).eval()
    layer.self_attention, layer.cross_attention, layer.ffn = self_attention, cross_attention, ffn
    layer.add_norm1.norm, layer.add_norm2.norm, layer.add_norm3.norm = norms
    return layer(y, memory, padding_mask(src_lengths, memory.shape[1]))


cheat("pre_ln_decoder_layer", "attnbook's DecoderLayer(norm_first=True) with the given parts")(_decoder_layer_library)
cheat("pre_ln_decoder_layer", "nn.TransformerDecoderLayer", exact=False)(
    lambda y, memory, src_lengths, self_attention, cross_attention, ffn, norms: nn.TransformerDecoderLayer(
        y.shape[-1], self_attention.num_heads, 8, 0.0, batch_first=True, norm_first=True
    ).to(y.dtype)(y, memory, tgt_is_causal=False)
)
cheat("prefix_lm_mask", "nn.Transformer.generate_square_subsequent_mask", exact=False)(
    lambda src_lengths, tgt_lengths, S, T: (
        nn.Transformer.generate_square_subsequent_mask(S + T).isinf()[None]
        | torch.cat([padding_mask(src_lengths, S), padding_mask(tgt_lengths, T)], 1)[:, None, :]
    )
)


def _count_transformer(src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False):
    config = TF.TransformerConfig(
        src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=share_embeddings
    )
    with torch.device("meta"):
        return sum(p.numel() for p in TF.Transformer(config).parameters())


cheat("transformer_parameter_count", "attnbook's Transformer on the meta device")(_count_transformer)
cheat("transformer_parameter_count", "nn.Transformer on the meta device", exact=False)(
    lambda src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False: sum(
        p.numel() for p in nn.Transformer(d_model, num_heads, num_layers, num_layers, d_ff, device="meta").parameters()
    )
)


# --- chapter 8 ---------------------------------------------------------------------------------------------------

for _how, _f in ways_to_reach(TR.noam_lr):
    cheat("noam_lambda", f"attnbook.train.noam_lr, {_how}")(
        lambda s, d_model, warmup, base_lr, _f=_f: float(_f(s + 1, d_model, warmup)) / base_lr
    )


def _noam_through_scheduler(s, d_model, warmup, base_lr):
    weight = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=base_lr)
    schedule = TR.NoamSchedule(optimizer, d_model, warmup)
    for _ in range(s):
        schedule.step()
    return optimizer.param_groups[0]["lr"] / base_lr


cheat("noam_lambda", "NoamSchedule, stepped s times", exact=False)(_noam_through_scheduler)


def _smoothed_through_library(logits, targets, eps, prior, pad_id):
    """The library's loss with a rescaled ε: Szegedy's uniform target exactly (a prior of equal counts)."""
    V = logits.shape[-1]
    return TR.sequence_loss(logits, targets, pad_id, label_smoothing=eps * (V - 2) / (V - 1))


cheat("prior_smoothed_loss", "sequence_loss with a rescaled ε", exact=False)(_smoothed_through_library)


def _cross_cache_sdpa(call):
    def cross_attention_steps(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
        B, T, d = y.shape

        def heads(t):
            return t.reshape(B, t.shape[1], num_heads, -1).transpose(1, 2)

        out = call(
            heads(y @ w_q + b_q), heads(memory @ w_k + b_k), heads(memory @ w_v + b_v), ~src_padding_mask[:, None, None]
        )
        return out.transpose(1, 2).reshape(B, T, d)

    return cross_attention_steps


for _how, _f in [
    ("F.scaled_dot_product_attention", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    (
        "torch._C._nn.scaled_dot_product_attention",
        lambda q, k, v, m: torch._C._nn.scaled_dot_product_attention(q, k, v, m),
    ),
    (
        "attnbook.attention.scaled_dot_product_attention",
        lambda q, k, v, m: A.scaled_dot_product_attention(q, k, v, ~m)[0],
    ),
]:
    cheat("cross_attention_steps", _how)(_cross_cache_sdpa(_f))


# --- chapter 9 ---------------------------------------------------------------------------------------------------


def _pool_of(layer_args):
    def global_query(q, scores, num_heads):
        layer = FF.FastSelfAttention(q.shape[-1], num_heads).to(q.dtype)
        return layer._pool(scores, q, None)[1][:, 0]

    return global_query


cheat("global_query", "FastSelfAttention._pool")(_pool_of(None))
cheat("global_query", "prefix_softmax_pool, last position", exact=False)(
    lambda q, scores, num_heads: FF.prefix_softmax_pool(scores, q)[:, -1]
)
cheat("global_query", "FastSelfAttention._pool on a stand-in object")(
    lambda q, scores, num_heads: FF.FastSelfAttention._pool(
        SimpleNamespace(num_heads=num_heads, head_dim=q.shape[-1] // num_heads, d_model=q.shape[-1]), scores, q, None
    )[1][:, 0]
)


def _global_keys_library(k, q_global, weight, bias, num_heads, segments):
    """FastSelfAttention._pool, once per packed sentence, on a stand-in layer."""
    d_h = k.shape[-1] // num_heads
    holder = SimpleNamespace(num_heads=num_heads, head_dim=d_h, d_model=k.shape[-1])
    keys = []
    for g in range(q_global.shape[1]):
        p = k * q_global[:, g, None]
        scores = (p @ weight.T + bias) / math.sqrt(d_h)
        keys.append(FF.FastSelfAttention._pool(holder, scores, p, segments != g + 1)[1][:, 0])
    return torch.stack(keys, dim=1).nan_to_num(0.0)


cheat("global_keys_packed", "FastSelfAttention._pool, sentence by sentence", exact=False)(_global_keys_library)


def _step_whole_prefix(layer, x_t, state):
    seen = x_t[:, None] if state is None else torch.cat([state.prefix, x_t[:, None]], dim=1)
    return layer(seen, is_causal=True)[:, -1], SimpleNamespace(prefix=seen)


cheat("fastformer_step", "the layer itself on the prefix, kept in a SimpleNamespace", exact=False)(_step_whole_prefix)
cheat("fastformer_parameter_count", "FastSelfAttention, counted")(
    lambda d_model, num_heads, share_value=True: sum(
        p.numel() for p in FF.FastSelfAttention(d_model, num_heads, share_value=share_value).parameters()
    )
)


def _flop_counter(N, d, H):
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        FF.FastSelfAttention(d, H)(torch.zeros(1, N, d))
    return counter.get_total_flops() // 2, 0, 0


cheat("step_multiplications", "torch.utils.flop_counter on the layer", exact=False)(_flop_counter)


# --- and every checker's own planted calls of the packaged answer ------------------------------------------------

for _name, _checker in CHECKERS.items():
    for _dotted, _answer in _checker.forbidden.items():
        if _answer is not None:
            cheat(_name, f"the checker's planted call of {_dotted}")(_answer)


# --- the tests ---------------------------------------------------------------------------------------------------

ALL = [(name, how, fn, exact) for name, entries in sorted(CHEATS.items()) for how, fn, exact in entries]


def test_the_cheating_learner_tries_every_kind_the_issue_lists():
    assert set(CHEATS) <= set(CHECKERS), set(CHEATS) - set(CHECKERS)
    assert len(CHEATS) >= 24, f"only {len(CHEATS)} exercises are tried"
    assert len(ALL) >= 100, len(ALL)


# The bypasses use PyTorch as a cheat would, not as PyTorch advises: its advice about that is not the test's concern.
@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")
@pytest.mark.parametrize(("name", "how", "fn", "exact"), ALL, ids=[f"{n}: {h}" for n, h, _, _ in ALL])
def test_a_one_line_answer_that_calls_existing_code_is_refused_and_named(name, how, fn, exact):
    checker = CHECKERS[name]
    if exact:  # a true answer: only the refusal stops it
        for case in checker.cases:
            problem = compare(checker._run(checker.reference, case), checker._run(fn, case), checker.atol, checker.rtol)
            assert problem is None, f"{name}, {how}: not an answer on '{case.name}': {problem}"
    result = checker(fn)
    assert not result, f"{name} accepted {how}"
    assert result.mistake == LIBRARY_MISTAKE, f"{name}, {how}:\n{result.message}"
    assert "it called `" in result.message or "it built a PyTorch module (`" in result.message, result.message
    assert "write it yourself" in result.message, result.message


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_every_checker_declares_what_it_refuses_and_its_solution_still_passes(name):
    checker = CHECKERS[name]
    assert checker.forbidden, f"{name} refuses nothing"
    assert checker.verify().passed


def test_a_state_that_keeps_the_prefix_in_any_container_is_caught():
    """09.3: the state is measured in numbers, whatever holds them (a SimpleNamespace, an object, a closure)."""
    from attnbook.exercises.ch09_fastformer_step import _fastformer_step
    from attnbook.exercises.measuring import state_size

    class Holder:
        __slots__ = ("prefix",)

    def in_a(container):
        def fastformer_step(layer, x_t, state):
            seen = x_t[:, None] if state is None else torch.cat([state.prefix, x_t[:, None]], dim=1)
            inner = None
            for t in range(seen.shape[1]):
                out, inner = _fastformer_step(layer, seen[:, t], inner)
            holder = container()
            holder.prefix = seen
            return out, holder

        return fastformer_step

    checker = CHECKERS["fastformer_step"]
    for container in (SimpleNamespace, Holder):
        result = checker(in_a(container))
        assert not result and "state grows with the length" in result.message, result.message
    assert state_size(SimpleNamespace(a=torch.zeros(3), b=[1.0, torch.zeros(2, 2)])) == 8
    assert state_size(lambda: None) == 0 and state_size((lambda t: lambda: t)(torch.zeros(5))) == 5
