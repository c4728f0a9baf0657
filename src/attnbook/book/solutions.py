"""The notebooks' solution cells, as the checkers know them: each exercise's solution, copied out of its notebook.

A learner who copies the solution folded under an exercise (or reads it out of the ``.ipynb``) and submits it has
not done the exercise. The checkers recognise such a copy by what its code does (its bytecode, constants and
names, whatever its name, file or line numbers; see :func:`attnbook.exercises.watching.fingerprint`), and for that
they need the solution's source, compiled by the Python that runs them: bytecode differs between versions. So the
definitions of every solution cell are kept in ``attnbook/exercises/book_solutions.json``, written from the
notebooks by ``python -m attnbook.book.solutions`` and held in step with them by ``tests/test_book_solutions.py``.

The file holds no more than the notebooks show: a learner who finds it finds the solutions the book prints, and a
submitted copy of any of them is refused like the cell itself.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

__all__ = ["TITLE", "solution_cells", "book_solutions", "PATH", "render", "main"]

#: The first line of a solution cell (Colab shows it as the cell's title).
TITLE = "# @title Solution"

#: Where the checkers read the solutions, inside the installed library.
PATH = Path(__file__).resolve().parent.parent / "exercises" / "book_solutions.json"


def _checked(tree: ast.Module) -> list[tuple[str, str]]:
    """``(exercise, function)`` for each ``check_<exercise>(<function>)`` call at the top of a cell."""
    found = []
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id.startswith("check_")
            and call.args
            and isinstance(call.args[0], ast.Name)
        ):
            found.append((call.func.id[len("check_") :], call.args[0].id))
    return found


def solution_cells(notebook: Path) -> list[str]:
    """The sources of a notebook's solution cells, in order."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return [s for s in sources if s.startswith(TITLE)]


def book_solutions(notebooks: Path) -> dict[str, dict]:
    """``{exercise: {"notebook", "function", "definitions"}}`` for every solution cell that checks a function:
    the function the cell submits, and the source of every function the cell defines (helpers included, in the
    cell's order)."""
    found: dict[str, dict] = {}
    for notebook in sorted(notebooks.glob("[0-9][0-9]_*.ipynb")):
        for source in solution_cells(notebook):
            tree = ast.parse(source)
            definitions = [
                ast.get_source_segment(source, node, padded=False)
                for node in tree.body
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            ]
            for exercise, function in _checked(tree):
                if exercise in found:
                    raise ValueError(
                        f"two solution cells check {exercise!r}: {found[exercise]['notebook']}, {notebook.name}"
                    )
                found[exercise] = {"notebook": notebook.name, "function": function, "definitions": definitions}
    return dict(sorted(found.items()))


def render(solutions: dict[str, dict]) -> str:
    """The file's text: the solutions, and a line that says where they come from."""
    about = "Written by `python -m attnbook.book.solutions` from the notebooks' solution cells: do not edit."
    return json.dumps({"about": about, "solutions": solutions}, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.book.solutions", description=__doc__.split("\n")[0])
    parser.add_argument("--notebooks", type=Path, default=Path("notebooks"), help="the notebooks' folder")
    parser.add_argument("--check", action="store_true", help="only say whether the file is in step (exit 1 if not)")
    args = parser.parse_args(argv)
    if not args.notebooks.is_dir():
        print(f"no notebooks folder at {args.notebooks}", file=sys.stderr)
        return 2
    text = render(book_solutions(args.notebooks))
    current = PATH.read_text(encoding="utf-8") if PATH.is_file() else ""
    if args.check:
        print("in step" if text == current else f"{PATH.name} differs from the notebooks: run without --check")
        return 0 if text == current else 1
    if text != current:
        PATH.write_text(text, encoding="utf-8")
    print(f"{PATH.name}: {len(json.loads(text)['solutions'])} exercises")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
