"""pytest configuration for the notebooks: nbval's kernels run in strict-warnings mode.

The kernels nbval starts inherit this process's environment; with
``ATTNBOOK_STRICT_WARNINGS`` set, each notebook's ``setup()`` turns every
DeprecationWarning that the course's code provokes into an error (see
``attnbook.notebook.strict_deprecations``), so that a warning a learner would
see in Colab fails the suite here. This file sits beside the notebooks so that
it applies both to ``make test`` and to ``pytest notebooks/NN_topic.ipynb``.
"""

import os

os.environ["ATTNBOOK_STRICT_WARNINGS"] = "1"
