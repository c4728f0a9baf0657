"""Masks, in PyTorch's convention: boolean tensors where ``True`` means *ignore*.

Chapter 1 builds the padding mask, chapter 3 uses it inside attention, and
chapter 5 adds the causal mask that keeps a decoder from reading ahead.
"""

from __future__ import annotations

import torch

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


def check_mask(mask: torch.Tensor, shape: torch.Size | tuple[int, ...], name: str = "mask") -> None:
    """Raise a clear error unless ``mask`` is boolean and broadcasts to ``shape``."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor (True = ignore), got dtype {mask.dtype}; "
            f"convert a 0/1 mask with `{name}.bool()` or a lengths vector with attnbook.masks.padding_mask"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, tuple(shape))
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(shape):
        raise ValueError(f"{name} of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(shape)}")
