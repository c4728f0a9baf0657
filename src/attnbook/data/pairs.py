"""Sentence pairs, corpora and splits: the types every data source of the course produces.

A :class:`Pair` is a sentence, its translation and both tokenized; a
:class:`Corpus` is three lists of pairs (train, valid, test) with the
vocabularies of the training pairs. The generated corpus
(:mod:`attnbook.data.corpus`) and real Tatoeba files (:mod:`attnbook.data.anki`)
both produce them, and everything above (batches, training, decoding) reads
only them.

Two ways of splitting pairs into train, validation and test sets:

- :func:`split_by_checksum`, for real files: each pair's split comes from a
  checksum of its sentences, so it is the same on every machine and in any line
  order, and no sentence, source or target, lands in two splits. Chapter 1's
  :func:`~attnbook.data.corpus_from_pairs` and the command line
  ``attnbook-translate`` split with it, so they split one file alike.
- :func:`split_by_index`, for the generated corpus, whose sentences never
  repeat: pair ``i`` goes where the fractional part of ``i × 0.618…`` falls, so
  the proportions hold for every prefix.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import InitVar, dataclass, field
from typing import NamedTuple

from .text import Vocab, tokenize

__all__ = ["Pair", "Corpus", "Splits", "alignment_matrix", "split_by_checksum", "split_by_index"]


@dataclass(frozen=True)
class Pair:
    """A sentence and its translation, with their tokens.

    ``alignment`` (generated pairs only) has one entry per target token: the
    indices of the source tokens it translates, possibly none (the French
    "des" in "je vois des chats" translates no English word).

    ``src_tok`` and ``tgt_tok`` are the tokens as tuples, read without a copy;
    ``src_tokens`` and ``tgt_tokens`` give them as fresh lists. The tokens are
    :func:`~attnbook.data.tokenize` of the text, unless whoever builds the pair
    already has them and passes ``tokens=(source tokens, target tokens)``.
    """

    src: str
    tgt: str
    alignment: tuple[tuple[int, ...], ...] | None = None
    src_lang: str = "en"
    tgt_lang: str = "fr"
    attribution: str = ""
    tokens: InitVar[tuple[Sequence[str], Sequence[str]] | None] = None
    src_tok: tuple[str, ...] = field(init=False, repr=False, compare=False)
    tgt_tok: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self, tokens: tuple[Sequence[str], Sequence[str]] | None) -> None:
        src_tok, tgt_tok = (
            tokens if tokens is not None else (tokenize(self.src, self.src_lang), tokenize(self.tgt, self.tgt_lang))
        )
        # A frozen dataclass sets its own fields this way while it is built (as its generated __init__ does).
        object.__setattr__(self, "src_tok", tuple(src_tok))
        object.__setattr__(self, "tgt_tok", tuple(tgt_tok))

    @property
    def src_tokens(self) -> list[str]:
        """The source sentence, tokenized (a fresh list)."""
        return list(self.src_tok)

    @property
    def tgt_tokens(self) -> list[str]:
        """The target sentence, tokenized (a fresh list)."""
        return list(self.tgt_tok)

    def __repr__(self) -> str:
        return f"Pair({self.src!r} -> {self.tgt!r})"


def alignment_matrix(pair: Pair):
    """The alignment of ``pair`` as a float tensor ``(target tokens, source tokens)`` of 0s and 1s."""
    import torch

    if pair.alignment is None:
        raise ValueError(f"{pair!r} has no alignment: only generated pairs carry one")
    matrix = torch.zeros(len(pair.tgt_tok), len(pair.src_tok))
    for i, sources in enumerate(pair.alignment):
        for j in sources:
            matrix[i, j] = 1.0
    return matrix


@dataclass
class Corpus:
    """Train, validation and test pairs, with vocabularies built from the training pairs."""

    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]
    src_vocab: Vocab
    tgt_vocab: Vocab
    src_lang: str = "en"
    tgt_lang: str = "fr"

    @classmethod
    def from_splits(cls, splits: Splits, min_freq: int = 1, max_size: int | None = None) -> Corpus:
        """A corpus of these splits, with vocabularies of the training pairs' tokens seen ``min_freq`` times."""
        if not splits.train:
            raise ValueError(
                f"the training split is empty ({sum(map(len, splits))} pairs): there is nothing to learn from"
            )
        src_vocab = Vocab.build((p.src_tok for p in splits.train), min_freq=min_freq, max_size=max_size)
        tgt_vocab = Vocab.build((p.tgt_tok for p in splits.train), min_freq=min_freq, max_size=max_size)
        first = splits.train[0]
        return cls(*splits, src_vocab, tgt_vocab, first.src_lang, first.tgt_lang)

    def split(self, name: str) -> list[Pair]:
        """``"train"``, ``"valid"`` or ``"test"``."""
        if name not in ("train", "valid", "test"):
            raise ValueError(f"unknown split {name!r}: use 'train', 'valid' or 'test'")
        return getattr(self, name)

    def tokens(self, split: str = "train") -> tuple[list[list[str]], list[list[str]]]:
        """The tokenized sentences of a split: ``(source token lists, target token lists)``."""
        pairs = self.split(split)
        return [p.src_tokens for p in pairs], [p.tgt_tokens for p in pairs]

    def batches(
        self,
        split: str = "train",
        batch_size: int = 64,
        shuffle: bool | None = None,
        seed: int = 0,
        bucket: bool = True,
    ):
        """Batches of a split (see :func:`attnbook.data.make_batches`); shuffled for training only by default."""
        from .batches import make_batches

        if shuffle is None:
            shuffle = split == "train"
        pairs = self.split(split)
        return make_batches(
            pairs, self.src_vocab, self.tgt_vocab, batch_size, shuffle=shuffle, seed=seed, bucket=bucket
        )

    def __repr__(self) -> str:
        return (
            f"Corpus({self.src_lang}→{self.tgt_lang}: {len(self.train)} train, {len(self.valid)} valid, "
            f"{len(self.test)} test pairs; vocabularies {len(self.src_vocab)} / {len(self.tgt_vocab)} tokens)"
        )


class Splits(NamedTuple):
    """Pairs split three ways; unpack it as ``train, valid, test = splits``."""

    train: list[Pair]
    valid: list[Pair]
    test: list[Pair]


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float]:
    """The two cut points of (train, valid, test) fractions, after checking them."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or not math.isclose(sum(fractions), 1.0, abs_tol=1e-9):
        raise ValueError(
            f"splits must be three non-negative fractions summing to 1 (train, valid, test), got {tuple(fractions)}"
        )
    return fractions[0], fractions[0] + fractions[1]


def _sentence_key(side: str, sentence: str) -> str:
    """A sentence as the split sees it: Unicode-normalized, lower case, spaces folded."""
    return side + "\t" + " ".join(unicodedata.normalize("NFC", sentence).lower().split())


def split_by_checksum(pairs: Sequence[Pair], fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> Splits:
    """Split real pairs into train / valid / test by a checksum of their sentences.

    Pairs that share a sentence, on either side, form one group (Tatoeba
    often has several translations of "Go.", and one French sentence may
    translate several English ones); case and spacing do not count
    ("Go." and "go. " are one sentence). Each group goes to one split, chosen
    by the SHA-1 of its first sentence, so the split of a pair depends on the
    sentences alone: not on the order of the lines, not on the machine.
    ``fractions`` are the shares of (train, valid, test).
    """
    cut_train, cut_valid = _check_fractions(fractions)
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    keys = [_sentence_key("s", p.src) for p in pairs]
    for p, key in zip(pairs, keys):
        a, b = root(key), root(_sentence_key("t", p.tgt))
        if a != b:  # the smaller key stands for the group, whatever the order of the pairs
            parent[max(a, b)] = min(a, b)
    splits = Splits([], [], [])
    for p, key in zip(pairs, keys):
        digest = hashlib.sha1(root(key).encode("utf-8")).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        (splits.train if u < cut_train else splits.valid if u < cut_valid else splits.test).append(p)
    return splits


_GOLDEN = (math.sqrt(5) - 1) / 2


def split_by_index(pairs: Sequence[Pair], fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> Splits:
    """Deal pairs into train / valid / test in the given proportions, by their place in the list.

    Pair ``i`` goes to a split according to the fractional part of ``i × 0.618…``,
    a sequence that spreads evenly over [0, 1): the proportions hold for every
    prefix, so a corpus of 1,000 pairs is the start of the corpus of 10,000.
    Pairs that repeat a sentence may land in two splits: this suits the
    generated corpus, whose sentences never repeat.
    """
    cut_train, cut_valid = _check_fractions(fractions)
    splits = Splits([], [], [])
    for i, pair in enumerate(pairs):
        u = (i * _GOLDEN) % 1.0
        (splits.train if u < cut_train else splits.valid if u < cut_valid else splits.test).append(pair)
    return splits
