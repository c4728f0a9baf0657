"""``attnbook-translate translate``: translate sentences given as arguments, or standard input line by line.

Arguments and piped input are checked whole before anything is translated
(a sentence that cannot be read stops the command before any output), and
blank input lines stay blank, so the output lines up with the input. A
person typing at a terminal gets an answer per line instead, and a bad line
is not the end. With ``--tokens words``, words the model has never seen are
read as ``<unk>``, with a note that names them; subwords never are. The
decoding is the one chosen when the run was trained (``decoding.json``),
unless ``--beam-size``, ``--alpha`` or ``--max-len-a``/``--max-len-b`` say otherwise.
"""

from __future__ import annotations

import argparse
import sys

from .cluster import pick_device
from .console import CommandError, Console
from .decoding import translate_tokens
from .model import MAX_POSITIONS
from .run_folder import Run, open_run
from .settings import Decoding, from_args

__all__ = ["cmd_translate"]


class Translator:
    """A run and a way of decoding: sentences in, translations out."""

    def __init__(self, run: Run, decoding: Decoding, console: Console) -> None:
        self.run, self.decoding, self.console = run, decoding, console
        self.src, self.tgt = run.config["src_lang"], run.config["tgt_lang"]

    def prepare(self, text: str, where: str) -> list[str]:
        """The tokens of one sentence; ``where`` names it in an error ("argument 2", "line 7")."""
        tokens = self.run.tokens.source(text)
        if not tokens:
            raise CommandError(f"{where} is empty: nothing to translate")
        if len(tokens) > MAX_POSITIONS:
            raise CommandError(
                f"{where} has {len(tokens)} tokens; this model reads at most {MAX_POSITIONS} "
                "(its positional table): split the sentence"
            )
        return tokens

    def note_unknown(self, tokens: list[str], where: str) -> None:
        """A note naming the words of a sentence that the model has never seen."""
        unknown = self.run.tokens.unknown(tokens, self.run.src_vocab)
        if unknown:
            shown = ", ".join(repr(t) for t in unknown[:8]) + (" ..." if len(unknown) > 8 else "")
            self.console.note(f"{where}: not in the {self.src} vocabulary, read as <unk>: {shown}")

    def __call__(self, texts: list[tuple[str, str]], keep_blank: bool = True) -> list[str]:
        """Translations of ``(text, where)``; with ``keep_blank``, a blank text gives a blank line."""
        work = [(i, where) for i, (text, where) in enumerate(texts) if text.strip() or not keep_blank]
        tokens = [(i, self.prepare(texts[i][0], where)) for i, where in work]  # all checked before any is translated
        for (_, where), (_, sentence) in zip(work, tokens):
            self.note_unknown(sentence, where)
        outputs = ["" for _ in texts]
        if tokens:
            run = self.run
            translated = translate_tokens(
                run.model, [t for _, t in tokens], run.src_vocab, run.tgt_vocab, self.decoding
            )
            for (i, _), out in zip(tokens, translated):
                outputs[i] = run.tokens.text(out)
        return outputs


def cmd_translate(args: argparse.Namespace, console: Console) -> int:
    """Translate ``args.text``, or standard input; print one translation a line."""
    run = open_run(args.dir, console, pick_device(from_args(Decoding, args).device))
    translate = Translator(run, from_args(Decoding, args, run.decoding), console)
    if args.text:
        for line in translate([(text, f"argument {k + 1}") for k, text in enumerate(args.text)], keep_blank=False):
            print(line, flush=True)
        return 0
    if sys.stdin is None:
        raise CommandError("nothing to translate: give sentences as arguments, or on standard input")
    if sys.stdin.isatty():
        return _answer_each_line(translate)
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    if not any(line.strip() for line in lines):
        raise CommandError("standard input holds no sentence to translate")
    for line in translate([(text, f"line {k + 1} of standard input") for k, text in enumerate(lines)]):
        print(line)
    sys.stdout.flush()
    return 0


def _answer_each_line(translate: Translator) -> int:
    """A person typing: one answer per line, and a bad line is not the end (exit status 2 at the end)."""
    status = 0
    for number, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            print(flush=True)
            continue
        try:
            print(translate([(line.rstrip("\n"), f"line {number}")])[0], flush=True)
        except CommandError as err:
            translate.console.error(str(err))
            status = 2
    return status
