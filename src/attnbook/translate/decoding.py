"""Decoding for ``evaluate`` and ``translate``: many sentences, in order of length, by beam search or greedily.

Sentences are decoded in order of length (less padding, and a batch ends
when its longest sentence does), each for at most its length plus
:data:`attnbook.decode.EXTRA_OUTPUT_TOKENS` tokens, the paper's budget, within
the model's positional table; the translations come back in the order given.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from torch import nn

from .. import decode
from ..data import Vocab
from .console import Console, format_duration
from .model import MAX_POSITIONS
from .settings import Decoding

__all__ = ["translate_tokens"]


def translate_tokens(
    model: nn.Module,
    sources: Sequence[Sequence[str]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    decoding: Decoding,
    console: Console | None = None,
) -> list[list[str]]:
    """Translate tokenized sentences; return token lists in order. A ``console`` shows a progress line."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    results: list[list[str]] = [[] for _ in sources]
    start, chunk = time.monotonic(), max(decoding.batch_size, 256)
    for first in range(0, len(order), chunk):
        part = order[first : first + chunk]
        longest = max(len(sources[i]) for i in part)
        if decoding.beam > 1:  # beam search's own default length: each source's + EXTRA_OUTPUT_TOKENS, within the table
            how = {"beam_size": decoding.beam, "alpha": decoding.alpha}
        else:  # greedy decoding (beam search with k = 1 gives the same tokens, more slowly)
            how = {"max_len": min(longest + decode.EXTRA_OUTPUT_TOKENS, MAX_POSITIONS - 1)}
        outputs = decode.translate(
            model, [list(sources[i]) for i in part], src_vocab, tgt_vocab, batch_size=decoding.batch_size, **how
        )
        for i, out in zip(part, outputs):
            results[i] = out
        if console is not None:
            done = first + len(part)
            left = (time.monotonic() - start) / done * (len(order) - done)
            console.progress(
                f"translated {done:,} of {len(order):,} sentences · ETA {format_duration(left)}", force=True
            )
    if console is not None:
        console.clear()
    return results
