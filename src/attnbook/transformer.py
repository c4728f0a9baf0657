"""The Transformer of Vaswani et al. (2017), chapter 7: blocks, encoder, decoder, the whole model.

The pieces of chapters 4 to 6 assembled into the encoder–decoder of the paper:

- :class:`PositionwiseFFN`: ``FFN(x) = max(0, x W₁ + b₁) W₂ + b₂``, the same two
  linear maps at every position (a 1×1 convolution over the sequence).
- :class:`AddNorm`: the residual connection around a sublayer with its layer
  normalization, after the sum as in the paper (post-LN,
  ``LayerNorm(x + Dropout(sublayer(x)))``) or, with ``norm_first=True``, before
  the sublayer (pre-LN, ``x + Dropout(sublayer(LayerNorm(x)))``).
- :class:`EncoderLayer`: self-attention, then the FFN, each inside an ``AddNorm``.
- :class:`DecoderLayer`: causal self-attention, cross-attention over the
  encoder's output (queries from the decoder, keys and values from the
  encoder), then the FFN.
- :class:`Encoder`, :class:`Decoder`: stacks of layers; a pre-LN stack ends
  with one more LayerNorm, since its residual stream is never normalized.
- :class:`Transformer`: token embeddings scaled by ``√d_model``, sinusoidal
  positions, dropout on their sum, the two stacks, and an output projection
  tied to the target embedding (all three matrices shared with
  ``share_embeddings=True``).

The model follows the library's sequence-to-sequence protocol (see
:mod:`attnbook.rnn`): ``model(src, src_padding_mask, tgt_in)`` gives teacher-forced
logits, ``model.start(src, src_padding_mask)`` the decoder state and
``model.step(tokens, state)`` the next-token logits, so :mod:`attnbook.train`,
:mod:`attnbook.decode` and checkpoints drive it as they drive chapter 3's model.

Decoding one token at a time, :meth:`Transformer.step` keeps a key–value
cache in the state (:class:`TransformerState`): each decoder layer's
cross-attention keys and values are computed once per sentence, in
:meth:`Transformer.start`, and its self-attention keys and values of the
tokens seen so far grow by one position per step, so a step processes only
the new token. ``start(..., cache=False)`` gives the plain alternative that
runs the decoder over the whole prefix at every step (the same logits, for
comparison).

Shapes: ``B`` sentences, ``S`` source and ``T`` target positions, ``d_model``
features, ``h`` heads of ``d_k = d_model / h`` features, ``V`` vocabulary size.
Masks are bool with ``True`` = padding (ignore), as everywhere in the library.

Names: one vocabulary for every model of the library and for the command line.
Widths take the paper's names (``d_model``, ``d_ff``), since the chapters'
equations use them; counts, where the paper has single letters (``h``, ``N``),
take the explicit names PyTorch also uses (``num_heads``, ``num_layers``);
``dropout`` and ``eps`` (the LayerNorm's) are the arguments of the PyTorch
modules they reach. :mod:`attnbook.fastformer` and ``attnbook-translate``
(``--d-model``, ``--num-heads``, ``--num-layers``, ``--d-ff``) use the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import torch
from torch import nn

from .attention import MultiHeadAttention
from .checks import check_positive as _check_positive
from .checks import check_probability as _check_probability
from .checks import check_rows, check_token_ids, values_checked
from .positional import SinusoidalPositionalEncoding

__all__ = [
    "PositionwiseFFN",
    "AddNorm",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "TransformerConfig",
    "Transformer",
    "TransformerState",
    "AttentionMaps",
]


# --- The two sublayers' companions: the FFN and Add & Norm --------------------------------------


class PositionwiseFFN(nn.Module):
    """``FFN(x) = max(0, x W₁ + b₁) W₂ + b₂``, applied to every position alike.

    ``w1`` maps ``d_model -> d_ff`` and ``w2`` maps ``d_ff -> d_model``. The same
    weights serve every position, so it is a convolution with kernel size 1
    over the sequence. ``dropout`` (off in the paper) acts on the hidden layer.
    Shapes: ``(..., d_model) -> (..., d_model)``.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        _check_positive(d_model=d_model, d_ff=d_ff)
        _check_probability(dropout, "dropout")
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(torch.relu(self.w1(x))))


class AddNorm(nn.Module):
    """The residual connection and layer normalization around one sublayer.

    ``forward(x, sublayer)`` calls ``sublayer`` (a function of one tensor) and
    returns, with ``norm_first=False`` (post-LN, the paper's)::

        LayerNorm(x + Dropout(sublayer(x)))

    and with ``norm_first=True`` (pre-LN)::

        x + Dropout(sublayer(LayerNorm(x)))

    If ``sublayer`` returns a tuple ``(y, *extras)`` (attention with its
    weights), the result is ``(new_x, *extras)``. LayerNorm's ``eps`` (1e-5,
    PyTorch's default) sits inside the square root: ``(x - μ) / √(σ² + ε)``.
    """

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False, eps: float = 1e-5) -> None:
        super().__init__()
        _check_probability(dropout, "dropout")
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = bool(norm_first)

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor | tuple]):
        out = sublayer(self.norm(x) if self.norm_first else x)
        y, extras = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
        y = x + self.dropout(y)
        if not self.norm_first:
            y = self.norm(y)
        return (y, *extras) if extras else y


# --- Layers --------------------------------------------------------------------------------------


class _Layer(nn.Module):
    """The sublayers of a Transformer layer, each inside an :class:`AddNorm`, built in the order they run.

    Self-attention, then (in a decoder layer, whose ``attends_to_memory`` is
    true) attention over the encoder's output, then the FFN. Their
    :class:`AddNorm` s are numbered in that order, as PyTorch numbers ``norm1``,
    ``norm2``, ``norm3``. The two kinds of layer differ only in that one
    sublayer and in how they run it.
    """

    attends_to_memory = False

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        attention_dropout: float = 0.0,
        ffn_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.self_attention = MultiHeadAttention(d_model, num_heads, attention_dropout)
        self.add_norm1 = AddNorm(d_model, dropout, norm_first)
        if self.attends_to_memory:
            self.cross_attention = MultiHeadAttention(d_model, num_heads, attention_dropout)
            self.add_norm2 = AddNorm(d_model, dropout, norm_first)
        self.ffn = PositionwiseFFN(d_model, d_ff, ffn_dropout)
        # the FFN's: add_norm2 in an encoder layer, add_norm3 in a decoder layer
        setattr(self, f"add_norm{3 if self.attends_to_memory else 2}", AddNorm(d_model, dropout, norm_first))


class EncoderLayer(_Layer):
    """Self-attention, then the FFN, each inside an :class:`AddNorm`.

    ``forward(x (B, S, d_model), src_padding_mask (B, S) or None)`` returns
    ``(B, S, d_model)``; with ``need_weights=True`` also the self-attention
    weights ``(B, h, S, S)``. ``dropout`` is the residual dropout of the paper;
    ``attention_dropout`` (on the attention weights) and ``ffn_dropout`` (inside
    the FFN) are extra places that ``torch.nn.TransformerEncoderLayer`` also drops.
    """

    def forward(self, x: torch.Tensor, src_padding_mask: torch.Tensor | None = None, need_weights: bool = False):
        attend = lambda h: self.self_attention(h, h, h, key_padding_mask=src_padding_mask, need_weights=need_weights)  # noqa: E731
        if need_weights:
            x, weights = self.add_norm1(x, attend)
        else:
            x = self.add_norm1(x, attend)
        x = self.add_norm2(x, self.ffn)
        return (x, weights) if need_weights else x


class DecoderLayer(_Layer):
    """Causal self-attention, cross-attention over the encoder's output, then the FFN.

    ``forward(x (B, T, d_model), memory (B, S, d_model), memory_padding_mask (B, S),
    tgt_padding_mask (B, T))`` returns ``(B, T, d_model)``; with ``need_weights=True``
    also the self-attention weights ``(B, h, T, T)`` and the cross-attention
    weights ``(B, h, T, S)``. In the cross-attention the queries come from the
    decoder (``x``), the keys and values from the encoder (``memory``).

    :meth:`step` is the same computation for the newest positions only,
    reading the earlier positions' self-attention keys and values from a cache
    and the cross-attention keys and values computed once by :meth:`memory_keys_values`.
    """

    attends_to_memory = True

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        memory_padding_mask: torch.Tensor | None = None,
        tgt_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        def self_attend(h):
            return self.self_attention(
                h, h, h, key_padding_mask=tgt_padding_mask, is_causal=True, need_weights=need_weights
            )

        def cross_attend(h):  # queries from the decoder, keys and values from the encoder
            return self.cross_attention(
                h, memory, memory, key_padding_mask=memory_padding_mask, need_weights=need_weights
            )

        if need_weights:
            x, self_weights = self.add_norm1(x, self_attend)
            x, cross_weights = self.add_norm2(x, cross_attend)
        else:
            x = self.add_norm2(self.add_norm1(x, self_attend), cross_attend)
        x = self.add_norm3(x, self.ffn)
        return (x, self_weights, cross_weights) if need_weights else x

    def memory_keys_values(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The cross-attention keys and values ``(B, h, S, d_k)`` of the encoder output: once per sentence."""
        return self.cross_attention.project_key_value(memory)

    def step(
        self,
        x: torch.Tensor,
        past_keys: torch.Tensor,
        past_values: torch.Tensor,
        memory_keys: torch.Tensor,
        memory_values: torch.Tensor,
        memory_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """The layer for the newest positions ``x (B, T_new, d_model)`` given the cache of earlier ones.

        ``past_keys``, ``past_values`` ``(B, h, t, d_k)`` are the self-attention
        keys and values of the ``t`` earlier positions. Returns the output
        ``(B, T_new, d_model)``, the keys and values extended to ``t + T_new``
        positions, and with ``need_weights`` the cross-attention weights
        ``(B, h, T_new, S)``.
        """
        cache: list[torch.Tensor] = []

        def self_attend(h):
            q, k, v = self.self_attention.project_self(h)
            k, v = torch.cat([past_keys, k], dim=2), torch.cat([past_values, v], dim=2)
            cache[:] = [k, v]
            return self.self_attention.attend(q, k, v, is_causal=True)

        def cross_attend(h):
            q = self.cross_attention.project_query(h)
            return self.cross_attention.attend(
                q, memory_keys, memory_values, key_padding_mask=memory_padding_mask, need_weights=need_weights
            )

        x = self.add_norm1(x, self_attend)
        if need_weights:
            x, cross_weights = self.add_norm2(x, cross_attend)
        else:
            x = self.add_norm2(x, cross_attend)
        x = self.add_norm3(x, self.ffn)
        keys, values = cache
        return (x, keys, values, cross_weights) if need_weights else (x, keys, values)


# --- Stacks --------------------------------------------------------------------------------------


class _Stack(nn.Module):
    """``num_layers`` layers of the class ``layer_type``, run in turn; with ``norm_first=True``, a final LayerNorm.

    ``d_model``, ``num_heads``, ``d_ff`` and the further options (``dropout``,
    ``norm_first``, ``attention_dropout``, ``ffn_dropout``, by position or by
    name) are the layer's, as in the stacks of :mod:`attnbook.fastformer`.
    ``forward`` takes what the layer takes: the stream first, its other inputs
    after it, by position or by name. With
    ``need_weights=True`` every layer returns ``(x, *weights)``, and the stack
    returns its output and, for each kind of weights, the list of every layer's.
    """

    layer_type: type[_Layer]

    def __init__(self, d_model: int, num_heads: int, num_layers: int, d_ff: int, *layer_args, **layer_options) -> None:
        super().__init__()
        _check_positive(num_layers=num_layers)
        self.layers = nn.ModuleList(
            self.layer_type(d_model, num_heads, d_ff, *layer_args, **layer_options) for _ in range(num_layers)
        )
        # A pre-LN stack adds every sublayer's output to an unnormalized stream: normalize it once at the end.
        self.norm = nn.LayerNorm(d_model) if self.layers[0].add_norm1.norm_first else None

    def forward(self, x: torch.Tensor, *inputs, need_weights: bool = False, **named_inputs):
        per_layer = []
        for layer in self.layers:
            if need_weights:
                x, *weights = layer(x, *inputs, need_weights=True, **named_inputs)
                per_layer.append(weights)
            else:
                x = layer(x, *inputs, **named_inputs)
        if self.norm is not None:
            x = self.norm(x)
        return (x, *map(list, zip(*per_layer))) if need_weights else x


class Encoder(_Stack):
    """``num_layers`` :class:`EncoderLayer` s; with ``norm_first=True``, a final LayerNorm.

    ``forward(x, src_padding_mask=None, need_weights=False)`` takes embedded
    inputs ``(B, S, d_model)`` and returns the memory ``(B, S, d_model)``, and
    with ``need_weights`` the list of each layer's weights ``(B, h, S, S)``.
    """

    layer_type = EncoderLayer


class Decoder(_Stack):
    """``num_layers`` :class:`DecoderLayer` s; with ``norm_first=True``, a final LayerNorm.

    ``forward(x, memory, memory_padding_mask=None, tgt_padding_mask=None,
    need_weights=False)`` takes embedded target inputs ``(B, T, d_model)`` and
    the encoder's memory ``(B, S, d_model)``; it returns ``(B, T, d_model)``,
    and with ``need_weights`` the lists of each layer's self-attention
    ``(B, h, T, T)`` and cross-attention ``(B, h, T, S)`` weights.
    """

    layer_type = DecoderLayer


# --- The configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TransformerConfig:
    """Everything needed to rebuild a :class:`Transformer`; stored beside the weights in a checkpoint.

    The defaults are the paper's base model, except the vocabulary sizes
    (required) and ``max_len``, the longest source or target sequence the
    positional table serves (longer ones are an error). ``dropout`` is the
    paper's residual and embedding dropout; the paper drops nowhere else, so
    ``attention_dropout`` (on attention weights) and ``ffn_dropout`` (inside the
    FFN) default to 0 (``torch.nn.Transformer`` uses ``dropout`` for both).
    ``share_embeddings=True`` makes the source embedding, the target embedding
    and the output projection one matrix; it needs one vocabulary for both
    sides (equal sizes). The output projection is always tied to the target
    embedding.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    num_heads: int = 8
    num_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    norm_first: bool = False
    share_embeddings: bool = False
    max_len: int = 1024
    pad_id: int = 0
    attention_dropout: float = 0.0
    ffn_dropout: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in {"norm_first", "share_embeddings"}:
                if not isinstance(value, bool):
                    raise TypeError(f"TransformerConfig.{f.name} must be True or False, got {value!r}")
            elif f.name.endswith("dropout"):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise TypeError(f"TransformerConfig.{f.name} must be a number, got {value!r}")
                _check_probability(value, f"TransformerConfig.{f.name}")
            elif not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"TransformerConfig.{f.name} must be an int, got {value!r}")
            elif f.name == "pad_id":
                if not 0 <= value < min(self.src_vocab_size, self.tgt_vocab_size):
                    raise ValueError(
                        f"pad_id {value} is outside the vocabularies (sizes "
                        f"{self.src_vocab_size} and {self.tgt_vocab_size})"
                    )
            elif value < 1:
                raise ValueError(f"TransformerConfig.{f.name} must be >= 1, got {value}")
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model ({self.d_model}) is not divisible by num_heads ({self.num_heads}): "
                f"each head gets d_model // num_heads features"
            )
        if self.d_model % 2:
            raise ValueError(
                f"d_model must be even (the sinusoidal positions come in sin/cos pairs), got {self.d_model}"
            )
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings=True needs one vocabulary for source and target, but the sizes differ "
                f"({self.src_vocab_size} and {self.tgt_vocab_size}); "
                "build a joint vocabulary or set share_embeddings=False"
            )


# --- What the model returns besides logits -------------------------------------------------------


@dataclass
class AttentionMaps:
    """Every layer's attention weights, per head, from one teacher-forced pass.

    ``encoder[l]`` ``(B, h, S, S)``: encoder self-attention of layer ``l``;
    ``decoder[l]`` ``(B, h, T, T)``: decoder (causal) self-attention;
    ``cross[l]`` ``(B, h, T, S)``: decoder-to-encoder cross-attention.
    """

    encoder: list[torch.Tensor] = field(default_factory=list)
    decoder: list[torch.Tensor] = field(default_factory=list)
    cross: list[torch.Tensor] = field(default_factory=list)


@dataclass
class TransformerState:
    """The decoder state that :meth:`Transformer.start` returns and :meth:`Transformer.step` advances.

    - ``memory (B, S, d_model)``, ``memory_padding_mask (B, S)`` or ``None``: the encoder's output and the
      source padding.
    - ``tokens (B, t)``: the tokens fed to the decoder so far (``<bos>`` first);
      ``position`` is ``t``, the position of the next token.
    - ``cached``: whether the key–value cache is used. If so,
      ``memory_keys[l]``, ``memory_values[l]`` ``(B, h, S, d_k)`` hold layer
      ``l``'s cross-attention keys and values (computed once, in ``start``) and
      ``keys[l]``, ``values[l]`` ``(B, h, t, d_k)`` its self-attention keys and
      values of the ``t`` tokens so far (one position longer after every
      step). If not, these lists are empty and every step runs the decoder
      over all of ``tokens``.
    - ``attention (B, S)``: the last step's cross-attention weights of the
      *last* decoder layer, averaged over its heads (``None`` before the first
      step), what :func:`attnbook.decode.greedy_decode` collects for alignment maps.

    :meth:`select` picks batch rows (to expand a batch into beams, or reorder
    them); the state is otherwise treated as immutable: ``step`` returns a new one.
    """

    memory: torch.Tensor
    memory_padding_mask: torch.Tensor | None
    tokens: torch.Tensor
    cached: bool = True
    memory_keys: list[torch.Tensor] = field(default_factory=list)
    memory_values: list[torch.Tensor] = field(default_factory=list)
    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)
    attention: torch.Tensor | None = None

    @property
    def position(self) -> int:
        """How many tokens the decoder has read: the position of the next one."""
        return self.tokens.shape[1]

    @property
    def batch_size(self) -> int:
        return self.memory.shape[0]

    def select(self, index: torch.Tensor) -> "TransformerState":
        """The state of the batch rows ``index`` (a 1-D LongTensor; rows may repeat, as when expanding to beams)."""
        check_rows(index, self.batch_size)
        index = index.to(self.memory.device)

        def rows(t):
            return None if t is None else t.index_select(0, index)

        return TransformerState(
            memory=rows(self.memory),
            memory_padding_mask=rows(self.memory_padding_mask),
            tokens=rows(self.tokens),
            cached=self.cached,
            memory_keys=[rows(t) for t in self.memory_keys],
            memory_values=[rows(t) for t in self.memory_values],
            keys=[rows(t) for t in self.keys],
            values=[rows(t) for t in self.values],
            attention=rows(self.attention),
        )


# --- The model -----------------------------------------------------------------------------------


class Transformer(nn.Module):
    """The encoder–decoder Transformer (Vaswani et al. 2017), following the library's protocol.

    ``forward(src (B, S), src_padding_mask (B, S) or None, tgt_in (B, T))`` returns the
    teacher-forced logits ``(B, T, tgt_vocab_size)``; ``need_weights=True``
    adds every layer's weights (:class:`AttentionMaps`). ``tgt_padding_mask (B, T)``
    may mark target padding; it changes nothing at real positions, which the
    causal mask already keeps from reading the padding after them.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"Transformer needs a TransformerConfig, got {type(config).__name__}")
        self.config = c = config
        self.scale = math.sqrt(c.d_model)
        self.tgt_embedding = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.src_embedding = self.tgt_embedding if c.share_embeddings else nn.Embedding(c.src_vocab_size, c.d_model)
        # The table is fixed (no parameters), shared by both sides; dropout acts on embedding + position.
        self.positional = SinusoidalPositionalEncoding(c.d_model, max_len=c.max_len, dropout=c.dropout, extend=False)
        options = dict(
            dropout=c.dropout, norm_first=c.norm_first, attention_dropout=c.attention_dropout, ffn_dropout=c.ffn_dropout
        )
        self.encoder = Encoder(c.d_model, c.num_heads, c.num_layers, c.d_ff, **options)
        self.decoder = Decoder(c.d_model, c.num_heads, c.num_layers, c.d_ff, **options)
        self.output = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self.output.weight = self.tgt_embedding.weight  # tied: logits are dot products with the target embeddings
        self.reset_embeddings()

    def reset_embeddings(self) -> None:
        """Normal with standard deviation ``d_model ** -0.5``: scaled by ``√d_model``, its entries have unit size.

        ``nn.Embedding``'s own N(0, 1) would make the scaled embeddings ``√d_model``
        times larger than the positions, and, through the tied output
        projection, the initial logits huge.
        """
        std = self.config.d_model**-0.5
        for embedding in {id(e): e for e in (self.src_embedding, self.tgt_embedding)}.values():
            nn.init.normal_(embedding.weight, mean=0.0, std=std)

    # --- inputs ------------------------------------------------------------------------------

    def _embed(
        self, ids: torch.Tensor, embedding: nn.Embedding, vocab_size: int, name: str, start: int = 0
    ) -> torch.Tensor:
        check_token_ids(ids, vocab_size, f"{name} token ids")
        if ids.dim() != 2:
            raise ValueError(f"{name} must have shape (B, length), got shape {tuple(ids.shape)}")
        end = start + ids.shape[1]
        if end > self.config.max_len:
            raise ValueError(
                f"{name} reaches position {end - 1}, but this model's positional table holds positions "
                f"0..{self.config.max_len - 1} (TransformerConfig.max_len={self.config.max_len}); "
                f"shorten the sequence or build the model with a larger max_len"
            )
        return self.positional(embedding(ids) * self.scale, start=start)

    @staticmethod
    def _check_mask(mask: torch.Tensor | None, ids: torch.Tensor, name: str) -> None:
        if mask is None:
            return
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError(
                f"{name} must be a bool tensor (True = padding), got {getattr(mask, 'dtype', type(mask).__name__)}; "
                f"build it with attnbook.masks.padding_mask or convert a 0/1 mask with .bool()"
            )
        if mask.shape != ids.shape:
            raise ValueError(f"{name} must have the shape of its tokens {tuple(ids.shape)}, got {tuple(mask.shape)}")

    # --- the two halves --------------------------------------------------------------------------

    def encode(self, src: torch.Tensor, src_padding_mask: torch.Tensor | None = None, need_weights: bool = False):
        """The encoder's output, the *memory* ``(B, S, d_model)``; with ``need_weights``, each layer's weights."""
        x = self._embed(src, self.src_embedding, self.config.src_vocab_size, "src")
        self._check_mask(src_padding_mask, src, "src_padding_mask")
        if src_padding_mask is not None and values_checked() and src_padding_mask.all(dim=1).any():
            raise ValueError(
                "every source sentence needs at least one real token; a row of src_padding_mask is all padding"
            )
        return self.encoder(x, src_padding_mask, need_weights=need_weights)

    def decode(
        self,
        tgt_in: torch.Tensor,
        memory: torch.Tensor,
        src_padding_mask: torch.Tensor | None = None,
        tgt_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """Logits ``(B, T, V)`` for target inputs ``tgt_in (B, T)`` given the memory.

        With ``need_weights``, also the weights.
        """
        if not isinstance(memory, torch.Tensor) or memory.dim() != 3 or memory.shape[-1] != self.config.d_model:
            raise ValueError(
                f"memory must have shape (B, S, d_model={self.config.d_model}), "
                f"got {tuple(getattr(memory, 'shape', ()))}"
            )
        x = self._embed(tgt_in, self.tgt_embedding, self.config.tgt_vocab_size, "tgt_in")
        if tgt_in.shape[0] != memory.shape[0]:
            raise ValueError(f"tgt_in has {tgt_in.shape[0]} sentences but the memory has {memory.shape[0]}")
        self._check_mask(tgt_padding_mask, tgt_in, "tgt_padding_mask")
        if src_padding_mask is not None:
            self._check_mask(src_padding_mask, memory[..., 0], "src_padding_mask")
        out = self.decoder(x, memory, src_padding_mask, tgt_padding_mask, need_weights=need_weights)
        if need_weights:
            x, self_weights, cross_weights = out
            return self.output(x), self_weights, cross_weights
        return self.output(out)

    def forward(
        self,
        src: torch.Tensor,
        src_padding_mask: torch.Tensor | None,
        tgt_in: torch.Tensor,
        tgt_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ):
        """Teacher-forced logits ``(B, T, V)``; with ``need_weights``, also an :class:`AttentionMaps`."""
        if isinstance(src, torch.Tensor) and isinstance(tgt_in, torch.Tensor) and src.dim() == 2 and tgt_in.dim() == 2:
            if tgt_in.shape[0] != src.shape[0]:
                raise ValueError(
                    f"tgt_in must have shape (B, T) with B = {src.shape[0]}, got shape {tuple(tgt_in.shape)}"
                )
        if not need_weights:
            return self.decode(tgt_in, self.encode(src, src_padding_mask), src_padding_mask, tgt_padding_mask)
        memory, enc_weights = self.encode(src, src_padding_mask, need_weights=True)
        logits, dec_weights, cross_weights = self.decode(
            tgt_in, memory, src_padding_mask, tgt_padding_mask, need_weights=True
        )
        return logits, AttentionMaps(enc_weights, dec_weights, cross_weights)

    # --- one token at a time ---------------------------------------------------------------------

    def start(
        self, src: torch.Tensor, src_padding_mask: torch.Tensor | None = None, cache: bool = True
    ) -> TransformerState:
        """Encode a batch; return the decoder's initial state (with its key–value cache unless ``cache=False``)."""
        memory = self.encode(src, src_padding_mask)
        B = memory.shape[0]
        state = TransformerState(
            memory=memory,
            memory_padding_mask=src_padding_mask,
            tokens=torch.zeros(B, 0, dtype=torch.long, device=memory.device),
            cached=bool(cache),
        )
        if cache:
            h, d_k = self.config.num_heads, self.config.d_model // self.config.num_heads
            empty = memory.new_zeros(B, h, 0, d_k)
            for layer in self.decoder.layers:
                k, v = layer.memory_keys_values(memory)
                state.memory_keys.append(k)
                state.memory_values.append(v)
                state.keys.append(empty)
                state.values.append(empty)
        return state

    def step(self, tokens: torch.Tensor, state: TransformerState) -> tuple[torch.Tensor, TransformerState]:
        """One decoding step: the previous tokens ``(B,)`` -> next-token logits ``(B, V)`` and the new state."""
        if not isinstance(state, TransformerState):
            raise TypeError(f"step needs the TransformerState that start() returned, got {type(state).__name__}")
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1:
            raise ValueError(
                f"step takes one token per sentence, shape (B,), got shape {tuple(getattr(tokens, 'shape', ()))}"
            )
        if tokens.shape[0] != state.batch_size:
            raise ValueError(f"step got {tokens.shape[0]} tokens for a state of {state.batch_size} sentences")
        if state.position >= self.config.max_len:
            raise ValueError(
                f"cannot decode position {state.position}: the positional "
                f"table holds positions 0..{self.config.max_len - 1} "
                f"(TransformerConfig.max_len={self.config.max_len}); ask for fewer tokens"
            )
        history = torch.cat([state.tokens, tokens[:, None].to(state.tokens.device)], dim=1)  # (B, t + 1)
        if not state.cached:  # the decoder runs over the whole prefix again: what the cache saves
            x = self._embed(history, self.tgt_embedding, self.config.tgt_vocab_size, "tokens")
            x, _, cross_weights = self.decoder(x, state.memory, state.memory_padding_mask, need_weights=True)
            attention = cross_weights[-1][:, :, -1].mean(dim=1)  # last layer, newest position, mean over heads
            new = TransformerState(state.memory, state.memory_padding_mask, history, cached=False, attention=attention)
            return self.output(x[:, -1]), new
        x = self._embed(tokens[:, None], self.tgt_embedding, self.config.tgt_vocab_size, "tokens", start=state.position)
        keys, values = [], []
        last = len(self.decoder.layers) - 1
        for i, layer in enumerate(self.decoder.layers):
            out = layer.step(
                x,
                state.keys[i],
                state.values[i],
                state.memory_keys[i],
                state.memory_values[i],
                state.memory_padding_mask,
                need_weights=i == last,
            )
            x, k, v = out[:3]
            keys.append(k)
            values.append(v)
        weights = out[3]  # (B, h, 1, S) of the last layer
        if self.decoder.norm is not None:
            x = self.decoder.norm(x)
        new = TransformerState(
            state.memory,
            state.memory_padding_mask,
            history,
            cached=True,
            memory_keys=state.memory_keys,
            memory_values=state.memory_values,
            keys=keys,
            values=values,
            attention=weights[:, :, 0].mean(dim=1),
        )
        return self.output(x)[:, 0], new
