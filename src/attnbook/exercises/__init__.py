"""Checkers for the exercises: run a learner's function, explain the first mistake.

A :class:`Checker` knows a reference solution, a handful of :class:`Case` s
chosen to expose the usual mistakes, and those mistakes themselves, each as a
small wrong implementation with an explanation (:class:`Mistake`). Calling the
checker on a learner's function runs every case; at the first case whose
result is wrong it reports, in plain words, which case, what was expected, what
came back, and, when the wrong answer is exactly what a known mistake gives,
which mistake that is and how to fix it.

An exercise that asks for something the library (or PyTorch) already packages
lists those names in ``forbidden``: while the learner's function runs, each of
them answers with a clear message instead of computing (see :func:`forbid`),
and the checker reports the mistake :data:`LIBRARY_MISTAKE`.

Each chapter's checkers live in the module named after the chapter's notebook,
for example ``attnbook.exercises.ch00_tensors`` for ``notebooks/00_tensors.ipynb``.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = [
    "Case",
    "Mistake",
    "Checker",
    "CheckResult",
    "ForbiddenCall",
    "compare",
    "forbid",
    "format_number",
    "format_pair",
    "registry",
    "LIBRARY_MISTAKE",
    "NOT_ATTEMPTED",
]

#: The words that start a checker's answer to a stub (``...``, ``return None`` or
#: ``raise NotImplementedError``): an attempt cell stores this message, never a traceback.
NOT_ATTEMPTED = "not attempted yet"

_REGISTRY: dict[str, "Checker"] = {}

#: The mistake a checker reports when the learner's function called a packaged version of the answer.
LIBRARY_MISTAKE = "the packaged answer called"


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
    text = _repr_at_digits(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _repr_at_digits(value: Any) -> str:
    """``repr``, with a floating-point tensor printed at :data:`DIGITS` significant digits (or fewer).

    PyTorch prints five by default in scientific notation, and the fifth of a float32 result is
    not the same on every CPU; a checker's message lands in a notebook's stored output.
    """
    if _as_tensor_like(value) != "torch" or not value.is_floating_point():
        return repr(value)
    from torch._tensor_str import PRINT_OPTS

    saved = PRINT_OPTS.precision
    PRINT_OPTS.precision = DIGITS - 1
    try:
        return repr(value)
    finally:
        PRINT_OPTS.precision = saved


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
        return (
            None
            if got == expected and type(got) is type(expected)
            else f"{where} should be {expected!r}, got {_short(got)}"
        )
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


class ForbiddenCall(RuntimeError):
    """Raised by a forbidden function while a checker runs a learner's function."""


def _resolve(dotted: str):
    """``(owner, attribute, object)`` for a dotted name such as ``attnbook.masks.padding_mask``
    or ``torch.Tensor.exp``.
    """
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:-1]:
            owner = getattr(owner, attribute)
        return owner, parts[-1], getattr(owner, parts[-1])
    raise ValueError(f"cannot resolve {dotted!r}: it must start with an importable module")


def _blocker(dotted: str, hits: list[str]):
    def blocked(*args, **kwargs):
        hits.append(dotted)
        raise ForbiddenCall(f"this exercise asks you to write it: `{dotted}` is the answer, not a tool")

    blocked.__name__ = dotted.rsplit(".", 1)[-1]
    blocked.__qualname__ = f"forbidden {dotted}"
    return blocked


@contextlib.contextmanager
def forbid(names, namespaces=(), hits: list[str] | None = None):
    """Within the block, every function named in ``names`` raises :class:`ForbiddenCall` instead of computing.

    Each dotted name is patched where it is defined and under every name that holds the same object in the
    modules of ``attnbook``, in ``__main__`` (a notebook's globals) and in ``namespaces`` (for example a
    learner's ``fn.__globals__``), so that ``from attnbook.positional import sinusoidal_table`` in a notebook is
    caught as well as ``positional.sinusoidal_table``. Everything is restored on exit. The names called are
    appended to ``hits``, so that a call the learner's code caught and ignored is still noticed.
    """
    hits = [] if hits is None else hits
    patched: list[tuple[Any, str, bool, Any]] = []  # (where, attribute, was it in where's own __dict__, old value)

    def patch(where, attribute, new):
        own = attribute in getattr(where, "__dict__", {}) if not isinstance(where, dict) else True
        old = where[attribute] if isinstance(where, dict) else getattr(where, attribute)
        patched.append((where, attribute, own, old))
        if isinstance(where, dict):
            where[attribute] = new
        else:
            setattr(where, attribute, new)

    try:
        targets = {}
        for dotted in names:
            owner, attribute, original = _resolve(dotted)
            blocked = _blocker(dotted, hits)
            targets[id(original)] = blocked
            patch(owner, attribute, blocked)
        spaces = [vars(m) for name, m in list(sys.modules.items()) if name == "__main__" or name.startswith("attnbook")]
        spaces += [space for space in namespaces if space is not None]
        seen = set()
        for space in spaces:
            if id(space) in seen:
                continue
            seen.add(id(space))
            for key, value in list(space.items()):
                if id(value) in targets:
                    patch(space, key, targets[id(value)])
        yield hits
    finally:
        for where, attribute, own, old in reversed(patched):
            if isinstance(where, dict):
                where[attribute] = old
            elif own:
                setattr(where, attribute, old)
            else:
                delattr(where, attribute)


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
        (``"attnbook.positional.sinusoidal_table"``, ``"torch.nn.GRUCell"``),
        each mapped to a function that answers the exercise by calling it (the
        planted mistake the tests try). While the learner's function runs, they
        raise :class:`ForbiddenCall`, and the checker reports
        :data:`LIBRARY_MISTAKE`.
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
    ) -> None:
        if not cases:
            raise ValueError(f"checker {name!r} needs at least one case")
        self.name = name
        self.reference = reference
        self.cases = list(cases)
        self.mistakes = list(mistakes)
        self.atol = atol
        self.rtol = rtol
        self.forbidden = dict(forbidden or {})
        for dotted in self.forbidden:
            _resolve(dotted)  # fail at import time on a misspelt name
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

    def _run_learner(self, fn: Callable, case: Case, hits: list[str]):
        if not self.forbidden:
            return self._run(fn, case)
        with forbid(self.forbidden, (getattr(fn, "__globals__", None),), hits):
            return self._run(fn, case)

    def _library_used(self, case: Case, dotted: str) -> CheckResult:
        return CheckResult(
            False,
            f"✗ {self.name}, case '{case.name}': this exercise asks you to write it: `{dotted}` is the answer, "
            "not a tool; write it yourself.\n"
            f"  This is the mistake '{LIBRARY_MISTAKE}'.",
            case.name,
            LIBRARY_MISTAKE,
        )

    def __call__(self, fn: Callable) -> CheckResult:
        if not callable(fn):
            return CheckResult(False, f"✗ {self.name}: expected a function, got {type(fn).__name__}")
        for number, case in enumerate(self.cases):
            expected = self._run(self.reference, case)
            hits: list[str] = []
            try:
                got = self._run_learner(fn, case, hits)
            except ForbiddenCall:
                return self._library_used(case, hits[0])
            except NotImplementedError:
                return self._not_attempted("it raised NotImplementedError", case.name)
            except Exception as err:  # report, never crash the notebook
                if hits:  # a forbidden call, its error wrapped in another one on the way out
                    return self._library_used(case, hits[0])
                return CheckResult(
                    False,
                    f"✗ {self.name}, case '{case.name}': it raised {type(err).__name__}: {err}",
                    case.name,
                )
            if hits:  # a forbidden call whose error the learner's code caught
                return self._library_used(case, hits[0])
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
