"""The pairs of a run: which file and languages, read and checked, split, and the long ones left out.

``--pairs`` names a Tatoeba/Anki file, a zip as manythings.org publishes it,
or ``fra-eng`` (d2l's English–French file, downloaded once). The file is read
with :func:`attnbook.data.read_anki_pairs`, its columns are checked against
the languages given (:func:`attnbook.data.check_columns`), and the pairs are
split with :func:`attnbook.data.split_by_checksum`, holding out about
``HELD_OUT_PAIRS`` pairs each for validation and test. ``evaluate`` and
``--resume`` read the file again and get the same split, since it depends on
the sentences alone. ``evaluate --test FILE`` reads every pair of a file of
the same format (:func:`read_test_pairs`), where a line that is not a pair is
an error, not a line to skip.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from ..data import (
    ChecksumError,
    DownloadError,
    Pair,
    Splits,
    check_columns,
    download_fra_eng,
    language,
    pairs_file,
    read_anki_pairs,
    sha1_of,
    split_by_checksum,
)
from .console import PROGRAM, CommandError, Console

__all__ = [
    "SPLIT",
    "PairsSource",
    "languages",
    "read_pairs",
    "held_out_fraction",
    "split_run_pairs",
    "length_filter",
    "reread_run_pairs",
    "read_test_pairs",
]

#: What the split holds out (see :func:`held_out_fraction`).
HELD_OUT_PAIRS, HELD_OUT_MIN, HELD_OUT_MAX = 2000, 0.02, 0.1
#: How the pairs are split, as recorded in a run's configuration.
SPLIT = "checksum of sentence groups"


@dataclass
class PairsSource:
    """Where the pairs came from, as recorded in the run's configuration."""

    path: str  # absolute path of the file, or "fra-eng"
    sha1: str
    n_pairs: int
    skipped: int

    @property
    def name(self) -> str:
        return self.path if self.path == "fra-eng" else Path(self.path).name


def parse_language(code: str, option: str) -> str:
    """A language code of the command line, as the tokenizer knows it (``eng`` → ``en``)."""
    try:
        return language(code)
    except (ValueError, TypeError) as err:
        raise CommandError(f"{option}: {err}") from None


def languages(args: argparse.Namespace) -> tuple[str, str, bool]:
    """``(source language, target language, reverse)`` from ``--src``, ``--tgt`` and ``--reverse``.

    For ``fra-eng`` either language may be left out: the other one is the rest of English and French.
    """
    if args.pairs != "fra-eng":
        if not args.src or not args.tgt:
            raise CommandError(
                "say which languages the pairs are in: --src LANG --tgt LANG (such as --src en --tgt zh)"
            )
        return parse_language(args.src, "--src"), parse_language(args.tgt, "--tgt"), bool(args.reverse)
    src = parse_language(args.src, "--src") if args.src else None
    tgt = parse_language(args.tgt, "--tgt") if args.tgt else None
    if src is None and tgt is None:
        src, tgt = ("fr", "en") if args.reverse else ("en", "fr")
    other = {"en": "fr", "fr": "en"}
    src = src or other.get(tgt or "", "en")
    tgt = tgt or other.get(src, "fr")
    if {src, tgt} != {"en", "fr"}:
        raise CommandError(f"fra-eng holds English and French sentences, not {src} → {tgt}")
    return src, tgt, src == "fr"  # its first column is English


def _resolve(spec: str) -> Path:
    """The text file that ``--pairs spec`` means: d2l's fra.txt (downloaded once), a file, or the file in a zip."""
    if spec == "fra-eng":
        try:
            return download_fra_eng()
        except (DownloadError, ChecksumError, ValueError, OSError) as err:
            raise CommandError(f"could not get fra-eng: {err}") from None
    try:
        return pairs_file(spec)
    except FileNotFoundError:
        raise CommandError(
            f"no pairs file at {spec!r} (give a Tatoeba/Anki tab-separated file, such as fra.txt, or fra-eng)"
        ) from None
    except IsADirectoryError:
        raise CommandError(f"{spec!r} is a folder; give the tab-separated file inside it (such as fra.txt)") from None
    except (ValueError, OSError) as err:
        raise CommandError(f"cannot use {spec!r}: {err}") from None


def read_pairs(spec: str, src: str, tgt: str, reverse: bool, check: bool = True) -> tuple[list[Pair], PairsSource]:
    """Read the pairs to translate from ``src`` into ``tgt``; return ``(pairs, PairsSource)``.

    The file's first column is in ``src`` unless ``reverse``: then the second
    column is the source. With ``check``, the columns must look like the
    languages they are said to be in.
    """
    path = _resolve(spec)
    first, second = (tgt, src) if reverse else (src, tgt)
    try:
        pairs = read_anki_pairs(path, first, second, reverse=reverse)
    except (ValueError, OSError) as err:
        raise CommandError(f"cannot read pairs from {spec!r}: {err}") from None
    if len(pairs.malformed) > max(10, len(pairs) // 10):
        raise CommandError(
            f"{spec!r} is not a tab-separated pairs file: {len(pairs.malformed)} of its {pairs.n_lines} lines are "
            f"not 'sentence<TAB>translation' (first at line {pairs.malformed[0]})"
        )
    if check:
        sample = pairs.pairs[:: max(1, len(pairs) // 2000)]
        sources, targets = [p.src for p in sample], [p.tgt for p in sample]
        fix = (
            "drop --reverse (or swap --src and --tgt)"
            if reverse
            else "add --reverse to translate from the second column into the first"
        )
        try:
            check_columns(*((targets, sources) if reverse else (sources, targets)), first, second)
        except ValueError as err:
            raise CommandError(f"{err}; {fix}") from None
    shown = "fra-eng" if spec == "fra-eng" else str(Path(spec).expanduser().resolve())  # a zip, not what it unpacked to
    return pairs.pairs, PairsSource(shown, sha1_of(path), len(pairs), pairs.skipped)


def held_out_fraction(n_pairs: int) -> float:
    """The share of pairs held out for validation, and the same share for the test.

    About ``HELD_OUT_PAIRS`` pairs each, at least 2% and at most 10% of the pairs.
    """
    return min(HELD_OUT_MAX, max(HELD_OUT_MIN, HELD_OUT_PAIRS / max(1, n_pairs)))


def split_run_pairs(pairs: list[Pair], held_out: float, test: bool = True) -> Splits:
    """The run's training, validation and test pairs: ``held_out`` of them each for validation and test.

    ``test=False`` (``--no-test-split``) trains on the test split's pairs too; the
    validation pairs are the same either way.
    """
    splits = split_by_checksum(pairs, (1 - 2 * held_out, held_out, held_out))
    if test:
        return splits
    valid = {id(p) for p in splits.valid}
    return Splits([p for p in pairs if id(p) not in valid], splits.valid, [])


def length_filter(pairs: list[Pair], max_len: int, what: str, console: Console) -> list[Pair]:
    """The pairs of at most ``max_len`` tokens on each side (and some source); say how many were left out."""
    kept = [p for p in pairs if 0 < len(p.src_tok) <= max_len and len(p.tgt_tok) <= max_len]
    if len(kept) < len(pairs):
        console.say(f"left out {len(pairs) - len(kept):,} {what} pairs longer than {max_len} tokens (--max-length)")
    return kept


def reread_run_pairs(config: dict, console: Console, spec: str | None = None) -> tuple[Splits, PairsSource]:
    """The pairs of a run's data file (or of ``spec``), read and split as when the run was trained."""
    spec = spec or config["pairs"]["path"]
    pairs, source = read_pairs(spec, config["src_lang"], config["tgt_lang"], config["reverse"], check=False)
    if source.sha1 != config["pairs"]["sha1"]:
        console.note(f"{spec} is not the file this model was trained on: its test pairs may include training sentences")
    elif config.get("split") != SPLIT:
        console.note(
            f"the run was split by an earlier version of {PROGRAM}: its test pairs may include training sentences"
        )
    return split_run_pairs(pairs, config["held_out"], config["settings"]["test_split"]), source


def read_test_pairs(spec: str, config: dict) -> tuple[list[Pair], str]:
    """Every pair of a test file, in the run's languages and column order; ``(pairs, the file's name)``.

    Blank lines are skipped; any other line that is not ``sentence<TAB>translation[<TAB>attribution]``
    is an error that names it.
    """
    path = _resolve(spec)
    src, tgt, reverse = config["src_lang"], config["tgt_lang"], config["reverse"]
    first, second = (tgt, src) if reverse else (src, tgt)
    try:
        pairs = read_anki_pairs(path, first, second, reverse=reverse)
    except (ValueError, OSError) as err:
        raise CommandError(f"--test {spec}: {err}") from None
    if pairs.malformed:
        more = f" (and {len(pairs.malformed) - 1} more)" if len(pairs.malformed) > 1 else ""
        raise CommandError(
            f"--test {spec}: line {pairs.malformed[0]}{more} is not 'sentence<TAB>translation[<TAB>attribution]' "
            "in UTF-8, with both sentences non-empty"
        )
    if len(pairs) >= 20:
        sample = pairs.pairs[:: max(1, len(pairs) // 2000)]
        sources, targets = [p.src for p in sample], [p.tgt for p in sample]
        try:
            check_columns(*((targets, sources) if reverse else (sources, targets)), first, second)
        except ValueError as err:
            order = "second column, then first" if reverse else "first column, then second"
            raise CommandError(f"--test {spec}: {err}; the run translates {src} → {tgt} ({order})") from None
    return pairs.pairs, Path(spec).name
