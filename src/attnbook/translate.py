"""The command line: train a translator on real sentence pairs, score it, and use it.

::

    attnbook-translate train --pairs cmn.txt --src en --tgt zh --out runs/en-zh --minutes 10
    attnbook-translate evaluate runs/en-zh
    attnbook-translate translate runs/en-zh "Where is the station?"
    echo "I like tea." | attnbook-translate translate runs/en-zh

(``python -m attnbook.translate`` is the same program.) ``train`` reads any
Tatoeba/Anki tab-separated file (``--pairs fra-eng`` fetches d2l's
English–French file), splits it into training, validation and test pairs by
a checksum of each source sentence (the same split on every machine, whatever
the order of the lines), builds the vocabularies from the training pairs
(one token per character for Chinese and Japanese), and trains with the
paper's recipe through :func:`attnbook.train.train`. Everything the other two
commands need lands in the run folder:

=================  ====================================================================
``config.json``    languages, data file and split, model and training settings
``vocab.src.json`` ``vocab.tgt.json``: the vocabularies
``truecase.json``  the usual spelling of words that are not written in lower case
``checkpoint.pt``  weights, model configuration and the training state, ``weights_only``-loadable
``best.pt``        the weights of the epoch with the lowest validation loss, which ``evaluate`` and ``translate`` use
``log.jsonl``      the training log, one JSON object a line
=================  ====================================================================

A checkpoint is written after every epoch and every few minutes, always to a
temporary file renamed into place, so an interrupted write never damages the
last good one. After every epoch whose validation loss is the lowest so far,
the weights are also written to ``best.pt``: a long run over a small file can
start to learn its training pairs by heart, and the translator is then the
model of the best epoch, not the last (early stopping, without stopping). Ctrl-C finishes the current step, saves, and stops;
``--resume`` then continues exactly where the run stopped (weights, optimizer,
learning-rate schedule, random state and position in the epoch).

Under ``torchrun --nproc_per_node=N`` the same ``train`` runs on N processes
with :class:`~torch.nn.parallel.DistributedDataParallel` (gloo on CPU, NCCL on
GPU): every process builds the same list of length-bucketed batches for an
epoch and takes every N-th one, gradients are averaged, and only the first
process writes files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import signal
import sys
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["main", "token_batches", "split_of", "CommandError"]

RUN_FORMAT = "attnbook-translator-v1"
CONFIG_FILE, CHECKPOINT_FILE, LOG_FILE, TRUECASE_FILE = "config.json", "checkpoint.pt", "log.jsonl", "truecase.json"
BEST_FILE = "best.pt"
SRC_VOCAB_FILE, TGT_VOCAB_FILE = "vocab.src.json", "vocab.tgt.json"

#: Where ``--pairs fra-eng`` comes from: ``None`` means d2l's archive and checksum
#: (:data:`attnbook.data.FRA_ENG_URL`, :data:`attnbook.data.FRA_ENG_SHA1`); the tests point them to a local server.
FRA_ENG_URL: str | None = None
FRA_ENG_SHA1: str | None = None

#: The defaults a run gets when the command line does not say otherwise: a model that learns fast
#: on a CPU. In 300 CPU-seconds on generated pairs of natural lengths, greedy BLEU on held-out pairs
#: was 78 for these, against 55 with 3 layers (warm-up 300, factor 1) and 43 with 3,000-token batches.
#: Dropout is off by default: in 2.5 minutes on one thread, BLEU on held-out generated pairs was 56.1
#: without it and 41.0 with 0.1 (30,000 pairs, about one pass), 54.4 and 50.3 on 3,000 pairs (12 passes).
#: It pays in long runs over small files, where a model learns its training pairs by heart.
DROPOUT_NOTE = "off by default; 0.1, the paper's, pays in long runs over small files"
DEFAULTS: dict[str, Any] = {
    "arch": "transformer",
    "d_model": 256,
    "heads": 4,
    "layers": 2,
    "d_ff": 1024,
    "dropout": 0.0,  # a run of minutes sees its pairs a few times: dropout only slows it (see DROPOUT_NOTE)
    "norm_first": True,
    "batch_tokens": 1500,
    "warmup": 200,
    "lr_factor": 0.7,
    "label_smoothing": 0.1,
    "clip": 1.0,
    "max_length": 50,
    "min_freq": 2,
    "max_vocab": 8000,
    "seed": 0,
    "dtype": "float32",
}
#: The positional table's length: the longest sentence the model can read, and the longest it writes.
MAX_POSITIONS = 256
#: The paper's output budget: at most the source length plus this many tokens.
EXTRA_OUTPUT_TOKENS = 50
#: What the checksum split holds out, as fractions of the pairs (see :func:`held_out_fraction`).
HELD_OUT_PAIRS, HELD_OUT_MIN, HELD_OUT_MAX = 2000, 0.02, 0.1


class CommandError(Exception):
    """Bad input to the command line: printed as one line, exit status 2, no traceback."""


# =====================================================================================
# Output
# =====================================================================================

_IS_MAIN = True  # False on every process of a distributed run but the first


def say(*parts: Any) -> None:
    """A line on standard output, from the first process only."""
    if _IS_MAIN:
        _Progress.clear()
        print(*parts, flush=True)


def note(message: str) -> None:
    """A remark on standard error (unknown words, a changed data file...), from the first process only."""
    if _IS_MAIN:
        _Progress.clear()
        print(f"note: {message}", file=sys.stderr, flush=True)


def _fmt_time(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class _Progress:
    """One self-rewriting line on a terminal's standard error: where training is and how long is left.

    Silent when standard error is not a terminal (a log file, a notebook, a
    pipe) and on every process but the first.
    """

    shown = False

    def __init__(self) -> None:
        self.enabled = _IS_MAIN and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
        self.last = 0.0

    def update(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < 0.25):
            return
        self.last = now
        try:
            width = os.get_terminal_size(sys.stderr.fileno()).columns or 100  # 0: a terminal that does not say
        except OSError:
            width = 100
        sys.stderr.write("\r\033[K" + text[: max(10, width - 1)])
        sys.stderr.flush()
        _Progress.shown = True

    @staticmethod
    def clear() -> None:
        if _Progress.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            _Progress.shown = False


# =====================================================================================
# Reading pairs
# =====================================================================================

# Characters that only one script uses: a column said to be in such a language must show them.
_SCRIPT_OF = {
    "zh": ("Chinese characters", "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"),
    "yue": ("Chinese characters", "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"),
    "ja": ("Japanese script", "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"),
    "ko": ("Hangul", "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"),
    "ru": ("Cyrillic", "\u0400-\u04ff"),
    "uk": ("Cyrillic", "\u0400-\u04ff"),
    "bg": ("Cyrillic", "\u0400-\u04ff"),
    "mk": ("Cyrillic", "\u0400-\u04ff"),
    "el": ("Greek", "\u0370-\u03ff\u1f00-\u1fff"),
    "he": ("Hebrew", "\u0590-\u05ff"),
    "ar": ("Arabic script", "\u0600-\u06ff\u0750-\u077f"),
    "fa": ("Arabic script", "\u0600-\u06ff\u0750-\u077f"),
    "ur": ("Arabic script", "\u0600-\u06ff\u0750-\u077f"),
    "hi": ("Devanagari", "\u0900-\u097f"),
    "mr": ("Devanagari", "\u0900-\u097f"),
    "bn": ("Bengali script", "\u0980-\u09ff"),
    "ta": ("Tamil script", "\u0b80-\u0bff"),
    "th": ("Thai script", "\u0e00-\u0e7f"),
    "lo": ("Lao script", "\u0e80-\u0eff"),
    "my": ("Myanmar script", "\u1000-\u109f"),
    "km": ("Khmer script", "\u1780-\u17ff"),
    "ka": ("Georgian script", "\u10a0-\u10ff"),
    "hy": ("Armenian script", "\u0530-\u058f"),
    "be": ("Cyrillic", "\u0400-\u04ff"),
    "kk": ("Cyrillic", "\u0400-\u04ff"),
    "ky": ("Cyrillic", "\u0400-\u04ff"),
    "mn": ("Cyrillic", "\u0400-\u04ff"),
    "tt": ("Cyrillic", "\u0400-\u04ff"),
    "tg": ("Cyrillic", "\u0400-\u04ff"),
    "chv": ("Cyrillic", "\u0400-\u04ff"),
    "bak": ("Cyrillic", "\u0400-\u04ff"),
    "ne": ("Devanagari", "\u0900-\u097f"),
    "pa": ("Gurmukhi", "\u0a00-\u0a7f"),
    "gu": ("Gujarati script", "\u0a80-\u0aff"),
    "te": ("Telugu script", "\u0c00-\u0c7f"),
    "kn": ("Kannada script", "\u0c80-\u0cff"),
    "ml": ("Malayalam script", "\u0d00-\u0d7f"),
    "si": ("Sinhala script", "\u0d80-\u0dff"),
    "am": ("Ethiopic", "\u1200-\u137f"),
    "ps": ("Arabic script", "\u0600-\u06ff\u0750-\u077f"),
    "ug": ("Arabic script", "\u0600-\u06ff\u0750-\u077f"),
}
# Words frequent in English and (nearly) absent from the other languages of Tatoeba's Anki files.
_ENGLISH = re.compile(r"\b(?:the|you|your|what|this|that|it|i'm|don't|have|are|there)\b")


def _share(sentences: Sequence[str], test: Callable[[str], bool]) -> float:
    return sum(1 for s in sentences if test(s)) / max(1, len(sentences))


def check_columns(first: Sequence[str], second: Sequence[str], lang1: str, lang2: str, fix: str) -> None:
    """Raise a :class:`CommandError` when the columns look like the two languages the other way round.

    Only what can be told reliably is checked: a language with a script of
    its own, and English (every Anki file from manythings.org has an English
    column) against its frequent words.
    """
    from .data import LANGUAGES

    columns = {1: (first, lang1), 2: (second, lang2)}
    for i, (sentences, lang) in columns.items():
        other = columns[3 - i][0]
        if lang in _SCRIPT_OF:
            name, chars = _SCRIPT_OF[lang]
            pattern = re.compile(f"[{chars}]")
            own, theirs = _share(sentences, lambda s: bool(pattern.search(s))), _share(other, lambda s: bool(pattern.search(s)))
            if own < 0.5 <= theirs:
                raise CommandError(
                    f"column {i} of the pairs file holds no {name}, but column {3 - i} does: it is not {LANGUAGES[lang]} ({lang}); {fix}"
                )
        elif lang == "en" and columns[3 - i][1] != "en":
            own = _share(sentences, lambda s: bool(_ENGLISH.search(s.lower())))
            theirs = _share(other, lambda s: bool(_ENGLISH.search(s.lower())))
            if theirs >= 0.3 and own < 0.5 * theirs:
                raise CommandError(f"column {3 - i} of the pairs file looks like English, not column {i}; {fix}")


@dataclass
class PairsSource:
    """Where the pairs came from, as recorded in the run's configuration."""

    path: str  # absolute path of the file, or "fra-eng"
    sha1: str
    n_pairs: int
    skipped: int


def _sha1(path: Path) -> str:
    from .data.anki import sha1_of

    return sha1_of(path)


def resolve_pairs_file(spec: str) -> Path:
    """The path of the pairs file: ``spec`` itself, or d2l's fra.txt (downloaded once) for ``fra-eng``."""
    if spec == "fra-eng":
        from . import data
        from .data import ChecksumError, DownloadError, download_fra_eng

        try:
            return download_fra_eng(url=FRA_ENG_URL or data.FRA_ENG_URL, sha1=FRA_ENG_SHA1 or data.FRA_ENG_SHA1)
        except (DownloadError, ChecksumError, ValueError, OSError) as err:
            raise CommandError(f"could not get fra-eng: {err}") from None
    path = Path(spec).expanduser()
    if not path.exists():
        raise CommandError(f"no pairs file at {spec!r} (give a Tatoeba/Anki tab-separated file, such as fra.txt, or fra-eng)")
    if path.is_dir():
        raise CommandError(f"{spec!r} is a folder; give the tab-separated file inside it (such as fra.txt)")
    import zipfile

    if zipfile.is_zipfile(path):
        return _text_file_of_zip(path)
    return path


def _text_file_of_zip(archive: Path) -> Path:
    """The pairs file inside a zip from manythings.org (``cmn-eng.zip`` holds ``cmn.txt`` and ``_about.txt``), extracted once."""
    import zipfile

    from .data import default_cache_dir, extract_zip

    try:
        with zipfile.ZipFile(archive) as zf:
            names = [n for n in zf.namelist() if n.endswith(".txt") and not Path(n).name.startswith("_")]
    except zipfile.BadZipFile:
        raise CommandError(f"{str(archive)!r} is a damaged zip archive") from None
    if len(names) != 1:
        listed = ", ".join(names) or "none"
        raise CommandError(f"{str(archive)!r} should hold one pairs file (*.txt), but holds {listed}: extract the one you want and give its path")
    folder = default_cache_dir() / "extracted" / _sha1(archive)[:16]
    target = folder / names[0]
    if not target.is_file():
        try:
            extract_zip(archive, folder)
        except (ValueError, OSError) as err:
            raise CommandError(f"cannot extract {str(archive)!r}: {err}") from None
    return target


def parse_language(code: str, option: str) -> str:
    from .data import language

    try:
        return language(code)
    except (ValueError, TypeError) as err:
        raise CommandError(f"{option}: {err}") from None


def read_pairs(spec: str, src: str, tgt: str, reverse: bool, check: bool = True):
    """Read the pairs to translate from ``src`` into ``tgt``; return ``(pairs, PairsSource)``.

    The file's first column is in ``src`` unless ``reverse``: then the second
    column is the source.
    """
    from .data import read_anki_pairs

    path = resolve_pairs_file(spec)
    first, second = (tgt, src) if reverse else (src, tgt)
    try:
        pairs = read_anki_pairs(path, first, second, reverse=reverse)
    except (ValueError, OSError) as err:
        raise CommandError(f"cannot read pairs from {spec!r}: {err}") from None
    if len(pairs.malformed) > max(10, len(pairs) // 10):
        raise CommandError(
            f"{spec!r} is not a tab-separated pairs file: {len(pairs.malformed)} of its {pairs.n_lines} lines are not "
            f"'sentence<TAB>translation' (first at line {pairs.malformed[0]})"
        )
    if check:
        sample = pairs.pairs[:: max(1, len(pairs) // 2000)]
        col1 = [p.tgt if reverse else p.src for p in sample]
        col2 = [p.src if reverse else p.tgt for p in sample]
        fix = "drop --reverse (or swap --src and --tgt)" if reverse else "add --reverse to translate from the second column into the first"
        check_columns(col1, col2, first, second, fix)
    shown = "fra-eng" if spec == "fra-eng" else str(Path(spec).expanduser().resolve())  # a zip, not what it unpacked to
    source = PairsSource(shown, _sha1(path), len(pairs), pairs.skipped)
    return pairs.pairs, source


# =====================================================================================
# The split, the vocabularies, the batches
# =====================================================================================


def held_out_fraction(n_pairs: int) -> float:
    """The share of pairs held out for validation, and the same share for the test.

    About ``HELD_OUT_PAIRS`` pairs each, at least 2% and at most 10% of the pairs.
    """
    return min(HELD_OUT_MAX, max(HELD_OUT_MIN, HELD_OUT_PAIRS / max(1, n_pairs)))


def split_of(source_sentence: str, held_out: float) -> str:
    """``"train"``, ``"valid"`` or ``"test"``, from a checksum of the (case- and space-normalized) source sentence.

    Every translation of one source sentence lands in the same split, and the
    split of a pair depends on nothing else: not on the order of the lines, not
    on the machine.
    """
    key = " ".join(unicodedata.normalize("NFC", source_sentence).lower().split())
    u = int.from_bytes(hashlib.sha1(key.encode("utf-8")).digest()[:8], "big") / 2**64
    return "test" if u < held_out else "valid" if u < 2 * held_out else "train"


def split_pairs(pairs: Sequence, held_out: float) -> dict[str, list]:
    splits: dict[str, list] = {"train": [], "valid": [], "test": []}
    for p in pairs:
        splits[split_of(p.src, held_out)].append(p)
    return splits


def token_batches(
    lengths: Sequence[tuple[int, int]], max_tokens: int, *, seed: int = 0, epoch: int = 0, shuffle: bool = True, pool_batches: int = 50
) -> list[list[int]]:
    """Batches of example indices, each holding at most ``max_tokens`` padded positions.

    A batch of ``B`` pairs whose longest source has ``S`` tokens and longest
    target ``T`` (plus ``<eos>``) costs ``B * max(S, T + 1)`` positions. The
    examples are shuffled from ``(seed, epoch)``, cut into pools of about
    ``pool_batches`` batches, each pool sorted by length and cut into batches
    (so a batch holds sentences of similar lengths and little padding), and the
    batches are shuffled. A pair longer than ``max_tokens`` gets a batch of its
    own. Without ``shuffle``, the whole list is sorted by length.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    n = len(lengths)
    if n == 0:
        return []
    cost = [max(s, t + 1) for s, t in lengths]
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(n))
    if shuffle:
        rng.shuffle(order)
        pool = max(1, pool_batches * max_tokens * n // max(1, sum(cost)))
    else:
        pool = n
    batches: list[list[int]] = []
    for start in range(0, n, pool):
        chunk = sorted(order[start : start + pool], key=lambda i: (lengths[i], i))
        current, longest = [], 0
        for i in chunk:
            if current and max(longest, cost[i]) * (len(current) + 1) > max_tokens:
                batches.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, cost[i])
        if current:
            batches.append(current)
    if shuffle:
        rng.shuffle(batches)
    return batches


def _case_samples(text: str, tokens: Sequence[str]):
    """``(token, spelling in text)`` for each token found in ``text``, skipping the sentence's first word."""
    text = unicodedata.normalize("NFC", text).replace("\u2019", "'")
    lower = text.lower()
    if len(lower) != len(text):
        return
    at = 0
    for k, token in enumerate(tokens):
        p = lower.find(token, at)
        if p < 0:
            continue
        at = p + len(token)
        if k > 0 and any(c.isalpha() for c in token):
            yield token, text[p:at]


def build_truecase(pairs: Sequence, max_sentences: int = 200_000) -> dict[str, str]:
    """The usual spelling of every target word that is mostly not written in lower case (``"tom" -> "Tom"``).

    The tokenizer lower-cases everything; the translations get their capitals
    back from how the training targets spell each word, ignoring each
    sentence's first word (capitalized anyway).
    """
    from collections import Counter, defaultdict

    forms: dict[str, Counter] = defaultdict(Counter)
    for p in pairs[:max_sentences]:
        for token, spelling in _case_samples(p.tgt, p.tgt_tokens):
            forms[token][spelling] += 1
    table = {}
    for token, counts in forms.items():
        spelling, n = counts.most_common(1)[0]
        if spelling != token and n > sum(counts.values()) / 2:
            table[token] = spelling
    return dict(sorted(table.items()))


# =====================================================================================
# Models, the recipe, decoding
# =====================================================================================


def model_config(arch: str, settings: dict, src_size: int, tgt_size: int) -> dict:
    """The model's configuration (the fields of its config dataclass) from the run's settings."""
    if arch == "transformer":
        return dict(
            src_vocab_size=src_size,
            tgt_vocab_size=tgt_size,
            d_model=settings["d_model"],
            num_heads=settings["heads"],
            num_layers=settings["layers"],
            d_ff=settings["d_ff"],
            dropout=settings["dropout"],
            norm_first=settings["norm_first"],
            share_embeddings=False,
            max_len=MAX_POSITIONS,
            pad_id=0,
        )
    if arch == "rnn":
        return dict(
            src_vocab_size=src_size,
            tgt_vocab_size=tgt_size,
            embed_size=settings["d_model"],
            hidden_size=settings["d_model"],
            num_layers=settings["layers"],
            dropout=settings["dropout"],
            attention=True,
            pad_id=0,
        )
    raise CommandError(f"unknown --arch {arch!r}: choose transformer or rnn")


def build_model(arch: str, config: dict):
    """A fresh model of the run's architecture from its configuration dict."""
    try:
        if arch == "transformer":
            from .transformer import Transformer, TransformerConfig

            return Transformer(TransformerConfig(**config))
        if arch == "rnn":
            from .rnn import Seq2Seq, Seq2SeqConfig

            return Seq2Seq(Seq2SeqConfig(**config))
    except (TypeError, ValueError) as err:
        raise CommandError(f"this model configuration cannot be built: {err}") from None
    raise CommandError(f"unknown architecture {arch!r} in the run's configuration (transformer or rnn)")


def make_optimizer(model, d_model: int, warmup: int, factor: float = 1.0):
    """The paper's recipe, :func:`attnbook.train.paper_optimizer`: Adam (β = 0.9, 0.98; ε = 1e-9) and the warm-up schedule.

    ``lrate = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)``, stepped every batch.
    """
    from .train import paper_optimizer

    return paper_optimizer(model, d_model=d_model, warmup=warmup, factor=factor)


def translate_tokens(
    model, sources: Sequence[Sequence[str]], src_vocab, tgt_vocab, beam: int, alpha: float, batch_size: int = 64, progress: bool = False
) -> list[list[str]]:
    """Translate tokenized sentences with beam search (greedy when ``beam == 1``); return token lists in order.

    Sentences are decoded in order of length (less padding, and a batch ends
    when its longest sentence does), at most the source length + 50 tokens
    each, within the positional table. ``progress`` shows a progress line on
    a terminal.
    """
    from . import decode

    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    results: list[list[str]] = [[] for _ in sources]
    bar = _Progress() if progress else None
    start, chunk = time.monotonic(), max(batch_size, 256)
    for first in range(0, len(order), chunk):
        part = order[first : first + chunk]
        longest = max(len(sources[i]) for i in part)
        kwargs: dict[str, Any] = {"batch_size": batch_size}
        if beam > 1:
            kwargs.update(beam_size=beam, alpha=alpha)  # its default length: each source's + 50, within the table
        else:  # greedy decoding (beam search with k = 1 gives the same tokens, more slowly)
            kwargs.update(max_len=min(longest + EXTRA_OUTPUT_TOKENS, MAX_POSITIONS - 1))
        outputs = decode.translate(model, [list(sources[i]) for i in part], src_vocab, tgt_vocab, **kwargs)
        for i, out in zip(part, outputs):
            results[i] = out
        if bar is not None:
            done = first + len(part)
            left = (time.monotonic() - start) / done * (len(order) - done)
            bar.update(f"translated {done:,} of {len(order):,} sentences · ETA {_fmt_time(left)}", force=True)
    _Progress.clear()
    return results


def to_text(tokens: Sequence[str], lang: str, truecase: dict[str, str]) -> str:
    from .data import detokenize

    return detokenize([truecase.get(t, t) for t in tokens], lang)


# =====================================================================================
# Distributed runs
# =====================================================================================


@dataclass
class Cluster:
    """This process's place in a ``torchrun`` job (rank 0 of 1 when run alone)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: Any = None

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @classmethod
    def start(cls, device: str) -> "Cluster":
        import torch

        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device.startswith("cuda"):
            if not torch.cuda.is_available():
                raise CommandError("--device cuda: PyTorch sees no GPU on this machine (use --device cpu)")
            dev = torch.device("cuda", local_rank) if world > 1 or device == "cuda" else torch.device(device)
            torch.cuda.set_device(dev)
        elif device == "cpu":
            dev = torch.device("cpu")
        else:
            raise CommandError(f"--device {device!r}: use auto, cpu, cuda or cuda:N")
        if world > 1:
            import torch.distributed as dist

            if not dist.is_initialized():
                dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
        return cls(rank, world, local_rank, dev)

    def all_sum(self, values: list[float]) -> list[float]:
        """The element-wise sum over every process (a no-op alone)."""
        if not self.distributed:
            return values
        import torch
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64, device=self.device if self.device.type == "cuda" else "cpu")
        dist.all_reduce(t)
        return t.tolist()

    def gather(self, obj: Any) -> list[Any]:
        if not self.distributed:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def stop(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


# =====================================================================================
# The run folder
# =====================================================================================


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _best_valid_loss(path: Path) -> float:
    """The validation loss stored with the best weights so far (infinity when there are none, or they cannot be read)."""
    from .train import read_checkpoint

    try:
        return float(read_checkpoint(path)["extra"]["valid_loss"])
    except Exception:  # no best.pt yet, or a damaged one: the next epoch writes a new one
        return math.inf


def save_checkpoint_atomic(path: Path, model, **extra: Any) -> None:
    """:func:`attnbook.train.save_checkpoint` into a temporary file, flushed to disk, then renamed over ``path``.

    The rename is atomic: whenever the program stops, ``path`` holds either
    the previous checkpoint or the new one, whole.
    """
    from .train import save_checkpoint

    tmp = path.with_name(path.name + ".tmp")
    try:
        save_checkpoint(tmp, model, **extra)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@dataclass
class Run:
    """A trained run folder, read back: configuration, vocabularies, spelling table, model."""

    folder: Path
    config: dict
    src_vocab: Any
    tgt_vocab: Any
    truecase: dict[str, str]
    model: Any = None
    extra: dict = field(default_factory=dict)


def read_config(folder: Path) -> dict:
    path = folder / CONFIG_FILE
    if not folder.exists():
        raise CommandError(f"no run folder at {str(folder)!r}: train one with 'attnbook-translate train ... --out {folder}'")
    if not folder.is_dir():
        raise CommandError(f"{str(folder)!r} is a file, not a run folder (the --out folder of 'attnbook-translate train')")
    if not path.is_file():
        raise CommandError(f"{str(folder)!r} holds no trained model ({CONFIG_FILE} is missing): train one with 'attnbook-translate train ... --out {folder}'")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CommandError(f"{path} is damaged (not JSON: {err})") from None
    if not isinstance(config, dict) or config.get("format") != RUN_FORMAT:
        raise CommandError(f"{path} is not the configuration of a run of this program (expected format {RUN_FORMAT!r})")
    for key in ("src_lang", "tgt_lang", "arch", "model", "settings", "pairs", "held_out"):
        if key not in config:
            raise CommandError(f"{path} is incomplete: it has no {key!r}")
    return config


def _one_line(err: BaseException) -> str:
    """An exception as one line: PyTorch's unpickling errors run over many."""
    text = str(err)
    if "is not a readable checkpoint" in text:
        return text.split(": ")[0] + f" is damaged or not a checkpoint ({text.split(': ')[1]})"
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    return first if len(first) <= 400 else first[:400] + " ..."


def open_run(folder: str | Path, device=None, load_model: bool = True) -> Run:
    """Read a run folder; with ``load_model``, rebuild the model and load the checkpoint's weights."""
    from .data import Vocab
    from .train import CheckpointMismatch, load_checkpoint

    folder = Path(folder).expanduser()
    config = read_config(folder)
    try:
        src_vocab, tgt_vocab = Vocab.load(folder / SRC_VOCAB_FILE), Vocab.load(folder / TGT_VOCAB_FILE)
    except (OSError, ValueError) as err:
        raise CommandError(f"the vocabularies of {str(folder)!r} cannot be read: {err}") from None
    sizes = (config["model"].get("src_vocab_size"), config["model"].get("tgt_vocab_size"))
    if sizes != (len(src_vocab), len(tgt_vocab)):
        raise CommandError(
            f"the vocabularies in {str(folder)!r} ({len(src_vocab)} and {len(tgt_vocab)} tokens) do not fit the model's configuration {sizes}"
        )
    truecase: dict[str, str] = {}
    if (folder / TRUECASE_FILE).is_file():
        try:
            truecase = json.loads((folder / TRUECASE_FILE).read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            note(f"{TRUECASE_FILE} is damaged: translations stay in lower case")
    run = Run(folder, config, src_vocab, tgt_vocab, truecase)
    if not load_model:
        return run
    checkpoint = folder / CHECKPOINT_FILE
    if not checkpoint.is_file():
        raise CommandError(
            f"{str(folder)!r} has no checkpoint yet ({CHECKPOINT_FILE} is missing): training stopped before its first save; "
            f"continue it with 'attnbook-translate train --out {folder} --resume'"
        )
    import torch

    model = build_model(config["arch"], config["model"])
    model.to(getattr(torch, config["settings"].get("dtype", "float32")))
    try:  # the weights of the epoch with the lowest validation loss, else the last ones
        run.extra = load_checkpoint(folder / BEST_FILE, model)
    except (FileNotFoundError, CheckpointMismatch) as best_error:
        try:
            run.extra = load_checkpoint(checkpoint, model)
        except CheckpointMismatch as err:
            raise CommandError(f"incompatible checkpoint in {str(folder)!r}: {_one_line(err)}") from None
        if isinstance(best_error, CheckpointMismatch):
            note(f"{BEST_FILE} cannot be used ({_one_line(best_error)}): the last checkpoint is used instead")
    run.model = model.to(device or "cpu").eval()
    return run


# =====================================================================================
# train
# =====================================================================================

# Options that define a run: on --resume they must agree with the stored settings.
_RUN_OPTIONS = {
    "arch": "--arch",
    "d_model": "--d-model",
    "heads": "--heads",
    "layers": "--layers",
    "d_ff": "--d-ff",
    "dropout": "--dropout",
    "norm_first": "--norm-first/--post-norm",
    "batch_tokens": "--batch-tokens",
    "warmup": "--warmup",
    "lr_factor": "--lr-factor",
    "label_smoothing": "--label-smoothing",
    "clip": "--clip",
    "max_length": "--max-length",
    "min_freq": "--min-freq",
    "max_vocab": "--max-vocab",
    "seed": "--seed",
    "dtype": "--dtype",
}


def _settings_from(args) -> dict:
    settings = {}
    for key in _RUN_OPTIONS:
        value = getattr(args, key)
        settings[key] = DEFAULTS[key] if value is None else value
    return settings


def _check_settings(s: dict) -> None:
    positive = ("d_model", "heads", "layers", "d_ff", "batch_tokens", "warmup", "max_length", "min_freq", "max_vocab")
    for key in positive:
        if s[key] < 1:
            raise CommandError(f"{_RUN_OPTIONS[key]} must be at least 1, got {s[key]}")
    if s["arch"] == "transformer" and s["d_model"] % s["heads"]:
        raise CommandError(f"--d-model {s['d_model']} is not divisible by --heads {s['heads']}: each head gets d_model / heads dimensions")
    if not 0 <= s["dropout"] < 1:
        raise CommandError(f"--dropout must be in [0, 1), got {s['dropout']}")
    if not 0 <= s["label_smoothing"] < 1:
        raise CommandError(f"--label-smoothing must be in [0, 1), got {s['label_smoothing']}")
    if not s["lr_factor"] > 0:
        raise CommandError(f"--lr-factor must be > 0, got {s['lr_factor']}")
    if s["clip"] is not None and s["clip"] < 0:
        raise CommandError(f"--clip must be >= 0 (0: no clipping), got {s['clip']}")
    if s["max_vocab"] < 5:
        raise CommandError(f"--max-vocab must be at least 5 (4 reserved tokens and a word), got {s['max_vocab']}")
    if s["max_length"] > MAX_POSITIONS - EXTRA_OUTPUT_TOKENS:
        raise CommandError(f"--max-length must be at most {MAX_POSITIONS - EXTRA_OUTPUT_TOKENS} (the positional table holds {MAX_POSITIONS})")


def _budget_from(args, stored: dict | None) -> dict:
    budget = dict(stored or {})
    if args.minutes is not None or args.epochs is not None or args.steps is not None:
        budget = {"minutes": args.minutes, "epochs": args.epochs, "steps": args.steps}
    if not any(budget.get(k) is not None for k in ("minutes", "epochs", "steps")):
        budget = {"minutes": 10.0, "epochs": None, "steps": None}
        say("budget: 10 minutes (the default; say --minutes M or --epochs E)")
    if budget.get("minutes") is not None and not budget["minutes"] > 0:
        raise CommandError(f"--minutes must be > 0, got {budget['minutes']}")
    for key in ("epochs", "steps"):
        if budget.get(key) is not None and budget[key] < 1:
            raise CommandError(f"--{key} must be at least 1, got {budget[key]}")
    return budget


def _prepare_new_run(args, cluster: Cluster) -> tuple[dict, list, list]:
    """Read and split the pairs, build the vocabularies; the configuration of a new run."""
    from .data import Vocab

    if args.pairs is None:
        raise CommandError("train needs --pairs FILE (a Tatoeba/Anki tab-separated file) or --pairs fra-eng")
    src, tgt, reverse = _languages(args)
    if args.pairs == "fra-eng" and not cluster.local_rank == 0:
        cluster.barrier()  # the first process of each machine downloads; the others wait for it
    pairs, source = read_pairs(args.pairs, src, tgt, reverse)
    if args.pairs == "fra-eng" and cluster.local_rank == 0:
        cluster.barrier()
    held_out = held_out_fraction(len(pairs))
    splits = split_pairs(pairs, held_out)
    settings = _settings_from(args)
    _check_settings(settings)
    train_pairs, valid_pairs = _length_filter(splits["train"], settings["max_length"], "training"), _length_filter(
        splits["valid"], settings["max_length"], "validation"
    )
    if not train_pairs:
        raise CommandError(f"no training pairs left ({len(pairs)} pairs read): the file is too small, or every pair is longer than --max-length")
    src_vocab = Vocab.build((p._src_tok for p in train_pairs), min_freq=settings["min_freq"], max_size=settings["max_vocab"])
    tgt_vocab = Vocab.build((p._tgt_tok for p in train_pairs), min_freq=settings["min_freq"], max_size=settings["max_vocab"])
    config = {
        "format": RUN_FORMAT,
        "src_lang": src,
        "tgt_lang": tgt,
        "reverse": reverse,
        "pairs": asdict(source),
        "held_out": held_out,
        "split_sizes": {k: len(v) for k, v in splits.items()},
        "arch": settings["arch"],
        "settings": settings,
        "model": model_config(settings["arch"], settings, len(src_vocab), len(tgt_vocab)),
        "budget": None,
    }
    say(
        f"read {source.n_pairs:,} pairs ({src} → {tgt}) from {Path(source.path).name if source.path != 'fra-eng' else 'fra-eng'}"
        + (f", skipped {source.skipped:,} blank or malformed lines" if source.skipped else "")
    )
    say(
        f"split by checksum: {len(splits['train']):,} training, {len(splits['valid']):,} validation, {len(splits['test']):,} test pairs; "
        f"vocabularies: {len(src_vocab):,} {src} and {len(tgt_vocab):,} {tgt} tokens"
    )
    return config, (src_vocab, tgt_vocab, build_truecase(train_pairs)), (train_pairs, valid_pairs)


def _languages(args) -> tuple[str, str, bool]:
    if args.pairs == "fra-eng":
        src = parse_language(args.src, "--src") if args.src else None
        tgt = parse_language(args.tgt, "--tgt") if args.tgt else None
        if src is None and tgt is None:
            src, tgt = ("fr", "en") if args.reverse else ("en", "fr")
        src = src or ({"en": "fr", "fr": "en"}.get(tgt or "", "en"))
        tgt = tgt or ({"en": "fr", "fr": "en"}.get(src, "fr"))
        if {src, tgt} != {"en", "fr"}:
            raise CommandError(f"fra-eng holds English and French sentences, not {src} → {tgt}")
        return src, tgt, src == "fr"  # its first column is English
    if not args.src or not args.tgt:
        raise CommandError("say which languages the pairs are in: --src LANG --tgt LANG (such as --src en --tgt zh)")
    src, tgt = parse_language(args.src, "--src"), parse_language(args.tgt, "--tgt")
    return src, tgt, bool(args.reverse)


def _length_filter(pairs: list, max_length: int, what: str) -> list:
    kept = [p for p in pairs if len(p._src_tok) <= max_length and len(p._tgt_tok) <= max_length and len(p._src_tok) > 0]
    if len(kept) < len(pairs):
        say(f"left out {len(pairs) - len(kept):,} {what} pairs longer than {max_length} tokens (--max-length)")
    return kept


def _reread_run_pairs(config: dict, spec: str | None = None):
    """The pairs of a run's data file (or of ``spec``), read and split as when the run was trained."""
    spec = spec or config["pairs"]["path"]
    pairs, source = read_pairs(spec, config["src_lang"], config["tgt_lang"], config["reverse"], check=False)
    if source.sha1 != config["pairs"]["sha1"]:
        note(f"{spec} is not the file this model was trained on: its test pairs may include training sentences")
    return split_pairs(pairs, config["held_out"]), source


class _Interrupted(Exception):
    """Ctrl-C (or SIGTERM) was honoured: the step finished and the state was saved."""


class _Signals:
    """Ctrl-C / SIGTERM ask training to stop after the current step; a second Ctrl-C stops at once."""

    def __init__(self) -> None:
        self.requested = False
        self.first = 0.0
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> "_Signals":
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum, frame) -> None:
        # torchrun passes the terminal's Ctrl-C on to its processes, which get it from the terminal
        # too: a second SIGINT within a second is that echo, not a second press.
        if signum == signal.SIGINT and self.requested and time.monotonic() - self.first > 1.0:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        if not self.requested:
            self.first = time.monotonic()
            say("stopping after this step (the state is saved first; Ctrl-C again to stop at once)")
        self.requested = True

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def cmd_train(args) -> int:
    import torch

    from .data import Vocab, collate
    from .data.batches import PairDataset
    from .train import EpochLog, TrainStep, read_checkpoint, train

    global _IS_MAIN
    cluster = Cluster.start(args.device)
    _IS_MAIN = cluster.rank == 0
    out = Path(args.out).expanduser()
    try:
        if args.resume:
            config = read_config(out)
            _check_resume(args, config)
            if not (out / CHECKPOINT_FILE).is_file():
                raise CommandError(f"{str(out)!r} has no checkpoint to resume from: training stopped before its first save; start it again without --resume")
            try:
                src_vocab, tgt_vocab = Vocab.load(out / SRC_VOCAB_FILE), Vocab.load(out / TGT_VOCAB_FILE)
            except (OSError, ValueError) as err:
                raise CommandError(f"the vocabularies of {str(out)!r} cannot be read: {err}") from None
            splits, _ = _reread_run_pairs(config)
            s = config["settings"]
            train_pairs = _length_filter(splits["train"], s["max_length"], "training")
            valid_pairs = _length_filter(splits["valid"], s["max_length"], "validation")
            try:
                payload = read_checkpoint(out / CHECKPOINT_FILE)
            except Exception as err:  # CheckpointMismatch and unreadable files
                raise CommandError(f"cannot resume from {out / CHECKPOINT_FILE}: {_one_line(err)}") from None
            state = payload["extra"].get("train_state")
            if not isinstance(state, dict):
                raise CommandError(f"{out / CHECKPOINT_FILE} holds no training state to resume from")
        else:
            if (out / CHECKPOINT_FILE).exists() or (out / CONFIG_FILE).exists():
                raise CommandError(f"{str(out)!r} already holds a run: continue it with --resume, or choose another --out")
            if out.exists() and not out.is_dir():
                raise CommandError(f"--out {str(out)!r} is a file; give a folder")
            config, (src_vocab, tgt_vocab, truecase), (train_pairs, valid_pairs) = _prepare_new_run(args, cluster)
            state = None
        config["budget"] = budget = _budget_from(args, config.get("budget"))
        s = config["settings"]
        if _IS_MAIN:
            out.mkdir(parents=True, exist_ok=True)
            src_vocab.save(out / SRC_VOCAB_FILE)
            tgt_vocab.save(out / TGT_VOCAB_FILE)
            if state is None:
                _write_json_atomic(out / TRUECASE_FILE, truecase)
            _write_json_atomic(out / CONFIG_FILE, config)

        dtype = getattr(torch, s["dtype"])
        torch.manual_seed(s["seed"])
        model = build_model(config["arch"], config["model"]).to(dtype=dtype, device=cluster.device)
        optimizer, scheduler = make_optimizer(model, s["d_model"], s["warmup"], s["lr_factor"])
        if state is not None:
            from .train import load_checkpoint

            try:
                load_checkpoint(out / CHECKPOINT_FILE, model)
                optimizer.load_state_dict(state["optimizer"])
                scheduler.load_state_dict(state["scheduler"])
            except Exception as err:
                raise CommandError(f"cannot resume from {out / CHECKPOINT_FILE}: {_one_line(err)}") from None
            mine = min(cluster.rank, len(state["rng"]) - 1)
            torch.set_rng_state(state["rng"][mine])
            if cluster.device.type == "cuda" and state.get("cuda_rng"):
                torch.cuda.set_rng_state(state["cuda_rng"][mine], cluster.device)
            if state["world"] != cluster.world:
                note(f"the run was trained by {state['world']} processes and continues on {cluster.world}: the batches differ from an uninterrupted run")
        else:
            torch.manual_seed(s["seed"] + 1 + cluster.rank)  # dropout: each process its own stream
        n_params = sum(p.numel() for p in model.parameters())
        trained = model
        if cluster.distributed:
            from torch.nn.parallel import DistributedDataParallel

            ids = [cluster.device.index] if cluster.device.type == "cuda" else None
            trained = DistributedDataParallel(model, device_ids=ids, broadcast_buffers=False)

        dataset = PairDataset(train_pairs, src_vocab, tgt_vocab)
        lengths = dataset.lengths()
        steps_per_epoch = len(token_batches(lengths, s["batch_tokens"], seed=s["seed"], epoch=0)) // cluster.world
        if steps_per_epoch < 1:
            raise CommandError(f"too few training pairs for {cluster.world} processes: lower --batch-tokens or use fewer processes")
        valid_batches = None
        if valid_pairs:
            valid_set = PairDataset(valid_pairs, src_vocab, tgt_vocab)
            valid_batches = [collate([valid_set[i] for i in b]) for b in token_batches(valid_set.lengths(), s["batch_tokens"], shuffle=False)]

        position = dict(state["position"]) if state else {"epoch": 0, "step_in_epoch": 0, "step": 0, "seconds": 0.0, "tokens": 0}
        if position["step_in_epoch"] >= steps_per_epoch:
            position.update(epoch=position["epoch"] + 1, step_in_epoch=0)
        first_epoch, skip = position["epoch"], position["step_in_epoch"]
        epochs_left = (budget["epochs"] - first_epoch) if budget.get("epochs") else 10**6
        if epochs_left < 1 or (budget.get("steps") and position["step"] >= budget["steps"]):
            raise CommandError(f"the run in {str(out)!r} has already used its budget ({_budget_text(budget)}); give a larger --epochs or --steps to continue")
        if budget.get("minutes") and position["seconds"] >= budget["minutes"] * 60:
            raise CommandError(f"the run in {str(out)!r} has already used its budget ({_budget_text(budget)}); give a larger --minutes to continue")

        def batches_for(epoch: int):
            absolute = first_epoch + epoch - 1
            everything = token_batches(lengths, s["batch_tokens"], seed=s["seed"], epoch=absolute)
            mine = everything[cluster.rank :: cluster.world][:steps_per_epoch]
            if epoch == 1:
                mine = mine[skip:]
            for indices in mine:
                yield collate([dataset[i] for i in indices])

        log = _Log(out / LOG_FILE if _IS_MAIN else None)
        tracker = _Tracker(cluster, budget, position, steps_per_epoch, first_epoch, skip, args.checkpoint_minutes, args.log_every)
        say(
            f"model: {config['arch']}, {n_params:,} parameters, d_model {s['d_model']}, {s['layers']} layers, {s['heads']} heads; "
            f"{'resuming at' if state else 'training for'} "
            + (f"epoch {first_epoch + 1}, step {position['step']:,}; budget {_budget_text(budget)}" if state else _budget_text(budget))
            + f" on {cluster.world} × {cluster.device.type}"
        )
        log.write(event="resume" if state else "start", **({} if state else {"config": config}), world=cluster.world, device=cluster.device.type, position=position)

        def save(position_now: dict, reason: str) -> None:
            rng = cluster.gather(torch.get_rng_state())  # dropout's random state, of every process
            cuda_rng = cluster.gather(torch.cuda.get_rng_state(cluster.device)) if cluster.device.type == "cuda" else []
            if _IS_MAIN:
                train_state = {
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "rng": rng,
                    "cuda_rng": cuda_rng,
                    "world": cluster.world,
                    "position": position_now,
                }
                save_checkpoint_atomic(out / CHECKPOINT_FILE, model, train_state=train_state, arch=config["arch"])
                log.write(event="checkpoint", reason=reason, position=position_now)

        best = {"valid_loss": _best_valid_loss(out / BEST_FILE) if state is not None else math.inf}
        signals = _Signals()

        def on_step(info: TrainStep) -> bool:
            tracker.step(info)
            want_stop, want_save, interrupted = tracker.decide(signals.requested)
            if interrupted:
                save(tracker.position(), "interrupted")
                raise _Interrupted
            if want_save and not want_stop:
                save(tracker.position(), "periodic")
            if tracker.position()["step"] % tracker.log_every == 0:
                log.write(event="step", **tracker.summary(info.loss, scheduler.get_last_lr()[0]))
            tracker.show(info.loss)
            if want_stop:
                tracker.stopping = True
            return want_stop

        def on_epoch(epoch_log: EpochLog) -> bool:
            loss_sum, tokens = cluster.all_sum([epoch_log.train_loss * epoch_log.tokens, float(epoch_log.tokens)])
            complete = not tracker.stopping
            position_now = tracker.end_epoch(complete)
            save(position_now, "epoch" if complete else "budget")
            absolute = first_epoch + epoch_log.epoch
            line = {
                "epoch": absolute,
                "complete": complete,
                "train_loss": loss_sum / max(tokens, 1),
                "valid_loss": epoch_log.valid_loss,
                "valid_perplexity": math.exp(min(epoch_log.valid_loss, 50)) if epoch_log.valid_loss is not None else None,
                "tokens_per_second": tracker.tokens_per_second(),
                "seconds": position_now["seconds"],
                "step": position_now["step"],
            }
            log.write(event="epoch", **line)
            if _IS_MAIN and epoch_log.valid_loss is not None and epoch_log.valid_loss < best["valid_loss"]:
                best["valid_loss"] = epoch_log.valid_loss
                save_checkpoint_atomic(out / BEST_FILE, model, arch=config["arch"], epoch=absolute, valid_loss=epoch_log.valid_loss)
                log.write(event="best", epoch=absolute, valid_loss=epoch_log.valid_loss)
            valid = f", valid loss {line['valid_loss']:.3f} (perplexity {line['valid_perplexity']:.1f})" if line["valid_loss"] is not None else ""
            say(
                f"epoch {absolute}{'' if complete else ' (cut short)'}: train loss {line['train_loss']:.3f}{valid}, "
                f"{line['tokens_per_second']:,.0f} target tokens/s, {_fmt_time(line['seconds'])} so far"
            )
            return False

        try:
            with signals:
                history = train(
                    trained,
                    batches_for,
                    valid_batches,
                    epochs=min(epochs_left, 10**6),
                    clip=s["clip"] or None,
                    pad_id=0,
                    label_smoothing=s["label_smoothing"],
                    optimizer=optimizer,
                    scheduler=scheduler,
                    seed=None,
                    plot=False,
                    verbose=False,
                    on_step=on_step,
                    on_epoch=on_epoch,
                )
        except _Interrupted:
            log.write(event="interrupted", position=tracker.position())
            say(f"interrupted: the state after step {tracker.position()['step']:,} is saved in {out}; continue with --resume")
            return 130
        reason = tracker.reason or history.stopped_by
        log.write(event="end", stopped_by=reason, position=tracker.position())
        say(f"done ({reason}): {out / CHECKPOINT_FILE}; next: attnbook-translate evaluate {out}")
        return 0
    finally:
        cluster.stop()


def _budget_text(budget: dict) -> str:
    parts = []
    if budget.get("minutes"):
        parts.append(f"{budget['minutes']:g} minutes")
    if budget.get("epochs"):
        parts.append(f"{budget['epochs']} epochs")
    if budget.get("steps"):
        parts.append(f"{budget['steps']} steps")
    return " or ".join(parts)


def _check_resume(args, config: dict) -> None:
    stored = config["settings"]
    for key, option in _RUN_OPTIONS.items():
        value = getattr(args, key)
        if value is not None and value != stored.get(key):
            raise CommandError(f"{option} {value} differs from the run being resumed ({stored.get(key)}): resume with the same settings, or train into a new --out")
    if args.pairs is not None:
        spec = config["pairs"]["path"]
        if args.pairs != spec and (args.pairs == "fra-eng" or Path(args.pairs).expanduser().resolve() != Path(spec)):
            raise CommandError(f"--pairs {args.pairs} is not the file of the run being resumed ({spec})")
    for option, key in (("--src", "src_lang"), ("--tgt", "tgt_lang")):
        value = getattr(args, option[2:])
        if value is not None and parse_language(value, option) != config[key]:
            raise CommandError(f"{option} {value} differs from the run being resumed ({config[key]})")


class _Log:
    """The training log: one JSON object a line, appended (first process only)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def write(self, **entry: Any) -> None:
        if self.path is None:
            return
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), **entry}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")


class _Tracker:
    """Where training is (epoch, step, time, tokens), the budgets, and when to save or stop.

    Every decision is taken on the first process and shared with the others
    (one small all-reduce per step), so that every process stops, and saves,
    after the same step.
    """

    def __init__(self, cluster: Cluster, budget: dict, position: dict, steps_per_epoch: int, first_epoch: int, skip: int, save_minutes: float, log_every: int) -> None:
        self.cluster, self.budget = cluster, budget
        self.steps_per_epoch = steps_per_epoch
        self.epoch, self.in_epoch = first_epoch, skip
        self.step_count, self.seconds_before, self.tokens_before = position["step"], position["seconds"], position["tokens"]
        self.start = time.monotonic()
        self.last_save = self.start
        self.save_seconds = save_minutes * 60
        self.tokens = self.step_tokens = 0
        self.log_every = max(1, log_every)
        self.stopping = False
        self.reason = ""
        self.progress = _Progress()

    def elapsed(self) -> float:
        return self.seconds_before + time.monotonic() - self.start

    def step(self, info) -> None:
        self.step_count += 1
        self.in_epoch += 1
        self.step_tokens = info.tokens

    def decide(self, interrupted: bool) -> tuple[bool, bool, bool]:
        budget = self.budget
        stop = 0.0
        if budget.get("steps") and self.step_count >= budget["steps"]:
            stop, self.reason = 1.0, f"step budget ({budget['steps']} steps)"
        if budget.get("minutes") and self.elapsed() >= budget["minutes"] * 60:
            stop, self.reason = 1.0, f"time budget ({budget['minutes']:g} minutes)"
        if budget.get("epochs") and self.in_epoch >= self.steps_per_epoch and self.epoch + 1 >= budget["epochs"]:
            self.reason = f"epoch budget ({budget['epochs']} epochs)"
        due = 1.0 if self.cluster.rank == 0 and time.monotonic() - self.last_save >= self.save_seconds else 0.0
        # one all-reduce a step: the flags (any process raising one counts) and the step's target tokens
        stop, due, interrupted_any, tokens = self.cluster.all_sum([stop, due, float(interrupted), float(self.step_tokens)])
        self.tokens += int(tokens)
        if due:
            self.last_save = time.monotonic()
        return bool(stop), bool(due), bool(interrupted_any)

    def position(self) -> dict:
        return {"epoch": self.epoch, "step_in_epoch": self.in_epoch, "step": self.step_count, "seconds": self.elapsed(), "tokens": self.tokens_before + self.tokens}

    def end_epoch(self, complete: bool) -> dict:
        if complete:
            self.epoch, self.in_epoch = self.epoch + 1, 0
        self.last_save = time.monotonic()
        return self.position()

    def tokens_per_second(self) -> float:
        return self.tokens / max(1e-9, time.monotonic() - self.start)

    def summary(self, loss: float, lr: float) -> dict:
        return {**self.position(), "loss": loss, "lr": lr, "tokens_per_second": self.tokens_per_second()}

    def show(self, loss: float) -> None:
        if not self.progress.enabled:
            return
        budget, done = self.budget, self.in_epoch / self.steps_per_epoch
        lefts = []
        rate = (time.monotonic() - self.start) / max(1, self.step_count - 0)
        if budget.get("minutes"):
            lefts.append(budget["minutes"] * 60 - self.elapsed())
        if budget.get("epochs"):
            steps_left = (budget["epochs"] - self.epoch) * self.steps_per_epoch - self.in_epoch
            lefts.append(steps_left * rate)
        if budget.get("steps"):
            lefts.append((budget["steps"] - self.step_count) * rate)
        eta = f" · ETA {_fmt_time(min(lefts))}" if lefts else ""
        self.progress.update(
            f"epoch {self.epoch + 1} {100 * done:3.0f}% · step {self.step_count:,} · loss {loss:.3f} · "
            f"{self.tokens_per_second():,.0f} tok/s{eta}"
        )


# =====================================================================================
# evaluate and translate
# =====================================================================================


def bleu_tokenizer(lang: str) -> str:
    """sacreBLEU's tokenizer for a target language.

    ``zh`` for Chinese; ``char`` for Japanese and the other languages written
    without spaces (``ja-mecab`` needs MeCab and its dictionary, which are
    not installed, and would score words rather than characters), ``13a``
    (sacreBLEU's default) for the rest.
    """
    if lang in ("zh", "yue"):
        return "zh"
    if lang in ("ja", "th", "lo", "km", "my"):
        return "char"
    return "13a"


def _decoding_options(args) -> tuple[int, float]:
    if args.beam < 1:
        raise CommandError(f"--beam must be at least 1 (1 is greedy decoding), got {args.beam}")
    if not args.alpha >= 0:
        raise CommandError(f"--alpha must be >= 0 (0: no length penalty), got {args.alpha}")
    if args.batch_size < 1:
        raise CommandError(f"--batch-size must be at least 1, got {args.batch_size}")
    return args.beam, args.alpha


def _device(name: str):
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise CommandError(f"--device {name!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise CommandError("--device cuda: PyTorch sees no GPU on this machine (use --device cpu)")
    return device


def cmd_evaluate(args) -> int:
    import sacrebleu

    beam, alpha = _decoding_options(args)
    if args.limit is not None and args.limit < 1:
        raise CommandError(f"--limit must be at least 1, got {args.limit}")
    run = open_run(args.dir, _device(args.device))
    config = run.config
    splits, source = _reread_run_pairs(config, args.pairs)
    test = splits["test"]
    if args.limit:
        test = test[: args.limit]
    if not test:
        raise CommandError(f"the test split of {args.pairs or config['pairs']['path']} is empty: the file holds too few pairs to hold some out")
    usable = [p for p in test if 0 < len(p._src_tok) <= MAX_POSITIONS]
    if len(usable) < len(test):
        note(f"{len(test) - len(usable)} test sentences longer than {MAX_POSITIONS} tokens are left out")
    start = time.perf_counter()
    outputs = translate_tokens(run.model, [p.src_tokens for p in usable], run.src_vocab, run.tgt_vocab, beam, alpha, args.batch_size, progress=True)
    seconds = time.perf_counter() - start
    lang = config["tgt_lang"]
    hyps = [to_text(t, lang, run.truecase) for t in outputs]
    refs = [p.tgt for p in usable]
    tok = bleu_tokenizer(lang)
    bleu = sacrebleu.metrics.BLEU(tokenize=tok)
    bleu_lc = sacrebleu.metrics.BLEU(tokenize=tok, lowercase=True)
    chrf = sacrebleu.metrics.CHRF()
    scores = [("BLEU", bleu.corpus_score(hyps, [refs]).score, bleu.get_signature()), ("BLEU, lowercase", bleu_lc.corpus_score(hyps, [refs]).score, bleu_lc.get_signature()), ("chrF", chrf.corpus_score(hyps, [refs]).score, chrf.get_signature())]
    name = "fra-eng" if source.path == "fra-eng" else Path(source.path).name
    decoding = "greedy" if beam == 1 else f"beam {beam}, α {alpha:g}"
    say(f"{config['src_lang']} → {config['tgt_lang']}, test split of {name}: {len(usable):,} sentences, {decoding}, {seconds:.1f} s")
    say(f"{'metric':<16}{'score':>7}  sacreBLEU signature")
    for metric, score, signature in scores:
        say(f"{metric:<16}{score:>7.1f}  {signature}")
    if args.show:
        for p, h in list(zip(usable, hyps))[: args.show]:
            say(f"\n  {p.src}\n→ {h}\n= {p.tgt}")
    return 0


def cmd_translate(args) -> int:
    from .data import tokenize

    beam, alpha = _decoding_options(args)
    run = open_run(args.dir, _device(args.device))
    src, tgt = run.config["src_lang"], run.config["tgt_lang"]

    def prepare(text: str, where: str) -> list[str]:
        tokens = tokenize(text, src)
        if not tokens:
            raise CommandError(f"{where} is empty: nothing to translate")
        if len(tokens) > MAX_POSITIONS:
            raise CommandError(f"{where} has {len(tokens)} tokens; this model reads at most {MAX_POSITIONS} (its positional table): split the sentence")
        return tokens

    def translate_all(texts: list[tuple[str, str]]) -> list[str]:
        # every sentence is checked before any is translated: a bad one stops the run before any output
        work = [(i, prepare(text, where)) for i, (text, where) in enumerate(texts) if text.strip() or where.startswith("argument")]
        for i, tokens in work:
            unknown = [t for t in dict.fromkeys(tokens) if t not in run.src_vocab]
            if unknown:
                shown = ", ".join(repr(t) for t in unknown[:8]) + (" ..." if len(unknown) > 8 else "")
                note(f"{texts[i][1]}: not in the {src} vocabulary, read as <unk>: {shown}")
        outputs = ["" for _ in texts]
        if work:
            tokens = translate_tokens(run.model, [t for _, t in work], run.src_vocab, run.tgt_vocab, beam, alpha, args.batch_size)
            for (i, _), out in zip(work, tokens):
                outputs[i] = to_text(out, tgt, run.truecase)
        return outputs

    if args.text:
        for line in translate_all([(text, f"argument {k + 1}") for k, text in enumerate(args.text)]):
            print(line, flush=True)
        return 0
    if sys.stdin is None:
        raise CommandError("nothing to translate: give sentences as arguments, or on standard input")
    if sys.stdin.isatty():  # a person typing: one answer per line, and a bad line is not the end
        status = 0
        for number, line in enumerate(sys.stdin, start=1):
            if not line.strip():
                print(flush=True)
                continue
            try:
                print(translate_all([(line.rstrip("\n"), f"line {number}")])[0], flush=True)
            except CommandError as err:
                print(f"attnbook-translate: error: {err}", file=sys.stderr, flush=True)
                status = 2
        return status
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    if not any(line.strip() for line in lines):
        raise CommandError("standard input holds no sentence to translate")
    for line in translate_all([(text, f"line {k + 1} of standard input") for k, text in enumerate(lines)]):
        print(line)
    sys.stdout.flush()
    return 0


# =====================================================================================
# The parser
# =====================================================================================


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attnbook-translate",
        description="Train a Transformer translator on Tatoeba/Anki sentence pairs, score it with sacreBLEU, and translate with it.",
        epilog="Example: attnbook-translate train --pairs cmn.txt --src en --tgt zh --out runs/en-zh --minutes 10",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    t = commands.add_parser(
        "train",
        help="train a translator on a pairs file",
        description="Train a translator. Files from manythings.org/anki have English in the first column: "
        "--src en --tgt de translates English into German; --src de --tgt en --reverse translates German into English.",
    )
    t.add_argument("--pairs", metavar="FILE", help="Tatoeba/Anki tab-separated file (sentence<TAB>translation[<TAB>attribution]), or fra-eng to download d2l's English–French file")
    t.add_argument("--src", metavar="LANG", help="the language to translate from (ISO code: en, fr, zh, ja, ...)")
    t.add_argument("--tgt", metavar="LANG", help="the language to translate into")
    t.add_argument("--reverse", action="store_true", help="the source sentences are in the file's second column")
    t.add_argument("--out", metavar="DIR", required=True, help="the run folder: checkpoint, vocabularies, configuration, log")
    budget = t.add_argument_group("budget (default: 10 minutes); whichever ends first")
    budget.add_argument("--minutes", type=float, metavar="M", help="train for M minutes of wall-clock time")
    budget.add_argument("--epochs", type=int, metavar="E", help="train for E passes over the training pairs")
    budget.add_argument("--steps", type=int, metavar="N", help="train for N optimizer steps")
    model = t.add_argument_group("model")
    model.add_argument("--arch", choices=["transformer", "rnn"], help="transformer (default) or chapter 3's GRU with attention")
    model.add_argument("--d-model", type=int, metavar="D", help=f"model width (default {DEFAULTS['d_model']})")
    model.add_argument("--heads", type=int, metavar="H", help=f"attention heads (default {DEFAULTS['heads']})")
    model.add_argument("--layers", type=int, metavar="L", help=f"encoder and decoder layers (default {DEFAULTS['layers']})")
    model.add_argument("--d-ff", type=int, metavar="F", help=f"feed-forward width (default {DEFAULTS['d_ff']})")
    model.add_argument("--dropout", type=float, metavar="P", help=f"dropout (default {DEFAULTS['dropout']}: {DROPOUT_NOTE})")
    norm = model.add_mutually_exclusive_group()
    norm.add_argument("--norm-first", dest="norm_first", action="store_const", const=True, help="pre-LN: normalize before each sublayer (default; trains stably with short warm-ups)")
    norm.add_argument("--post-norm", dest="norm_first", action="store_const", const=False, help="post-LN, as in the paper")
    recipe = t.add_argument_group("training")
    recipe.add_argument("--batch-tokens", type=int, metavar="N", help=f"padded tokens per batch and process (default {DEFAULTS['batch_tokens']})")
    recipe.add_argument("--warmup", type=int, metavar="W", help=f"warm-up steps of the learning-rate schedule (default {DEFAULTS['warmup']})")
    recipe.add_argument("--lr-factor", type=float, metavar="X", help=f"multiplies the schedule's learning rate (default {DEFAULTS['lr_factor']}; the paper: 1)")
    recipe.add_argument("--label-smoothing", type=float, metavar="E", help=f"(default {DEFAULTS['label_smoothing']})")
    recipe.add_argument("--clip", type=float, metavar="C", help=f"gradient-norm clipping, 0 for none (default {DEFAULTS['clip']})")
    recipe.add_argument("--max-length", type=int, metavar="N", help=f"leave out training pairs longer than N tokens (default {DEFAULTS['max_length']})")
    recipe.add_argument("--min-freq", type=int, metavar="N", help=f"vocabulary: tokens seen at least N times (default {DEFAULTS['min_freq']})")
    recipe.add_argument("--max-vocab", type=int, metavar="N", help=f"vocabulary: at most N tokens per language (default {DEFAULTS['max_vocab']})")
    recipe.add_argument("--seed", type=int, help="random seed (default 0)")
    recipe.add_argument("--dtype", choices=["float32", "float64"], help="float64 gives the same numbers on every CPU, at twice the time")
    t.add_argument("--resume", action="store_true", help="continue the interrupted run in --out exactly where it stopped")
    t.add_argument("--device", default="auto", help="auto (a GPU if there is one), cpu, cuda (under torchrun: each process its own GPU)")
    t.add_argument("--checkpoint-minutes", type=float, default=5.0, metavar="M", help="also save every M minutes (default 5)")
    t.add_argument("--log-every", type=int, default=50, metavar="N", help="log the loss every N steps (default 50)")
    t.set_defaults(func=cmd_train)

    e = commands.add_parser("evaluate", help="sacreBLEU and chrF on the held-out test pairs")
    e.add_argument("dir", metavar="DIR", help="a run folder written by train")
    e.add_argument("--pairs", metavar="FILE", help="the pairs file (default: the one the model was trained on); its test split is scored")
    e.add_argument("--limit", type=int, metavar="N", help="score only the first N test pairs")
    e.add_argument("--show", type=int, default=0, metavar="N", help="also print N translations beside their references")
    _decoding_arguments(e)
    e.set_defaults(func=cmd_evaluate)

    r = commands.add_parser("translate", help="translate sentences given as arguments, or standard input line by line")
    r.add_argument("dir", metavar="DIR", help="a run folder written by train")
    r.add_argument("text", nargs="*", metavar="TEXT", help="sentences to translate (none: read standard input, one sentence a line)")
    _decoding_arguments(r)
    r.set_defaults(func=cmd_translate)
    return parser


def _decoding_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=int, default=4, metavar="K", help="beam size, 1 for greedy decoding (default 4, as in the paper)")
    p.add_argument("--alpha", type=float, default=0.6, metavar="A", help="length penalty ((5 + |Y|) / 6)^A (default 0.6)")
    p.add_argument("--batch-size", type=int, default=64, metavar="N", help="sentences decoded together (default 64)")
    p.add_argument("--device", default="auto", help="auto (a GPU if there is one, the default), cpu, cuda or cuda:N")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 fine, 2 bad input, 130 interrupted)."""
    # PyTorch's CPU threads spin while they wait for each other; on a busy machine a thread that
    # spins while its partner is descheduled wastes the core: a training step took six times
    # longer with two threads on a loaded two-core machine. Passive waiting costs little when the
    # machine is idle. It must be set before PyTorch is imported (this module imports it lazily).
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
    try:
        return args.func(args)
    except CommandError as err:
        _Progress.clear()
        print(f"attnbook-translate: error: {err}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        _Progress.clear()
        print("attnbook-translate: interrupted", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:  # `... | head`: the reader left
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
