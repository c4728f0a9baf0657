"""The titles of exercises and solutions in the word order of the edition's language.

sphinx-exercise composes its titles in English order: "Exercise 0.1 (A title)", and "Solution to" followed
by a link "Exercise 0.1 (A title)". Its catalogues translate the words but cannot move them, so the Chinese
edition read "解答 练习 0.1 (…)", with half-width parentheses and, where Sphinx adds a space after the
number, two spaces. In an edition whose language is not English, :class:`ExerciseTitles` composes both
titles from patterns of the ``attnbook`` gettext domain (``locales/<language>/LC_MESSAGES/interface/
attnbook.po``; see :mod:`attnbook.book.interface`):

    "%(exercise)s (%(title)s)"   ->  "%(exercise)s（%(title)s）"   练习 0.1（永不溢出的 log-softmax）
    "Solution to %(exercise)s"   ->  "%(exercise)s 的解答"          练习 0.1 的解答

``%(exercise)s`` is the exercise's label and number as ``numfig_format`` writes it ("练习 0.1"); in a
solution's title it links to the exercise. The exercise's number keeps its ``caption-number`` span, now
without the trailing space Sphinx's HTML writer puts inside it (:class:`exercise_caption` writes the title
itself). The English edition keeps sphinx-exercise's own titles.
"""

from __future__ import annotations

import re
from html import escape

from docutils import nodes
from sphinx.locale import get_translator
from sphinx.transforms.post_transforms import SphinxPostTransform

__all__ = ["ExerciseTitles", "exercise_caption", "compose", "EXERCISE_PATTERN", "SOLUTION_PATTERN"]

#: The patterns, in English; the edition's catalogue gives their order in its language.
EXERCISE_PATTERN = "%(exercise)s (%(title)s)"
SOLUTION_PATTERN = "Solution to %(exercise)s"

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def _(pattern: str) -> str:
    """``pattern`` in the build's language, from the ``attnbook`` domain (the English one where it has none)."""
    return get_translator("attnbook").gettext(pattern)


class exercise_caption(nodes.title):
    """An exercise's title whose number the title writes itself (``number``), with no space after it."""


def visit_exercise_caption(self, node: exercise_caption) -> None:
    self.body.append(self.starttag(node, "p", "", CLASS="admonition-title"))
    if node.get("number"):
        self.body.append(f'<span class="caption-number">{escape(node["number"])}</span>')


def depart_exercise_caption(self, node: exercise_caption) -> None:
    self.body.append("</p>\n")


def compose(pattern: str, parts: dict[str, list[nodes.Node]]) -> list[nodes.Node]:
    """The nodes of ``pattern``: its text between placeholders, and each ``%(name)s`` replaced by ``parts[name]``."""
    out: list[nodes.Node] = []
    position = 0
    for found in _PLACEHOLDER.finditer(pattern):
        if found.start() > position:
            out.append(nodes.Text(pattern[position : found.start()]))
        out += parts[found.group(1)]
        position = found.end()
    if position < len(pattern):
        out.append(nodes.Text(pattern[position:]))
    return out


class ExerciseTitles(SphinxPostTransform):
    """Compose exercise and solution titles from the ``attnbook`` catalogue's patterns (editions not in English).

    Runs before sphinx-exercise resolves its titles (priorities 20 and 21), which then leaves the titles
    it no longer recognises as its own.
    """

    default_priority = 19
    formats = ("html",)

    def is_supported(self) -> bool:
        language = self.config.language or "en"
        used = "sphinx_exercise" in self.app.extensions
        return used and super().is_supported() and not language.startswith("en")

    def run(self, **kwargs) -> None:
        from sphinx_exercise.nodes import (
            exercise_enumerable_node,
            exercise_node,
            exercise_subtitle,
            exercise_title,
            solution_node,
            solution_title,
        )

        for node in list(self.document.findall(exercise_node)) + list(self.document.findall(exercise_enumerable_node)):
            title = node.children[0] if node.children else None
            if not isinstance(title, exercise_title):
                continue
            subtitle = next((c for c in title.children if isinstance(c, exercise_subtitle)), None)
            number = self.exercise_number(node) if isinstance(node, exercise_enumerable_node) else ""
            label = number or title.children[0].astext()
            caption = exercise_caption("", number=number)
            leading = [] if number else [nodes.Text(label)]
            if subtitle is None:
                caption += leading
            else:
                caption += compose(_(EXERCISE_PATTERN), {"exercise": leading, "title": list(subtitle.children)})
            node.children[0] = caption
            caption.parent = node
            node.resolved_title = True

        if self.config.exercise_style == "solution_follow_exercise":
            return  # a bare "Solution", in every language
        from sphinx_exercise.post_transforms import build_reference_node

        registry = getattr(self.env, "sphinx_exercise_registry", {})
        for node in self.document.findall(solution_node):
            title = node.children[0] if node.children else None
            target = registry.get(node.get("target_label"), {}).get("node")
            if not isinstance(title, solution_title) or target is None:
                continue
            if isinstance(target, exercise_enumerable_node):
                name = self.exercise_number(target)
            else:
                name = target.children[0].children[0].astext()
            link = build_reference_node(self.app, target)
            link += nodes.Text(name)
            heading = nodes.title()
            heading += compose(_(SOLUTION_PATTERN), {"exercise": [link]})
            node.children[0] = heading
            heading.parent = node
            node["title"] = heading.astext()
            node.resolved_title = True

    def exercise_number(self, node) -> str:
        """ "练习 0.1": the exercise's number (per chapter, :func:`attnbook.book.sphinx.number_exercises_by_chapter`)
        as ``numfig_format`` writes it; empty if it has none."""
        docname = node.get("docname") or self.env.docname
        number = self.env.toc_fignumbers.get(docname, {}).get("exercise", {}).get(node["ids"][0] if node["ids"] else "")
        if not number:
            return ""
        return self.config.numfig_format["exercise"] % ".".join(map(str, number))
