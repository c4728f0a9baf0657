"""The glossary's terms: the (English, Chinese) pairs of ``book/glossary.md``.

The Chinese edition checks its translations against them (:mod:`attnbook.book.edition`),
and the Chinese search learns them as words (:mod:`attnbook.book.search_words`).
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["glossary_terms"]


def glossary_terms(base: Path) -> list[tuple[str, str]]:
    """(English, Chinese) pairs from the table of ``book/glossary.md``; "query, key, value" gives three."""
    pairs = []
    text = (base / "book" / "glossary.md").read_text(encoding="utf-8")
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("English", "") or set(cells[0]) <= {"-"}:
            continue
        english = [e.strip() for e in cells[0].split(",")]
        chinese = [re.sub(r"（.*?）", "", c).strip() for c in re.split(r"[、,]", cells[1])]
        if len(english) == len(chinese):
            pairs += list(zip(english, chinese, strict=True))
    return pairs
