"""Attention: scoring, the masked softmax, and (chapter 5) multi-head attention.

Chapter 3 builds attention pooling from a query, keys and values; chapter 4
turns it on one sequence (self-attention); chapter 5 splits it into heads.
Masks follow PyTorch's convention: bool, ``True`` = ignore.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .masks import check_mask

__all__ = ["masked_softmax", "attention_mask", "AdditiveAttention", "DotProductAttention"]


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


# --- Chapter 3: attention pooling with learned scores ---------------------------
#
# Both modules take queries (B, T, d_q), keys (B, S, d_k) and values (B, S, d_v),
# score every query against every key, turn the scores into weights with the
# masked softmax, and return the weighted average of the values together with
# the weights, so that a chapter can draw them.


def _check_qkv(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
    for name, x in (("queries", queries), ("keys", keys), ("values", values)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 3:
            raise ValueError(f"{name} must have shape (B, length, features), got shape {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if not queries.shape[0] == keys.shape[0] == values.shape[0]:
        raise ValueError(
            f"queries, keys and values must share the batch size B, got {queries.shape[0]}, {keys.shape[0]}, {values.shape[0]}"
        )
    if keys.shape[1] != values.shape[1]:
        raise ValueError(f"keys and values must have the same length S, got {keys.shape[1]} keys and {values.shape[1]} values")


def attention_mask(mask: torch.Tensor | None, batch: int, queries: int, keys: int) -> torch.Tensor | None:
    """Bring ``mask`` to a shape that broadcasts to scores ``(B, T, S)``, or raise a clear error.

    A 2-D mask is a key-padding mask and must be ``(B, S)``; it is applied to
    every query. Any other mask must broadcast to ``(B, T, S)`` as it is.
    """
    if mask is None:
        return None
    if isinstance(mask, torch.Tensor) and mask.dim() == 2:
        if tuple(mask.shape) != (batch, keys):
            raise ValueError(
                f"a 2-D mask is a key-padding mask of shape (B, S) = {(batch, keys)}, got shape {tuple(mask.shape)}"
            )
        mask = mask[:, None, :]
    check_mask(mask, (batch, queries, keys))
    return mask


class AdditiveAttention(nn.Module):
    """Additive (Bahdanau) attention: ``score(q, k) = w_v · tanh(W_q q + W_k k)``.

    Queries and keys may have different widths; both are projected to
    ``hidden_size``. ``forward`` returns ``(outputs, weights)`` of shapes
    ``(B, T, d_v)`` and ``(B, T, S)``; dropout (if any) acts on the weights used
    for pooling, not on the weights returned.
    """

    def __init__(self, query_size: int, key_size: int, hidden_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.W_q = nn.Linear(query_size, hidden_size, bias=False)
        self.W_k = nn.Linear(key_size, hidden_size, bias=False)
        self.w_v = nn.Linear(hidden_size, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """``W_k keys``: computed once per sentence by a decoder that asks many queries."""
        if keys.shape[-1] != self.W_k.in_features:
            raise ValueError(f"keys have {keys.shape[-1]} features, this attention expects {self.W_k.in_features}")
        return self.W_k(keys)

    def scores(self, queries: torch.Tensor, projected_keys: torch.Tensor) -> torch.Tensor:
        """Scores ``(B, T, S)`` from queries ``(B, T, d_q)`` and projected keys ``(B, S, h)``."""
        if queries.shape[-1] != self.W_q.in_features:
            raise ValueError(f"queries have {queries.shape[-1]} features, this attention expects {self.W_q.in_features}")
        features = torch.tanh(self.W_q(queries).unsqueeze(2) + projected_keys.unsqueeze(1))  # (B, T, S, h)
        return self.w_v(features).squeeze(-1)

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | None = None,
        projected_keys: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_qkv(queries, keys, values)
        if projected_keys is None:
            projected_keys = self.project_keys(keys)
        scores = self.scores(queries, projected_keys)
        weights = masked_softmax(scores, attention_mask(mask, *scores.shape))
        return torch.bmm(self.dropout(weights), values), weights


class DotProductAttention(nn.Module):
    """Scaled dot-product attention: ``score(q, k) = q · k / sqrt(d)``.

    Queries and keys must have the same width ``d``. ``forward`` returns
    ``(outputs, weights)`` of shapes ``(B, T, d_v)`` and ``(B, T, S)``. It
    computes the weights explicitly so that they can be returned and drawn;
    PyTorch's fused ``F.scaled_dot_product_attention`` computes the same
    outputs faster but does not return the weights.
    """

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_qkv(queries, keys, values)
        d = queries.shape[-1]
        if keys.shape[-1] != d:
            raise ValueError(f"queries and keys must have the same width d, got {d} and {keys.shape[-1]}")
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        weights = masked_softmax(scores, attention_mask(mask, *scores.shape))
        return torch.bmm(self.dropout(weights), values), weights
