"""Strict warnings: under the tests, a DeprecationWarning that the course's code provokes is an error.

``setup()`` installs the filter when ``ATTNBOOK_STRICT_WARNINGS`` is set, which
``notebooks/conftest.py`` does for the kernels nbval starts. These tests run in
a fresh interpreter, because the filter (and the check on tensors handed to
Matplotlib) would otherwise stay in this test process: one interpreter, first
without the variable, then with it and ``setup()`` called again. (A kernel of
the suite has the variable from its start and calls ``setup()`` once; the
end-to-end test below runs one so.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import nbformat
import pytest

from notebook_index import ROOT

# Code compiled under the file name ipykernel gives a cell counts as a notebook cell. Each line printed is
# "MODE/what: verdict", MODE "plain" before the variable is set, "strict" after.
SCRIPT = textwrap.dedent(
    """
    import os, warnings
    import matplotlib
    matplotlib.use("Agg")
    from attnbook import notebook
    import matplotlib.pyplot as plt
    import numpy as np
    import torch

    def in_cell(source):
        try:
            exec(compile(source, "/tmp/ipykernel_4242/1234.py", "exec"), {"plt": plt, "np": np, "torch": torch})
        except DeprecationWarning as err:
            return "error: " + str(err)[:60]
        return "ok"

    def tries(mode):
        notebook.setup(figures=False)
        print(f"{mode}/plot tensor:", in_cell("plt.plot(torch.arange(3))"))
        print(f"{mode}/plot array:", in_cell("plt.plot(torch.arange(3).numpy())"))
        print(f"{mode}/imshow tensor:", in_cell("plt.imshow(torch.rand(3, 3))"))
        print(f"{mode}/asarray tensor:", in_cell("np.asarray(torch.arange(3))"))
        plt.plot(torch.arange(3))  # not a cell, not attnbook: the strict filter does not apply
        print(f"{mode}/outside the course:", "ok")
        # NumPy's own warning, raised inside Matplotlib, without the check on tensors.
        before = torch.Tensor.__array__
        if notebook._tensor_to_array is not None:
            torch.Tensor.__array__ = notebook._tensor_to_array
        print(f"{mode}/numpy's warning:", in_cell("plt.imshow(torch.rand(3, 3))"))
        print(f"{mode}/numpy's warning, not in a cell:", "ok" if plt.imshow(torch.rand(3, 3)) else "?")
        torch.Tensor.__array__ = before
        plt.close("all")

    assert "ATTNBOOK_STRICT_WARNINGS" not in os.environ
    tries("plain")
    os.environ["ATTNBOOK_STRICT_WARNINGS"] = "1"
    tries("strict")
    """
)


@pytest.fixture(scope="module")
def seen() -> dict[str, dict[str, str]]:
    """What each try gave, by mode ("plain": without the variable, "strict": with it) and by try."""
    env = {k: v for k, v in os.environ.items() if k != "ATTNBOOK_STRICT_WARNINGS"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, dict[str, str]] = {"plain": {}, "strict": {}}
    for line in done.stdout.strip().splitlines():
        what, verdict = line.split(": ", 1)
        mode, name = what.split("/", 1)
        found[mode][name] = verdict
    return found


def test_strict_mode_raises_what_the_course_provokes_and_nothing_else(seen):
    seen = seen["strict"]
    assert seen["plot tensor"].startswith("error: a tensor was passed to Matplotlib")
    assert seen["imshow tensor"].startswith("error: a tensor was passed to Matplotlib")
    assert seen["plot array"] == "ok"
    assert seen["asarray tensor"] == "ok", "only Matplotlib's conversions are held to the rule"
    assert seen["outside the course"] == "ok"
    assert seen["numpy's warning"].startswith("error: __array__ implementation doesn't accept a copy"), (
        "NumPy's warning is attributed to Matplotlib, yet raised on behalf of the cell: it must be an error"
    )
    assert seen["numpy's warning, not in a cell"] == "ok"


def test_without_the_variable_nothing_changes(seen):
    seen = seen["plain"]
    assert seen["plot tensor"] == "ok" and seen["imshow tensor"] == "ok" and seen["numpy's warning"] == "ok"


def _notebook(*sources: str):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


@pytest.mark.slow
def test_nbval_fails_a_notebook_that_hands_matplotlib_a_tensor(tmp_path):
    """End to end, as the suite runs a chapter: nbval, notebooks/conftest.py, a kernel, setup()."""
    shutil.copy(ROOT / "notebooks" / "conftest.py", tmp_path / "conftest.py")
    setup_cell = "from attnbook.notebook import setup\n\n_ = setup()"
    planted = (
        "import matplotlib.pyplot as plt\nimport torch\n\n"
        "fig, ax = plt.subplots()\nax.plot(torch.arange(3))\nplt.close(fig)"
    )
    # one kernel: the planted cell fails, and the kernel goes on to the fixed one (nbval checks every cell)
    fixed = planted.replace("torch.arange(3)", "torch.arange(3).numpy()")
    nbformat.write(_notebook(setup_cell, planted, fixed), tmp_path / "planted.ipynb")
    env = {k: v for k, v in os.environ.items() if k != "ATTNBOOK_STRICT_WARNINGS"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--nbval",
        "-p",
        "no:cacheprovider",
        "-rA",
        "--rootdir",
        str(tmp_path),
        "-c",
        os.devnull,
    ]
    run = subprocess.run([*command, "planted.ipynb"], capture_output=True, text=True, env=env, cwd=tmp_path)
    out = run.stdout
    assert "FAILED planted.ipynb::Cell 1" in out and "PASSED planted.ipynb::Cell 0" in out, out[-3000:]
    assert "a tensor was passed to Matplotlib" in out
    assert "PASSED planted.ipynb::Cell 2" in out, out[-3000:]
