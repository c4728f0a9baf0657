"""Checking a learner's function: run it on cases, watched, and explain the first mistake in plain words."""

from __future__ import annotations

import contextlib
import copy
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from . import answers, reporting, watching
from . import verdicts as said
from .answers import THREADS, refusing
from .copies import book_copies
from .reporting import _short, compare
from .verdicts import LIBRARY_MISTAKE, LOOP_MISTAKE, NOT_ATTEMPTED, SOLUTION_MISTAKE, THREAD_MISTAKE, WATCH_MISTAKE
from .watching import BOOK, Record, Refusals, _is_library, kind_of, watch
from .wording import english, say

__all__ = [
    "Case",
    "Mistake",
    "Checker",
    "CheckResult",
    "ForbiddenCall",
    "registry",
    "seeded_randn",
    "NOT_ATTEMPTED",
    "LIBRARY_MISTAKE",
    "LOOP_MISTAKE",
    "THREAD_MISTAKE",
    "SOLUTION_MISTAKE",
    "WATCH_MISTAKE",
]

_REGISTRY: dict[str, "Checker"] = {}


def registry() -> dict[str, "Checker"]:
    """Every checker defined so far, by name (import the chapter modules first)."""
    return dict(_REGISTRY)


def seeded_randn(seed: int, dtype=None):
    """A ``randn(*shape, scale=1.0)`` drawing from its own generator seeded with ``seed``.

    Each chapter's module builds its cases' random inputs with one, so that
    they are the same in every run and whatever other module was imported first.
    """
    import torch

    generator = torch.Generator().manual_seed(seed)

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=generator, dtype=dtype) * scale

    return randn


@dataclass
class Case:
    """One input to try, named for what it tests (``"a row that is all padding"``)."""

    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


@dataclass
class Mistake:
    """A typical wrong answer: an implementation that makes it, and what to do instead."""

    name: str
    explanation: str
    fn: Callable


@dataclass
class CheckResult:
    """The verdict; truthy when every case passed. Its ``repr`` is the message."""

    passed: bool
    message: str
    case: str | None = None
    mistake: str | None = None

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


class ForbiddenCall(RuntimeError):
    """Kept for code that catches it; the checkers now record a refused call instead of raising."""


class Checker:
    """Checks a learner's function against a reference on cases that expose mistakes.

    Parameters
    ----------
    name:
        The function the exercise asks for, as the learner would call it.
    reference:
        A correct implementation (the solution).
    cases:
        Inputs to try, in order: simple first, tricky last.
    mistakes:
        Wrong implementations with explanations; used to name what went wrong
        and, by the tests, to prove the checker catches them.
    atol, rtol:
        Tolerances for floating-point results.
    forbidden:
        The packaged versions of what the exercise asks for, as dotted names
        (``"attnbook.positional.sinusoidal_table"``, ``"torch.nn.GRUCell"``,
        ``"torch.ops.aten._log_softmax"``, ``"d2l.*"`` for a whole package), each
        mapped to a function that answers the exercise by calling it (the
        planted mistake the tests try) or to ``None``. ``refuses`` adds more
        names (or groups of names, such as :data:`FUSED_ATTENTION`) without a
        planted answer; the cheating learner's test tries them. They are refused by
        identity (see :class:`Refusals` and :func:`watch`): however the learner's
        function reaches one, the checker reports :data:`LIBRARY_MISTAKE` and
        names what was called.
    loop_free:
        ``(what, make_case)`` when the text asks for no Python loop: ``make_case(n)``
        is a case of size ``n`` along ``what`` (``"positions"``); the learner's
        function must do as many steps (operations dispatched plus lines of its own
        Python run) for ``n`` = 4 as for ``n`` = 12, or the checker reports
        :data:`LOOP_MISTAKE`. ``looped`` is a correct implementation with a loop,
        the planted mistake the tests try.
    requirements:
        Further checks of what the text asks, each ``check(fn) -> (mistake, message)``
        or ``None``, run once every case passes (a step that must use its cache, a
        state of fixed size).
    """

    def __init__(
        self,
        name: str,
        reference: Callable,
        cases: list[Case],
        mistakes: list[Mistake],
        atol: float = 1e-5,
        rtol: float = 1e-4,
        forbidden: dict[str, Callable | None] | None = None,
        refuses: tuple = (),
        loop_free: tuple[str, Callable[[int], Case]] | None = None,
        looped: Callable | None = None,
        requirements: list[Callable] | None = None,
    ) -> None:
        if not cases:
            raise ValueError(f"checker {name!r} needs at least one case")
        self.name = name
        self.reference = reference
        self.cases = list(cases)
        self.mistakes = list(mistakes)
        self.atol = atol
        self.rtol = rtol
        self.forbidden = refusing(forbidden or {}, *refuses, THREADS)
        self.refusals = Refusals(self.forbidden, copies=book_copies(name))  # fails at import on a misspelt name
        self.loop_free = loop_free
        self.looped = looped
        self.requirements = list(requirements or [])
        _REGISTRY[name] = self
        _SEALS[id(self)] = _seal(self)

    def __repr__(self) -> str:
        return f"<Checker {self.name}: {len(self.cases)} cases, {len(self.mistakes)} known mistakes>"

    def _run(self, fn: Callable, case: Case, record: Record | None = None):
        """``fn`` on a copy of the case; with a ``record``, watched while it runs (see :meth:`_watch`)."""
        args = copy.deepcopy(case.args)
        kwargs = copy.deepcopy(case.kwargs)
        with self._watch(record):
            return fn(*args, **kwargs)

    def _watch(self, record: Record | None):
        """The block in which a learner's code runs: watched for refused calls when ``record`` is given."""
        return watch(self.refusals, record=record) if record is not None else contextlib.nullcontext()

    def _diagnose(self, case: Case, got: Any) -> Mistake | None:
        for mistake in self.mistakes:
            try:
                wrong = self._run(mistake.fn, case)
            except Exception:  # a mistake may crash on some cases; then it is not this one
                continue
            if compare(wrong, got, self.atol, self.rtol, equal_nan=True) is None:
                return mistake
        return None

    def _library_used(self, case: Case, hits: list[tuple[str, str]]) -> CheckResult:
        called, answer = hits[0]
        said_as = dict(name=self.name, case=case.name, called=called, answer=answer, mistake=LIBRARY_MISTAKE)
        if answer == "torch.nn.Module.__init__":
            message = say(said.BUILT_A_MODULE, **said_as)
        elif answer.endswith(".*"):  # a whole package
            message = say(said.CALLED_FROM_PACKAGE, **said_as, package=answer[:-2])
        else:
            message = say(said.CALLED_AS if called != answer else said.CALLED, **said_as)
        return CheckResult(False, message, case.name, LIBRARY_MISTAKE)

    def steps(self, fn: Callable, n: int, record: Record | None = None) -> tuple[int, int]:
        """(operations dispatched, lines of the learner's own Python run) by ``fn`` on the case of size ``n``."""
        case = self.loop_free[1](n)
        args = copy.deepcopy(case.args)
        kwargs = copy.deepcopy(case.kwargs)
        with watch(self.refusals if record is not None else None, count_lines=True, record=record) as seen:
            fn(*args, **kwargs)
        return seen.ops, seen.lines

    def _check_loop(self, fn: Callable, own: bool = False) -> CheckResult | None:
        what, _ = self.loop_free
        small, large = 4, 12
        record = Record()
        try:
            few = self.steps(fn, small, record)
            record.ops = record.lines = 0
            many = self.steps(fn, large, record)
        except Exception as err:
            refused = self._refused(Case(english(said.LOOP_CASE, count=large, what=what)), record, own)
            if refused is not None:
                return refused
            error = dict(error=type(err).__name__, message=err)
            return CheckResult(False, say(said.LOOP_RAISED, name=self.name, what=what, **error))
        refused = self._refused(Case(english(said.LOOP_CASE, count=large, what=what)), record, own)
        if refused is not None:
            return refused
        if sum(many) <= sum(few) + 2:
            return None
        counts = dict(few_ops=few[0], few_lines=few[1], small=small, many_ops=many[0], many_lines=many[1], large=large)
        message = say(said.LOOP, name=self.name, what=what, **counts, mistake=LOOP_MISTAKE)
        return CheckResult(False, message, None, LOOP_MISTAKE)

    def __call__(self, fn: Callable) -> CheckResult:
        return self._verdict(fn, own=False)

    def verify(self, fn: Callable | None = None) -> CheckResult:
        """The verdict on the checker's own solution (``fn`` left out) or on one of its planted functions (a
        mistake, the looped answer, a planted call of a packaged answer): the same check as a learner's, except
        that the checker's own code may run. The tests' entry point; any other function is refused."""
        fn = self.reference if fn is None else fn
        planted = [self.reference, self.looped, *(m.fn for m in self.mistakes), *self.forbidden.values()]
        if not any(fn is known for known in planted if known is not None):
            raise ValueError(f"{self.name}.verify checks the checker's own functions only; call the checker instead")
        return self._verdict(fn, own=True)

    def _verdict(self, fn: Callable, own: bool) -> CheckResult:
        if not callable(fn):
            return CheckResult(False, say(said.NOT_A_FUNCTION, name=self.name, kind=type(fn).__name__))
        changed = self._changed()
        if changed:
            return self._tampered(changed)
        result = self._cases(fn, own)
        changed = self._changed()
        if changed:
            return self._tampered(changed)
        if result is not None:
            return result
        if self.loop_free is not None:
            looped = self._check_loop(fn, own)
            if looped is not None:
                return looped
        for requirement in self.requirements:
            found = requirement(fn)
            if found is not None:
                mistake, message = found
                return CheckResult(
                    False, say(said.UNMET, name=self.name, message=message, mistake=mistake), None, mistake
                )
        return CheckResult(True, say(said.PASSED, name=self.name, count=len(self.cases)))

    def _cases(self, fn: Callable, own: bool) -> CheckResult | None:
        """The first case ``fn`` fails, as a verdict, or ``None`` when it passes them all."""
        solution: list = []  # (case, what ran): judged once every case passes, since a planted mistake is right on some
        for number, case in enumerate(self.cases):
            expected = self._run(self.reference, case)
            record = Record()
            try:
                got = self._run(fn, case, record)
            except Exception as err:  # report, never crash the notebook
                refused = self._refused(case, record, own)
                if refused is not None:  # a refused call, then an error on the way out
                    return refused
                if isinstance(err, NotImplementedError) and _raised_by_the_learner(err):
                    return self._not_attempted(said.RAISED_NOT_IMPLEMENTED, case.name)
                return CheckResult(False, _raised(self.name, case.name, err), case.name)
            refused = self._refused(case, record, own)
            if refused is not None:
                return refused
            if got is None and expected is not None:
                if number == 0:  # a stub whose body is `...` (or `pass`) returns None
                    return self._not_attempted(said.RETURNED_NOTHING, case.name)
                return CheckResult(False, say(said.RETURNED_NONE, name=self.name, case=case.name), case.name)
            problem = compare(expected, got, self.atol, self.rtol)
            if problem is None:
                solution += [(case, called, answer) for called, answer in record.hits if kind_of(answer) == "solution"]
                continue
            shown = dict(name=self.name, case=case.name, problem=problem, expected=_short(expected), got=_short(got))
            mistake = self._diagnose(case, got)
            if mistake is None:
                return CheckResult(False, say(said.WRONG, **shown), case.name, None)
            known = dict(mistake=mistake.name, explanation=mistake.explanation)
            return CheckResult(False, say(said.WRONG_KNOWN, **shown, **known), case.name, mistake.name)
        if solution and not own:
            return self._solution_used(*solution[0])
        return None

    def _refused(self, case: Case, record: Record, own: bool) -> CheckResult | None:
        """The verdict on what the watch saw (tampering, then a packaged answer, then work elsewhere), if any.
        The checker's own solution is judged later: a wrong answer that ran a planted mistake is that mistake."""
        if record.tampered:
            return self._tampered(record.tampered)
        hits = [(called, answer) for called, answer in record.hits if kind_of(answer) == "library"]
        if hits:
            return self._library_used(case, hits)
        hits = [(called, answer) for called, answer in record.hits if kind_of(answer) in ("thread", "process")]
        if hits:
            return self._elsewhere(case, hits)
        return None

    def _changed(self) -> list[str]:
        """What of the checker itself differs from what it was built as (its code, its tables, its settings)."""
        seal = _SEALS.get(id(self))
        if seal is None or _seal(self) != seal:
            return [said.CHECKER_CHANGED]
        if not self.refusals.intact():
            return [said.TABLE_CHANGED]
        return []

    def _tampered(self, what: list[str]) -> CheckResult:
        message = say(said.TAMPERED, name=self.name, what="; ".join(what), mistake=WATCH_MISTAKE)
        return CheckResult(False, message, None, WATCH_MISTAKE)

    def _elsewhere(self, case: Case, hits: list[tuple[str, str]]) -> CheckResult:
        called, answer = hits[0]
        where = said.IN_A_PROCESS if kind_of(answer) == "process" else said.IN_A_THREAD
        message = say(where, name=self.name, case=case.name, called=called, mistake=THREAD_MISTAKE)
        return CheckResult(False, message, case.name, THREAD_MISTAKE)

    def _solution_used(self, case: Case, called: str, answer: str) -> CheckResult:
        if answer == BOOK:  # the verdict a solution cell shows in the book: right, and not the learner's
            message = say(said.BOOK_SOLUTION, name=self.name, count=len(self.cases))
            return CheckResult(False, message, case.name, SOLUTION_MISTAKE)
        message = say(said.OWN_SOLUTION, name=self.name, case=case.name, called=called, mistake=SOLUTION_MISTAKE)
        return CheckResult(False, message, case.name, SOLUTION_MISTAKE)

    def _not_attempted(self, why: str, case: str) -> CheckResult:
        return CheckResult(False, say(said.UNATTEMPTED, name=self.name, why=why), case)


def _raised_by_the_learner(err: BaseException) -> bool:
    """Whether ``err`` was raised by the learner's own code (a stub's ``raise NotImplementedError``), not deep
    inside a library that the learner's code called (which is reported as the error it is)."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return True
    last = frames[-1].filename
    return not _is_library(last) and not last.startswith(watching._HERE)


def _raised(name: str, case: str, err: BaseException) -> str:
    """The verdict on an error, with where a library raised it if one did (``torch/nn/attention/...``, line 12)."""
    error = dict(name=name, case=case, error=type(err).__name__, message=err)
    frames = traceback.extract_tb(err.__traceback__)
    if not frames or not _is_library(frames[-1].filename):
        return say(said.RAISED, **error)
    parts = frames[-1].filename.replace("\\", "/").split("/")
    for top in ("site-packages", "attnbook", "lib"):
        if top in parts:
            parts = parts[len(parts) - parts[::-1].index(top) :]
            break
    return say(said.RAISED_IN, **error, path="/".join(parts[-4:]), line=frames[-1].lineno)


_SEALS: dict = {}  # id(checker) -> what it was built as (see _seal)


def _seal(checker: Checker) -> tuple:
    """What a checker is made of, by identity: its class's methods (and its bases'), its settings, and the
    functions and classes of the modules that watch and compare; a change of any of them is tampering."""
    methods = tuple(
        (cls.__name__, name, id(value))
        for cls in type(checker).__mro__
        for name, value in vars(cls).items()
        if callable(value) or isinstance(value, (staticmethod, classmethod, property))
    )
    settings = tuple((name, id(value)) for name, value in vars(checker).items())
    modules = tuple(
        (module.__name__, name, id(value))
        for module in (sys.modules[__name__], watching, reporting, answers)
        for name, value in vars(module).items()
        if callable(value) and not name.startswith("__")
    )
    return methods, settings, modules
