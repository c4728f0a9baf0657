"""``attnbook-translate evaluate``: translate test pairs and score them with sacreBLEU.

By default the test pairs are those the run held out when it was trained (the
file is read again and split the same way); ``--pairs FILE`` scores the test
split of another file, and ``--test FILE`` every pair of a file of one's own,
in the format and column order of the training pairs. The table gives BLEU
with mixed case, BLEU in lower case and chrF, each with sacreBLEU's
signature, so that the numbers can be compared with anyone's, and BLEU's
brevity penalty, which says whether the translations end where the
references do; BLEU's tokenizer suits the target language
(:func:`attnbook.metrics.bleu_tokenizer`). ``--json FILE`` writes the same
figures for a script to read.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from pathlib import Path

from ..data import Pair
from ..files import write_json
from ..metrics import text_scores
from .cluster import pick_device
from .console import CommandError, Console
from .decoding import translate_tokens
from .model import MAX_POSITIONS
from .run_folder import Run, open_run
from .run_pairs import read_test_pairs, reread_run_pairs
from .settings import Decoding, from_args

__all__ = ["cmd_evaluate"]


def cmd_evaluate(args: argparse.Namespace, console: Console) -> int:
    """Score the run in ``args.dir`` on test pairs; print the table (and ``--show`` examples)."""
    if args.limit is not None and args.limit < 1:
        raise CommandError(f"--limit must be at least 1, got {args.limit}")
    run = open_run(args.dir, console, pick_device(from_args(Decoding, args).device))
    decoding = from_args(Decoding, args, run.decoding)
    test, what = _test_pairs(args, run, console)
    test = test[: args.limit] if args.limit else test
    sources = [run.tokens.source(p.src) for p in test]
    usable = [(p, s) for p, s in zip(test, sources) if 0 < len(s) <= MAX_POSITIONS]
    if len(usable) < len(test):
        console.note(f"{len(test) - len(usable)} test sentences longer than {MAX_POSITIONS} tokens are left out")
    start = time.perf_counter()
    outputs = translate_tokens(run.model, [s for _, s in usable], run.src_vocab, run.tgt_vocab, decoding, console)
    seconds = time.perf_counter() - start
    hypotheses = [run.tokens.text(t) for t in outputs]
    references = [p.tgt for p, _ in usable]
    scores = text_scores(hypotheses, references, run.config["tgt_lang"])
    how = "greedy" if decoding.beam_size == 1 else f"beam {decoding.beam_size}, α {decoding.alpha:g}"
    console.say(
        f"{run.config['src_lang']} → {run.config['tgt_lang']}, {what}: {len(usable):,} sentences, {how}, "
        f"at most {decoding.max_len_a:g} × source + {decoding.max_len_b} tokens, {seconds:.1f} s"
    )
    console.say(f"{'metric':<18}{'score':>7}  sacreBLEU signature")
    for metric, score in (("BLEU", scores.bleu), ("BLEU, lowercase", scores.bleu_lowercase), ("chrF", scores.chrf)):
        console.say(f"{metric:<18}{score:>7.1f}  {scores.signatures[metric]}")
    console.say(
        f"{'brevity penalty':<18}{scores.brevity_penalty:>7.3f}  translations {scores.hypothesis_length:,} tokens, "
        f"references {scores.reference_length:,} (ratio {scores.length_ratio:.3f})"
    )
    for (p, _), hypothesis in list(zip(usable, hypotheses))[: args.show]:
        console.say(f"\n  {p.src}\n→ {hypothesis}\n= {p.tgt}")
    if args.json:
        _write_json(Path(args.json), run, what, len(usable), decoding, scores, seconds)
    return 0


def _test_pairs(args: argparse.Namespace, run: Run, console: Console) -> tuple[list[Pair], str]:
    """The pairs to score, and how to name them: every pair of ``--test``, else a test split."""
    config = run.config
    if args.test:
        pairs, name = read_test_pairs(args.test, config)
        return pairs, f"every pair of {name}"
    if not config["settings"]["test_split"]:
        raise CommandError(
            "the run trained on every pair of its file but the validation pairs (--no-test-split): "
            "it has no test split; score a file of your own with --test FILE"
        )
    splits, source = reread_run_pairs(config, console, args.pairs)
    if not splits.test:
        raise CommandError(
            f"the test split of {args.pairs or config['pairs']['path']} is empty: "
            "the file holds too few pairs to hold some out (score a file of your own with --test FILE)"
        )
    return splits.test, f"test split of {source.name}"


def _write_json(path: Path, run: Run, what: str, n: int, decoding: Decoding, scores, seconds: float) -> None:
    result = {
        "run": str(run.folder),
        "src_lang": run.config["src_lang"],
        "tgt_lang": run.config["tgt_lang"],
        "pairs": what,
        "sentences": n,
        "decoding": {k: v for k, v in asdict(decoding).items() if k != "device"},
        "scores": asdict(scores),
        "seconds": seconds,
    }
    try:
        write_json(path, result)  # whole or not at all, as every JSON file of a run
    except OSError as err:
        raise CommandError(f"--json {path}: cannot write it ({err.strerror or err})") from None
