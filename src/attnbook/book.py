"""The book's own machinery: its configuration, Colab links, and re-running notebooks.

The repository URL and branch live in one place, ``_config.yml``. Everything
that points at the repository is derived from there: the Colab badge at the
top of each notebook, the setup cell that installs the library in Colab, the
launch buttons of the built book, and the address of the published book
(GitHub Pages, which the README links).

``python -m attnbook.book execute notebooks/*.ipynb`` (``make execute``)
brings each notebook's badge and setup cell up to date with ``_config.yml``,
runs it top to bottom in a fresh kernel with fixed seeds, and stores the
outputs, so that what nbval compares is never stale.

The module is also a Sphinx extension (``_config.yml`` lists it): it numbers
each chapter's exercises within the chapter, "Exercise 4.2" for the second
exercise of ``notebooks/04_self_attention.ipynb``, whatever the chapters
before it hold; it puts a link to the same page in the other edition (English,
中文) at the top of every page; and it adds the book's style sheet (fonts for
Chinese, code that wraps rather than runs off the page).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

__all__ = [
    "D2L_REQUIREMENT",
    "SETUP_TAG",
    "book_root",
    "book_config",
    "repository",
    "colab_url",
    "badge_markdown",
    "pages_url",
    "setup_cell_source",
    "sync_notebook",
    "solution_cells",
    "hide_solution",
    "execute_notebook",
    "chapter_number",
    "number_exercises_by_chapter",
]

#: d2l is installed without its dependencies (its hard pins break on Python 3.12+ and in Colab).
D2L_REQUIREMENT = "d2l==1.0.3"
#: The tag that hides the setup cell in the book.
SETUP_TAG = "remove-cell"
COLAB = "https://colab.research.google.com"
BADGE_IMAGE = f"{COLAB}/assets/colab-badge.svg"
_BADGE_RE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)")


def book_root(start: Path | None = None) -> Path:
    """The folder holding ``_config.yml``: searched upwards from ``start`` (default: here)."""
    candidates = [Path(start or Path.cwd()).resolve()]
    candidates.append(Path(__file__).resolve().parents[2])  # src/attnbook/book.py -> the repository
    for first in candidates:
        for folder in (first, *first.parents):
            if (folder / "_config.yml").is_file():
                return folder
    raise FileNotFoundError("no _config.yml found here or above: run this from inside the course repository")


def book_config(root: Path | None = None) -> dict:
    """``_config.yml`` as a dict."""
    import yaml

    path = (root or book_root()) / "_config.yml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def repository(root: Path | None = None) -> tuple[str, str]:
    """``(url, branch)`` of the repository, from ``_config.yml``."""
    repo = book_config(root).get("repository") or {}
    url, branch = repo.get("url"), repo.get("branch")
    if not url or not branch:
        raise ValueError("_config.yml must set repository.url and repository.branch")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
        raise ValueError(f"repository.url must look like https://github.com/OWNER/NAME, got {url!r}")
    return url, branch


def colab_url(notebook: str | Path, root: Path | None = None, folder: str = "notebooks") -> str:
    """The Colab address of ``<folder>/<name>.ipynb`` on the configured repository and branch.

    ``folder`` is ``notebooks`` for the English edition, ``zh/notebooks`` for the Chinese one.
    """
    url, branch = repository(root)
    name = Path(notebook).name
    return f"{COLAB}/github/{url.removeprefix('https://github.com/')}/blob/{branch}/{folder}/{name}"


def pages_url(root: Path | None = None) -> str:
    """The address of the published book: the GitHub Pages site of the configured repository.

    ``https://github.com/OWNER/NAME`` publishes at ``https://owner.github.io/NAME/`` (host names are
    lower case), and a repository named ``OWNER.github.io`` at the root of that host.
    """
    url, _ = repository(root)
    owner, name = url.removeprefix("https://github.com/").split("/")
    host = f"{owner.lower()}.github.io"
    return f"https://{host}/" if name.lower() == host else f"https://{host}/{name}/"


def badge_markdown(notebook: str | Path, root: Path | None = None, folder: str = "notebooks") -> str:
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(notebook, root, folder)})"


def setup_cell_source(root: Path | None = None) -> str:
    """The first code cell of every notebook (hidden in the book)."""
    url, branch = repository(root)
    return (
        "# Setup, hidden in the book. In Colab: install the course library and d2l.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet "attnbook @ git+{url}@{branch}"\n'
        f'    %pip install --quiet --no-deps "{D2L_REQUIREMENT}"\n'
        "\n"
        "from attnbook.notebook import setup\n"
        "\n"
        "setup()"
    )


def sync_notebook(nb, name: str, root: Path | None = None) -> None:
    """Make the badge and setup cell of ``nb`` (an nbformat node) match ``_config.yml``."""
    first = nb.cells[0]
    if first.cell_type != "markdown":
        raise ValueError(f"{name}: the first cell must be the markdown title cell")
    badge = badge_markdown(name, root)
    if _BADGE_RE.search(first.source):
        first.source = _BADGE_RE.sub(lambda _: badge, first.source)
    else:
        first.source = first.source.rstrip() + "\n\n" + badge
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code:
        raise ValueError(f"{name}: a notebook needs the setup code cell")
    code[0].source = setup_cell_source(root)
    tags = code[0].metadata.setdefault("tags", [])
    if SETUP_TAG not in tags:
        tags.append(SETUP_TAG)
    for cell in solution_cells(nb):
        hide_solution(cell)


#: The first line of every solution code cell: Colab shows it as the title of a folded form.
SOLUTION_TITLE = "# @title Solution (hidden: run it, or show the code to read it)"
_SOLUTION_START = re.compile(r"```\{solution-start\}")
_SOLUTION_END = re.compile(r"```\{solution-end\}")


def solution_cells(nb) -> list:
    """The code cells between a ``solution-start`` and its ``solution-end`` directive."""
    found, inside = [], False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            if _SOLUTION_START.search(cell.source):
                inside = True
            if _SOLUTION_END.search(cell.source):
                inside = False
        elif inside:
            found.append(cell)
    return found


def hide_solution(cell) -> None:
    """Hide a solution code cell where a learner runs it: a Colab form, collapsed in JupyterLab and Notebook 7.

    The book folds it already (the ``solution-start`` directive's dropdown).
    """
    lines = cell.source.split("\n")
    if lines and lines[0].lstrip().startswith(("# @title", "#@title")):
        lines = lines[1:]
    cell.source = "\n".join([SOLUTION_TITLE, *lines])
    cell.metadata["cellView"] = "form"
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


def _clean_metadata(nb) -> None:
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("widgets", None)
        if cell.cell_type == "code":
            cell.metadata.pop("collapsed", None)
            cell.metadata.pop("scrolled", None)


def execute_notebook(path: str | Path, timeout: int = 600) -> float:
    """Sync, run top to bottom in a fresh kernel, and save ``path``; return the wall time in seconds."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no notebook at {path}")
    nb = nbformat.read(path, as_version=4)
    sync_notebook(nb, path.name)
    # Deterministic hashing; and the course's DeprecationWarnings as errors, as under the test suite.
    env_fix = {"PYTHONHASHSEED": "0", "ATTNBOOK_STRICT_WARNINGS": "1"}
    old = {k: os.environ.get(k) for k in env_fix}
    os.environ.update(env_fix)
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
            record_timing=False,
        )
        start = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - start
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    _clean_metadata(nb)
    nbformat.validate(nb)
    tmp = path.with_suffix(".ipynb.tmp")
    nbformat.write(nb, tmp)
    tmp.replace(path)
    return seconds


_CHAPTER_DOC = re.compile(r"(?:^|/)(\d+)_[^/]+$")


def chapter_number(docname: str) -> int | None:
    """The chapter a book page belongs to, from its name: ``notebooks/04_self_attention`` -> 4; other pages: None."""
    found = _CHAPTER_DOC.search(docname)
    return int(found.group(1)) if found else None


def number_exercises_by_chapter(app, env) -> list[str]:
    """Renumber each chapter's exercises ``(chapter, 1), (chapter, 2), ...`` in the order they appear.

    Sphinx numbers enumerable nodes across the whole book when the table of
    contents is not numbered (the chapters' titles carry their numbers
    themselves), which makes the third exercise of chapter 4 "Exercise 18". This
    runs after Sphinx has assigned those numbers (``env-get-updated``) and
    rewrites them per chapter; titles, solutions and references all read them
    from the same table. Returns the pages whose numbers it changed.
    """
    changed = []
    for docname, by_type in env.toc_fignumbers.items():
        chapter = chapter_number(docname)
        numbers = by_type.get("exercise")
        if chapter is None or not numbers:
            continue
        in_order = sorted(numbers, key=numbers.__getitem__)
        renumbered = {ident: (chapter, i) for i, ident in enumerate(in_order, start=1)}
        if renumbered != numbers:
            by_type["exercise"] = renumbered
            changed.append(docname)
    return changed


#: The editions of the book: the folder each is published in below the English one, and its name in its language.
EDITIONS = {"": "English", "zh": "中文"}


def edition_link(pagename: str, edition: str) -> tuple[str, str]:
    """(address, label) of the same page in the other edition, relative to the page ``pagename`` of ``edition``.

    The English book is published at the root and the Chinese one in ``zh/`` below it, page for page:
    ``notebooks/03_attention`` of the English book links to ``../zh/notebooks/03_attention.html``,
    and back with ``../../notebooks/03_attention.html``.
    """
    if edition not in EDITIONS:
        raise ValueError(f"unknown edition {edition!r}: expected one of {sorted(EDITIONS)}")
    up = "../" * pagename.count("/")
    if edition:
        return f"{up}{'../' * (edition.count('/') + 1)}{pagename}.html", EDITIONS[""]
    other = next(name for name in EDITIONS if name)
    return f"{up}{other}/{pagename}.html", EDITIONS[other]


def add_edition_switch(app, pagename, templatename, context, doctree) -> None:
    """Put the link to the other edition at the top of the page's body."""
    if doctree is None or "body" not in context:
        return
    href, label = edition_link(pagename, app.config.attnbook_edition)
    lang = "zh-Hans" if not app.config.attnbook_edition else "en"  # the language of the page it links to
    context["body"] = (
        f'<p class="edition-switch"><a href="{href}" hreflang="{lang}" lang="{lang}">{label}</a></p>\n'
        + context["body"]
    )


def search_dictionary(app, config) -> None:
    """In the Chinese edition, teach the search's word splitter (jieba) the book's terms, from the glossary.

    Sphinx's Chinese search index holds the words jieba cuts the text into; without the terms, 位置编码 is
    indexed only as 位置 and 编码, and a reader's search for the term finds nothing.
    """
    if not config.attnbook_edition:
        return
    from attnbook.edition import glossary_terms

    terms = [zh for _, zh in glossary_terms(Path(app.srcdir).parent) if " " not in zh]
    path = Path(app.doctreedir) / "search_terms.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{term} 100000 n\n" for term in terms), encoding="utf-8")
    config.html_search_options = {**(config.html_search_options or {}), "dict": str(path)}


def _static_path(app) -> None:
    app.config.html_static_path.append(str(Path(__file__).parent / "static"))


def setup(app) -> dict:
    """Sphinx extension entry point (``sphinx.extra_extensions`` in ``_config.yml``)."""
    # After Sphinx's own figure numbering (priority 500), before the pages are written.
    app.connect("env-get-updated", number_exercises_by_chapter, priority=900)
    app.add_config_value("attnbook_edition", "", "html", types=[str])
    app.connect("builder-inited", _static_path)
    app.connect("config-inited", search_dictionary)
    app.connect("html-page-context", add_edition_switch)
    app.add_css_file("attnbook.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.book", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("execute", help="sync and re-run notebooks in place, storing their outputs")
    run.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "execute":
        for nb_path in args.notebooks:
            seconds = execute_notebook(nb_path)
            print(f"{nb_path}: executed in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
