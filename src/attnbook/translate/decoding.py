"""Decoding for ``evaluate`` and ``translate``: many sentences, in order of length, by beam search or greedily.

Sentences are decoded in order of length (less padding, and a batch ends
when its longest sentence does), each batch for at most ``A × its longest
source + B`` tokens (``--max-len-a``, ``--max-len-b``; 1 and 50 by default,
the paper's budget), within the model's positional table; the translations
come back in the order given. :func:`nbest_tokens` keeps every finished
hypothesis of beam search with its log-probability and length, so that
:mod:`~attnbook.translate.choose` can rank them again under any length penalty.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from torch import nn

from .. import decode
from ..data import Vocab
from ..masks import padding_mask
from .console import Console, format_duration
from .model import MAX_POSITIONS
from .settings import Decoding

__all__ = ["translate_tokens", "nbest_tokens", "output_limit"]


def output_limit(longest_source: int, decoding: Decoding) -> int:
    """The most tokens a translation of a batch may have: ``A × longest + B``, within the positional table
    (:func:`attnbook.decode.output_limit`, the library's one rule, with the command line's ``A`` and ``B``)."""
    return decode.output_limit(longest_source, decoding.max_len_a, decoding.max_len_b, cap=MAX_POSITIONS - 1)


def _chunks(sources: Sequence[Sequence[str]], size: int) -> list[list[int]]:
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    return [order[first : first + size] for first in range(0, len(order), size)]


def translate_tokens(
    model: nn.Module,
    sources: Sequence[Sequence[str]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    decoding: Decoding,
    console: Console | None = None,
) -> list[list[str]]:
    """Translate tokenized sentences; return token lists in order. A ``console`` shows a progress line."""
    results: list[list[str]] = [[] for _ in sources]
    start, done = time.monotonic(), 0
    for part in _chunks(sources, decoding.batch_size):
        limit = output_limit(max(len(sources[i]) for i in part), decoding)
        if decoding.beam_size > 1:
            how = {"beam_size": decoding.beam_size, "alpha": decoding.alpha}
        else:  # greedy decoding (beam search with k = 1 gives the same tokens, more slowly)
            how = {}
        outputs = decode.translate(
            model, [list(sources[i]) for i in part], src_vocab, tgt_vocab, batch_size=len(part), max_len=limit, **how
        )
        for i, out in zip(part, outputs):
            results[i] = out
        done += len(part)
        if console is not None:
            left = (time.monotonic() - start) / done * (len(sources) - done)
            console.progress(
                f"translated {done:,} of {len(sources):,} sentences · ETA {format_duration(left)}", force=True
            )
    if console is not None:
        console.clear()
    return results


def nbest_tokens(
    model: nn.Module, sources: Sequence[Sequence[str]], src_vocab: Vocab, tgt_vocab: Vocab, decoding: Decoding
) -> list[list[tuple[list[str], float, int]]]:
    """Every finished beam-search hypothesis of each sentence: ``(tokens, log p, length with <eos>)``, in order."""
    device = next(model.parameters()).device
    results: list[list[tuple[list[str], float, int]]] = [[] for _ in sources]
    for part in _chunks(sources, decoding.batch_size):
        ids = [src_vocab.encode(list(sources[i])) for i in part]
        lengths = torch.tensor([len(x) for x in ids])
        longest = int(lengths.max())
        src = torch.tensor([x + [src_vocab.pad_id] * (longest - len(x)) for x in ids], device=device)
        out = decode.beam_search(
            model,
            src,
            padding_mask(lengths, longest).to(device),
            beam_size=decoding.beam_size,
            alpha=0.0,  # the search does not depend on alpha: it only ranks the finished hypotheses
            max_len=output_limit(longest, decoding),
            n_best=decoding.beam_size,
            bos_id=tgt_vocab.bos_id,
            eos_id=tgt_vocab.eos_id,
            pad_id=tgt_vocab.pad_id,
        )
        for i, hypotheses in zip(part, out.nbest):
            results[i] = [(tgt_vocab.decode(h.tokens), h.log_prob, len(h.tokens)) for h in hypotheses]
    return results
