"""Chapter 2 and 3 models: the GRU encoder, the plain and the attention decoders, Seq2Seq."""

from __future__ import annotations

import warnings

import pytest
import torch

from attnbook.rnn import (
    DecoderState,
    GRUEncoder,
    PlainDecoder,
    Seq2Seq,
    Seq2SeqConfig,
    check_token_ids,
    lengths_from_mask,
)
from toy_seq2seq import make_batch, one_thread  # noqa: F401 (fixture)

SOURCES = [[4, 5, 6, 7, 8], [9, 4], [5, 6, 7]]
TARGETS = [[8, 7], [4, 9, 10, 11], [7]]


def _model(attention: bool, **kw) -> Seq2Seq:
    torch.manual_seed(0)
    return Seq2Seq(
        Seq2SeqConfig(src_vocab_size=12, tgt_vocab_size=13, embed_size=6, hidden_size=10, attention=attention, **kw)
    ).eval()


@pytest.mark.parametrize("layers", [1, 2])
def test_encoder_encodes_a_padded_sentence_as_if_alone(layers):
    torch.manual_seed(0)
    enc = GRUEncoder(12, 6, 10, num_layers=layers).eval()
    batch = make_batch(SOURCES, TARGETS)
    outputs, state = enc(batch.src, batch.src_padding_mask)
    assert outputs.shape == (3, 5, 10) and state.shape == (layers, 3, 10)
    for b, x in enumerate(SOURCES):
        alone_out, alone_state = enc(torch.tensor([x]))
        n = len(x)
        assert torch.allclose(outputs[b, :n], alone_out[0], atol=1e-6)
        assert torch.allclose(state[:, b], alone_state[:, 0], atol=1e-6)
        assert torch.all(outputs[b, n:] == 0), "outputs at padding are zero"


def test_encoder_without_mask_reads_padding_as_tokens():
    torch.manual_seed(0)
    enc = GRUEncoder(12, 6, 10).eval()
    batch = make_batch(SOURCES, TARGETS)
    _, masked = enc(batch.src, batch.src_padding_mask)
    _, unmasked = enc(batch.src)
    assert torch.allclose(masked[:, 0], unmasked[:, 0], atol=1e-6)  # the full-length sentence
    assert not torch.allclose(masked[:, 1], unmasked[:, 1], atol=1e-3)  # the padded one differs


@pytest.mark.parametrize("attention", [False, True], ids=["plain", "attention"])
def test_seq2seq_shapes_and_attention_weights(attention):
    model = _model(attention)
    batch = make_batch(SOURCES, TARGETS)
    logits, weights = model(batch.src, batch.src_padding_mask, batch.tgt_in, need_weights=True)
    assert logits.shape == (3, 5, 13)
    if not attention:
        assert weights is None
        return
    assert weights.shape == (3, 5, 5)
    assert torch.allclose(weights.sum(-1), torch.ones(3, 5), atol=1e-6)
    assert torch.all(weights.masked_select(batch.src_padding_mask[:, None, :].expand_as(weights)) == 0)


@pytest.mark.parametrize("attention", [False, True], ids=["plain", "attention"])
@pytest.mark.parametrize("layers", [1, 2])
def test_step_by_step_equals_teacher_forcing(attention, layers):
    model = _model(attention, num_layers=layers)
    batch = make_batch(SOURCES, TARGETS)
    teacher = model(batch.src, batch.src_padding_mask, batch.tgt_in)
    state = model.start(batch.src, batch.src_padding_mask)
    steps = []
    for t in range(batch.tgt_in.shape[1]):
        logits, state = model.step(batch.tgt_in[:, t], state)
        steps.append(logits)
    assert torch.allclose(torch.stack(steps, dim=1), teacher, atol=1e-5)


@pytest.mark.parametrize("attention", [False, True], ids=["plain", "attention"])
def test_padding_does_not_change_a_sentence_s_logits(attention):
    model = _model(attention)
    batch = make_batch(SOURCES, TARGETS)
    logits = model(batch.src, batch.src_padding_mask, batch.tgt_in)
    for b, (x, y) in enumerate(zip(SOURCES, TARGETS)):
        alone = make_batch([x], [y])
        own = model(alone.src, alone.src_padding_mask, alone.tgt_in)
        assert torch.allclose(logits[b, : len(y) + 1], own[0], atol=1e-5)


def test_plain_decoder_sees_the_source_only_through_the_final_state():
    model = _model(False)
    batch = make_batch(SOURCES, TARGETS)
    state = model.start(batch.src, batch.src_padding_mask)
    assert isinstance(state, DecoderState) and state.memory is None
    assert torch.equal(state.context, state.hidden[-1])
    # same final state => same translation, whatever else the encoder saw
    dec: PlainDecoder = model.decoder
    logits, _ = dec(batch.tgt_in, DecoderState(hidden=state.hidden.clone(), context=state.context.clone()))
    assert torch.allclose(logits, model(batch.src, batch.src_padding_mask, batch.tgt_in))


def test_attention_decoder_reads_every_encoder_output():
    model = _model(True)
    batch = make_batch(SOURCES, TARGETS)
    state = model.start(batch.src, batch.src_padding_mask)
    base, _, _ = model.decoder(batch.tgt_in, state)
    memory = state.memory.clone()
    memory[0, 1] += 1.0  # change one non-final encoder output of sentence 0
    changed, _, _ = model.decoder(
        batch.tgt_in,
        DecoderState(
            state.hidden,
            memory=memory,
            memory_padding_mask=state.memory_padding_mask,
            projected_keys=model.decoder.attention.project_keys(memory),
        ),
    )
    assert not torch.allclose(base[0], changed[0]) and torch.allclose(base[1:], changed[1:])


def test_gradients_reach_every_parameter():
    for attention in (False, True):
        model = _model(attention).train()
        batch = make_batch(SOURCES, TARGETS)
        model(batch.src, batch.src_padding_mask, batch.tgt_in).sum().backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None]
        assert not missing, missing


def test_no_warning_with_dropout_and_one_layer():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = _model(True, dropout=0.3).train()
        batch = make_batch(SOURCES, TARGETS)
        model(batch.src, batch.src_padding_mask, batch.tgt_in)


def test_token_ids_outside_the_vocabulary_are_clear_errors():
    model = _model(True)
    batch = make_batch(SOURCES, TARGETS)
    bad_src = batch.src.clone()
    bad_src[0, 0] = 12
    with pytest.raises(IndexError, match=r"source token ids contain the index 12, outside the vocabulary of size 12"):
        model(bad_src, batch.src_padding_mask, batch.tgt_in)
    bad_tgt = batch.tgt_in.clone()
    bad_tgt[1, 1] = -1
    with pytest.raises(IndexError, match=r"target token ids contain the index -1"):
        model(batch.src, batch.src_padding_mask, bad_tgt)
    with pytest.raises(TypeError, match="integer token indices"):
        model(batch.src.float(), batch.src_padding_mask, batch.tgt_in)
    with pytest.raises(IndexError, match="outside the vocabulary"):
        model.step(torch.tensor([13, 1, 1]), model.start(batch.src, batch.src_padding_mask))
    check_token_ids(torch.tensor([0, 11]), 12)  # the edges are fine


def test_bad_masks_and_shapes_are_clear_errors():
    model = _model(False)
    batch = make_batch(SOURCES, TARGETS)
    with pytest.raises(ValueError, match="does not match src"):
        model(batch.src, batch.src_padding_mask[:, :4], batch.tgt_in)
    holes = batch.src_padding_mask.clone()
    holes[0, 1] = True
    with pytest.raises(ValueError, match="padding at the end"):
        model(batch.src, holes, batch.tgt_in)
    with pytest.raises(TypeError, match="bool"):
        model(batch.src, batch.src_padding_mask.long(), batch.tgt_in)
    empty = batch.src_padding_mask.clone()
    empty[1] = True
    with pytest.raises(ValueError, match="at least one token"):
        model(batch.src, empty, batch.tgt_in)
    with pytest.raises(ValueError, match=r"tgt_in must have shape \(B, T\) with B = 3"):
        model(batch.src, batch.src_padding_mask, batch.tgt_in[:2])
    with pytest.raises(ValueError, match=r"one token per sentence"):
        model.step(batch.tgt_in, model.start(batch.src, batch.src_padding_mask))
    assert lengths_from_mask(batch.src_padding_mask).tolist() == [5, 2, 3]


def test_config_is_validated():
    with pytest.raises(ValueError, match="hidden_size must be >= 1"):
        Seq2SeqConfig(10, 10, hidden_size=0)
    with pytest.raises(TypeError, match="embed_size must be an int"):
        Seq2SeqConfig(10, 10, embed_size=3.5)
    with pytest.raises(ValueError, match="dropout"):
        Seq2SeqConfig(10, 10, dropout=1.0)
    with pytest.raises(TypeError, match="attention must be True or False"):
        Seq2SeqConfig(10, 10, attention="yes")
    with pytest.raises(TypeError, match="Seq2SeqConfig"):
        Seq2Seq({"src_vocab_size": 10})


@pytest.mark.parametrize("layers", [1, 2])
def test_bidirectional_encoder_joins_two_directions_and_ignores_padding(layers):
    torch.manual_seed(0)
    enc = GRUEncoder(12, 6, 10, num_layers=layers, bidirectional=True).eval()
    batch = make_batch(SOURCES, TARGETS)
    outputs, state = enc(batch.src, batch.src_padding_mask)
    assert outputs.shape == (3, 5, 10) and state.shape == (layers, 3, 10), "the same shapes as one direction"
    for b, x in enumerate(SOURCES):
        n = len(x)
        alone_out, alone_state = enc(torch.tensor([x]))
        assert torch.allclose(outputs[b, :n], alone_out[0], atol=1e-6) and torch.all(outputs[b, n:] == 0)
        assert torch.allclose(state[:, b], alone_state[:, 0], atol=1e-6)
        # the top layer's final state: forward after the last token, backward after the first
        assert torch.allclose(state[-1, b, :5], outputs[b, n - 1, :5], atol=1e-6)
        assert torch.allclose(state[-1, b, 5:], outputs[b, 0, 5:], atol=1e-6)
    # one layer: the forward half is a GRU reading left to right, the backward half one reading right to left
    if layers == 1:
        forward = torch.nn.GRU(6, 5, batch_first=True)
        backward = torch.nn.GRU(6, 5, batch_first=True)
        with torch.no_grad():
            for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
                getattr(forward, name).copy_(getattr(enc.rnn, name))
                getattr(backward, name).copy_(getattr(enc.rnn, name + "_reverse"))
        x = torch.tensor([SOURCES[0]])
        e = enc.embedding(x)
        out, _ = enc(x)
        assert torch.allclose(out[0, :, :5], forward(e)[0][0], atol=1e-6)
        assert torch.allclose(out[0, :, 5:], backward(e.flip(1))[0][0].flip(0), atol=1e-6)


@pytest.mark.parametrize("attention", [False, True], ids=["plain", "attention"])
def test_bidirectional_seq2seq_follows_the_protocol(attention):
    model = _model(attention, bidirectional=True)
    assert model.encoder.rnn.bidirectional and model.encoder.rnn.hidden_size == 5
    batch = make_batch(SOURCES, TARGETS)
    teacher = model(batch.src, batch.src_padding_mask, batch.tgt_in)
    state = model.start(batch.src, batch.src_padding_mask)
    steps = []
    for t in range(batch.tgt_in.shape[1]):
        logits, state = model.step(batch.tgt_in[:, t], state)
        steps.append(logits)
    assert torch.allclose(torch.stack(steps, dim=1), teacher, atol=1e-5)
    model.train()
    model(batch.src, batch.src_padding_mask, batch.tgt_in).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_bidirectional_needs_an_even_width():
    with pytest.raises(ValueError, match="must be even, got 9"):
        Seq2SeqConfig(10, 10, hidden_size=9, bidirectional=True)
    with pytest.raises(ValueError, match="must be even, got 7"):
        GRUEncoder(10, 4, 7, bidirectional=True)
    with pytest.raises(TypeError, match="bidirectional must be True or False"):
        Seq2SeqConfig(10, 10, bidirectional=1)
