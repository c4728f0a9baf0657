"""The Chinese edition (中文版): the English book with its prose taken from gettext catalogues.

One source, two books. The English notebooks and pages are the only source of
code, outputs and figures. Their prose is cut into *passages* (the blocks of a
markdown cell or page that blank lines separate, a fenced directive such as an
exercise kept whole), and each passage's translation lives in a catalogue,
``locales/zh_CN/LC_MESSAGES/<document>.po``, whose ``msgid`` is the English
passage itself. ``python -m attnbook.book.edition build`` writes the Chinese book
under ``zh/``: every notebook copied cell by cell with its markdown translated
(code cells, outputs and metadata untouched), every page translated, and the
book's table of contents and configuration. Passages that are not prose (code
blocks, display math alone, label targets, ``%`` comments, the Colab badge)
are copied as they are.

A notebook's code cells speak to the reader too: their comments and docstrings
are passages of the same catalogue (:mod:`attnbook.book.code_words`), replaced
in the Chinese notebook without touching a character of the code; and the
labels of the diagrams the library draws are passages of one more catalogue,
``diagrams.po``, which the Chinese notebooks draw with (:mod:`attnbook.book.edition_diagrams`).

When an English passage changes, its ``msgid`` no longer matches: ``update``
keeps the old translation as a *fuzzy* entry (with the old English as its
``#| msgid``) for a translator to revise, and ``check`` (and the tests) fail on
any passage that is missing, fuzzy, or whose translation lost a piece of the
original's structure: a code span, a formula, a link target, a role such as a
citation, a directive line, a figure (every number of the English passage, and
no other), the heading level. Terms follow the bilingual table of
``book/glossary.md``: a passage that uses an English term uses its Chinese term,
and the first use in a document gives the English in parentheses.

    python -m attnbook.book.edition update   # catalogues follow the English text
    python -m attnbook.book.edition check    # what is missing, fuzzy or broken
    python -m attnbook.book.edition build    # zh/ from the English book and the catalogues
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from attnbook.book import code_words, edition_diagrams, feedback
from attnbook.book.catalogues import set_translation
from attnbook.book.config import badge_markdown, book_root
from attnbook.book.glossary import glossary_terms

LANGUAGE = "zh_CN"
#: The edition's folder in the repository, and its address below the English book's.
EDITION = "zh"
#: The edition's language as the library names it: a diagram drawn for the edition is ``language="zh"``.
LIBRARY_LANGUAGE = "zh"

#: A fence line: ``` or ~~~ (code, or a directive such as ```{exercise}) and ::: (a colon-fenced directive).
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,}|:{3,})(.*)$")
#: The Colab badge that ``attnbook.book.execute`` writes into each notebook's title cell.
_BADGE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)\s*$")
_LABEL = re.compile(r"^\s*\([\w.:-]+\)=\s*$")  # a MyST target, (sec-name)=
_OPTION = re.compile(r"^\s*:[\w-]+:")  # a directive's option line, :label: ex-name
_ROLE = re.compile(r"\{[\w:-]+\}`[^`]*`")  # {cite:t}`key`, {doc}`page`...

#: The pieces of a passage kept character for character, in the order they are taken out of it.
#: An inline code span may run over a line break (the prose has no double-backtick spans).
_CODE = re.compile(r"(?<!`)`(?:[^`\n]|\n(?![ \t]*\n))+`(?!`)")
_DISPLAY_MATH = re.compile(r"\$\$.+?\$\$", re.S)
_MATH = re.compile(r"(?<![\\$])\$(?!\s)[^$\n]+?(?<![\s\\])\$(?!\d)")
_KEPT = (("math", _DISPLAY_MATH), ("role", _ROLE), ("code", _CODE), ("math", _MATH))

_LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
_URL = re.compile(r"<?https?://[^\s>)]+>?")
_HTML = re.compile(r"<[^>\n]+>")
#: Digits, with their separators: what a translation must repeat, each as often.
_FIGURE = re.compile(r"\d+(?:[.,]\d+)*")
_HEADING = re.compile(r"^(#{1,6})\s")


def root() -> Path:
    return book_root()


def english_book(source: Path, edition: str) -> Path:
    """The English book's folder, seen from the source folder of a build of ``edition``: ``zh/`` gives ``.``.

    ``edition`` is the edition's folder below the English book ("" for the English book itself).
    """
    return Path(source).parents[edition.count("/")] if edition else Path(source)


# --- passages ---------------------------------------------------------------


def split_blocks(text: str) -> tuple[list[str], list[str]]:
    """``text`` as blocks and the separators between them: ``text == seps[0] + b0 + seps[1] + b1 + ... + seps[-1]``.

    Blank lines separate blocks, except inside a fence (```` ``` ````, ``~~~``,
    ``:::``), which closes only on a bare fence of the same character at least as
    long as the one that opened it.
    """
    runs: list[tuple[bool, list[str]]] = []  # (is a block, its lines)
    fence: tuple[str, int] | None = None
    for line in text.split("\n"):
        is_block = fence is not None or bool(line.strip())
        if not runs or runs[-1][0] != is_block:
            runs.append((is_block, []))
        runs[-1][1].append(line)
        found = _FENCE.match(line) if is_block else None
        if found:
            char, size, info = found.group(2)[0], len(found.group(2)), found.group(3).strip()
            if fence is None:
                fence = (char, size)
            elif char == fence[0] and size >= fence[1] and not info:
                fence = None
    blocks = ["\n".join(lines) for is_block, lines in runs if is_block]
    if not blocks:
        return [], [text]
    seps = []
    for i, (is_block, lines) in enumerate(runs):
        if is_block:
            if i == 0 or (i > 0 and runs[i - 1][0]):
                seps.append("" if i == 0 else "\n")
            continue
        gap = "\n".join(lines)
        if i == 0:
            seps.append(gap + "\n")
        elif i == len(runs) - 1:
            seps.append("\n" + gap)
        else:
            seps.append("\n" + gap + "\n")
    if runs[-1][0]:
        seps.append("")
    if join_blocks(blocks, seps) != text:  # pragma: no cover - a bug here would corrupt a page
        raise AssertionError("split_blocks lost text")
    return blocks, seps


def join_blocks(blocks: list[str], seps: list[str]) -> str:
    out = [seps[0]]
    for block, sep in zip(blocks, seps[1:], strict=True):
        out += [block, sep]
    return "".join(out)


def _markup_line(line: str) -> bool:
    """A directive's option, a label target or a ``%`` comment: a line kept whole, never translated."""
    return bool(_OPTION.match(line) or _LABEL.match(line)) or line.lstrip().startswith("%")


def _prose_only(block: str) -> str:
    """What is left of a block once every piece that is not words to translate is taken out."""
    kept = []
    for line in block.split("\n"):
        if _FENCE.match(line) and not re.match(r"^\s*(`{3,}|~{3,}|:{3,})\{", line):
            kept.append("")  # a bare fence or a code block's fence
        elif _FENCE.match(line):
            kept.append(line.replace(_fence_head(line), " ", 1))  # a directive's title is prose
        elif _markup_line(line):
            kept.append("")
        else:
            kept.append(line)
    text = "\n".join(kept)
    for pattern in (_DISPLAY_MATH, _ROLE, _CODE, _MATH, _URL, _HTML, _LINK_TARGET):
        text = pattern.sub(" ", text)
    return text


def is_code_block(block: str) -> bool:
    found = _FENCE.match(block.split("\n", 1)[0])
    return bool(found) and not found.group(3).strip().startswith("{") and found.group(2)[0] != ":"


def translatable(block: str) -> bool:
    """Whether a block holds words to translate (not code, a formula, a label, a comment or the badge)."""
    if _BADGE.match(block) or is_code_block(block):
        return False
    return re.search(r"[A-Za-z]{2,}", _prose_only(block)) is not None


#: Directives whose argument is a name or a path, kept as it is; other directives' arguments are titles.
NAMED_ARGUMENT = ("solution-start", "solution", "include", "literalinclude", "figure", "image")


def _fence_head(line: str) -> str:
    """A fence line as a translation must keep it: the fence, the directive, and its argument if that is a name."""
    found = re.match(r"^\s*(`{3,}|~{3,}|:{3,})(?:\{([\w:-]+)\}\s*(\S*))?", line)
    fence, name, argument = found.group(1), found.group(2), found.group(3)
    if name is None:
        return line.strip()
    return f"{fence}{{{name}}} {argument}" if name in NAMED_ARGUMENT else f"{fence}{{{name}}}"


#: A number with a word of magnitude is one figure, the same in either language: "65 million" is "6500 万".
_MAGNITUDE = re.compile(r"(\d+(?:[.,]\d+)*)\s*(million|billion|百万|千万|万|亿)")
_MAGNITUDES = {"million": 1e6, "billion": 1e9, "百万": 1e6, "千万": 1e7, "万": 1e4, "亿": 1e8}


def _magnitude(found: re.Match) -> str:
    number = float(found.group(1).replace(",", ""))
    return f"{number * _MAGNITUDES[found.group(2)]:.0f}"


def structure(block: str) -> Counter:
    """The pieces a translation must keep: code, math, roles, link targets, directive lines, figures, heading."""
    pieces: Counter = Counter()
    text = block
    for name, pattern in _KEPT:
        for found in pattern.findall(text):
            pieces[(name, found)] += 1
        text = pattern.sub(" ", text)
    for target in _LINK_TARGET.findall(text):
        pieces[("link", target)] += 1
    text = _LINK_TARGET.sub(" ", text)
    for url in _URL.findall(text):
        if not any(key[0] == "link" and key[1] == url.strip("<>") for key in pieces):
            pieces[("url", url.strip("<>"))] += 1
    text = _URL.sub(" ", text)
    for line in text.split("\n"):
        if _FENCE.match(line):
            pieces[("fence", _fence_head(line))] += 1
        elif _markup_line(line):
            pieces[("line", line.strip())] += 1
    prose = _MAGNITUDE.sub(lambda m: f" {_magnitude(m)} ", _prose_only(block))
    for figure in _FIGURE.findall(prose):
        pieces[("figure", figure)] += 1
    heading = _HEADING.match(block)
    pieces[("heading", heading.group(1) if heading else "")] += 1
    return pieces


def structure_problems(english: str, chinese: str) -> list[str]:
    """What the translation lost or added of the English passage's structure, in words."""
    want, got = structure(english), structure(chinese)
    problems = []
    for key in sorted(set(want) | set(got)):
        if want[key] != got[key]:
            problems.append(f"{key[0]} {key[1]!r}: {want[key]} in the English, {got[key]} in the translation")
    return problems


# --- documents --------------------------------------------------------------


class Passage(NamedTuple):
    """A passage of a document: its English text, where it stands, and its kind: ``"prose"`` or one of
    :data:`CODE_KINDS`."""

    text: str
    where: str
    kind: str = "prose"


#: The passages that are not prose, by kind, and what their catalogue entry says they are (its ``#.`` line):
#: a translator sees that a comment keeps its ``#`` and a label is short.
CODE_KINDS = {"comment": "a comment in code", "docstring": "a docstring in code", "label": "a label of a diagram"}

#: A translator's comment that lets a passage of code or a label stay in English, with the reason after it
#: (``english-kept: the example sentence, data of the chapter``).
ENGLISH_KEPT = "english-kept:"


@dataclass
class Document:
    """A notebook or page of the English book, and the catalogue that translates it."""

    source: str  # relative to the repository root: notebooks/03_attention.ipynb, book/running.md, _toc.yml

    @property
    def stem(self) -> str:
        return str(Path(self.source).with_suffix(""))

    def catalogue(self, base: Path) -> Path:
        return base / "locales" / LANGUAGE / "LC_MESSAGES" / f"{self.stem}.po"

    def passages(self, base: Path) -> list[Passage]:
        """Its passages in document order, repeated ones once: a notebook's code cells give their comments and
        docstrings that hold words (:mod:`attnbook.book.code_words`)."""
        seen, out = set(), []
        for passage in self._passages(base):
            if passage.text not in seen:
                seen.add(passage.text)
                out.append(passage)
        return out

    def _passages(self, base: Path):
        for text, where, cell_type in self._texts(base):
            if cell_type == "code":
                for words in code_words.words_of(text):
                    if code_words.has_words(words.text):
                        yield Passage(words.text, where, words.kind)
                continue
            for block in split_blocks(text)[0]:
                if translatable(block):
                    yield Passage(block, where)

    def _texts(self, base: Path) -> list[tuple[str, str, str]]:
        """(text, where it is, "markdown" or "code") of each cell or page."""
        path = base / self.source
        if self.source.endswith(".ipynb"):
            nb = json.loads(path.read_text(encoding="utf-8"))
            return [
                ("".join(cell["source"]), f"cell {i}", cell["cell_type"])
                for i, cell in enumerate(nb["cells"])
                if cell["cell_type"] in ("markdown", "code")
            ]
        if self.source == "_toc.yml":
            return [(text, "_toc.yml", "markdown") for text in toc_texts(base)]
        return [(path.read_text(encoding="utf-8"), self.source, "markdown")]


@dataclass
class DiagramLabels(Document):
    """The labels of the diagrams the library draws (:mod:`attnbook.diagrams`), translated in one catalogue,
    ``diagrams.po``; :mod:`attnbook.book.edition_diagrams` says how an edition draws with them."""

    source: str = edition_diagrams.SOURCE

    @property
    def stem(self) -> str:
        return "diagrams"

    def _passages(self, base: Path):
        for text, where in edition_diagrams.labels():
            yield Passage(text, where, "label")


def documents(base: Path) -> list[Document]:
    """Every document of the English book, in the order of its table of contents, the toc itself, and the
    library's diagrams where the book holds the library."""
    import yaml

    toc = yaml.safe_load((base / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part.get("chapters", [])]
    out = []
    for name in files:
        for suffix in (".ipynb", ".md"):
            if (base / f"{name}{suffix}").is_file():
                out.append(Document(f"{name}{suffix}"))
                break
        else:
            raise FileNotFoundError(f"_toc.yml names {name}, which is neither {name}.ipynb nor {name}.md")
    out.append(Document("_toc.yml"))
    if (base / edition_diagrams.SOURCE).is_dir():  # a book with the library beside it: its diagrams' labels
        out.append(DiagramLabels())
    return out


def document_of(base: Path, source: str) -> Document:
    """The document of the book whose source is ``source``: a notebook, a page, the diagrams' labels."""
    for found in documents(base):
        if found.source == source:
            return found
    return Document(source)


def toc_texts(base: Path) -> list[str]:
    """The words of the book outside its pages: the title, the author line and the parts' captions."""
    import yaml

    config = yaml.safe_load((base / "_config.yml").read_text(encoding="utf-8"))
    toc = yaml.safe_load((base / "_toc.yml").read_text(encoding="utf-8"))
    author = [config["author"]] if config.get("author") else []
    return [config["title"], *author, *[part["caption"] for part in toc.get("parts", [])]]


# --- catalogues -------------------------------------------------------------


def _new_catalogue(document: Document):
    import polib

    po = polib.POFile(wrapwidth=0)
    po.metadata = {
        "Project-Id-Version": "Attention, Step by Step",
        "Language": LANGUAGE,
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
        "X-Source": document.source,
    }
    return po


def load_catalogue(path: Path):
    import polib

    if not path.is_file():
        return None
    return polib.pofile(str(path), wrapwidth=0)


def update(base: Path, similarity: float = 0.6) -> dict[str, Counter]:
    """Make every catalogue follow its English document; returns counts per document.

    A passage whose English is unchanged keeps its translation; a changed one
    takes the translation of the most similar vanished passage of the same
    document as a fuzzy entry (the old English in ``#| msgid``); a new one is
    added untranslated; vanished passages are dropped.
    """
    import polib

    report = {}
    for document in documents(base):
        path = document.catalogue(base)
        old = load_catalogue(path)
        old_entries = {e.msgid: e for e in old if not e.obsolete} if old is not None else {}
        po = _new_catalogue(document)
        counts: Counter = Counter()
        passages = document.passages(base)
        current = {passage.text for passage in passages}
        vanished = [e for msgid, e in old_entries.items() if msgid not in current and e.msgstr]
        for text, where, kind in passages:
            entry = polib.POEntry(msgid=text, msgstr="", occurrences=[(document.source, where.replace(" ", ""))])
            entry.comment = CODE_KINDS.get(kind, "")
            kept = old_entries.get(text)
            if kept is not None:
                entry.msgstr, entry.flags = kept.msgstr, list(kept.flags)
                entry.previous_msgid = kept.previous_msgid
                entry.tcomment = kept.tcomment
                counts["kept"] += 1
            else:
                best, score = None, similarity
                for candidate in (c for c in vanished if c.comment == entry.comment):  # a comment from a comment
                    ratio = difflib.SequenceMatcher(None, candidate.msgid, text, autojunk=False).ratio()
                    if ratio >= score:
                        best, score = candidate, ratio
                if best is not None:
                    entry.msgstr, entry.flags = best.msgstr, ["fuzzy"]
                    entry.previous_msgid = best.previous_msgid or best.msgid
                    entry.tcomment = best.tcomment
                    counts["fuzzy"] += 1
                else:
                    counts["new"] += 1
            po.append(entry)
        counts["dropped"] = sum(1 for msgid in old_entries if msgid not in current)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = str(po) if len(po) else str(po) + "\n"
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            _write(path, text)
        report[document.source] = counts
    report[feedback.DOCUMENT] = feedback.update(base)  # what the exercises' checkers print
    return report


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


# --- checks -----------------------------------------------------------------


def _term_pattern(english: str) -> re.Pattern:
    words = r"[\s-]+".join(re.escape(w) for w in re.split(r"[\s-]+", english))
    return re.compile(rf"(?<![\w-]){words}(?:s|es)?(?![\w-])", re.I)


#: Where the glossary's Chinese for a term would read wrongly, the spellings a translation may use instead.
TERM_ALTERNATIVES = {
    "softmax": ("softmax",),
    "logit": ("logit",),
    "BLEU": ("BLEU",),
}


#: Glossary words that English prose also uses in their everyday sense ("the key idea", "the shape of the
#: curve", "ahead"): the term test does not require their Chinese term in every passage that uses them.
EVERYDAY_WORDS = {"shape", "query", "key", "value", "head", "alignment"}


def term_problems(english: str, chinese: str, terms: list[tuple[str, str]], comment: str = "") -> list[str]:
    """The glossary terms of the English passage that its translation does not render as the glossary does.

    A translator's comment ``term-exempt: TERM`` in the catalogue (``# term-exempt: mask``) excuses a passage
    where the English word is not the term (with the reason beside it).
    """
    prose_en = _prose_only(english)
    prose_zh = _prose_only(chinese)
    problems = []
    exempt = {t.strip() for t in re.findall(r"term-exempt: ([^;\n]+)", comment)}
    for en, zh in terms:
        if en in exempt or en in EVERYDAY_WORDS or not _term_pattern(en).search(prose_en):
            continue
        accepted = TERM_ALTERNATIVES.get(en, (zh,))
        if not any(a.lower() in prose_zh.lower() for a in accepted):
            problems.append(f"term {en!r} is not rendered as {zh!r}")
    return problems


def first_use_problems(entries: list[tuple[str, str]], terms: list[tuple[str, str]]) -> list[str]:
    """The first passage (headings aside) that uses a Chinese term must give the English in parentheses."""
    problems = []
    for en, zh in terms:
        if en in EVERYDAY_WORDS or en.lower() in zh.lower() or not re.search(r"[\u4e00-\u9fff]", zh):
            continue
        for _english, chinese in entries:
            if _HEADING.match(chinese):
                continue
            prose = _prose_only(chinese)
            if zh not in prose:
                continue
            groups = re.findall(r"[（(]([^）)]*)[）)]", prose)
            if not any(_term_pattern(en).search(g) or en.lower() in g.lower() for g in groups):
                problems.append(f"first use of {zh!r} lacks the English ({en}) in parentheses: {chinese[:60]!r}")
            break
    return problems


_CHINESE = re.compile(r"[\u4e00-\u9fff]")


def passage_problems(
    english: str, chinese: str, kind: str, terms: list[tuple[str, str]], comment: str = ""
) -> list[str]:
    """What is wrong with ``chinese`` as the translation of the passage ``english`` of ``kind``: its structure,
    its terms, and for code and labels, what code needs kept (:func:`attnbook.book.code_words.code_problems`)
    and words left in English without a reason (``english-kept: ...`` in the entry's comment).

    A diagram's label writes a formula among Chinese words in Unicode (``$s_{t-1}$`` as sₜ₋₁: see
    :meth:`attnbook.diagrams.Diagram.say`), so the formulas and figures of a label that has one are not compared.
    """
    problems = structure_problems(english, chinese) + term_problems(english, chinese, terms, comment)
    if kind == "label" and _MATH.search(english):
        problems = [p for p in problems if not p.startswith(("math ", "figure "))]
    if kind in CODE_KINDS:
        problems += code_words.code_problems(english, chinese, kind)
        if not _CHINESE.search(chinese) and ENGLISH_KEPT not in comment:
            problems.append(
                f"left in English: translate it, or give the reason in the entry's comment ({ENGLISH_KEPT} ...)"
            )
    return problems


def check(base: Path) -> dict[str, list[str]]:
    """Every problem of every catalogue, by document: missing, fuzzy, broken structure, terms, first uses."""
    terms = glossary_terms(base)
    found: dict[str, list[str]] = {}
    for document in documents(base):
        problems = []
        po = load_catalogue(document.catalogue(base))
        entries = {e.msgid: e for e in po if not e.obsolete} if po is not None else {}
        ordered = []
        for text, where, kind in document.passages(base):
            entry = entries.get(text)
            label = f"{document.source} ({where}) {text[:50]!r}"
            if entry is None or not entry.msgstr.strip():
                problems.append(f"{label}: no translation")
                continue
            if "fuzzy" in entry.flags:
                problems.append(f"{label}: fuzzy (translated from an older English text)")
            for problem in passage_problems(text, entry.msgstr, kind, terms, entry.tcomment or ""):
                problems.append(f"{label}: {problem}")
            if kind == "prose":  # a term is introduced in the prose, never in a comment or a label
                ordered.append((text, entry.msgstr))
        if document.source != "_toc.yml" and not document.source.endswith("glossary.md") and ordered:
            problems += [f"{document.source}: {p}" for p in first_use_problems(ordered, terms)]
        if problems:
            found[document.source] = problems
    if feedback_problems := feedback.check(base, term_problems):  # what the exercises' checkers print
        found[feedback.DOCUMENT] = feedback_problems
    return found


# --- the Chinese book -------------------------------------------------------


def translator(document: Document, base: Path, strict: bool = True):
    """A function from an English block to its Chinese one."""
    po = load_catalogue(document.catalogue(base))
    table = {e.msgid: e.msgstr for e in po if e.msgstr and "fuzzy" not in e.flags} if po is not None else {}

    def translate(block) -> str:
        """The translation of a block of prose (a string) or of the words of a code cell (a ``Words``)."""
        if isinstance(block, code_words.Words):
            if not code_words.has_words(block.text):
                return block.text
            block = block.text
        elif not translatable(block):
            return block
        if block in table:
            return table[block]
        if strict:
            raise KeyError(f"{document.source}: no translation of {block[:60]!r}")
        return block

    return translate


_INCLUDE = re.compile(r"^(\s*(?:`{3,}|:{3,})\{(?:include|literalinclude)\}\s+)(\S+)", re.M)


def relocate(block: str, source: str) -> str:
    """A block of ``source`` with the files its include directives name found from ``zh/``: the English ones."""

    def moved(found: re.Match) -> str:
        path = found.group(2)
        if path.startswith("/") or "://" in path:
            return found.group(0)
        up = len(Path(source).parent.parts) + EDITION.count("/") + 1
        return found.group(1) + "../" * up + str(Path(source).parent / path)

    return _INCLUDE.sub(moved, block)


def translate_text(text: str, translate, source: str = "") -> str:
    blocks, seps = split_blocks(text)
    return join_blocks([relocate(translate(b), source) if source else translate(b) for b in blocks], seps)


def edition_notebook(document: Document, base: Path, strict: bool = True) -> str:
    """The Chinese notebook's file contents: the English notebook with its markdown, its code cells' comments and
    docstrings translated, and its diagrams drawn in Chinese (the call asks for the language, the output shows
    it); every other character of the code, every other output and the metadata as they are."""
    import nbformat

    nb = nbformat.read(base / document.source, as_version=4)
    translate = translator(document, base, strict)
    badge = badge_markdown(document.source, base, f"{EDITION}/notebooks")
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            text = translate_text(cell.source, translate)
            cell.source = "\n".join(badge if _BADGE.match(line) else line for line in text.split("\n"))
        elif cell.cell_type == "code":
            cell.source = code_words.translate_code(cell.source, translate)
    edition_diagrams.localize(nb.cells, LIBRARY_LANGUAGE)
    feedback.localize_notebook(nb, base, document.source, strict)  # setup(language="zh"); the checkers' outputs
    nb.metadata["language"] = LANGUAGE
    return nbformat.writes(nb) + "\n"


def edition_config(base: Path, strict: bool = True) -> tuple[str, str]:
    """``zh/_config.yml`` and ``zh/_toc.yml``."""
    import yaml

    translate = translator(Document("_toc.yml"), base, strict)
    config = yaml.safe_load((base / "_config.yml").read_text(encoding="utf-8"))
    toc = yaml.safe_load((base / "_toc.yml").read_text(encoding="utf-8"))
    config = copy.deepcopy(config)
    config["title"] = translate(config["title"])
    if config.get("author"):
        config["author"] = translate(config["author"])
    config["bibtex_bibfiles"] = [f"../{p}" for p in config.get("bibtex_bibfiles", [])]
    config.setdefault("repository", {})["path_to_book"] = EDITION
    sphinx = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx["language"] = LANGUAGE
    sphinx["attnbook_edition"] = EDITION
    for part in toc.get("parts", []):
        part["caption"] = translate(part["caption"])
    head = (
        "# Generated by `python -m attnbook.book.edition build` from ../{0} and the catalogues in ../locales: "
        "do not edit.\n"
    )
    dump = dict(allow_unicode=True, sort_keys=False, width=1000)
    return (
        head.format("_config.yml") + yaml.safe_dump(config, **dump),
        head.format("_toc.yml") + yaml.safe_dump(toc, **dump),
    )


def edition_files(base: Path, strict: bool = True) -> dict[Path, str]:
    """Every file of the Chinese book, by its path under ``zh/``, with its contents."""
    files = {}
    for document in documents(base):
        if document.source == "_toc.yml" or isinstance(document, DiagramLabels):  # the toc below; the labels: a table
            continue
        if document.source.endswith(".ipynb"):
            files[Path(document.source)] = edition_notebook(document, base, strict)
        else:
            english = (base / document.source).read_text(encoding="utf-8")
            translate = translator(document, base, strict)
            files[Path(document.source)] = translate_text(english, translate, document.source)
    config, toc = edition_config(base, strict)
    files[Path("_config.yml")], files[Path("_toc.yml")] = config, toc
    return files


def library_files(base: Path, strict: bool = True) -> dict[Path, str]:
    """The files of the library that the catalogues write, by their path in the book: the diagrams' table of
    labels in the edition's language (what a learner's ``attnbook`` draws with, in Colab too)."""
    if not (base / edition_diagrams.SOURCE).is_dir():
        return {}
    labels = DiagramLabels()
    po = load_catalogue(labels.catalogue(base))
    table = {e.msgid: e.msgstr for e in po if e.msgstr and "fuzzy" not in e.flags} if po is not None else {}
    missing = [text for text, _, _ in labels.passages(base) if text not in table]
    if strict and missing:
        raise KeyError(f"{labels.source}: no translation of {missing[0][:60]!r} (and {len(missing) - 1} more)")
    catalogue = labels.catalogue(Path()).as_posix()
    return {edition_diagrams.table_path(Path(), LIBRARY_LANGUAGE): edition_diagrams.table_text(table, catalogue)}


def build(base: Path, strict: bool = True) -> list[Path]:
    """Write the library's table of diagram labels, then the Chinese book under ``zh/`` (whose notebooks draw
    their diagrams with it); returns the files that changed."""
    from attnbook.diagrams import labels

    changed = []
    for relative, text in library_files(base, strict).items():
        path = base / relative
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            _write(path, text)
            changed.append(path)
    labels.cache_clear()
    if feedback.compile_catalogue(base):  # the checkers' messages, shipped with the library
        changed.append(feedback.compiled_path(base))
    for relative, text in edition_files(base, strict).items():
        path = base / EDITION / relative
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            _write(path, text)
            changed.append(path)
    return changed


def export(base: Path, source: str) -> list[dict]:
    """The passages of one document with their current translations, for a translator's editor."""
    document = document_of(base, source)
    po = load_catalogue(document.catalogue(base))
    if po is None:
        raise FileNotFoundError(f"no catalogue for {source}: run `python -m attnbook.book.edition update` first")
    return [
        {
            "id": i,
            "where": e.occurrences[0][1] if e.occurrences else "",
            "fuzzy": "fuzzy" in e.flags,
            "kind": e.comment or "prose",
            "comment": e.tcomment or "",
            "en": e.msgid,
            "zh": e.msgstr,
        }
        for i, e in enumerate(po)
    ]


def import_translations(base: Path, source: str, items: list[dict]) -> list[str]:
    """Set the translations of ``items`` (``en`` and ``zh``, and optionally ``comment``); returns their problems.

    An item whose English is not a passage of the catalogue is refused, so that
    nothing is filed under an old text.
    """
    document = document_of(base, source)
    path = document.catalogue(base)
    po = load_catalogue(path)
    if po is None:
        raise FileNotFoundError(f"no catalogue for {source}: run `python -m attnbook.book.edition update` first")
    entries = {e.msgid: e for e in po}
    kinds = {passage.text: passage.kind for passage in document.passages(base)}
    terms = glossary_terms(base)
    problems = []
    for item in items:
        entry = entries.get(item["en"])
        if entry is None:
            raise KeyError(f"{source}: not a passage of the catalogue: {item['en'][:60]!r}")
        if not item.get("zh", "").strip():
            continue
        set_translation(entry, item)
        kind = kinds.get(entry.msgid, "prose")
        for problem in passage_problems(entry.msgid, entry.msgstr, kind, terms, entry.tcomment or ""):
            problems.append(f"{item['en'][:50]!r}: {problem}")
    _write(path, str(po))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.book.edition", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("update", help="make the catalogues follow the English text (changed passages become fuzzy)")
    checking = sub.add_parser("check", help="list missing, fuzzy and broken translations")
    checking.add_argument("documents", nargs="*", help="only these documents (e.g. notebooks/03_attention.ipynb)")
    exporting = sub.add_parser("export", help="one document's passages and translations as JSON")
    exporting.add_argument("document", help="e.g. notebooks/03_attention.ipynb")
    exporting.add_argument("json", type=Path)
    importing = sub.add_parser("import", help="set translations from a JSON list of {en, zh}")
    importing.add_argument("document")
    importing.add_argument("json", type=Path)
    building = sub.add_parser("build", help="write the Chinese book under zh/")
    building.add_argument("--draft", action="store_true", help="leave untranslated passages in English")
    args = parser.parse_args(argv)
    base = root()
    if args.command == "update":
        for source, counts in update(base).items():
            print(f"{source}: " + ", ".join(f"{counts[k]} {k}" for k in ("kept", "fuzzy", "new", "dropped")))
        return 0
    if args.command == "export":
        _write(args.json, json.dumps(export(base, args.document), ensure_ascii=False, indent=1) + "\n")
        return 0
    if args.command == "import":
        items = json.loads(args.json.read_text(encoding="utf-8"))
        problems = import_translations(base, args.document, items)
        for problem in problems:
            print(problem)
        print(f"{len(problems)} problem(s)")
        return 1 if problems else 0
    if args.command == "check":
        found = check(base)
        shown = {k: v for k, v in found.items() if not args.documents or k in args.documents}
        for source, problems in shown.items():
            print(f"== {source}: {len(problems)} problem(s)")
            for problem in problems:
                print(f"  {problem}")
        print("no problems" if not shown else f"{sum(map(len, shown.values()))} problem(s)")
        return 1 if shown else 0
    changed = build(base, strict=not args.draft)
    print(f"{len(changed)} file(s) of {EDITION}/ written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
