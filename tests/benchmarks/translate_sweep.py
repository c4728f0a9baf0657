"""One setting of ``attnbook-translate train`` at several values, on real pairs, in the same time: a recorded run.

For each value the script trains the command line at its defaults but that
setting (``--option batch-tokens --values 1500 1000 700 500``) for
``--minutes`` on ``--threads`` threads, one run after the other so that they
never share the cores, and scores every pair of ``--test`` with
``attnbook-translate evaluate`` twice: with the decoding the run chose on its
validation pairs, and greedily. It records, per value, the steps taken, the
validation loss of each epoch and of the averaged weights, and BLEU, chrF and
the brevity penalty (counts and scores only, never a sentence of the files).

The train and test files are those ``translate_real.py --work DIR`` writes
(``DIR/0-en-zh/train.txt`` and ``test.txt``), so that a sweep and the
comparison with d2l score the same held-out pairs.

    python tests/benchmarks/translate_sweep.py --train DIR/train.txt --test DIR/test.txt --src en --tgt zh \\
        --option batch-tokens --values 1500 1000 700 500 --minutes 10 --threads 2 --work /tmp/sweep

``--work`` keeps the runs; a value whose run folder there already holds a
finished run of the same command is scored again, not trained again. "The
same command" means the same file, languages, budget and value: the version of
the library that trained it is not compared, so after a change to the code,
give a new ``--work`` folder. It writes
``tests/benchmarks/results/translate_sweep.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import Report  # noqa: E402
from translate_real import cli, dropout_events, precision_of  # noqa: E402  (runs the command line with this tree's library and N threads)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def finished(run: Path, args: argparse.Namespace, value: str) -> bool:
    """Whether ``run`` holds a run of this sweep's command, trained to its end: same file, languages, budget, value."""
    from attnbook.data import sha1_of

    try:
        events = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
        config = json.loads((run / "config.json").read_text())
    except (OSError, ValueError):
        return False
    stored = config["settings"].get(args.option.replace("-", "_"))
    same_value = str(stored) == value or (isinstance(stored, (int, float)) and _number(value) == stored)
    return (
        events[-1]["event"] == "end"
        and same_value
        and config["pairs"]["sha1"] == sha1_of(Path(args.train))
        and (config["src_lang"], config["tgt_lang"], config["reverse"]) == (args.src, args.tgt, args.reverse)
        and config["budget"] == {"minutes": args.minutes, "epochs": None, "steps": None}
    )


def one_value(args: argparse.Namespace, value: str, work: Path) -> dict:
    run, log = work / f"{args.option}-{value}", work / f"{args.option}-{value}.log"
    languages = ["--src", args.src, "--tgt", args.tgt] + (["--reverse"] if args.reverse else [])
    train = ["--pairs", args.train, *languages, "--minutes", args.minutes, "--device", "cpu", f"--{args.option}", value]
    train = [str(a) for a in train]
    seconds = None
    if not finished(run, args, value):
        seconds = cli(["train", *train, "--out", run], args.threads, log)
    result = {"value": value, "train_seconds": seconds, "decodings": {}}
    for name, options in {"chosen": [], "greedy": ["--beam", "1"]}.items():
        scores = work / f"{args.option}-{value}-{name}.json"
        cli(["evaluate", run, "--test", args.test, "--device", "cpu", "--json", scores, *options], args.threads, log)
        decoded = json.loads(scores.read_text())
        result["decodings"][name] = {"decoding": decoded["decoding"], "scores": decoded["scores"]}
    events = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    result["epochs"] = [
        {k: e[k] for k in ("epoch", "valid_loss", "seconds", "step", "tokens_per_second")}
        for e in events
        if e["event"] == "epoch"
    ]
    average = next((e for e in events if e["event"] == "average"), None)
    result["average"] = {k: average[k] for k in ("steps", "valid_loss", "kept")} if average else None
    result["steps"] = next(e for e in reversed(events) if e["event"] == "end")["position"]["step"]
    result["dropout"], result["precision"] = dropout_events(events), precision_of(events)
    result["settings"] = json.loads((run / "config.json").read_text())["settings"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", required=True, help="the pairs to train on (a Tatoeba/Anki file)")
    parser.add_argument("--test", required=True, help="the pairs to score, a file of the same format")
    parser.add_argument("--src", required=True)
    parser.add_argument("--tgt", required=True)
    parser.add_argument("--reverse", action="store_true", help="the source is the file's second column")
    parser.add_argument("--option", required=True, help="a setting of train, without its dashes: batch-tokens")
    parser.add_argument("--values", nargs="+", required=True, help="its values, one run each")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", help="keep the runs in this folder (default: a temporary one)")
    args = parser.parse_args(argv)
    for path in (args.train, args.test):
        if not Path(path).is_file():
            parser.error(f"no pairs file at {path}")
    report = Report(__file__, argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        report.place(Path(args.train).resolve().parent, "<data>")
        report.place(work, "<work>")
        runs = []
        for value in args.values:
            print(f"--{args.option} {value}: {args.minutes:g} minutes ...", flush=True)
            runs.append(one_value(args, value, work))
            best = runs[-1]
            row = {way: d["scores"] for way, d in best["decodings"].items()}
            average = best["average"]["valid_loss"] if best["average"] else float("nan")
            print(
                f"  {best['steps']:,} steps; validation loss of the average {average:.3f}; BLEU chosen "
                f"{row['chosen']['bleu']:.1f} (BP {row['chosen']['brevity_penalty']:.3f}), "
                f"greedy {row['greedy']['bleu']:.1f}",
                flush=True,
            )
        report.figure("option", args.option)
        report.figure("minutes", args.minutes)
        report.figure("threads", args.threads)
        report.figure("direction", f"{args.src}→{args.tgt}")
        report.figure("runs", runs)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
