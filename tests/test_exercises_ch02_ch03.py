"""The reference solutions of chapters 2 and 3 agree with the library and with PyTorch."""

from __future__ import annotations

import math

import torch

from attnbook.attention import DotProductAttention, masked_softmax
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


def test_best_candidate_scores_are_the_per_token_loss_with_the_sign_changed():
    torch.manual_seed(1)
    logits = torch.randn(2, 3, 5, 7, dtype=torch.float64)
    targets = torch.tensor([[[4, 5, 2, 0, 0], [6, 6, 6, 6, 2], [2, 0, 0, 0, 0]]] * 2)
    scores, best = ch02.check_best_candidate.reference(logits, targets)
    assert scores.shape == (2, 3) and best.shape == (2,)
    for b in range(2):
        for k in range(3):
            loss = sequence_loss(logits[b, k][None], targets[b, k][None])  # the mean over the real tokens
            assert torch.isclose(scores[b, k], -loss)
    assert torch.equal(best, scores.argmax(-1))


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


def test_masked_softmax_per_query_with_one_length_per_sentence_is_the_library_masked_softmax():
    torch.manual_seed(3)
    scores, lens = torch.randn(3, 2, 5), torch.tensor([5, 0, 2])
    expected = masked_softmax(scores, padding_mask(lens, 5)[:, None, :])
    assert torch.equal(ch03.check_masked_softmax_per_query.reference(scores, lens[:, None].expand(3, 2)), expected)


def test_general_attention_with_a_scaled_identity_is_scaled_dot_product_attention():
    torch.manual_seed(5)
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 2)
    mask = padding_mask(torch.tensor([4, 2]), 4)
    out, weights = ch03.check_general_attention.reference(q, k, v, torch.eye(8) / math.sqrt(8), mask)
    expected_out, expected_weights = DotProductAttention()(q, k, v, mask)
    assert torch.allclose(out, expected_out, atol=1e-6) and torch.allclose(weights, expected_weights, atol=1e-6)


def test_diagonal_attention_with_a_huge_width_is_the_masked_softmax_and_with_a_tiny_one_the_diagonal():
    torch.manual_seed(6)
    scores, lengths = torch.randn(2, 3, 5), torch.tensor([5, 3])
    wide = ch03.check_diagonal_attention.reference(scores, lengths, 1e6)
    assert torch.allclose(wide, masked_softmax(scores, padding_mask(lengths, 5)[:, None, :]), atol=1e-6)
    narrow = ch03.check_diagonal_attention.reference(scores, lengths, 1e-2)
    assert narrow.argmax(-1).tolist() == [[0, 2, 4], [0, 1, 2]]
