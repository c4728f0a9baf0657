"""What the book's gettext catalogues share, whoever keeps them (:mod:`attnbook.book.edition` for the prose, the
code's comments and the diagrams; :mod:`attnbook.book.feedback` for what the checkers print)."""

from __future__ import annotations

__all__ = ["set_translation"]


def set_translation(entry, item: dict) -> None:
    """An imported translation (``item``: ``zh``, optionally ``comment``) into its catalogue entry, revised: no
    longer fuzzy."""
    entry.msgstr = item["zh"]
    if "comment" in item:
        entry.tcomment = item["comment"]
    if "fuzzy" in entry.flags:
        entry.flags.remove("fuzzy")
        entry.previous_msgid = None
