"""Watching a learner's function run: what it calls, by identity, and whether the watch itself stayed on.

:func:`watch` records what the code run inside its block calls: refused Python code through the interpreter's
call events (``sys.setprofile``), refused PyTorch operators through PyTorch's function and dispatch modes, work
handed to another thread or process, the checker's own solution, and, when asked, the lines the learner's own
Python runs (``sys.settrace``). A refused function is known by its code object, by the folder of its package, or,
for a copy under a new code object (renamed, ``exec`` of its source, another file name), by its fingerprint: its
bytecode, constants and global names. The watch also watches itself: a hook or a mode switched off, replaced or
removed, or a table changed, is recorded as tampering (:attr:`Record.tampered`).
"""

from __future__ import annotations

import contextlib
import dis
import functools
import importlib
import os
import sys
import types
from dataclasses import dataclass, field

from . import verdicts as said
from .answers import KINDS

__all__ = ["Refusals", "Record", "watch", "fingerprint", "kind_of", "SOLUTION", "BOOK"]

#: The answer a hit names when the learner's function ran the checker's own solution (or a planted mistake).
SOLUTION = "the checker's own solution"
#: The answer a hit names when the learner's function is (or runs) a copy of the notebook's solution cell.
BOOK = "the book's solution"

_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: set on a function's code, never on a module's or a class body's

_SAME_STEP = {"LOAD_METHOD": "LOAD_ATTR", "PRECALL": "CALL"}  # two spellings of one step (see fingerprint)

_HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")

_MIN_BYTECODE = 24  # a copy is known by its fingerprint from this length of bytecode: a few may be a learner's own

#: Audit events (``sys.addaudithook``) that start another process; while a checker watches, each is refused.
_PROCESS_EVENTS = frozenset(
    "os.fork os.forkpty os.system os.posix_spawn os.exec os.spawn os.startfile subprocess.Popen pty.spawn".split()
)


def kind_of(answer: str) -> str:
    """``"thread"``, ``"process"``, ``"solution"`` or ``"library"``: what a refused answer is, for the message."""
    if answer in (SOLUTION, BOOK):
        return "solution"
    if answer in _PROCESS_EVENTS:
        return "process"
    return KINDS.get(answer, "library")


def fingerprint(code) -> tuple:
    """What a code object does, whatever its name, file or line numbers: its instructions and what they load (the
    constants, nested code by its own fingerprint, the global names), and its arguments.

    Read through :mod:`dis`, with the two spellings of a method call made one: the interpreter rewrites
    ``LOAD_METHOD`` as ``LOAD_GLOBAL`` + ``LOAD_ATTR`` once code has run a while, and a copy has not."""
    steps = []
    for instruction in dis.get_instructions(code):
        name = _SAME_STEP.get(instruction.opname, instruction.opname)
        if name in ("CACHE", "EXTENDED_ARG", "PUSH_NULL", "NOP"):
            continue
        if instruction.opcode in dis.hasjrel or instruction.opcode in dis.hasjabs:
            steps.append((name,))  # a jump's target moves with the caches between
        elif isinstance(instruction.argval, types.CodeType):
            steps.append((name, fingerprint(instruction.argval)))
        elif name == "LOAD_CONST":
            steps.append((name, type(instruction.argval).__name__, repr(instruction.argval)))
        else:
            steps.append((name, str(instruction.argval)))
    return tuple(steps), code.co_argcount, code.co_kwonlyargcount


def _resolve(dotted: str):
    """``(owner, attribute, object)`` for a dotted name such as ``attnbook.masks.padding_mask`` or ``torch.exp``."""
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
    if isinstance(func, (types.FunctionType, types.MethodType, type)):
        return None
    name = getattr(func, "__name__", None)  # a binding generated from the operator: torch.x, Tensor.x, torch._C._nn.x
    return f"aten::{name}" if isinstance(name, str) else None


class Refusals:
    """What a checker refuses, by identity: code objects (and copies of them, by :func:`fingerprint`), ATen
    operators, builtins, and whole packages (by folder).

    Built from dotted names (``"torch.nn.functional.scaled_dot_product_attention"``,
    ``"torch.ops.aten._log_softmax"``, ``"attnbook.positional.rotation_for_offset"``, ``"torch.nn.GRUCell"``)
    or, for a whole package, its name with a trailing ``.*`` (``"d2l.*"``, ``"sacrebleu.*"``), which is not
    imported. The name is what a message calls the packaged answer; ``copies`` adds fingerprints of code known by
    what it does only (the book's solution: :data:`BOOK`). :meth:`intact` says whether the tables are unchanged.
    """

    def __init__(self, names, copies: dict | None = None) -> None:
        self.names = list(names)
        self.codes: dict = {}
        self.prints: dict = {}
        self.ops: dict[str, str] = {}
        self.builtins: dict = {}
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
                code = function.__code__
                self.codes.setdefault(code, dotted)
                if len(code.co_code) >= _MIN_BYTECODE:  # the function itself; its inner lambdas may well be anyone's
                    self.prints.setdefault(fingerprint(code), dotted)
            if not functions and isinstance(obj, types.BuiltinFunctionType) and not _is_torch(obj):
                self.builtins[obj] = dotted
                continue
            op = _op_name(obj) if not functions else None
            if op is not None:
                self.ops.setdefault(op, dotted)
            if not functions and op is None:
                raise ValueError(f"cannot refuse {dotted!r}: it is neither Python code nor a PyTorch operator")
        self.prints.update(copies or {})
        self._seen: dict = {}
        self._seal = self._tables()

    def _tables(self) -> tuple:
        return (
            tuple(self.names),
            frozenset(self.codes.items()),
            frozenset(self.prints.items()),
            frozenset(self.ops.items()),
            frozenset((id(k), v) for k, v in self.builtins.items()),
            tuple(self.folders),
        )

    def intact(self) -> bool:
        """Whether the tables are what they were built as (no name removed, none added, none cleared)."""
        return self._tables() == self._seal

    def __bool__(self) -> bool:
        return bool(self.names or self.prints)

    def code(self, code) -> str | None:
        """The refused name that ``code`` runs (or is a copy of), or ``None``."""
        try:
            return self._seen[code]
        except KeyError:
            pass
        found = self.codes.get(code)
        name = code.co_filename
        if found is None and self.folders:
            for folder, dotted in self.folders:
                if name.startswith(folder):
                    found = dotted
                    break
        if (
            found is None
            and self.prints
            and len(code.co_code) >= _MIN_BYTECODE
            and not _is_library(name)
            and not name.startswith(_HERE)
        ):
            found = self.prints.get(fingerprint(code))
        self._seen[code] = found
        return found


def _is_torch(obj) -> bool:
    module = getattr(obj, "__module__", None) or ""
    owner = getattr(obj, "__self__", None)
    return module.startswith("torch") or (owner is not None and getattr(owner, "__name__", "").startswith("torch"))


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
    ops: int = 0  # PyTorch operations dispatched to ATen, and each number tolist() hands to Python (item() is one)
    lines: int = 0  # Python lines run in the learner's own code (counted only when asked)
    tampered: list[str] = field(default_factory=list)  # what happened to the watch itself

    def hit(self, called: str, answer: str) -> None:
        if len(self.hits) < 8 and (called, answer) not in self.hits:
            self.hits.append((called, answer))

    def tamper(self, what: str) -> None:
        if len(self.tampered) < 8 and what not in self.tampered:
            self.tampered.append(what)


def _modes(refusals: Refusals, record: Record):
    import torch
    import torch._dynamo  # noqa: F401  (a mode's wrapper imports it on first use: here, not under the profile hook)
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    ops = refusals.ops
    python_key = torch._C.DispatchKey.Python
    excluded = torch._C._dispatch_tls_is_dispatch_key_excluded
    dispatch_depth, function_depth = torch._C._len_torch_dispatch_stack, torch._C._len_torch_function_stack
    function_on = torch._C._is_torch_function_mode_enabled

    inside, tolist = [0], torch.Tensor.tolist  # inside > 0 while the dispatch mode's own handler runs

    class _Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if not inside[0] and (dispatch_depth() == 0 or excluded(python_key)):  # the dispatch mode was taken away
                record.tamper(said.DISPATCH_OFF)
            if func is tolist:  # n numbers out in one call: the work of n item() calls, each an operation
                record.ops += args[0].numel()
            if ops:
                name = _op_name(func)
                if name in ops:
                    record.hit(_describe_op(func), ops[name])
            return func(*args, **(kwargs or {}))

    class _Dispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            record.ops += 1
            if function_depth() and not function_on():  # our function mode is on the stack, but switched off
                record.tamper("PyTorch's function mode was switched off (torch._C.DisableTorchFunction)")
            if ops:
                name = func._schema.name
                if name in ops:
                    record.hit(f"torch.ops.{func}", ops[name])
            inside[0] += 1
            try:
                return func(*args, **(kwargs or {}))
            finally:
                inside[0] -= 1

    return _Functions(), _Dispatch()


@functools.cache
def _library_folders() -> tuple[tuple[str, ...], str]:
    """Folders whose code is not the learner's: the standard library, installed packages, attnbook itself
    (but not ``attnbook.exercises``, where the references and planted mistakes live)."""
    import site
    import sysconfig

    import torch

    paths = sysconfig.get_paths()
    folders = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    folders |= set(getattr(site, "getsitepackages", list)()) | {os.path.dirname(os.path.dirname(torch.__file__))}
    attnbook = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "")
    return tuple(sorted(os.path.join(f, "") for f in folders)) + (attnbook,), _HERE


def _is_library(filename: str) -> bool:
    library, exercises = _library_folders()
    return filename.startswith(library) and not filename.startswith(exercises)


def _is_solution_file(filename: str) -> bool:
    """A chapter's checker module (``attnbook/exercises/chNN_*.py``): the solutions and planted mistakes."""
    base = os.path.basename(filename)
    return filename.startswith(_HERE) and base[:2] == "ch" and base[2:4].isdigit()


# --- the interpreter's audit events: processes started, hooks switched while a checker watches ----------------------

_ACTIVE: list = []  # the records of the watches now open (a watch inside a watch is the same learner's call)
_OWN = [0]  # > 0 while the watch sets or restores its own hooks


def _audit(event: str, args) -> None:
    if not _ACTIVE:
        return
    if event in _PROCESS_EVENTS:
        for record in _ACTIVE:
            record.hit(event, event)
        raise RuntimeError(f"{event}: a checker refuses to start a process while it watches a learner's function")
    if event in ("sys.setprofile", "sys.settrace") and not _OWN[0]:
        for record in _ACTIVE:
            record.tamper(said.HOOK_CALLED.format(event=event))


if not getattr(sys, "_attnbook_exercises_audit", False):  # one hook for the life of the interpreter
    sys.addaudithook(_audit)
    sys._attnbook_exercises_audit = True


def _set_hooks(profile, trace) -> None:
    _OWN[0] += 1
    try:
        sys.setprofile(profile)
        sys.settrace(trace)
    finally:
        _OWN[0] -= 1


@contextlib.contextmanager
def watch(refusals: Refusals | None = None, count_lines: bool = False, record: Record | None = None):
    """Record what the code run inside the block calls, by identity: refused Python code (through the
    interpreter's call events, ``sys.setprofile``) and copies of it (by :func:`fingerprint`), refused builtins
    (``c_call`` events), refused PyTorch operators (through a ``TorchFunctionMode`` and, for what reaches ATen,
    a ``TorchDispatchMode``), processes started (audit events), the checker's own solution, the number of
    operations dispatched, and, with ``count_lines``, the lines run in the learner's own code (``sys.settrace``;
    code compiled at run time, from a string or under a ``<...>`` file name, is the learner's too).

    Yields a :class:`Record`. Nothing is patched, so aliases, other modules, default arguments, closures,
    bound methods and subclasses all run the same code objects and operators, and are all seen. When the block
    ends, the watch checks that its hooks, its modes and its tables are still its own (:attr:`Record.tampered`).
    """
    refusals = refusals or Refusals([])
    record = Record() if record is None else record
    if not refusals and not count_lines:
        yield record
        return
    old_profile, old_trace = sys.getprofile(), sys.gettrace()
    lookup, builtins = refusals.code, refusals.builtins
    solution_seen: dict = {}

    def solution(code) -> bool:
        """Code of a chapter's checker module: its solution, its helpers or a planted mistake. Known by its file,
        not its bytecode: the notebook's own solution cell may be the same bytecode, and it must pass."""
        found = solution_seen.get(code)
        if found is None:
            found = solution_seen[code] = _is_solution_file(code.co_filename)
        return found

    importing = [0]  # > 0 while a module is being imported: what its top level starts is the import's own doing

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if not code.co_flags & _OPTIMIZED:  # a module or a class body being imported is not a call of it
                importing[0] += code.co_name == "<module>"
                return
            if importing[0]:  # what a module's top level runs (PyTorch's start thread pools) is the import's doing
                return
            answer = lookup(code)
            if answer is not None:
                record.hit(_describe_code(frame), answer)
            elif solution(code):
                record.hit(_describe_code(frame), SOLUTION)
        elif event == "return" and frame.f_code.co_name == "<module>" and importing[0]:
            importing[0] -= 1
        elif event == "c_call" and builtins:
            try:
                answer = builtins.get(arg)
            except TypeError:  # an unhashable callable
                answer = None
            if answer is not None:
                record.hit(answer, answer)

    trace = None
    if count_lines:
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
                if name.startswith("<"):  # compiled at run time (exec, compile, a prompt), but not an import
                    ours = not name.startswith("<frozen")
                else:
                    ours = name != __file__ and not _is_library(name)
                mine[code] = ours
            return local if ours else None

    profile_hook = profile if refusals else old_profile
    trace_hook = trace if trace is not None else old_trace
    functions, dispatch = _modes(refusals, record)
    _ACTIVE.append(record)
    try:
        with dispatch, functions:
            _set_hooks(profile_hook, trace_hook)
            try:
                yield record
            finally:
                _check_hooks(record, profile_hook, trace_hook, functions, dispatch)
                _set_hooks(old_profile, old_trace)
                if not refusals.intact():
                    record.tamper(said.TABLE_CHANGED)
    finally:
        _ACTIVE.remove(record)


def _check_hooks(record: Record, profile, trace, functions, dispatch) -> None:
    """Are the interpreter's hooks and PyTorch's modes still the watch's own, on top of their stacks?"""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    if sys.getprofile() is not profile:
        record.tamper(said.PROFILE_REPLACED)
    if sys.gettrace() is not trace:
        record.tamper(said.TRACE_REPLACED)
    stack = _get_current_function_mode_stack()
    if not stack or stack[-1] is not functions:
        record.tamper(said.FUNCTION_MODE_GONE)
    stack = _get_current_dispatch_mode_stack()
    if not stack or stack[-1] is not dispatch:
        record.tamper(said.DISPATCH_MODE_GONE)
