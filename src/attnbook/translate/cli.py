"""The parser and the entry point of ``attnbook-translate`` (and of ``python -m attnbook.translate``).

The options of the run, the budget and decoding are derived from their
declarations in :mod:`attnbook.translate.settings`; the options that say what
to do (which file, which folder, ``--resume``, ``--device``) are declared
here. :func:`main` turns every :class:`~attnbook.translate.console.CommandError`
into one line on standard error and exit status 2.

This module imports no PyTorch: :func:`main` sets ``OMP_WAIT_POLICY`` first,
which PyTorch reads once, when it is imported, and only then imports the
command it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .budget import Budget
from .console import PROGRAM, CommandError, Console
from .settings import Decoding, RunSettings, add_options

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of the three commands: ``train``, ``evaluate`` and ``translate``."""
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Train a Transformer translator on Tatoeba/Anki sentence pairs, score it with sacreBLEU, "
        "and translate with it.",
        epilog=f"Example: {PROGRAM} train --pairs cmn.txt --src en --tgt zh --out runs/en-zh --minutes 10",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _train_parser(commands)
    e = _run_folder_command(commands, "evaluate", "BLEU, chrF and the brevity penalty on test pairs")
    which = e.add_mutually_exclusive_group()
    which.add_argument(
        "--test", metavar="FILE", help="score every pair of FILE (the format of the training pairs, same column order)"
    )
    which.add_argument("--pairs", metavar="FILE", help="score the test split of FILE (default: of the run's file)")
    e.add_argument("--limit", type=int, metavar="N", help="score only the first N test pairs")
    e.add_argument("--show", type=int, default=0, metavar="N", help="also print N translations beside their references")
    e.add_argument("--json", metavar="FILE", help="also write the scores, decoding and counts to FILE as JSON")
    r = _run_folder_command(commands, "translate", "translate sentences given as arguments, or standard input")
    r.add_argument("text", nargs="*", metavar="TEXT", help="sentences (none: standard input, one sentence a line)")
    return parser


def _run_folder_command(commands: argparse._SubParsersAction, name: str, help: str) -> argparse.ArgumentParser:
    """A command that uses a trained run: its folder, and how to decode."""
    command = commands.add_parser(name, help=help)
    command.add_argument("dir", metavar="DIR", help="a run folder written by train")
    add_options(command.add_argument_group("decoding"), Decoding)
    return command


def _train_parser(commands: argparse._SubParsersAction) -> None:
    t = commands.add_parser(
        "train",
        help="train a translator on a pairs file",
        description="Train a translator. Files from manythings.org/anki have English in the first column: "
        "--src en --tgt de translates English into German; --src de --tgt en --reverse translates German into English.",
    )
    t.add_argument(
        "--pairs",
        metavar="FILE",
        help="Tatoeba/Anki tab-separated file (sentence<TAB>translation[<TAB>attribution]), a zip of one, "
        "or fra-eng to download d2l's English–French file",
    )
    t.add_argument("--src", metavar="LANG", help="the language to translate from (ISO code: en, fr, zh, ja, ...)")
    t.add_argument("--tgt", metavar="LANG", help="the language to translate into")
    t.add_argument("--reverse", action="store_true", help="the source sentences are in the file's second column")
    t.add_argument(
        "--out", metavar="DIR", required=True, help="the run folder: checkpoint, vocabularies, configuration, log"
    )
    add_options(t.add_argument_group("budget (default: 10 minutes); whichever ends first"), Budget)
    groups = {name: t.add_argument_group(name) for name in ("model", "vocabulary", "training")}
    add_options(t, RunSettings, groups)
    t.add_argument(
        "--resume", action="store_true", help="continue the interrupted run in --out exactly where it stopped"
    )
    t.add_argument(
        "--device",
        default="auto",
        help="auto (a GPU if there is one), cpu, cuda (under torchrun: each process its own GPU)",
    )
    t.add_argument(
        "--checkpoint-minutes", type=float, default=5.0, metavar="M", help="also save every M minutes (default 5)"
    )
    t.add_argument("--log-every", type=int, default=50, metavar="N", help="log the loss every N steps (default 50)")


def _command(name: str):
    """The function of a command, imported only when it runs (it imports PyTorch)."""
    if name == "train":
        from .cmd_train import cmd_train

        return cmd_train
    if name == "evaluate":
        from .cmd_evaluate import cmd_evaluate

        return cmd_evaluate
    from .cmd_translate import cmd_translate

    return cmd_translate


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 fine, 2 bad input, 130 interrupted)."""
    # PyTorch's CPU threads spin while they wait for each other; on a busy machine a thread that
    # spins while its partner is descheduled wastes the core: a training step took six times
    # longer with two threads on a loaded two-core machine. Passive waiting costs little when the
    # machine is idle. It must be set before PyTorch is imported.
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = build_parser()
    # Sentences may stand after the options too (translate DIR --beam 1 "Hello."): argparse
    # leaves such a late positional unrecognized, so it is given back to TEXT here.
    args, extra = parser.parse_known_args(argv)
    if extra and args.command == "translate" and not any(e.startswith("-") and e != "-" for e in extra):
        args.text = list(args.text) + extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    console = Console()
    try:
        return _command(args.command)(args, console)
    except CommandError as err:
        console.error(str(err))
        return 2
    except KeyboardInterrupt:
        console.clear()
        print(f"{PROGRAM}: interrupted", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:  # `... | head`: the reader left
        sys.stderr.close()
        return 0
