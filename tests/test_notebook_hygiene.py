"""Notebook hygiene: executed in order, no errors, no noise, nothing of this machine, in sync with _config.yml."""

from __future__ import annotations

import re

import pytest

from attnbook.book.config import SETUP_TAG, badge_markdown, setup_cell_source
from notebook_index import LOCAL_PATH, NOTEBOOKS, ROOT, read_notebook, training_cells
from notebook_index import TRAINING_NOTEBOOKS as TRAINING

IDS = [p.name for p in NOTEBOOKS]
PROGRESS_BAR = re.compile(r"\d+%\|[█▏▎▍▌▋▊▉ #]*\|")
TIMING_WORDS = re.compile(r"\b(times?|timings?|timed|seconds|ms|µs|throughput|per second|speed|median)\b", re.I)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _text_of(output) -> str:
    if output.output_type == "stream":
        return output.text
    if output.output_type == "error":
        return "\n".join(output.traceback)
    data = output.get("data", {})
    return "\n".join(v for k, v in data.items() if k.startswith("text/") and isinstance(v, str))


def _ignored(cell) -> bool:
    return "NBVAL_IGNORE_OUTPUT" in cell.source or "nbval-ignore-output" in cell.metadata.get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_name_and_title(path):
    assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), "notebooks are named NN_topic.ipynb"
    nb = read_notebook(path)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), "the first cell is the title"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_executed_top_to_bottom_in_order(path):
    counts = [c.execution_count for c in _code_cells(read_notebook(path))]
    assert None not in counts, "some code cells were never executed: run `make execute`"
    assert counts == list(range(1, len(counts) + 1)), f"cells ran out of order: {counts}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_errors_no_empty_cells_no_widgets(path):
    nb = read_notebook(path)
    assert "widgets" not in nb.metadata, "stored widget state"
    for i, cell in enumerate(_code_cells(nb)):
        assert cell.source.strip(), f"code cell {i} is empty"
        assert "widgets" not in cell.metadata
        tags = set(cell.metadata.get("tags", []))
        assert not tags & {"nbval-skip", "raises-exception", "nbval-raises-exception"}, (
            f"code cell {i} escapes nbval: {tags}"
        )
        assert "NBVAL_SKIP" not in cell.source and "NBVAL_RAISES_EXCEPTION" not in cell.source, (
            f"code cell {i} escapes nbval"
        )
        for output in cell.outputs:
            assert output.output_type != "error", f"code cell {i} stored an error: {output.get('ename')}"
            assert not (output.output_type == "stream" and output.name == "stderr"), (
                f"code cell {i} wrote to stderr (warnings or progress bars): {output.text[:200]!r}"
            )
            assert "application/vnd.jupyter.widget-view+json" not in output.get("data", {})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_local_paths_or_progress_bars_in_outputs(path):
    for i, cell in enumerate(_code_cells(read_notebook(path))):
        for output in cell.outputs:
            text = _text_of(output)
            match = LOCAL_PATH.search(text)
            assert not match, f"code cell {i} shows a path of this machine: {match.group(0)!r}"
            assert not PROGRESS_BAR.search(text), f"code cell {i} stored a progress bar"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_ignore_output_is_rare_and_only_for_timings(path):
    code = _code_cells(read_notebook(path))
    ignored = [c for c in code if _ignored(c)]
    assert len(ignored) <= 0.1 * len(code), f"{len(ignored)} of {len(code)} code cells ignore their output"
    for cell in ignored:
        assert TIMING_WORDS.search(cell.source), (
            f"NBVAL_IGNORE_OUTPUT on a cell that is not a timing:\n{cell.source[:200]}"
        )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_badge_and_setup_cell_follow_config(path):
    nb = read_notebook(path)
    assert badge_markdown(path.name) in nb.cells[0].source, (
        "the Colab badge does not match _config.yml: run `make execute`"
    )
    setup = _code_cells(nb)[0]
    assert setup.source == setup_cell_source(), "the setup cell does not match _config.yml: run `make execute`"
    assert SETUP_TAG in setup.metadata.get("tags", []), f"the setup cell must carry the tag {SETUP_TAG!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_is_in_the_toc(path):
    toc = (ROOT / "_toc.yml").read_text()
    assert f"file: notebooks/{path.stem}\n" in toc


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_exercise_has_a_folded_solution_and_checkers_pass(path):
    nb = read_notebook(path)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    labels = re.findall(r"```\{exercise\}[^\n]*\n:label: ([\w-]+)", text)
    assert len(labels) >= 2, "every chapter has at least two exercises"
    gated = re.findall(r"```\{solution-start\} ([\w-]+)\n:class: dropdown", text)
    written = re.findall(r"```\{solution\} ([\w-]+)\n:class: dropdown", text)
    assert sorted(gated + written) == sorted(labels), "every exercise has exactly one folded (dropdown) solution"
    assert text.count("{solution-start}") == text.count("{solution-end}")
    checked = 0
    for label in gated:
        start = next(i for i, c in enumerate(nb.cells) if f"{{solution-start}} {label}" in c.source)
        end = next(i for i in range(start, len(nb.cells)) if "{solution-end}" in nb.cells[i].source)
        code = [c for c in nb.cells[start + 1 : end] if c.cell_type == "code"]
        assert code, f"solution {label} runs code"
        for cell in code:
            if "check_" in cell.source:
                # a pass, or (a copy of the book's solution earns no tick) the verdict that it is right on every case
                verdicts = [_text_of(o) for o in cell.outputs]
                assert any(
                    "✓" in v or ("the book's solution" in v and re.search(r"it passes all \d+ cases", v))
                    for v in verdicts
                ), f"solution {label}: its checker did not pass"
                checked += 1
    assert checked >= 2, "at least two exercises per chapter are coding exercises whose solution passes a checker"


def _library_names() -> dict[str, str]:
    import importlib
    import pkgutil

    import attnbook

    names: dict[str, str] = {}
    for info in pkgutil.walk_packages(attnbook.__path__, "attnbook."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            names.setdefault(name, info.name)
    return names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_never_redefines_the_library(path):
    import ast

    from IPython.core.inputtransformer2 import TransformerManager

    library = _library_names()
    to_python = TransformerManager().transform_cell
    for i, cell in enumerate(_code_cells(read_notebook(path))):
        for node in ast.walk(ast.parse(to_python(cell.source))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in library:
                raise AssertionError(
                    f"code cell {i} defines {node.name}, which {library[node.name]} already defines: "
                    "import it, or give the hand-built version its own name"
                )


CHECK_CALL = re.compile(r"^(check_\w+)\((\w+)\)\s*$", re.M)


def _function(source: str, name: str):
    import ast

    from IPython.core.inputtransformer2 import TransformerManager

    tree = ast.parse(TransformerManager().transform_cell(source))
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _is_stub(function) -> bool:
    """A docstring, then `...` and nothing else."""
    import ast

    body = function.body
    has_doc = (
        bool(body)
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    rest = body[1:] if has_doc else body
    return (
        has_doc
        and len(rest) == 1
        and isinstance(rest[0], ast.Expr)
        and getattr(rest[0].value, "value", None) is Ellipsis
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_coding_exercise_has_an_attempt_cell_and_a_hidden_solution(path):
    """Exercise, attempt cell (stub + checker, stored 'not attempted yet'), then the solution,
    hidden where a learner runs it.

    A coding exercise is one whose solution calls a checker (``check_name(function)``).
    """
    _check_attempt_and_solution_cells(read_notebook(path))


def _check_attempt_and_solution_cells(nb):
    import ast

    from attnbook.book.execute import SOLUTION_TITLE
    from attnbook.exercises import NOT_ATTEMPTED

    starts = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "{solution-start}" in c.source]
    for start in starts:
        label = re.search(r"\{solution-start\} ([\w-]+)", nb.cells[start].source).group(1)
        end = next(i for i in range(start, len(nb.cells)) if "{solution-end}" in nb.cells[i].source)
        solution = [c for c in nb.cells[start + 1 : end] if c.cell_type == "code"]
        for cell in solution:
            assert cell.source.split("\n", 1)[0] == SOLUTION_TITLE, (
                f"solution {label}: its first line is the Colab form title"
            )
            assert cell.metadata.get("cellView") == "form", (
                f"solution {label}: a Colab form (cellView: form) hides it in Colab"
            )
            assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, (
                f"solution {label}: hidden in JupyterLab"
            )
        calls = sorted({call for cell in solution for call in CHECK_CALL.findall(cell.source)})
        if not calls:
            continue  # an open exercise: its solution runs an experiment
        attempt = nb.cells[start - 1]
        where = f"exercise {label}"
        assert attempt.cell_type == "code", f"{where}: the cell just before its solution-start is the attempt cell"
        exercise = nb.cells[start - 2]
        assert exercise.cell_type == "markdown" and f":label: {label}" in exercise.source, (
            f"{where}: the attempt cell comes right after the exercise"
        )
        assert "@title" not in attempt.source and not attempt.metadata.get("jupyter", {}).get("source_hidden"), (
            f"{where}: the attempt cell is shown, not hidden"
        )
        assert sorted(set(CHECK_CALL.findall(attempt.source))) == calls, (
            f"{where}: the attempt cell makes the solution's checker call(s) {calls}"
        )
        for checker, name in calls:
            assert re.search(rf"^from attnbook\.exercises\.\w+ import .*\b{checker}\b", attempt.source, re.M), (
                f"{where}: the attempt cell imports {checker}"
            )
            stub = _function(attempt.source, name)
            assert stub is not None and _is_stub(stub), (
                f"{where}: the attempt cell defines {name} as a stub: a docstring, then `...`"
            )
            answer = next(f for cell in solution if (f := _function(cell.source, name)) is not None)
            assert ast.unparse(stub.args) == ast.unparse(answer.args), (
                f"{where}: the stub's signature ({ast.unparse(stub.args)}) "
                f"differs from the solution's ({ast.unparse(answer.args)})"
            )
        shown = "\n".join(_text_of(o) for o in attempt.outputs)
        assert all(o.output_type != "error" for o in attempt.outputs) and "Traceback" not in shown, (
            f"{where}: the attempt cell stored an error"
        )
        assert shown.count("○ ") == len(calls) and shown.count(NOT_ATTEMPTED) == len(calls), (
            f"{where}: the attempt cell's stored output is the checker's '{NOT_ATTEMPTED}' message, got {shown[:200]!r}"
        )


def _exercise_notebook():
    """A chapter's coding exercise in the required format, as `attnbook.book.execute` leaves it."""
    import nbformat

    from attnbook.book.execute import hide_solution

    v4 = nbformat.v4
    attempt = v4.new_code_cell(
        "from attnbook.exercises.ch00_tensors import check_stable_softmax\n\n\n"
        'def stable_softmax(x, dim=-1):\n    """The softmax of x along dim, without overflow."""\n'
        "    ...  # your code here\n\n\n"
        "check_stable_softmax(stable_softmax)"
    )
    attempt.outputs = [
        v4.new_output("execute_result", {"text/plain": "○ stable_softmax: not attempted yet (it returned None). ..."})
    ]
    solution = v4.new_code_cell(
        "from attnbook.exercises.ch00_tensors import check_stable_softmax\n\n\n"
        "def stable_softmax(x, dim=-1):\n    return (x - x.amax(dim, keepdim=True)).softmax(dim)\n\n\n"
        "check_stable_softmax(stable_softmax)"
    )
    solution.outputs = [v4.new_output("execute_result", {"text/plain": "✓ stable_softmax: all 5 cases pass."})]
    hide_solution(solution)
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_markdown_cell("```{exercise} A stable softmax\n:label: ch00-stable\n\nWrite it.\n```"),
        attempt,
        v4.new_markdown_cell("```{solution-start} ch00-stable\n:class: dropdown\n```"),
        solution,
        v4.new_markdown_cell("```{solution-end}\n```"),
    ]
    return nb


def test_the_attempt_cell_rule_accepts_the_format_and_names_each_gap():
    _check_attempt_and_solution_cells(_exercise_notebook())

    def broken(change):
        nb = _exercise_notebook()
        change(nb)
        return nb

    def no_attempt(nb):
        del nb.cells[1]

    def shown_solution(nb):
        nb.cells[3].metadata.pop("cellView")

    def solved_attempt(nb):
        nb.cells[1].source = nb.cells[1].source.replace("...  # your code here", "return x.softmax(dim)")

    def other_signature(nb):
        nb.cells[1].source = nb.cells[1].source.replace("(x, dim=-1)", "(x)")

    def traceback(nb):
        nb.cells[1].outputs = [
            __import__("nbformat").v4.new_output("error", ename="NameError", evalue="x", traceback=["Traceback"])
        ]

    def other_checker(nb):
        nb.cells[1].source = nb.cells[1].source.rsplit("\n", 1)[0]  # the checker call is the last line

    for change, words in [
        (no_attempt, "attempt cell"),
        (shown_solution, "Colab form"),
        (solved_attempt, "stub"),
        (other_signature, "signature"),
        (traceback, "stored an error"),
        (other_checker, "checker call"),
    ]:
        with pytest.raises(AssertionError, match=words):
            _check_attempt_and_solution_cells(broken(change))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_diagrams_are_shown_as_images_without_their_code(path):
    """A diagram from attnbook.diagrams is drawn by a cell the book hides (remove-input) and stored as an image."""
    for i, cell in enumerate(_code_cells(read_notebook(path))):
        if "attnbook.diagrams" not in cell.source:
            continue
        assert "remove-input" in cell.metadata.get("tags", []), f"code cell {i} draws a diagram: tag it remove-input"
        assert any("image/png" in o.get("data", {}) for o in cell.outputs), (
            f"code cell {i} stored no image of its diagram"
        )


FLOAT64 = re.compile(r"^torch\.set_default_dtype\(torch\.float64\)", re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_a_notebook_that_trains_computes_in_float64(path):
    """The portability rule (README, "Contributing a chapter"): outputs that depend on training
    reproduce on every CPU only in float64, so a notebook that trains sets it first."""
    nb = read_notebook(path)
    trained = training_cells(nb)
    if not trained:
        return
    code = _code_cells(nb)
    first = code[1]  # the first code cell after the setup cell
    assert FLOAT64.search(first.source), (
        f"code cell {trained[0]} trains (train(...), .backward() or an optimizer's .step()), so the first code cell "
        "after the setup cell must call torch.set_default_dtype(torch.float64) before any model or tensor is built: "
        "float32 training gives different printed numbers on different CPUs (see book/reproducibility.md)"
    )
    start = FLOAT64.search(first.source).start()
    assert not re.search(
        r"torch\.(tensor|randn?|zeros|ones|empty|full|arange|linspace)\(|nn\.[A-Z]", first.source[:start]
    ), "torch.set_default_dtype(torch.float64) must come before the first tensor or model is built"
    for i, cell in enumerate(code):
        for match in re.finditer(r"set_default_dtype\(([^)]*)\)", cell.source):
            assert match.group(1).strip() == "torch.float64", (
                f"code cell {i} switches the default dtype to {match.group(1)}: build float32 tensors explicitly "
                "(dtype=torch.float32, .float()) in timing cells instead"
            )


SCIENTIFIC = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?e[-+]?\d+")
LONG_FLOAT = re.compile(r"(?<![\w.])-?\d*\.\d{9,}(?:e[-+]?\d+)?")
BOUND_WORDS = re.compile(r"(below|under|within|than|to|<|≤|<=)\s*\(?$")


def rounding_level_figures(text: str) -> list[str]:
    """Figures in an output that show the last bits of a computation, which differ from one CPU to the next.

    A float with nine or more decimals, or a figure below 1e-9 that is not a bound ("below 1e-12"): float64's
    rounding differences are about 1e-16 of the values, float32's about 1e-7; a chapter prints a few significant
    digits, or whether a difference is below a bound.
    """
    found = [m.group() for m in LONG_FLOAT.finditer(text)]
    for m in SCIENTIFIC.finditer(text):
        value = abs(float(m.group()))
        if 0 < value < 1e-9 and not BOUND_WORDS.search(text[max(0, m.start() - 12) : m.start()]):
            found.append(m.group())
    return found


def test_rounding_level_figures_are_found():
    assert rounding_level_figures("expected 2.272828411977469, got 2.0647380458235864") == [
        "2.272828411977469",
        "2.0647380458235864",
    ]
    assert rounding_level_figures("largest difference: 2.2e-16") == ["2.2e-16"]
    assert rounding_level_figures("the same scores (to 1e-12): True; below 1e-12: True") == []
    assert rounding_level_figures("step 1: 1.75e-07; loss 2.27; 3.14159") == []


@pytest.mark.parametrize("path", TRAINING, ids=[p.name for p in TRAINING])
def test_a_notebook_that_trains_prints_no_rounding_level_figures(path):
    """The other half of the portability rule for the notebooks that train (tests/test_portability.py proves
    their training on another kernel path; what else they print must not show last bits)."""
    for i, cell in enumerate(_code_cells(read_notebook(path))):
        if "show_source" in cell.source or _ignored(cell):
            continue
        for output in cell.outputs:
            figures = rounding_level_figures(_text_of(output))
            assert not figures, (
                f"code cell {i} prints {figures}: such last digits differ from one CPU to the next; print a few "
                "significant digits, or whether the difference is below a bound"
            )
