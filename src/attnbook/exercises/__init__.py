"""Checkers for the exercises: run a learner's function, explain the first mistake.

A :class:`Checker` knows a reference solution, a handful of :class:`Case` s
chosen to expose the usual mistakes, and those mistakes themselves, each as a
small wrong implementation with an explanation (:class:`Mistake`). Calling the
checker on a learner's function runs every case; at the first case whose
result is wrong it reports, in plain words, which case, what was expected, what
came back, and, when the wrong answer is exactly what a known mistake gives,
which mistake that is and how to fix it.

Each chapter's checkers live in the module named after the chapter's notebook,
for example ``attnbook.exercises.ch00_tensors`` for ``notebooks/00_tensors.ipynb``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Case", "Mistake", "Checker", "CheckResult", "compare", "format_number", "format_pair", "registry", "NOT_ATTEMPTED"]

#: The words that start a checker's answer to a stub (``...``, ``return None`` or
#: ``raise NotImplementedError``): an attempt cell stores this message, never a traceback.
NOT_ATTEMPTED = "not attempted yet"

_REGISTRY: dict[str, "Checker"] = {}


def registry() -> dict[str, "Checker"]:
    """Every checker defined so far, by name (import the chapter modules first)."""
    return dict(_REGISTRY)


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


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: Significant digits of a number in a checker's message: enough to tell a mistake from the answer, too few to
#: show the last bits of a float32 result, which differ from one CPU to the next (see book/reproducibility.md).
DIGITS = 4


def format_number(value, digits: int = DIGITS) -> str:
    """A float at ``digits`` significant digits; ints, NaN, infinities and non-numbers as they are."""
    if isinstance(value, float) and math.isfinite(value):
        text = f"{value:.{digits}g}"
        return text if any(c in text for c in ".e") else text + ".0"  # 1.0 reads as a float, as repr writes it
    return repr(value) if not isinstance(value, (int, float)) or isinstance(value, bool) else str(value)


def format_pair(expected, got) -> tuple[str, str]:
    """``expected`` and ``got`` for a message, at the same precision.

    :data:`DIGITS` significant digits, more (up to 6) only while the two would read the same, so that
    "expected 2.273, got 2.273" never appears; 6 digits still hide float32's last bits (about 1e-7).
    """
    for digits in range(DIGITS, 7):
        e, g = format_number(expected, digits), format_number(got, digits)
        if e != g:
            break
    return e, g


def _as_tensor_like(value):
    """Return (kind, value) where kind is 'torch', 'numpy' or None."""
    try:
        import torch

        if isinstance(value, torch.Tensor):
            return "torch"
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    try:
        import numpy as np

        if isinstance(value, np.ndarray):
            return "numpy"
    except ImportError:  # pragma: no cover
        pass
    return None


def compare(
    expected: Any, got: Any, atol: float = 1e-5, rtol: float = 1e-4, where: str = "the result", equal_nan: bool = False
) -> str | None:
    """Describe how ``got`` differs from ``expected``, or return ``None`` when they agree.

    Tensors and arrays are compared by type, shape, dtype kind and value (NaN
    equals nothing unless ``equal_nan``); sequences and dicts element by
    element; floats with tolerance; everything else with ``==``.
    """
    kind = _as_tensor_like(expected)
    if kind is not None:
        return _compare_arrays(kind, expected, got, atol, rtol, where, equal_nan)
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        return None if got == expected and type(got) is type(expected) else f"{where} should be {expected!r}, got {_short(got)}"
    if isinstance(expected, (int, float)):
        if _as_tensor_like(got) is not None and getattr(got, "ndim", None) == 0:
            got = got.item()
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return f"{where} should be a number, got {type(got).__name__}: {_short(got)}"
        if equal_nan and math.isnan(got) and math.isnan(expected):
            return None
        if math.isnan(got) or not math.isclose(got, expected, rel_tol=rtol, abs_tol=atol):
            e, g = format_pair(expected, got)
            return f"{where} should be {e}, got {g}"
        return None
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            return f"{where} should be a {type(expected).__name__} of {len(expected)} items, got {type(got).__name__}"
        if len(got) != len(expected):
            return f"{where} should have {len(expected)} items, got {len(got)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            problem = compare(e, g, atol, rtol, f"item {i} of {where}", equal_nan)
            if problem:
                return problem
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"{where} should be a dict, got {type(got).__name__}"
        if set(got) != set(expected):
            return f"{where} should have keys {sorted(map(str, expected))}, got {sorted(map(str, got))}"
        for key in expected:
            problem = compare(expected[key], got[key], atol, rtol, f"{where}[{key!r}]", equal_nan)
            if problem:
                return problem
        return None
    return None if got == expected else f"{where} should be {_short(expected)}, got {_short(got)}"


def _compare_arrays(kind: str, expected, got, atol: float, rtol: float, where: str, equal_nan: bool) -> str | None:
    if _as_tensor_like(got) != kind:
        wanted = "a torch.Tensor" if kind == "torch" else "a NumPy array"
        return f"{where} should be {wanted}, got {type(got).__name__}"
    if tuple(got.shape) != tuple(expected.shape):
        return f"{where} should have shape {tuple(expected.shape)}, got shape {tuple(got.shape)}"
    if kind == "torch":
        import torch

        if expected.dtype == torch.bool or got.dtype == torch.bool:
            if got.dtype != expected.dtype:
                return f"{where} should have dtype {expected.dtype}, got {got.dtype}"
            wrong = got != expected
        else:
            if expected.is_floating_point() != got.is_floating_point():
                return f"{where} should have dtype {expected.dtype}, got {got.dtype}"
            e, g = expected.detach().double(), got.detach().double()
            wrong = ~torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
        if wrong.any():
            index = tuple(int(i) for i in wrong.nonzero()[0])
            e, g = format_pair(expected[index].item(), got[index].item())
            return (
                f"{where} differs at index {index}: expected {e}, got {g} "
                f"({int(wrong.sum())} of {wrong.numel()} entries wrong)"
            )
        return None
    import numpy as np

    if expected.dtype == bool or got.dtype == bool:
        wrong = got != expected
    else:
        wrong = ~np.isclose(got.astype(float), expected.astype(float), rtol=rtol, atol=atol, equal_nan=equal_nan)
    if wrong.any():
        index = tuple(int(i) for i in np.argwhere(wrong)[0])
        e, g = format_pair(expected[index].item(), got[index].item())
        return (
            f"{where} differs at index {index}: expected {e}, got {g} "
            f"({int(wrong.sum())} of {wrong.size} entries wrong)"
        )
    return None


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
    """

    def __init__(
        self,
        name: str,
        reference: Callable,
        cases: list[Case],
        mistakes: list[Mistake],
        atol: float = 1e-5,
        rtol: float = 1e-4,
    ) -> None:
        if not cases:
            raise ValueError(f"checker {name!r} needs at least one case")
        self.name = name
        self.reference = reference
        self.cases = list(cases)
        self.mistakes = list(mistakes)
        self.atol = atol
        self.rtol = rtol
        _REGISTRY[name] = self

    def __repr__(self) -> str:
        return f"<Checker {self.name}: {len(self.cases)} cases, {len(self.mistakes)} known mistakes>"

    def _run(self, fn: Callable, case: Case):
        args = copy.deepcopy(case.args)
        kwargs = copy.deepcopy(case.kwargs)
        return fn(*args, **kwargs)

    def _diagnose(self, case: Case, got: Any) -> Mistake | None:
        for mistake in self.mistakes:
            try:
                wrong = self._run(mistake.fn, case)
            except Exception:  # a mistake may crash on some cases; then it is not this one
                continue
            if compare(wrong, got, self.atol, self.rtol, equal_nan=True) is None:
                return mistake
        return None

    def __call__(self, fn: Callable) -> CheckResult:
        if not callable(fn):
            return CheckResult(False, f"✗ {self.name}: expected a function, got {type(fn).__name__}")
        for number, case in enumerate(self.cases):
            expected = self._run(self.reference, case)
            try:
                got = self._run(fn, case)
            except NotImplementedError:
                return self._not_attempted("it raised NotImplementedError", case.name)
            except Exception as err:  # report, never crash the notebook
                return CheckResult(
                    False,
                    f"✗ {self.name}, case '{case.name}': it raised {type(err).__name__}: {err}",
                    case.name,
                )
            if got is None and expected is not None:
                if number == 0:  # a stub whose body is `...` (or `pass`) returns None
                    return self._not_attempted("it returned None", case.name)
                return CheckResult(
                    False,
                    f"✗ {self.name}, case '{case.name}': it returned None; did a `return` go missing on some path?",
                    case.name,
                )
            problem = compare(expected, got, self.atol, self.rtol)
            if problem is None:
                continue
            lines = [
                f"✗ {self.name}, case '{case.name}':",
                f"  {problem}",
                f"  expected: {_short(expected)}",
                f"  got:      {_short(got)}",
            ]
            mistake = self._diagnose(case, got)
            if mistake is not None:
                lines.append(f"  This is the mistake '{mistake.name}': {mistake.explanation}")
            return CheckResult(False, "\n".join(lines), case.name, mistake.name if mistake else None)
        return CheckResult(True, f"✓ {self.name}: all {len(self.cases)} cases pass.")

    def _not_attempted(self, why: str, case: str) -> CheckResult:
        return CheckResult(
            False,
            f"○ {self.name}: {NOT_ATTEMPTED} ({why}). Write your code in place of `...`, "
            "then run this cell again; the solution is folded below.",
            case,
        )
