"""Attention building blocks: the masked softmax."""

from __future__ import annotations

import pytest
import torch

from attnbook.attention import masked_softmax


def test_masked_softmax_matches_softmax_without_mask():
    scores = torch.randn(2, 3, 5)
    assert torch.allclose(masked_softmax(scores), torch.softmax(scores, -1))


def test_masked_positions_get_zero_weight_and_rows_sum_to_one():
    scores = torch.randn(2, 3, 5)
    mask = torch.tensor([[False, False, True, True, True], [False] * 5])[:, None, :]
    weights = masked_softmax(scores, mask)
    assert torch.all(weights[0, :, 2:] == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3))
    expected = torch.softmax(scores[0, :, :2], -1)
    assert torch.allclose(weights[0, :, :2], expected)


def test_fully_masked_row_gives_zeros_and_zero_gradient_never_nan():
    scores = torch.randn(1, 2, 4, requires_grad=True)
    mask = torch.tensor([[[True] * 4, [False, False, True, True]]])
    weights = masked_softmax(scores, mask)
    assert torch.all(weights[0, 0] == 0)
    weights.sum().backward()
    assert not torch.isnan(weights).any() and not torch.isnan(scores.grad).any()
    assert torch.all(scores.grad[0, 0] == 0)


def test_masked_softmax_rejects_bad_masks():
    scores = torch.randn(2, 3, 5)
    with pytest.raises(TypeError, match="bool"):
        masked_softmax(scores, torch.ones(2, 1, 5))
    with pytest.raises(ValueError, match="does not broadcast"):
        masked_softmax(scores, torch.ones(2, 4, dtype=torch.bool))


def test_attention_kernels_for_a_gpu_leave_out_cudnns_and_change_nothing_on_a_cpu():
    from attnbook.attention import attention_kernels_for

    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        attention_kernels_for("cpu")
        assert torch.backends.cuda.cudnn_sdp_enabled()
        attention_kernels_for(torch.device("cuda", 0))  # a setting of PyTorch's: no GPU is needed to make it
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)
