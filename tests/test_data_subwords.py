"""Subword vocabularies (attnbook.data.subwords): SentencePiece's byte-pair encoding, and chapter 1's by hand.

Chapter 1 writes byte-pair encoding by hand (``learn_merges`` and ``segment``
in notebooks/01_data.ipynb); the command line learns its subwords with
SentencePiece. The first test runs the notebook's two functions, as the
notebook defines them, beside :class:`attnbook.data.subwords.Subwords` on the
same word counts and checks that both learn the same merges in the same order
and split words alike.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from attnbook.data import Vocab
from attnbook.data.subwords import Subwords, character_coverage

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01_data.ipynb"
#: Word counts whose pair frequencies never tie among the merges compared (ties may be broken either way).
WORDS = {"lower": 9, "lowest": 4, "newer": 13, "wider": 6, "new": 3, "widest": 1}
#: Chapter 1 marks a word's end with the symbol "</w>"; SentencePiece sees this letter there instead (a letter, since
#: SentencePiece never merges across scripts, and "#" would be punctuation). No word of WORDS holds it.
END = "z"


def chapter_1_bpe():
    """``learn_merges`` and ``segment`` exactly as chapter 1's notebook defines them."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    source = next("".join(c["source"]) for c in cells if "def learn_merges" in "".join(c["source"]))
    definitions = source[: source.index("\nfrench_words")]  # the two functions, not the cell's experiment
    namespace = {"collections": collections}
    exec(definitions, namespace)
    return namespace["learn_merges"], namespace["segment"]


def test_sentencepiece_learns_the_merges_of_chapter_1():
    learn_merges, segment = chapter_1_bpe()
    n_merges = 8
    by_hand = learn_merges(WORDS, n_merges)
    text = [word + END for word, n in WORDS.items() for _ in range(n)]
    characters = len(set("".join(text)) | {"\u2581"})  # the space symbol is always one
    # <unk>, 256 bytes, the characters and the merges: a vocabulary this size stops after n_merges merges
    learned = Subwords.learn(text, 1 + 256 + characters + n_merges, space_first=False)
    assert learned.merges == ["".join(pair).replace("</w>", END) for pair in by_hand]
    # and the merges split words alike, known or not
    for word in ("lowest", "newest", "widen", "slowest"):
        assert learned.encode(word + END) == [s.replace("</w>", END) for s in segment(word, by_hand)]


ENGLISH = ["Where is the station?", "I like tea.", "Tom lives in Paris.", "The station is near."] * 20
CHINESE = ["车站在哪里？", "我喜欢茶。", "汤姆住在巴黎。", "车站很近。"] * 20


@pytest.mark.parametrize(("sentences", "lang"), [(ENGLISH, "en"), (CHINESE, "zh")])
def test_no_input_is_unknown_and_decoding_gives_the_text_back(sentences, lang):
    subwords = Subwords.learn(sentences, 320, languages=(lang,))
    vocab = subwords.vocab()
    for text in [*sentences[:4], "Xylophones cost 3.5€ in Zürich!", "龘𠀀 naïve ☃"]:
        pieces = subwords.encode(text)
        assert vocab.unk_id not in vocab.encode(pieces), f"{text!r} has a piece the vocabulary lacks: {pieces}"
        assert subwords.decode(pieces) == text
    if lang == "zh":  # written without spaces: no space symbol before a sentence
        assert not subwords.encode("我喜欢茶。")[0].startswith("\u2581")


def test_bpe_dropout_splits_words_in_the_ways_their_merges_allow_and_repeats_with_its_seed():
    subwords = Subwords.learn(ENGLISH, 320)
    vocab, texts = subwords.vocab(), ENGLISH[:4] * 25
    first = subwords.sample(texts, 0.3, seed=7)
    assert first == subwords.sample(texts, 0.3, seed=7)  # the same seed, the same splits
    assert first != subwords.sample(texts, 0.3, seed=8)
    assert subwords.sample(texts, 0.0, seed=7) == [subwords.encode(t) for t in texts]
    usual = [subwords.encode(t) for t in texts]
    for text, pieces, whole in zip(texts, first, usual):
        assert subwords.decode(pieces) == text and vocab.unk_id not in vocab.encode(pieces)
        assert len(pieces) >= len(whole)  # merges left out: as many pieces or more, never fewer
    assert sum(p != w for p, w in zip(first, usual)) > len(texts) // 4  # about one merge in three is left out
    assert len({tuple(p) for p, t in zip(first, texts) if t == "Where is the station?"}) > 3
    with pytest.raises(ValueError, match=r"dropout of merges must be in \[0, 1\), got 1"):
        subwords.sample(texts, 1.0, seed=0)


def test_the_vocabulary_holds_the_reserved_tokens_then_every_piece(tmp_path):
    subwords = Subwords.learn(ENGLISH, 300)
    vocab = subwords.vocab()
    assert vocab.tokens[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert len(vocab) == len(subwords) + 3  # SentencePiece's own <unk> is the course's
    assert "<0x41>" in vocab  # the bytes
    path = subwords.save(tmp_path / "m.model")
    again = Subwords.load(path)
    assert again.vocab() == vocab and again.encode("I like tea.") == subwords.encode("I like tea.")
    assert character_coverage(["en", "fr"]) == 1.0 and character_coverage(["en", "zh"]) < 1.0


def test_bad_models_and_sizes_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no subword model"):
        Subwords.load(tmp_path / "missing.model")
    (tmp_path / "bad.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        Subwords.load(tmp_path / "bad.model")
    with pytest.raises(ValueError, match="more than 257 pieces"):
        Subwords.learn(ENGLISH, 100)
    assert isinstance(Subwords.learn(ENGLISH, 300).vocab(), Vocab)
    # Chinese text of 400 characters, each seen often: every one must be a piece, so 300 pieces cannot hold them
    chinese = ["".join(chr(0x4E00 + (7 * i + k) % 400) for k in range(12)) for i in range(800)]
    with pytest.raises(
        ValueError, match=r"^([\d,]+) pieces are needed for the characters of the zh text and the 256 bytes"
    ) as err:
        Subwords.learn(chinese, 300, ("zh",), characters=True)
    needed = int(err.value.args[0].split()[0].replace(",", ""))
    assert 400 + 256 < needed < 400 + 256 + 8 and f"more than the 300 asked for: ask for at least {needed}" in str(
        err.value
    )
    assert len(Subwords.learn(chinese, needed, ("zh",), characters=True)) >= needed
