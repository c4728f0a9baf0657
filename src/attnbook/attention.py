"""Attention: scoring, the masked softmax, and (chapter 5) multi-head attention.

Chapter 3 builds attention pooling from a query, keys and values; chapter 4
turns it on one sequence (self-attention); chapter 5 splits it into heads.
Masks follow PyTorch's convention: bool, ``True`` = ignore.
"""

from __future__ import annotations

import torch

from .masks import check_mask

__all__ = ["masked_softmax"]


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -1) -> torch.Tensor:
    """Softmax over ``dim`` that gives zero weight where ``mask`` is ``True``.

    ``mask`` is boolean and broadcasts to ``scores`` (a key-padding mask
    ``(B, S)`` for scores ``(B, T, S)`` is passed as ``mask[:, None, :]``).
    A row whose every key is masked gets all-zero weights, never NaN, and its
    gradient is zero too: masked scores are replaced by the most negative
    finite number rather than ``-inf``, and masked weights are then zeroed.
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    check_mask(mask, scores.shape)
    filled = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    return torch.softmax(filled, dim=dim).masked_fill(mask, 0.0)
