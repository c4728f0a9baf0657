"""Run every benchmark, then print one summary table of their targets; ``make bench`` runs this.

Every ``bench_*.py`` in this folder runs, in name order, each in its own
process with this Python, whether or not the ones before met their targets.
Each writes ``results/<script>.json`` (see ``_report.py`` and ``README.md``);
from those the runner prints one table: each target, the measured figure, the
limit, met or not, and the machine with its load before and after. It exits
non-zero only then, if a target was missed or a script failed.

    python tests/benchmarks/run_all.py                  # every benchmark
    python tests/benchmarks/run_all.py multihead rnn    # those whose names contain these words
    python tests/benchmarks/run_all.py --list           # what would run
    python tests/benchmarks/run_all.py --record         # also copy the results to book/results/bench/

The summary is also written to ``results/summary.json``. With ``--record``, the
results of this run (each script's file and the summary, named
``summary_<words>.json`` for a partial run) are copied to ``book/results/bench/``,
where the book's benchmarks page quotes them (``attnbook.book.claims`` holds the page
to them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import page  # noqa: E402
from _report import HERE, describe, format_number, load, machine, results_dir  # noqa: E402


def scripts(words: list[str]) -> list[Path]:
    found = sorted(HERE.glob("bench_*.py"))
    return [p for p in found if not words or any(w in p.stem for w in words)]


def run(script: Path, run_id: str) -> tuple[int, float]:
    env = dict(os.environ, BENCH_RUN_ID=run_id, PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    status = subprocess.run([sys.executable, str(script)], env=env).returncode
    return status, time.perf_counter() - start


def read_record(script: Path, run_id: str) -> dict | None:
    path = results_dir() / f"{script.stem}.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if record.get("run_id") == run_id else None  # an older run's file says nothing about this one


def rows_of(script: Path, status: int, seconds: float, record: dict | None) -> list[dict]:
    name = script.stem.removeprefix("bench_")
    if record is None:
        why = f"exit status {status}, no results written" if status else "no results written"
        return [{"script": name, "target": why, "measured": None, "limit": None, "result": "ERROR", "ok": False}]
    if status not in (0, 1) or (status == 1 and all(t["met"] for t in record["targets"])):
        return [
            {
                "script": name,
                "target": f"exit status {status} after writing its results",
                "measured": None,
                "limit": None,
                "result": "ERROR",
                "ok": False,
            }
        ]
    if not record["targets"]:
        return [
            {
                "script": name,
                "target": "figures only, no target",
                "measured": None,
                "limit": None,
                "result": f"ran, {seconds:.0f} s",
                "ok": True,
            }
        ]
    return [
        {
            "script": name,
            "target": t["name"],
            "measured": t["measured"],
            "limit": t.get("rule") or f"{t['comparison']} {format_number(t['limit'])}",
            "result": "met" if t["met"] else "NOT met",
            "ok": t["met"],
            "note": t.get("note", ""),
        }
        for t in record["targets"]
    ]


def table(rows: list[dict]) -> str:
    head = ("benchmark", "target", "measured", "limit", "result")
    cells = [
        (
            r["script"],
            r["target"],
            "" if r["measured"] is None else format_number(r["measured"]),
            r["limit"] or "",
            r["result"],
        )
        for r in rows
    ]
    widths = [max(len(str(c[i])) for c in [head, *cells]) for i in range(len(head))]
    align = ["<", "<", ">", "<", "<"]
    lines = ["  ".join(f"{str(c[i]):{align[i]}{widths[i]}}" for i in range(len(head))).rstrip() for c in [head, *cells]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("words", nargs="*", help="run only the benchmarks whose names contain one of these")
    parser.add_argument("--list", action="store_true", help="list the benchmarks that would run, and stop")
    parser.add_argument("--record", action="store_true", help=f"copy this run's results to {RECORDED}/ for the book")
    args = parser.parse_args(argv)
    todo = scripts(args.words)
    if args.list or not todo:
        print("\n".join(p.name for p in todo) or f"no benchmark matches {args.words}")
        return 0 if todo else 2
    run_id = uuid.uuid4().hex
    started = datetime.now(timezone.utc)
    load_before = load()
    start = time.perf_counter()
    rows, runs, threads = [], [], {}
    for i, script in enumerate(todo, 1):
        now = load()
        print(
            f"\n{'=' * 100}\n[{i}/{len(todo)}] {script.name}   (load average {now[0] if now else 'n/a'})\n{'=' * 100}",
            flush=True,
        )
        status, seconds = run(script, run_id)
        record = read_record(script, run_id)
        rows += rows_of(script, status, seconds, record)
        if record is not None and "torch_threads" in record["machine"]:
            threads[script.stem.removeprefix("bench_")] = record["machine"]["torch_threads"]
        runs.append(
            {
                "script": script.stem,
                "exit_status": status,
                "seconds": round(seconds, 1),
                "results": None if record is None else f"{script.stem}.json",
            }
        )
    total = time.perf_counter() - start
    load_after = load()
    info = machine()
    print(f"\n{'=' * 100}\nSummary of {len(todo)} benchmarks, {total / 60:.1f} minutes\n")
    print(table(rows))
    notes: dict[str, list[str]] = {}
    for r in rows:
        if r.get("note"):
            notes.setdefault(r["note"], []).append(r["script"])
    for note, where in notes.items():
        print(f"\n{note} ({', '.join(dict.fromkeys(where))})")
    print(
        f"\nmachine: {describe(info, load_before, load_after)} (load over 1, 5, 15 min: "
        f"before {load_before}, after {load_after})"
    )
    if threads:
        print("torch threads at the end of each benchmark: " + ", ".join(f"{k} {v}" for k, v in threads.items()))
    failed = [r for r in rows if not r["ok"]]
    print("every target met" if not failed else f"{len(failed)} of {len(rows)} lines NOT met or failed")
    summary = {
        "run_id": run_id,
        "started": started.isoformat(timespec="seconds"),
        "seconds": round(total, 1),
        "machine": info,
        "load_before": load_before,
        "load_after": load_after,
        "runs": runs,
        "rows": rows,
    }
    results_dir().mkdir(parents=True, exist_ok=True)
    (results_dir() / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if args.record:
        record_run(summary, args.words)
    return 1 if failed else 0


#: Where ``--record`` copies a run's results: the folder the benchmarks page names as its source.
RECORDED = "book/results/bench"


def record_run(summary: dict, words: list[str]) -> None:
    """Copy this run's result files and its summary to :data:`RECORDED`, replacing older copies of the same scripts."""
    target = HERE.parents[1] / RECORDED
    target.mkdir(parents=True, exist_ok=True)
    for run in summary["runs"]:
        if run["results"] is not None:
            shutil.copyfile(results_dir() / run["results"], target / run["results"])
    name = "summary.json" if not words else f"summary_{'_'.join(words)}.json"
    (target / name).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"recorded in {RECORDED}/: {', '.join(r['results'] for r in summary['runs'] if r['results'])}, {name}")
    print(f"the benchmarks page's tables: {page.write(target).relative_to(HERE.parents[1])}")


if __name__ == "__main__":
    sys.exit(main())
