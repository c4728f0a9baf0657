"""Padding and causal masks, in PyTorch's convention (True = ignore)."""

from __future__ import annotations

import pytest
import torch

from attnbook.masks import causal_mask, check_mask, padding_mask


def test_padding_mask_marks_positions_at_or_after_the_length():
    mask = padding_mask(torch.tensor([2, 0, 3]), 4)
    assert mask.dtype == torch.bool and mask.shape == (3, 4)
    assert mask.tolist() == [[False, False, True, True], [True, True, True, True], [False, False, False, True]]
    assert padding_mask(torch.tensor([1, 3])).shape == (2, 3)


def test_padding_mask_rejects_bad_lengths():
    with pytest.raises(ValueError, match="1-D"):
        padding_mask(torch.tensor([[1, 2]]))
    with pytest.raises(TypeError, match="integers"):
        padding_mask(torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match=">= 0"):
        padding_mask(torch.tensor([1, -1]))
    with pytest.raises(ValueError, match=r"exceeds max_len \(2\)"):
        padding_mask(torch.tensor([3]), 2)


def test_causal_mask_hides_the_future():
    mask = causal_mask(4)
    for i in range(4):
        for j in range(4):
            assert bool(mask[i, j]) == (j > i)
    with pytest.raises(ValueError, match="size >= 1"):
        causal_mask(0)


def test_check_mask_names_the_problem():
    check_mask(torch.zeros(2, 1, 5, dtype=torch.bool), (2, 3, 5))
    with pytest.raises(TypeError, match="bool tensor"):
        check_mask(torch.zeros(2, 5), (2, 3, 5))
    with pytest.raises(ValueError, match=r"shape \(2, 4\) does not broadcast"):
        check_mask(torch.zeros(2, 4, dtype=torch.bool), (2, 3, 5))
    with pytest.raises(TypeError, match="torch.Tensor"):
        check_mask([[True]], (1, 1))
