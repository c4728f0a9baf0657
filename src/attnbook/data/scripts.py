"""Scripts: is a column of sentences in the language it is said to be in?

An Anki file from manythings.org holds English in its first column and the
other language in its second; a reader who means to translate into English
has to say so (``reverse=True``), and a file from elsewhere may hold its
columns in either order. Swapped columns train a model without complaint, and
the mistake shows only hours later, in the translations. :func:`check_columns`
catches it from a sample of the file, where it can be told reliably:

- a language written in a script of its own (Chinese, Japanese, Korean,
  Cyrillic, Greek, Arabic, the scripts of India and South-East Asia, ...)
  must show that script in its column, and more often than the other column
  does (:data:`SCRIPT_OF`);
- English, the language every Anki file holds, shows its frequent words
  ("the", "you", "what", ...) in its column, and far more often than the other
  language does.

Latin-script languages other than English are not told apart: German and
Dutch, French and Spanish share too much.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .text import LANGUAGES

__all__ = ["SCRIPT_OF", "check_columns"]

# The characters that only one script uses.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = "\u3040-\u30ff"
_CYRILLIC = "\u0400-\u04ff"
_ARABIC = "\u0600-\u06ff\u0750-\u077f"
_DEVANAGARI = "\u0900-\u097f"

#: For each language written in a script of its own: the script's name and its characters (a regex class).
SCRIPT_OF: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("zh", "yue"), ("Chinese characters", _CJK)),
    "ja": ("Japanese script", _KANA + "\u3400-\u4dbf\u4e00-\u9fff"),
    "ko": ("Hangul", "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"),
    **dict.fromkeys(
        ("ru", "uk", "bg", "mk", "be", "kk", "ky", "mn", "tt", "tg", "chv", "bak"), ("Cyrillic", _CYRILLIC)
    ),
    "el": ("Greek", "\u0370-\u03ff\u1f00-\u1fff"),
    "he": ("Hebrew", "\u0590-\u05ff"),
    **dict.fromkeys(("ar", "fa", "ur", "ps", "ug"), ("Arabic script", _ARABIC)),
    **dict.fromkeys(("hi", "mr", "ne"), ("Devanagari", _DEVANAGARI)),
    "bn": ("Bengali script", "\u0980-\u09ff"),
    "pa": ("Gurmukhi", "\u0a00-\u0a7f"),
    "gu": ("Gujarati script", "\u0a80-\u0aff"),
    "ta": ("Tamil script", "\u0b80-\u0bff"),
    "te": ("Telugu script", "\u0c00-\u0c7f"),
    "kn": ("Kannada script", "\u0c80-\u0cff"),
    "ml": ("Malayalam script", "\u0d00-\u0d7f"),
    "si": ("Sinhala script", "\u0d80-\u0dff"),
    "th": ("Thai script", "\u0e00-\u0e7f"),
    "lo": ("Lao script", "\u0e80-\u0eff"),
    "my": ("Myanmar script", "\u1000-\u109f"),
    "km": ("Khmer script", "\u1780-\u17ff"),
    "ka": ("Georgian script", "\u10a0-\u10ff"),
    "hy": ("Armenian script", "\u0530-\u058f"),
    "am": ("Ethiopic", "\u1200-\u137f"),
}
# Words frequent in English and (nearly) absent from the other languages of Tatoeba's Anki files.
_ENGLISH = re.compile(r"\b(?:the|you|your|what|this|that|it|i'm|don't|have|are|there)\b")


def _share(sentences: Sequence[str], test: Callable[[str], bool]) -> float:
    return sum(1 for s in sentences if test(s)) / max(1, len(sentences))


def check_columns(first: Sequence[str], second: Sequence[str], lang1: str, lang2: str) -> None:
    """Raise a ``ValueError`` when two columns of sentences look like ``lang1`` and ``lang2`` the other way round.

    ``first`` and ``second`` are samples of the columns (a few thousand
    sentences are plenty), said to be in ``lang1`` and ``lang2``. The message
    names the column at fault and what it holds instead.
    """
    columns = {1: (first, lang1), 2: (second, lang2)}
    for i, (sentences, lang) in columns.items():
        other, other_lang = columns[3 - i]
        if lang in SCRIPT_OF:
            name, chars = SCRIPT_OF[lang]
            pattern = re.compile(f"[{chars}]")
            own = _share(sentences, lambda s, pattern=pattern: bool(pattern.search(s)))
            theirs = _share(other, lambda s, pattern=pattern: bool(pattern.search(s)))
            if own < 0.5 <= theirs:
                raise ValueError(
                    f"column {i} of the pairs file holds no {name}, but column {3 - i} does: "
                    f"it is not {LANGUAGES[lang]} ({lang})"
                )
        elif lang == "en" and other_lang != "en":
            own = _share(sentences, lambda s: bool(_ENGLISH.search(s.lower())))
            theirs = _share(other, lambda s: bool(_ENGLISH.search(s.lower())))
            if theirs >= 0.3 and own < 0.5 * theirs:
                raise ValueError(f"column {3 - i} of the pairs file looks like English, not column {i}")
