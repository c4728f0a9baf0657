"""Tokens and vocabularies: from a sentence to a list of integer ids and back.

A model sees integers, not words. This module turns text into tokens
(:func:`tokenize`), tokens back into readable text (:func:`detokenize`), and
tokens into ids with a :class:`Vocab` that reserves four ids, the same in every
vocabulary of the course:

====  ===========  ==================================================
 id   token        meaning
====  ===========  ==================================================
 0    ``<pad>``    fills the end of shorter sentences in a batch
 1    ``<bos>``    *beginning of sentence*: the decoder's first input
 2    ``<eos>``    *end of sentence*: the decoder's last target
 3    ``<unk>``    any token the vocabulary does not know
====  ===========  ==================================================

The tokenizer lower-cases, splits punctuation into tokens of their own, keeps
French (and Italian, Catalan) elided articles and pronouns such as ``l'`` and
``qu'`` as tokens of their own, splits English clitics (``n't``, ``'s``) the
way the Penn Treebank does, and splits scripts written without spaces
(Chinese, Japanese, Thai, ...) into one token per character.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..files import write_json

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "SPECIALS",
    "LANGUAGES",
    "language",
    "tokenize",
    "detokenize",
    "Vocab",
]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
#: The reserved tokens, in id order: ``<pad>`` is 0, ``<bos>`` 1, ``<eos>`` 2, ``<unk>`` 3.
SPECIALS = (PAD, BOS, EOS, UNK)

# --- Languages -------------------------------------------------------------------

#: The language codes the tokenizer knows: ISO 639-1 codes with their names.
LANGUAGES: dict[str, str] = {
    "ar": "Arabic", "bg": "Bulgarian", "bn": "Bengali", "ca": "Catalan", "cs": "Czech",
    "da": "Danish", "de": "German", "el": "Greek", "en": "English", "eo": "Esperanto",
    "es": "Spanish", "et": "Estonian", "eu": "Basque", "fa": "Persian", "fi": "Finnish",
    "fr": "French", "ga": "Irish", "gl": "Galician", "he": "Hebrew", "hi": "Hindi",
    "hr": "Croatian", "hu": "Hungarian", "hy": "Armenian", "id": "Indonesian", "is": "Icelandic",
    "it": "Italian", "ja": "Japanese", "ka": "Georgian", "km": "Khmer", "ko": "Korean",
    "lo": "Lao", "lt": "Lithuanian", "lv": "Latvian", "mk": "Macedonian", "mr": "Marathi",
    "ms": "Malay", "my": "Burmese", "nb": "Norwegian Bokmål", "nl": "Dutch", "no": "Norwegian",
    "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak",
    "sl": "Slovenian", "sq": "Albanian", "sr": "Serbian", "sv": "Swedish", "sw": "Swahili",
    "ta": "Tamil", "th": "Thai", "tl": "Tagalog", "tr": "Turkish", "uk": "Ukrainian",
    "ur": "Urdu", "vi": "Vietnamese", "yue": "Cantonese", "zh": "Chinese",
}  # fmt: skip

# Tatoeba and the Anki files name languages with ISO 639-3 codes; map the common ones.
_ALIASES = {
    "ara": "ar", "bul": "bg", "ben": "bn", "cat": "ca", "ces": "cs", "cze": "cs", "dan": "da",
    "deu": "de", "ger": "de", "ell": "el", "gre": "el", "eng": "en", "epo": "eo", "spa": "es",
    "est": "et", "eus": "eu", "fas": "fa", "pes": "fa", "fin": "fi", "fra": "fr", "fre": "fr",
    "gle": "ga", "glg": "gl", "heb": "he", "hin": "hi", "hrv": "hr", "hun": "hu", "hye": "hy",
    "ind": "id", "isl": "is", "ita": "it", "jpn": "ja", "kat": "ka", "khm": "km", "kor": "ko",
    "lao": "lo", "lit": "lt", "lvs": "lv", "lav": "lv", "mkd": "mk", "mar": "mr", "zsm": "ms",
    "msa": "ms", "mya": "my", "nob": "nb", "nld": "nl", "dut": "nl", "nor": "no", "pol": "pl",
    "por": "pt", "ron": "ro", "rum": "ro", "rus": "ru", "slk": "sk", "slv": "sl", "sqi": "sq",
    "srp": "sr", "swe": "sv", "swh": "sw", "swa": "sw", "tam": "ta", "tha": "th", "tgl": "tl",
    "tur": "tr", "ukr": "uk", "urd": "ur", "vie": "vi", "cmn": "zh", "zho": "zh", "chi": "zh",
    "wuu": "zh",
}  # fmt: skip


# More languages of Tatoeba's Anki files, so that any of them can be read (the tokenizer treats them
# all alike: words, punctuation, and one token per character for scripts written without spaces).
LANGUAGES.update({
    "af": "Afrikaans", "am": "Amharic", "az": "Azerbaijani", "be": "Belarusian", "br": "Breton",
    "cy": "Welsh", "fo": "Faroese", "fy": "Frisian", "gd": "Scottish Gaelic", "gu": "Gujarati",
    "ha": "Hausa", "ia": "Interlingua", "io": "Ido", "jv": "Javanese", "kk": "Kazakh", "kn": "Kannada",
    "ku": "Kurdish", "ky": "Kyrgyz", "la": "Latin", "lb": "Luxembourgish", "ml": "Malayalam",
    "mn": "Mongolian", "mt": "Maltese", "ne": "Nepali", "oc": "Occitan", "pa": "Punjabi", "ps": "Pashto",
    "si": "Sinhala", "so": "Somali", "te": "Telugu", "tg": "Tajik", "tk": "Turkmen", "tt": "Tatar",
    "ug": "Uyghur", "uz": "Uzbek", "xh": "Xhosa", "yo": "Yoruba", "zu": "Zulu",
    "ber": "Berber", "kab": "Kabyle", "jbo": "Lojban", "tok": "Toki Pona", "lfn": "Lingua Franca Nova",
    "chv": "Chuvash", "bak": "Bashkir",
})  # fmt: skip
_ALIASES.update({
    "afr": "af", "amh": "am", "aze": "az", "azj": "az", "bel": "be", "bre": "br", "cym": "cy", "wel": "cy",
    "fao": "fo", "fry": "fy", "gla": "gd", "guj": "gu", "hau": "ha", "ina": "ia", "ido": "io", "jav": "jv",
    "kaz": "kk", "kan": "kn", "kur": "ku", "kmr": "ku", "kir": "ky", "lat": "la", "ltz": "lb", "mal": "ml",
    "mon": "mn", "khk": "mn", "mlt": "mt", "nep": "ne", "npi": "ne", "oci": "oc", "pan": "pa", "pus": "ps",
    "sin": "si", "som": "so", "tel": "te", "tgk": "tg", "tuk": "tk", "tat": "tt", "uig": "ug", "uzb": "uz",
    "uzn": "uz", "xho": "xh", "yor": "yo", "zul": "zu",
})  # fmt: skip


def language(code: str) -> str:
    """The canonical code of a language: ``"fra"``, ``"FR"`` and ``"fr-CA"`` are all ``"fr"``.

    Raises ``ValueError`` naming the code when it is unknown.
    """
    if not isinstance(code, str):
        raise TypeError(f"a language code must be a string such as 'en' or 'fr', got {type(code).__name__}")
    key = code.strip().lower().replace("_", "-").split("-")[0]
    key = _ALIASES.get(key, key)
    if key not in LANGUAGES:
        raise ValueError(
            f"unknown language code {code!r}: use an ISO 639-1 code such as 'en', 'fr', 'zh' "
            f"(or its ISO 639-3 form such as 'eng', 'fra', 'cmn'); known: {', '.join(sorted(LANGUAGES))}"
        )
    return key


# Words cut short before a vowel and written with an apostrophe: kept as tokens of their own.
_ELISIONS = {
    "fr": frozenset("l' j' n' qu' d' c' m' t' s' ç' jusqu' lorsqu' puisqu' quoiqu'".split()),
    "it": frozenset("l' un' dell' all' dall' nell' sull' coll' d' c' m' t' s' v' quest' quell' bell' sant'".split()),
    "ca": frozenset("l' d' m' t' s' n'".split()),
}
# English clitics split off the word they lean on, as in the Penn Treebank.
_EN_CLITICS = ("n't", "'s", "'re", "'ve", "'ll", "'d", "'m")

# --- The tokenizer -----------------------------------------------------------------


def _ranges(codepoints: Iterable[int]) -> str:
    """A regex character-class body for a sorted set of code points."""
    points = sorted(codepoints)
    parts, start = [], None
    for i, cp in enumerate(points):
        if start is None:
            start = cp
        if i + 1 == len(points) or points[i + 1] != cp + 1:
            parts.append(re.escape(chr(start)) if start == cp else f"{re.escape(chr(start))}-{re.escape(chr(cp))}")
            start = None
    return "".join(parts)


# Scripts written without spaces between words: one token per character.
_UNSPACED = (
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u31f0-\u31ff"  # Katakana extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana
    "\U00020000-\U0003134f"  # CJK extensions B to G
)
# Combining marks (accents, Indic vowel signs, ...): they belong to the letter before them.
_MARKS = _ranges(c for c in range(0x10000) if unicodedata.category(chr(c)) in ("Mn", "Mc", "Me"))
_LETTER = rf"(?:(?![{_UNSPACED}])[^\W_])"
_WORD_PART = rf"{_LETTER}(?:{_LETTER}|[{_MARKS}])*"
_TOKEN = re.compile(
    rf"[{_UNSPACED}][{_MARKS}]*"  # one character of an unspaced script, with its marks
    rf"|\d+(?:[.,]\d+)+"  # a number with separators: 3.5, 1,000
    rf"|{_WORD_PART}(?:['\-]{_WORD_PART})*"  # a word, with inner apostrophes and hyphens
    r"|\S"  # anything else: one punctuation mark or symbol
)
_UNSPACED_CHAR = re.compile(rf"[{_UNSPACED}]")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "\uff07": "'"})
_SPACES = re.compile(r"[\u00a0\u2000-\u200b\u202f\u205f\u3000\ufeff]")


def _split_elision(word: str, elided: frozenset[str]) -> list[str]:
    tokens = []
    while True:
        cut = word.find("'")
        if cut <= 0 or word[: cut + 1] not in elided or cut + 1 == len(word):
            tokens.append(word)
            return tokens
        tokens.append(word[: cut + 1])
        word = word[cut + 1 :]


def _split_clitic(word: str) -> list[str]:
    for clitic in _EN_CLITICS:
        if word.endswith(clitic) and len(word) > len(clitic):
            return [word[: -len(clitic)], clitic]
    return [word]


def tokenize(text: str, lang: str) -> list[str]:
    """Split ``text`` in language ``lang`` into lower-case tokens.

    >>> tokenize("L'homme qu'elle a vu n'est pas là.", "fr")
    ["l'", 'homme', "qu'", 'elle', 'a', 'vu', "n'", 'est', 'pas', 'là', '.']
    >>> tokenize("I don't know, Tom's right!", "en")
    ['i', 'do', "n't", 'know', ',', 'tom', "'s", 'right', '!']
    >>> tokenize("我们走吧。", "zh")
    ['我', '们', '走', '吧', '。']
    """
    code = language(lang)
    if not isinstance(text, str):
        raise TypeError(f"tokenize expects a string, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text).translate(_APOSTROPHES)
    text = _SPACES.sub(" ", text).lower()
    tokens = _TOKEN.findall(text)
    elided = _ELISIONS.get(code)
    if elided is not None:
        tokens = [piece for token in tokens for piece in (_split_elision(token, elided) if "'" in token else (token,))]
    elif code == "en":
        tokens = [piece for token in tokens for piece in (_split_clitic(token) if "'" in token else (token,))]
    return tokens


_NO_SPACE_BEFORE = frozenset(".,!?;:)]}%…»”。、，．！？；：）」』】》〉")
_NO_SPACE_AFTER = frozenset("([{«“「『【《〈¿¡")
_FRENCH_SPACED = frozenset("!?;:»")  # French typography: a space before these, and after «


def detokenize(tokens: Sequence[str], lang: str) -> str:
    """Join tokens into readable text, the inverse of :func:`tokenize` up to capitals.

    Punctuation sticks to the word before it (French puts a space before
    ``? ! ; :``), elided words and English clitics are re-attached, characters
    of unspaced scripts are not separated, and the first letter (and the
    English pronoun "I") is capitalized.

    >>> detokenize(["l'", "homme", "ne", "dort", "pas", "."], "fr")
    "L'homme ne dort pas."
    """
    code = language(lang)
    elided = _ELISIONS.get(code, frozenset())
    french, english = code == "fr", code == "en"
    out: list[str] = []
    prev = None
    prev_unspaced = False
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"detokenize expects string tokens, got {type(token).__name__}: {token!r}")
        unspaced = bool(token) and ord(token[0]) >= 0x0E00 and _UNSPACED_CHAR.match(token) is not None
        if english and token == "i":
            token = "I"
        if prev is not None:
            joined = (
                (token in _NO_SPACE_BEFORE and not (french and token in _FRENCH_SPACED))
                or (prev in _NO_SPACE_AFTER and not (french and prev == "«"))
                or prev in elided
                or (english and token in _EN_CLITICS)
                or (unspaced and prev_unspaced)
            )
            if not joined:
                out.append(" ")
        out.append(token)
        prev, prev_unspaced = token, unspaced
    text = "".join(out)
    for i, char in enumerate(text):
        if char.isalpha():
            return text[:i] + char.upper() + text[i + 1 :]
    return text


# --- The vocabulary ----------------------------------------------------------------


def read_json(path: Path, what: str):
    """The JSON value in the file at ``path``; a ValueError that says the file is not ``what`` when it holds none."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{str(path)!r} is not {what}: {err}") from None


class Vocab:
    """A two-way map between tokens and integer ids, with ``<pad> <bos> <eos> <unk>`` first.

    Build one from tokenized sentences with :meth:`Vocab.build`. Unknown tokens
    encode to ``unk_id`` (3); asking for an id outside ``0 .. len(vocab) - 1``
    raises an ``IndexError`` that says so.
    """

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, tokens: Iterable[str] = ()) -> None:
        itos = list(SPECIALS)
        stoi = {token: i for i, token in enumerate(itos)}
        for token in tokens:
            if not isinstance(token, str) or not token:
                raise ValueError(f"vocabulary tokens must be non-empty strings, got {token!r}")
            if token not in stoi:
                stoi[token] = len(itos)
                itos.append(token)
        self._itos = itos
        self._stoi = stoi

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None) -> "Vocab":
        """The vocabulary of tokenized ``sentences``: tokens seen at least ``min_freq`` times.

        Tokens are ordered by decreasing frequency, ties broken alphabetically,
        so the same sentences always give the same ids. ``max_size`` caps the
        size, the four reserved tokens included.
        """
        if isinstance(min_freq, bool) or not isinstance(min_freq, int) or min_freq < 1:
            raise ValueError(f"min_freq must be an integer >= 1, got {min_freq!r}")
        if max_size is not None and max_size < len(SPECIALS):
            raise ValueError(f"max_size must be at least {len(SPECIALS)} (the reserved tokens), got {max_size}")
        counts: Counter[str] = Counter()
        n_sentences = 0
        for sentence in sentences:
            if isinstance(sentence, str):
                raise TypeError(
                    "Vocab.build expects tokenized sentences (lists of tokens), got a string; call tokenize first"
                )
            counts.update(sentence)
            n_sentences += 1
        if n_sentences == 0 or not counts:
            raise ValueError("cannot build a vocabulary from an empty corpus: there are no tokens")
        for special in SPECIALS:
            counts.pop(special, None)
        kept = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        if max_size is not None:
            kept = kept[: max_size - len(SPECIALS)]
        return cls(kept)

    # -- lookups --
    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: object) -> bool:
        return token in self._stoi

    def __getitem__(self, token: str) -> int:
        """The id of ``token``; ``unk_id`` when it is unknown."""
        if not isinstance(token, str):
            raise TypeError(
                f"vocab[...] looks up a token (a string), got {type(token).__name__}; use vocab.token(i) for an id"
            )
        return self._stoi.get(token, self.unk_id)

    def __iter__(self):
        return iter(self._itos)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self._itos == other._itos

    def __hash__(self) -> int:
        return hash(tuple(self._itos))

    def __repr__(self) -> str:
        shown = " ".join(self._itos[:12])
        more = " ..." if len(self) > 12 else ""
        return f"Vocab({len(self)} tokens: {shown}{more})"

    @property
    def tokens(self) -> list[str]:
        """Every token, in id order (a copy)."""
        return list(self._itos)

    def token(self, i: int) -> str:
        """The token with id ``i``; an ``IndexError`` naming the valid range otherwise."""
        if isinstance(i, bool) or not isinstance(i, int):
            if hasattr(i, "item") and getattr(i, "ndim", 1) == 0:  # a 0-d tensor or NumPy scalar
                i = int(i.item())
            else:
                raise TypeError(f"a token id must be an integer, got {type(i).__name__}: {i!r}")
        if not 0 <= i < len(self._itos):
            raise IndexError(
                f"token id {i} is out of range for this vocabulary of "
                f"{len(self)} tokens (valid ids: 0 to {len(self) - 1})"
            )
        return self._itos[i]

    def encode(self, tokens: Sequence[str], add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """The ids of ``tokens`` (unknown tokens give ``unk_id``), optionally framed by ``<bos>``/``<eos>``."""
        if isinstance(tokens, str):
            raise TypeError("encode expects a list of tokens, got a string; call tokenize first")
        get, unk = self._stoi.get, self.unk_id
        ids = [get(t, unk) for t in tokens]
        if add_bos:
            ids.insert(0, self.bos_id)
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: Iterable[int], strip_special: bool = True) -> list[str]:
        """The tokens of ``ids`` (a list or a 1-D tensor).

        With ``strip_special`` (the default) decoding stops at the first
        ``<eos>`` and drops ``<pad>`` and ``<bos>``; ``<unk>`` is kept, since it
        stands for a word.
        """
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        out = []
        for i in ids:
            if isinstance(i, list):
                raise ValueError("decode expects one sequence of ids (1-D), got a nested list; decode each row")
            if strip_special:
                if i == self.eos_id:
                    break
                if i == self.pad_id or i == self.bos_id:
                    continue
            out.append(self.token(i))
        return out

    # -- files --
    def save(self, path: str | Path) -> Path:
        """Write the vocabulary as JSON (a list of tokens in id order); return the path."""
        return write_json(path, {"format": "attnbook.Vocab", "version": 1, "tokens": self._itos}, indent=0)

    @classmethod
    def load(cls, path: str | Path) -> "Vocab":
        """Read a vocabulary written by :meth:`save`."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no vocabulary file at {str(path)!r}")
        data = read_json(path, "a vocabulary JSON file")
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list) or data.get("format") != "attnbook.Vocab":
            raise ValueError(f"{str(path)!r} is not a vocabulary saved by Vocab.save (no 'format'/'tokens' entries)")
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"{str(path)!r}: a vocabulary must start with {', '.join(SPECIALS)}; got {tokens[:4]}")
        if len(set(tokens)) != len(tokens):
            raise ValueError(f"{str(path)!r}: the vocabulary lists a token twice")
        return cls(tokens[len(SPECIALS) :])
