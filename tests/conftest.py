"""Shared fixtures and the suite's scheduling on two workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from notebook_index import NOTEBOOKS, ROOT, TRAINING_NOTEBOOKS, read_notebook, trains  # noqa: F401


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


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
