"""The book's solution cells, known by what they do: a submitted copy of one is not the learner's answer.

Each exercise's solution is printed in its notebook, folded under the exercise. The definitions of every solution
cell are kept, as the notebooks have them, in ``book_solutions.json`` beside this module (written by
``python -m attnbook.book.solutions``, held in step by ``tests/test_book_solutions.py``); a checker compiles those
of its exercise with the Python that runs it and refuses a function with the same fingerprint (bytecode,
constants and names, whatever its name, file or line numbers: :func:`~.watching.fingerprint`), whether it is the
learner's function itself or something it calls.
"""

from __future__ import annotations

import ast
import dis
import functools
import json
import math
from pathlib import Path

import torch

from .watching import BOOK, fingerprint

__all__ = ["BOOK_COPY_INSTRUCTIONS", "book_copies"]


#: A copy of a solution cell is refused only when it is longer than the answer anyone might write the same way: two
#: statements or more, or this many instructions (a one-line formula, in the stub's own names, may well be the
#: learner's, letter for letter).
BOOK_COPY_INSTRUCTIONS = 40


def book_copies(exercise: str) -> dict:
    """``{fingerprint: BOOK}`` for the functions of the exercise's solution cell (``book_solutions.json``, written
    from the notebooks by ``python -m attnbook.book.solutions``), compiled by this Python; those too short to tell
    a copy from a learner's own answer are left out (:data:`BOOK_COPY_INSTRUCTIONS`)."""
    found = {}
    for source in _book_solutions().get(exercise, {}).get("definitions", []):
        namespace: dict = {"torch": torch, "math": math}  # what a default argument may name
        exec(compile(source, f"<the book's solution of {exercise}>", "exec"), namespace)
        (function,) = [v for k, v in namespace.items() if k not in ("__builtins__", "torch", "math")]
        (node,) = ast.parse(source).body
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        steps = sum(1 for i in dis.get_instructions(function.__code__) if i.opname not in ("CACHE", "RESUME", "NOP"))
        if len(body) >= 2 or steps >= BOOK_COPY_INSTRUCTIONS:
            found[fingerprint(function.__code__)] = BOOK
    return found


@functools.cache
def _book_solutions() -> dict:
    path = Path(__file__).with_name("book_solutions.json")
    return json.loads(path.read_text(encoding="utf-8"))["solutions"] if path.is_file() else {}
