"""The tokens of a run: subword pieces learned with SentencePiece (the default), or chapter 1's words.

``--tokens subwords`` learns byte-pair pieces from the training pairs with
:class:`attnbook.data.Subwords`: one model for both languages
(``--vocab shared``) or one each (``--vocab separate``; ``auto``, the default,
shares when both languages are written in the same script). A piece keeps
its case and a space is a symbol of its own, so a translation is decoded
into text as written, and no input is ever ``<unk>`` (a character without a
piece is spelled as its bytes). ``--tokens words`` is chapter 1's tokenizer:
lower-case words (one character each for Chinese and Japanese), a vocabulary
of the words seen ``--min-freq`` times, and a table that gives translations
their capitals back (:mod:`~attnbook.translate.truecase`).

:class:`RunTokens` is what the rest of the command line sees: sentences in,
tokens out (:meth:`~RunTokens.source`, :meth:`~RunTokens.pairs`), tokens back
to text (:meth:`~RunTokens.text`), and the run folder's files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..data import SCRIPT_OF, Pair, Subwords, Vocab, tokenize
from ..data.subwords import CHARACTER_LANGUAGES
from ..files import write_json
from .console import CommandError, Console
from .settings import TOKEN_KINDS, VOCAB_SHARING  # declared with the options: the command line reads them
from .truecase import build_truecase, to_text

__all__ = [
    "TOKEN_KINDS",
    "VOCAB_SHARING",
    "SUBWORDS_FILE",
    "SRC_SUBWORDS_FILE",
    "TGT_SUBWORDS_FILE",
    "TRUECASE_FILE",
    "RunTokens",
    "shares_vocabulary",
]

SUBWORDS_FILE, SRC_SUBWORDS_FILE, TGT_SUBWORDS_FILE = "subwords.model", "subwords.src.model", "subwords.tgt.model"
TRUECASE_FILE = "truecase.json"


def shares_vocabulary(sharing: str, src: str, tgt: str) -> bool:
    """Whether a run learns one subword model for both languages: ``auto`` when they share a script."""
    if sharing != "auto":
        return sharing == "shared"
    script = {lang: SCRIPT_OF.get(lang, ("Latin script", ""))[0] for lang in (src, tgt)}
    return script[src] == script[tgt]


@dataclass
class RunTokens:
    """How a run turns sentences into tokens and translations back into text."""

    kind: str
    src_lang: str
    tgt_lang: str
    src_subwords: Subwords | None = None
    tgt_subwords: Subwords | None = None  # the same object as src_subwords when the vocabulary is shared
    truecase: dict[str, str] = field(default_factory=dict)

    @property
    def shared(self) -> bool:
        return self.src_subwords is not None and self.src_subwords is self.tgt_subwords

    # -- learning them from the training pairs --
    @classmethod
    def learn(cls, train_pairs: Sequence[Pair], settings, src: str, tgt: str) -> RunTokens:
        """The tokens of a new run, learned from its training pairs (``settings``: the run's settings)."""
        if settings.tokens == "words":
            return cls("words", src, tgt, truecase=build_truecase(train_pairs))
        size = settings.pieces
        try:
            if shares_vocabulary(settings.vocab, src, tgt):
                text = [p.src for p in train_pairs] + [p.tgt for p in train_pairs]
                shared = Subwords.learn(text, size, (src, tgt), seed=settings.seed)
                return cls("subwords", src, tgt, shared, shared)
            src_model = Subwords.learn(
                [p.src for p in train_pairs], size, (src,), seed=settings.seed, characters=src in CHARACTER_LANGUAGES
            )
            tgt_model = Subwords.learn(
                [p.tgt for p in train_pairs], size, (tgt,), seed=settings.seed, characters=tgt in CHARACTER_LANGUAGES
            )
        except ValueError as err:
            raise CommandError(f"--pieces {size}: {err}") from None
        return cls("subwords", src, tgt, src_model, tgt_model)

    def vocabularies(self, train_pairs: Sequence[Pair], settings) -> tuple[Vocab, Vocab]:
        """The source and target vocabularies: every piece, or the words of the (tokenized) training pairs."""
        if self.kind == "subwords":
            return self.src_subwords.vocab(), self.tgt_subwords.vocab()
        src = Vocab.build((p.src_tok for p in train_pairs), min_freq=settings.min_freq, max_size=settings.max_vocab)
        tgt = Vocab.build((p.tgt_tok for p in train_pairs), min_freq=settings.min_freq, max_size=settings.max_vocab)
        return src, tgt

    def describe(self) -> str:
        if self.kind == "words":
            return "words"
        return "subwords (one SentencePiece model for both languages)" if self.shared else "subwords (a model each)"

    # -- using them --
    def source(self, text: str) -> list[str]:
        """The tokens of a source sentence."""
        return self.src_subwords.encode(text) if self.kind == "subwords" else tokenize(text, self.src_lang)

    def pairs(self, pairs: Sequence[Pair]) -> list[Pair]:
        """The pairs with this run's tokens (pairs are read with chapter 1's words)."""
        if self.kind == "words":
            return list(pairs)
        src, tgt = self.src_subwords, self.tgt_subwords
        return [
            Pair(
                p.src, p.tgt, None, p.src_lang, p.tgt_lang, p.attribution, tokens=(src.encode(p.src), tgt.encode(p.tgt))
            )
            for p in pairs
        ]

    def text(self, tokens: Sequence[str]) -> str:
        """A translation's tokens as text in the target language."""
        if self.kind == "subwords":
            return self.tgt_subwords.decode(tokens)
        return to_text(tokens, self.tgt_lang, self.truecase)

    def unknown(self, tokens: Sequence[str], vocab: Vocab) -> list[str]:
        """The tokens of a sentence that ``vocab`` does not hold (never any, with subwords)."""
        return [t for t in dict.fromkeys(tokens) if t not in vocab]

    # -- the run folder --
    def config(self) -> dict:
        """What ``config.json`` records about the tokens."""
        files = {
            "words": [TRUECASE_FILE],
            "subwords": [SUBWORDS_FILE] if self.shared else [SRC_SUBWORDS_FILE, TGT_SUBWORDS_FILE],
        }
        return {"kind": self.kind, "shared": self.shared, "files": files[self.kind]}

    def save(self, folder: Path) -> None:
        """Write the subword models, or the table of spellings, into the run folder."""
        if self.kind == "words":
            write_json(folder / TRUECASE_FILE, self.truecase)
        elif self.shared:
            self.src_subwords.save(folder / SUBWORDS_FILE)
        else:
            self.src_subwords.save(folder / SRC_SUBWORDS_FILE)
            self.tgt_subwords.save(folder / TGT_SUBWORDS_FILE)

    @classmethod
    def load(cls, folder: Path, config: dict, console: Console) -> RunTokens:
        """The tokens of a trained run (a run without a ``tokens`` entry predates subwords: words)."""
        src, tgt = config["src_lang"], config["tgt_lang"]
        stored = config.get("tokens") or {"kind": "words", "shared": False}
        if stored.get("kind") == "words":
            return cls("words", src, tgt, truecase=_read_truecase(folder, console))
        names = [SUBWORDS_FILE] if stored.get("shared") else [SRC_SUBWORDS_FILE, TGT_SUBWORDS_FILE]
        models = []
        for name in names:
            try:
                models.append(Subwords.load(folder / name))
            except FileNotFoundError:
                raise CommandError(
                    f"{str(folder)!r} was trained on subwords, but its subword model {name} is missing: "
                    "copy the whole run folder, or train again"
                ) from None
            except ValueError as err:
                raise CommandError(f"the subword model of {str(folder)!r} is damaged: {err}") from None
        return cls("subwords", src, tgt, models[0], models[-1])


def _read_truecase(folder: Path, console: Console) -> dict[str, str]:
    path = folder / TRUECASE_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        console.note(f"{TRUECASE_FILE} is damaged: translations stay in lower case")
        return {}
