"""``attnbook-translate evaluate``: translate the held-out test pairs and score them with sacreBLEU.

The test pairs are those the run held out when it was trained (the file is
read again and split the same way). The table gives BLEU with mixed case,
BLEU in lower case and chrF, each with sacreBLEU's signature, so that the
numbers can be compared with anyone's; BLEU's tokenizer suits the target
language (:func:`attnbook.metrics.bleu_tokenizer`).
"""

from __future__ import annotations

import argparse
import time

import sacrebleu

from ..metrics import bleu_tokenizer
from .cluster import pick_device
from .console import CommandError, Console
from .decoding import translate_tokens
from .model import MAX_POSITIONS
from .run_folder import open_run
from .run_pairs import reread_run_pairs
from .settings import Decoding, from_args
from .truecase import to_text

__all__ = ["cmd_evaluate", "sacrebleu_scores"]


def sacrebleu_scores(hypotheses: list[str], references: list[str], lang: str) -> list[tuple[str, float, str]]:
    """``(metric, score, signature)`` for BLEU, BLEU in lower case and chrF of detokenized text in ``lang``."""
    tokenize = bleu_tokenizer(lang)
    metrics = [
        ("BLEU", sacrebleu.metrics.BLEU(tokenize=tokenize)),
        ("BLEU, lowercase", sacrebleu.metrics.BLEU(tokenize=tokenize, lowercase=True)),
        ("chrF", sacrebleu.metrics.CHRF()),
    ]
    return [(name, m.corpus_score(hypotheses, [references]).score, str(m.get_signature())) for name, m in metrics]


def cmd_evaluate(args: argparse.Namespace, console: Console) -> int:
    """Score the run in ``args.dir`` on its test pairs; print the table (and ``--show`` examples)."""
    decoding = from_args(Decoding, args)
    if args.limit is not None and args.limit < 1:
        raise CommandError(f"--limit must be at least 1, got {args.limit}")
    run = open_run(args.dir, console, pick_device(decoding.device))
    config = run.config
    splits, source = reread_run_pairs(config, console, args.pairs)
    test = splits.test[: args.limit] if args.limit else splits.test
    if not test:
        raise CommandError(
            f"the test split of {args.pairs or config['pairs']['path']} is empty: "
            "the file holds too few pairs to hold some out"
        )
    usable = [p for p in test if 0 < len(p.src_tok) <= MAX_POSITIONS]
    if len(usable) < len(test):
        console.note(f"{len(test) - len(usable)} test sentences longer than {MAX_POSITIONS} tokens are left out")
    start = time.perf_counter()
    outputs = translate_tokens(
        run.model, [p.src_tokens for p in usable], run.src_vocab, run.tgt_vocab, decoding, console
    )
    seconds = time.perf_counter() - start
    hypotheses = [to_text(t, config["tgt_lang"], run.truecase) for t in outputs]
    scores = sacrebleu_scores(hypotheses, [p.tgt for p in usable], config["tgt_lang"])
    how = "greedy" if decoding.beam == 1 else f"beam {decoding.beam}, α {decoding.alpha:g}"
    console.say(
        f"{config['src_lang']} → {config['tgt_lang']}, test split of {source.name}: "
        f"{len(usable):,} sentences, {how}, {seconds:.1f} s"
    )
    console.say(f"{'metric':<16}{'score':>7}  sacreBLEU signature")
    for metric, score, signature in scores:
        console.say(f"{metric:<16}{score:>7.1f}  {signature}")
    for p, hypothesis in list(zip(usable, hypotheses))[: args.show]:
        console.say(f"\n  {p.src}\n→ {hypothesis}\n= {p.tgt}")
    return 0
