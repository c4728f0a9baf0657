"""Truecasing: giving the translations back the capitals that the tokenizer took away.

The tokenizer lower-cases everything, so a model writes "tom lives in paris".
:func:`build_truecase` learns from the training targets how each word is
usually spelled, ignoring each sentence's first word (capitalized anyway):
a word written "Tom" most of the time gets its capital back. :func:`to_text`
applies that table and joins the tokens into text.
"""

from __future__ import annotations

import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence

from ..data import Pair, detokenize

__all__ = ["build_truecase", "to_text"]


def _case_samples(text: str, tokens: Sequence[str]) -> Iterator[tuple[str, str]]:
    """``(token, spelling in text)`` for each token found in ``text``, skipping the sentence's first word."""
    text = unicodedata.normalize("NFC", text).replace("\u2019", "'")
    lower = text.lower()
    if len(lower) != len(text):
        return
    at = 0
    for k, token in enumerate(tokens):
        p = lower.find(token, at)
        if p < 0:
            continue
        at = p + len(token)
        if k > 0 and any(c.isalpha() for c in token):
            yield token, text[p:at]


def build_truecase(pairs: Sequence[Pair], max_sentences: int = 200_000) -> dict[str, str]:
    """The usual spelling of every target word that is mostly not written in lower case (``"tom" -> "Tom"``)."""
    forms: dict[str, Counter] = defaultdict(Counter)
    for p in pairs[:max_sentences]:
        for token, spelling in _case_samples(p.tgt, p.tgt_tok):
            forms[token][spelling] += 1
    table = {}
    for token, counts in forms.items():
        spelling, n = counts.most_common(1)[0]
        if spelling != token and n > sum(counts.values()) / 2:
            table[token] = spelling
    return dict(sorted(table.items()))


def to_text(tokens: Sequence[str], lang: str, truecase: dict[str, str]) -> str:
    """Translated tokens as text in ``lang``, with the usual spelling of each word."""
    return detokenize([truecase.get(t, t) for t in tokens], lang)
