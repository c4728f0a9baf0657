"""Section anchors of a translated edition: the English heading's, readable and stable.

Docutils makes a section's anchor from the ASCII letters of its title. A Chinese title has none, so every
section of the Chinese edition was ``#id3``, ``#id17``: numbers drawn in the order the page made its
targets, which a heading or a citation added above renumbers, breaking every link to the sections below.
:class:`EnglishSectionAnchors` gives each section of a translated page the anchor the English edition
gives the same section, made from the English heading: ``#attention-pooling-a-lookup-that-blends``.
Anchors are then as stable as the English headings, and a link keeps its fragment from one edition to
the other (the edition switch at the top of every page links page to page).

The translation keeps the English page's blocks one for one (``tests/test_edition.py``), so the n-th
heading of the translated source is the n-th heading of the English one, and the n-th section of the
page. A page whose sections and English headings do not pair up keeps docutils' anchors and gets a
warning (which fails the strict build). Labels (``(sec-name)=``) stay anchors of their sections, as in
English.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

from attnbook.book.edition import english_book, split_blocks

__all__ = ["EnglishSectionAnchors", "headings", "heading_anchor", "section_anchors"]

logger = logging.getLogger(__name__)

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})")
_INCLUDE = re.compile(r"^\s*(?:`{3,}|:{3,})\{include\}\s+(\S+)")
#: Docutils' anchors for a target without a name of ASCII letters.
AUTOMATIC = re.compile(r"id\d+")

#: Inline Markdown and MyST reduced to the text a heading shows: $math$, `code`, roles, links, emphasis.
_INLINE = (
    (re.compile(r"\{[\w:.-]+\}`([^`]*)`"), r"\1"),
    (re.compile(r"`([^`]*)`"), r"\1"),
    (re.compile(r"\$([^$]+)\$"), r"\1"),
    (re.compile(r"!?\[([^\]]*)\]\([^)]*\)"), r"\1"),
    (re.compile(r"<[^>]+>"), ""),
    (re.compile(r"(\*\*|__)(.+?)\1"), r"\2"),
    (re.compile(r"(?<![\w*])([*_])(?!\s)(.+?)(?<!\s)\1(?![\w*])"), r"\2"),
    (re.compile(r"\\([!-/:-@\[-`{-~])"), r"\1"),
)


def headings(markdown: str, folder: Path | None = None) -> list[str]:
    """The headings of a Markdown text (``#`` lines outside fenced blocks), as their text.

    With ``folder`` (where the text's file is), the headings of the files its ``{include}`` directives
    bring in count too, where they stand: they are sections of the page.
    """
    found = []
    for block in split_blocks(markdown)[0]:
        first = block.split("\n", 1)[0]
        included = _INCLUDE.match(first)
        if included and folder is not None:
            path = folder / included.group(1)
            found += headings(path.read_text(encoding="utf-8"), path.parent)
            continue
        if _FENCE.match(first):
            continue  # a code block or a directive: its headings are no sections of the page
        for line in block.split("\n"):
            heading = _HEADING.match(line)
            if heading:
                found.append(heading.group(2))
    return found


def source_headings(path: Path) -> list[str]:
    """The headings of a page of the book, a notebook's markdown cells or a Markdown file, in order."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        texts = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    else:
        texts = [re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)]  # front matter is no heading
    return [heading for text in texts for heading in headings(text, path.parent)]


def heading_anchor(heading: str) -> str:
    """The anchor docutils makes from a heading's Markdown: "Attention pooling: a lookup" -> attention-pooling-a-lookup.

    The Markdown is first reduced to the text the heading shows, as MyST renders it.
    """
    text = heading
    for pattern, replacement in _INLINE:
        text = pattern.sub(replacement, text)
    return nodes.make_id(nodes.fully_normalize_name(text))


def section_anchors(english_headings: list[str]) -> list[str]:
    """The anchor of each section, from its English heading; a repeated one gets ``-2``, ``-3``, ...

    Each anchor depends on its own heading and the same headings above it only, so adding a heading
    elsewhere moves no other section's anchor.
    """
    anchors, seen = [], set()
    for heading in english_headings:
        anchor = heading_anchor(heading) or "section"
        candidate, n = anchor, 1
        while candidate in seen:
            n += 1
            candidate = f"{anchor}-{n}"
        seen.add(candidate)
        anchors.append(candidate)
    return anchors


class EnglishSectionAnchors(SphinxTransform):
    """In a translated edition (``attnbook_edition`` set), give each section its English heading's anchor."""

    # After docutils has named the sections, before Sphinx collects the page's table of contents.
    default_priority = 250

    def apply(self, **kwargs) -> None:
        edition = self.config.attnbook_edition
        if not edition:
            return
        source = Path(self.env.doc2path(self.env.docname))
        relative = source.relative_to(self.env.srcdir)
        english = english_book(Path(self.env.srcdir), edition) / relative
        if not english.is_file():
            return
        sections = [s for s in self.document.findall(nodes.section) if s.children and isinstance(s[0], nodes.title)]
        english_headings = source_headings(english)
        if len(sections) != len(english_headings):
            logger.warning(
                f"{relative}: {len(sections)} sections but {len(english_headings)} English headings; "
                "its sections keep docutils' anchors",
                location=self.env.docname,
            )
            return
        drawn = {id(section): self.forget_drawn_ids(section) for section in sections}
        for section, anchor in zip(sections, section_anchors(english_headings)):
            if self.document.ids.get(anchor, section) is not section:
                logger.warning(f"the anchor #{anchor} is taken on this page", location=section)
                anchor = drawn[id(section)][0] if drawn[id(section)] else ""
            if anchor:
                self.give(section, anchor, drawn[id(section)])

    def forget_drawn_ids(self, section: nodes.section) -> list[str]:
        """Take away the ids docutils drew from the section's title (or numbered), labels' ids kept; returns them."""
        document = self.document
        title = section[0].astext()
        from_title = nodes.make_id(nodes.fully_normalize_name(title))
        explicit = {document.nameids.get(name) for name in section["names"] if document.nametypes.get(name)}
        drawn = [i for i in section["ids"] if (AUTOMATIC.fullmatch(i) or i == from_title) and i not in explicit]
        section["ids"] = [i for i in section["ids"] if i not in drawn]
        for old in drawn:
            if document.ids.get(old) is section:
                del document.ids[old]
        return drawn

    def give(self, section: nodes.section, anchor: str, drawn: list[str]) -> None:
        """Make ``anchor`` the section's first id, and the name its title gave lead to it."""
        section["ids"] = [anchor, *(i for i in section["ids"] if i != anchor)]
        self.document.ids[anchor] = section
        for name, target in list(self.document.nameids.items()):
            if target in drawn:
                self.document.nameids[name] = anchor
