"""Re-running notebooks: ``python -m attnbook.book.execute notebooks/*.ipynb`` (``make execute``).

It brings each notebook's badge and setup cell up to date with ``_config.yml``
(:mod:`attnbook.book.config`), folds its solution cells where a learner runs
them, runs it top to bottom in a fresh kernel with fixed seeds, and stores the
outputs, so that what nbval compares is never stale.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from attnbook.book.config import SETUP_TAG, badge_markdown, setup_cell_source

__all__ = ["SOLUTION_TITLE", "environment", "sync_notebook", "solution_cells", "hide_solution", "execute_notebook"]

_BADGE_RE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)")


def sync_notebook(nb, name: str, root: Path | None = None) -> None:
    """Make the badge and setup cell of ``nb`` (an nbformat node) match ``_config.yml``."""
    first = nb.cells[0]
    if first.cell_type != "markdown":
        raise ValueError(f"{name}: the first cell must be the markdown title cell")
    badge = badge_markdown(name, root)
    if _BADGE_RE.search(first.source):
        first.source = _BADGE_RE.sub(lambda _: badge, first.source)
    else:
        first.source = first.source.rstrip() + "\n\n" + badge
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code:
        raise ValueError(f"{name}: a notebook needs the setup code cell")
    code[0].source = setup_cell_source(root)
    tags = code[0].metadata.setdefault("tags", [])
    if SETUP_TAG not in tags:
        tags.append(SETUP_TAG)
    for cell in solution_cells(nb):
        hide_solution(cell)


#: The first line of every solution code cell: Colab shows it as the title of a folded form.
SOLUTION_TITLE = "# @title Solution (hidden: run it, or show the code to read it)"
_SOLUTION_START = re.compile(r"```\{solution-start\}")
_SOLUTION_END = re.compile(r"```\{solution-end\}")


def solution_cells(nb) -> list:
    """The code cells between a ``solution-start`` and its ``solution-end`` directive."""
    found, inside = [], False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            if _SOLUTION_START.search(cell.source):
                inside = True
            if _SOLUTION_END.search(cell.source):
                inside = False
        elif inside:
            found.append(cell)
    return found


def hide_solution(cell) -> None:
    """Hide a solution code cell where a learner runs it: a Colab form, collapsed in JupyterLab and Notebook 7.

    The book folds it already (the ``solution-start`` directive's dropdown).
    """
    lines = cell.source.split("\n")
    if lines and lines[0].lstrip().startswith(("# @title", "#@title")):
        lines = lines[1:]
    cell.source = "\n".join([SOLUTION_TITLE, *lines])
    cell.metadata["cellView"] = "form"
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


@contextmanager
def environment(changes: dict[str, str]):
    """``os.environ`` with ``changes`` while the block runs (a kernel started in it inherits them), then as before."""
    before = {key: os.environ.get(key) for key in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _coalesce_streams(nb) -> None:
    """One output per stream run: a kernel under load may deliver one print in several messages."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        merged = []
        for output in cell.get("outputs", []):
            previous = merged[-1] if merged else None
            if (
                output.get("output_type") == "stream"
                and previous is not None
                and previous.get("output_type") == "stream"
                and previous.get("name") == output.get("name")
            ):
                previous["text"] = previous["text"] + output["text"]
            else:
                merged.append(output)
        cell.outputs = merged


def _clean_metadata(nb) -> None:
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("widgets", None)
        if cell.cell_type == "code":
            cell.metadata.pop("collapsed", None)
            cell.metadata.pop("scrolled", None)


def execute_notebook(path: str | Path, timeout: int = 600) -> float:
    """Sync, run top to bottom in a fresh kernel, and save ``path``; return the wall time in seconds."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no notebook at {path}")
    nb = nbformat.read(path, as_version=4)
    sync_notebook(nb, path.name)
    # Deterministic hashing; and the course's DeprecationWarnings as errors, as under the test suite.
    with environment({"PYTHONHASHSEED": "0", "ATTNBOOK_STRICT_WARNINGS": "1"}):
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
            record_timing=False,
        )
        start = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - start
    _coalesce_streams(nb)
    _clean_metadata(nb)
    nbformat.validate(nb)
    tmp = path.with_suffix(".ipynb.tmp")
    nbformat.write(nb, tmp)
    tmp.replace(path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.book.execute", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path, help="the notebooks to sync, re-run and store")
    args = parser.parse_args(argv)
    for nb_path in args.notebooks:
        seconds = execute_notebook(nb_path)
        print(f"{nb_path}: executed in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
