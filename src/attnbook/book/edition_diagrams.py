"""The Chinese edition's diagrams: their labels translated, asked for by the notebook, stored drawn.

The architecture figures that :mod:`attnbook.diagrams` draws are teaching material, so an edition shows them in
its language, both in the book and when a learner runs its notebook (in Google Colab too, which has no Chinese
font: the library then writes SVG whose text the reader's browser draws).

- **Labels.** Every text a chapter's diagram draws in English that holds words (``masked multi-head
  self-attention``; not ``(B, T, d)``, ``GRU`` or ``Add & Norm``) is a passage of one catalogue,
  ``locales/<language>/LC_MESSAGES/diagrams.po``, drift-checked and fuzzy-marked like the prose.
  ``python -m attnbook.book.edition build`` writes its translations into the library's table
  ``src/attnbook/diagrams/<language>.json`` (``zh.json``: the library names the language as
  ``setup(language="zh")`` does), which is what a learner's ``attnbook`` reads.
- **The call.** An edition's notebook asks for its language where it draws: ``transformer_diagram()`` becomes
  ``transformer_diagram(language="zh")``. That argument is the only change an edition makes to a diagram cell's
  code (``tests/test_edition.py`` holds the two editions' code equal token for token but for it).
- **The output.** The build draws the diagram in the language and stores it as the cell's output in place of
  the English PNG: exactly what running the cell shows.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
from pathlib import Path

from attnbook.book.code_words import has_words

__all__ = [
    "PACKAGE",
    "SOURCE",
    "ARGUMENT",
    "diagram_functions",
    "labels",
    "table_path",
    "table_text",
    "diagram_names",
    "calls_a_diagram",
    "ask_for_language",
    "drawn_output",
    "localize",
    "svg_texts",
    "svg_signature",
]

#: The library's diagrams, and the folder that holds them (the catalogue's source), from the book's root.
PACKAGE = "attnbook.diagrams"
SOURCE = "src/attnbook/diagrams"
#: The keyword argument by which a diagram's function takes its language.
ARGUMENT = "language"


def diagram_functions() -> list[tuple[str, object]]:
    """``("module.function", function)`` for every diagram of every chapter, in the order of the chapters."""
    package = importlib.import_module(PACKAGE)
    found = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.name.startswith("ch"):
            continue
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        found += [(f"{info.name}.{name}", getattr(module, name)) for name in module.__all__]
    return found


def drawn_texts(figure) -> list[str]:
    """The texts a figure draws, in the order of its artists, each once (empty ones left out)."""
    from matplotlib.text import Text

    texts = [t.get_text() for t in figure.findobj(Text)]
    return list(dict.fromkeys(t for t in texts if t.strip()))


def labels() -> list[tuple[str, str]]:
    """(English label, the diagram that draws it) for every label with words, each once, in drawing order."""
    seen, out = set(), []
    for where, function in diagram_functions():
        for text in drawn_texts(function()):
            if has_words(text) and text not in seen:
                seen.add(text)
                out.append((text, where))
    return out


def table_path(base: Path, language: str) -> Path:
    """Where the library reads the labels in ``language``."""
    return Path(base) / SOURCE / f"{language}.json"


def table_text(translations: dict[str, str], catalogue: str) -> str:
    """The library's table of labels: {English: translation}, sorted, and the catalogue it is written from."""
    about = f"Written by `python -m attnbook.book.edition build` from {catalogue}: do not edit."
    table = {"about": about, "labels": dict(sorted(translations.items()))}
    return json.dumps(table, ensure_ascii=False, indent=1) + "\n"


# --- the notebooks ----------------------------------------------------------------------------------------------


def diagram_names(sources: list[str]) -> dict[str, tuple[str, str]]:
    """{name in the notebook: (module, function)} for each diagram function the code cells ``sources`` import."""
    names = {}
    for source in sources:
        try:
            tree = ast.parse(_python(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE + "."):
                for alias in node.names:
                    names[alias.asname or alias.name] = (node.module, alias.name)
    return names


def _python(source: str) -> str:
    """A cell's source with its IPython lines (``%pip``, ``!ls``) made ``pass``."""
    return "\n".join(
        line[: len(line) - len(line.lstrip())] + "pass" if re.match(r"^\s*[%!]", line) else line
        for line in source.split("\n")
    )


def _diagram_calls(source: str, names: dict) -> list[ast.Call]:
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return []
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
    ]


def calls_a_diagram(source: str, names: dict) -> bool:
    """Whether a code cell calls one of the diagram functions ``names`` (:func:`diagram_names`)."""
    return bool(_diagram_calls(source, names))


def ask_for_language(source: str, names: dict, language: str) -> str:
    """``source`` with ``language="<language>"`` added to every call of a diagram function that does not say one."""
    lines = source.split("\n")
    calls = [c for c in _diagram_calls(source, names) if not any(k.arg == ARGUMENT for k in c.keywords)]
    for call in sorted(calls, key=lambda c: (c.end_lineno, c.end_col_offset), reverse=True):
        line = lines[call.end_lineno - 1]
        close = len(line.encode("utf-8")[: call.end_col_offset].decode("utf-8")) - 1  # the call's ")"
        before = "\n".join(lines[: call.end_lineno - 1] + [line[:close]]).rstrip()
        comma = "" if before.endswith(("(", ",")) else ", "
        lines[call.end_lineno - 1] = line[:close] + f'{comma}{ARGUMENT}="{language}"' + line[close:]
    return "\n".join(lines)


def drawn_output(source: str, names: dict, execution_count):
    """The output a kernel stores for a cell that ends with a diagram call (``None`` for any other cell).

    The call's arguments must be literals (they are: a diagram takes at most its language).
    """
    import nbformat

    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return None
    last = tree.body[-1] if tree.body else None
    call = last.value if isinstance(last, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names):
        return None
    module, name = names[call.func.id]
    function = getattr(importlib.import_module(module), name)
    args = [ast.literal_eval(a) for a in call.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    drawn = function(*args, **kwargs)
    data = {"image/svg+xml": drawn._repr_svg_(), "text/plain": repr(drawn)}
    return nbformat.v4.new_output("execute_result", data=data, execution_count=execution_count)


def localize(cells: list, language: str) -> None:
    """Make a notebook's cells (nbformat nodes, changed in place) draw their diagrams in ``language``: the call
    asks for it, and the output that showed the English figure shows the diagram drawn in that language."""
    names = diagram_names([c.source for c in cells if c.cell_type == "code"])
    if not names:
        return
    for cell in cells:
        if cell.cell_type != "code" or not calls_a_diagram(cell.source, names):
            continue
        cell.source = ask_for_language(cell.source, names, language)
        drawn = drawn_output(cell.source, names, cell.execution_count)
        if drawn is None:
            raise ValueError(f"a cell calls a diagram but does not end with the call: {cell.source[:80]!r}")
        figures = [i for i, o in enumerate(cell.outputs) if o.output_type == "execute_result"]
        if len(figures) != 1:
            raise ValueError(f"a diagram cell holds {len(figures)} results, not one: {cell.source[:80]!r}")
        cell.outputs[figures[0]] = drawn


_SVG_TEXT = re.compile(r"<text\b[^>]*>(.*?)</text>", re.S)
_SVG_TAG = re.compile(r"<[^>]+>")


def svg_texts(svg: str) -> list[str]:
    """The texts an SVG draws (one per ``<text>`` element: a line of a label), unescaped."""
    import html

    return [html.unescape(_SVG_TAG.sub("", found)) for found in _SVG_TEXT.findall(svg)]


_SVG_PLACED_TEXT = re.compile(r"<text\b([^>]*)>(.*?)</text>", re.S)


def svg_signature(svg: str) -> list[tuple[str, int | None, int | None]]:
    """What a diagram's SVG shows its reader: each text, with its place to the nearest point.

    Two SVGs of one figure that differ only in how matplotlib wrote them (a release that orders attributes or
    rounds paths otherwise) have the same signature; a label translated anew or moved has another.
    """
    import html

    found = []
    for attributes, body in _SVG_PLACED_TEXT.findall(svg):
        place = [re.search(rf'\b{axis}="(-?[\d.]+)"', attributes) for axis in ("x", "y")]
        x, y = (round(float(p.group(1))) if p else None for p in place)
        found.append((html.unescape(_SVG_TAG.sub("", body)), x, y))
    return found
