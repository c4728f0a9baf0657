"""The solution cells, as the checkers know them: in step with the notebooks, and a copy of one earns no tick.

A learner who reads the solution folded under an exercise, or out of the ``.ipynb``, and submits it, has not done
the exercise: the checker says it is the book's solution, right on every case, and gives no tick. A learner's own
code passes, however close to the book's style.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import pkgutil
import types
from pathlib import Path

import pytest

import attnbook.exercises as exercises
from attnbook.book import solutions
from attnbook.exercises import SOLUTION_MISTAKE
from attnbook.exercises.copies import BOOK_COPY_INSTRUCTIONS, _book_solutions, book_copies
from notebook_index import in_float64

for _module in pkgutil.iter_modules(exercises.__path__):
    importlib.import_module(f"attnbook.exercises.{_module.name}")
CHECKERS = exercises.registry()
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def test_the_file_is_in_step_with_the_notebooks():
    assert solutions.PATH.read_text(encoding="utf-8") == solutions.render(solutions.book_solutions(NOTEBOOKS)), (
        "a solution cell changed: run `python -m attnbook.book.solutions`"
    )


def test_every_checker_has_its_solution_cell_and_every_cell_compiles_here():
    kept = _book_solutions()
    assert set(kept) == set(CHECKERS)
    for name, solution in kept.items():
        assert solution["function"] in "".join(solution["definitions"])
        book_copies(name)  # compiles every definition with this Python (a default argument naming torch included)


def test_the_command_line_says_whether_the_file_is_in_step(tmp_path, capsys):
    assert solutions.main(["--notebooks", str(NOTEBOOKS), "--check"]) == 0
    assert "in step" in capsys.readouterr().out
    assert solutions.main(["--notebooks", str(tmp_path / "none"), "--check"]) == 2
    assert "no notebooks folder" in capsys.readouterr().err


@functools.cache
def _notebook_imports(notebook: Path) -> str:
    """Every import statement of the notebook's code cells, as a learner's kernel would have run them."""
    found = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code":
            try:
                tree = ast.parse("".join(cell["source"]))
            except SyntaxError:  # a cell with an IPython magic
                continue
            found += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(found)


@functools.cache
def _copies(name: str) -> dict[str, object]:
    """The solution cell's function as a learner who copied it could submit it: its definitions run from the
    notebook's JSON (with the notebook's imports, and its default dtype) under another file name, renamed, called
    from a function of their own, or through ``functools.partial``."""
    kept = _book_solutions()[name]
    notebook = NOTEBOOKS / kept["notebook"]
    namespace: dict = {}
    source = _notebook_imports(notebook) + "\n\n" + "\n\n".join(kept["definitions"])
    exec(compile(source, "<read out of the notebook>", "exec"), namespace)
    fn = namespace[kept["function"]]
    renamed = types.FunctionType(fn.__code__.replace(co_name="mine"), fn.__globals__, "mine", fn.__defaults__)
    float64 = "set_default_dtype(torch.float64)" in notebook.read_text(encoding="utf-8")

    def mine(*args, **kwargs):
        return fn(*args, **kwargs)

    tries = {"called from one's own": in_float64(mine) if float64 else mine}
    copies = {"run from the notebook's JSON": fn, "renamed": renamed, "a partial": functools.partial(fn)}
    if float64:  # each in the notebook's float64, from a function of one's own
        copies = {how: in_float64(f) for how, f in copies.items()}
    assert tries.keys() | copies.keys() == set(HOWS)
    return tries | copies


#: How a learner who copied the solution cell could submit it (:func:`_copies` builds each, when a test needs it:
#: running a notebook's imports takes seconds, which collecting the tests on every worker should not).
HOWS = ["called from one's own", "run from the notebook's JSON", "renamed", "a partial"]
KNOWN = sorted(name for name in CHECKERS if book_copies(name))
TRIES = [(name, how) for name in KNOWN for how in HOWS]


@pytest.mark.parametrize(("name", "how"), TRIES, ids=[f"{n}: {h}" for n, h in TRIES])
def test_a_copy_of_the_solution_cell_earns_no_tick(name, how):
    fn = _copies(name)[how]
    result = CHECKERS[name](fn)
    assert not result.passed and result.mistake == SOLUTION_MISTAKE, result.message
    assert "the book's solution" in result.message and "no tick" in result.message


def test_copies_are_tried_in_every_chapter_with_exercises():
    chapters = {_book_solutions()[name]["notebook"][:2] for name in KNOWN}
    assert chapters == {solution["notebook"][:2] for solution in _book_solutions().values()}


def test_a_one_line_solution_is_anyones_answer():
    short = sorted(set(CHECKERS) - set(KNOWN))
    assert short, "every solution is long enough to be known: the rule for one-liners is untested"
    for name in short:
        (definition,) = _book_solutions()[name]["definitions"]
        assert definition.count("\n    return") == 1 and len(definition.splitlines()) <= 4, definition
        assert BOOK_COPY_INSTRUCTIONS > 12


def test_the_file_is_data_a_learner_can_read_but_not_a_function_to_call():
    text = solutions.PATH.read_text(encoding="utf-8")
    assert json.loads(text)["about"].startswith("Written by `python -m attnbook.book.solutions`")
    assert not any(
        name.endswith("book_solutions") for name in map(lambda m: m.name, pkgutil.iter_modules(exercises.__path__))
    )
