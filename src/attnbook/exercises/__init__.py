"""Checkers for the exercises: run a learner's function, explain the first mistake.

A :class:`Checker` knows a reference solution, a handful of :class:`Case` s
chosen to expose the usual mistakes, and those mistakes themselves, each as a
small wrong implementation with an explanation (:class:`Mistake`). Calling the
checker on a learner's function runs every case; at the first case whose
result is wrong it reports, in plain words, which case, what was expected, what
came back, and, when the wrong answer is exactly what a known mistake gives,
which mistake that is and how to fix it.

An exercise that asks for something the library, PyTorch, d2l or sacreBLEU
already packages lists those answers in ``forbidden``. While the learner's
function runs, :func:`watch` records what it calls by identity (code objects
through the interpreter's call events, PyTorch operators through PyTorch's
function and dispatch modes), so the packaged answer is refused however it was
reached, and the checker reports the mistake :data:`LIBRARY_MISTAKE`, naming
what was called. Requirements the text states (no Python loop, a cache, a state
of fixed size) are checked after the cases (``loop_free``, ``requirements``).

Four threads of the watch go beyond the packaged answer: work handed to another thread or process is refused
(:data:`THREAD_MISTAKE`); the solution that ships with a checker, or a copy of it, is refused when it is submitted
(:data:`SOLUTION_MISTAKE`; :meth:`Checker.verify` is the tests' way to check the solution); a copy of a refused
function under a new code object is known by its bytecode; and the watch watches itself, reporting a hook, a mode
or a table switched off or changed as :data:`WATCH_MISTAKE`.

The machinery is split by job: :mod:`.checking` runs the cases and gives the verdict, :mod:`.verdicts` words it,
:mod:`.watching` watches a call, :mod:`.measuring` measures the requirements stated as work or memory (a cache, a
state of fixed size), :mod:`.reporting` compares and prints numbers, :mod:`.answers` names the packaged answers, and
:mod:`.wording` says every message in the reader's language (:mod:`attnbook.language`: English, or Chinese in the
Chinese edition, whose notebooks call ``setup(language="zh")``).

Each chapter's checkers live in the module named after the chapter's notebook,
for example ``attnbook.exercises.ch00_tensors`` for ``notebooks/00_tensors.ipynb``; a checker too long to share
a module has its own, named after the chapter too (``ch08_cross_attention_cache``), and the chapter's module
exports it with the others.
"""

from __future__ import annotations

from .answers import (
    CROSS_ENTROPY,
    FUSED_ATTENTION,
    LOG_SOFTMAX_HOMES,
    NO_MODEL,
    PYTORCH_ATTENTION,
    THREADS,
    refusing,
)
from .checking import (
    LIBRARY_MISTAKE,
    LOOP_MISTAKE,
    NOT_ATTEMPTED,
    SOLUTION_MISTAKE,
    THREAD_MISTAKE,
    WATCH_MISTAKE,
    Case,
    Checker,
    CheckResult,
    ForbiddenCall,
    Mistake,
    registry,
    seeded_randn,
)
from .reporting import DIGITS, as_number, compare, format_number, format_pair
from .watching import Record, Refusals, watch

__all__ = [
    "Case",
    "Mistake",
    "Checker",
    "CheckResult",
    "ForbiddenCall",
    "compare",
    "as_number",
    "Refusals",
    "Record",
    "watch",
    "LOOP_MISTAKE",
    "FUSED_ATTENTION",
    "PYTORCH_ATTENTION",
    "CROSS_ENTROPY",
    "LOG_SOFTMAX_HOMES",
    "NO_MODEL",
    "THREADS",
    "refusing",
    "format_number",
    "format_pair",
    "registry",
    "DIGITS",
    "LIBRARY_MISTAKE",
    "NOT_ATTEMPTED",
    "SOLUTION_MISTAKE",
    "THREAD_MISTAKE",
    "WATCH_MISTAKE",
    "seeded_randn",
]
