"""Greedy decoding: from a trained model to token indices, and from indices back to text.

:func:`greedy_decode` works for any model with the library's decoding protocol
(``model.start(src, src_mask) -> state`` and
``model.step(tokens, state) -> (logits, state)``, see :mod:`attnbook.rnn`). It
decodes a whole batch at once: every sentence starts from ``<bos>``, takes the
most likely token at each step, and is finished once it has produced ``<eos>``;
decoding stops when every sentence is finished or after ``max_len`` tokens.
Finished sentences are padded, so a batched result equals decoding each
sentence alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

__all__ = ["Decoded", "greedy_decode", "cut_at_eos", "ids_to_tokens", "ids_to_text", "translate"]


@dataclass
class Decoded:
    """The result of :func:`greedy_decode`.

    ``tokens (B, L)`` holds the generated indices (without ``<bos>``; with the
    ``<eos>`` that ended each sentence; ``pad_id`` after it); ``lengths (B,)``
    counts the tokens up to and including ``<eos>``; ``attention (B, L, S)`` holds
    each step's attention weights when the model exposes them, else ``None``.
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    attention: torch.Tensor | None = None


@torch.no_grad()
def greedy_decode(
    model: nn.Module,
    src: torch.Tensor,
    src_mask: torch.Tensor | None = None,
    *,
    max_len: int,
    bos_id: int = 1,
    eos_id: int = 2,
    pad_id: int = 0,
) -> Decoded:
    """Decode a batch greedily, stopping at ``<eos>`` or after ``max_len`` tokens."""
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1:
        raise ValueError(f"max_len must be an int >= 1 (the most tokens to generate), got {max_len!r}")
    if src.dim() != 2:
        raise ValueError(f"src must have shape (B, S), got shape {tuple(src.shape)}")
    was_training = model.training
    model.eval()
    try:
        state = model.start(src, src_mask)
        batch = src.shape[0]
        tokens = torch.full((batch,), bos_id, dtype=torch.long, device=src.device)
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        lengths = torch.full((batch,), max_len, dtype=torch.long, device=src.device)
        out, weights = [], []
        for t in range(max_len):
            logits, state = model.step(tokens, state)
            tokens = logits.argmax(dim=-1)
            tokens = tokens.masked_fill(finished, pad_id)  # a finished sentence only pads
            out.append(tokens)
            w = getattr(state, "attention", None)
            if w is not None:
                weights.append(w.masked_fill(finished[:, None], 0.0))
            just_ended = ~finished & (tokens == eos_id)
            lengths[just_ended] = t + 1
            finished |= just_ended
            if finished.all():
                break
    finally:
        model.train(was_training)
    attention = torch.stack(weights, dim=1) if weights else None
    return Decoded(torch.stack(out, dim=1), lengths, attention)


def cut_at_eos(ids: Sequence[int] | torch.Tensor, eos_id: int = 2) -> list[int]:
    """The indices before the first ``eos_id`` (all of them when there is none)."""
    ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    return ids[: ids.index(eos_id)] if eos_id in ids else ids


def ids_to_tokens(ids: torch.Tensor | Sequence[Sequence[int]], vocab) -> list[list[str]]:
    """Turn a batch of generated indices ``(B, L)`` into token lists, cut at ``<eos>``, without special tokens."""
    rows = ids.tolist() if isinstance(ids, torch.Tensor) else [list(r) for r in ids]
    if isinstance(ids, torch.Tensor) and ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, L), got shape {tuple(ids.shape)}")
    size = len(vocab)
    result = []
    for row in rows:
        for i in row:
            if not 0 <= i < size:
                raise IndexError(f"index {i} is outside the vocabulary of size {size}")
        result.append(vocab.decode(cut_at_eos(row, vocab.eos_id), strip_special=True))
    return result


def ids_to_text(ids: torch.Tensor | Sequence[Sequence[int]], vocab, lang: str | None = None) -> list[str]:
    """Like :func:`ids_to_tokens`, as text: detokenized for ``lang`` (``"fr"``, ...), or joined with spaces."""
    rows = ids_to_tokens(ids, vocab)
    if lang is None:
        return [" ".join(tokens) for tokens in rows]
    from .data import detokenize

    return [detokenize(tokens, lang) for tokens in rows]


def translate(
    model: nn.Module,
    sources: Sequence[Sequence[str]],
    src_vocab,
    tgt_vocab,
    *,
    max_len: int | None = None,
    batch_size: int = 128,
) -> list[list[str]]:
    """Translate tokenized ``sources`` greedily, in batches; return the target token lists, in order.

    Each batch is decoded for at most ``max_len`` tokens, by default twice its
    longest source plus 5. Because decoding a padded batch equals decoding each
    sentence alone, the batch size changes the speed, never the result.
    """
    from .masks import padding_mask

    if isinstance(sources, str) or any(isinstance(s, str) for s in sources):
        raise TypeError("translate expects tokenized sentences (lists of tokens), not strings; call tokenize first")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if any(len(s) == 0 for s in sources):
        raise ValueError("cannot translate an empty sentence")
    device = next(model.parameters()).device
    result: list[list[str]] = []
    for start in range(0, len(sources), batch_size):
        ids = [src_vocab.encode(list(s)) for s in sources[start : start + batch_size]]
        lengths = torch.tensor([len(x) for x in ids])
        longest = int(lengths.max())
        src = torch.tensor([x + [src_vocab.pad_id] * (longest - len(x)) for x in ids], device=device)
        out = greedy_decode(
            model,
            src,
            padding_mask(lengths, longest).to(device),
            max_len=max_len or 2 * longest + 5,
            bos_id=tgt_vocab.bos_id,
            eos_id=tgt_vocab.eos_id,
            pad_id=tgt_vocab.pad_id,
        )
        result.extend(ids_to_tokens(out.tokens.cpu(), tgt_vocab))
    return result
