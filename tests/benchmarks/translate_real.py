"""The command line against d2l's Transformer on real sentence pairs, in the same time on the same pairs.

For each direction (a Tatoeba/Anki pairs file and two languages), the script

1. holds out about ``--test-pairs`` pairs as a test file, by the checksum of
   their sentences (pairs that share a sentence stay on one side), unless the
   direction names a test file of its own (``FILE:SRC:TGT[:reverse][:TEST]``);
2. trains ours as a user would: ``attnbook-translate train`` on the rest, for
   ``--minutes``, with ``--threads`` CPU threads, everything else at its
   defaults (subwords, dropout as the budget allows, the decoding chosen on
   the validation pairs, the averaged weights when better); the wall time of the whole command,
   choosing the decoding included, is what d2l gets;
3. scores it with ``attnbook-translate evaluate --test`` three ways: the
   decoding the run chose, greedy, and the old default (beam 4, α 0.6, at
   most the source + 50 tokens);
4. trains d2l's chapter-11 Transformer in a process of its own, with the
   same threads, for the same wall time, on the very training pairs ours
   trained on (the command line's training split of the same file): d2l's
   model and recipe (:data:`D2L`: width 256, 2 blocks, 4 heads, a
   feed-forward width of 64, dropout 0.2, Adam at 0.001, batches of 128
   sentences, gradients clipped at 1, cross-entropy), with the word tokens
   and vocabulary of the command line's ``--tokens words`` (d2l's own
   tokenizer splits on spaces, which leaves a Chinese sentence one token) and
   its table of capitals, so that d2l loses nothing to tokenization or case;
   it translates greedily, as d2l does;
5. scores both with sacreBLEU on the detokenized text (``tokenize="zh"`` for
   Chinese) and records BLEU, chrF and the brevity penalty, and the target:
   ours at least ``--goal`` times d2l's BLEU (twice by default).

``--dtype`` is ours' ``train --dtype`` (d2l computes in float32 whatever it
says). A slow processor is stood in for by one core in float32:

    taskset -c 0 python tests/benchmarks/translate_real.py --minutes 10 --threads 1 --dtype float32 \\
        --goal 1.2 --direction /data/cmn.txt:zh:en:reverse

The speed of a shared machine drifts, by as much as 15–20% between two
trainings run back to back, and d2l's BLEU after ten minutes depends on how many
steps it could take. With ``--rounds R`` both systems train R times in the
order ours, d2l, d2l, ours, ours, d2l, ... (each round reverses the one before,
so that a steady drift favours neither), round k with seed S + k - 1 (``--seed S``,
0 by default); the ratio is that of the mean BLEUs, and each round's is
recorded beside it. Later rounds score ours' chosen decoding only; d2l trains
in each round for as long as ours did in the first.

With ``--d2l-from JSON`` d2l's result is taken from an earlier report of this
script when that report measured the same split for as long (within 5%) on a
machine as fast (ours' first pass within 5%); d2l's recipe does not change
between runs of ours.

Directions run one after the other, the two systems too, so that they never
share the cores; the load averages before and after are recorded (other work
on the machine slows both alike only if it is steady). It writes its report,
with counts and scores only, never a sentence of the files, to ``--out``
(``tests/benchmarks/results/translate_real.json`` by default) after each
direction, so that a failure or Ctrl-C in a later one keeps the ones
measured. An earlier report at that path is kept under a name with its start
time; a ``--work`` folder that holds an earlier measurement's runs is refused
before anything trains.

    python tests/benchmarks/translate_real.py --minutes 10 --threads 2 \\
        --direction /data/cmn.txt:en:zh --direction /data/cmn.txt:zh:en:reverse --direction /data/fra.txt:en:fr

Without ``--direction`` it measures the bundled generated English→French
corpus (12,000 pairs) as a stand-in.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import Report, results_dir  # noqa: E402

#: d2l's chapter-11 Transformer and its training recipe (section 11.7 of the d2l book).
D2L = {
    "d_model": 256,
    "num_layers": 2,
    "num_heads": 4,
    "d_ff": 64,
    "dropout": 0.2,
    "lr": 0.001,
    "batch": 128,
    "clip": 1.0,
}
GOAL = 2.0  # ours at least twice d2l's BLEU


def parse_direction(spec: str) -> dict:
    parts = spec.split(":")
    if len(parts) < 3:
        raise SystemExit(f"--direction {spec}: expected FILE:SRC:TGT[:reverse][:TEST]")
    file, src, tgt, *rest = parts
    reverse = bool(rest) and rest[0] == "reverse"
    test = rest[1] if reverse and len(rest) > 1 else (rest[0] if rest and not reverse else None)
    return {"file": file, "src": src, "tgt": tgt, "reverse": reverse, "test": test}


def write_pairs(path: Path, pairs, reverse: bool) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for p in pairs:
            first, second = (p.tgt, p.src) if reverse else (p.src, p.tgt)
            f.write(f"{first}\t{second}\n")
    return path


def dropout_events(events: list[dict]) -> list[dict]:
    """What a run's log says of its dropout: what ``--dropout auto`` chose for how many passes, or when
    ``--late-dropout`` turned it on."""
    return [{k: v for k, v in e.items() if k not in ("event", "time")} for e in events if e["event"] == "dropout"]


def precision_of(events: list[dict]) -> str | None:
    """How a run computed (``float32``, ``bfloat16 mixed precision``), as its log's first event says."""
    return next((e.get("precision") for e in events if e["event"] == "start"), None)


def hold_out(direction: dict, work: Path, n_test: int) -> tuple[Path, Path, int, int]:
    """The training file and the test file of a direction, and their sizes in pairs."""
    from attnbook.data import split_by_checksum
    from attnbook.translate.run_pairs import read_pairs

    pairs, _ = read_pairs(direction["file"], direction["src"], direction["tgt"], direction["reverse"])
    if direction["test"]:
        test, _ = read_pairs(direction["test"], direction["src"], direction["tgt"], direction["reverse"])
        return Path(direction["file"]), Path(direction["test"]), len(pairs), len(test)
    share = min(0.2, n_test / len(pairs))
    splits = split_by_checksum(pairs, (1 - share, 0.0, share))
    train = write_pairs(work / "train.txt", splits.train, direction["reverse"])
    test = write_pairs(work / "test.txt", splits.test[:n_test], direction["reverse"])
    return train, test, len(splits.train), min(n_test, len(splits.test))


def environment(threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    src = str(HERE.parent.parent / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def cli(args: list[str], threads: int, log: Path) -> float:
    """Run ``attnbook-translate ARGS``; return its wall time in seconds."""
    start = time.monotonic()
    with open(log, "a", encoding="utf-8") as out:
        command = [sys.executable, "-m", "attnbook.translate", *map(str, args)]
        status = subprocess.run(command, env=environment(threads), stdout=out, stderr=subprocess.STDOUT).returncode
    if status != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed ({status}): see {log}")
    return time.monotonic() - start


#: Runs several commands of the command line, one after the other, in one process; stops at the first that fails,
#: with the exit status ``_FIRST_FAILED + k`` for the k-th command (its own status and traceback go to the log).
_FIRST_FAILED = 10
_IN_ONE_PROCESS = (
    "import json, sys, traceback\n"
    "from attnbook.translate.cli import main\n"
    "for k, args in enumerate(json.loads(sys.argv[1])):\n"
    "    try:\n"
    "        status = main(args)\n"
    "    except SystemExit as stop:\n"
    "        status = stop.code\n"
    "    except Exception:\n"
    "        traceback.print_exc()\n"
    "        status = 1\n"
    "    if status:\n"
    "        print(f'exit status {status}', file=sys.stderr)\n"
    f"        sys.exit({_FIRST_FAILED} + k)\n"
)


def cli_in_one_process(commands: list[list[str]], threads: int, log: Path) -> None:
    """Run ``attnbook-translate ARGS`` for each ``ARGS`` of ``commands`` in one process (they are not timed: each
    would otherwise pay again for the start of Python and PyTorch)."""
    with open(log, "a", encoding="utf-8") as out:
        argv = json.dumps([[str(a) for a in args] for args in commands])
        command = [sys.executable, "-c", _IN_ONE_PROCESS, argv]
        status = subprocess.run(command, env=environment(threads), stdout=out, stderr=subprocess.STDOUT).returncode
    if status != 0:
        k = status - _FIRST_FAILED
        which = " ".join(map(str, commands[k])) if 0 <= k < len(commands) else f"one of {len(commands)} commands"
        raise SystemExit(f"attnbook-translate {which} failed: see {log} (its own exit status is its last line)")


#: How ``evaluate`` decodes ours: the decoding the run chose (the one compared with d2l), greedy, the old default.
WAYS = {
    "chosen": [],
    "greedy": ["--beam", "1"],
    "beam 4, α 0.6, source + 50": ["--beam", "4", "--alpha", "0.6", "--max-len-a", "1", "--max-len-b", "50"],
}


def _seeded(system: str, seed: int) -> str:
    """The name of a system's run folder, log and scores for a seed: ``ours``, ``ours-seed1``, ..."""
    return system if seed == 0 else f"{system}-seed{seed}"


def _ratio(bleu: dict) -> float:
    """Ours' BLEU over d2l's (``bleu``: ``{"ours": ..., "d2l": ...}``)."""
    return bleu["ours"] / max(bleu["d2l"], 1e-9)


def ours(
    direction: dict,
    train: Path,
    test: Path,
    work: Path,
    minutes: float,
    threads: int,
    seed: int = 0,
    ways=WAYS,
    dtype: str | None = None,
) -> dict:
    """Train ours in ``work/ours`` (``work/ours-seedK`` for another seed) and score it the ``ways`` given.

    ``dtype``: ``train --dtype`` (None: its default, ``auto``).
    """
    name = _seeded("ours", seed)
    run, log = work / name, work / f"{name}.log"
    languages = ["--src", direction["src"], "--tgt", direction["tgt"]] + (["--reverse"] if direction["reverse"] else [])
    seeded = ["--seed", seed] if seed else []
    precise = ["--dtype", dtype] if dtype else []
    seconds = cli(
        [
            "train",
            "--pairs",
            train,
            *languages,
            "--out",
            run,
            "--minutes",
            minutes,
            "--device",
            "cpu",
            *seeded,
            *precise,
        ],
        threads,
        log,
    )
    scores = {way: work / f"{name}-{k}.json" for k, way in enumerate(ways)}
    evaluate = [["evaluate", run, "--test", test, "--device", "cpu", "--json", scores[way], *ways[way]] for way in ways]
    cli_in_one_process(evaluate, threads, log)
    result = {"train_seconds": seconds, "decodings": {way: json.loads(scores[way].read_text()) for way in ways}}
    events = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    result["epochs"] = [
        {k: e[k] for k in ("epoch", "train_loss", "valid_loss", "seconds", "tokens_per_second")}
        for e in events
        if e["event"] == "epoch"
    ]
    result["average"] = next((e for e in events if e["event"] == "average"), None)
    result["dropout"], result["precision"] = dropout_events(events), precision_of(events)
    result["chosen_decoding"] = json.loads((run / "decoding.json").read_text())
    config = json.loads((run / "config.json").read_text())
    result["split_sizes"], result["tokens"], result["settings"] = (
        config["split_sizes"],
        config["tokens"],
        config["settings"],
    )
    result["vocab_sizes"] = [config["model"]["src_vocab_size"], config["model"]["tgt_vocab_size"]]
    result["recipe"] = config.get("recipe")  # what the measured speed allowed, and what it chose
    result["steps"], result["passes"] = passes_made(events, result["recipe"])
    return result


def passes_made(events: list[dict], recipe: dict | None) -> tuple[int, float | None]:
    """The steps a run made, and the passes over its training pairs that makes (None: not known)."""
    end = next((e["position"] for e in events if e["event"] == "end"), None)
    if end is None:
        return 0, None
    complete = [e["step"] for e in events if e["event"] == "epoch" and e["complete"]]
    per_epoch = recipe["steps_per_epoch"] if recipe else (complete[0] if complete else None)
    return end["step"], (end["step"] / per_epoch if per_epoch else None)


def d2l(direction: dict, train: Path, test: Path, work: Path, seconds: float, threads: int, seed: int = 0) -> dict:
    name = _seeded("d2l", seed)
    out = work / f"{name}.json"
    command = [
        sys.executable,
        __file__,
        "--d2l-worker",
        f"{train}:{direction['src']}:{direction['tgt']}" + (":reverse" if direction["reverse"] else ""),
        "--test-file",
        str(test),
        "--seconds",
        str(seconds),
        "--threads",
        str(threads),
        "--worker-out",
        str(out),
        "--worker-seed",
        str(seed),
    ]
    with open(work / f"{name}.log", "w", encoding="utf-8") as log:
        status = subprocess.run(command, env=environment(threads), stdout=log, stderr=subprocess.STDOUT).returncode
    if status != 0:
        raise SystemExit(f"d2l failed ({status}): see {work / f'{name}.log'}")
    return json.loads(out.read_text())


# --- the d2l worker: its own process, its own threads -------------------------------------------------


def d2l_worker(args: argparse.Namespace) -> int:
    import torch
    from bench_translator import d2l_transformer

    from attnbook.data import PairDataset, Vocab, collate, tokenize
    from attnbook.masks import padding_mask
    from attnbook.metrics import text_scores
    from attnbook.train import sequence_loss
    from attnbook.translate.run_pairs import held_out_fraction, read_pairs, split_run_pairs
    from attnbook.translate.truecase import build_truecase, to_text

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.worker_seed)
    direction = parse_direction(args.d2l_worker)
    pairs, _ = read_pairs(direction["file"], direction["src"], direction["tgt"], direction["reverse"])
    splits = split_run_pairs(pairs, held_out_fraction(len(pairs)))  # the command line's training split
    train = [p for p in splits.train if 0 < len(p.src_tok) <= 50 and 0 < len(p.tgt_tok) <= 50]
    src_vocab = Vocab.build((p.src_tok for p in train), min_freq=2)
    tgt_vocab = Vocab.build((p.tgt_tok for p in train), min_freq=2)
    truecase = build_truecase(train)
    dataset = PairDataset(train, src_vocab, tgt_vocab)
    model = d2l_transformer(
        len(src_vocab),
        len(tgt_vocab),
        D2L["d_model"],
        D2L["num_heads"],
        D2L["num_layers"],
        D2L["d_ff"],
        dropout=D2L["dropout"],
    )
    first = collate([dataset[i] for i in range(2)])
    model(first.src, first.src_padding_mask, first.tgt_in)  # d2l's LazyLinear takes its shape here
    optimizer = torch.optim.Adam(model.parameters(), lr=D2L["lr"])
    rng, start, steps, epochs = random.Random(args.worker_seed), time.monotonic(), 0, 0
    model.train()
    while time.monotonic() - start < args.seconds:
        order = list(range(len(dataset)))
        rng.shuffle(order)
        for k in range(0, len(order), D2L["batch"]):
            batch = collate([dataset[i] for i in order[k : k + D2L["batch"]]])
            loss = sequence_loss(model(batch.src, batch.src_padding_mask, batch.tgt_in), batch.tgt_out, 0, 0.0)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), D2L["clip"])
            optimizer.step()
            steps += 1
            if time.monotonic() - start >= args.seconds:
                break
        else:
            epochs += 1
    trained = time.monotonic() - start
    test, _ = read_pairs(args.test_file, direction["src"], direction["tgt"], direction["reverse"], check=False)
    model.eval()
    hypotheses = []
    with torch.no_grad():
        for k in range(0, len(test), 64):
            part = test[k : k + 64]
            ids = [src_vocab.encode(tokenize(p.src, direction["src"]))[:250] or [src_vocab.unk_id] for p in part]
            lengths = torch.tensor([len(x) for x in ids])
            src = torch.tensor([x + [0] * (int(lengths.max()) - len(x)) for x in ids])
            mask = padding_mask(lengths, int(lengths.max()))
            out = torch.full((len(part), 1), tgt_vocab.bos_id)
            done = torch.zeros(len(part), dtype=torch.bool)
            for _ in range(min(int(lengths.max()) + 50, 255)):  # greedy, the whole prefix again at every step
                token = model(src, mask, out)[:, -1].argmax(-1)
                token[done] = 0
                out = torch.cat([out, token[:, None]], dim=1)
                done |= token == tgt_vocab.eos_id
                if bool(done.all()):
                    break
            hypotheses += [to_text(tgt_vocab.decode(row[1:]), direction["tgt"], truecase) for row in out.tolist()]
    scores = text_scores(hypotheses, [p.tgt for p in test], direction["tgt"])
    result = {
        "budget_seconds": args.seconds,  # what it was given: ours' time in all, its decoding chosen included
        "train_seconds": trained,  # what it took: its loop stops at the first step past the budget
        "steps": steps,
        "complete_epochs": epochs,
        "training_pairs": len(train),
        "vocab_sizes": [len(src_vocab), len(tgt_vocab)],
        "decoding": "greedy",
        "scores": vars(scores),
        "recipe": D2L,
        "seed": args.worker_seed,
    }
    Path(args.worker_out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


# --- main ---------------------------------------------------------------------------------------------


#: What makes our model as costly to train as in an earlier report (its first pass timed the machine).
SHAPE = (
    "arch",
    "d_model",
    "num_heads",
    "num_layers",
    "d_ff",
    "batch_tokens",
    "tokens",
    "vocab",
    "pieces",
    "max_length",
)


#: How much faster or slower ours' first pass may have been in a report whose d2l result is reused.
SAME_SPEED = 0.05


def first_pass_speed(now: dict, then: dict) -> tuple[float, str]:
    """How much faster ours' first pass ran now than then, and by what measure.

    Target tokens per second where both runs recorded them: a change of the tokenizer changes how many tokens a
    pass has, and with it the pass's time, but hardly the rate. Older records have only the pass's time.
    """
    if now.get("tokens_per_second") and then.get("tokens_per_second"):
        return now["tokens_per_second"] / then["tokens_per_second"], "tokens_per_second_now_over_then"
    return then["seconds"] / now["seconds"], "first_pass_then_over_now"


def recorded_d2l(paths: list[str], name: str, n_train: int, n_test: int, mine: dict, threads: int) -> dict | None:
    """d2l's result for this direction from an earlier report of this script, when it measured the same thing.

    A report (``tests/benchmarks/results/translate_real.json``, or a file of such reports under ``"runs"``, as
    ``book/results/translator_real.json``) counts only if it was made with as many threads on the same split
    (the direction, the pairs to train on and to test), for a time within 5% of this run's, and on a machine as
    fast as this one: processors of one name differ in speed, so ours' first pass, with a model of the same
    shape, must have run within 5% of the speed it runs now (:func:`first_pass_speed`; d2l's BLEU after ten
    minutes depends on the steps it could take: from English to Chinese 13.7 after 860 steps, 18.2 after 1,375, in
    ``book/results/translator_real.json``). Of several, the one closest in speed.
    d2l's recipe does not change, so its run need not be repeated.
    """
    import torch  # noqa: F401  (the machine's description names torch's version and CPU capability once it is loaded)
    from _report import machine

    here, found = machine(), []
    for path in paths:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        for report in record["runs"].values() if "runs" in record else [record]:
            if any(report["machine"].get(k) != here.get(k) for k in ("cpu", "logical_cpus", "torch", "cpu_capability")):
                continue
            if report["figures"]["threads"] != threads:
                continue
            for earlier in report["figures"]["directions"]:
                theirs, before = earlier["d2l"], earlier["ours"]
                if (earlier["direction"], earlier["train_file_pairs"], earlier["test_pairs"]) != (
                    name,
                    n_train,
                    n_test,
                ):
                    continue
                if abs(theirs["train_seconds"] - mine["train_seconds"]) > 0.05 * mine["train_seconds"]:
                    continue
                if any(before["settings"][k] != mine["settings"][k] for k in SHAPE):
                    continue
                speed, measure = first_pass_speed(mine["epochs"][0], before["epochs"][0])
                if abs(speed - 1) <= SAME_SPEED:
                    found.append(
                        (
                            abs(speed - 1),
                            {
                                **theirs,
                                "recorded": {"file": Path(path).name, "started": report["started"], measure: speed},
                            },
                        )
                    )
    return min(found, key=lambda f: f[0])[1] if found else None


def keep_earlier(path: Path) -> Path | None:
    """Move an earlier report at ``path`` aside, to ``NAME.<its start time>.json``; return where (None: none).

    A measurement takes an hour per direction, so its report is never overwritten by the next one.
    """
    if not path.exists():
        return None
    try:
        started = str(json.loads(path.read_text(encoding="utf-8"))["started"])
    except (ValueError, KeyError, TypeError):  # not a report of this script: name it by its time instead
        started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(path.stat().st_mtime))
    stamp = "".join(c if c.isalnum() or c in "-+" else "-" for c in started)
    target, n = path.with_name(f"{path.stem}.{stamp}{path.suffix}"), 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.stem}.{stamp}-{n}{path.suffix}")
    path.rename(target)
    return target


def generated_stand_in(work: Path) -> str:
    from attnbook.data import generate_pairs

    path = work / "generated-en-fr.txt"
    write_pairs(path, generate_pairs(12_000, seed=11, alignments=False), reverse=False)
    return f"{path}:en:fr"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--direction",
        action="append",
        metavar="FILE:SRC:TGT[:reverse][:TEST]",
        help="a pairs file and a direction (repeat)",
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="ours: train --minutes (default 10)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of each system (default 2)")
    parser.add_argument(
        "--dtype",
        choices=("auto", "float32", "float64", "bfloat16"),
        help="ours: train --dtype (default: the command line's, auto); d2l computes in float32 whatever it is",
    )
    parser.add_argument(
        "--goal",
        type=float,
        default=GOAL,
        help=f"the target: ours' BLEU at least this many times d2l's (default {GOAL:g})",
    )
    parser.add_argument("--test-pairs", type=int, default=1000, help="pairs held out for the test (default 1000)")
    parser.add_argument("--work", help="keep the runs in this folder (default: a temporary one)")
    parser.add_argument(
        "--d2l-from",
        action="append",
        default=[],
        metavar="JSON",
        help="reuse d2l's result from an earlier report of this script that measured the same split "
        "for as long on a machine as fast (repeat)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="train both this many times, in the order ours, d2l, d2l, ours, ...; compare the mean BLEUs (default 1)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the seed of both systems' first round; round k trains with seed S + k - 1 (default 0)",
        metavar="S",
    )
    parser.add_argument(
        "--out",
        metavar="JSON",
        help="write the report here (default tests/benchmarks/results/translate_real.json); "
        "an earlier report there is kept, renamed with its start time",
    )
    parser.add_argument("--worker-seed", type=int, default=0, help=argparse.SUPPRESS)  # the d2l worker's
    parser.add_argument("--d2l-worker", help=argparse.SUPPRESS)
    parser.add_argument("--test-file", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.d2l_worker:
        return d2l_worker(args)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.rounds > 1 and args.d2l_from:
        parser.error("--rounds trains d2l beside ours in every round; it does not reuse a recorded d2l (--d2l-from)")
    if args.seed < 0:
        parser.error(f"--seed must be at least 0, got {args.seed}")
    for path in args.d2l_from:
        if not Path(path).is_file():
            parser.error(f"--d2l-from {path}: no such file")
    out = Path(args.out) if args.out else results_dir() / "translate_real.json"
    from attnbook.translate.console import CommandError

    report = Report(__file__, argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.work or tmp)
        root.mkdir(parents=True, exist_ok=True)
        specs = args.direction or [generated_stand_in(root)]
        directions = [parse_direction(d) for d in specs]
        for direction in directions:  # the record names the files' folders, not this machine's paths
            for file in filter(None, (direction["file"], direction["test"])):
                report.place(Path(file).parent, "<data>")
        report.place(root, "<work>")
        report.figure("minutes", args.minutes)
        report.figure("threads", args.threads)
        report.figure("dtype", args.dtype or "auto")
        report.figure("rounds", args.rounds)
        report.figure("seed", args.seed)
        report.figure("directions_asked", len(directions))
        held = []  # every direction's files are read before anything trains: a mistake shows at once
        for k, direction in enumerate(directions):
            work = root / f"{k}-{direction['src']}-{direction['tgt']}"
            earlier = sorted(p.name for p in (*work.glob("ours*"), *work.glob("d2l*")))
            if earlier:
                parser.error(
                    f"--work {args.work}: {work.name} holds the runs of an earlier measurement "
                    f"({', '.join(earlier[:3])}, ...); name a new folder"
                )
            work.mkdir(exist_ok=True)
            try:
                held.append((work, *hold_out(direction, work, args.test_pairs)))
            except CommandError as err:
                parser.error(f"--direction {specs[k]}: {str(err).replace('add --reverse', 'add :reverse')}")
        kept = keep_earlier(out)  # once nothing else can stop the measurement
        if kept:
            print(f"the earlier report at {out} is kept as {kept.name}", flush=True)
            args.d2l_from = [str(kept) if Path(p).resolve() == out.resolve() else p for p in args.d2l_from]
        results = []
        for direction, (work, train, test, n_train, n_test) in zip(directions, held):
            name = f"{direction['src']}→{direction['tgt']} ({Path(direction['file']).name})"
            print(
                f"{name}: {n_train:,} pairs to train on, {n_test:,} held out; ours for {args.minutes:g} minutes ...",
                flush=True,
            )
            mine = ours(direction, train, test, work, args.minutes, args.threads, args.seed, dtype=args.dtype)
            made = f", {mine['steps']:,} steps" + (f", {mine['passes']:.1f} passes" if mine["passes"] else "")
            print(f"  ours: {mine['train_seconds']:.0f} s in all{made}; d2l for as long ...", flush=True)
            theirs = recorded_d2l(args.d2l_from, name, n_train, n_test, mine, args.threads)
            if theirs:
                then = theirs["recorded"]
                speed = then.get("tokens_per_second_now_over_then") or then["first_pass_then_over_now"]
                print(
                    f"  d2l: recorded in {then['file']} on {then['started']} "
                    f"(ours' first pass {speed:.2f} × as fast now as then)",
                    flush=True,
                )
            else:
                theirs = d2l(direction, train, test, work, mine["train_seconds"], args.threads, args.seed)
            rounds = [{"order": "ours, d2l", "ours": mine, "d2l": theirs}]
            for n in range(1, args.rounds):  # round n + 1
                later, seed = {"order": "ours, d2l" if n % 2 == 0 else "d2l, ours"}, args.seed + n
                for system in later["order"].split(", "):
                    print(f"  round {n + 1}: {system} (seed {seed}) ...", flush=True)
                    if system == "ours":
                        later["ours"] = ours(
                            direction,
                            train,
                            test,
                            work,
                            args.minutes,
                            args.threads,
                            seed,
                            {"chosen": WAYS["chosen"]},
                            dtype=args.dtype,
                        )
                    else:
                        later["d2l"] = d2l(direction, train, test, work, mine["train_seconds"], args.threads, seed)
                rounds.append(later)
            for r in rounds:
                r["bleu"] = {
                    "ours": r["ours"]["decodings"]["chosen"]["scores"]["bleu"],
                    "d2l": r["d2l"]["scores"]["bleu"],
                }
            means = {s: sum(r["bleu"][s] for r in rounds) / len(rounds) for s in ("ours", "d2l")}
            ratio = _ratio(means)
            results.append(
                {
                    "direction": name,
                    "file_pairs": n_train + n_test if not direction["test"] else n_train,
                    "train_file_pairs": n_train,
                    "test_pairs": n_test,
                    "ours": mine,
                    "d2l": theirs,
                    "bleu_ratio": ratio,
                    **(
                        {
                            "mean_bleu": means,
                            "rounds": [
                                {
                                    "order": r["order"],
                                    "bleu": r["bleu"],
                                    "bleu_ratio": _ratio(r["bleu"]),
                                    **({"ours": r["ours"], "d2l": r["d2l"]} if k else {}),
                                }
                                for k, r in enumerate(rounds)
                            ],
                        }
                        if len(rounds) > 1
                        else {}
                    ),
                }
            )
            table = {
                way: {m: round(d["scores"][m], 3) for m in ("bleu", "chrf", "brevity_penalty")}
                for way, d in mine["decodings"].items()
            }
            table["d2l (greedy)"] = {m: round(theirs["scores"][m], 3) for m in ("bleu", "chrf", "brevity_penalty")}
            if len(rounds) > 1:
                print(f"  round 1 ({rounds[0]['order']}):", flush=True)
            for way, row in table.items():
                print(
                    f"  {way:<28} BLEU {row['bleu']:5.1f}  chrF {row['chrf']:5.1f}  BP {row['brevity_penalty']:.3f}",
                    flush=True,
                )
            for k, r in enumerate(rounds[1:], start=2):
                print(f"  round {k} ({r['order']}): BLEU ours {r['bleu']['ours']:5.1f}, d2l {r['bleu']['d2l']:5.1f}")
            if len(rounds) > 1:
                print(f"  mean of {len(rounds)} rounds: BLEU ours {means['ours']:5.1f}, d2l {means['d2l']:5.1f}")
            report.target(f"{name}: BLEU ours / d2l", ratio, args.goal, higher_is_better=True)
            report.figure("directions", results)
            report.write(out)  # what is measured is kept, whatever happens to the next direction
    return report.finish(out)


if __name__ == "__main__":
    sys.exit(main())
