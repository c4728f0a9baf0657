"""Attention: scoring, the masked softmax, and (chapter 5) multi-head attention.

Chapter 3 builds attention pooling from a query, keys and values; chapter 4
turns it on one sequence (self-attention); chapter 5 splits it into heads.
Masks follow PyTorch's convention: bool, ``True`` = ignore.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .masks import causal_mask, check_mask

__all__ = [
    "masked_softmax",
    "attention_mask",
    "AdditiveAttention",
    "DotProductAttention",
    "scaled_dot_product_attention",
    "MultiHeadAttention",
    "attention_kernels_for",
]


def attention_kernels_for(device: torch.device | str) -> None:
    """Choose the fused attention kernels for batches whose shape changes from one to the next, on ``device``.

    On a CUDA GPU, cuDNN's attention kernels are left out of those that
    ``F.scaled_dot_product_attention`` chooses among. PyTorch tries them first
    for attention with a padding mask, and cuDNN builds an execution plan for
    every new shape of its inputs, milliseconds of the host's time each;
    length-bucketed batches take a new shape almost every step (on one H100, a
    profile of 150 steps of the translator found 13 s of the host's time inside
    the attention calls: ``book/results/translator_gpu_h100.json``).
    FlashAttention and the memory-efficient kernels serve every shape without
    a plan. On a CPU nothing changes. The setting is PyTorch's, for the whole
    process; ``attnbook.notebook.setup`` and the command line call this.
    """
    if torch.device(device).type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)


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
            "queries, keys and values must share the batch size B, got "
            f"{queries.shape[0]}, {keys.shape[0]}, {values.shape[0]}"
        )
    if keys.shape[1] != values.shape[1]:
        raise ValueError(
            f"keys and values must have the same length S, got {keys.shape[1]} keys and {values.shape[1]} values"
        )


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
            raise ValueError(
                f"queries have {queries.shape[-1]} features, this attention expects {self.W_q.in_features}"
            )
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
    ``(outputs, weights)`` of shapes ``(B, T, d_v)`` and ``(B, T, S)``. It is
    the module form of :func:`scaled_dot_product_attention`, which computes the
    weights explicitly so that they can be returned and drawn; PyTorch's fused
    ``F.scaled_dot_product_attention`` computes the same outputs faster but
    does not return the weights.
    """

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_qkv(queries, keys, values)
        mask = attention_mask(mask, queries.shape[0], queries.shape[1], keys.shape[1])
        p = self.dropout.p if self.training else 0.0
        return scaled_dot_product_attention(queries, keys, values, mask, dropout=p)


# =============================================================================
# Chapters 4 and 5: scaled dot-product attention and multi-head attention.
# =============================================================================


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention as chapter 4 writes it: ``softmax(Q Kᵀ / √d_k) V``, returning the output and the weights.

    Shapes: ``query`` ``(..., T, d_k)``, ``key`` ``(..., S, d_k)``, ``value``
    ``(..., S, d_v)``, with the same leading (batch, head) axes. ``mask`` is
    boolean, ``True`` = ignore, and broadcasts to the scores ``(..., T, S)``.
    Returns the output ``(..., T, d_v)`` and the weights ``(..., T, S)``; a
    query whose every key is masked gets zero weights and a zero output.
    ``dropout`` (a probability) drops weights before they mix the values; the
    weights returned are those before dropout.

    This is the version to read and to draw pictures from. It builds the whole
    ``(T, S)`` score matrix; :class:`MultiHeadAttention` calls PyTorch's fused
    kernel instead when the weights are not asked for.
    """
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(
            "query, key and value need at least 2 axes (..., length, width); got shapes "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same width d_k to be compared by a dot product; "
            f"got query width {query.shape[-1]} and key width {key.shape[-1]}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same length S (one value per key); "
            f"got {key.shape[-2]} keys and {value.shape[-2]} values"
        )
    if not (query.shape[:-2] == key.shape[:-2] == value.shape[:-2]):
        raise ValueError(
            "query, key and value must have the same leading (batch, head) axes; got "
            f"{tuple(query.shape[:-2])}, {tuple(key.shape[:-2])}, {tuple(value.shape[:-2])}"
        )
    query = query / math.sqrt(query.shape[-1])  # the same as scaling the scores, on a smaller tensor
    scores = query @ key.transpose(-2, -1)  # (..., T, S)
    weights = masked_softmax(scores, mask)
    mixed = F.dropout(weights, dropout) if dropout > 0 else weights
    return mixed @ value, weights


class MultiHeadAttention(nn.Module):
    """Multi-head attention (chapter 5), with PyTorch's mask convention: bool, ``True`` = ignore.

    ``forward(query, key, value)`` takes ``(B, T, d_model)`` queries and
    ``(B, S, d_model)`` keys and values and returns ``(B, T, d_model)``; with
    ``need_weights=True`` it also returns the attention weights
    ``(B, num_heads, T, S)``, computed by :func:`scaled_dot_product_attention`.
    Otherwise it takes the fast path: ``torch.nn.functional.scaled_dot_product_attention``,
    PyTorch's fused kernel, which never stores the weights. On a CPU that kernel
    only pays off for longer sequences: below ``fused_kernel_min_keys`` keys two
    batched matrix products are faster, so the fast path uses those (and drops
    the weights). All paths agree (the tests check it).

    The query, key and value projections are stored as one ``(3 d_model,
    d_model)`` matrix, ``in_proj`` (rows: ``W_q``, ``W_k``, ``W_v``), laid out as in
    ``torch.nn.MultiheadAttention``. In self-attention (``query is key is
    value``) one matrix product computes all three; in cross-attention the
    query is projected on its own and the keys and values together (or apart,
    when they differ). The heads are a reshape: ``(B, T, d_model)`` is viewed as
    ``(B, T, num_heads, d_model // num_heads)``; no loop runs over heads.

    Masks: ``key_padding_mask`` ``(B, S)`` marks padded keys; ``is_causal=True``
    (self-attention, ``T == S``) keeps query ``i`` from seeing key ``j > i``.
    A query that sees no key at all gets a zero attention output (then
    ``out_proj``'s bias).
    """

    #: On a CPU, the fused kernel is used from this many keys on; below it, explicit
    #: matrix products are faster (measured by tests/benchmarks/bench_multihead.py).
    fused_kernel_min_keys: int = 192

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        if num_heads < 1:
            raise ValueError(f"num_heads must be >= 1, got {num_heads}")
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads}): "
                f"each head gets d_model // num_heads features"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout = dropout
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # rows: W_q, W_k, W_v
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform for each of W_q, W_k, W_v, PyTorch's default for the output; zero biases."""
        for block in self.in_proj.weight.detach().chunk(3):
            nn.init.xavier_uniform_(block)
        self.out_proj.reset_parameters()
        for linear in (self.in_proj, self.out_proj):
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, dropout={self.dropout}"

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        B, T, S = self._check_inputs(query, key, value)
        q, k, v = self._project(query, key, value)  # (B, h, T, d_k), (B, h, S, d_k), (B, h, S, d_k)
        mask = self._ignore_mask(key_padding_mask, is_causal, B, T, S, query.device)  # None, (T, S) or (B, 1, T | 1, S)
        p = self.dropout if self.training else 0.0
        explicit = need_weights or (S < self.fused_kernel_min_keys and query.device.type == "cpu")
        if explicit:
            heads, weights = scaled_dot_product_attention(q, k, v, mask, dropout=p)
        elif mask is None or (is_causal and key_padding_mask is None):
            heads = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=is_causal)
        else:  # PyTorch's kernel takes True = *attend*: flip our mask
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask, dropout_p=p)
        # merge the heads: (B, h, T, d_k) -> (B, T, h, d_k) -> (B, T, d_model)
        out = self.out_proj(heads.transpose(1, 2).reshape(B, T, self.d_model))
        return (out, weights) if need_weights else out

    # --- Pieces for a decoder that caches keys and values (chapter 7) ---------------------
    #
    # A decoder that generates one token at a time asks the same questions again at
    # every step: the cross-attention keys and values of the source never change,
    # and the self-attention keys and values of earlier target tokens neither. These
    # methods split ``forward`` into its projection and its attention, so that a
    # decoder can project once, keep the heads, and attend with new queries later.

    def project_self(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of a self-attention input ``(B, T, d_model)``: three ``(B, h, T, d_k)``.

        One matrix product makes all three.
        """
        self._check_width(x, "x")
        return self._split_heads(self.in_proj(x), 3)

    def project_query(self, query: torch.Tensor) -> torch.Tensor:
        """The queries ``(B, h, T, d_k)`` of ``query`` ``(B, T, d_model)``."""
        self._check_width(query, "query")
        b = self.in_proj.bias
        (q,) = self._split_heads(
            F.linear(query, self.in_proj.weight[: self.d_model], None if b is None else b[: self.d_model])
        )
        return q

    def project_key_value(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values ``(B, h, S, d_k)`` of ``memory`` ``(B, S, d_model)``, in one product.

        A decoder calls it once per sentence for its cross-attention, and
        reuses the result at every step; so they are returned contiguous, laid
        out as the attention's matrix products read them, rather than as
        views that every step would have to copy.
        """
        self._check_width(memory, "memory")
        d, b = self.d_model, self.in_proj.bias
        k, v = self._split_heads(F.linear(memory, self.in_proj.weight[d:], None if b is None else b[d:]), 2)
        return k.contiguous(), v.contiguous()

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attention of projected heads, then the output projection: ``forward`` after its projections.

        ``q`` is ``(B, h, T, d_k)``; ``k`` and ``v`` are ``(B, h, S, d_k)``, as the
        ``project_*`` methods return them. ``key_padding_mask`` is ``(B, S)``.
        With ``is_causal=True`` the ``T`` queries are the *last* ``T`` of the ``S``
        positions (``T <= S``): query ``i`` sits at position ``S - T + i`` and
        sees the keys up to it. With ``T == S`` this is the usual causal mask;
        with ``T == 1`` it is one new token that sees every cached key.
        Returns ``(B, T, d_model)``, and the weights ``(B, h, T, S)`` with
        ``need_weights=True``.
        """
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            raise ValueError(
                "attend takes heads of shape (B, h, length, d_k); got shapes "
                f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
            )
        heads = (self.num_heads, self.head_dim)
        for name, x in (("q", q), ("k", k), ("v", v)):
            if (x.shape[1], x.shape[3]) != heads:
                raise ValueError(f"{name} must have {heads[0]} heads of width {heads[1]}, got shape {tuple(x.shape)}")
        B, T, S = q.shape[0], q.shape[2], k.shape[2]
        if not (k.shape[0] == v.shape[0] == B) or v.shape[2] != S:
            raise ValueError(
                "q, k, v disagree on the batch or the number of keys: "
                f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
            )
        if is_causal and T > S:
            raise ValueError(
                f"is_causal=True needs the queries to be the last positions of the keys (T <= S); got T={T}, S={S}"
            )
        mask = self._ignore_mask(key_padding_mask, is_causal and T == S, B, T, S, q.device)
        if is_causal and T < S and T > 1:  # queries at positions S - T .. S - 1
            future = torch.ones(T, S, dtype=torch.bool, device=q.device).triu(diagonal=S - T + 1)
            mask = future if mask is None else mask | future
        p = self.dropout if self.training else 0.0
        explicit = need_weights or (S < self.fused_kernel_min_keys and q.device.type == "cpu")
        if explicit:
            heads_out, weights = scaled_dot_product_attention(q, k, v, mask, dropout=p)
        elif mask is None or (is_causal and T == S and key_padding_mask is None):
            heads_out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=is_causal and T == S and T > 1)
        else:
            heads_out = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask, dropout_p=p)
        out = self.out_proj(heads_out.transpose(1, 2).reshape(B, T, self.d_model))
        return (out, weights) if need_weights else out

    def _check_width(self, x: torch.Tensor, name: str) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() != 3:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{name} must have shape (B, length, d_model), got {shape}")
        if x.shape[-1] != self.d_model:
            raise ValueError(f"{name} has width {x.shape[-1]}, but this layer has d_model={self.d_model}")

    def _split_heads(self, x: torch.Tensor, parts: int = 1) -> tuple[torch.Tensor, ...]:
        """``(B, L, parts * d_model)`` -> ``parts`` tensors ``(B, h, L, d_k)``, all views."""
        x = x.unflatten(-1, (parts, self.num_heads, self.head_dim))  # (B, L, parts, h, d_k)
        return tuple(t.transpose(1, 2) for t in x.unbind(2))

    def _project(self, query, key, value) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if query is key and key is value:  # self-attention: one product gives Q, K and V
            return self._split_heads(self.in_proj(query), 3)
        d = self.d_model
        w, b = self.in_proj.weight, self.in_proj.bias
        b_q, b_kv = (None, None) if b is None else (b[:d], b[d:])
        (q,) = self._split_heads(F.linear(query, w[:d], b_q))
        if key is value:  # cross-attention to one memory: keys and values in one product
            k, v = self._split_heads(F.linear(key, w[d:], b_kv), 2)
        else:
            b_k, b_v = (None, None) if b is None else (b_kv[:d], b_kv[d:])
            (k,) = self._split_heads(F.linear(key, w[d : 2 * d], b_k))
            (v,) = self._split_heads(F.linear(value, w[2 * d :], b_v))
        return q, k, v

    def _check_inputs(self, query, key, value) -> tuple[int, int, int]:
        for name, x in (("query", query), ("key", key), ("value", value)):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
            if x.dim() != 3:
                raise ValueError(f"{name} must have shape (B, length, d_model), got shape {tuple(x.shape)}")
            if x.shape[-1] != self.d_model:
                raise ValueError(f"{name} has width {x.shape[-1]}, but this layer has d_model={self.d_model}")
        if not (query.shape[0] == key.shape[0] == value.shape[0]):
            raise ValueError(
                f"query, key and value must have the same batch size B; got "
                f"{query.shape[0]}, {key.shape[0]} and {value.shape[0]}"
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(
                f"key and value must have the same length S; got {key.shape[1]} keys and {value.shape[1]} values"
            )
        return query.shape[0], query.shape[1], key.shape[1]

    @staticmethod
    def _ignore_mask(key_padding_mask, is_causal: bool, B: int, T: int, S: int, device) -> torch.Tensor | None:
        """The keys each query must ignore, as one bool tensor broadcasting to ``(B, h, T, S)``."""
        mask = None
        if key_padding_mask is not None:
            check_mask(key_padding_mask, (B, S), "key_padding_mask")
            if tuple(key_padding_mask.shape) != (B, S):
                raise ValueError(
                    f"key_padding_mask must have shape (B, S) = ({B}, {S}), got {tuple(key_padding_mask.shape)}"
                )
            mask = key_padding_mask[:, None, None, :]  # (B, 1, 1, S)
        if is_causal:
            if T != S:
                raise ValueError(
                    f"is_causal=True needs as many queries as keys (self-attention); got T={T} queries and S={S} keys"
                )
            future = causal_mask(T, device=device)
            mask = future if mask is None else mask | future  # (T, S) or (B, 1, T, S)
        return mask
