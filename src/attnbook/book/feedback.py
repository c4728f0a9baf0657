"""The checkers' feedback in the Chinese edition: a catalogue of everything a checker prints, and its use.

A checker of :mod:`attnbook.exercises` speaks the reader's language (:mod:`attnbook.language`; the Chinese
notebooks start with ``setup(language="zh")``). What it can print is listed by
:func:`attnbook.exercises.wording.messages`, from the source itself: the templates of the verdicts, the
requirements and the comparisons (named constants with ``{placeholders}``), and the words of every checker, read
from the registry at run time (each case's name, each mistake's name and explanation, what a loop-free checker
counts). Their translations live in one gettext catalogue, ``locales/zh_CN/LC_MESSAGES/exercises.po``, one entry a
message, its kind in ``msgctxt``; the package ships them compiled, ``src/attnbook/exercises/messages.zh_CN.json``,
so that a notebook in Colab, with the library installed from the repository, has them.

The catalogue follows the English as the passages of the book do (:mod:`attnbook.book.edition`): ``update`` keeps a
changed message's old translation as fuzzy, ``check`` fails on a message whose translation is missing, fuzzy or
broken (a placeholder, a code span, a number, an identifier, a ✓/✗/○ or the lines' layout lost; a glossary term
not rendered as the glossary does; ASCII punctuation or no space between Chinese and Latin letters or digits),
and on a compiled catalogue out of step with it. ``build`` compiles it, and writes each Chinese notebook with its
setup line ``setup(language="zh")`` and its stored checker outputs translated: a stored output is the English
verdict the checker printed, read back against the templates and words (:func:`~attnbook.exercises.wording.translate`)
and written in Chinese; an output that cannot be read back fails the build.

    python -m attnbook.book.feedback export /tmp/feedback.json   # every message and its translation, to edit
    python -m attnbook.book.feedback import /tmp/feedback.json   # set the translations ("zh") back
    python -m attnbook.book.edition check                        # every catalogue, this one included
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import pkgutil
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from attnbook.book.catalogues import set_translation
from attnbook.book.config import SETUP_TAG, book_root, setup_cell_source
from attnbook.book.glossary import glossary_terms

LANGUAGE = "zh_CN"
#: The catalogue, as the edition's ``update`` and ``check`` name it among the documents' catalogues.
DOCUMENT = "locales/zh_CN/LC_MESSAGES/exercises.po"
#: The language code the Chinese notebooks' setup line sets (``setup(language="zh")``).
SPOKEN = "zh"
#: What the catalogue's entries are, by kind (``msgctxt``).
KINDS = {
    "verdict": "a checker's verdict",
    "unattempted": "why an attempt counts as not attempted",
    "problem": "how a result differs from the expected one",
    "where": "the part of a result that differs",
    "requirement": "a requirement the text states, unmet",
    "times": "how many times",
    "tamper": "what was done to the checker's watch",
    "tampers": "several of those",
    "error": "an error a checker raises",
    "key": "a part of a result",
    "case": "a case's name",
    "loop": "what a loop-free checker counts",
    "mistake": "a mistake's name",
    "explanation": "a mistake's explanation",
}
_ORDER = ("attnbook.exercises.verdicts", "attnbook.exercises.reporting")

_CODE = re.compile(r"(?<!`)`[^`\n]+`(?!`)")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_FIGURE = re.compile(r"\d+(?:[.,]\d+)*")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|\b\w*_\w*\b|\b[A-Za-z]\w*(?=[(\[])")
_CJK = "\u3400-\u9fff"
_LATIN = re.compile(rf"[{_CJK}][A-Za-z0-9`]|[A-Za-z0-9`][{_CJK}]")
_ASCII_PUNCTUATION = re.compile(rf"[{_CJK}][,;:?!]|[{_CJK}]\.(?!\.)")


def catalogue_path(base: Path) -> Path:
    return base / DOCUMENT


def compiled_path(base: Path) -> Path:
    return base / "src" / "attnbook" / "exercises" / f"messages.{LANGUAGE}.json"


def has_exercises(base: Path) -> bool:
    """Whether the book ``base`` ships the exercises' checkers (a book made by a test may not)."""
    return compiled_path(base).parent.is_dir()


def _import_checkers() -> None:
    """Import every module of the exercises: their checkers and templates are made at import."""
    import attnbook.exercises as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


@dataclass
class Message:
    """One thing to translate: its kind, its English, where it comes from, and its placeholders' kinds."""

    kind: str
    english: str
    where: list[str] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)
    template: bool = False


def english_messages() -> list[Message]:
    """Everything a checker can print, in catalogue order (the verdicts and comparisons first, then by module): the
    templates and marked words of :mod:`attnbook.exercises.wording`, and the words of every checker of the
    chapters, from the registry (each case's name, each mistake's name and explanation, what a loop-free checker
    counts)."""
    import attnbook.exercises as package
    from attnbook.exercises import wording

    _import_checkers()
    found: dict[tuple[str, str], Message] = {}

    def add(kind, text, where, fields=None, template=False):
        entry = found.setdefault((kind, text), Message(kind, text, [], dict(fields or {}), template))
        if where not in entry.where:
            entry.where.append(where)

    for template in wording.templates():
        if template.module.startswith(package.__name__):
            add(template.kind, str(template), template.module, template.fields, template=True)
    for kind, text, module in wording.marked():
        if module.startswith(package.__name__):
            add(kind, text, module)
    for name, checker in package.registry().items():
        module = checker.reference.__module__
        if not module.startswith(package.__name__):  # a checker made by a test
            continue
        where = f"{module} ({name})"
        for case in checker.cases:
            add("case", case.name, where)
        for mistake in checker.mistakes:
            add("mistake", mistake.name, where)
            add("explanation", mistake.explanation, where)
        if checker.loop_free is not None:
            add("loop", checker.loop_free[0], where)
    rank = {module: i for i, module in enumerate(_ORDER)}
    order = sorted(found.values(), key=lambda m: m.where[0].split(" ")[0])  # by module, as made within one
    return sorted(order, key=lambda m: rank.get(m.where[0].split(" ")[0], len(_ORDER)))


def _comment(message) -> str:
    from attnbook.exercises.wording import placeholders

    lines = [f"{KINDS.get(message.kind, message.kind)}: " + "; ".join(message.where)]
    if message.template and placeholders(message.english):
        kinds = {name: message.fields.get(name, "text") for name in placeholders(message.english)}
        shown = [f"{{{name}}} " + ("kept" if kind == "text" else kind) for name, kind in kinds.items()]
        lines.append("placeholders (kept as they are, or translated as their kind): " + ", ".join(shown))
    return "\n".join(lines)


def load(base: Path):
    import polib

    path = catalogue_path(base)
    return polib.pofile(str(path), wrapwidth=0) if path.is_file() else None


def update(base: Path, similarity: float = 0.6) -> Counter:
    """Make the catalogue follow the English messages: kept, fuzzy (a changed message), new, dropped."""
    import polib

    if not has_exercises(base):
        return Counter()

    old = load(base)
    old_entries = {(e.msgctxt, e.msgid): e for e in old if not e.obsolete} if old is not None else {}
    po = polib.POFile(wrapwidth=0)
    po.metadata = {
        "Project-Id-Version": "Attention, Step by Step",
        "Language": LANGUAGE,
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
        "X-Source": "src/attnbook/exercises",
    }
    counts: Counter = Counter()
    current = english_messages()
    keys = {(m.kind, m.english) for m in current}
    vanished = [e for key, e in old_entries.items() if key not in keys and e.msgstr]
    for message in current:
        entry = polib.POEntry(msgctxt=message.kind, msgid=message.english, msgstr="", comment=_comment(message))
        kept = old_entries.get((message.kind, message.english))
        if kept is not None:
            entry.msgstr, entry.flags, entry.tcomment = kept.msgstr, list(kept.flags), kept.tcomment
            entry.previous_msgid = kept.previous_msgid
            counts["kept"] += 1
        else:
            best, score = None, similarity
            for candidate in vanished:
                if candidate.msgctxt != message.kind:
                    continue
                ratio = difflib.SequenceMatcher(None, candidate.msgid, message.english, autojunk=False).ratio()
                if ratio >= score:
                    best, score = candidate, ratio
            if best is not None:
                entry.msgstr, entry.flags, entry.tcomment = best.msgstr, ["fuzzy"], best.tcomment
                entry.previous_msgid = best.previous_msgid or best.msgid
                counts["fuzzy"] += 1
            else:
                counts["new"] += 1
        po.append(entry)
    counts["dropped"] = sum(1 for key in old_entries if key not in keys)
    _write(catalogue_path(base), str(po))
    return counts


def _write(path: Path, text: str) -> bool:
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return True


# --- what a translation keeps -------------------------------------------------------------------------------------


def _shown(text: str, fields: dict[str, str], chinese: bool) -> str:
    """The text with its placeholders as what fills them: Latin for a kept value, Chinese for a translated one."""
    return _PLACEHOLDER.sub(lambda m: "X" if fields.get(m.group(1), "text") == "text" or not chinese else "中", text)


def structure(text: str, fields: dict[str, str] | None = None) -> Counter:
    """What a translation of ``text`` keeps: placeholders, code spans, figures, identifiers, symbols, line layout."""
    pieces: Counter = Counter()
    if fields is not None:
        pieces.update(("placeholder", name) for name in _PLACEHOLDER.findall(text))
    pieces.update(("code", span) for span in _CODE.findall(text))
    rest = _CODE.sub(" ", text)
    if fields is not None:
        rest = _PLACEHOLDER.sub(" ", rest)
    pieces.update(("figure", figure) for figure in _FIGURE.findall(rest))
    pieces.update(("symbol", c) for c in text if c in "✓✗○")
    pieces[("lines", tuple(len(line) - len(line.lstrip(" ")) for line in text.split("\n")))] += 1
    return pieces


def problems(
    english: str, chinese: str, fields: dict[str, str] | None = None, terms=(), comment: str = "", term_problems=None
) -> list[str]:
    """What the translation of one message lost or breaks, in words (``fields``: a template's placeholders).

    ``term_problems`` is the edition's check of the glossary's ``terms`` (:func:`attnbook.book.edition.term_problems`,
    which passes it: the edition uses this module, not the other way round)."""
    found = []
    want, got = structure(english, fields), structure(chinese, fields)
    for key in sorted(set(want) | set(got), key=str):
        if want[key] != got[key]:
            found.append(f"{key[0]} {key[1]!r}: {want[key]} in the English, {got[key]} in the translation")
    plain = _CODE.sub(" ", chinese)
    for identifier in sorted(set(_IDENTIFIER.findall(_CODE.sub(" ", english)))):
        if identifier not in plain:
            found.append(f"identifier {identifier!r} is not in the translation")
    words = re.search("[A-Za-z]{2,}", _PLACEHOLDER.sub(" ", _CODE.sub(" ", english)))
    if words and not re.search(f"[{_CJK}]", chinese):
        found.append("no Chinese in the translation")
    shown = _shown(_CODE.sub("`x`", chinese), fields or {}, chinese=True)
    found += [f"no space between Chinese and Latin: {m.group(0)!r}" for m in _LATIN.finditer(shown)]
    found += [f"ASCII punctuation in a Chinese sentence: {m.group(0)!r}" for m in _ASCII_PUNCTUATION.finditer(shown)]
    if term_problems is not None:
        prose_en, prose_zh = _shown(english, fields or {}, False), _shown(chinese, fields or {}, False)
        found += term_problems(prose_en, prose_zh, list(terms), comment)
    return found


def table(base: Path) -> dict[str, dict[str, str]]:
    """kind -> English -> translation: the catalogue's translated entries (fuzzy ones left out)."""
    po = load(base)
    out: dict[str, dict[str, str]] = {}
    for e in po or ():
        if e.msgstr and "fuzzy" not in e.flags and not e.obsolete:
            out.setdefault(e.msgctxt or "", {})[e.msgid] = e.msgstr
    return {kind: dict(sorted(entries.items())) for kind, entries in sorted(out.items())}


def compiled_text(base: Path) -> str:
    """The compiled catalogue that ships with the package, as its file holds it."""
    head = {"language": LANGUAGE, "compiled from": DOCUMENT, "messages": table(base)}
    return json.dumps(head, ensure_ascii=False, indent=1, sort_keys=False) + "\n"


def compile_catalogue(base: Path) -> bool:
    """Write the compiled catalogue into the package; whether it changed."""
    return has_exercises(base) and _write(compiled_path(base), compiled_text(base))


def check(base: Path, term_problems=None) -> list[str]:
    """Every message that lacks a translation, keeps a fuzzy one, or whose translation is broken (its terms too,
    with the edition's ``term_problems``); and the compiled catalogue if it is out of step."""
    if not has_exercises(base):
        return []
    po = load(base)
    entries = {(e.msgctxt, e.msgid): e for e in po if not e.obsolete} if po is not None else {}
    terms = glossary_terms(base)
    found = []
    for message in english_messages():
        label = f"exercises.po [{message.kind}] {message.english[:60]!r}"
        entry = entries.get((message.kind, message.english))
        if entry is None or not entry.msgstr.strip():
            found.append(f"{label}: no translation")
            continue
        if "fuzzy" in entry.flags:
            found.append(f"{label}: fuzzy (translated from an older English text)")
        fields = message.fields if message.template else None
        checked = problems(message.english, entry.msgstr, fields, terms, entry.tcomment or "", term_problems)
        found += [f"{label}: {p}" for p in checked]
    path = compiled_path(base)
    if not path.is_file() or path.read_text(encoding="utf-8") != compiled_text(base):
        found.append(f"{path.relative_to(base)} is not the compiled catalogue: python -m attnbook.book.edition build")
    return found


# --- the Chinese notebooks ----------------------------------------------------------------------------------------

_VERDICT_LINE = re.compile(r"^[✓✗○] ", re.M)


def localized_text(text: str, messages: dict[str, dict[str, str]], where: str = "", strict: bool = True) -> str:
    """A stored output with each checker verdict in it translated (the text before the first verdict is kept)."""
    from attnbook.exercises.wording import translate

    starts = [m.start() for m in _VERDICT_LINE.finditer(text)]
    if not starts:
        return text
    _import_checkers()  # every template, a chapter's requirements too
    out = [text[: starts[0]]]
    for start, end in zip(starts, [*starts[1:], len(text)]):
        chunk = text[start:end]
        body = chunk.rstrip("\n")
        translated = translate(body, "verdict", messages)
        if translated is None:
            if strict:
                raise ValueError(f"{where}: a checker's output that the catalogue cannot translate:\n{body}")
            translated = body
        out.append(translated + chunk[len(body) :])
    return "".join(out)


def localize_output(output, messages, where: str = "", strict: bool = True) -> None:
    """Translate the checker verdicts of one stored output of a code cell, in place."""
    if output.get("output_type") == "stream":
        output["text"] = localized_text(output["text"], messages, where, strict)
    elif "text/plain" in output.get("data", {}):
        output["data"]["text/plain"] = localized_text(output["data"]["text/plain"], messages, where, strict)


def setup_lines(base: Path) -> tuple[str, str]:
    """The last line of the setup cell in the English notebooks, and in the Chinese ones."""
    return setup_cell_source(base).rsplit("\n", 1)[-1], setup_cell_source(base, language=SPOKEN).rsplit("\n", 1)[-1]


def localized_code_cell(cell, base: Path, messages: dict[str, dict[str, str]] | None = None):
    """A copy of an English notebook's code cell as this module makes it for the Chinese edition: the setup line
    ``setup(language="zh")``, the checkers' verdicts in Chinese (``messages``: :func:`table`, read once)."""
    import copy

    cell = copy.deepcopy(cell)
    english, chinese = setup_lines(base)
    head, _, last = cell.source.rpartition("\n")
    if SETUP_TAG in cell.metadata.get("tags", []) and last == english:
        cell.source = f"{head}\n{chinese}"
    messages = table(base) if messages is None else messages
    for output in cell.get("outputs", []):
        localize_output(output, messages)
    return cell


def localize_notebook(nb, base: Path, source: str = "", strict: bool = True) -> None:
    """A notebook of the Chinese edition, in place: its setup line speaks Chinese, its checkers' outputs too.

    The setup cell's last line, ``setup()``, becomes ``setup(language="zh")``: the one difference of code between
    the two editions that this module makes."""
    english, chinese = setup_lines(base)
    setups = [c for c in nb.cells if c.cell_type == "code" and SETUP_TAG in c.metadata.get("tags", [])]
    head, _, last = setups[0].source.rpartition("\n") if setups else ("", "", english)
    if setups and last == english:
        setups[0].source = f"{head}\n{chinese}"
    elif strict and last != english:
        raise ValueError(f"{source}: its setup cell does not end with {english!r}: run `make execute`")
    messages = table(base)
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            localize_output(output, messages, f"{source} (cell {index})", strict)


# --- for a translator ---------------------------------------------------------------------------------------------


def export(base: Path) -> list[dict]:
    po = load(base)
    if po is None:
        raise FileNotFoundError("no exercises.po: run `python -m attnbook.book.edition update` first")
    return [
        {
            "kind": e.msgctxt,
            "where": e.comment,
            "fuzzy": "fuzzy" in e.flags,
            "comment": e.tcomment or "",
            "en": e.msgid,
            "zh": e.msgstr,
        }
        for e in po
    ]


def import_translations(base: Path, items: list[dict]) -> list[str]:
    """Set the translations of ``items`` (``kind``, ``en``, ``zh``, optionally ``comment``); their problems (the
    glossary's terms aside: ``python -m attnbook.book.edition check`` checks them too)."""
    po = load(base)
    if po is None:
        raise FileNotFoundError("no exercises.po: run `python -m attnbook.book.edition update` first")
    entries = {(e.msgctxt, e.msgid): e for e in po}
    fields = {(m.kind, m.english): (m.fields if m.template else None) for m in english_messages()}
    found = []
    for item in items:
        entry = entries.get((item["kind"], item["en"]))
        if entry is None:
            raise KeyError(f"not a message of the catalogue: [{item['kind']}] {item['en'][:60]!r}")
        if not item.get("zh", "").strip():
            continue
        set_translation(entry, item)
        checked = problems(entry.msgid, entry.msgstr, fields.get((item["kind"], item["en"])))
        found += [f"[{item['kind']}] {item['en'][:50]!r}: {p}" for p in checked]
    _write(catalogue_path(base), str(po))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.book.feedback", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    exporting = sub.add_parser("export", help="every message and its translation as JSON")
    exporting.add_argument("json", type=Path)
    importing = sub.add_parser("import", help="set translations from a JSON list of {kind, en, zh}")
    importing.add_argument("json", type=Path)
    args = parser.parse_args(argv)
    base = book_root()
    if args.command == "export":
        _write(args.json, json.dumps(export(base), ensure_ascii=False, indent=1) + "\n")
        return 0
    found = import_translations(base, json.loads(args.json.read_text(encoding="utf-8")))
    for problem in found:
        print(problem)
    print(f"{len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
