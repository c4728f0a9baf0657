"""Shared fixtures: the repository root and the notebooks."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def read_notebook(path: Path):
    return nbformat.read(path, as_version=4)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def _calls(source: str):
    """Every call in a code cell's source (IPython magics turned into Python first)."""
    import ast

    from IPython.core.inputtransformer2 import TransformerManager

    tree = ast.parse(TransformerManager().transform_cell(source))
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def is_training_call(call) -> bool:
    """``train(...)`` / ``attnbook.train.train(...)``, ``x.backward(...)``, or an optimizer's ``opt.step()``.

    A decoder's ``model.step(tokens, state)`` takes arguments and is not a training step;
    ``model.train()`` (the mode switch) is a method of a module, not the function ``train``.
    """
    import ast

    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "train"
    if isinstance(func, ast.Attribute):
        if func.attr == "backward":
            return True
        if func.attr == "step":
            return not call.args and not call.keywords
        if func.attr == "train":  # attnbook.train.train(...) or train.train(...)
            owner = func.value
            return isinstance(owner, (ast.Name, ast.Attribute)) and getattr(owner, "attr", getattr(owner, "id", "")) == "train"
    return False


def training_cells(nb) -> list[int]:
    """Indices (among the code cells) of the cells whose code trains."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    return [i for i, cell in enumerate(code) if any(is_training_call(call) for call in _calls(cell.source))]


def trains(path: Path) -> bool:
    """Does this notebook's code train (so that its outputs depend on training)?"""
    return bool(training_cells(read_notebook(path)))


#: The notebooks whose outputs depend on training: they compute in float64 (the hygiene test
#: checks it) and test_portability runs them under another CPU kernel path.
TRAINING_NOTEBOOKS = [p for p in NOTEBOOKS if trains(p)]


# --- Two workers (pytest-xdist, `-n 2 --dist loadfile` in pyproject's addopts) --------------
# A notebook's cells share one kernel and run in order, so each file stays on one worker
# (loadfile). Two refinements, used whenever this conftest is loaded (`make test`):
# the portability runs, one independent subprocess per notebook, spread over the workers
# instead of all landing on the worker that gets tests/test_portability.py; and the longest
# groups start first (--no-loadscope-reorder keeps the order below), so that no worker is
# left alone with a long notebook at the end.


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class NotebookScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith("tests/test_portability.py::") and "[" in nodeid:
                return nodeid  # one portability run per work unit
            return super()._split_scope(nodeid)

    return NotebookScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):  # only on an xdist worker
        return

    def weight(item) -> int:  # notebooks that train, their portability runs, other notebooks, the rest
        if item.path.suffix == ".ipynb":
            return 0 if item.path in TRAINING_NOTEBOOKS else 2
        return 1 if item.path.name == "test_portability.py" else 3

    items.sort(key=weight)  # stable: every notebook's cells keep their order
