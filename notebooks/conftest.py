"""pytest configuration for the notebooks: how nbval's kernels run.

The kernels nbval starts inherit this process's environment:

- with ``ATTNBOOK_STRICT_WARNINGS`` set, each notebook's ``setup()`` turns every
  DeprecationWarning that the course's code provokes into an error (see
  ``attnbook.notebook.strict_deprecations``), so that a warning a learner would
  see in Colab fails the suite here;
- on a pytest-xdist worker (``make test`` runs two, one kernel each, on a
  machine that may have only two cores), ``OMP_WAIT_POLICY=PASSIVE`` makes a
  kernel's idle OpenMP threads sleep instead of spinning while they wait for
  work, so that two kernels sharing the cores do not burn each other's time.
  It changes no result, only how threads wait, and it must be set before
  PyTorch starts, as it is here;
- a notebook that does not train for minutes runs on another CPU's kernel path
  (``notebook_index.OTHER_CPU``: ATen's plain kernels, MKL's compatible code,
  oneDNN limited to SSE4.1): its one strict nbval run in the suite is also the
  proof that its stored outputs reproduce on another processor. The long
  training notebooks (``notebook_index.OWN_PATH_NOTEBOOKS``) run on this
  machine's own path, and ``make portability`` reruns them on the other one.
  The variables are set only while nbval starts the notebook's kernel, so no
  other test's process inherits them.

- every kernel this process starts shares one folder of remembered training
  runs (``attnbook.train_cache``, removed when the process ends): a notebook
  that trains what an earlier one trained, bit for bit (chapter 8 trains
  chapter 3's attention RNN, chapter 3 the first epochs of chapter 2's model),
  reads the run back instead of making it again. ``tests/conftest.py`` runs
  those notebooks in order on one worker.

This file sits beside the notebooks so that it applies both to ``make test``
and to ``pytest notebooks/NN_topic.ipynb``.
"""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from attnbook import train_cache
from attnbook.book.execute import environment

_TESTS = Path(__file__).resolve().parents[1] / "tests"
if (_TESTS / "notebook_index.py").is_file():  # in the repository; a copy of this file elsewhere runs as it is
    sys.path.insert(0, str(_TESTS))
    from notebook_index import kernel_environment
else:

    def kernel_environment(notebook: Path) -> dict[str, str]:
        return {}


os.environ["ATTNBOOK_STRICT_WARNINGS"] = "1"
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


_RUNS = tempfile.mkdtemp(prefix="attnbook-runs-")  # this process's remembered runs
atexit.register(shutil.rmtree, _RUNS, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """nbval starts a notebook's kernel while its first cell is set up: give that kernel its kernel path, and the
    folder of remembered runs."""
    path = Path(str(item.fspath))
    changes = {**kernel_environment(path), train_cache.ENV: _RUNS} if path.suffix == ".ipynb" else {}
    with environment(changes):
        yield
