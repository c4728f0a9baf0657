"""Subword vocabularies: byte-pair encoding learned with SentencePiece, for real text in any language.

Chapter 1 builds byte-pair encoding by hand {cite}`sennrich2016neural`: start
from characters, merge the most frequent pair of neighbouring symbols, again
and again. :class:`Subwords` learns the same merges with SentencePiece
{cite}`kudo2018sentencepiece` (``model_type="bpe"``), a library made for
translation systems:

- it reads raw text, spaces included (a space becomes the symbol ``▁`` at the
  start of the next piece), so Chinese and Japanese need no word splitter and
  :meth:`Subwords.decode` gives back the very text that was encoded: the
  translation is text as a person would write it, in its own case, and
  sacreBLEU scores it as it would a human's;
- characters too rare to get a piece of their own (``character_coverage``)
  and characters never seen are spelled as their UTF-8 bytes
  (``byte_fallback``), so no input is ever ``<unk>``.

A :class:`Subwords` gives the :class:`~attnbook.data.Vocab` that a model reads
(:meth:`Subwords.vocab`): the four reserved tokens of the course, then every
piece. ``sentencepiece`` is imported when a model is learned or read, not
with :mod:`attnbook.data`.
"""

from __future__ import annotations

import io
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..files import written_whole
from .text import Vocab, language

__all__ = ["Subwords", "UNSPACED_LANGUAGES", "CHARACTER_LANGUAGES", "character_coverage"]

#: Languages written without spaces between words: no ``▁`` before a sentence's first piece.
UNSPACED_LANGUAGES = frozenset(("zh", "yue", "ja", "th", "lo", "km", "my"))
#: Languages whose characters are already units of meaning: their own vocabulary is of characters, no merges.
CHARACTER_LANGUAGES = frozenset(("zh", "yue", "ja"))
#: Languages of thousands of characters: the rarest 0.05% of characters are spelled as bytes.
_MANY_CHARACTERS = frozenset(("zh", "yue", "ja", "ko"))


def character_coverage(languages: Iterable[str]) -> float:
    """The share of characters that get pieces of their own: 0.9995 for Chinese, Japanese, Korean, else 1."""
    return 0.9995 if any(language(lang) in _MANY_CHARACTERS for lang in languages) else 1.0


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFC", text)


class Subwords:
    """A SentencePiece byte-pair model: text in, pieces out (:meth:`encode`), and back (:meth:`decode`)."""

    def __init__(self, model: bytes) -> None:
        import sentencepiece

        self.model = bytes(model)
        try:
            self._sp = sentencepiece.SentencePieceProcessor(model_proto=self.model)
        except Exception as err:  # sentencepiece raises RuntimeError or OSError for bytes it cannot parse
            raise ValueError(f"not a SentencePiece model ({type(err).__name__})") from None

    @classmethod
    def learn(
        cls,
        sentences: Iterable[str],
        vocab_size: int,
        languages: Sequence[str] = ("en",),
        seed: int = 0,
        threads: int = 1,
        space_first: bool | None = None,
        characters: bool = False,
    ) -> Subwords:
        """Learn byte-pair merges from ``sentences`` until the model has about ``vocab_size`` pieces.

        ``languages`` are the languages of the sentences: they decide the
        character coverage (:func:`character_coverage`) and whether a sentence
        starts with a space symbol (not for :data:`UNSPACED_LANGUAGES`). The
        256 byte pieces count in ``vocab_size``; fewer pieces result when the
        text holds too few distinct pairs. ``space_first`` says whether a
        sentence starts with ``▁`` as if a space stood before it (by default:
        unless every language is written without spaces). ``characters``
        learns no merges: one piece per character (and bytes for the rarest),
        as chapter 1 splits Chinese and Japanese.
        """
        import sentencepiece

        if vocab_size <= 257:
            raise ValueError(f"a subword vocabulary needs more than 257 pieces (<unk> and 256 bytes), got {vocab_size}")
        texts = [_normalize(s) for s in sentences if s.strip()]
        if not texts:
            raise ValueError("cannot learn subwords from no text")
        codes = [language(lang) for lang in languages]
        model = io.BytesIO()
        sentencepiece.set_random_generator_seed(seed)
        try:
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=iter(texts),
                model_writer=model,
                model_type="bpe",
                vocab_size=vocab_size,
                hard_vocab_limit=False,
                character_coverage=character_coverage(codes),
                byte_fallback=True,
                split_digits=True,
                max_sentencepiece_length=1 if characters else 16,
                add_dummy_prefix=not all(c in UNSPACED_LANGUAGES for c in codes)
                if space_first is None
                else space_first,
                normalization_rule_name="identity",  # keep the text as written: full-width punctuation stays
                unk_id=0,
                bos_id=-1,
                eos_id=-1,
                pad_id=-1,
                input_sentence_size=1_000_000,
                shuffle_input_sentence=True,
                num_threads=max(1, threads),
                required_chars="\u2581",  # the space symbol, even where the training text has no space
                minloglevel=2,
            )
        except RuntimeError as err:  # such as a vocabulary smaller than the characters it must hold
            too_small = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", str(err))
            if too_small:  # SentencePiece's own advice names its options, not ours: say what to do here
                needed = int(too_small.group(2))
                raise ValueError(
                    f"{needed:,} pieces are needed for the characters of the {'/'.join(codes)} text and the 256 bytes "
                    f"(each character seen often enough is a piece of its own), more than the {vocab_size:,} "
                    f"asked for: ask for at least {needed:,}"
                ) from None
            raise ValueError(f"SentencePiece cannot learn this vocabulary: {str(err).strip()}") from None
        return cls(model.getvalue())

    def __len__(self) -> int:
        return self._sp.get_piece_size()

    @property
    def pieces(self) -> list[str]:
        """Every piece, in the model's order: ``<unk>``, the 256 bytes, the characters and merges."""
        return [self._sp.id_to_piece(i) for i in range(len(self))]

    @property
    def merges(self) -> list[str]:
        """The pieces made by merging two others, in the order they were learned (the most frequent pair first)."""
        sp = self._sp
        return [
            sp.id_to_piece(i)
            for i in range(len(self))
            if not (sp.is_unknown(i) or sp.is_control(i) or sp.is_byte(i)) and len(sp.id_to_piece(i)) > 1
        ]

    def vocab(self) -> Vocab:
        """The vocabulary a model reads: ``<pad> <bos> <eos> <unk>``, then every piece."""
        sp = self._sp
        return Vocab(sp.id_to_piece(i) for i in range(len(self)) if not (sp.is_unknown(i) or sp.is_control(i)))

    def encode(self, text: str) -> list[str]:
        """The pieces of ``text``; a character without a piece of its own is spelled as its bytes."""
        return self._sp.encode(_normalize(text), out_type=str)

    def sample(self, texts: Sequence[str], dropout: float, seed: int) -> list[list[str]]:
        """BPE-dropout {cite}`provilkov2020bpe`: the pieces of each text, each merge left out with chance ``dropout``.

        Encoding applies the learned merges; here each merge that could apply is
        skipped at random, so a word comes out split in one of the ways its
        merges allow, a different one each time (``dropout`` 0: :meth:`encode`).
        A model trained on such splits sees a word's parts as well as the word,
        which the method's authors found to help most where training data is
        small (over ten minutes of training it did not: book/running.md). The
        splits depend only on ``seed`` and ``texts``, in order: the same seed
        gives the same splits.
        SentencePiece seeds its sampling process-wide only, so this call resets
        that seed for any other sampling in the process.
        """
        if not 0 <= dropout < 1:
            raise ValueError(f"the dropout of merges must be in [0, 1), got {dropout:g}")
        if dropout == 0:
            return [self.encode(t) for t in texts]
        import sentencepiece

        sentencepiece.set_random_generator_seed(seed % 2**32)
        sp = self._sp
        return [
            sp.encode(_normalize(t), out_type=str, enable_sampling=True, alpha=dropout, nbest_size=-1) for t in texts
        ]

    def decode(self, pieces: Sequence[str]) -> str:
        """The text the ``pieces`` spell (the inverse of :meth:`encode`); unknown pieces are left out."""
        unk = self._sp.unk_id()
        return self._sp.decode_pieces([p for p in pieces if self._sp.piece_to_id(p) != unk])

    def save(self, path: str | os.PathLike) -> Path:
        """Write the model (SentencePiece's own format), whole or not at all; return the path."""
        with written_whole(path) as tmp:
            tmp.write_bytes(self.model)
        return Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Subwords:
        """Read a model written by :meth:`save` (or by SentencePiece itself)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no subword model at {str(path)!r}")
        try:
            return cls(path.read_bytes())
        except ValueError as err:
            raise ValueError(f"{str(path)!r} is {err}") from None

    def __repr__(self) -> str:
        return f"Subwords({len(self)} pieces)"
