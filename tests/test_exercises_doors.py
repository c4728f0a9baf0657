"""The other doors (issue 54): every family of ways around a checker is refused, and honest answers in other styles
pass.

A second cheating learner, once the packaged answer was refused by identity, ran it in another thread or process,
submitted the solution that ships with the checker (or a copy of it), switched the watch off or patched it, copied
packaged code under a new code object, reached the answer through one of its other homes, or met a stated
requirement only by its proxy. Each try here is first shown to compute the right numbers outside the checker, so
that the refusal, not a wrong number, is what stops it. The honest learner's answers, in other styles (the
notebook's own solution cells, numbers as NumPy scalars or 0-d tensors, flex attention, a query projected by
multiply-and-sum), must all pass.
"""

from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import functools
import importlib
import inspect
import itertools
import json
import math
import multiprocessing
import os
import pickle
import pkgutil
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest
import torch

import attnbook.exercises as exercises
from attnbook.exercises import (
    LIBRARY_MISTAKE,
    LOOP_MISTAKE,
    SOLUTION_MISTAKE,
    THREAD_MISTAKE,
    WATCH_MISTAKE,
    Refusals,
    compare,
)
from attnbook.exercises import checking as checking_module
from attnbook.exercises.copies import book_copies
from notebook_index import in_float64

for _module in pkgutil.iter_modules(exercises.__path__):
    importlib.import_module(f"attnbook.exercises.{_module.name}")
CHECKERS = exercises.registry()
NAMES = sorted(CHECKERS)
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _chapter(name: str) -> str:
    return CHECKERS[name].reference.__module__.rsplit(".", 1)[-1][:4]


def _notebook_solutions(own: bool = False) -> dict:
    """Each checker's solution as the notebook writes it (its solution cell's definitions, with the notebook's
    imports), compiled here as a learner's cell would be. ``own``: each function with a statement of its own added
    first (``_mine = None``), the book's style in a learner's own code, which is not a copy of the cell."""
    found = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        imports = []
        for cell in cells:
            try:
                tree = ast.parse("".join(cell["source"]))
            except SyntaxError:
                continue
            imports += [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        for cell in cells:
            source = "".join(cell["source"])
            if not source.startswith("# @title Solution"):
                continue
            tree = ast.parse(source)
            checked = [
                (node.value.func.id[len("check_") :], node.value.args[0].id)
                for node in tree.body
                if isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id.startswith("check_")
                and node.value.args
                and isinstance(node.value.args[0], ast.Name)
            ]
            if not checked:
                continue
            keep = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom))]
            for node in keep if own else ():
                if isinstance(node, ast.FunctionDef):
                    node.body.insert(0, ast.parse("_mine = None").body[0])
            ast.fix_missing_locations(tree)
            module = ast.Module(body=imports + keep, type_ignores=[])
            namespace: dict = {"__name__": f"notebook_{path.stem}"}
            exec(compile(module, f"<notebook {path.name}>", "exec"), namespace)
            for name, function in checked:
                found[name] = (
                    in_float64(namespace[function])
                    if "set_default_dtype" in path.read_text()
                    else (namespace[function])
                )
    return found


SOLUTIONS = _notebook_solutions()
OWN = _notebook_solutions(own=True)


def _right_on_every_case(name, fn):
    checker = CHECKERS[name]
    for case in checker.cases:
        problem = compare(checker._run(checker.reference, case), checker._run(fn, case), checker.atol, checker.rtol)
        assert problem is None, f"{name}: not an answer on '{case.name}': {problem}"


def _refused(name, fn, *mistakes):
    result = CHECKERS[name](fn)
    assert not result, f"{name} accepted it"
    assert result.mistake in mistakes, f"{name}:\n{result.message}"
    return result


# --- honest answers in other styles ------------------------------------------------------------------------------


def test_every_checker_has_its_notebook_solution():
    assert set(SOLUTIONS) == set(CHECKERS), set(CHECKERS) ^ set(SOLUTIONS)


@pytest.mark.parametrize("name", NAMES)
def test_the_notebook_solution_submitted_is_the_books_and_the_same_code_of_ones_own_passes(name):
    _right_on_every_case(name, SOLUTIONS[name])
    result = CHECKERS[name](SOLUTIONS[name])
    if book_copies(name):  # a copy of the cell folded under the exercise: right, and no tick
        assert not result.passed and result.mistake == SOLUTION_MISTAKE, result.message
        assert "the book's solution" in result.message and "no tick" in result.message, result.message
    else:  # a one-line answer anyone might write letter for letter: a learner's too
        assert result.passed, result.message
    result = CHECKERS[name](OWN[name])
    assert result.passed, result.message


def test_most_solution_cells_are_known_when_copied():
    assert sum(bool(book_copies(name)) for name in NAMES) >= len(NAMES) - 4


def _numbers_as(convert):
    """A learner's answer whose numbers come back in another type: a NumPy scalar, a 0-d tensor, a Python number."""

    def change(value):
        if isinstance(value, tuple):
            return tuple(change(v) for v in value)
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, torch.Tensor) and value.ndim):
            return value
        if isinstance(value, (int, float)) or (isinstance(value, torch.Tensor) and value.ndim == 0):
            return convert(value)
        return value

    def wrap(fn):
        return functools.wraps(fn)(lambda *args, **kwargs: change(fn(*args, **kwargs)))

    return wrap


def _as_numpy(value):
    value = value.item() if isinstance(value, torch.Tensor) else value
    return np.int64(value) if isinstance(value, int) else np.float64(value)


def _as_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    return torch.tensor(value, dtype=torch.float64 if isinstance(value, float) else torch.int64)


def _as_python(value):
    return value.item() if isinstance(value, torch.Tensor) else value


NUMBERS = sorted(
    name
    for name, checker in CHECKERS.items()
    if any(
        isinstance(v, (int, float)) or (isinstance(v, torch.Tensor) and v.ndim == 0 and v.dtype != torch.bool)
        for v in (lambda r: r if isinstance(r, tuple) else (r,))(checker._run(checker.reference, checker.cases[0]))
    )
)


@pytest.mark.parametrize("name", NUMBERS)
@pytest.mark.parametrize("convert", [_as_numpy, _as_tensor, _as_python], ids=["numpy", "0-d tensor", "python"])
def test_a_number_is_a_number_whatever_its_type(name, convert):
    fn = _numbers_as(convert)(OWN[name])
    _right_on_every_case(name, fn)
    result = CHECKERS[name](fn)
    assert result.passed, result.message


def test_counts_are_asked_in_several_exercises():
    assert len(NUMBERS) >= 8, NUMBERS


def test_an_error_deep_in_a_library_is_reported_as_that_error_not_as_not_attempted():
    def deep(x, dim=-1):
        return torch.ops.aten.log_softmax.int(x, dim, torch.complex32)  # raises inside PyTorch, not in the learner's

    def shallow(x, dim=-1):
        raise NotImplementedError

    def in_a_library(x, dim=-1):
        return inspect.signature(object()).bind(x)  # TypeError deep in inspect

    result = CHECKERS["stable_log_softmax"](shallow)
    assert "not attempted" in result.message, result.message
    for fn in (in_a_library,):
        result = CHECKERS["stable_log_softmax"](fn)
        assert "not attempted" not in result.message and "raised" in result.message, result.message

    def library_not_implemented(x, dim=-1):
        import numpy.lib.mixins as mixins

        class Odd(mixins.NDArrayOperatorsMixin):
            def __array_ufunc__(self, *args, **kwargs):
                return NotImplemented

        return Odd() + 1  # TypeError from NumPy

    result = CHECKERS["stable_log_softmax"](library_not_implemented)
    assert "not attempted" not in result.message, result.message

    def raised_deep(x, dim=-1):
        from attnbook import positional

        positional.SinusoidalPositionalEncoding.forward(None, None)  # an error inside the library, not a stub

    result = CHECKERS["stable_log_softmax"](raised_deep)
    assert "not attempted" not in result.message and "raised" in result.message, result.message


def test_flex_attention_is_an_answer_or_its_own_error_never_not_attempted():
    from torch.nn.attention.flex_attention import flex_attention

    def two_source_attention(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
        x, mask = torch.cat([x1, x2], dim=1), torch.cat([mask1, mask2], dim=1)
        q, k, v = (y @ w_q)[:, None], (x @ w_k)[:, None], (x @ w_v)[:, None]

        def score_mod(score, b, h, q_idx, kv_idx):
            return torch.where(mask[b, kv_idx], -float("inf"), score)

        return flex_attention(q, k, v, score_mod=score_mod)[:, 0]

    result = CHECKERS["two_source_attention"](two_source_attention)
    assert "not attempted" not in result.message, result.message


def test_an_answer_compiled_with_torch_compile_is_checked_as_it_is_written():
    """``torch.compile`` (inductor, as a learner would call it) under the checker's modes: dynamo compiles no frame
    while a dispatch mode of this kind is on the stack, so the compiled answer runs as written and the watch sees
    what it calls (were it compiled, its kernels would bypass the modes and the packaged answer would pass)."""

    def own(x, dim=-1):
        top = torch.max(x, dim, keepdim=True).values
        return x - (top + torch.log(torch.sum(torch.exp(x - top), dim, keepdim=True)))

    def no_shift(x, dim=-1):
        return x - torch.log(torch.sum(torch.exp(x), dim, keepdim=True))

    def packaged(x, dim=-1):
        return torch.nn.functional.log_softmax(x, dim=dim)

    x = torch.tensor([[1.0, 2.0, 3.0]])
    for fn in (own, packaged):  # both compute the right numbers, compiled (without inductor's C++: seconds), outside
        torch.testing.assert_close(torch.compile(fn, backend="eager")(x), torch.log_softmax(x, -1))
    result = CHECKERS["stable_log_softmax"](torch.compile(own))
    assert result and result.message.startswith("✓"), result.message
    assert CHECKERS["stable_log_softmax"](torch.compile(no_shift)).mistake == "no shift"
    _refused("stable_log_softmax", torch.compile(packaged), LIBRARY_MISTAKE)


def test_a_query_projected_by_multiply_and_sum_at_each_step_is_a_step_by_step_projection():
    def cross_attention_steps(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
        B, T, d = y.shape
        d_k = d // num_heads
        keys = (memory @ w_k + b_k).reshape(B, -1, num_heads, d_k).transpose(1, 2)
        values = (memory @ w_v + b_v).reshape(B, -1, num_heads, d_k).transpose(1, 2)
        outs = []
        for t in range(T):
            q = ((y[:, t, :, None] * w_q).sum(1) + b_q).reshape(B, num_heads, 1, d_k)
            scores = (q @ keys.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(
                src_padding_mask[:, None, None], float("-inf")
            )
            outs.append((torch.softmax(scores, -1) @ values).transpose(1, 2).reshape(B, 1, d))
        return torch.cat(outs, dim=1)

    result = CHECKERS["cross_attention_steps"](cross_attention_steps)
    assert result.passed, result.message


def _state_with(extra):
    """A right fastformer step whose state also holds ``extra(t)``: fixed-size numbers (a step counter, num_heads)."""
    from attnbook.exercises.ch09_fastformer_step import _fastformer_step

    def fastformer_step(layer, x_t, state):
        inner, t = (None, 0) if state is None else (state[0], state[1])
        out, inner = _fastformer_step(layer, x_t, inner)
        return out, (inner, t + 1, *extra(layer, t))

    return fastformer_step


def test_a_fixed_size_state_with_a_counter_and_num_heads_is_fixed():
    from attnbook.exercises.measuring import state_size

    checker = CHECKERS["fastformer_step"]
    for extra in (lambda layer, t: (layer.num_heads,), lambda layer, t: (1, 2, 3), lambda layer, t: (np.int64(t),)):
        sizes = [state_size((0, 5, *extra(types.SimpleNamespace(num_heads=5), t))) for t in range(8)]
        assert len(set(sizes)) == 1, sizes
        result = checker._run(_state_with(extra), checker.cases[1])
        assert result["state grows with the length"] is False


# --- threads and processes ---------------------------------------------------------------------------------------

_POOL = concurrent.futures.ThreadPoolExecutor(1)  # made before any check, as a learner's earlier cell would
_POOL.submit(int).result()


def _in_a_new_pool(fn):
    return lambda *a, **k: concurrent.futures.ThreadPoolExecutor(1).submit(fn, *a, **k).result()


def _in_a_thread(fn):
    def run(*a, **k):
        out = []
        thread = threading.Thread(target=lambda: out.append(fn(*a, **k)))
        thread.start()
        thread.join()
        return out[0]

    return run


def _in_an_earlier_pool(fn):
    return lambda *a, **k: _POOL.submit(fn, *a, **k).result()


THREADED = [("a new ThreadPoolExecutor", _in_a_new_pool), ("threading.Thread", _in_a_thread)]
THREADED += [("a pool made before the check", _in_an_earlier_pool)]


@pytest.mark.parametrize("how", [h for h, _ in THREADED])
@pytest.mark.parametrize("name", NAMES)
def test_the_answer_run_in_another_thread_is_refused(name, how):
    wrap = dict(THREADED)[how]
    fn = wrap(CHECKERS[name].reference)  # the packaged answer: unseen in its thread
    _right_on_every_case(name, fn)
    result = _refused(name, fn, THREAD_MISTAKE)
    assert "one thread" in result.message, result.message


def _in_the_child(fn, a, k):
    torch.set_num_threads(1)  # the parent's OpenMP pool did not survive the fork
    return fn(*a, **k)


#: The functions handed to a forked pool, by key: the child finds them in the memory it inherits, so nothing
#: depends on pickling them (a module reloaded by an earlier test makes a reference function unpicklable by name).
_SENT: dict[int, object] = {}


def _in_the_child_by_key(key, a, k):
    return _in_the_child(_SENT[key], a, k)


def _fork_pool(fn):
    def run(*a, **k):
        _SENT[id(fn)] = fn
        with multiprocessing.get_context("fork").Pool(1) as pool:
            return pool.apply(_in_the_child_by_key, (id(fn), a, k))

    return run


def _process_executor(fn):
    def run(*a, **k):
        _SENT[id(fn)] = fn
        context = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            return pool.submit(_in_the_child_by_key, id(fn), a, k).result()

    return run


def _forked(fn):
    def run(*a, **k):
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            torch.set_num_threads(1)  # the parent's OpenMP pool did not survive the fork
            with os.fdopen(write, "wb") as out:
                pickle.dump(fn(*a, **k), out)
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as inp:
            value = pickle.load(inp)
        os.waitpid(child, 0)
        return value

    return run


PROCESSES = {"a forked Pool": _fork_pool, "a ProcessPoolExecutor": _process_executor, "os.fork": _forked}
FIRST_OF_EACH_CHAPTER = sorted({_chapter(n): n for n in reversed(NAMES)}.values())
#: Exercises whose inputs are plain Python: a pool's pipes would share a tensor's memory through file descriptors.
PLAIN = sorted(
    name
    for name, checker in CHECKERS.items()
    if not any(isinstance(a, torch.Tensor) or isinstance(a, torch.nn.Module) for c in checker.cases for a in c.args)
)
PROCESS_TRIES = [(name, "os.fork") for name in FIRST_OF_EACH_CHAPTER]
PROCESS_TRIES += [(name, how) for name in PLAIN for how in ("a forked Pool", "a ProcessPoolExecutor")]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork with threads: the try is a cheat's
@pytest.mark.parametrize(("name", "how"), PROCESS_TRIES, ids=[f"{n}: {h}" for n, h in PROCESS_TRIES])
def test_the_answer_run_in_another_process_is_refused(name, how):
    fn = PROCESSES[how](CHECKERS[name].reference)
    _right_on_every_case(name, fn)
    result = _refused(name, fn, THREAD_MISTAKE)
    assert "another process" in result.message or "another thread" in result.message, result.message


def test_processes_are_tried_in_every_chapter():
    assert len({_chapter(n) for n, _ in PROCESS_TRIES}) >= 10 and len(PLAIN) >= 5, PLAIN


def test_a_subprocess_is_refused():
    import subprocess

    def corpus_brevity_penalty(hyp_lens, ref_lens):
        code = "import sys, math; print(0.0)"
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        return CHECKERS["corpus_brevity_penalty"].reference(hyp_lens, ref_lens)

    _refused("corpus_brevity_penalty", corpus_brevity_penalty, THREAD_MISTAKE, SOLUTION_MISTAKE)
    result = CHECKERS["corpus_brevity_penalty"](corpus_brevity_penalty)
    assert "another process" in result.message, result.message


# --- the solution that ships with the checker --------------------------------------------------------------------


def _solution_copies(fn):
    module = sys.modules[fn.__module__]
    code = fn.__code__
    renamed = types.FunctionType(code.replace(co_name="mine"), fn.__globals__, "mine", fn.__defaults__, fn.__closure__)
    moved = types.FunctionType(code.replace(co_firstlineno=code.co_firstlineno + 7), fn.__globals__, "moved")
    moved.__defaults__ = fn.__defaults__
    return [
        ("check_xxx.reference", fn),
        ("the chapter module's private function", getattr(module, fn.__name__)),
        ("its code object renamed", renamed),
        ("its code object moved down", moved),
        (
            "a bound method of its checker",
            functools.partial(
                lambda self, *a, **k: self.reference(*a, **k),
                CHECKERS[next(n for n, c in CHECKERS.items() if c.reference is fn)],
            ),
        ),
    ]


SOLUTION_TRIES = [(name, how, fn) for name in NAMES for how, fn in _solution_copies(CHECKERS[name].reference)]


@pytest.mark.parametrize(("name", "how", "fn"), SOLUTION_TRIES, ids=[f"{n}: {h}" for n, h, _ in SOLUTION_TRIES])
def test_the_solution_that_ships_with_the_checker_is_refused(name, how, fn):
    _right_on_every_case(name, fn)
    result = _refused(name, fn, SOLUTION_MISTAKE)
    assert "checker's own solution" in result.message, result.message


def test_the_checkers_have_no_public_reference_but_their_solution_still_passes_through_verify():
    for checker in CHECKERS.values():
        assert checker.verify().passed
        with pytest.raises(ValueError):
            checker.verify(SOLUTIONS[checker.name])


# --- the watcher switched off or patched -------------------------------------------------------------------------

FORBIDDING = sorted((n, d, a) for n, c in CHECKERS.items() for d, a in c.forbidden.items() if a is not None)
ONE_PLANTED = sorted({n: (n, d, a) for n, d, a in FORBIDDING}.values())


def _profile_off(answer):
    def run(*a, **k):
        hook = sys.getprofile()
        sys.setprofile(None)
        try:
            return answer(*a, **k)
        finally:
            sys.setprofile(hook)

    return run


def _torch_function_off(answer):
    def run(*a, **k):
        with torch._C.DisableTorchFunction():
            return answer(*a, **k)

    return run


def _trace_and_profile_swapped(answer):
    def run(*a, **k):
        hook = sys.getprofile()
        sys.setprofile(lambda *args: None)
        try:
            return answer(*a, **k)
        finally:
            sys.setprofile(hook)

    return run


@pytest.mark.parametrize(
    "how", ["sys.setprofile(None)", "torch._C.DisableTorchFunction()", "a profile hook of its own"]
)
@pytest.mark.parametrize(("name", "dotted", "answer"), ONE_PLANTED, ids=[n for n, _, _ in ONE_PLANTED])
def test_a_watch_switched_off_inside_the_answer_is_refused(name, dotted, answer, how):
    wrap = {
        "sys.setprofile(None)": _profile_off,
        "torch._C.DisableTorchFunction()": _torch_function_off,
        "a profile hook of its own": _trace_and_profile_swapped,
    }[how]
    fn = wrap(answer)
    with contextlib.suppress(Exception):  # DisableTorchFunction breaks a few of PyTorch's Python-level answers
        _right_on_every_case(name, fn)
    _refused(name, fn, WATCH_MISTAKE, LIBRARY_MISTAKE)
    if how != "torch._C.DisableTorchFunction()":
        assert CHECKERS[name](fn).mistake == WATCH_MISTAKE


@contextlib.contextmanager
def _patched(owner, attribute, value):
    saved = vars(owner).get(attribute, _MISSING) if not isinstance(owner, dict) else owner.get(attribute, _MISSING)
    setattr(owner, attribute, value)
    try:
        yield
    finally:
        if saved is _MISSING:
            delattr(owner, attribute)
        else:
            setattr(owner, attribute, saved)


_MISSING = object()


@pytest.mark.parametrize(("name", "dotted", "answer"), ONE_PLANTED, ids=[n for n, _, _ in ONE_PLANTED])
def test_a_checker_patched_from_the_cell_reports_its_own_mistake(name, dotted, answer):
    checker = CHECKERS[name]
    tries = [
        (checking_module, "watch", lambda *a, **k: contextlib.nullcontext(exercises.Record())),
        (checker, "refusals", Refusals([])),
        (checker, "_refused", lambda *a, **k: None),
        (type(checker), "_library_used", lambda *a, **k: None),
        (checker, "_check_loop", lambda *a, **k: None),
    ]
    for owner, attribute, value in tries:
        with _patched(owner, attribute, value):
            result = checker(answer)
        assert not result and result.mistake == WATCH_MISTAKE, (attribute, result.message)
    saved = dict(checker.refusals.codes), dict(checker.refusals.ops)
    checker.refusals.codes.clear()
    checker.refusals.ops.clear()
    try:
        result = checker(answer)
    finally:
        checker.refusals.codes.update(saved[0])
        checker.refusals.ops.update(saved[1])
    assert not result and result.mistake == WATCH_MISTAKE, result.message
    assert checker.verify().passed


# --- copies of packaged code under a new code object -------------------------------------------------------------


def _python_answers():
    """(checker, dotted, planted answer, the global name the answer calls it by, the function) for each planted call of
    a refused Python function long enough to be known by its fingerprint."""
    found = []
    for name, dotted, answer in FORBIDDING:
        for key, value in vars(sys.modules[answer.__module__]).items():
            if isinstance(value, types.FunctionType) and value.__code__ in CHECKERS[name].refusals.codes:
                if len(value.__code__.co_code) >= 24 and key in answer.__code__.co_names:
                    found.append((name, dotted, answer, key, value))
    return found


def _copies(fn):
    code = fn.__code__
    renamed = types.FunctionType(
        code.replace(co_name="mine", co_filename="<mine>", co_firstlineno=1), fn.__globals__, "mine", fn.__defaults__
    )
    renamed.__kwdefaults__ = fn.__kwdefaults__
    namespace = dict(fn.__globals__)
    exec(compile(inspect.getsource(fn), "<string>", "exec"), namespace)
    module_source = inspect.getsource(sys.modules[fn.__module__])
    original = sys.modules[fn.__module__]
    elsewhere = types.ModuleType(f"elsewhere_{fn.__module__.replace('.', '_')}")
    elsewhere.__package__ = original.__package__
    sys.modules[elsewhere.__name__] = elsewhere  # as a learner's own module would be
    exec(compile("\n" + module_source, "elsewhere.py", "exec"), vars(elsewhere))  # shifted by one line
    return [("renamed code object", renamed), ("exec(inspect.getsource(f))", namespace[fn.__name__])] + [
        ("the module's source under another file name", getattr(elsewhere, fn.__name__))
    ]


COPY_TRIES = [
    (name, f"{dotted}: {how}", answer, key, copy)
    for name, dotted, answer, key, fn in _python_answers()
    for how, copy in _copies(fn)
]


@pytest.mark.parametrize(
    ("name", "how", "answer", "key", "copy"), COPY_TRIES, ids=[f"{n}: {h}" for n, h, _, _, _ in COPY_TRIES]
)
def test_a_copy_of_a_refused_function_is_known_by_its_bytecode(name, how, answer, key, copy):
    globals_ = dict(answer.__globals__)
    globals_[key] = copy
    fn = types.FunctionType(answer.__code__, globals_, answer.__name__, answer.__defaults__, answer.__closure__)
    _right_on_every_case(name, fn)
    result = _refused(name, fn, LIBRARY_MISTAKE)
    assert "it called `" in result.message


def test_copies_are_tried_in_several_chapters():
    assert len({_chapter(n) for n, *_ in COPY_TRIES}) >= 3 and len(COPY_TRIES) >= 15, len(COPY_TRIES)


# --- other homes of the answer -----------------------------------------------------------------------------------


def _traced_log_softmax():
    return torch.jit.trace(lambda x: torch.log_softmax(x, -1), torch.zeros(2, 3))


HOMES = {
    "stable_log_softmax": [
        (
            "SciPy's log_softmax",
            lambda x, dim=-1: torch.from_numpy(__import__("scipy.special").special.log_softmax(x.numpy(), dim)),
        ),
        (
            "SciPy's logsumexp",
            lambda x, dim=-1: (
                x - torch.from_numpy(__import__("scipy.special").special.logsumexp(x.numpy(), dim, keepdims=True))
            ),
        ),
        ("torch._refs.log_softmax", lambda x, dim=-1: __import__("torch._refs").__dict__["_refs"].log_softmax(x, dim)),
        (
            "torch._decomp.decompositions._log_softmax",
            lambda x, dim=-1: importlib.import_module("torch._decomp.decompositions")._log_softmax(x, dim, False),
        ),
        (
            "Categorical's logits",
            lambda x, dim=-1: torch.distributions.Categorical(logits=x.movedim(dim, -1)).logits.movedim(-1, dim),
        ),
        ("a logcumsumexp", lambda x, dim=-1: x - torch.logcumsumexp(x, dim).narrow(dim, x.shape[dim] - 1, 1)),
    ],
    "best_candidate": [
        (
            "F.kl_div against a one-hot target",
            lambda logits, targets, pad_id=0: _scores(
                -torch.nn.functional.kl_div(
                    torch.log_softmax(logits, -1),
                    torch.nn.functional.one_hot(targets, logits.shape[-1]).to(logits.dtype),
                    reduction="none",
                ).sum(-1),
                targets,
                pad_id,
            ),
        ),
        (
            "Categorical.log_prob",
            lambda logits, targets, pad_id=0: _scores(
                torch.distributions.Categorical(logits=logits).log_prob(targets), targets, pad_id
            ),
        ),
        (
            "PoissonNLLLoss against a one-hot target",
            lambda logits, targets, pad_id=0: _scores(
                1
                - torch.nn.functional.poisson_nll_loss(
                    torch.log_softmax(logits, -1),
                    torch.nn.functional.one_hot(targets, logits.shape[-1]).to(logits.dtype),
                    reduction="none",
                ).sum(-1),
                targets,
                pad_id,
            ),
        ),
    ],
    "new_queries_mask": [
        (
            "transformer._generate_square_subsequent_mask",
            lambda lengths, T, S: (
                torch.nn.modules.transformer._generate_square_subsequent_mask(S).isinf()[S - T :][None]
                | (torch.arange(S)[None, :] >= lengths[:, None])[:, None, :]
            ),
        ),
    ],
}


def _scores(picked, targets, pad_id):
    real = targets != pad_id
    scores = (picked * real).sum(-1) / real.sum(-1)
    return scores, scores.argmax(-1)


HOME_TRIES = [(name, how, fn) for name, tries in sorted(HOMES.items()) for how, fn in tries]


@pytest.mark.parametrize(("name", "how", "fn"), HOME_TRIES, ids=[f"{n}: {h}" for n, h, _ in HOME_TRIES])
def test_another_home_of_the_answer_is_refused(name, how, fn):
    _right_on_every_case(name, fn)
    result = _refused(name, fn, LIBRARY_MISTAKE)
    assert "it called `" in result.message


def test_a_traced_log_softmax_made_before_the_check_is_refused():
    traced = _traced_log_softmax()

    def stable_log_softmax(x, dim=-1):
        return traced(x.movedim(dim, -1)).movedim(-1, dim)

    _refused("stable_log_softmax", stable_log_softmax, LIBRARY_MISTAKE)


# --- requirements met by their proxy -----------------------------------------------------------------------------

_LOOPED_AT_RUN_TIME = {
    "last_real_state": "def f(outputs, lengths):\n"
    "    rows = []\n"
    "    for b in range(outputs.shape[0]):\n"
    "        rows.append(outputs[b, lengths[b] - 1])\n"
    "    return torch.stack(rows)\n",
    "trim_after_eos": "def f(ids, eos_id=2, pad_id=0):\n"
    "    out = ids.clone()\n"
    "    for row in out:\n"
    "        for t in range(1, len(row)):\n"
    "            if (row[:t] == eos_id).any():\n"
    "                row[t] = pad_id\n"
    "    return out\n",
    "decoder_input_and_target": "def f(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):\n"
    "    B = tgt.shape[0]\n"
    "    tgt_in = torch.cat([torch.full((B, 1), bos_id, dtype=tgt.dtype), tgt], 1)\n"
    "    tgt_out = torch.cat([tgt, torch.full((B, 1), pad_id, dtype=tgt.dtype)], 1)\n"
    "    for b in range(B):\n"
    "        tgt_out[b, lengths[b]] = eos_id\n"
    "    return tgt_in, tgt_out\n",
}


@pytest.mark.parametrize("filename", ["<loop>", "<string>", "<ipython-input-1-abc>"])
@pytest.mark.parametrize("name", sorted(_LOOPED_AT_RUN_TIME))
def test_a_loop_compiled_at_run_time_counts_as_the_learners(name, filename):
    namespace = {"torch": torch}
    exec(compile(_LOOPED_AT_RUN_TIME[name], filename, "exec"), namespace)
    _right_on_every_case(name, namespace["f"])
    _refused(name, namespace["f"], LOOP_MISTAKE)


_PREFIX: list = []


def _growing_state(keep):
    """A right fastformer step that keeps the prefix somewhere else than in its state: ``keep(prefix) -> state``."""
    from attnbook.exercises.ch09_fastformer_step import _fastformer_step

    def fastformer_step(layer, x_t, state):
        inner = None if state is None else state["inner"]
        out, inner = _fastformer_step(layer, x_t, inner)
        return out, {"inner": inner, "where": keep(x_t)}

    return fastformer_step


class _Keeper:
    rows: list = []


_BOXES: dict = {"numpy": [], "partial": []}


def _in_numpy(x_t):
    box = _BOXES["numpy"]
    box[:] = [np.concatenate([box[0], x_t.numpy()]) if box else x_t.numpy()]
    return box[0]


def _in_a_class_attribute(x_t):
    _Keeper.rows = _Keeper.rows + [x_t.clone()]
    return _Keeper


def _in_a_partial(x_t):
    _BOXES["partial"].append(x_t.clone())
    return functools.partial(print, *_BOXES["partial"])


def _in_a_global(x_t):
    _PREFIX.append(x_t.clone())
    return len


GROWING = [("a NumPy array", _in_numpy), ("a class attribute", _in_a_class_attribute)]
GROWING += [("a functools.partial", _in_a_partial), ("a module global", _in_a_global)]


@pytest.mark.parametrize("how", [h for h, _ in GROWING])
def test_a_state_kept_anywhere_is_measured(how):
    keep = dict(GROWING)[how]
    _Keeper.rows, _PREFIX[:] = [], []
    fn = _growing_state(keep)

    def fresh(*args):
        if args[2] is None:  # a new sequence: forget what the last one kept
            _Keeper.rows, _PREFIX[:] = [], []
            for box in _BOXES.values():
                box.clear()
        return fn(*args)

    result = CHECKERS["fastformer_step"](fresh)
    assert not result and "grows" in result.message, result.message


def _keys_reprojected_by_multiply_and_sum(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    B, T, d = y.shape
    d_k = d // num_heads
    outs = []
    for t in range(T):
        keys = ((memory[..., None] * w_k).sum(-2) + b_k).reshape(B, -1, num_heads, d_k).transpose(1, 2)
        values = ((memory[..., None] * w_v).sum(-2) + b_v).reshape(B, -1, num_heads, d_k).transpose(1, 2)
        q = (y[:, t] @ w_q + b_q).reshape(B, num_heads, 1, d_k)
        scores = (q @ keys.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(
            src_padding_mask[:, None, None], float("-inf")
        )
        outs.append((torch.softmax(scores, -1) @ values).transpose(1, 2).reshape(B, 1, d))
    return torch.cat(outs, dim=1)


def test_keys_reprojected_each_step_by_multiply_and_sum_are_no_cache():
    _right_on_every_case("cross_attention_steps", _keys_reprojected_by_multiply_and_sum)
    result = CHECKERS["cross_attention_steps"](_keys_reprojected_by_multiply_and_sum)
    assert not result and result.mistake == "keys and values projected at every step", result.message


def _trim_by_list_index(ids, eos_id=2, pad_id=0):
    """Each row's first <eos> found by list.index, run by map over the rows in C: no line of Python per row, no
    PyTorch operation per row, but every number of the batch handed to Python."""
    rows = map(list.__add__, ids.tolist(), itertools.repeat([eos_id]))  # an <eos> at the end of every row
    first = torch.tensor(list(map(list.index, rows, itertools.repeat(eos_id))))
    return ids.masked_fill(torch.arange(ids.shape[1]) > first[:, None], pad_id)


def test_per_row_work_in_c_over_tolist_is_a_loop():
    _right_on_every_case("trim_after_eos", _trim_by_list_index)
    result = CHECKERS["trim_after_eos"](_trim_by_list_index)
    assert not result and result.mistake == LOOP_MISTAKE, result.message
    assert "each number handed to Python, by item() or tolist(), counts as one" in result.message


def _numpy_steps(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads, cache=True, at_once=False):
    """Chapter 8's cross-attention steps in NumPy: with the memory projected once (``cache``) or at every step,
    the queries one position at a time or all at once (``at_once``), in place where NumPy allows it."""
    mem, ys, pad = memory.numpy(), y.numpy(), src_padding_mask.numpy()[:, None, None, :]
    (B, T, d), d_k = ys.shape, y.shape[-1] // num_heads

    def heads(x):
        return x.reshape(B, -1, num_heads, d_k).transpose(0, 2, 1, 3)

    def project(x, w, b):
        out = np.einsum("bsd,de->bse", x, w.numpy())
        out += b.numpy()
        return out

    keys, values = heads(project(mem, w_k, b_k)), heads(project(mem, w_v, b_v))
    queries = heads(project(ys, w_q, b_q)) if at_once else None
    out = np.zeros_like(ys)
    for t in range(T):
        if not cache:
            keys, values = heads(project(mem, w_k, b_k)), heads(project(mem, w_v, b_v))
        q = queries[:, :, t : t + 1] if at_once else heads(project(ys[:, t : t + 1], w_q, b_q))
        scores = np.where(pad, -np.inf, np.matmul(q, keys.transpose(0, 1, 3, 2)) / math.sqrt(d_k))
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        out[:, t] = (weights @ values).transpose(0, 2, 1, 3).reshape(B, d)
    return torch.as_tensor(out)


@pytest.mark.parametrize(
    "options, mistake",
    [
        ({}, None),
        ({"cache": False}, "keys and values projected at every step"),
        ({"at_once": True}, "the whole target at once"),
    ],
)
def test_a_cache_kept_in_numpy_is_measured_as_one_kept_in_pytorch(options, mistake):
    answer = functools.partial(_numpy_steps, **options)
    _right_on_every_case("cross_attention_steps", answer)
    result = CHECKERS["cross_attention_steps"](answer)
    assert bool(result) == (mistake is None) and result.mistake == mistake, result.message


def test_a_triple_loop_and_kl_div_no_longer_pass_best_candidate():
    def triple(logits, targets, pad_id=0):
        B, K, T, V = logits.shape
        scores = torch.zeros(B, K, dtype=logits.dtype)
        for b in range(B):
            for k in range(K):
                real = [t for t in range(T) if targets[b, k, t] != pad_id]
                scores[b, k] = sum(torch.log_softmax(logits[b, k, t], -1)[targets[b, k, t]] for t in real) / len(real)
        return scores, scores.argmax(-1)

    _right_on_every_case("best_candidate", triple)
    _refused("best_candidate", triple, LOOP_MISTAKE)


def test_an_unguarded_penalty_at_c_equal_0_is_refused():
    def corpus_brevity_penalty(hyp_lens, ref_lens):
        c = sum(hyp_lens)
        r = sum(min(refs, key=lambda x: (abs(x - h), x)) for h, refs in zip(hyp_lens, ref_lens))
        return 1.0 if c >= r else math.exp(1 - r / c)

    result = CHECKERS["corpus_brevity_penalty"](corpus_brevity_penalty)
    assert not result and "c = 0" in result.message and "ZeroDivisionError" in result.message, result.message
