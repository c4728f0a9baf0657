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
  PyTorch starts, as it is here.

This file sits beside the notebooks so that it applies both to ``make test``
and to ``pytest notebooks/NN_topic.ipynb``.
"""

import os

os.environ["ATTNBOOK_STRICT_WARNINGS"] = "1"
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
