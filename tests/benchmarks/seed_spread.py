"""What another seed, or float32, does to two chapters' trained figures (not a timed test).

A chapter that trains prints the figures of one run: seed 0, float64. On a
GPU, in float32 or from another seed, training is numerically another run.
This script reruns two chapters' experiments that way and records how far
their figures move, for the page on reproducibility:

- chapter 3: the plain GRU encoder-decoder and the one with attention, four
  epochs on 4,000 generated pairs (the chapter's settings, ``CHAPTER3_SETTINGS``),
  test BLEU overall and by source length;
  runs: seed 0 in float64 (the chapter's own run), seeds 1 and 2 in float64,
  seed 0 in float32 (one thread each, two runs at a time: about six minutes
  of CPU, three on a quiet two-core machine);
- chapter 5: one head against two on the two-lookup task (the digits one and
  two places back), 500 Adam steps, seeds 0 to 3 in float64 and in float32.

The seed is that of the models' initial weights (``torch.manual_seed`` before
each model is built); the data, its order and the test set stay the chapter's.
The settings are the chapter's, copied from its code and recorded with the
commit they were run at: the seed-0 float64 run must print the very table the
chapter stores, and the record says whether it did (if not, the chapter
changed and this script must follow it). ``tests/test_claims.py`` fails a page
that quotes the record once the chapter's code assigns other settings. The CPU
time of each run is recorded too: float64's cost against float32's, on this
machine, with the two runs side by side.

    PYTHONPATH=src .venv/bin/python tests/benchmarks/seed_spread.py --record book/results/seed_spread.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The runs of each chapter: (seed, dtype), in the order they start, two at a time: a seed's float64 and
#: float32 runs start side by side, so that their CPU times compare.
CHAPTER3_RUNS = [(0, "float64"), (0, "float32"), (1, "float64"), (2, "float64")]
CHAPTER5_RUNS = [(seed, dtype) for seed in range(4) for dtype in ("float64", "float32")]
#: Chapter 3's settings, as its code assigns them when FULL_RUN is off (the record keeps them).
CHAPTER3_SETTINGS = {"N_PAIRS": 4_000, "MAX_LEN": 25, "EPOCHS": 4, "HIDDEN": 128}


# --- chapter 3 (notebooks/03_attention.ipynb, the cells that train and score both models) -------


def chapter3(seed: int) -> dict:
    import torch

    from attnbook.data import load_corpus
    from attnbook.decode import translate
    from attnbook.metrics import bleu_by_length, sacrebleu_bleu
    from attnbook.rnn import Seq2Seq, Seq2SeqConfig
    from attnbook.train import train

    n_pairs, max_len, epochs, hidden = (CHAPTER3_SETTINGS[k] for k in ("N_PAIRS", "MAX_LEN", "EPOCHS", "HIDDEN"))
    edges = [8, 14, 20, 25]
    corpus = load_corpus(n_pairs=n_pairs, seed=0, max_len=max_len)
    train_batches = corpus.batches("train", batch_size=64, seed=0)
    valid_batches = corpus.batches("valid", batch_size=256)
    sources = [p.src_tokens for p in corpus.test]
    references = [p.tgt_tokens for p in corpus.test]
    lengths = [len(s) for s in sources]
    result, table = {}, []
    for name, attention in (("plain", False), ("attention", True)):
        torch.manual_seed(seed)
        config = Seq2SeqConfig(
            len(corpus.src_vocab), len(corpus.tgt_vocab), embed_size=64, hidden_size=hidden, attention=attention
        )
        model = Seq2Seq(config)
        train(model, train_batches, valid_batches, epochs=epochs, lr=5e-3, plot=False, verbose=False)
        hypotheses = translate(model, sources, corpus.src_vocab, corpus.tgt_vocab)
        buckets = bleu_by_length(hypotheses, references, lengths, edges)
        overall = sacrebleu_bleu(hypotheses, references)
        result[name] = {"all": round(overall, 1), "by source length": {b.label: round(b.bleu, 1) for b in buckets}}
        table.append((buckets, overall))
    # the chapter's table, line for line
    (plain, plain_all), (attn, attn_all) = table
    lines = [f"{'source tokens':>14} {'sentences':>10} {'plain':>7} {'attention':>10}"]
    lines += [f"{p.label:>14} {p.count:>10} {p.bleu:>7.1f} {a.bleu:>10.1f}" for p, a in zip(plain, attn)]
    lines.append(f"{'all':>14} {len(sources):>10} {plain_all:>7.1f} {attn_all:>10.1f}")
    longest = list(result["plain"]["by source length"])[-1]
    result["attention / plain on the longest sentences"] = round(
        result["attention"]["by source length"][longest] / result["plain"]["by source length"][longest], 2
    )
    result["table"] = "\n".join(lines)
    return result


# --- chapter 5 (notebooks/05_multihead_attention.ipynb, the two-lookup experiment) ---------------


def chapter5(seed: int) -> dict:
    import torch
    from torch import nn

    from attnbook.attention import MultiHeadAttention
    from attnbook.positional import LearnedPositionalEncoding

    digits, length, width, steps = 10, 12, 32, 500

    class TwoLookupModel(nn.Module):
        def __init__(self, num_heads):
            super().__init__()
            self.embed = nn.Embedding(digits, width)
            self.position = LearnedPositionalEncoding(width, max_len=length)
            self.attention = MultiHeadAttention(width, num_heads)
            self.readout = nn.Linear(width, 2 * digits)

        def forward(self, tokens):
            x = self.position(self.embed(tokens))
            return self.readout(self.attention(x, x, x)).unflatten(-1, (2, digits))

    def batch(n, generator):
        tokens = torch.randint(0, digits, (n, length), generator=generator)
        return tokens, torch.stack([tokens.roll(1, dims=1), tokens.roll(2, dims=1)], dim=-1)

    test_tokens, test_targets = batch(2000, torch.Generator().manual_seed(2))
    result, lines = {}, [f"{'heads':>5} {'parameters':>11} {'accuracy at t-1':>16} {'accuracy at t-2':>16}"]
    for heads in (1, 2):
        torch.manual_seed(seed)
        data = torch.Generator().manual_seed(1)
        model = TwoLookupModel(heads)
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        for _ in range(steps):
            tokens, targets = batch(64, data)
            logits = model(tokens)[:, 2:]
            loss = nn.functional.cross_entropy(logits.reshape(-1, digits), targets[:, 2:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            correct = (model(test_tokens).argmax(-1) == test_targets)[:, 2:].float().mean(dim=(0, 1))
        n_params = sum(p.numel() for p in model.parameters())
        result[f"{heads} head{'s' if heads > 1 else ''}"] = {
            "accuracy one back": round(correct[0].item(), 3),
            "accuracy two back": round(correct[1].item(), 3),
        }
        lines.append(f"{heads:>5} {n_params:>11,} {correct[0].item():>16.3f} {correct[1].item():>16.3f}")
    result["table"] = "\n".join(lines)
    return result


CHAPTERS = {"3": chapter3, "5": chapter5}
NOTEBOOKS = {"3": "notebooks/03_attention.ipynb", "5": "notebooks/05_multihead_attention.ipynb"}


def child(chapter: str, seed: int, dtype: str) -> None:
    """One run, in this process: print its figures and its CPU time as JSON."""
    import torch

    from attnbook.notebook import setup

    setup(figures=False)
    torch.set_num_threads(1)
    torch.set_default_dtype(getattr(torch, dtype))
    start = time.process_time()
    result = CHAPTERS[chapter](seed)
    result["CPU seconds"] = round(time.process_time() - start, 1)
    print(json.dumps(result))


# --- the driver ------------------------------------------------------------------------------


def _run(chapter: str, seed: int, dtype: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--child", chapter, str(seed), dtype]
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"chapter {chapter}, seed {seed}, {dtype} failed:\n{result.stderr[-2000:]}")
    print(f"  chapter {chapter}, seed {seed}, {dtype}: done", flush=True)
    return json.loads(result.stdout)


def stored_figures(chapter: str) -> dict | None:
    """The figures of the chapter's stored table that a run reproduces, in the form a run records them.

    Chapter 3: the plain and the attention model's test BLEU by source length and overall (the table
    whose first columns are ``source tokens``, ``sentences``, ``plain``, ``attention``; later columns
    are ignored). Chapter 5: each model's accuracy one and two places back. ``None`` if the chapter's
    outputs hold no such table.
    """
    import nbformat

    for cell in nbformat.read(ROOT / NOTEBOOKS[chapter], as_version=4).cells:
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        lines = text.splitlines()
        if chapter == "3":
            head = next(
                (i for i, line in enumerate(lines) if line.split()[:4] == ["source", "tokens", "sentences", "plain"]),
                None,
            )
            if head is None:
                continue
            found = {"plain": {"by source length": {}}, "attention": {"by source length": {}}}
            for line in lines[head + 1 :]:
                parts = line.split()
                if len(parts) < 4:
                    break
                for model, value in (("plain", parts[2]), ("attention", parts[3])):
                    if parts[0] == "all":
                        found[model]["all"] = float(value)
                    else:
                        found[model]["by source length"][parts[0]] = float(value)
                if parts[0] == "all":
                    return found
        else:
            head = next((i for i, line in enumerate(lines) if line.split()[:2] == ["heads", "parameters"]), None)
            if head is None:
                continue
            found = {}
            for line in lines[head + 1 : head + 3]:
                heads, _, one, two = line.split()[:4]
                name = f"{heads} head{'s' if heads != '1' else ''}"
                found[name] = {"accuracy one back": float(one), "accuracy two back": float(two)}
            return found
    return None


def reproduces_chapter(chapter: str, run: dict) -> bool:
    """Does a run (the seed-0 float64 one) give every figure of the chapter's stored table?"""
    stored = stored_figures(chapter)
    return stored is not None and _figures(stored) == {k: v for k, v in _figures(run).items() if k in _figures(stored)}


def check(path: Path) -> dict:
    """Compare a record's seed-0 float64 runs with the chapters' stored tables as they are now; update the flags."""
    report = json.loads(path.read_text(encoding="utf-8"))
    for chapter in ("3", "5"):
        entry = report[f"chapter {chapter}"]
        entry["the seed-0 float64 run prints the chapter's stored table"] = reproduces_chapter(
            chapter, entry["runs"]["seed 0, float64"]
        )
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


#: What a run records besides the figures the chapter prints.
NOT_PRINTED = ("CPU seconds", "attention / plain on the longest sentences")


def _figures(run: dict, prefix: str = "") -> dict[str, float]:
    """Every figure of a run that the chapter prints, by name (its nested keys joined)."""
    found = {}
    for key, value in run.items():
        if isinstance(value, dict):
            found.update(_figures(value, f"{prefix}{key}, "))
        elif key not in NOT_PRINTED:
            found[prefix + key] = value
    return found


def largest_change(runs: dict[str, dict], reference: str) -> dict:
    """The printed figure that moved most, relative to the reference run's, over the other runs."""
    ref = _figures(runs[reference])
    moves = [
        (abs(v / ref[k] - 1), k, name, ref[k], v)
        for name, run in runs.items()
        if name != reference
        for k, v in _figures(run).items()
        if ref[k]
    ]
    move, figure, run, before, after = max(moves)
    return {
        "figure": figure,
        "run": run,
        "the chapter's": before,
        "that run's": after,
        "relative change": round(move, 2),
    }


def cpu_ratio(results: dict[str, dict]) -> float:
    """The CPU time of the float64 runs over that of the float32 runs, over the seeds run in both."""
    seeds = [name.split(",")[0] for name in results if name.endswith("float32")]
    f64 = sum(results[f"{seed}, float64"]["CPU seconds"] for seed in seeds)
    f32 = sum(results[f"{seed}, float32"]["CPU seconds"] for seed in seeds)
    return round(f64 / f32, 2)


def _commit() -> str:
    """The commit the runs were made at (with ``+ changes`` if the work tree differed from it)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    )
    return head + (" + changes" if dirty.stdout.strip() else "")


def record(path: Path, jobs: int) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from machine import describe

    commit = _commit()  # before the runs: the code they run
    work = [("3", s, d) for s, d in CHAPTER3_RUNS] + [("5", s, d) for s, d in CHAPTER5_RUNS]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {key: pool.submit(_run, *key) for key in work}
        runs = {key: future.result() for key, future in futures.items()}
    report = {
        "what": __doc__.split("\n\n")[1].replace("\n", " "),
        "command": f"python tests/benchmarks/seed_spread.py --record {path}",
        "commit": commit,
        "machine": describe(),
        "threads per run": 1,
        "runs at a time": jobs,
    }
    for chapter, runs_of in (("3", CHAPTER3_RUNS), ("5", CHAPTER5_RUNS)):
        results = {f"seed {s}, {d}": runs[chapter, s, d] for s, d in runs_of}
        for r in results.values():
            r.pop("table", None)
        entry = {
            "notebook": NOTEBOOKS[chapter],
            "settings": CHAPTER3_SETTINGS if chapter == "3" else {},
            "the seed-0 float64 run prints the chapter's stored table": reproduces_chapter(
                chapter, results["seed 0, float64"]
            ),
            "runs": results,
            "the figure that moved most against the chapter's run": largest_change(results, "seed 0, float64"),
            "float64 / float32 CPU time": cpu_ratio(results),
        }
        report[f"chapter {chapter}"] = entry
    spread = report["chapter 3"]["runs"].values()
    report["chapter 3"]["range over the runs"] = {
        f"{model} {what}": [min(r[model][what] for r in spread), max(r[model][what] for r in spread)]
        for model in ("plain", "attention")
        for what in ("all",)
    }
    report["chapter 3"]["range over the runs"]["attention / plain on the longest sentences"] = [
        min(r["attention / plain on the longest sentences"] for r in spread),
        max(r["attention / plain on the longest sentences"] for r in spread),
    ]
    one = [r["1 head"] for r in report["chapter 5"]["runs"].values()]
    two = [r["2 heads"] for r in report["chapter 5"]["runs"].values()]
    report["chapter 5"]["range over the runs"] = {
        f"{heads} {what}": [min(r[what] for r in group), max(r[what] for r in group)]
        for heads, group in (("1 head", one), ("2 heads", two))
        for what in ("accuracy one back", "accuracy two back")
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, metavar="JSON", required="--child" not in (argv or sys.argv))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time, one thread each (default 2)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument(
        "--check",
        action="store_true",
        help="run nothing: compare the record's seed-0 runs with the chapters' stored tables now, and update it",
    )
    args = parser.parse_args(argv)
    if args.check:
        report = check(args.record)
        for chapter in ("chapter 3", "chapter 5"):
            same = report[chapter]["the seed-0 float64 run prints the chapter's stored table"]
            print(f"{chapter}: the record's seed-0 float64 run gives the chapter's stored table: {same}")
        return 0
    if args.child:
        chapter, seed, dtype = args.child
        child(chapter, int(seed), dtype)
        return 0
    report = record(args.record, args.jobs)
    for chapter in ("chapter 3", "chapter 5"):
        entry = report[chapter]
        same = entry["the seed-0 float64 run prints the chapter's stored table"]
        print(f"{chapter}: the seed-0 float64 run reproduces the chapter: {same}")
        for name, rng in entry["range over the runs"].items():
            print(f"  {name}: {rng[0]} to {rng[1]}")
        print(f"  float64 / float32 CPU time: {entry['float64 / float32 CPU time']}")
    print(f"written to {args.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
