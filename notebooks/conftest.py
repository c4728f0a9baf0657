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

This file sits beside the notebooks so that it applies both to ``make test``
and to ``pytest notebooks/NN_topic.ipynb``.
"""

import os
import sys
from pathlib import Path

import pytest

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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """nbval starts a notebook's kernel while its first cell is set up: give that kernel its kernel path."""
    path = Path(str(item.fspath))
    with environment(kernel_environment(path) if path.suffix == ".ipynb" else {}):
        yield
