"""Shared fixtures and the suite's scheduling on two workers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# On a pytest-xdist worker (`make test` runs two on a machine that may have only two cores), idle OpenMP threads
# sleep instead of spinning while they wait for work: set before the worker imports PyTorch, so that it holds for
# the worker's own tests and every process it starts (a notebook's kernel, a run of the command line, a build),
# which would otherwise burn the other worker's time. It changes no result, only how threads wait.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from notebook_index import NOTEBOOKS, ROOT, read_notebook  # noqa: F401


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


# --- Another processor's rounding (tests/other_kernels.py) ---------------------------------------
def pytest_addoption(parser):
    parser.addoption(
        "--other-kernels",
        action="store_true",
        help="run every test with results rounded by shape, as on another class of processor (tests/other_kernels.py)",
    )


@pytest.fixture(autouse=True)
def _other_kernels(request):
    """Under ``--other-kernels``: the test runs inside :class:`other_kernels.ShapeDependentRounding`."""
    if not request.config.getoption("--other-kernels"):
        yield
        return
    from other_kernels import ShapeDependentRounding

    with ShapeDependentRounding():
        yield


# --- Two workers (pytest-xdist, `-n 2 --dist loadfile` in pyproject's addopts) --------------
# A notebook's cells share one kernel and run in order, so each file stays on one worker
# (loadfile). Three refinements, used whenever this conftest is loaded (`make test`):
# the portability runs, one independent subprocess per notebook, spread over the workers
# instead of all landing on the worker that gets tests/test_portability.py; the notebooks
# of SHARED_RUNS kept together, in order, on one worker; and the longest groups start first
# (--no-loadscope-reorder keeps the order below), so that no worker is left alone with a
# long notebook at the end. xdist hands each worker two groups at the start, so SHARED_RUNS
# and the first two of the other long notebooks start at once, two on each worker.

#: The notebooks that take longest under nbval, longest first (tests/benchmarks/bench_notebooks.py
#: measures them); the other notebooks that train follow, then the portability runs, then the rest.
LONGEST_FIRST = ["08_training_a_translator.ipynb", "09_fastformer.ipynb", "03_attention.ipynb", "07_transformer.ipynb"]
#: Notebooks that train what an earlier one trained (chapter 3 the first epochs of chapter 2's model, chapter 8
#: chapter 3's attention RNN): one work unit, in this order, so that each reads back the runs the earlier ones
#: made (attnbook.train_cache, notebooks/conftest.py) instead of making them again. They start first.
SHARED_RUNS = ["02_rnn_encoder_decoder.ipynb", "03_attention.ipynb", "08_training_a_translator.ipynb"]
#: Test files that take ten seconds or more on one worker, longest first (a full run's --durations, summed by file):
#: they start before the short ones, which fill in around them, so that neither worker is left at the end with
#: a long file while the other has nothing left to do.
LONG_TEST_FILES = [
    "test_exact_comparisons.py",
    "test_translate_real.py",
    "test_book.py",
    "test_translate_cli.py",
    "test_edition.py",
    "test_exercises_doors.py",
    "test_strict_warnings.py",
    "test_exercises_in_chinese.py",
    "test_train.py",
    "test_data_corpus.py",
    "test_translate_ddp.py",
    "test_jupyter.py",
    "test_translate_recipe.py",
]


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class NotebookScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith("tests/test_portability.py::") and "[" in nodeid:
                return nodeid  # one portability run per work unit
            if nodeid.partition("::")[0].removeprefix("notebooks/") in SHARED_RUNS:
                return "notebooks/" + "+".join(SHARED_RUNS)
            return super()._split_scope(nodeid)

    return NotebookScheduling(config, log)


def _weight(item) -> tuple[int, int]:
    if item.path.suffix == ".ipynb":
        if item.path.name in SHARED_RUNS:
            return -1, SHARED_RUNS.index(item.path.name)
        if item.path.name in LONGEST_FIRST:
            return 0, LONGEST_FIRST.index(item.path.name)
        from notebook_index import TRAINING_NOTEBOOKS  # only when notebooks are collected: it reads them all

        return (1, 0) if item.path in TRAINING_NOTEBOOKS else (3, 0)
    if item.path.name == "test_portability.py":  # a rerun of a long notebook first (make portability)
        notebook = item.nodeid.partition("[")[2].rstrip("]")
        return 2, LONGEST_FIRST.index(notebook) if notebook in LONGEST_FIRST else len(LONGEST_FIRST) + (not notebook)
    if item.path.name in LONG_TEST_FILES:  # after the portability runs, before the short tests
        return 2, len(LONGEST_FIRST) + 2 + LONG_TEST_FILES.index(item.path.name)
    return 4, 0


#: The test that runs the library's tests (those not marked slow) inside the shape-dependent rounding.
RERUN = "tests/test_exact_comparisons.py::test_the_librarys_tests_pass_when_the_last_bits_depend_on_the_shapes"


def _run_by_the_rerun(item) -> bool:
    from other_kernels import LIBRARY_TESTS

    return (
        item.path.parent == ROOT / "tests" and item.path.name in LIBRARY_TESTS and not item.get_closest_marker("slow")
    )


@pytest.hookimpl(trylast=True)  # after -m and -k have chosen
def pytest_collection_modifyitems(config, items):
    # A run that includes the rerun runs the library's fast tests there, once, inside the mode and on another
    # kernel path, rather than a second time here: the same assertions, a minute of the suite saved. Run alone
    # (pytest tests/test_attention.py), or without the rerun, they run here as usual.
    if any(item.nodeid == RERUN for item in items):
        rerun = [item for item in items if _run_by_the_rerun(item)]
        if rerun:
            items[:] = [item for item in items if not _run_by_the_rerun(item)]
            config.hook.pytest_deselected(items=rerun)
    if not hasattr(config, "workerinput"):  # only on an xdist worker
        return
    items.sort(key=_weight)  # stable: every notebook's cells keep their order


def pytest_terminal_summary(terminalreporter, config):
    if any(report.nodeid == RERUN for report in terminalreporter.stats.get("passed", [])):
        terminalreporter.write_line(
            "the library's tests not marked slow ran once, in test_exact_comparisons.py, inside the shape-dependent "
            "rounding and on another CPU kernel path (tests/other_kernels.py), and not a second time here"
        )
