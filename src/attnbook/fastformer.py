"""Fastformer (chapter 9): additive attention in linear time, as the authors' reference code computes it.

Self-attention compares every position with every other one, so its cost grows
as ``N²`` with the length ``N``. Fastformer {Wu et al., 2021} never forms a
pair: per head ``h`` (head width ``d_h = d / H``), it

1. scores every query vector with one learned linear map,
   ``α_i = softmax_i(query_att(q_i)_h / √d_h)``, and pools the queries into one
   *global query* ``q̄ = Σ_i α_i q_i`` (the head-``h`` slice of a ``d``-vector);
2. mixes it into every key element-wise, ``p_i = k_i ⊙ q̄``, scores those the
   same way, ``β_i = softmax_i(key_att(p_i)_h / √d_h)``, and pools them into one
   *global key* ``k̄ = Σ_i β_i p_i``;
3. mixes the global key into every value element-wise, ``u_i = k̄ ⊙ v_i``, where
   the values share the queries' projection (``v_i = q_i``), and returns
   ``transform(u_i) + q_i``.

Each step is a pass over the positions: the cost is ``O(N d²)`` for the
projections and ``O(N d)`` for the two poolings. The submodules carry the
names of the authors' ``FastSelfAttention`` (``query``, ``key``,
``query_att``, ``key_att``, ``transform``), so a state dict of theirs loads
into :class:`FastSelfAttention` as it is.

Also here: :class:`FastformerLayer` and :class:`FastformerEncoder` (the
authors' post-norm block: attention, output projection, dropout, residual
LayerNorm, then a GELU feed-forward network with its residual LayerNorm; with
the paper's optional sharing of one layer's parameters across the stack), a
causal variant in which position ``i`` pools positions ``≤ i`` only, computed
with prefix sums in linear time, and, for comparison, :class:`SoftmaxEncoder`:
the same block built around chapter 5's :class:`~attnbook.attention.MultiHeadAttention`,
and two other attentions of linear cost, kernelized (:class:`LinearSelfAttention`)
and low-rank (:class:`LinformerSelfAttention`).
Masks are bool with ``True`` = ignore (padding), as everywhere in the library.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention, masked_softmax

__all__ = [
    "FastSelfAttention",
    "prefix_softmax_pool",
    "AttentionPooling",
    "LinearSelfAttention",
    "LinformerSelfAttention",
    "FastformerLayer",
    "FastformerEncoder",
    "SoftmaxEncoderLayer",
    "SoftmaxEncoder",
]


def _check_input(x: torch.Tensor, d_model: int, name: str = "x") -> tuple[int, int]:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 3:
        raise ValueError(f"{name} must have shape (B, N, d_model), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.shape[-1] != d_model:
        raise ValueError(f"{name} has width {x.shape[-1]}, but this layer has d_model={d_model}")
    if x.shape[1] < 1:
        raise ValueError(f"{name} is an empty sequence (N=0): there is nothing to attend to")
    return x.shape[0], x.shape[1]


def _check_padding_mask(mask: torch.Tensor | None, B: int, N: int) -> None:
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"key_padding_mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"key_padding_mask must be a bool tensor (True = padding, ignore), got dtype {mask.dtype}; "
            "convert a 0/1 mask with `mask.bool()` or build one from lengths with attnbook.masks.padding_mask"
        )
    if tuple(mask.shape) != (B, N):
        raise ValueError(f"key_padding_mask must have shape (B, N) = ({B}, {N}), got {tuple(mask.shape)}")


def _check_heads(d_model: int, num_heads: int) -> None:
    for name, value in (("d_model", d_model), ("num_heads", num_heads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if d_model % num_heads != 0:
        raise ValueError(
            f"d_model ({d_model}) must be divisible by num_heads ({num_heads}): "
            f"each head pools a slice of d_model // num_heads features"
        )


def _check_dropout(dropout: float) -> None:
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be a probability in [0, 1), got {dropout}")


def prefix_softmax_pool(
    scores: torch.Tensor, values: torch.Tensor, ignore: torch.Tensor | None = None, *, chunk: int | None = None
) -> torch.Tensor:
    """Causal attention pooling in linear time: ``out_i = Σ_{j ≤ i} softmax_{j ≤ i}(s)_j · v_j``.

    ``scores`` ``(B, N, H)`` (one score per position and head), ``values``
    ``(B, N, H, d_h)``, ``ignore`` ``(B, N)`` bool (``True`` = padding, zero
    weight) or ``None``. Returns ``(B, N, H, d_h)``: row ``i`` pools the values
    of positions ``0..i`` with the softmax of their scores. A position with no
    unmasked position at or before it gets zeros.

    Row ``i`` is a ratio of two sums, ``Σ_{j≤i} e^{s_j - m_i} v_j`` over
    ``ℓ_i = Σ_{j≤i} e^{s_j - m_i}``, where ``m_i`` is the running maximum of the
    scores up to ``i`` (a shift leaves the ratio unchanged; this one keeps every
    exponent at most 0, so nothing overflows, and the largest term is
    ``e^0 = 1``, so ``ℓ_i ≥ 1``). Write ``e^{s_j - m_i} = w_j e^{m_j - m_i}``
    with ``w_j = e^{s_j - m_j} ≤ 1``: both sums are then one scan,
    ``P_i = Σ_{j≤i} e^{m_j - m_i} y_j`` with ``y_j = [w_j v_j, w_j]`` (the
    denominator rides along as one more feature), computed by :func:`_scan` in
    chunks of ``chunk`` positions (default: the head width ``d_h``, so that a
    chunk's grid of weights takes no more room than its values). The cost is
    linear in ``N``, and no tensor has ``N × N`` entries.

    The backward pass is written out (:class:`_PrefixSoftmaxPool`): the
    gradients are the same kind of sums taken the other way, from the end of
    the sequence back (``Σ_{i ≥ j}``), so one more scan computes them all, for
    every head at once, with no graph of the forward's small steps to walk back
    through.
    """
    chunk = max(2, values.shape[-1]) if chunk is None else chunk
    if chunk < 2:
        raise ValueError(f"chunk must be at least 2 positions, got {chunk}")
    return _PrefixSoftmaxPool.apply(scores, values, ignore, chunk)


class _PrefixSoftmaxPool(torch.autograd.Function):
    """:func:`prefix_softmax_pool` with its backward pass written out.

    With ``a_ij = e^{s_j - m_i} / ℓ_i`` the weight of ``j`` in row ``i`` and ``g_i`` the
    gradient of row ``i``: ``∂L/∂v_j = Σ_{i≥j} a_ij g_i`` and
    ``∂L/∂s_j = Σ_{i≥j} a_ij g_i · (v_j - out_i) = v_j · ∂L/∂v_j - Σ_{i≥j} a_ij (g_i · out_i)``.
    Since ``a_ij = w_j e^{m_j - m_i} / ℓ_i``, both are ``w_j`` times a backward scan,
    ``T_j = Σ_{i≥j} e^{m_j - m_i} z_i`` of ``z_i = [g_i, g_i · out_i] / ℓ_i``. The
    running maximum ``m`` is a shift: it has no gradient.
    """

    @staticmethod
    def forward(ctx, scores, values, ignore, chunk):
        B, N, H, d_h = values.shape
        s = scores.transpose(1, 2)  # (B, H, N): heads first from here on
        if ignore is not None:  # padding has no say in the running maximum ...
            s = s.masked_fill(ignore[:, None, :], _lowest(s))
        m = s.cummax(dim=-1).values  # m_i, never decreasing
        w = torch.exp(s - m)  # w_j = e^{s_j - m_j}, in (0, 1]
        if ignore is not None:  # ... and no weight
            w = w.masked_fill(ignore[:, None, :], 0.0)
        y = values.new_empty(B, H, N, d_h + 1)  # [w_j v_j, w_j]
        torch.mul(values.transpose(1, 2), w[..., None], out=y[..., :d_h])
        y[..., d_h] = w
        sums, weights = _scan(m, y, chunk)
        total = sums[..., d_h]  # ℓ_i ≥ 1 ...
        if ignore is not None:  # ... or 0 where there is nothing to pool yet: zeros, not 0 / 0
            total = total.masked_fill(total == 0, 1.0)
        out = values.new_empty(B, N, H, d_h)
        torch.div(sums[..., :d_h], total[..., None], out=out.transpose(1, 2))
        ctx.save_for_backward(values, out, m, w, total, weights)
        ctx.chunk = chunk
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        values, out, m, w, total, weights = ctx.saved_tensors
        B, N, H, d_h = values.shape
        inv = total.reciprocal()
        z = values.new_empty(B, H, N, d_h + 1)  # [g_i, g_i · out_i] / ℓ_i
        torch.mul(grad.transpose(1, 2), inv[..., None], out=z[..., :d_h])
        z[..., d_h] = (grad * out).sum(dim=-1).transpose(1, 2) * inv
        t, _ = _scan(m, z, ctx.chunk, reverse=True, weights=weights)  # T_j = Σ_{i≥j} e^{m_j - m_i} z_i
        dvalues = values.new_empty(B, N, H, d_h)
        torch.mul(t[..., :d_h], w[..., None], out=dvalues.transpose(1, 2))
        dscores = (values * dvalues).sum(dim=-1) - (w * t[..., d_h]).transpose(1, 2)
        return dscores, dvalues, None, None


def _scan(
    r: torch.Tensor, y: torch.Tensor, chunk: int, reverse: bool = False, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``P_i = Σ_{j ≤ i} e^{r_j - r_i} y_j`` for every ``i`` (``reverse``: ``T_j = Σ_{i ≥ j} e^{r_j - r_i} y_i``).

    ``r`` ``(..., N)`` must never decrease, so that every exponent is at most 0;
    ``y`` is ``(..., N, f)``. Up to ``chunk`` positions, one grid of weights does
    it (:func:`_grid`). Beyond, the sequence is cut into chunks of ``chunk``
    positions (the last one padded with positions that weigh nothing), and

    1. every position sums its own chunk, one small grid per chunk;
    2. what the other chunks contribute is again a scan, over a sequence
       ``chunk`` times shorter: forward, the chunks' totals at their last
       position, with ``r`` at the chunks' ends; backward, at their first
       position, with ``r`` at their starts. This same function computes it;
    3. each position adds what lies beyond its chunk, carried to its own ``r``
       by one factor ``e^{r_end(k-1) - r_i}`` (forward) or ``e^{r_i - r_start(k+1)}``
       (backward), at most 1: the rescaling of an online softmax.

    The levels have ``N``, ``N / chunk``, ``N / chunk²``, … positions: the work is
    linear in ``N``. Returns the sums and the grids of step 1, which depend on
    ``r`` alone: the backward scan over the same ``r`` passes them back as
    ``weights`` instead of computing them again.
    """
    N = r.shape[-1]
    if N <= chunk:
        weights = _grid(r) if weights is None else weights
        return (weights.transpose(-1, -2) if reverse else weights) @ y, weights
    chunks = -(-N // chunk)
    pad = chunks * chunk - N
    if pad:  # positions with y = 0 weigh nothing; r stays at its last value, so it never decreases
        r = torch.cat([r, r[..., -1:].expand(*r.shape[:-1], pad)], dim=-1)
        y = F.pad(y, (0, 0, 0, pad))
    r = r.unflatten(-1, (chunks, chunk))  # (..., chunks, chunk)
    weights = _grid(r) if weights is None else weights  # (..., chunks, chunk, chunk)
    sums = (weights.transpose(-1, -2) if reverse else weights) @ y.unflatten(-2, (chunks, chunk))  # 1.
    if not reverse:
        ends = r[..., -1]
        upto, _ = _scan(ends, sums[..., -1, :], chunk)  # 2. chunks 0..k, referenced to r at k's end
        carry = torch.exp(ends[..., :-1, None] - r[..., 1:, :])  # 3. chunk k adds row k - 1 of that
        sums[..., 1:, :, :].addcmul_(carry[..., None], upto[..., :-1, None, :])
    else:
        starts = r[..., 0]
        after, _ = _scan(starts, sums[..., 0, :], chunk, reverse=True)  # 2. chunks k.., referenced to r at k's start
        carry = torch.exp(r[..., :-1, :] - starts[..., 1:, None])  # 3. chunk k adds row k + 1 of that
        sums[..., :-1, :, :].addcmul_(carry[..., None], after[..., 1:, None, :])
    return sums.flatten(-3, -2)[..., :N, :], weights


_ABOVE: dict[tuple[int, torch.device], torch.Tensor] = {}


def _grid(r: torch.Tensor) -> torch.Tensor:
    """The ``n × n`` grid of weights ``e^{r_j - r_i}`` where ``j ≤ i``, 0 above the diagonal: ``(..., i, j)``.

    Above the diagonal ``r_j - r_i`` could be large and ``exp`` overflow, so
    those entries are set to ``-inf`` first. Forward, ``grid @ y`` sums over
    ``j ≤ i``; backward, ``gridᵀ @ y`` over ``i ≥ j``.
    """
    n = r.shape[-1]
    above = _ABOVE.get((n, r.device))
    if above is None:
        above = _ABOVE[n, r.device] = torch.ones(n, n, dtype=torch.bool, device=r.device).triu(1)
    return (r[..., None, :] - r[..., :, None]).masked_fill_(above, -math.inf).exp_()


def _lowest(x: torch.Tensor) -> float:
    return torch.finfo(x.dtype).min


class FastSelfAttention(nn.Module):
    """Fastformer's additive self-attention, with the authors' semantics and submodule names.

    ``FastSelfAttention(d_model, num_heads)`` has five linear layers: ``query``
    and ``key`` (``d → d``), ``query_att`` and ``key_att`` (``d → H``: each
    scores the *whole* ``d``-vector once per head) and ``transform`` (``d → d``).
    With 256 features and 16 heads that is 205,600 parameters, as in the
    authors' module. The scores are divided by ``√d_h``, the head width, as the
    authors' code does (``attention_head_size ** 0.5``); the paper's equations
    write ``√d``. The two differ by a constant factor ``√H`` that the learned
    scorer can absorb: the same family of functions, but not the same start
    (at a given initialization, the code's scores are ``√H`` times larger)
    nor, under Adam, the same speed at which the scores move.

    ``forward(x, key_padding_mask=None, need_weights=False, is_causal=False)``
    maps ``(B, N, d)`` to ``(B, N, d)``. ``key_padding_mask`` ``(B, N)`` is bool,
    ``True`` = padding: padded positions get zero weight in both poolings (so
    their content never changes the other positions' outputs), and a sequence
    that is all padding gets zero global vectors, never NaN. With
    ``need_weights=True`` it returns ``(output, alpha, beta)``, the two pooling
    weights of shape ``(B, H, N)`` (``beta`` is ``None`` without the second
    pooling).

    ``is_causal=True`` is the decoder's variant: position ``i`` pools positions
    ``≤ i`` only (:func:`prefix_softmax_pool`). Its global query ``q̄_i`` is a
    running pooling; key ``j`` is mixed with the global query as it stood at
    ``j``, ``p_j = k_j ⊙ q̄_j`` (mixing every earlier key with the newest ``q̄_i``
    would make the second pooling depend on pairs ``(i, j)``: quadratic again);
    ``k̄_i`` pools ``p_0 … p_i``. It has no per-row weights to return. Run one
    token at a time, it is a recurrent network: to emit position ``i`` it needs
    ``x_i`` and, for each of the two poolings and each head, the running
    maximum of the scores, the running sum of their exponentials and the
    running weighted sum of the ``d_h`` pooled features, all three referenced
    to that maximum: ``2 H (d_h + 2) = 2 d + 4 H`` numbers per sequence and
    layer, whatever the length (576 at width 256 with 16 heads), or ``2 d + 2 H``
    if each pooling keeps its running average and the logarithm of its
    denominator instead. Nothing of the earlier tokens themselves is kept.

    The ablations of chapter 9 are options; the defaults are the authors' model:

    - ``add_query=False`` drops the ``+ q_i`` of the output; ``add_query="global"``
      adds the global query ``q̄`` instead (as the course's source notes read the paper);
    - ``global_query_only=True`` outputs the global query alone, ``o_i = q̄``
      (only ``query`` and ``query_att`` are built);
    - ``share_value=False`` gives the values their own projection ``value``
      (``d → d``) instead of reusing the queries;
    - ``key_pooling=False`` skips the second pooling: ``u_i = q̄ ⊙ v_i``
      (``key`` and ``key_att`` are then not built);
    - ``mix`` is how a global vector meets each token, in both places
      (``p_i = mix(k_i, q̄)``, ``u_i = mix(v_i, k̄)``): ``"product"`` (``⊙``, the
      authors'), ``"add"`` (``+``) or ``"concat"`` (a linear map of the two
      side by side, ``key_mix`` and ``value_mix``, ``2d → d``).

    ``init_std`` is the standard deviation of the weights' normal
    initialization (the authors' 0.02; biases start at zero); ``None`` keeps
    PyTorch's default initialization of ``nn.Linear``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        add_query: bool | str = True,
        share_value: bool = True,
        key_pooling: bool = True,
        mix: str = "product",
        global_query_only: bool = False,
        init_std: float | None = 0.02,
    ) -> None:
        super().__init__()
        _check_heads(d_model, num_heads)
        if init_std is not None and not init_std > 0:
            raise ValueError(f"init_std must be a positive standard deviation or None, got {init_std}")
        if add_query not in (True, False, "global"):
            raise ValueError(f"add_query must be True, False or 'global', got {add_query!r}")
        if mix not in ("product", "add", "concat"):
            raise ValueError(f"mix must be 'product', 'add' or 'concat', got {mix!r}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.add_query = add_query
        self.share_value = share_value
        self.key_pooling = key_pooling
        self.mix = mix
        self.global_query_only = global_query_only
        self.init_std = init_std
        self.query = nn.Linear(d_model, d_model)
        self.query_att = nn.Linear(d_model, num_heads)
        if not global_query_only:
            if key_pooling:
                self.key = nn.Linear(d_model, d_model)
                self.key_att = nn.Linear(d_model, num_heads)
            if not share_value:
                self.value = nn.Linear(d_model, d_model)
            if mix == "concat":
                if key_pooling:
                    self.key_mix = nn.Linear(2 * d_model, d_model)
                self.value_mix = nn.Linear(2 * d_model, d_model)
            self.transform = nn.Linear(d_model, d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The authors' initialization: weights ~ N(0, init_std²), zero biases (or PyTorch's default)."""
        for module in self.children():
            if self.init_std is None:
                module.reset_parameters()
            else:
                nn.init.normal_(module.weight, mean=0.0, std=self.init_std)
                nn.init.zeros_(module.bias)

    def extra_repr(self) -> str:
        options = [f"d_model={self.d_model}", f"num_heads={self.num_heads}"]
        defaults = (
            ("add_query", True),
            ("share_value", True),
            ("key_pooling", True),
            ("mix", "product"),
            ("global_query_only", False),
        )
        for name, default in defaults:
            if getattr(self, name) != default:
                options.append(f"{name}={getattr(self, name)!r}")
        return ", ".join(options)

    def _scores(self, scorer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        """One score per position and head, ``(B, N, H)``: a linear map of the whole vector, over √d_h.

        The scaling is applied to the scorer's small ``(H, d)`` weights rather than to the
        ``(B, N, H)`` scores: the same numbers, one pass over the sequence fewer.
        """
        scale = math.sqrt(self.head_dim)
        return F.linear(x, scorer.weight / scale, scorer.bias / scale)

    def _mix(self, x: torch.Tensor, g: torch.Tensor, where: str) -> torch.Tensor:
        """A global vector ``g`` meets each token ``x_i``: ``x_i ⊙ g`` (the authors'), ``x_i + g``, or a map of both."""
        if self.mix == "product":
            return x * g
        if self.mix == "add":
            return x + g
        return getattr(self, f"{where}_mix")(torch.cat([x, g.expand_as(x)], dim=-1))

    def forward(
        self,
        x: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        is_causal: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        B, N = _check_input(x, self.d_model)
        _check_padding_mask(key_padding_mask, B, N)
        if is_causal and need_weights:
            raise ValueError(
                "need_weights=True is not available with is_causal=True: every position has its own weights "
                "(an N x N grid), which the linear-time computation never forms"
            )
        q = self.query(x)  # (B, N, d)
        alpha = beta = None
        if is_causal:
            q_global = self._causal_pool(self._scores(self.query_att, q), q, key_padding_mask)  # (B, N, d)
        else:
            alpha, q_global = self._pool(self._scores(self.query_att, q), q, key_padding_mask)  # (B, H, N), (B, 1, d)
        if self.global_query_only:
            out = q_global.expand(B, N, self.d_model).contiguous()
            return (out, alpha, beta) if need_weights else out
        v = q if self.share_value else self.value(x)
        if self.key_pooling:
            p = self._mix(self.key(x), q_global, "key")  # p_i = k_i ⊙ q̄ (causal: ⊙ q̄_i)
            if is_causal:
                k_global = self._causal_pool(self._scores(self.key_att, p), p, key_padding_mask)
            else:
                beta, k_global = self._pool(self._scores(self.key_att, p), p, key_padding_mask)
            u = self._mix(v, k_global, "value")  # u_i = k̄ ⊙ v_i, with v_i = q_i unless share_value=False
        else:
            u = self._mix(v, q_global, "value")
        out = self.transform(u)
        if self.add_query == "global":
            out = out + q_global
        elif self.add_query:
            out = out + q
        return (out, alpha, beta) if need_weights else out

    def _pool(
        self, scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Softmax over positions of ``scores`` ``(B, N, H)``; the weighted sum of each head's slice of ``values``.

        ``values`` is ``(B, N, d)``.

        Returns the weights ``(B, H, N)`` and the pooled vector ``(B, 1, d)``. One batched
        matrix product pools *every* feature with *every* head's weights, ``(B, H, N) @ (B, N, d)``,
        and each head keeps its own slice (the diagonal blocks): ``H`` times the
        multiplications of a per-head product, which are few (``N d H``), in exchange for no
        copy of the values into a per-head layout.
        """
        B, N, _ = values.shape
        H, d_h = self.num_heads, self.head_dim
        weights = masked_softmax(scores, None if mask is None else mask[:, :, None], dim=1).transpose(1, 2)  # (B, H, N)
        every = torch.bmm(weights, values)  # (B, H, d): row h = head h's weights applied to all d features
        own = every.view(B, H, H, d_h).diagonal(dim1=1, dim2=2)  # (B, d_h, H): head h's weights on head h's slice
        return weights, own.transpose(1, 2).reshape(B, 1, self.d_model)

    def _causal_pool(self, scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        B, N, _ = values.shape
        heads = values.view(B, N, self.num_heads, self.head_dim)
        return prefix_softmax_pool(scores, heads, mask).reshape(B, N, self.d_model)


class AttentionPooling(nn.Module):
    """The authors' pooler: one vector per sequence, an attention-weighted average of its positions.

    Additive attention in the 2015 sense, with a learned query: the score of
    position ``i`` is ``w · tanh(W x_i + b) + c`` (``att_fc1``, ``att_fc2``);
    the weights are their softmax over the unpadded positions.
    ``forward(x (B, N, d), key_padding_mask=None)`` returns ``(B, d)``; a
    sequence that is all padding gets a zero vector.
    """

    def __init__(self, d_model: int, hidden: int | None = None) -> None:
        super().__init__()
        _check_heads(d_model, 1)
        self.d_model = d_model
        self.att_fc1 = nn.Linear(d_model, hidden or d_model)
        self.att_fc2 = nn.Linear(hidden or d_model, 1)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None, need_weights: bool = False):
        B, N = _check_input(x, self.d_model)
        _check_padding_mask(key_padding_mask, B, N)
        scores = self.att_fc2(torch.tanh(self.att_fc1(x))).squeeze(-1)  # (B, N)
        weights = masked_softmax(scores, key_padding_mask)
        pooled = torch.einsum("bn,bnd->bd", weights, x)
        return (pooled, weights) if need_weights else pooled


# --- For comparison: two other ways to attend in linear time -----------------------------------


def _split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    B, N, d = x.shape
    return x.view(B, N, num_heads, d // num_heads).transpose(1, 2)  # (B, H, N, d_h)


class LinearSelfAttention(nn.Module):
    """Kernelized ("linear") attention {Katharopoulos et al., 2020}, with ``φ(x) = elu(x) + 1``: for comparison.

    Softmax attention's weight ``exp(q_i · k_j)`` is replaced by a product of
    feature maps ``φ(q_i) · φ(k_j)``, so the weighted sum factors:
    ``o_i = φ(q_i)ᵀ S / φ(q_i)ᵀ z`` with, per head, ``S = Σ_j φ(k_j) v_jᵀ``
    (``d_h × d_h``) and ``z = Σ_j φ(k_j)``. Every position keeps its own query,
    but what it can read is a ``d_h × d_h`` summary of the sequence: the cost is
    ``O(N d d_h)`` beyond the projections. Four linear layers, ``query``, ``key``,
    ``value`` and ``output`` (``d → d``), as in multi-head attention.
    ``forward(x, key_padding_mask=None)``: ``(B, N, d)`` → ``(B, N, d)``; padded
    positions add nothing to ``S`` and ``z``.
    """

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        _check_heads(d_model, num_heads)
        self.d_model, self.num_heads = d_model, num_heads
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.output = nn.Linear(d_model, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}"

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, N = _check_input(x, self.d_model)
        _check_padding_mask(key_padding_mask, B, N)
        q = F.elu(_split_heads(self.query(x), self.num_heads)) + 1  # φ(q_i) > 0: (B, H, N, d_h)
        k = F.elu(_split_heads(self.key(x), self.num_heads)) + 1
        v = _split_heads(self.value(x), self.num_heads)
        if key_padding_mask is not None:
            k = k.masked_fill(key_padding_mask[:, None, :, None], 0.0)
        state = k.transpose(-1, -2) @ v  # S = Σ_j φ(k_j) v_jᵀ: (B, H, d_h, d_h)
        norm = k.sum(dim=-2, keepdim=True)  # z = Σ_j φ(k_j): (B, H, 1, d_h)
        numerator = q @ state  # (B, H, N, d_h)
        denominator = (q * norm).sum(dim=-1, keepdim=True)  # φ(q_i) · z, > 0 unless all is padding
        out = numerator / denominator.masked_fill(denominator == 0, 1.0)
        return self.output(out.transpose(1, 2).reshape(B, N, self.d_model))


class LinformerSelfAttention(nn.Module):
    """Low-rank attention {Wang et al., 2020}: keys and values projected along the length, for comparison.

    Two learned ``(k, max_len)`` matrices, ``length_key`` ``E`` and ``length_value``
    ``F`` (shared by the heads), mix the ``N`` keys and values into ``k`` rows
    each, ``E K`` and ``F V``; every position then attends with softmax over
    those ``k`` rows: ``softmax(q_i (E K)ᵀ / √d_h) F V``, a cost of ``O(N k d)``
    beyond the projections. Sequences may be shorter than ``max_len`` (the
    first ``N`` columns of ``E`` and ``F`` are used). Linear layers ``query``,
    ``key``, ``value``, ``output`` (``d → d``). ``forward(x, key_padding_mask=None)``:
    padded positions' keys and values are set to zero before the mixing, so
    their content never reaches the output.
    """

    def __init__(self, d_model: int, num_heads: int, max_len: int, k: int) -> None:
        super().__init__()
        _check_heads(d_model, num_heads)
        for name, value in (("max_len", max_len), ("k", k)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.d_model, self.num_heads, self.max_len, self.k = d_model, num_heads, max_len, k
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.output = nn.Linear(d_model, d_model)
        self.length_key = nn.Parameter(torch.empty(k, max_len))
        self.length_value = nn.Parameter(torch.empty(k, max_len))
        bound = 1 / math.sqrt(max_len)  # as an nn.Linear(max_len, k) would start
        nn.init.uniform_(self.length_key, -bound, bound)
        nn.init.uniform_(self.length_value, -bound, bound)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, max_len={self.max_len}, k={self.k}"

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        B, N = _check_input(x, self.d_model)
        _check_padding_mask(key_padding_mask, B, N)
        if N > self.max_len:
            raise ValueError(f"the sequence has {N} positions, more than max_len={self.max_len}")
        key, value = self.key(x), self.value(x)
        if key_padding_mask is not None:
            key = key.masked_fill(key_padding_mask[..., None], 0.0)
            value = value.masked_fill(key_padding_mask[..., None], 0.0)
        key = self.length_key[:, :N] @ key  # E K: (B, k, d)
        value = self.length_value[:, :N] @ value  # F V: (B, k, d)
        H = self.num_heads
        out = F.scaled_dot_product_attention(
            _split_heads(self.query(x), H), _split_heads(key, H), _split_heads(value, H)
        )  # (B, H, N, d_h)
        return self.output(out.transpose(1, 2).reshape(B, N, self.d_model))


# --- The blocks: the authors' post-norm layer, around either attention -------------------------


class _PostNormLayer(nn.Module):
    """``a = LayerNorm(x + dropout(attention(x)))``, then ``LayerNorm(a + dropout(FFN(a)))`` with a GELU FFN."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int | None = None,
        dropout: float = 0.1,
        eps: float = 1e-12,
        **attention_options,
    ) -> None:
        super().__init__()
        _check_dropout(dropout)
        d_ff = 4 * d_model if d_ff is None else d_ff
        if isinstance(d_ff, bool) or not isinstance(d_ff, int) or d_ff < 1:
            raise ValueError(f"d_ff must be a positive integer, got {d_ff!r}")
        self.d_model = d_model
        self.attention_norm = nn.LayerNorm(d_model, eps=eps)
        self.intermediate = nn.Linear(d_model, d_ff)
        self.output = nn.Linear(d_ff, d_model)
        self.output_norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self._build_attention(d_model, num_heads, **attention_options)

    def _build_attention(self, d_model: int, num_heads: int, **attention_options) -> None:
        raise NotImplementedError

    def _attend(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None, is_causal: bool) -> torch.Tensor:
        raise NotImplementedError

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        B, N = _check_input(x, self.d_model)
        _check_padding_mask(key_padding_mask, B, N)
        a = self.attention_norm(x + self.dropout(self._attend(x, key_padding_mask, is_causal)))
        return self.output_norm(a + self.dropout(self.output(F.gelu(self.intermediate(a)))))


class FastformerLayer(_PostNormLayer):
    """One Fastformer block, as the authors build it (BERT's post-norm layout around :class:`FastSelfAttention`).

    ``a = LayerNorm(x + dropout(attention_output(attention(x))))``, then
    ``LayerNorm(a + dropout(output(gelu(intermediate(a)))))``. The
    feed-forward width defaults to ``4 d_model``; ``eps`` to the
    authors' 1e-12. ``forward(x, key_padding_mask=None, is_causal=False)``.
    Keyword options of :class:`FastSelfAttention` (``add_query``,
    ``share_value``, ``key_pooling``, ``mix``, ``global_query_only``,
    ``init_std``) pass through.
    """

    def _build_attention(self, d_model, num_heads, **attention_options):
        self.attention = FastSelfAttention(d_model, num_heads, **attention_options)
        self.attention_output = nn.Linear(d_model, d_model)

    def _attend(self, x, key_padding_mask, is_causal):
        return self.attention_output(self.attention(x, key_padding_mask, is_causal=is_causal))


class SoftmaxEncoderLayer(_PostNormLayer):
    """The same block around chapter 5's :class:`~attnbook.attention.MultiHeadAttention`: the softmax baseline.

    Multi-head attention's own output projection plays the part of the
    Fastformer block's ``attention_output``, so with the same width, heads and
    feed-forward width the two blocks have the same ``4 d² + 4 d`` attention
    parameters, up to Fastformer's two small scoring layers (``2 (d H + H)``).
    """

    def _build_attention(self, d_model, num_heads):
        self.attention = MultiHeadAttention(d_model, num_heads, dropout=0.0)

    def _attend(self, x, key_padding_mask, is_causal):
        return self.attention(x, x, x, key_padding_mask=key_padding_mask, is_causal=is_causal)


class _Stack(nn.Module):
    """``num_layers`` layers of the class ``layer_type``, or one applied ``num_layers`` times (``share_layers``).

    ``d_model``, ``num_heads``, ``d_ff``, ``dropout``, ``eps`` and any other
    keyword options are the layer's.
    """

    layer_type: type[_PostNormLayer]

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_layers: int,
        d_ff: int | None = None,
        dropout: float = 0.1,
        share_layers: bool = False,
        eps: float = 1e-12,
        **layer_options,
    ) -> None:
        super().__init__()
        _check_heads(d_model, num_heads)
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be a positive integer, got {num_layers!r}")
        self.d_model = d_model
        self.num_layers = num_layers
        self.share_layers = share_layers
        self.layers = nn.ModuleList(
            [
                self.layer_type(d_model, num_heads, d_ff, dropout, eps, **layer_options)
                for _ in range(1 if share_layers else num_layers)
            ]
        )

    def extra_repr(self) -> str:
        return f"num_layers={self.num_layers}, share_layers={self.share_layers}"

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None, is_causal: bool = False
    ) -> torch.Tensor:
        B, N = _check_input(x, self.d_model)
        _check_padding_mask(key_padding_mask, B, N)
        for i in range(self.num_layers):
            x = self.layers[0 if self.share_layers else i](x, key_padding_mask, is_causal=is_causal)
        return x


class FastformerEncoder(_Stack):
    """A stack of ``num_layers`` :class:`FastformerLayer` s: ``(B, N, d)`` → ``(B, N, d)``.

    ``share_layers=True`` is the paper's layer-wise parameter sharing: one
    layer's parameters, applied ``num_layers`` times. Positions are the
    caller's business (add an encoding from :mod:`attnbook.positional`
    first), as is pooling the output (:class:`AttentionPooling`).
    ``forward(x, key_padding_mask=None, is_causal=False)``. Keyword options of
    :class:`FastSelfAttention` pass through to every layer.
    """

    layer_type = FastformerLayer


class SoftmaxEncoder(_Stack):
    """A stack of :class:`SoftmaxEncoderLayer` s, with the same options as :class:`FastformerEncoder`."""

    layer_type = SoftmaxEncoderLayer
