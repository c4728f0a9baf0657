"""The words the Chinese edition's search indexes whole.

Sphinx indexes a Chinese page by the words its splitter (jieba) cuts the text into, and a reader's search
finds a word only if the index holds it. jieba's own dictionary lacks most of the book's terms: without
them 位置编码 is indexed only as 位置 and 编码, 困惑度 as 困惑 and 度, and a search for the term finds nothing.
:func:`search_words` collects the words the splitter must learn (:mod:`attnbook.book.sphinx` writes them
into its user dictionary):

- the glossary's Chinese terms (``book/glossary.md``);
- the terms the book's Chinese headings name (:func:`heading_terms`): "## 语言建模与困惑度" names 语言建模
  and 困惑度;
- the reviewed list ``locales/<language>/search_words.txt``: the book's recurring words that neither gives
  (检查函数, 独热, 候选译文, ...).

The splitter still indexes a learned word's parts (it cuts for search), so learning 注意力汇聚 loses nothing
a reader finds under 注意力.
"""

from __future__ import annotations

import re
from pathlib import Path

from attnbook.book import edition
from attnbook.book.glossary import glossary_terms

__all__ = ["search_words", "heading_terms", "reviewed_words", "REVIEWED"]

#: The reviewed list, below ``locales/<language>/``.
REVIEWED = "search_words.txt"

_HEADING_LINE = re.compile(r"^#{1,6}\s+(.*)$", re.M)
#: Where a heading's terms part: anything that is not a Chinese character, and the conjunctions.
_PARTING = re.compile(r"[^\u4e00-\u9fff]+|以及|还是|与|和|及|或")
#: Characters a term neither starts nor ends with (particles, pronouns, numerals, "not"...): 它的开销 is no term.
_FUNCTION_CHARACTERS = set("的了是在中其它把个一不而就会你我这那为")


def heading_terms(translations: list[str], shortest: int = 2, longest: int = 6, uses: int = 3) -> list[str]:
    """The terms the headings among ``translations`` (Chinese passages in Markdown) name.

    A heading is cut at every character that is not Chinese and at its conjunctions; a piece of
    ``shortest`` to ``longest`` characters is a term if it neither starts nor ends with a function
    character and the passages' prose (their lines that are not headings) uses it at least ``uses`` times:
    a heading's phrase that the text never repeats ("它管用吗") is not a word a reader searches for.
    """
    prose = "\n".join(_HEADING_LINE.sub("", text) for text in translations)
    terms = set()
    for text in translations:
        for heading in _HEADING_LINE.findall(text):
            for piece in _PARTING.split(heading):
                if (
                    shortest <= len(piece) <= longest
                    and piece[0] not in _FUNCTION_CHARACTERS
                    and piece[-1] not in _FUNCTION_CHARACTERS
                    and prose.count(piece) >= uses
                ):
                    terms.add(piece)
    return sorted(terms)


def reviewed_words(base: Path, language: str = edition.LANGUAGE) -> list[str]:
    """The words of ``locales/<language>/search_words.txt``, in its order (none if it is missing)."""
    path = base / "locales" / language / REVIEWED
    if not path.is_file():
        return []
    words = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [word for word in words if word]


def edition_translations(base: Path) -> list[str]:
    """Every translated passage of prose of the edition's catalogues (the Chinese Markdown; not a comment in code,
    whose ``#`` is no heading, nor a diagram's label)."""
    out = []
    code = set(edition.CODE_KINDS.values())
    for document in edition.documents(base):
        po = edition.load_catalogue(document.catalogue(base))
        if po is not None:
            out += [
                e.msgstr for e in po if e.msgstr and not e.obsolete and "fuzzy" not in e.flags and e.comment not in code
            ]
    return out


def search_words(base: Path) -> list[str]:
    """The words the Chinese search must index whole: glossary, headings, reviewed list; each once, in that order."""
    glossary = []
    if (base / "book" / "glossary.md").is_file():
        glossary = [zh for _, zh in glossary_terms(base)]
    found = [*glossary, *heading_terms(edition_translations(base)), *reviewed_words(base)]
    return [word for word in dict.fromkeys(found) if word and not re.search(r"\s", word)]
