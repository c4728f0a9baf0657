"""The book as a Sphinx extension (``_config.yml`` lists ``attnbook.book.sphinx``).

It numbers each chapter's exercises within the chapter, "Exercise 4.2" for the
second exercise of ``notebooks/04_self_attention.ipynb``, whatever the chapters
before it hold; it puts a link to the same page in the other edition (English,
中文) at the top of every page; it teaches the Chinese search the book's terms
(:mod:`attnbook.book.search_words`); and it adds the book's style sheet (fonts
for Chinese, code that wraps rather than runs off the page). In a translated
edition it also gives the site's interface the edition's language
(:mod:`attnbook.book.interface`), titles exercises and solutions in its word
order (:mod:`attnbook.book.exercise_titles`), and gives each section the
anchor of its English heading (:mod:`attnbook.book.anchors`). And it looks up
pybtex's text backends once (:func:`_pybtex_backends_once`).
"""

from __future__ import annotations

import re
from pathlib import Path

from attnbook.book import interface
from attnbook.book.anchors import EnglishSectionAnchors
from attnbook.book.edition import english_book
from attnbook.book.exercise_titles import (
    ExerciseTitles,
    depart_exercise_caption,
    exercise_caption,
    visit_exercise_caption,
)
from attnbook.book.search_words import search_words

__all__ = ["EDITIONS", "chapter_number", "number_exercises_by_chapter", "edition_link", "setup"]

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
    """In the Chinese edition, teach the search's word splitter (jieba) the book's terms.

    Sphinx's Chinese search index holds the words jieba cuts the text into; without the terms, 位置编码 is
    indexed only as 位置 and 编码, and a reader's search for the term finds nothing. The terms are the
    glossary's, the headings' and a reviewed list's (:func:`attnbook.book.search_words.search_words`).
    """
    if not config.attnbook_edition:
        return
    terms = search_words(english_book(Path(app.srcdir), config.attnbook_edition))
    path = Path(app.doctreedir) / "search_terms.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{term} 100000 n\n" for term in terms), encoding="utf-8")
    config.html_search_options = {**(config.html_search_options or {}), "dict": str(path)}


def site_interface(app, config) -> None:
    """The interface of the edition's language (:func:`attnbook.book.interface.install`); English: nothing."""
    interface.install(app, config, english_book(Path(app.srcdir), config.attnbook_edition))


def _static_path(app) -> None:
    app.config.html_static_path.append(str(Path(__file__).parent / "static"))


def _pybtex_backends_once() -> None:
    """Register pybtex's text backends under their own names, with pybtex's ``register_plugin``.

    sphinxcontrib-bibtex asks pybtex for its plaintext backend once for every
    citation (246 times in this book), and pybtex finds a plugin by reading
    the entry points of every installed package each time: seconds of every
    build. A plugin registered at run time is found first, so each is read
    once here; the classes are the ones pybtex would find.
    """
    from pybtex.plugin import find_plugin, register_plugin

    for name in ("plaintext", "docutils"):
        register_plugin("pybtex.backends", name, find_plugin("pybtex.backends", name), force=True)


def setup(app) -> dict:
    """Sphinx extension entry point (``sphinx.extra_extensions`` in ``_config.yml``)."""
    _pybtex_backends_once()
    # After Sphinx's own figure numbering (priority 500), before the pages are written.
    app.connect("env-get-updated", number_exercises_by_chapter, priority=900)
    app.add_config_value("attnbook_edition", "", "html", types=[str])
    app.connect("builder-inited", _static_path)
    app.connect("config-inited", search_dictionary)
    # Before sphinx-togglebutton writes its hints into the pages' scripts (default priority, 500).
    app.connect("config-inited", site_interface, priority=400)
    app.add_transform(EnglishSectionAnchors)
    app.add_post_transform(ExerciseTitles)
    app.add_node(exercise_caption, html=(visit_exercise_caption, depart_exercise_caption))
    app.connect("html-page-context", add_edition_switch)
    app.add_css_file("attnbook.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
