"""Tokens and vocabularies: the tokenizer in several languages, detokenize, Vocab and its errors."""

from __future__ import annotations

import json
import random

import pytest
import torch

from attnbook.data import BOS, EOS, PAD, SPECIALS, UNK, Vocab, detokenize, language, tokenize


@pytest.mark.parametrize(
    "text, lang, tokens",
    [
        (
            "L'homme qu'elle a vu n'est pas là.",
            "fr",
            ["l'", "homme", "qu'", "elle", "a", "vu", "n'", "est", "pas", "là", "."],
        ),
        (
            "J’ai vu l’école d’été !",
            "fr",
            ["j'", "ai", "vu", "l'", "école", "d'", "été", "!"],
        ),  # typographic apostrophes
        ("Aujourd'hui, c'est jusqu'à demain.", "fr", ["aujourd'hui", ",", "c'", "est", "jusqu'", "à", "demain", "."]),
        ("Est-ce qu'il vient\u202f?", "fr", ["est-ce", "qu'", "il", "vient", "?"]),  # narrow no-break space
        ("Quelqu'un a dit « oui ».", "fr", ["quelqu'un", "a", "dit", "«", "oui", "»", "."]),
        ("I don't know, Tom's right!", "en", ["i", "do", "n't", "know", ",", "tom", "'s", "right", "!"]),
        ("It costs 3.50 dollars.", "en", ["it", "costs", "3.50", "dollars", "."]),
        ("我们走吧。", "zh", ["我", "们", "走", "吧", "。"]),
        ("你好, Tom!", "cmn", ["你", "好", ",", "tom", "!"]),
        ("日本語です。", "ja", ["日", "本", "語", "で", "す", "。"]),
        ("สวัสดีครับ", "th", ["ส", "วั", "ส", "ดี", "ค", "รั", "บ"]),  # vowel marks stay on their consonant
        ("नमस्ते दुनिया", "hi", ["नमस्ते", "दुनिया"]),  # Devanagari vowel signs are part of the word
        ("Ich heiße Anna.", "de", ["ich", "heiße", "anna", "."]),
        ("L'amico dell'uomo", "it", ["l'", "amico", "dell'", "uomo"]),
        ("Привет, мир!", "ru", ["привет", ",", "мир", "!"]),
        ("", "en", []),
    ],
)
def test_tokenize(text, lang, tokens):
    assert tokenize(text, lang) == tokens


def test_french_elision_is_its_own_token_but_not_in_english():
    assert tokenize("l'eau", "fr") == ["l'", "eau"]
    assert tokenize("l'eau", "en") == ["l'eau"]


@pytest.mark.parametrize(
    "tokens, lang, text",
    [
        (["l'", "homme", "ne", "dort", "pas", "."], "fr", "L'homme ne dort pas."),
        (["est-ce", "qu'", "il", "vient", "?"], "fr", "Est-ce qu'il vient ?"),
        (["i", "do", "n't", "know", ",", "tom", "'s", "right", "!"], "en", "I don't know, tom's right!"),
        (["我", "们", "走", "吧", "。"], "zh", "我们走吧。"),
        (["«", "oui", "»", "."], "fr", "« Oui »."),
        ([], "fr", ""),
    ],
)
def test_detokenize(tokens, lang, text):
    assert detokenize(tokens, lang) == text


def test_detokenize_inverts_tokenize_on_random_texts():
    rng = random.Random(0)
    pools = {
        "fr": [
            "L'homme",
            "qu'il",
            "J'ai",
            "école",
            "Il",
            "elle",
            ",",
            ".",
            "?",
            "!",
            "aujourd'hui",
            "Est-ce",
            "«",
            "»",
            "3,5",
            "d'été",
        ],
        "en": ["I", "you", "don't", "Tom's", "apple", ",", ".", "!", "(", ")", "it's", "3.5", "can't"],
        "zh": ["我们", "走吧", "。", "，", "Tom", "好的", "!"],
    }
    for lang, pool in pools.items():
        for _ in range(300):
            text = "".join(rng.choice(pool) + rng.choice(["", " ", "  "]) for _ in range(rng.randint(1, 12)))
            tokens = tokenize(text, lang)
            assert tokenize(detokenize(tokens, lang), lang) == tokens, (lang, text, tokens, detokenize(tokens, lang))


def test_language_codes():
    assert language("fr") == language("fra") == language("FR") == language("fr-CA") == language("fr_FR") == "fr"
    assert language("cmn") == "zh" and language("eng") == "en"
    for bad in ("xx", "french", ""):
        with pytest.raises(ValueError, match="unknown language code"):
            tokenize("hello", bad)
    with pytest.raises(ValueError, match="unknown language code 'klingon'"):
        detokenize(["hello"], "klingon")
    with pytest.raises(TypeError, match="language code must be a string"):
        language(None)
    with pytest.raises(TypeError, match="expects a string"):
        tokenize(["already", "tokens"], "en")


# --- Vocab ------------------------------------------------------------------------------


SENTENCES = [["le", "chat", "dort", "."], ["le", "chien", "dort", "."], ["la", "souris", "mange", "."]]


def test_reserved_tokens_come_first_with_fixed_ids():
    vocab = Vocab.build(SENTENCES)
    assert SPECIALS == (PAD, BOS, EOS, UNK) == ("<pad>", "<bos>", "<eos>", "<unk>")
    assert [vocab[t] for t in SPECIALS] == [0, 1, 2, 3]
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2, 3)
    # most frequent first, ties alphabetical
    assert vocab.tokens[4:7] == [".", "dort", "le"]
    assert len(vocab) == 4 + 8


def test_encode_decode_roundtrip_and_unknown_tokens():
    vocab = Vocab.build(SENTENCES)
    ids = vocab.encode(["le", "chat", "vole", "."])
    assert ids[2] == vocab.unk_id and vocab["vole"] == 3 and "vole" not in vocab
    assert vocab.decode(ids) == ["le", "chat", "<unk>", "."]
    framed = vocab.encode(["le", "chat"], add_bos=True, add_eos=True)
    assert framed[0] == 1 and framed[-1] == 2
    assert vocab.decode(framed + [0, 0]) == ["le", "chat"]
    assert vocab.decode(framed + [vocab["dort"]]) == ["le", "chat"]  # stops at <eos>
    assert vocab.decode(framed, strip_special=False) == ["<bos>", "le", "chat", "<eos>"]
    assert vocab.decode(torch.tensor(framed)) == ["le", "chat"]
    assert vocab.token(vocab["chat"]) == "chat" and vocab.token(torch.tensor(5)) == vocab.tokens[5]


def test_min_freq_and_max_size():
    vocab = Vocab.build(SENTENCES, min_freq=2)
    assert vocab.tokens[4:] == [".", "dort", "le"]
    assert len(Vocab.build(SENTENCES, max_size=6)) == 6


def test_out_of_range_ids_are_named():
    vocab = Vocab.build(SENTENCES)
    n = len(vocab)
    with pytest.raises(
        IndexError, match=rf"token id {n} is out of range for this vocabulary of {n} tokens \(valid ids: 0 to {n - 1}\)"
    ):
        vocab.token(n)
    with pytest.raises(IndexError, match="token id -1 is out of range"):
        vocab.token(-1)
    with pytest.raises(IndexError, match="out of range"):
        vocab.decode([4, 5, 999])
    with pytest.raises(TypeError, match="must be an integer"):
        vocab.token("chat")
    with pytest.raises(TypeError, match="looks up a token"):
        vocab[5]
    with pytest.raises(TypeError, match="tokenize first"):
        vocab.encode("le chat")
    with pytest.raises(ValueError, match="one sequence"):
        vocab.decode([[4, 5]])


def test_empty_corpus_and_bad_arguments():
    with pytest.raises(ValueError, match="empty corpus"):
        Vocab.build([])
    with pytest.raises(ValueError, match="empty corpus"):
        Vocab.build([[], []])
    with pytest.raises(ValueError, match="min_freq"):
        Vocab.build(SENTENCES, min_freq=0)
    with pytest.raises(TypeError, match="tokenized sentences"):
        Vocab.build(["le chat dort"])


def test_save_and_load(tmp_path):
    vocab = Vocab.build(SENTENCES + [["l'", "été", "à", "Noël", "你好"]])
    path = vocab.save(tmp_path / "vocab.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["tokens"][:4] == list(SPECIALS) and "été" in path.read_text(encoding="utf-8")
    loaded = Vocab.load(path)
    assert loaded == vocab and loaded.encode(["été", "你好"]) == vocab.encode(["été", "你好"])
    assert not list(tmp_path.glob("*.tmp"))


def test_load_names_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="no vocabulary file"):
        Vocab.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a vocabulary JSON file"):
        Vocab.load(bad)
    bad.write_text(json.dumps({"tokens": ["a"]}))
    with pytest.raises(ValueError, match="saved by Vocab.save"):
        Vocab.load(bad)
    bad.write_text(
        json.dumps({"format": "attnbook.Vocab", "version": 1, "tokens": ["<unk>", "<pad>", "<bos>", "<eos>", "a"]})
    )
    with pytest.raises(ValueError, match="must start with <pad>"):
        Vocab.load(bad)
    bad.write_text(json.dumps({"format": "attnbook.Vocab", "version": 1, "tokens": [*SPECIALS, "a", "a"]}))
    with pytest.raises(ValueError, match="twice"):
        Vocab.load(bad)
