"""What a checker prints: numbers at a few significant digits, and how a result differs from the expected one."""

from __future__ import annotations

import math
import numbers
from typing import Any

from .wording import Template, english, say

__all__ = ["DIGITS", "compare", "format_number", "format_pair", "as_number"]

#: What :func:`compare` calls the whole result, and a part of it.
RESULT = Template("the result", "where")
ITEM = Template("item {index} of {where}", "where", where="where")
ENTRY = Template("{where}[{key}]", "where", where="where")
NAMED_ENTRY = Template("{where}['{key}']", "where", where="where", key="key")

#: What :func:`compare` found: ``{where}`` is the result or the part of it that differs.
_WHERE = {"where": "where"}
SHOULD_BE = Template("{where} should be {expected}, got {got}", "problem", **_WHERE)
NOT_A_NUMBER = Template("{where} should be a number, got {kind}: {got}", "problem", **_WHERE)
NOT_A_SEQUENCE = Template("{where} should be a {kind} of {count} items, got {other}", "problem", **_WHERE)
LENGTH = Template("{where} should have {count} items, got {other}", "problem", **_WHERE)
NOT_A_DICT = Template("{where} should be a dict, got {kind}", "problem", **_WHERE)
KEYS = Template("{where} should have keys {expected}, got {got}", "problem", **_WHERE)
NOT_A_TENSOR = Template("{where} should be a torch.Tensor, got {kind}", "problem", **_WHERE)
NOT_AN_ARRAY = Template("{where} should be a NumPy array, got {kind}", "problem", **_WHERE)
SHAPE = Template("{where} should have shape {expected}, got shape {got}", "problem", **_WHERE)
DTYPE = Template("{where} should have dtype {expected}, got {got}", "problem", **_WHERE)
DIFFERS = Template(
    "{where} differs at index {index}: expected {expected}, got {got} ({wrong} of {total} entries wrong)",
    "problem",
    **_WHERE,
)


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


def as_number(value) -> int | float | None:
    """``value`` as a Python number, when it is one: an int or a float, a NumPy scalar (``numpy.int64``,
    ``numpy.float32``), a 0-d tensor or array that is not boolean, or any other real number (``fractions.Fraction``,
    SymPy's numbers: Python's ``numbers.Real``). ``None`` for anything else.

    One rule for every exercise that asks for a number: however the learner's code produced it, a number is
    a number (``.item()`` or not).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, numbers.Integral) and not _as_tensor_like(value):  # SymPy's Integer, for one
        return int(value)
    if isinstance(value, numbers.Real) and not _as_tensor_like(value):  # a Fraction, SymPy's Rational or Float
        return float(value)
    kind = _as_tensor_like(value)
    if kind is None:
        try:
            import numpy as np
        except ImportError:  # pragma: no cover
            return None
        if isinstance(value, (np.integer, np.floating)):
            return value.item()
        return None
    if value.ndim != 0:
        return None
    if kind == "torch" and (value.dtype == _torch().bool or value.is_complex()):
        return None
    if kind == "numpy" and value.dtype.kind not in "iuf":
        return None
    return value.item()


def _torch():
    import torch

    return torch


def compare(
    expected: Any, got: Any, atol: float = 1e-5, rtol: float = 1e-4, where: str = RESULT, equal_nan: bool = False
) -> str | None:
    """Describe how ``got`` differs from ``expected``, or return ``None`` when they agree.

    A number (see :func:`as_number`) where a number is expected is compared as one, whatever its type.
    Tensors and arrays are compared by type, shape, dtype kind and value (NaN
    equals nothing unless ``equal_nan``); sequences and dicts element by
    element; floats with tolerance; everything else with ``==``. The description is in the current language
    (:mod:`.wording`); ``where``, the name of what is compared, is English.
    """
    kind = _as_tensor_like(expected)
    if kind is not None and (as_number(expected) is None or _as_tensor_like(got) == kind):
        return _compare_arrays(kind, expected, got, atol, rtol, where, equal_nan)
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        if got == expected and type(got) is type(expected):
            return None
        return say(SHOULD_BE, where=where, expected=repr(expected), got=_short(got))
    if isinstance(expected, (int, float)) or (kind is not None and as_number(expected) is not None):
        expected = as_number(expected)
        number = as_number(got)
        if number is None:
            return say(NOT_A_NUMBER, where=where, kind=type(got).__name__, got=_short(got))
        got = number
        if equal_nan and math.isnan(got) and math.isnan(expected):
            return None
        if math.isnan(got) or not math.isclose(got, expected, rel_tol=rtol, abs_tol=atol):
            e, g = format_pair(expected, got)
            return say(SHOULD_BE, where=where, expected=e, got=g)
        return None
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            kinds = dict(kind=type(expected).__name__, other=type(got).__name__)
            return say(NOT_A_SEQUENCE, where=where, count=len(expected), **kinds)
        if len(got) != len(expected):
            return say(LENGTH, where=where, count=len(expected), other=len(got))
        for i, (e, g) in enumerate(zip(expected, got)):
            problem = compare(e, g, atol, rtol, english(ITEM, index=i, where=where), equal_nan)
            if problem:
                return problem
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return say(NOT_A_DICT, where=where, kind=type(got).__name__)
        if set(got) != set(expected):
            return say(KEYS, where=where, expected=sorted(map(str, expected)), got=sorted(map(str, got)))
        for key in expected:
            named = isinstance(key, str) and repr(key) == f"'{key}'"
            part = english(NAMED_ENTRY, where=where, key=key) if named else english(ENTRY, where=where, key=repr(key))
            problem = compare(expected[key], got[key], atol, rtol, part, equal_nan)
            if problem:
                return problem
        return None
    return None if got == expected else say(SHOULD_BE, where=where, expected=_short(expected), got=_short(got))


def _compare_arrays(kind: str, expected, got, atol: float, rtol: float, where: str, equal_nan: bool) -> str | None:
    if _as_tensor_like(got) != kind:
        return say(NOT_A_TENSOR if kind == "torch" else NOT_AN_ARRAY, where=where, kind=type(got).__name__)
    if tuple(got.shape) != tuple(expected.shape):
        return say(SHAPE, where=where, expected=tuple(expected.shape), got=tuple(got.shape))
    if kind == "torch":
        import torch

        if expected.dtype == torch.bool or got.dtype == torch.bool:
            if got.dtype != expected.dtype:
                return say(DTYPE, where=where, expected=expected.dtype, got=got.dtype)
            wrong = got != expected
        else:
            if expected.is_floating_point() != got.is_floating_point():
                return say(DTYPE, where=where, expected=expected.dtype, got=got.dtype)
            e, g = expected.detach().double(), got.detach().double()
            wrong = ~torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
        if wrong.any():
            index = tuple(int(i) for i in wrong.nonzero()[0])
            e, g = format_pair(expected[index].item(), got[index].item())
            counts = dict(wrong=int(wrong.sum()), total=wrong.numel())
            return say(DIFFERS, where=where, index=index, expected=e, got=g, **counts)
        return None
    import numpy as np

    if expected.dtype == bool or got.dtype == bool:
        wrong = got != expected
    else:
        wrong = ~np.isclose(got.astype(float), expected.astype(float), rtol=rtol, atol=atol, equal_nan=equal_nan)
    if wrong.any():
        index = tuple(int(i) for i in np.argwhere(wrong)[0])
        e, g = format_pair(expected[index].item(), got[index].item())
        return say(DIFFERS, where=where, index=index, expected=e, got=g, wrong=int(wrong.sum()), total=wrong.size)
    return None
