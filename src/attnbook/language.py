"""The language the library speaks to the reader: English unless the notebook asks for another.

The checkers of the exercises (:mod:`attnbook.exercises`) print their verdicts in it. A notebook of the Chinese
edition starts with ``setup(language="zh")`` (:func:`attnbook.notebook.setup`), which sets it; the environment
variable ``ATTNBOOK_LANGUAGE`` presets it for a whole process (``ATTNBOOK_LANGUAGE=zh``), and :func:`set_language`
sets it from code. Nothing else of the library depends on it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

__all__ = ["LANGUAGES", "ENVIRONMENT", "current", "set_language", "speaking"]

#: The languages of the book: English, and the Chinese edition's simplified Chinese.
LANGUAGES = ("en", "zh")
#: The environment variable that presets the language of a process.
ENVIRONMENT = "ATTNBOOK_LANGUAGE"

_chosen: list[str | None] = [None]  # set by set_language; None: the environment's, else English


def _checked(language: str, where: str) -> str:
    if language not in LANGUAGES:
        raise ValueError(f"{where}: {language!r} is not a language of the book; choose one of {LANGUAGES}")
    return language


def current() -> str:
    """The language :func:`set_language` set (or ``setup(language=...)``), else ``ATTNBOOK_LANGUAGE``'s, else "en"."""
    if _chosen[0] is not None:
        return _chosen[0]
    preset = os.environ.get(ENVIRONMENT, "").strip()
    return _checked(preset, ENVIRONMENT) if preset else "en"


def set_language(language: str | None) -> None:
    """Speak ``language`` ("en" or "zh") from now on; ``None`` goes back to the environment's (or English)."""
    _chosen[0] = None if language is None else _checked(language, "language")


@contextmanager
def speaking(language: str | None):
    """Speak ``language`` inside the ``with`` block, and what was spoken before after it."""
    before = _chosen[0]
    set_language(language)
    try:
        yield
    finally:
        _chosen[0] = before
