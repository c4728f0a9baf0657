"""What every benchmark records: the machine, its load, the figures, and the targets met or missed.

A benchmark script makes one :class:`Report` when it starts, records its
figures and targets as it measures, and ends with ``return report.finish()``:

    report = Report(__file__)
    ...
    report.figure("medians_ms", {"ours": 12.3, "torch": 12.9})
    report.target("ours / torch, B=32", 0.95, 1.0)  # measured, limit; lower is better
    ...
    return report.finish()  # writes the JSON; 0 if every target is met, else 1

``finish`` writes ``tests/benchmarks/results/<script>.json`` (the folder is
git-ignored; ``BENCH_RESULTS`` names another one). ``run_all.py``, which
``make bench`` runs, reads those files to print its one summary table; the
book's benchmarks page quotes them. The format is in ``README.md`` here.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
FORMAT = 1  # bump when the JSON's fields change meaning


def results_dir() -> Path:
    return Path(os.environ.get("BENCH_RESULTS", HERE / "results"))


def load() -> list[float]:
    """The load averages over 1, 5 and 15 minutes (runnable processes; 2.0 fills two cores)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not available on this platform
        return []


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        with contextlib.suppress(Exception):
            import subprocess

            return subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True
            ).stdout.strip()
    return platform.processor() or platform.machine()


def machine() -> dict:
    """The machine and the software the figures were measured with (no host name, nothing personal)."""
    info = {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }
    if "torch" in sys.modules:  # the runner itself does not import torch
        torch = sys.modules["torch"]
        info.update(
            torch=torch.__version__,
            torch_threads=torch.get_num_threads(),
            cpu_capability=torch.backends.cpu.get_cpu_capability(),
        )
    return info


def describe(info: dict, load_before: list[float], load_after: list[float]) -> str:
    """One line: the CPU, its cores, the threads used, the load before and after."""
    parts = [info["cpu"], f"{info['usable_cpus']} of {info['logical_cpus']} logical CPUs usable"]
    if "torch_threads" in info:
        parts.append(f"torch {info['torch']} on {info['torch_threads']} threads ({info['cpu_capability']})")
    if load_before:
        parts.append(f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    return "; ".join(parts)


def format_number(x: float) -> str:
    """Three decimals for ratios near 1 (0.1 to 10), else three significant figures; never scientific notation."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if x == 0:
        return "0"
    digits = 3 if 0.1 <= abs(x) < 10 else max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return f"{x:,.{digits}f}"


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median of ``values``.

    Each value falls below the true median with probability 1/2, so the number
    that do is binomial(n, 1/2): the interval runs from the ``k``-th smallest to
    the ``k``-th largest value, with the largest ``k`` for which fewer than ``k``
    values fall on one side with probability at most ``(1 - confidence) / 2``.
    With too few values for that confidence, it is the whole range.
    """
    xs = sorted(values)
    n = len(xs)
    tail = (1 - confidence) / 2
    k, below = 0, 0.0  # below = P(binomial(n, 1/2) < k + 1)
    while k < n // 2:
        below += math.comb(n, k) / 2**n
        if below > tail:
            break
        k += 1
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


class Report:
    """The record of one benchmark run; see the module docstring."""

    def __init__(self, script: str | os.PathLike, argv: list[str] | None = None) -> None:
        self.name = Path(script).stem
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.started = datetime.now(timezone.utc)
        self.load_before = load()
        self.targets: list[dict] = []
        self.figures: dict = {}
        self._start = time.perf_counter()
        # where this machine keeps things: a record names them by label, not by this machine's paths
        self.places: dict[str, str] = {str(HERE.parents[1]): ".", tempfile.gettempdir(): "<tmp>", str(Path.home()): "~"}

    def place(self, path: str | os.PathLike, label: str) -> None:
        """Write ``path`` (and what lies under it) as ``label`` in the record, e.g. a work folder as ``<work>``."""
        self.places[str(Path(path).resolve())] = label
        self.places[str(path)] = label

    def figure(self, key: str, value) -> None:
        """Record a figure (numbers, or lists and dicts of them) under ``key``; JSON-serializable."""
        self.figures[key] = value

    def target(
        self,
        name: str,
        measured: float,
        limit: float,
        *,
        higher_is_better: bool = False,
        met: bool | None = None,
        rule: str = "",
        unit: str = "",
        note: str = "",
    ) -> bool:
        """Record a target and return whether it is met.

        By default the target is ``measured <= limit`` (``higher_is_better``:
        ``>=``). ``met`` overrides the comparison where the rule is not a plain
        bound (a tie within noise, say); ``rule`` then says it in a few words
        (the summary shows it in place of the limit) and ``note`` in a sentence.
        A measurement that could not be made is ``float('nan')``: not met.
        """
        if met is None:
            met = (measured >= limit) if higher_is_better else (measured <= limit)
            met = bool(met) and not math.isnan(measured)
        self.targets.append(
            {
                "name": name,
                "measured": measured,
                "limit": limit,
                "comparison": ">=" if higher_is_better else "<=",
                "rule": rule,
                "unit": unit,
                "met": bool(met),
                "note": note,
            }
        )
        return bool(met)

    def write(self, path: str | os.PathLike | None = None) -> tuple[Path, dict]:
        """Write the JSON record as it stands (to ``path``, else ``results/<script>.json``); return both.

        A script that measures for hours may write after each part, so that a
        failure later, or Ctrl-C, keeps what was measured; ``finish`` writes the
        whole record at the end.
        """
        record = {
            "format": FORMAT,
            "script": self.name,
            "run_id": os.environ.get("BENCH_RUN_ID"),
            "argv": self.argv,  # (paths are replaced below)
            "started": self.started.isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - self._start, 1),
            "machine": machine(),
            "load_before": self.load_before,
            "load_after": load(),
            "targets": self.targets,
            "figures": self.figures,
        }
        record = redact(record, self.places)
        path = Path(path) if path is not None else results_dir() / f"{self.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1, default=_jsonable) + "\n")
        return path, record

    def finish(self, path: str | os.PathLike | None = None) -> int:
        """Write the JSON record, print where, and return the exit status: 0 if every target is met.

        The record goes to ``path`` when one is given, else to ``results/<script>.json``.
        """
        path, record = self.write(path)
        missed = [t["name"] for t in self.targets if not t["met"]]
        print(f"\n{describe(record['machine'], self.load_before, record['load_after'])}; {record['seconds']:.0f} s")
        if self.targets:
            print(
                f"targets: {len(self.targets) - len(missed)} of {len(self.targets)} met"
                + (f"; NOT met: {', '.join(missed)}" if missed else "")
            )
        print(f"figures written to {_relative(path)}")
        return 1 if missed else 0


def redact(record, places: dict[str, str]):
    """``record`` with each path of ``places`` in its strings replaced by its label (the longest path first).

    Only a whole path is replaced: ``/tmp/x`` in ``/tmp/x/y`` or ``/tmp/x:en``, not in ``/tmp/xy``.
    """
    stripped = ((p.rstrip("/\\"), label) for p, label in places.items())
    ordered = sorted(((p, label) for p, label in stripped if len(p) > 1), key=lambda p: -len(p[0]))

    def one(text: str) -> str:
        for path, label in ordered:
            at = text.find(path)
            while at >= 0:
                end = at + len(path)
                if end == len(text) or not (text[end].isalnum() or text[end] in "._-"):
                    text = text[:at] + label + text[end:]
                    end = at + len(label)
                at = text.find(path, end)
        return text

    if isinstance(record, str):
        return one(record)
    if isinstance(record, dict):
        return {one(k) if isinstance(k, str) else k: redact(v, places) for k, v in record.items()}
    if isinstance(record, (list, tuple)):
        return [redact(v, places) for v in record]
    return record


def _jsonable(x):
    if hasattr(x, "item"):  # a NumPy or torch scalar
        return x.item()
    raise TypeError(f"{type(x).__name__} is not JSON-serializable")


def _relative(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path.cwd()))
    return str(path)


@contextlib.contextmanager
def quiet_output():
    """Send whatever C and C++ code print to stdout and stderr during the block to a scratch file.

    PyTorch's profiler (its Kineto library) writes lines such as ``USDT: ...
    profiler_start`` and, on a machine without a GPU, ``ERROR: ...
    gpuGetDeviceCount failed`` straight to the process's file descriptors, so
    Python cannot silence them otherwise. If the block raises, what was
    captured is printed after all, in case it explains the error.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile(mode="w+b") as scratch:
        os.dup2(scratch.fileno(), 1)
        os.dup2(scratch.fileno(), 2)
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            if failed:
                scratch.seek(0)
                sys.stderr.write(scratch.read().decode(errors="replace"))
