"""Masks, in PyTorch's convention: boolean tensors where ``True`` means *ignore*.

Chapter 1 builds the padding mask, chapter 3 uses it inside attention, and
chapter 5 adds the causal mask that keeps a decoder from reading ahead.
"""

from __future__ import annotations

import torch

from .checks import check_mask  # the masks' own check, kept importable from here

__all__ = ["padding_mask", "causal_mask", "check_mask"]


def padding_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Key-padding mask ``(B, max_len)``: ``True`` at positions ``>= lengths[b]``.

    >>> padding_mask(torch.tensor([2, 3]), 4)
    tensor([[False, False,  True,  True],
            [False, False, False,  True]])
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be a 1-D tensor of shape (B,), got shape {tuple(lengths.shape)}")
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise TypeError(f"lengths must hold integers, got dtype {lengths.dtype}")
    if (lengths < 0).any():
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    longest = int(lengths.max()) if lengths.numel() else 0
    if max_len is None:
        max_len = longest
    elif longest > max_len:
        raise ValueError(f"a length ({longest}) exceeds max_len ({max_len})")
    positions = torch.arange(max_len, device=lengths.device)
    return positions[None, :] >= lengths[:, None]


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Causal mask ``(size, size)``: ``True`` above the diagonal, where query ``i`` would see key ``j > i``.

    >>> causal_mask(3)
    tensor([[False,  True,  True],
            [False, False,  True],
            [False, False, False]])
    """
    if size < 1:
        raise ValueError(f"causal_mask needs size >= 1, got {size}")
    return torch.ones(size, size, dtype=torch.bool, device=device).triu(diagonal=1)
