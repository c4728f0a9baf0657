"""Why a long training run can stop reproducing on another CPU, in float64 (not a timed test).

The portability probe (``tests/portability_probe.py``) trains each kind of model for
24 steps on two CPU kernel paths and finds them in agreement to about 1e-15. A
chapter trains for hundreds of steps, and an unstable run (one whose loss jumps up
now and then) magnifies a difference at every jump. This script shows it on
chapter 7's digit reverser (its data, model and loop, copied from the chapter;
480 steps of Adam at a constant learning rate, float64): the chapter's recipe
(pre-LN, 1e-3) and the paper's post-LN at 3e-3, each trained on this machine's own
kernels and on another CPU's (:data:`notebook_index.OTHER_CPU`), one thread
each, two runs at a time (about a minute). It records, per epoch, the
validation loss on both paths and their relative difference, and the test
sequences reversed exactly. The chapter's own run must print what the chapter
stores (the record says whether it did; if not, the chapter changed and this
script must follow it).

    PYTHONPATH=src .venv/bin/python tests/benchmarks/training_stability.py --record book/results/training_stability.json

With ``--warm-up JSON`` it runs instead the eight trainings of chapter 7's
last exercise ("Warm-up, measured", which the chapter runs only with
``FULL_RUN = True``): six layers of width 64, post-LN and pre-LN, Adam at 1e-3
and 3e-3, with and without 100 warm-up steps, on this machine's path only (two
at a time, one thread each; about ten minutes). It records each run's
validation loss per epoch and the test sequences it reverses, for the page on
reproducibility: the runs that struggle are the unstable ones, whose figures
another CPU would not reproduce, which is why the chapter stores none.

    PYTHONPATH=src .venv/bin/python tests/benchmarks/training_stability.py --warm-up book/results/warm_up_exercise.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from notebook_index import OTHER_CPU  # noqa: E402 (tests/ is on the path only from here)

#: The recipes compared: the chapter's, and the paper's layer order at the rate the chapter once used.
RECIPES = {
    "pre-LN, learning rate 1e-3 (the chapter's)": {"norm_first": True, "lr": 1e-3},
    "post-LN, learning rate 3e-3": {"norm_first": False, "lr": 3e-3},
}
CHAPTER = "pre-LN, learning rate 1e-3 (the chapter's)"
NOTEBOOK = ROOT / "notebooks" / "07_transformer.ipynb"

#: The eight runs of chapter 7's warm-up exercise: its solution's deeper model, with or without warm-up.
WARM_UP_RUNS = {
    f"lr {lr:g}, {'pre-LN' if norm_first else 'post-LN'}, {'100 warm-up steps' if warmup > 1 else 'no warm-up'}": {
        "norm_first": norm_first,
        "lr": lr,
        "warmup": warmup,
    }
    for lr in (1e-3, 3e-3)
    for norm_first in (False, True)
    for warmup in (1, 100)
}
#: What the exercise's solution cell must contain for this script to train what it trains.
WARM_UP_SOLUTION = (
    "d_model=64, num_heads=4, num_layers=6, d_ff=256",
    "betas=(0.9, 0.98), eps=1e-9",
    "lambda s: min(1.0, (s + 1) / warmup_steps)",
    "epochs=6",
)


def reverser_run(norm_first: bool, lr: float, warmup: int | None = None) -> dict:
    """Chapter 7's reversal task, trained with one recipe: losses per epoch and exact reversals.

    ``warmup=None`` is the chapter's own run (two layers of width 32, the training loop's Adam);
    a number of steps is the warm-up exercise's run (six layers of width 64, Adam with the paper's
    betas, the rate raised linearly over ``warmup`` steps; 1 is none).
    """
    import random

    import torch

    from attnbook.data import Vocab, collate
    from attnbook.decode import greedy_decode
    from attnbook.train import train
    from attnbook.transformer import Transformer, TransformerConfig

    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    digits, rng = Vocab(list("0123456789")), random.Random(0)

    def reversal_pairs(n):
        pairs = []
        for _ in range(n):
            x = [rng.randrange(4, len(digits)) for _ in range(rng.randint(3, 8))]
            pairs.append((x, x[::-1]))
        return pairs

    train_pairs, test_pairs = reversal_pairs(2560), reversal_pairs(500)
    train_batches = [collate(train_pairs[i : i + 32]) for i in range(0, len(train_pairs), 32)]
    test_batch = collate(test_pairs)
    torch.manual_seed(0)
    size = dict(d_model=32, num_layers=2, d_ff=64) if warmup is None else dict(d_model=64, num_layers=6, d_ff=256)
    config = TransformerConfig(
        len(digits), len(digits), num_heads=4, dropout=0.0, norm_first=norm_first, share_embeddings=True, max_len=32,
        **size,
    )  # fmt: skip
    model = Transformer(config)
    if warmup is None:
        history = train(model, train_batches, [test_batch], epochs=6, lr=lr, plot=False, verbose=False)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
        history = train(
            model, train_batches, [test_batch], epochs=6, optimizer=optimizer, scheduler=schedule, plot=False,
            verbose=False,
        )  # fmt: skip
    decoded = greedy_decode(model, test_batch.src, test_batch.src_padding_mask, max_len=10)
    right = sum(decoded.tokens[i, : len(y) + 1].tolist() == y + [digits.eos_id] for i, (_, y) in enumerate(test_pairs))
    return {
        "train loss": [e.train_loss for e in history.epochs],
        "valid loss": [e.valid_loss for e in history.epochs],
        "exactly reversed": int(right),
        "test sequences": len(test_pairs),
        "capability": torch.backends.cpu.get_cpu_capability(),
    }


def _in_subprocess(recipe: str, env_changes: dict[str, str] | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": "0", **(env_changes or {})}
    command = [sys.executable, __file__, "--child", recipe]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode:
        raise RuntimeError(f"the run failed ({recipe}, {env_changes or 'this path'}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def stored_epoch_lines() -> list[str]:
    """The lines 'train loss ..., valid loss ...' that the chapter's training cell stores."""
    lines = []
    for cell in _notebook_cells():
        for output in cell.get("outputs", []):
            for line in "".join(output.get("text", "")).splitlines():
                if line.startswith("epoch ") and "/6: train loss" in line:
                    lines.append(line.split(":", 1)[1].split("(")[0].strip())
    return lines


def _written(path: Path, report: dict) -> dict:
    """``report`` written to ``path`` as JSON (the record a page quotes); returned."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


def _notebook_cells() -> list[dict]:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]


def record(path: Path) -> dict:
    from machine import describe

    jobs = {
        (recipe, where): (recipe, {} if where == "here" else OTHER_CPU)
        for recipe in RECIPES
        for where in ("here", "other")
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(_in_subprocess, *args) for key, args in jobs.items()}
        runs = {key: future.result() for key, future in futures.items()}
    recipes = {}
    for recipe in RECIPES:
        here, other = runs[recipe, "here"], runs[recipe, "other"]
        drift = [abs(a - b) / abs(a) for a, b in zip(here["valid loss"], other["valid loss"])]
        recipes[recipe] = {
            "valid loss, this path": [float(f"{x:.4g}") for x in here["valid loss"]],
            "valid loss, other path": [float(f"{x:.4g}") for x in other["valid loss"]],
            "relative difference of the valid loss, per epoch": [float(f"{d:.2g}") for d in drift],
            "exactly reversed, this path": here["exactly reversed"],
            "exactly reversed, other path": other["exactly reversed"],
            "test sequences": here["test sequences"],
        }
    mine = runs[CHAPTER, "here"]
    printed = [f"train loss {t:.3f}, valid loss {v:.3f}" for t, v in zip(mine["train loss"], mine["valid loss"])]
    report = {
        "what": "chapter 7's digit reverser trained for 6 epochs (480 Adam steps at a constant learning rate) in "
        "float64 from the same seeds, on this machine's own CPU kernel path and on another CPU's, with two recipes",
        "command": "python tests/benchmarks/training_stability.py --record " + str(path),
        "machine": describe(),
        "threads": 1,
        "kernel paths": {"here": runs[CHAPTER, "here"]["capability"], "other": runs[CHAPTER, "other"]["capability"]},
        "other path's environment": OTHER_CPU,
        "recipes": recipes,
        "the chapter's run prints what the chapter stores": printed == stored_epoch_lines(),
    }
    return _written(path, report)


def record_warm_up(path: Path) -> dict:
    """The warm-up exercise's eight runs on this machine's path, two at a time; written to ``path``."""
    from machine import describe

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(WARM_UP_RUNS, pool.map(_in_subprocess, WARM_UP_RUNS)))
    solution = next(source for cell in _notebook_cells() if "def warm_up_run" in (source := "".join(cell["source"])))
    report = {
        "what": "the eight runs of chapter 7's exercise 'Warm-up, measured': its digit reverser with six layers of "
        "width 64, 6 epochs (480 Adam steps), float64, from the same seeds, on this machine's CPU kernel path",
        "command": "python tests/benchmarks/training_stability.py --warm-up " + str(path),
        "machine": describe(),
        "threads": 1,
        "kernel path": runs[next(iter(WARM_UP_RUNS))]["capability"],
        "runs": {
            name: {
                "valid loss": [float(f"{x:.4g}") for x in run["valid loss"]],
                "exactly reversed": run["exactly reversed"],
                "test sequences": run["test sequences"],
            }
            for name, run in runs.items()
        },
        "the exercise's solution trains these runs": all(part in solution for part in WARM_UP_SOLUTION),
    }
    return _written(path, report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, metavar="JSON", help="run both recipes on both paths, write here")
    parser.add_argument("--warm-up", type=Path, metavar="JSON", help="run the warm-up exercise's eight, write here")
    parser.add_argument("--child", choices=[*RECIPES, *WARM_UP_RUNS], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(reverser_run(**{**RECIPES, **WARM_UP_RUNS}[args.child])))
        return 0
    if args.warm_up:
        report = record_warm_up(args.warm_up)
        for name, run in report["runs"].items():
            print(f"{name}: valid loss {run['valid loss'][0]} -> {run['valid loss'][-1]}, "
                  f"{run['exactly reversed']} of {run['test sequences']} reversed")  # fmt: skip
        print("the exercise's solution trains these runs:", report["the exercise's solution trains these runs"])
        return 0
    if not args.record:
        parser.error("give --record JSON or --warm-up JSON (where to write what the runs found)")
    report = record(args.record)
    print(json.dumps(report["recipes"], indent=2, ensure_ascii=False))
    print(
        "the chapter's run prints what the chapter stores:", report["the chapter's run prints what the chapter stores"]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
