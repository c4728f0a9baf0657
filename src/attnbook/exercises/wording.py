"""The words a checker prints, in the reader's language (:mod:`attnbook.language`).

Every message a checker prints is written once, in English, in the module that prints it:

- a :class:`Template` for each kind of sentence (a verdict, a requirement, what a comparison found), a named
  constant with ``{placeholders}``. Each placeholder has a *kind*: ``"text"`` (the default: a function's name, a
  number, code, a printout, kept as it is) or the kind of words that fill it, translated in turn: ``"case"``,
  ``"mistake"``, ``"explanation"``, ``"loop"`` (what a loop-free checker counts), ``"key"`` (a key of a result),
  or the kind of another group of templates (``"problem"``, ``"where"``, ``"requirement"``...);
- the checkers' own words, found in the registry of checkers at run time: each :class:`~.checking.Case`'s name,
  each :class:`~.checking.Mistake`'s name and explanation, the dimension of a ``loop_free`` checker; and
  :func:`words` marks the few others (a requirement's mistake, the keys of a result).

:func:`say` writes a template in the current language: in English exactly as written, byte for byte; in another
language from the catalogue compiled into this package (``messages.<locale>.json``, from
``locales/<locale>/LC_MESSAGES/exercises.po`` by ``python -m attnbook.book.edition build``), each placeholder
filled with its value translated by its kind. Whatever has no translation is printed as it is, in English.

:func:`translate` is the way back: an English message, as a notebook stores it, read against the templates and
words of its kind and written in the other language; ``None`` when some part of it is not known (the edition's
build then fails). :func:`templates` and :func:`marked` list what the modules wrote, for the catalogue
(:mod:`attnbook.book.feedback`, which adds the words of the checkers).
"""

from __future__ import annotations

import json
import string
import sys
from functools import cache
from pathlib import Path

__all__ = ["Template", "words", "english", "say", "translate", "templates", "marked", "placeholders", "LOCALES"]

#: The languages the checkers speak besides English, and the locale of each one's catalogue.
LOCALES = {"zh": "zh_CN"}
#: Kinds whose value is kept as it is when it is not one of the known words (an error raised by PyTorch, a key).
LENIENT = frozenset({"text", "error", "key"})

_HERE = Path(__file__).resolve().parent
_TEMPLATES: dict[str, list[Template]] = {}
_WORDS: dict[tuple[str, str], str] = {}  # (kind, English) -> the module that marked it


def placeholders(text: str) -> list[str]:
    """The names of the ``{placeholders}`` of a template, in order, repeats included."""
    return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]


class Template(str):
    """An English message with ``{placeholders}``: the string itself, its kind, and the kind of each placeholder.

    ``Template("✓ {name}: all {count} cases pass.", "verdict")``; ``Template("item {index} of {where}", "where",
    where="where")`` fills ``{where}`` with a message of kind ``"where"``. Made at import, registered by kind.
    """

    kind: str
    fields: dict[str, str]
    module: str

    def __new__(cls, english: str, kind: str, **fields: str) -> Template:
        self = super().__new__(cls, english)
        names = placeholders(english)
        for _, name, spec, conversion in string.Formatter().parse(english):
            if name is not None and (not name.isidentifier() or spec or conversion):
                raise ValueError(f"{english!r}: write {{{name}}} as a plain name, formatted by the caller")
        if set(fields) - set(names):
            raise ValueError(f"{english!r} has no placeholder {sorted(set(fields) - set(names))}")
        self.kind, self.fields = kind, dict(fields)
        self.module = sys._getframe(1).f_globals.get("__name__", "")
        _TEMPLATES.setdefault(kind, []).append(self)
        return self

    def __reduce__(self):  # copies of a template are the plain string
        return (str, (str(self),))


def words(text: str, kind: str) -> str:
    """Mark ``text`` as words of ``kind`` to translate (a mistake a requirement names, the key of a result)."""
    _WORDS.setdefault((kind, text), sys._getframe(1).f_globals.get("__name__", ""))
    return text


def english(template: Template, **values) -> str:
    """The template filled in, in English (what the checker printed before it spoke other languages)."""
    return str.format(template, **values)


def say(template: Template, **values) -> str:
    """The template filled in, in the current language; English when the catalogue lacks it."""
    from attnbook.language import current

    text = english(template, **values)
    language = current()
    if language == "en":
        return text
    table = catalogue(language)
    found = table.get(template.kind, {}).get(str(template))
    if found is None:
        return text
    filled = {}
    for name, value in values.items():
        kind = template.fields.get(name, "text")
        value = str(value)
        filled[name] = value if kind == "text" else (translate(value, kind, table) or value)
    return found.format(**filled)


@cache
def catalogue(language: str) -> dict[str, dict[str, str]]:
    """The compiled translations of ``language`` ("zh"): kind -> English -> translation (empty if none ship)."""
    path = compiled(LOCALES.get(language, language))
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))["messages"]


def compiled(locale: str) -> Path:
    """Where the package keeps the compiled catalogue of ``locale`` (``zh_CN``)."""
    return _HERE / f"messages.{locale}.json"


def translate(text: str, kind: str, table: dict[str, dict[str, str]]) -> str | None:
    """``text``, an English message of ``kind``, in the language of ``table``; ``None`` if a part of it is unknown.

    A kind's words are looked up whole; otherwise each template of the kind is tried, and the first that reads
    the whole text with every placeholder's value translated by its own kind gives the translation.
    """
    if kind == "text":
        return text
    known = table.get(kind, {})
    if text in known:
        return known[text]
    for template in sorted(_TEMPLATES.get(kind, ()), key=_literal_length, reverse=True):  # the most specific first
        target = known.get(str(template))
        if target is None:
            continue
        filled = _read(template, text, table)
        if filled is not None:
            return target.format(**filled)
    return text if kind in LENIENT else None


def _literal_length(template: Template) -> int:
    head, pairs = _pieces(template)
    return len(head) + sum(len(after) for _, after in pairs)


def _pieces(template: Template) -> tuple[str, list[tuple[str, str]]]:
    """A template as its first literal and (placeholder, the literal after it) pairs."""
    parsed = list(string.Formatter().parse(str(template)))
    head = parsed[0][0] if parsed else ""
    pairs = []
    for i, (_, name, _, _) in enumerate(parsed):
        if name is None:
            continue
        after = parsed[i + 1][0] if i + 1 < len(parsed) else ""
        pairs.append((name, after))
    return head, pairs


def _read(template: Template, text: str, table) -> dict[str, str] | None:
    """The translated values of the placeholders of ``template`` that make ``text``, or ``None``."""
    head, pairs = _pieces(template)
    if not text.startswith(head):
        return None
    return _fill(template, pairs, text, len(head), {}, {}, table)


def _fill(template, pairs, text, at, seen, filled, table):
    if not pairs:
        return filled if at == len(text) else None
    (name, after), rest = pairs[0], pairs[1:]
    if rest:
        ends, start = [], at
        while after and (found := text.find(after, start)) != -1:
            ends.append(found)
            start = found + 1
    else:
        ends = [len(text) - len(after)] if text.endswith(after) and len(text) - len(after) >= at else []
    for end in ends:
        value = text[at:end]
        if name in seen:
            if seen[name] != value:
                continue
            translated = filled[name]
        else:
            translated = translate(value, template.fields.get(name, "text"), table)
            if translated is None:
                continue
        out = _fill(template, rest, text, end + len(after), {**seen, name: value}, {**filled, name: translated}, table)
        if out is not None:
            return out
    return None


def templates() -> list[Template]:
    """Every template made so far (import the modules that make them first), in the order they were made."""
    return [t for kind in _TEMPLATES.values() for t in kind]


def marked() -> list[tuple[str, str, str]]:
    """Every text marked by :func:`words` so far, as (kind, English, the module that marked it)."""
    return [(kind, text, module) for (kind, text), module in _WORDS.items()]
