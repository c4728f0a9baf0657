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
    "Refusals",
    "Record",
    "watch",
    "LOOP_MISTAKE",
    "FUSED_ATTENTION",
    "PYTORCH_ATTENTION",
    "CROSS_ENTROPY",
    "NO_MODEL",
    "refusing",
    "format_number",
    "format_pair",
    "registry",
    "LIBRARY_MISTAKE",
    "NOT_ATTEMPTED",
    "seeded_randn",
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
    """Kept for code that catches it; the checkers now record a refused call instead of raising."""


#: The mistake a checker reports when the learner's function ran a Python loop the exercise rules out.
LOOP_MISTAKE = "a Python loop"


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


def _package_folder(dotted: str) -> str | None:
    """The folder (or file) of an installed package or module, found without importing it (d2l is heavy)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(dotted)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return str(list(spec.submodule_search_locations)[0]).rstrip("/") + "/"
    return spec.origin


def _functions_of(obj) -> list:
    """The Python functions whose code objects say "this is ``obj`` running": a function, a bound method,
    a ``functools.partial``, a class (every function its own body defines), or a property."""
    import functools
    import types

    if isinstance(obj, functools.partial):
        return _functions_of(obj.func)
    if isinstance(obj, (types.MethodType, classmethod, staticmethod)):
        return _functions_of(obj.__func__)
    if isinstance(obj, property):
        return [f for f in (obj.fget, obj.fset) if f is not None]
    if isinstance(obj, types.FunctionType):
        found = [obj]
        wrapped = getattr(obj, "__wrapped__", None)
        return found + (_functions_of(wrapped) if wrapped is not None else [])
    if isinstance(obj, type):
        found = []
        for value in vars(obj).values():
            if isinstance(value, (types.FunctionType, classmethod, staticmethod, property)):
                found += _functions_of(value)
        return found
    return []


def _op_name(func) -> str | None:
    """The ATen operator a PyTorch callable stands for, such as ``aten::scaled_dot_product_attention``.

    The dispatcher's name is PyTorch's own identity of an operation: ``F.scaled_dot_product_attention``,
    ``torch._C._nn.scaled_dot_product_attention`` and ``torch.ops.aten.scaled_dot_product_attention`` are the
    same operator. Python functions are recognised by their code objects instead (see :func:`_functions_of`).
    """
    schema = getattr(func, "_schema", None)  # an OpOverload
    if schema is not None:
        return schema.name
    qualified = getattr(func, "_qualified_op_name", None)  # an OpOverloadPacket
    if qualified is not None:
        return qualified
    import types

    if isinstance(func, (types.FunctionType, types.MethodType, type)):
        return None
    name = getattr(func, "__name__", None)  # a binding generated from the operator: torch.x, Tensor.x, torch._C._nn.x
    return f"aten::{name}" if isinstance(name, str) else None


#: PyTorch's fused attention, whatever the entry point (``F.*``, ``torch._C._nn.*``, ``torch.ops.aten.*``, the
#: kernels it picks), its multi-head modules, the library's attention, and d2l's: refused where attention is the answer.
FUSED_ATTENTION = (
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.ops.aten._scaled_dot_product_attention_math",
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    "torch.ops.aten._scaled_dot_product_flash_attention",
    "torch.ops.aten._scaled_dot_product_efficient_attention",
    "torch.ops.aten._scaled_dot_product_cudnn_attention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch.ops.aten._native_multi_head_attention",
    "torch.nn.MultiheadAttention",
    "attnbook.attention.scaled_dot_product_attention",
    "attnbook.attention.DotProductAttention",
    "attnbook.attention.MultiHeadAttention",
    "d2l.*",
)

#: PyTorch's own attention and multi-head layers (without the library's): refused where the library's chapter-3
#: ``scaled_dot_product_attention`` is a building block and what the exercise adds (grouped heads, gates) is the answer.
PYTORCH_ATTENTION = tuple(
    name
    for name in FUSED_ATTENTION
    if name not in ("attnbook.attention.scaled_dot_product_attention", "attnbook.attention.DotProductAttention")
)

#: The cross-entropy and negative log-likelihood losses of PyTorch, under every name, and the library's.
CROSS_ENTROPY = (
    "torch.nn.functional.cross_entropy",
    "torch.ops.aten.cross_entropy_loss",
    "torch.nn.functional.nll_loss",
    "torch.ops.aten.nll_loss_nd",
    "torch.ops.aten.nll_loss",
    "torch.ops.aten.nll_loss_forward",
    "torch.ops.aten.nll_loss2d_forward",
    "torch.nn.CrossEntropyLoss",
    "torch.nn.NLLLoss",
    "attnbook.train.sequence_loss",
    "attnbook.train.smoothed_targets",
    "d2l.*",
)

#: For an exercise whose answer is a formula (a count): building any module, or letting PyTorch count, is refused.
NO_MODEL = ("torch.nn.Module.__init__", "torch.utils.flop_counter.*", "d2l.*")


class Refusals:
    """What a checker refuses, by identity: code objects, ATen operators, and whole packages (by folder).

    Built from dotted names (``"torch.nn.functional.scaled_dot_product_attention"``,
    ``"torch.ops.aten._log_softmax"``, ``"attnbook.positional.rotation_for_offset"``, ``"torch.nn.GRUCell"``)
    or, for a whole package, its name with a trailing ``.*`` (``"d2l.*"``, ``"sacrebleu.*"``), which is not
    imported. The name is what a message calls the packaged answer.
    """

    def __init__(self, names) -> None:
        self.names = list(names)
        self.codes: dict = {}
        self.ops: dict[str, str] = {}
        self.folders: list[tuple[str, str]] = []
        for dotted in self.names:
            if dotted.endswith(".*"):
                folder = _package_folder(dotted[:-2])
                if folder is not None:
                    self.folders.append((folder, dotted))
                continue
            if dotted.startswith("torch.ops.aten."):  # an operator this PyTorch may not have (they come and go)
                import torch

                if not hasattr(torch.ops.aten, dotted.rsplit(".", 1)[1]):
                    continue
            obj = _resolve(dotted)[2]
            functions = _functions_of(obj)
            for function in functions:
                self.codes.setdefault(function.__code__, dotted)
            op = _op_name(obj) if not functions else None
            if op is not None:
                self.ops.setdefault(op, dotted)
            if not functions and op is None:
                raise ValueError(f"cannot refuse {dotted!r}: it is neither Python code nor a PyTorch operator")
        self._seen: dict = {}

    def __bool__(self) -> bool:
        return bool(self.names)

    def code(self, code) -> str | None:
        """The refused name that ``code`` runs, or ``None``."""
        try:
            return self._seen[code]
        except KeyError:
            pass
        found = self.codes.get(code)
        if found is None and self.folders:
            for folder, name in self.folders:
                if code.co_filename.startswith(folder):
                    found = name
                    break
        self._seen[code] = found
        return found


def refusing(*groups, **planted) -> dict:
    """A checker's ``forbidden``: the planted answers first (they name the refusal in messages), then the groups."""
    forbidden: dict = {}
    for group in groups:
        if isinstance(group, dict):
            forbidden.update(group)
        else:
            for name in (group,) if isinstance(group, str) else group:
                forbidden.setdefault(name, None)
    return forbidden


def _describe_code(frame) -> str:
    if frame.f_code.co_name == "__init__" and "self" in frame.f_code.co_varnames[:1]:  # a class being built
        cls = type(frame.f_locals.get("self"))
        return f"{cls.__module__}.{cls.__qualname__}"
    module = frame.f_globals.get("__name__", "")
    qualname = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    return f"{module}.{qualname}" if module and module != "__main__" else qualname


def _describe_op(func) -> str:
    name = getattr(func, "__name__", None) or str(func)
    schema = getattr(func, "_schema", None)
    if schema is not None or getattr(func, "_qualified_op_name", None) is not None:
        return f"torch.ops.{str(func).split('.')[0]}.{name}" if "." not in name else f"torch.ops.aten.{name}"
    owner = getattr(func, "__objclass__", None) or getattr(func, "__self__", None)
    where = getattr(owner, "__name__", None) if owner is not None else None
    module = getattr(func, "__module__", None) or where or "torch"
    if owner is not None and isinstance(owner, type):
        import torch

        if issubclass(torch.Tensor, owner):
            return f"torch.Tensor.{name}"
        return f"{owner.__module__}.{owner.__name__}.{name}"
    return f"{module}.{name}"


@dataclass
class Record:
    """What a learner's function did while a checker watched it."""

    hits: list[tuple[str, str]] = field(default_factory=list)  # (what was called, the refused answer it is)
    ops: int = 0  # PyTorch operations dispatched to ATen
    lines: int = 0  # Python lines run in the learner's own code (counted only when asked)

    def hit(self, called: str, answer: str) -> None:
        if len(self.hits) < 8 and (called, answer) not in self.hits:
            self.hits.append((called, answer))


def _modes(refusals: Refusals, record: Record):
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    ops = refusals.ops

    class _Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if ops:
                name = _op_name(func)
                if name in ops:
                    record.hit(_describe_op(func), ops[name])
            return func(*args, **(kwargs or {}))

    class _Dispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            record.ops += 1
            if ops:
                name = func._schema.name
                if name in ops:
                    record.hit(f"torch.ops.{func}", ops[name])
            return func(*args, **(kwargs or {}))

    return _Functions(), _Dispatch()


def _library_folders() -> tuple[str, ...]:
    """Folders whose code is not the learner's: the standard library, installed packages, attnbook itself
    (but not ``attnbook.exercises``, where the references and planted mistakes live)."""
    import os
    import site
    import sysconfig

    import torch

    paths = sysconfig.get_paths()
    folders = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    folders |= set(getattr(site, "getsitepackages", list)()) | {os.path.dirname(os.path.dirname(torch.__file__))}
    here = os.path.dirname(os.path.abspath(__file__))
    return tuple(sorted(os.path.join(f, "") for f in folders)) + (os.path.join(os.path.dirname(here), ""),), here


@contextlib.contextmanager
def watch(refusals: Refusals | None = None, count_lines: bool = False, record: Record | None = None):
    """Record what the code run inside the block calls, by identity: refused Python code (through the
    interpreter's call events, ``sys.setprofile``), refused PyTorch operators (through a
    ``TorchFunctionMode`` and, for what reaches ATen, a ``TorchDispatchMode``), the number of operations
    dispatched, and, with ``count_lines``, the lines run in the learner's own code (``sys.settrace``).

    Yields a :class:`Record`. Nothing is patched, so aliases, other modules, default arguments, closures,
    bound methods and subclasses all run the same code objects and operators, and are all seen.
    """
    refusals = refusals or Refusals([])
    record = Record() if record is None else record
    modes = _modes(refusals, record)
    old_profile, old_trace = sys.getprofile(), sys.gettrace()
    lookup = refusals.code

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name != "<module>":  # a module being imported is not a call of it
            answer = lookup(frame.f_code)
            if answer is not None:
                record.hit(_describe_code(frame), answer)

    trace = None
    if count_lines:
        library, exercises_folder = _library_folders()
        mine: dict = {}

        def local(frame, event, arg):
            if event == "line":
                record.lines += 1
            return local

        def trace(frame, event, arg):
            code = frame.f_code
            ours = mine.get(code)
            if ours is None:
                name = code.co_filename
                ours = (
                    name != __file__
                    # code made at run time ("<frozen importlib...>", "<string>": imports, generated functions),
                    # unless typed at a prompt
                    and (not name.startswith("<") or name.startswith(("<ipython-input", "<stdin>")))
                    and (name.startswith(exercises_folder) or not name.startswith(library))
                )
                mine[code] = ours
            return local if ours else None

    if not refusals and not count_lines:
        yield record
        return
    functions, dispatch = modes
    with dispatch, functions:
        if refusals:
            sys.setprofile(profile)
        if trace is not None:
            sys.settrace(trace)
        try:
            yield record
        finally:
            if trace is not None:
                sys.settrace(old_trace)
            if refusals:
                sys.setprofile(old_profile)


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
        self.forbidden = refusing(forbidden or {}, *refuses)
        self.refusals = Refusals(self.forbidden)  # fails at import time on a misspelt name
        self.loop_free = loop_free
        self.looped = looped
        self.requirements = list(requirements or [])
        _REGISTRY[name] = self

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
        if answer == "torch.nn.Module.__init__":
            why = f"it built a PyTorch module (`{called}`). This exercise asks for a number worked out on paper: "
            why += "count with arithmetic, build no model"
        elif answer.endswith(".*"):  # a whole package
            why = f"it called `{called}`, from `{answer[:-2]}`. This exercise asks you to write it: nothing from "
            why += f"`{answer[:-2]}` is a tool here"
        else:
            why = f"it called `{called}`, which is `{answer}`" if called != answer else f"it called `{answer}`"
            why += f". This exercise asks you to write it: `{answer}` is the answer, not a tool"
        return CheckResult(
            False,
            f"✗ {self.name}, case '{case.name}': {why}; write it yourself.\n  This is the mistake '{LIBRARY_MISTAKE}'.",
            case.name,
            LIBRARY_MISTAKE,
        )

    def steps(self, fn: Callable, n: int) -> tuple[int, int]:
        """(operations dispatched, lines of the learner's own Python run) by ``fn`` on the case of size ``n``."""
        case = self.loop_free[1](n)
        args = copy.deepcopy(case.args)
        kwargs = copy.deepcopy(case.kwargs)
        with watch(count_lines=True) as seen:
            fn(*args, **kwargs)
        return seen.ops, seen.lines

    def _check_loop(self, fn: Callable) -> CheckResult | None:
        what, _ = self.loop_free
        small, large = 4, 12
        try:
            few, many = self.steps(fn, small), self.steps(fn, large)
        except Exception as err:
            return CheckResult(False, f"✗ {self.name}: on longer {what} it raised {type(err).__name__}: {err}")
        if sum(many) <= sum(few) + 2:
            return None
        return CheckResult(
            False,
            f"✗ {self.name}: the answers are right, but the work grows with the number of {what}: "
            f"{few[0]} PyTorch operations and {few[1]} lines of your Python for {small} {what}, "
            f"{many[0]} and {many[1]} for {large}. That is a Python loop over {what}, and the exercise asks "
            "for none: let one tensor operation handle them all at once (broadcasting, a mask, gather, cumsum...).\n"
            f"  This is the mistake '{LOOP_MISTAKE}'.",
            None,
            LOOP_MISTAKE,
        )

    def __call__(self, fn: Callable) -> CheckResult:
        if not callable(fn):
            return CheckResult(False, f"✗ {self.name}: expected a function, got {type(fn).__name__}")
        for number, case in enumerate(self.cases):
            expected = self._run(self.reference, case)
            record = Record()
            try:
                got = self._run(fn, case, record)
            except NotImplementedError:
                if record.hits:
                    return self._library_used(case, record.hits)
                return self._not_attempted("it raised NotImplementedError", case.name)
            except Exception as err:  # report, never crash the notebook
                if record.hits:  # a refused call, then an error on the way out
                    return self._library_used(case, record.hits)
                return CheckResult(
                    False,
                    f"✗ {self.name}, case '{case.name}': it raised {type(err).__name__}: {err}",
                    case.name,
                )
            if record.hits:
                return self._library_used(case, record.hits)
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
        if self.loop_free is not None:
            looped = self._check_loop(fn)
            if looped is not None:
                return looped
        for requirement in self.requirements:
            found = requirement(fn)
            if found is not None:
                mistake, message = found
                return CheckResult(
                    False, f"✗ {self.name}: {message}\n  This is the mistake '{mistake}'.", None, mistake
                )
        return CheckResult(True, f"✓ {self.name}: all {len(self.cases)} cases pass.")

    def _not_attempted(self, why: str, case: str) -> CheckResult:
        return CheckResult(
            False,
            f"○ {self.name}: {NOT_ATTEMPTED} ({why}). Write your code in place of `...`, "
            "then run this cell again; the solution is folded below.",
            case,
        )
