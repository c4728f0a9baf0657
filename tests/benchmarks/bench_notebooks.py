"""Each notebook alone against its time budget: wall time and the kernel's CPU time.

The design notes give every chapter a budget when it runs alone on 2 cores:
60 s, 90 s for a chapter that trains, 180 s for chapter 8. This runs each
notebook (or those named on the command line) top to bottom in a fresh kernel,
one at a time, as `make execute` does but without writing anything, and prints
its wall time, the CPU time its kernel used (user + system: above the wall time
when it uses both cores), and the budget. Run it on a quiet machine; the load
average before and after is printed so that a noisy run can be recognized.

    .venv/bin/python tests/benchmarks/bench_notebooks.py [notebooks/NN_topic.ipynb ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import Report  # noqa: E402

from notebook_index import NOTEBOOKS, TRAINING_NOTEBOOKS  # noqa: E402

#: Seconds, alone on 2 cores (the design notes).
BUDGET, TRAINING_BUDGET, TRANSLATOR_BUDGET = 60, 90, 180

_CPU_SECONDS = "import os as _os; _t = _os.times(); print(_t.user + _t.system + _t.children_user + _t.children_system)"


def budget(path: Path) -> int:
    if path.name.startswith("08_"):
        return TRANSLATOR_BUDGET
    return TRAINING_BUDGET if path in TRAINING_NOTEBOOKS else BUDGET


def run_alone(path: Path, timeout: int = 900) -> tuple[float, float]:
    """Run ``path`` in a fresh kernel; return (wall seconds, the kernel's CPU seconds). Nothing is written."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    os.environ.update({"PYTHONHASHSEED": "0", "ATTNBOOK_STRICT_WARNINGS": "1"})
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    # The kernel's own start-up chatter (its transport warning) is not part of the report.
    with client.setup_kernel(stderr=subprocess.DEVNULL):
        start = time.perf_counter()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        wall = time.perf_counter() - start
        probe = nbformat.v4.new_code_cell(_CPU_SECONDS)
        nb.cells.append(probe)
        client.execute_cell(probe, len(nb.cells) - 1)
    cpu = float("".join(o.get("text", "") for o in probe.outputs if o.get("output_type") == "stream").strip())
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook")
    args = parser.parse_args(argv)
    record = Report(__file__, argv)
    paths = [p.resolve() for p in args.notebooks] or NOTEBOOKS
    print(f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores", flush=True)
    print(f"{'notebook':<34} {'wall s':>7} {'CPU s':>7} {'budget s':>8}  within", flush=True)
    over, times = [], {}
    total_wall = total_cpu = 0.0
    for path in paths:
        wall, cpu = run_alone(path)
        total_wall, total_cpu = total_wall + wall, total_cpu + cpu
        ok = record.target(f"{path.stem}, wall seconds alone", round(wall, 1), budget(path), unit="s")
        times[path.stem] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "budget_s": budget(path)}
        over += [] if ok else [path.name]
        print(f"{path.name:<34} {wall:7.1f} {cpu:7.1f} {budget(path):8d}  {'yes' if ok else 'NO'}", flush=True)
    print(f"{'all, one after another':<34} {total_wall:7.1f} {total_cpu:7.1f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"over budget: {', '.join(over)}" if over else "every notebook within its budget")
    times["all, one after another"] = {"wall_s": round(total_wall, 1), "cpu_s": round(total_cpu, 1)}
    record.figure("seconds", times)
    return record.finish()


if __name__ == "__main__":
    sys.exit(main())
