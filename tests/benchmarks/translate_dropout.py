"""Why ``--dropout auto`` leaves dropout off for short runs: a recorded run (not a timed test).

``attnbook-translate train --dropout auto`` (the default) turns dropout on only
when the budget allows many passes over the training pairs.
A run of a few minutes on a CPU sees its pairs about once, and there dropout,
which exists to keep a model from learning its training pairs by heart, only
slows learning. This script shows it with the command line itself: it writes
20,000 of the course's generated English-French pairs (natural lengths) as a
tab-separated file, trains the default model on them for one epoch with
``--dropout 0`` (what ``auto`` chooses for one epoch) and with ``--dropout 0.1`` (the paper's), the
two runs side by side on one thread each, and scores both on the held-out test
pairs with greedy decoding (``evaluate --beam 1``). A budget of one epoch,
not of minutes, makes the runs the same on a fast machine and a slow one.
About four minutes of CPU; the record says on which machine.

The other regime, many passes over few pairs, is chapter 8's and that of
``translate_real.py`` on Tatoeba's English-Chinese pairs: there dropout pays.

    PYTHONPATH=src .venv/bin/python tests/benchmarks/translate_dropout.py --record book/results/translate_dropout.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

N_PAIRS, EPOCHS, DROPOUTS = 20_000, 1, (0.0, 0.1)


def write_pairs(path: Path, n_pairs: int) -> Path:
    """``n_pairs`` generated pairs as a Tatoeba/Anki tab-separated file: English, then French."""
    from attnbook.data import generate_pairs

    pairs = generate_pairs(n_pairs, seed=0, length_dist="natural", alignments=False)
    path.write_text("".join(f"{p.src}\t{p.tgt}\n" for p in pairs), encoding="utf-8")
    return path


def _command(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "attnbook.translate", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if result.returncode:
        raise RuntimeError(f"attnbook-translate {' '.join(args)} failed:\n{result.stderr[-2000:]}")
    return result.stdout


def one_run(pairs: Path, out: Path, dropout: float) -> dict:
    """Train with ``dropout`` for the budget, score greedily; the figures the log and the scores give."""
    trained = _command(
        "train",
        "--pairs",
        str(pairs),
        "--src",
        "en",
        "--tgt",
        "fr",
        "--out",
        str(out),
        "--epochs",
        str(EPOCHS),
        "--dropout",
        str(dropout),
        "--device",
        "cpu",
    )
    scored = _command("evaluate", str(out), "--beam", "1", "--device", "cpu")
    log = [json.loads(line) for line in (out / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    epochs = [e for e in log if e["event"] == "epoch"]
    scores = {
        m.group(1).strip(): float(m.group(2))
        for m in re.finditer(r"^(BLEU, lowercase|BLEU|chrF)\s+([\d.]+)", scored, re.M)
    }
    split = re.search(r"split by checksum: ([\d,]+) training, ([\d,]+) validation, ([\d,]+) test", trained)
    print(f"  dropout {dropout}: done", flush=True)
    return {
        "dropout": dropout,
        "training pairs": int(split.group(1).replace(",", "")),
        "test pairs": int(split.group(3).replace(",", "")),
        "steps": epochs[-1]["step"],
        "validation loss after each epoch": [round(e["valid_loss"], 3) for e in epochs],
        "test BLEU, greedy": scores["BLEU"],
        "test BLEU lowercase, greedy": scores["BLEU, lowercase"],
        "test chrF, greedy": scores["chrF"],
        "seconds": round(epochs[-1]["seconds"]),
    }


def record(path: Path) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from machine import describe

    from attnbook.translate.settings import RunSettings

    with tempfile.TemporaryDirectory(prefix="dropout-") as tmp:
        pairs = write_pairs(Path(tmp) / "generated.txt", N_PAIRS)
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(one_run, pairs, Path(tmp) / f"run-{p}", p) for p in DROPOUTS]
            runs = [f.result() for f in futures]
    defaults = RunSettings()
    report = {
        "what": "the command line's default model trained on generated English-French pairs for one epoch, "
        "without dropout and with 0.1, each scored on the held-out test pairs with greedy decoding",
        "command": f"python tests/benchmarks/translate_dropout.py --record {path}",
        "machine": describe(),
        "generated pairs": N_PAIRS,
        "budget": f"--epochs {EPOCHS}",
        "threads per run": 1,
        "dtype": defaults.dtype,
        "model": {
            "d_model": defaults.d_model,
            "num_layers": defaults.num_layers,
            "num_heads": defaults.num_heads,
            "d_ff": defaults.d_ff,
            "batch_tokens": defaults.batch_tokens,
            "warmup": defaults.warmup,
            "lr_factor": defaults.lr_factor,
        },
        "runs": runs,
        "BLEU without dropout minus BLEU with": round(runs[0]["test BLEU, greedy"] - runs[1]["test BLEU, greedy"], 1),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, metavar="JSON", required=True)
    args = parser.parse_args(argv)
    report = record(args.record)
    for run in report["runs"]:
        print(
            f"dropout {run['dropout']}: {run['steps']} steps, "
            f"validation loss {run['validation loss after each epoch']}, "
            f"test BLEU {run['test BLEU, greedy']} (greedy)"
        )
    print(f"written to {args.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
