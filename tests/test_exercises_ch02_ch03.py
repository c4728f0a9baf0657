"""The reference solutions of chapters 2 and 3 agree with the library and with PyTorch."""

from __future__ import annotations

import torch

from attnbook.attention import AdditiveAttention, DotProductAttention, masked_softmax
from attnbook.exercises import ch02_rnn_encoder_decoder as ch02
from attnbook.exercises import ch03_attention as ch03
from attnbook.masks import padding_mask
from attnbook.rnn import GRUEncoder
from attnbook.train import sequence_loss


def test_gru_step_is_pytorchs_gru_cell():
    torch.manual_seed(0)
    cell = torch.nn.GRUCell(5, 3)
    x, h = torch.randn(4, 5), torch.randn(4, 3)
    ours = ch02.check_gru_step.reference(x, h, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
    assert torch.allclose(ours, cell(x, h), atol=1e-6)


def test_padded_loss_is_sequence_loss():
    torch.manual_seed(1)
    logits, targets = torch.randn(3, 5, 7), torch.tensor([[4, 5, 2, 0, 0], [6, 6, 6, 6, 2], [2, 0, 0, 0, 0]])
    assert torch.isclose(ch02.check_padded_loss.reference(logits, targets), sequence_loss(logits, targets))


def test_last_real_state_is_what_packing_gives():
    torch.manual_seed(2)
    enc = GRUEncoder(10, 4, 6).eval()
    src = torch.tensor([[4, 5, 6, 0], [7, 8, 9, 5], [4, 0, 0, 0]])
    mask = src == 0
    unpacked, _ = enc.rnn(enc.embedding(src))  # reads the padding too, but not before the last real token
    _, state = enc(src, mask)
    assert torch.allclose(ch02.check_last_real_state.reference(unpacked, (~mask).sum(1)), state[-1], atol=1e-6)


def test_trim_after_eos_is_what_greedy_decoding_stores():
    ids = torch.tensor([[5, 2, 7, 2], [4, 4, 4, 4]])
    assert ch02.check_trim_after_eos.reference(ids).tolist() == [[5, 2, 0, 0], [4, 4, 4, 4]]


def test_masked_softmax_lengths_is_the_library_masked_softmax():
    torch.manual_seed(3)
    scores, lens = torch.randn(3, 2, 5), torch.tensor([5, 0, 2])
    expected = masked_softmax(scores, padding_mask(lens, 5)[:, None, :])
    assert torch.equal(ch03.check_masked_softmax_lengths.reference(scores, lens), expected)


def test_additive_scores_are_the_modules_scores():
    torch.manual_seed(4)
    attn = AdditiveAttention(3, 5, 4)
    q, k = torch.randn(2, 3, 3), torch.randn(2, 6, 5)
    ours = ch03.check_additive_scores.reference(q, k, attn.W_q.weight, attn.W_k.weight, attn.w_v.weight[0])
    assert torch.allclose(ours, attn.scores(q, attn.project_keys(k)), atol=1e-6)


def test_dot_product_attention_is_the_module():
    torch.manual_seed(5)
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 2)
    mask = padding_mask(torch.tensor([4, 2]), 4)
    out, weights = ch03.check_dot_product_attention.reference(q, k, v, mask)
    expected_out, expected_weights = DotProductAttention()(q, k, v, mask)
    assert torch.allclose(out, expected_out, atol=1e-6) and torch.allclose(weights, expected_weights, atol=1e-6)
