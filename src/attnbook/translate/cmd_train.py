"""``attnbook-translate train``: a new run from a pairs file, or ``--resume`` of a run that stopped.

The budget is read from the command line once (:func:`read_budget`), or, when
a run resumes without one, from the run folder, and handed to the run as the
object :class:`~attnbook.translate.budget.Budget` (the time in seconds).
A new run reads and splits the pairs, builds the vocabularies from the
training pairs, fits the settings to the device (a GPU: :func:`fit_to_device`)
and, with a time budget on a CPU, to the passes over the training pairs that
the speed it measures allows (:func:`fit_to_pace`), and writes the run folder's
configuration, what was measured and chosen included, before the first
step; a resumed run reads all of that back, checks that the command line
agrees with it, and continues from its checkpoint's training state. Either way
:func:`~attnbook.translate.train.train_run` trains it within its budget.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, replace
from pathlib import Path

from ..data import BucketBatchSampler, Pair, PairDataset, Vocab
from ..files import write_json
from ..train import read_checkpoint
from .budget import Budget, Where
from .choose import choose_decoding, save_decoding
from .cluster import Cluster
from .console import CommandError, Console
from .model import check_model_settings, fit_to_device, model_config
from .run_folder import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    RUN_FORMAT,
    SRC_VOCAB_FILE,
    TGT_VOCAB_FILE,
    one_line,
    open_run,
    read_config,
    read_vocabularies,
)
from .run_pairs import (
    SPLIT,
    held_out_fraction,
    languages,
    length_filter,
    parse_language,
    read_pairs,
    reread_run_pairs,
    split_run_pairs,
)
from .settings import (
    FEW_PASSES,
    FEW_PASSES_FROM,
    RunSettings,
    few_passes_recipe,
    flag,
    from_args,
    given,
    option_name,
)
from .tokens import RunTokens
from .train import PreparedRun, probe_seconds_per_step, train_run

__all__ = ["cmd_train", "read_budget"]


def cmd_train(args: argparse.Namespace, console: Console) -> int:
    """Train a new run into ``--out``, or resume the one there; return the exit status."""
    cluster = Cluster.start(args.device)
    console.active = cluster.is_first
    out = Path(args.out).expanduser()
    try:
        if args.resume:
            run = resume_run(args, out, console)
        else:
            run = new_run(args, out, cluster, console, read_budget(args, None, console))
        run.config["budget"] = run.budget.record()
        # Every process has checked --out (a new run refuses a folder that holds one) before the first writes into it.
        cluster.barrier()
        if cluster.is_first:
            _write_run_folder(run)
        status = train_run(run, cluster, console, checkpoint_minutes=args.checkpoint_minutes, log_every=args.log_every)
        if status == 0 and cluster.is_first and run.valid_pairs:
            _choose_decoding(run, cluster, console)
        return status
    finally:
        cluster.stop()


def new_run(args: argparse.Namespace, out: Path, cluster: Cluster, console: Console, budget: Budget) -> PreparedRun:
    """Read and split the pairs, build the vocabularies, fit the recipe to the device and the passes: a new run.

    With a time budget on a CPU, the recipe follows the passes that the measured speed allows
    (:func:`fit_to_pace`).
    """
    if (out / CHECKPOINT_FILE).exists() or (out / CONFIG_FILE).exists():
        raise CommandError(f"{str(out)!r} already holds a run: continue it with --resume, or choose another --out")
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {str(out)!r} is a file; give a folder")
    if args.pairs is None:
        raise CommandError("train needs --pairs FILE (a Tatoeba/Anki tab-separated file) or --pairs fra-eng")
    src, tgt, reverse = languages(args)
    settings = from_args(RunSettings, args)
    check_model_settings(settings)
    if settings.bpe_dropout and settings.tokens != "subwords":
        raise CommandError(f"--bpe-dropout needs --tokens subwords: {settings.tokens} have no merges to leave out")
    downloads = args.pairs == "fra-eng"
    if downloads and cluster.local_rank != 0:
        cluster.barrier()  # the first process of each machine downloads; the others wait for it
    pairs, source = read_pairs(args.pairs, src, tgt, reverse)
    if downloads and cluster.local_rank == 0:
        cluster.barrier()
    held_out = held_out_fraction(len(pairs))
    splits = split_run_pairs(pairs, held_out, settings.test_split)
    tokens = RunTokens.learn(splits.train, settings, src, tgt)
    train_pairs = length_filter(tokens.pairs(splits.train), settings.max_length, "training", console)
    valid_pairs = length_filter(tokens.pairs(splits.valid), settings.max_length, "validation", console)
    if not train_pairs:
        raise CommandError(
            f"no training pairs left ({len(pairs)} pairs read): the file is too small, "
            "or every pair is longer than --max-length"
        )
    src_vocab, tgt_vocab = tokens.vocabularies(train_pairs, settings)
    chosen = set(given(RunSettings, args))
    settings, fitted = fit_to_device(settings, chosen, cluster.device, len(tgt_vocab))
    recipe, spent = None, 0.0
    if budget.seconds and cluster.device.type == "cpu" and settings.arch == "transformer":
        start = time.monotonic()
        settings, recipe = fit_to_pace(settings, chosen, budget, train_pairs, src_vocab, tgt_vocab, cluster)
        spent = time.monotonic() - start if recipe else 0.0
    config = {
        "format": RUN_FORMAT,
        "src_lang": src,
        "tgt_lang": tgt,
        "reverse": reverse,
        "pairs": asdict(source),
        "split": SPLIT,
        "held_out": held_out,
        "split_sizes": {k: len(v) for k, v in splits._asdict().items()},
        "arch": settings.arch,
        "settings": asdict(settings),
        "tokens": tokens.config(),
        "model": model_config(settings, len(src_vocab), len(tgt_vocab)),
        "budget": None,
        **({"recipe": {**recipe, "probe_seconds": spent}} if recipe else {}),
    }
    skipped = f", skipped {source.skipped:,} blank or malformed lines" if source.skipped else ""
    console.say(f"read {source.n_pairs:,} pairs ({src} → {tgt}) from {source.name}{skipped}")
    test = f"{len(splits.test):,} test pairs" if settings.test_split else "no test pairs (--no-test-split)"
    console.say(
        f"split by checksum: {len(splits.train):,} training, {len(splits.valid):,} validation, {test}; "
        f"{tokens.describe()}: {len(src_vocab):,} {src} and {len(tgt_vocab):,} {tgt} tokens"
    )
    for line in fitted:
        console.say(line)
    if recipe:
        console.say(describe_recipe(recipe, budget))
    # the probe's seconds count in the time budget, up to half of it: a budget shorter than the probe still trains
    charged = min(spent, budget.seconds / 2) if recipe else 0.0
    return PreparedRun(
        config, settings, src_vocab, tgt_vocab, train_pairs, valid_pairs, out, budget, tokens=tokens, spent=charged
    )


#: The share of a time budget that timing the model's steps may take at most (a budget of seconds, say in a test
#: or a first try, is then not spent measuring speed; a budget of minutes never reaches it).
PROBE_SHARE = 0.25


def fit_to_pace(
    settings: RunSettings,
    chosen: set[str],
    budget: Budget,
    train_pairs: list[Pair],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    cluster: Cluster,
) -> tuple[RunSettings, dict | None]:
    """The settings for the passes the budget allows at the speed measured here, and what was measured and chosen.

    A few training steps of the model the settings make are timed
    (:func:`~attnbook.translate.train.probe_seconds_per_step`, on the first
    process's clock for every process, for at most :data:`PROBE_SHARE` of a
    time budget); the budget's plan at that speed
    (:meth:`~attnbook.translate.budget.Budget.plan`) says how many passes it
    allows, and from :data:`FEW_PASSES_FROM` up to :data:`FEW_PASSES` passes the
    settings that ``chosen`` (the command line's) does not name follow
    :func:`few_passes_recipe`. ``None`` when there are too few pairs for a batch
    (training then says so).
    """
    lengths = PairDataset(train_pairs, src_vocab, tgt_vocab).lengths()
    sampler = BucketBatchSampler(lengths, batch_tokens=settings.batch_tokens, seed=settings.seed)
    steps_per_epoch = len(sampler.batches(0)) // cluster.world
    if steps_per_epoch < 1:
        return settings, None
    config = model_config(settings, len(src_vocab), len(tgt_vocab))
    limit = budget.seconds * PROBE_SHARE if budget.seconds else None
    per_step = probe_seconds_per_step(settings, config, train_pairs, src_vocab, tgt_vocab, cluster.device, limit=limit)
    (per_step,) = cluster.all_sum([per_step if cluster.is_first else 0.0])
    passes = budget.plan(Where(steps_per_epoch), per_step).epochs_allowed
    changes = few_passes_recipe(passes, chosen)
    recipe = {
        "seconds_per_step": per_step,
        "steps_per_epoch": steps_per_epoch,
        "passes": passes,
        "few_passes": FEW_PASSES_FROM <= passes < FEW_PASSES,
        "changed": changes,
        "kept": sorted(set(few_passes_recipe(passes)) - set(changes)),
    }
    return replace(settings, **changes), recipe


def describe_recipe(recipe: dict, budget: Budget) -> str:
    """The line that says what the measured speed allows and which recipe it chose."""
    passes = f"about {recipe['passes']:,.1f} passes over the training pairs"
    speed = f"at {recipe['seconds_per_step']:.2f} s a step of this model, the budget ({budget}) allows {passes}"
    if not recipe["few_passes"]:
        band = f"{FEW_PASSES_FROM:g} to {FEW_PASSES:g}"
        return f"{speed}: the default recipe (the few-passes one is for {band} passes)"
    changed = ", ".join(f"{flag(k)} {v}" for k, v in recipe["changed"].items()) or "nothing left to change"
    kept = f"; kept as given: {', '.join(flag(k) for k in recipe['kept'])}" if recipe["kept"] else ""
    return f"{speed}, {FEW_PASSES_FROM:g} to {FEW_PASSES:g}: the few-passes recipe, {changed}{kept}"


def resume_run(args: argparse.Namespace, out: Path, console: Console) -> PreparedRun:
    """Read back the run in ``out`` and its checkpoint's training state: a run ready to continue."""
    config = read_config(out)
    _check_resume(args, config)
    checkpoint = out / CHECKPOINT_FILE
    if not checkpoint.is_file():
        raise CommandError(
            f"{str(out)!r} has no checkpoint to resume from: training stopped before its first save; "
            "start it again without --resume"
        )
    src_vocab, tgt_vocab = read_vocabularies(out)
    settings = RunSettings(**config["settings"])
    splits, _ = reread_run_pairs(config, console)
    tokens = RunTokens.load(out, config, console)
    train_pairs = length_filter(tokens.pairs(splits.train), settings.max_length, "training", console)
    valid_pairs = length_filter(tokens.pairs(splits.valid), settings.max_length, "validation", console)
    try:
        state = read_checkpoint(checkpoint)["extra"].get("train_state")
    except Exception as err:  # CheckpointMismatch and unreadable files
        raise CommandError(f"cannot resume from {checkpoint}: {one_line(err)}") from None
    if not isinstance(state, dict):
        raise CommandError(f"{checkpoint} holds no training state to resume from")
    budget = read_budget(args, config.get("budget"), console)
    return PreparedRun(
        config, settings, src_vocab, tgt_vocab, train_pairs, valid_pairs, out, budget, tokens=tokens, state=state
    )


def _check_resume(args: argparse.Namespace, config: dict) -> None:
    """Raise a :class:`CommandError` unless what the command line says agrees with the run being resumed."""
    stored = config["settings"]
    for name, value in given(RunSettings, args).items():
        if value != stored.get(name):
            raise CommandError(
                f"{option_name(RunSettings, name)} {value} differs from the run being resumed ({stored.get(name)}): "
                "resume with the same settings, or train into a new --out"
            )
    if args.pairs is not None:
        spec = config["pairs"]["path"]
        if args.pairs != spec and (args.pairs == "fra-eng" or Path(args.pairs).expanduser().resolve() != Path(spec)):
            raise CommandError(f"--pairs {args.pairs} is not the file of the run being resumed ({spec})")
    for option, key in (("--src", "src_lang"), ("--tgt", "tgt_lang")):
        value = getattr(args, option[2:])
        if value is not None and parse_language(value, option) != config[key]:
            raise CommandError(f"{option} {value} differs from the run being resumed ({config[key]})")
    if config.get("split") != SPLIT:
        raise CommandError(
            "the run was split by an earlier version of this program, so its training pairs would differ now: "
            "it cannot be resumed exactly; train it again into a new --out"
        )


def _choose_decoding(prepared: PreparedRun, cluster: Cluster, console: Console) -> None:
    """Choose how to decode on the validation pairs, with the translator's weights; write ``decoding.json``."""
    run = open_run(prepared.folder, console, cluster.device)
    choice = choose_decoding(run.model, prepared.valid_pairs, run.src_vocab, run.tgt_vocab, run.tokens, console)
    save_decoding(prepared.folder, choice)


def read_budget(args: argparse.Namespace, stored: dict | None, console: Console) -> Budget:
    """The budget the command line gives, else the one the run folder records (on resuming), else 10 minutes."""
    if given(Budget, args) or not stored:
        budget = from_args(Budget, args)
    else:
        budget = Budget.from_record(stored)
    if not (budget.seconds or budget.epochs or budget.steps):
        console.say("budget: 10 minutes (the default; say --minutes M or --epochs E)")
        budget = Budget(seconds=10 * 60.0)
    return budget


def _write_run_folder(run: PreparedRun) -> None:
    """The configuration, the vocabularies, and the subword models or the spelling table (first process only)."""
    out = run.folder
    out.mkdir(parents=True, exist_ok=True)
    run.src_vocab.save(out / SRC_VOCAB_FILE)
    run.tgt_vocab.save(out / TGT_VOCAB_FILE)
    run.tokens.save(out)
    write_json(out / CONFIG_FILE, run.config)
