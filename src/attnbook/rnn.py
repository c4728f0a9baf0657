"""The RNN encoder–decoder of chapter 2, and the attention decoder of chapter 3.

An encoder reads the source sentence with a GRU. The *plain* decoder
(Cho et al. 2014, Sutskever et al. 2014) sees the source only through one
fixed vector, the encoder's final hidden state: that vector is its initial
state and is fed again at every step. The *attention* decoder
(Bahdanau et al. 2015) instead asks, at every step, which source positions
matter now, and reads a fresh context vector from all the encoder's outputs.

:class:`Seq2Seq` joins an encoder and one of the two decoders. It follows the
protocol that :mod:`attnbook.train` and :mod:`attnbook.decode` rely on:

- ``model(src, src_padding_mask, tgt_in)`` returns teacher-forced logits ``(B, T, V)``;
- ``model.start(src, src_padding_mask)`` encodes a batch and returns a decoder state;
- ``model.step(tokens, state)`` takes the previous tokens ``(B,)`` and returns
  the next-token logits ``(B, V)`` and the new state;
- ``model.config`` is a dataclass holding everything needed to rebuild it.

Shapes: ``B`` sentences, ``S`` source and ``T`` target positions, ``E``
embedding width, ``H`` hidden width, ``L`` GRU layers, ``V`` vocabulary size.
Masks are bool with ``True`` = padding, as everywhere in the library.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .attention import AdditiveAttention
from .checks import check_rows, check_token_ids
from .masks import padding_mask

__all__ = [
    "Seq2SeqConfig",
    "GRUEncoder",
    "GRUDecoder",
    "PlainDecoder",
    "AttentionDecoder",
    "DecoderState",
    "Seq2Seq",
    "check_token_ids",
    "lengths_from_mask",
]


def lengths_from_mask(mask: torch.Tensor, name: str = "src_padding_mask") -> torch.Tensor:
    """Sentence lengths ``(B,)`` from a padding mask ``(B, S)`` whose ``True`` entries form a suffix of each row."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor (True = padding), got {getattr(mask, 'dtype', type(mask).__name__)}"
        )
    if mask.dim() != 2:
        raise ValueError(f"{name} must have shape (B, S), got shape {tuple(mask.shape)}")
    lengths = (~mask).sum(dim=1)
    if not torch.equal(mask, padding_mask(lengths, mask.shape[1])):
        raise ValueError(f"{name} must mark padding at the end of each row only (True after the last real token)")
    return lengths


@dataclass(frozen=True)
class Seq2SeqConfig:
    """Everything needed to rebuild a :class:`Seq2Seq`; stored beside the weights in a checkpoint."""

    src_vocab_size: int
    tgt_vocab_size: int
    embed_size: int = 64
    hidden_size: int = 128
    num_layers: int = 1
    dropout: float = 0.0
    attention: bool = False
    pad_id: int = 0
    bidirectional: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in {"dropout", "attention", "bidirectional"}:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"Seq2SeqConfig.{f.name} must be an int, got {value!r}")
            if f.name == "pad_id":
                if not 0 <= value < min(self.src_vocab_size, self.tgt_vocab_size):
                    raise ValueError(f"pad_id {value} is outside the vocabularies")
            elif value < 1:
                raise ValueError(f"Seq2SeqConfig.{f.name} must be >= 1, got {value}")
        for name in ("attention", "bidirectional"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"Seq2SeqConfig.{name} must be True or False, got {getattr(self, name)!r}")
        if self.bidirectional and self.hidden_size % 2:
            raise ValueError(
                "a bidirectional encoder splits hidden_size between its "
                f"two directions: it must be even, got {self.hidden_size}"
            )
        if not 0.0 <= float(self.dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")


class GRUEncoder(nn.Module):
    """Embedding and a multi-layer GRU; padding is skipped by packing the batch.

    ``forward(src, src_padding_mask)`` returns ``outputs (B, S, H)``, the top layer's
    state at every position (zero at padding), and ``state (L, B, H)``, each
    layer's state after the *last real* token of each sentence, so that a
    padded sentence is encoded exactly as it would be alone.

    With ``bidirectional=True`` each layer runs two GRUs of width ``H / 2``,
    one left to right and one right to left, and concatenates them, so the
    shapes stay the same: ``outputs[:, j]`` is ``[forward state after token j;
    backward state after token j]``, which has read the whole sentence, and
    ``state[l]`` is ``[forward state after the last token; backward state after
    the first]``. The decoders need no change.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        hidden_size: int,
        num_layers: int = 1,
        dropout: float = 0.0,
        pad_id: int = 0,
        bidirectional: bool = False,
    ) -> None:
        super().__init__()
        if bidirectional and hidden_size % 2:
            raise ValueError(
                "a bidirectional encoder splits hidden_size between its "
                f"two directions: it must be even, got {hidden_size}"
            )
        self.vocab_size = vocab_size
        self.bidirectional = bidirectional
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        # GRU's own dropout acts between layers only (it warns if there is one layer).
        width = hidden_size // 2 if bidirectional else hidden_size
        self.rnn = nn.GRU(
            embed_size,
            width,
            num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
            bidirectional=bidirectional,
        )

    def forward(
        self, src: torch.Tensor, src_padding_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_token_ids(src, self.vocab_size, "source token ids")
        if src.dim() != 2:
            raise ValueError(f"src must have shape (B, S), got shape {tuple(src.shape)}")
        embedded = self.dropout(self.embedding(src))  # (B, S, E)
        if src_padding_mask is None:
            return self._join_directions(*self.rnn(embedded))
        lengths = lengths_from_mask(src_padding_mask)
        if src_padding_mask.shape != src.shape:
            raise ValueError(
                f"src_padding_mask of shape {tuple(src_padding_mask.shape)} "
                f"does not match src of shape {tuple(src.shape)}"
            )
        if not src_padding_mask.any():
            return self._join_directions(*self.rnn(embedded))
        if (lengths == 0).any():
            raise ValueError("every source sentence needs at least one token; a row of src_padding_mask is all padding")
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        outputs, state = self.rnn(packed)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        return self._join_directions(outputs, state)

    def _join_directions(self, outputs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """PyTorch's bidirectional state ``(2L, B, H/2)`` becomes ``(L, B, H)``, layer by layer: [forward; backward]."""
        if not self.bidirectional:
            return outputs, state
        layers = state.unflatten(0, (-1, 2))  # (L, 2, B, H/2): direction 0 forward, 1 backward
        return outputs, torch.cat([layers[:, 0], layers[:, 1]], dim=-1)


@dataclass
class DecoderState:
    """What a decoder carries from one step to the next.

    ``hidden (L, B, H)`` is the GRU state. The plain decoder also carries the
    fixed ``context (B, H)``; the attention decoder carries the encoder
    ``memory (B, S, H)``, its padding mask, the keys projected once, and the
    weights of the last step, ``attention (B, S)``. ``select(index)`` returns
    the state of some rows of the batch, for beam search.
    """

    hidden: torch.Tensor
    context: torch.Tensor | None = None
    memory: torch.Tensor | None = None
    memory_padding_mask: torch.Tensor | None = None
    projected_keys: torch.Tensor | None = None
    attention: torch.Tensor | None = None

    def select(self, index: torch.Tensor) -> "DecoderState":
        """The state of the batch rows ``index`` (in that order, repeats allowed).

        Beam search uses it to expand and reorder its beams.
        """
        check_rows(index, self.hidden.shape[1])
        index = index.to(self.hidden.device)

        def rows(x: torch.Tensor | None) -> torch.Tensor | None:
            return None if x is None else x.index_select(0, index)

        return DecoderState(
            hidden=self.hidden.index_select(1, index),  # (L, B, H): the batch is dim 1
            context=rows(self.context),
            memory=rows(self.memory),
            memory_padding_mask=rows(self.memory_padding_mask),
            projected_keys=rows(self.projected_keys),
            attention=rows(self.attention),
        )


class GRUDecoder(nn.Module):
    """What the two decoders share: the embedding, a GRU that reads ``[embedding; context]``, an output layer.

    The output layer reads ``[s_t; c]``, the new state and the context. The
    attention decoder (``attends = True``) also has the additive attention
    that computes its context; apart from where the context comes from, the
    two decoders are the same, so that comparing them measures attention.
    """

    attends = False

    def __init__(
        self,
        vocab_size: int,
        embed_size: int,
        hidden_size: int,
        num_layers: int = 1,
        dropout: float = 0.0,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        if self.attends:
            self.attention = AdditiveAttention(hidden_size, hidden_size, hidden_size)
        self.rnn = nn.GRU(
            embed_size + hidden_size,
            hidden_size,
            num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.output = nn.Linear(2 * hidden_size, vocab_size)  # reads [s_t; c]

    def embed(self, tgt_in: torch.Tensor) -> torch.Tensor:
        """The embeddings ``(B, T, E)`` of the inputs ``tgt_in (B, T)``, with dropout."""
        check_token_ids(tgt_in, self.vocab_size, "target token ids")
        return self.dropout(self.embedding(tgt_in))


class PlainDecoder(GRUDecoder):
    """A GRU decoder that reads the source through one fixed context vector.

    The context ``c`` (the encoder's final top-layer state) is concatenated to
    the embedding of the previous token at every step, and the encoder's final
    state is the decoder's initial state. The output layer reads the new state
    and the context, ``[s_t; c]``, as in Cho et al. (2014). With teacher
    forcing the whole target runs through the GRU in one call.
    """

    def init_state(
        self, enc_outputs: torch.Tensor, enc_state: torch.Tensor, src_padding_mask: torch.Tensor | None
    ) -> DecoderState:
        return DecoderState(hidden=enc_state, context=enc_state[-1])

    def forward(self, tgt_in: torch.Tensor, state: DecoderState) -> tuple[torch.Tensor, DecoderState]:
        """Logits ``(B, T, V)`` for inputs ``tgt_in (B, T)``, and the state after the last of them."""
        embedded = self.embed(tgt_in)  # (B, T, E)
        context = state.context[:, None, :].expand(-1, tgt_in.shape[1], -1)  # (B, T, H): the same c at every step
        outputs, hidden = self.rnn(torch.cat([embedded, context], dim=-1), state.hidden)
        return self.output(torch.cat([outputs, context], dim=-1)), replace(state, hidden=hidden)


class AttentionDecoder(GRUDecoder):
    """A GRU decoder that attends over the encoder's outputs at every step (Bahdanau et al. 2015).

    At step ``t`` the query is the top layer's state ``s_{t-1}``; additive
    attention over the encoder outputs (keys and values alike, padding masked)
    gives the context ``c_t``, which is concatenated to the embedding of the
    previous token; the output layer reads ``[s_t; c_t]``. The steps run one
    after another, even with teacher forcing, because each query depends on the
    state the previous step produced.
    """

    attends = True

    def init_state(
        self, enc_outputs: torch.Tensor, enc_state: torch.Tensor, src_padding_mask: torch.Tensor | None
    ) -> DecoderState:
        return DecoderState(
            hidden=enc_state,
            memory=enc_outputs,
            memory_padding_mask=src_padding_mask,
            projected_keys=self.attention.project_keys(enc_outputs),
        )

    def forward(self, tgt_in: torch.Tensor, state: DecoderState) -> tuple[torch.Tensor, DecoderState, torch.Tensor]:
        """Logits ``(B, T, V)``, the state after the last input, and the attention weights ``(B, T, S)``."""
        embedded = self.embed(tgt_in)  # (B, T, E)
        hidden, outputs, weights = state.hidden, [], []
        for t in range(tgt_in.shape[1]):
            query = hidden[-1][:, None, :]  # (B, 1, H): the top layer's previous state
            context, w = self.attention(
                query, state.memory, state.memory, state.memory_padding_mask, projected_keys=state.projected_keys
            )
            step_in = torch.cat([embedded[:, t : t + 1], context], dim=-1)  # (B, 1, E + H)
            out, hidden = self.rnn(step_in, hidden)
            outputs.append(torch.cat([out, context], dim=-1))  # (B, 1, 2H)
            weights.append(w)
        weights = torch.cat(weights, dim=1)  # (B, T, S)
        logits = self.output(torch.cat(outputs, dim=1))
        return logits, replace(state, hidden=hidden, attention=weights[:, -1]), weights


class Seq2Seq(nn.Module):
    """A GRU encoder joined to the plain decoder (``config.attention=False``) or the attention decoder."""

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        if not isinstance(config, Seq2SeqConfig):
            raise TypeError(f"Seq2Seq needs a Seq2SeqConfig, got {type(config).__name__}")
        self.config = config
        c = config
        self.encoder = GRUEncoder(
            c.src_vocab_size, c.embed_size, c.hidden_size, c.num_layers, c.dropout, c.pad_id, c.bidirectional
        )
        decoder = AttentionDecoder if c.attention else PlainDecoder
        self.decoder = decoder(c.tgt_vocab_size, c.embed_size, c.hidden_size, c.num_layers, c.dropout, c.pad_id)

    def start(self, src: torch.Tensor, src_padding_mask: torch.Tensor | None = None) -> DecoderState:
        """Encode a batch; return the decoder's initial state."""
        if src_padding_mask is not None and not isinstance(src_padding_mask, torch.Tensor):
            raise TypeError(f"src_padding_mask must be a bool tensor, got {type(src_padding_mask).__name__}")
        outputs, state = self.encoder(src, src_padding_mask)
        return self.decoder.init_state(outputs, state, src_padding_mask)

    def forward(
        self,
        src: torch.Tensor,
        src_padding_mask: torch.Tensor | None,
        tgt_in: torch.Tensor,
        need_weights: bool = False,
    ):
        """Teacher-forced logits ``(B, T, V)``.

        With ``need_weights``, also the weights ``(B, T, S)`` (``None`` for the plain model).
        """
        if tgt_in.dim() != 2 or tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"tgt_in must have shape (B, T) with B = {src.shape[0]}, got shape {tuple(tgt_in.shape)}")
        state = self.start(src, src_padding_mask)
        if self.config.attention:
            logits, _, weights = self.decoder(tgt_in, state)
        else:
            (logits, _), weights = self.decoder(tgt_in, state), None
        return (logits, weights) if need_weights else logits

    def step(self, tokens: torch.Tensor, state: DecoderState) -> tuple[torch.Tensor, DecoderState]:
        """One decoding step: previous tokens ``(B,)`` -> next-token logits ``(B, V)`` and the new state."""
        if tokens.dim() != 1:
            raise ValueError(f"step takes one token per sentence, shape (B,), got shape {tuple(tokens.shape)}")
        result = self.decoder(tokens[:, None], state)
        logits, new_state = result[0], result[1]
        return logits[:, 0], new_state
