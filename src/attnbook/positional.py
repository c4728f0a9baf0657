"""Positional encodings (chapter 6): sinusoids, the rotation that relates positions, learned tables.

Attention treats its input as a set: shuffle the tokens and the outputs
shuffle the same way (chapter 4). A positional encoding adds to each token's
vector a vector that depends only on its position, so that order becomes
visible.

- :func:`sinusoidal_table` is the table of Vaswani et al. (2017): the pair of
  features ``2i, 2i + 1`` at position ``p`` is ``(sin(ω_i p), cos(ω_i p))`` with
  ``ω_i = base ** (-2i / d_model)``.
- :func:`rotation_for_offset` is the matrix that moves every position ``p`` to
  ``p + k``: ``table[p + k] = rotation_for_offset(k, d) @ table[p]``, the same
  matrix for every ``p``.
- :class:`SinusoidalPositionalEncoding` and :class:`LearnedPositionalEncoding`
  add an encoding to a batch ``(B, T, d_model)``.

Longer sequences than the table holds, by a stated rule: a sinusoidal table
is defined for every position, so with ``extend=True`` (the default) it is
recomputed, once, for the next power of two that covers the sequence; with
``extend=False`` such a sequence is an error. A learned table has nothing to
say about positions it never trained: a sequence longer than ``max_len`` is
always an error.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "sinusoid_frequencies",
    "sinusoidal_table",
    "rotation_for_offset",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEncoding",
]


def _check_width(d_model: int) -> None:
    if not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be an even integer >= 2 (features come in sin/cos pairs), got {d_model!r}")


def sinusoid_frequencies(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The ``d_model // 2`` angular frequencies ``ω_i = base ** (-2i / d_model)``, from 1 down to about ``1 / base``."""
    _check_width(d_model)
    if base <= 1:
        raise ValueError(f"base must be > 1, got {base}")
    return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def sinusoidal_table(
    length: int, d_model: int, base: float = 10000.0, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """The sinusoidal encodings of positions ``0 .. length - 1``: shape ``(length, d_model)``.

    Column ``2i`` holds ``sin(ω_i p)`` and column ``2i + 1`` holds ``cos(ω_i p)``.
    Computed in float64 (angles reach thousands of radians), returned as ``dtype``
    (default: PyTorch's default dtype).
    """
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    angles = torch.arange(length, dtype=torch.float64)[:, None] * sinusoid_frequencies(d_model, base)  # (length, d/2)
    table = torch.stack([angles.sin(), angles.cos()], dim=-1)  # (length, d/2, 2): sin, cos side by side
    return table.reshape(length, d_model).to(dtype or torch.get_default_dtype())


def rotation_for_offset(
    offset: int | float, d_model: int, base: float = 10000.0, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """The ``(d_model, d_model)`` matrix ``M_k`` with ``table[p + k] = M_k @ table[p]`` for every position ``p``.

    It is block diagonal: the pair ``(sin ω_i p, cos ω_i p)`` is turned by the
    angle ``ω_i k`` with the block ``[[cos ω_i k, sin ω_i k], [-sin ω_i k, cos ω_i k]]``
    (the angle-addition formulas). It does not depend on ``p``: moving by
    ``k`` is one linear map wherever you start. For rows of a table, use
    ``table[p] @ M_k.T``. Returned as ``dtype`` (default: PyTorch's default dtype).
    """
    angles = offset * sinusoid_frequencies(d_model, base)  # (d/2,)
    cos, sin = angles.cos(), angles.sin()
    blocks = torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)  # (d/2, 2, 2)
    return torch.block_diag(*blocks).to(dtype or torch.get_default_dtype())


def _check_batch(x: torch.Tensor, d_model: int, start: int) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"expected a batch of shape (B, T, d_model), got {shape}")
    if x.shape[-1] != d_model:
        raise ValueError(f"the batch has width {x.shape[-1]}, but the encoding has d_model={d_model}")
    if not isinstance(start, int) or start < 0:
        raise ValueError(f"start (the position of the first token) must be an integer >= 0, got {start!r}")


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding of positions ``start .. start + T - 1`` to ``x`` ``(B, T, d_model)``, then dropout.

    The table is computed once, for ``max_len`` positions, and kept as a
    (non-trainable, unsaved) buffer. A sequence reaching past it is handled by
    the rule of the module docstring: ``extend=True`` recomputes the table
    once for the next power of two that covers it; ``extend=False`` raises.
    ``start`` is the position of the first token (non-zero when decoding one
    token at a time).
    """

    def __init__(
        self, d_model: int, max_len: int = 512, dropout: float = 0.0, base: float = 10000.0, extend: bool = True
    ) -> None:
        super().__init__()
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        self.d_model, self.base, self.extend = d_model, base, extend
        self.register_buffer("table", sinusoidal_table(max_len, d_model, base), persistent=False)
        self.dropout = nn.Dropout(dropout)

    @property
    def max_len(self) -> int:
        return self.table.shape[0]

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, base={self.base}, extend={self.extend}"

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        _check_batch(x, self.d_model, start)
        end = start + x.shape[1]
        if end > self.max_len:
            if not self.extend:
                raise ValueError(
                    f"positions up to {end - 1} were asked for, but the table holds positions 0..{self.max_len - 1}; "
                    f"build the encoding with max_len >= {end}, or with extend=True"
                )
            length = 1 << (end - 1).bit_length()  # the next power of two >= end
            self.table = sinusoidal_table(length, self.d_model, self.base, self.table.dtype).to(self.table.device)
        return self.dropout(x + self.table[start:end].to(x.dtype))


class LearnedPositionalEncoding(nn.Module):
    """Adds a trained vector per position (an ``nn.Embedding`` of ``max_len`` rows) to ``x``, then dropout.

    The vectors start small (normal, standard deviation 0.02) and are learned
    with the model. Positions ``>= max_len`` have no vector, and nothing
    could say what it should be: asking for them raises an error.
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0) -> None:
        super().__init__()
        if max_len < 1 or d_model < 1:
            raise ValueError(f"d_model and max_len must be >= 1, got {d_model} and {max_len}")
        self.d_model = d_model
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)

    @property
    def max_len(self) -> int:
        return self.embedding.num_embeddings

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        _check_batch(x, self.d_model, start)
        end = start + x.shape[1]
        if end > self.max_len:
            raise ValueError(
                f"positions up to {end - 1} were asked for, but this learned encoding only has vectors for "
                f"positions 0..{self.max_len - 1}; a learned table cannot be extended (train with a larger max_len)"
            )
        positions = torch.arange(start, end, device=x.device)
        return self.dropout(x + self.embedding(positions).to(x.dtype))
