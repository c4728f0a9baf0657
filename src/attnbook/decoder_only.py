"""The decoder alone (chapter 10): a GPT-style language model built from chapter 7's decoder layer.

Take chapter 7's decoder layer and remove its cross-attention: what is left,
causal self-attention and the feed-forward network, each inside a pre-LN
:class:`~attnbook.transformer.AddNorm`, is the layer of GPT-2 (Radford et al.
2019). Stacked, with token embeddings, positions and an output projection tied
to the embeddings, it is a *language model*: it reads tokens ``x_1 .. x_t`` and
gives the logits of ``x_{t+1}`` at every position at once.

- :class:`DecoderOnlyConfig`: every setting of the model, in one place;
  :func:`parameter_count` counts its parameters from the configuration alone,
  :func:`cache_numbers` the numbers its key–value cache keeps.
- :func:`rotate_pairs`: rotary positions (Su et al.), the pair of features
  ``2i, 2i + 1`` of a query or key at position ``p`` turned by the angle
  ``p · base ** (-2i / d_k)``, chapter 6's rotation applied to queries and
  keys instead of added to the input.
- :class:`CausalSelfAttention`: multi-head causal self-attention, optionally
  with grouped-query attention (``num_kv_heads < num_heads``: each group of
  ``num_heads / num_kv_heads`` query heads shares one key head and one value
  head, so the cache shrinks by that factor).
- :class:`DecoderOnlyLayer`, :class:`DecoderOnlyTransformer`: the layer and the
  model. ``model(tokens)`` gives the logits ``(B, T, V)``;
  ``model.start(prompt)`` reads a prompt in one pass and
  ``model.step(tokens, state)`` one token more, with the key–value cache in
  :class:`DecoderOnlyState` (rotary keys are cached already rotated: a key's
  position never changes).
- :func:`next_token_loss`: the language-modelling loss, cross-entropy of each
  position's logits against the next token.
- :func:`top_k_filter`, :func:`top_p_filter`, :func:`sample_next` and
  :func:`generate`: greedy decoding, temperature, top-k and top-p (nucleus,
  Holtzman et al. 2020) sampling, with or without the cache.
- :func:`load_gpt2_state_dict`: GPT-2's weights, under the names of the
  ``transformers`` package, copied into this model (the tests hold the two
  equal).

Shapes: ``B`` sequences of ``T`` tokens, ``d_model`` features, ``h`` query
heads and ``h_kv`` key–value heads of ``d_k = d_model / h`` features, ``V``
tokens in the vocabulary. The names are chapter 7's (``d_model``,
``num_heads``, ``num_layers``, ``d_ff``, ``dropout``, ``eps``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_positive as _check_positive
from .checks import check_probability as _check_probability
from .checks import check_rows, check_token_ids
from .transformer import AddNorm

__all__ = [
    "DecoderOnlyConfig",
    "parameter_count",
    "cache_numbers",
    "rotate_pairs",
    "CausalSelfAttention",
    "FeedForward",
    "DecoderOnlyLayer",
    "DecoderOnlyState",
    "DecoderOnlyTransformer",
    "next_token_loss",
    "prefix_mask",
    "pair_sequences",
    "target_prediction_mask",
    "translation_loss",
    "translate_greedy",
    "top_k_filter",
    "top_p_filter",
    "sample_next",
    "generate",
    "load_gpt2_state_dict",
]

POSITIONS = ("learned", "rotary")
ACTIVATIONS = ("gelu_tanh", "gelu", "relu")


# --- The configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DecoderOnlyConfig:
    """Everything needed to rebuild a :class:`DecoderOnlyTransformer`.

    The defaults are GPT-2's smallest model (124 M parameters with its
    vocabulary of 50,257 tokens), except ``vocab_size``, which is required.
    ``positions`` is ``"learned"`` (a trained vector per position, added to the
    token embedding, as GPT-2) or ``"rotary"`` (queries and keys rotated, no
    vector added). ``num_kv_heads`` (default: ``num_heads``) below
    ``num_heads`` is grouped-query attention. ``activation`` is the FFN's:
    ``"gelu_tanh"`` (GPT-2's tanh approximation of the GELU), ``"gelu"`` or
    ``"relu"`` (chapter 7's). ``max_len`` is the longest sequence the model
    reads; longer ones are an error, with either kind of positions.
    """

    vocab_size: int
    d_model: int = 768
    num_heads: int = 12
    num_layers: int = 12
    d_ff: int = 3072
    max_len: int = 1024
    positions: str = "learned"
    num_kv_heads: int | None = None
    activation: str = "gelu_tanh"
    dropout: float = 0.0
    eps: float = 1e-5
    rotary_base: float = 10000.0
    pad_id: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in {"positions", "activation"}:
                allowed = POSITIONS if f.name == "positions" else ACTIVATIONS
                if value not in allowed:
                    raise ValueError(f"DecoderOnlyConfig.{f.name} must be one of {allowed}, got {value!r}")
            elif f.name in {"dropout", "eps", "rotary_base"}:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise TypeError(f"DecoderOnlyConfig.{f.name} must be a number, got {value!r}")
            elif f.name == "num_kv_heads" and value is None:
                object.__setattr__(self, "num_kv_heads", self.num_heads)
            elif not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"DecoderOnlyConfig.{f.name} must be an int, got {value!r}")
            elif f.name == "pad_id":
                if not 0 <= value < self.vocab_size:
                    raise ValueError(f"pad_id {value} is outside the vocabulary of {self.vocab_size} tokens")
            elif value < 1:
                raise ValueError(f"DecoderOnlyConfig.{f.name} must be >= 1, got {value}")
        _check_probability(self.dropout, "DecoderOnlyConfig.dropout")
        if self.eps <= 0 or self.rotary_base <= 1:
            raise ValueError(f"eps must be > 0 and rotary_base > 1, got {self.eps} and {self.rotary_base}")
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model ({self.d_model}) is not divisible by num_heads ({self.num_heads}): "
                f"each head gets d_model // num_heads features"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) is not divisible by num_kv_heads ({self.num_kv_heads}): "
                f"each key-value head serves a group of num_heads // num_kv_heads query heads"
            )
        if self.positions == "rotary" and self.head_dim % 2:
            raise ValueError(
                f"rotary positions turn pairs of features, so the head width must be even, got {self.head_dim}"
            )

    @property
    def head_dim(self) -> int:
        """``d_k = d_model / num_heads``, the width of every head (query, key and value alike)."""
        return self.d_model // self.num_heads

    @property
    def group_size(self) -> int:
        """How many query heads share one key–value head (1: ordinary multi-head attention)."""
        return self.num_heads // self.num_kv_heads


def parameter_count(config: DecoderOnlyConfig) -> int:
    """The number of parameters of ``DecoderOnlyTransformer(config)``, from the configuration alone.

    Per layer: the fused projection to queries (``d_model``) and keys and values
    (``2 · h_kv · d_k``) with its bias, the output projection, the FFN's two
    linear maps and two LayerNorms. Then the token embeddings (also the output
    projection, tied), the learned positions if any, and the final LayerNorm.
    """
    d, d_ff = config.d_model, config.d_ff
    kv = 2 * config.num_kv_heads * config.head_dim
    attention = (d + 1) * (d + kv) + (d + 1) * d
    ffn = (d + 1) * d_ff + (d_ff + 1) * d
    layer = attention + ffn + 2 * 2 * d
    positions = config.max_len * d if config.positions == "learned" else 0
    return config.num_layers * layer + config.vocab_size * d + positions + 2 * d


def cache_numbers(config: DecoderOnlyConfig, length: int, batch_size: int = 1) -> int:
    """How many numbers the key–value cache holds after ``length`` tokens of ``batch_size`` sequences.

    Every layer keeps a key and a value of ``h_kv · d_k`` numbers per token:
    ``2 · num_layers · h_kv · d_k · length · batch_size``.
    """
    return 2 * config.num_layers * config.num_kv_heads * config.head_dim * length * batch_size


# --- Rotary positions ----------------------------------------------------------------------------


def rotate_pairs(x: torch.Tensor, start: int = 0, base: float = 10000.0) -> torch.Tensor:
    """Rotary positions: ``x (..., T, d_k)`` at positions ``start .. start + T - 1``, each pair of features turned.

    The pair ``(x_2i, x_2i+1)`` at position ``p`` becomes
    ``(x_2i cos θ - x_2i+1 sin θ, x_2i sin θ + x_2i+1 cos θ)`` with
    ``θ = p · base ** (-2i / d_k)``: chapter 6's frequencies, as a rotation. The
    dot product of a query rotated to ``m`` and a key rotated to ``n`` depends
    on ``m - n`` only. The angles are computed in float64.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[-1] % 2:
        raise ValueError(
            f"rotate_pairs needs (..., T, d_k) with an even d_k, got shape {tuple(getattr(x, 'shape', ()))}"
        )
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        raise ValueError(f"start (the position of the first row) must be an int >= 0, got {start!r}")
    T, d_k = x.shape[-2], x.shape[-1]
    frequencies = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64, device=x.device) / d_k)  # (d_k / 2,)
    angles = torch.arange(start, start + T, dtype=torch.float64, device=x.device)[:, None] * frequencies
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (T, d_k / 2)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


# --- The layer -----------------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention with ``num_kv_heads`` key–value heads, and optional rotary positions.

    ``in_proj`` makes the queries ``(d_model)``, keys and values (``h_kv · d_k``
    each) in one product; ``out_proj`` merges the heads. ``forward(x, past_keys,
    past_values, start)`` takes the new positions ``x (B, T, d_model)``, which
    sit at ``start .. start + T - 1``, and the keys and values of the ``start``
    earlier ones ``(B, h_kv, start, d_k)`` (or ``None``); it returns the output
    ``(B, T, d_model)`` and the keys and values of all ``start + T`` positions,
    the keys already rotated when the positions are rotary. With ``prefix_lengths
    (B,)`` (a whole sequence, ``start = 0``), the first ``prefix_lengths[b]``
    positions of row ``b`` also see each other, later ones included: a prefix
    language model (:func:`prefix_mask`).
    """

    def __init__(self, config: DecoderOnlyConfig) -> None:
        super().__init__()
        c = config
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.rotary = c.positions == "rotary"
        self.rotary_base = c.rotary_base
        self.in_proj = nn.Linear(c.d_model, c.d_model + 2 * c.num_kv_heads * c.head_dim)
        self.out_proj = nn.Linear(c.d_model, c.d_model)
        self.dropout = c.dropout

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, rotary={self.rotary}"

    def forward(
        self,
        x: torch.Tensor,
        past_keys: torch.Tensor | None = None,
        past_values: torch.Tensor | None = None,
        start: int = 0,
        prefix_lengths: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, T, _ = x.shape
        h, h_kv, d_k = self.num_heads, self.num_kv_heads, self.head_dim
        q, k, v = self.in_proj(x).split([h * d_k, h_kv * d_k, h_kv * d_k], dim=-1)
        q = q.view(B, T, h, d_k).transpose(1, 2)  # (B, h, T, d_k)
        k = k.view(B, T, h_kv, d_k).transpose(1, 2)  # (B, h_kv, T, d_k)
        v = v.view(B, T, h_kv, d_k).transpose(1, 2)
        if self.rotary:  # rotate before caching: a key keeps its position for good
            q, k = rotate_pairs(q, start, self.rotary_base), rotate_pairs(k, start, self.rotary_base)
        if past_keys is not None:
            k, v = torch.cat([past_keys, k], dim=2), torch.cat([past_values, v], dim=2)
        S = k.shape[2]  # start + T keys
        group = h // h_kv  # query head i reads key-value head i // group
        keys, values = (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)) if group > 1 else (k, v)
        p = self.dropout if self.training else 0.0
        if S == T and prefix_lengths is not None:  # a prefix LM: the first prefix_lengths[b] positions see each other
            seen = prefix_mask(prefix_lengths.to(x.device), T)[:, None]  # (B, 1, T, T)
            heads = F.scaled_dot_product_attention(q, keys, values, attn_mask=seen, dropout_p=p)
        elif S == T:  # no earlier positions: the usual causal mask
            heads = F.scaled_dot_product_attention(q, keys, values, dropout_p=p, is_causal=T > 1)
        elif T == 1:  # one new token sees every cached key
            heads = F.scaled_dot_product_attention(q, keys, values, dropout_p=p)
        else:  # query i sits at position S - T + i and sees keys 0 .. S - T + i
            seen = torch.arange(S, device=x.device)[None, :] <= torch.arange(S - T, S, device=x.device)[:, None]
            heads = F.scaled_dot_product_attention(q, keys, values, attn_mask=seen, dropout_p=p)
        out = self.out_proj(heads.transpose(1, 2).reshape(B, T, h * d_k))
        return out, k, v


class FeedForward(nn.Module):
    """Chapter 7's position-wise FFN, ``w2(act(w1(x)))``, with GPT-2's GELU (tanh approximation) by default."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "gelu_tanh", dropout: float = 0.0) -> None:
        super().__init__()
        _check_positive(d_model=d_model, d_ff=d_ff)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.activation = activation
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def extra_repr(self) -> str:
        return f"activation={self.activation}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.w1(x)
        if self.activation == "relu":
            hidden = torch.relu(hidden)
        else:
            hidden = F.gelu(hidden, approximate="tanh" if self.activation == "gelu_tanh" else "none")
        return self.w2(self.dropout(hidden))


class DecoderOnlyLayer(nn.Module):
    """Chapter 7's decoder layer without cross-attention, pre-LN: ``x + attn(LN(x))``, then ``x + FFN(LN(x))``.

    ``forward(x, past_keys, past_values, start)`` returns ``(x, keys, values)``
    as :class:`CausalSelfAttention` does.
    """

    def __init__(self, config: DecoderOnlyConfig) -> None:
        super().__init__()
        self.self_attention = CausalSelfAttention(config)
        self.add_norm1 = AddNorm(config.d_model, config.dropout, norm_first=True, eps=config.eps)
        self.ffn = FeedForward(config.d_model, config.d_ff, config.activation)
        self.add_norm2 = AddNorm(config.d_model, config.dropout, norm_first=True, eps=config.eps)

    def forward(self, x, past_keys=None, past_values=None, start: int = 0, prefix_lengths=None):
        x, keys, values = self.add_norm1(
            x, lambda h: self.self_attention(h, past_keys, past_values, start, prefix_lengths)
        )
        return self.add_norm2(x, self.ffn), keys, values


# --- The state of generation ---------------------------------------------------------------------


@dataclass
class DecoderOnlyState:
    """What :meth:`DecoderOnlyTransformer.start` returns and :meth:`~DecoderOnlyTransformer.step` advances.

    ``tokens (B, t)``: every token read so far (the prompt, then one per step);
    ``position`` is ``t``. With ``cached``, ``keys[l]`` and ``values[l]``
    ``(B, h_kv, t, d_k)`` hold layer ``l``'s keys (rotated, if rotary) and
    values of those ``t`` tokens; without, the lists are empty and every step
    reads the whole sequence again. ``select(index)`` keeps batch rows.
    """

    tokens: torch.Tensor
    cached: bool = True
    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)

    @property
    def position(self) -> int:
        return self.tokens.shape[1]

    @property
    def batch_size(self) -> int:
        return self.tokens.shape[0]

    def cache_numbers(self) -> int:
        """The numbers the cache holds now (0 without a cache)."""
        return sum(t.numel() for t in self.keys + self.values)

    def select(self, index: torch.Tensor) -> DecoderOnlyState:
        check_rows(index, self.batch_size)
        index = index.to(self.tokens.device)
        return DecoderOnlyState(
            self.tokens.index_select(0, index),
            self.cached,
            [k.index_select(0, index) for k in self.keys],
            [v.index_select(0, index) for v in self.values],
        )


# --- The model -----------------------------------------------------------------------------------


class DecoderOnlyTransformer(nn.Module):
    """A GPT-style language model: embeddings, ``num_layers`` decoder-only layers, a final LayerNorm, tied output.

    ``forward(tokens (B, T))`` returns the logits ``(B, T, V)`` of the token
    after each position. The embeddings are not scaled by ``√d_model`` (GPT-2
    does not); weights start as GPT-2's do: normal with standard deviation
    0.02, the projections into the residual stream scaled by
    ``1 / √(2 · num_layers)``, zero biases.
    """

    def __init__(self, config: DecoderOnlyConfig) -> None:
        super().__init__()
        if not isinstance(config, DecoderOnlyConfig):
            raise TypeError(f"DecoderOnlyTransformer needs a DecoderOnlyConfig, got {type(config).__name__}")
        self.config = c = config
        self.embedding = nn.Embedding(c.vocab_size, c.d_model)
        self.position_embedding = nn.Embedding(c.max_len, c.d_model) if c.positions == "learned" else None
        self.dropout = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(DecoderOnlyLayer(c) for _ in range(c.num_layers))
        self.norm = nn.LayerNorm(c.d_model, eps=c.eps)
        self.output = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.output.weight = self.embedding.weight  # tied: a logit is a dot product with a token's embedding
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif ".norm." in name or name.startswith("norm."):
                nn.init.ones_(p)
            else:
                residual = name.endswith("out_proj.weight") or name.endswith("w2.weight")
                nn.init.normal_(p, std=0.02 / (math.sqrt(2 * self.config.num_layers) if residual else 1.0))

    def _embed(self, tokens: torch.Tensor, start: int, name: str = "tokens") -> torch.Tensor:
        check_token_ids(tokens, self.config.vocab_size, name)
        if tokens.dim() != 2 or tokens.shape[1] == 0:
            raise ValueError(f"{name} must have shape (B, T) with T >= 1, got shape {tuple(tokens.shape)}")
        end = start + tokens.shape[1]
        if end > self.config.max_len:
            raise ValueError(
                f"{name} reach position {end - 1}, but this model reads positions 0..{self.config.max_len - 1} "
                f"(DecoderOnlyConfig.max_len={self.config.max_len}); shorten the sequence, ask for fewer tokens, "
                "or build the model with a larger max_len"
            )
        x = self.embedding(tokens)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(start, end, device=tokens.device))
        return self.dropout(x)

    def _run(self, x, keys=None, values=None, start: int = 0, prefix_lengths=None):
        new_keys, new_values = [], []
        for i, layer in enumerate(self.layers):
            past_keys, past_values = (None, None) if keys is None else (keys[i], values[i])
            x, k, v = layer(x, past_keys, past_values, start, prefix_lengths)
            new_keys.append(k)
            new_values.append(v)
        return self.output(self.norm(x)), new_keys, new_values

    def forward(self, tokens: torch.Tensor, prefix_lengths: torch.Tensor | None = None) -> torch.Tensor:
        """The logits ``(B, T, V)``: row ``t`` scores the token that follows ``tokens[:, :t + 1]``.

        With ``prefix_lengths (B,)``, a prefix language model: each row's first
        ``prefix_lengths[b]`` tokens are read as a whole, each seeing all of them.
        """
        _check_prefix(prefix_lengths, tokens)
        return self._run(self._embed(tokens, 0), prefix_lengths=prefix_lengths)[0]

    # --- one token at a time -------------------------------------------------------------------

    def start(
        self, prompt: torch.Tensor, cache: bool = True, prefix_lengths: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, DecoderOnlyState]:
        """Read ``prompt (B, P)`` in one pass: the logits ``(B, V)`` of the token after it, and the state.

        ``prefix_lengths`` as in :meth:`forward` (a prefix LM reads its whole prompt as the prefix).
        """
        _check_prefix(prefix_lengths, prompt)
        if prefix_lengths is not None and not cache:
            raise ValueError("a prefix LM generates with the cache: without it, the prefix would be read causally")
        logits, keys, values = self._run(self._embed(prompt, 0, "prompt"), prefix_lengths=prefix_lengths)
        state = DecoderOnlyState(prompt, bool(cache), keys if cache else [], values if cache else [])
        return logits[:, -1], state

    def step(self, tokens: torch.Tensor, state: DecoderOnlyState) -> tuple[torch.Tensor, DecoderOnlyState]:
        """One token more per sequence, ``tokens (B,)``: the next logits ``(B, V)`` and the new state."""
        if not isinstance(state, DecoderOnlyState):
            raise TypeError(f"step needs the DecoderOnlyState that start() returned, got {type(state).__name__}")
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1 or tokens.shape[0] != state.batch_size:
            raise ValueError(
                f"step takes one token per sequence, shape ({state.batch_size},), "
                f"got shape {tuple(getattr(tokens, 'shape', ()))}"
            )
        history = torch.cat([state.tokens, tokens[:, None].to(state.tokens.device)], dim=1)
        if not state.cached:  # read everything again: what the cache saves
            return self.forward(history)[:, -1], DecoderOnlyState(history, cached=False)
        x = self._embed(tokens[:, None], state.position)
        logits, keys, values = self._run(x, state.keys, state.values, state.position)
        return logits[:, -1], DecoderOnlyState(history, True, keys, values)


def next_token_loss(logits: torch.Tensor, tokens: torch.Tensor, ignore_index: int | None = None) -> torch.Tensor:
    """The language-modelling loss: mean cross-entropy of ``logits[:, t]`` against ``tokens[:, t + 1]``.

    ``logits (B, T, V)`` are the model's on ``tokens (B, T)``; the last
    position has no next token and is left out. Targets equal to
    ``ignore_index`` (padding) do not count. ``exp`` of the loss is the
    perplexity.
    """
    if logits.dim() != 3 or tokens.shape != logits.shape[:2]:
        raise ValueError(f"logits (B, T, V) and tokens (B, T) disagree: {tuple(logits.shape)}, {tuple(tokens.shape)}")
    return F.cross_entropy(
        logits[:, :-1].flatten(0, 1),
        tokens[:, 1:].flatten(),
        ignore_index=-100 if ignore_index is None else ignore_index,
    )


# --- Translation as language modelling -------------------------------------------------------------


def _check_prefix(prefix_lengths: torch.Tensor | None, tokens: torch.Tensor) -> None:
    if prefix_lengths is None:
        return
    if prefix_lengths.shape != tokens.shape[:1] or prefix_lengths.dtype.is_floating_point:
        raise ValueError(
            f"prefix_lengths must hold one integer per sequence, shape ({tokens.shape[0]},), "
            f"got {tuple(prefix_lengths.shape)} of {prefix_lengths.dtype}"
        )
    if bool((prefix_lengths < 1).any()) or bool((prefix_lengths > tokens.shape[1]).any()):
        raise ValueError(f"prefix_lengths must lie in 1..{tokens.shape[1]} (the sequence length), got {prefix_lengths}")


def prefix_mask(prefix_lengths: torch.Tensor, T: int) -> torch.Tensor:
    """``(B, T, T)``, True where query ``i`` may read key ``j``: ``j <= i``, or both in the row's prefix.

    The causal mask of chapter 7 with the top-left ``prefix_lengths[b] × prefix_lengths[b]`` block opened:
    the source is read as an encoder reads it, the target is written left to right.
    """
    positions = torch.arange(T, device=prefix_lengths.device)
    causal = positions[None, :] <= positions[:, None]  # (T, T)
    in_prefix = positions[None, :] < prefix_lengths[:, None]  # (B, T)
    return causal[None] | (in_prefix[:, None, :] & in_prefix[:, :, None])


def pair_sequences(sources, targets, *, bos_id: int, eos_id: int, sep_id: int, pad_id: int):
    """Pairs of id lists as one sequence each: ``<bos> source <sep> target <eos>``, padded at the end.

    Returns ``tokens (B, T)`` and ``prefix_lengths (B,)``, the length of ``<bos> source <sep>``: what a
    prefix LM reads as a whole, and the prompt a translation starts from.
    """
    if len(sources) != len(targets) or not sources:
        raise ValueError(f"need as many targets as sources, at least one: got {len(sources)} and {len(targets)}")
    rows = [[bos_id, *s, sep_id, *t, eos_id] for s, t in zip(sources, targets)]
    longest = max(map(len, rows))
    tokens = torch.tensor([row + [pad_id] * (longest - len(row)) for row in rows])
    return tokens, torch.tensor([len(s) + 2 for s in sources])


def target_prediction_mask(tokens: torch.Tensor, sep_id: int, pad_id: int) -> torch.Tensor:
    """``(B, T - 1)``: whether prediction ``t`` (of ``tokens[:, t + 1]``) is of a target token after ``<sep>``."""
    after = (tokens == sep_id).long().cumsum(dim=1) > 0
    target = after & (tokens != sep_id) & (tokens != pad_id)
    return target[:, 1:]


def translation_loss(logits: torch.Tensor, tokens: torch.Tensor, sep_id: int, pad_id: int) -> torch.Tensor:
    """Cross-entropy over the target tokens alone (:func:`target_prediction_mask`): the source is given, not learned."""
    mask = target_prediction_mask(tokens, sep_id, pad_id)
    losses = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
    return losses[mask.flatten()].mean()


@torch.no_grad()
def translate_greedy(
    model: DecoderOnlyTransformer,
    sources,
    *,
    bos_id: int,
    eos_id: int,
    sep_id: int,
    max_len: int | None = None,
    prefix: bool = True,
    batch_size: int = 64,
) -> list[list[int]]:
    """Greedy translations (id lists, without ``<eos>``) of ``sources``, prompted ``<bos> source <sep>``.

    Sentences whose prompts are as long are decoded together, with the cache; ``prefix=True`` reads the
    prompt as a prefix LM (:func:`prefix_mask`), ``False`` causally. Each translation has at most
    ``max_len`` tokens, by default the library's rule for its source (:func:`attnbook.decode.output_limit`),
    and never more than the model's positions leave after the prompt.
    """
    from .decode import output_limit

    _check_positive(batch_size=batch_size)
    if max_len is not None:
        _check_positive(max_len=max_len)
    was_training = model.training
    model.eval()
    result: list[list[int] | None] = [None] * len(sources)
    try:
        by_length: dict[int, list[int]] = {}
        for i, source in enumerate(sources):
            by_length.setdefault(len(source), []).append(i)
        for length, indices in sorted(by_length.items()):
            room = model.config.max_len - (length + 2)  # positions left after <bos> source <sep>
            if room < 1:
                raise ValueError(f"a source of {length} tokens leaves no position to translate into (max_len)")
            limit = min(room, max_len if max_len is not None else output_limit(length))
            for first in range(0, len(indices), batch_size):
                chunk = indices[first : first + batch_size]
                prompt = torch.tensor([[bos_id, *sources[i], sep_id] for i in chunk])
                prompt = prompt.to(next(model.parameters()).device)
                lengths = torch.full((len(chunk),), prompt.shape[1]) if prefix else None
                logits, state = model.start(prompt, prefix_lengths=lengths)
                written = [[] for _ in chunk]
                finished = [False] * len(chunk)
                for step in range(limit):
                    tokens = logits.argmax(dim=-1)
                    for row, token in enumerate(tokens.tolist()):
                        if not finished[row]:
                            finished[row] = token == eos_id
                            if not finished[row]:
                                written[row].append(token)
                    if all(finished) or step + 1 == limit:
                        break
                    logits, state = model.step(tokens, state)
                for i, ids in zip(chunk, written):
                    result[i] = ids
    finally:
        model.train(was_training)
    return result


# --- Choosing the next token ---------------------------------------------------------------------


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """The logits with all but the ``k`` largest of each row set to ``-inf`` (ties with the ``k``-th kept)."""
    _check_positive(k=k)
    k = min(k, logits.shape[-1])
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filtering: keep, in each row, the fewest most probable tokens whose probabilities sum to ``p`` or more.

    Sorted by probability, a token is dropped when the tokens before it
    already reach ``p``; the most probable token is always kept. The others
    become ``-inf``.
    """
    if not 0.0 < float(p) <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {p}")
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # the probability of the tokens ahead of each one
    drop_sorted = before >= p
    drop_sorted[..., 0] = False
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The next token of each row of ``logits (B, V)``: ``(B,)``.

    ``temperature=0`` is greedy (the most likely token). Otherwise the logits
    are divided by the temperature, filtered by top-k and then top-p, and a
    token is drawn from their softmax with ``generator``.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0: greedy), got {temperature}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)[:, 0]


@torch.no_grad()
def generate(
    model: DecoderOnlyTransformer,
    prompt: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    cache: bool = True,
    eos_id: int | None = None,
) -> torch.Tensor:
    """The prompt ``(B, P)`` followed by up to ``max_new_tokens`` tokens: ``(B, P + n)``.

    Greedy by default (``temperature=0``); see :func:`sample_next` for the
    others. With ``eos_id``, a sequence that wrote it writes the model's
    ``pad_id`` from then on, and generation stops once every sequence has.
    ``cache=False`` reads the whole sequence again at every step (the same
    tokens, more work).
    """
    _check_positive(max_new_tokens=max_new_tokens)
    was_training = model.training
    model.eval()
    try:
        logits, state = model.start(prompt, cache=cache)
        finished = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
        out = [prompt]
        for i in range(max_new_tokens):
            tokens = sample_next(logits, temperature, top_k, top_p, generator)
            if eos_id is not None:
                tokens = tokens.masked_fill(finished, model.config.pad_id)
                finished |= tokens == eos_id
            out.append(tokens[:, None])
            if i + 1 == max_new_tokens or (eos_id is not None and bool(finished.all())):
                break
            logits, state = model.step(tokens, state)
    finally:
        model.train(was_training)
    return torch.cat(out, dim=1)


# --- GPT-2's weights -----------------------------------------------------------------------------


def load_gpt2_state_dict(model: DecoderOnlyTransformer, state_dict: dict[str, torch.Tensor]) -> None:
    """Copy GPT-2's weights (the names of ``transformers``' ``GPT2LMHeadModel``) into ``model``.

    GPT-2 stores its linear maps as ``Conv1D`` with the weight ``(in, out)``,
    ``y = x W + b``: the transpose of ``nn.Linear``'s ``(out, in)``. Its
    ``c_attn`` makes queries, keys and values in one product, as our
    ``in_proj``. The model must have learned positions and as many key–value
    heads as query heads.
    """
    c = model.config
    if c.positions != "learned" or c.num_kv_heads != c.num_heads:
        raise ValueError("GPT-2 has learned positions and one key-value head per query head")
    prefix = "transformer." if "transformer.wte.weight" in state_dict else ""
    get = lambda name: state_dict[prefix + name]  # noqa: E731
    ours = {
        "embedding.weight": get("wte.weight"),
        "position_embedding.weight": get("wpe.weight")[: c.max_len],
        "norm.weight": get("ln_f.weight"),
        "norm.bias": get("ln_f.bias"),
    }
    for i in range(c.num_layers):
        h, layer = f"h.{i}.", f"layers.{i}."
        pairs = {
            "add_norm1.norm": ("ln_1", False),
            "self_attention.in_proj": ("attn.c_attn", True),
            "self_attention.out_proj": ("attn.c_proj", True),
            "add_norm2.norm": ("ln_2", False),
            "ffn.w1": ("mlp.c_fc", True),
            "ffn.w2": ("mlp.c_proj", True),
        }
        for mine, (theirs, conv1d) in pairs.items():
            weight = get(f"{h}{theirs}.weight")
            ours[f"{layer}{mine}.weight"] = weight.t() if conv1d else weight
            ours[f"{layer}{mine}.bias"] = get(f"{h}{theirs}.bias")
    with torch.no_grad():
        params = dict(model.named_parameters())
        for name, value in ours.items():
            if params[name].shape != value.shape:
                raise ValueError(
                    f"{name}: GPT-2's weight has shape {tuple(value.shape)}, ours {tuple(params[name].shape)}"
                )
            params[name].copy_(value)
