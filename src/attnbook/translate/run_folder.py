"""The run folder: everything ``evaluate`` and ``translate`` need from ``train``, and how it is read back.

=================  ====================================================================
``config.json``    languages, data file and split, model and training settings, budget
``vocab.src.json`` ``vocab.tgt.json``: the vocabularies
``subwords.model`` the SentencePiece model of a shared subword vocabulary (``subwords.src.model`` and
                   ``subwords.tgt.model`` when each language has its own); with ``--tokens words``:
``truecase.json``  the usual spelling of words that are not written in lower case
``decoding.json``  the decoding chosen on the validation pairs: beam size, length penalty, longest output
``checkpoint.pt``  weights, model configuration and the training state, ``weights_only``-loadable
``best.pt``        the weights of the epoch with the lowest validation loss
``log.jsonl``      the training log, one JSON object a line
=================  ====================================================================

Every file is written whole or not at all (to a temporary file, then renamed
over the old one; checkpoints through :func:`attnbook.train.save_checkpoint`),
so a run stopped at any moment leaves a folder that can be read and resumed.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..data import Vocab
from ..train import CheckpointMismatch, load_checkpoint, read_checkpoint
from .console import PROGRAM, CommandError, Console
from .model import build_model, precision
from .tokens import RunTokens

__all__ = [
    "RUN_FORMAT",
    "CONFIG_FILE",
    "CHECKPOINT_FILE",
    "BEST_FILE",
    "LOG_FILE",
    "DECODING_FILE",
    "SRC_VOCAB_FILE",
    "TGT_VOCAB_FILE",
    "Run",
    "read_config",
    "read_vocabularies",
    "read_decoding",
    "open_run",
    "best_valid_loss",
    "one_line",
    "TrainingLog",
]

RUN_FORMAT = "attnbook-translator-v1"
#: Settings that earlier versions stored under other names (``--heads``, ``--layers``): read as today's.
LEGACY_SETTINGS = {"heads": "num_heads", "layers": "num_layers"}
CONFIG_FILE, CHECKPOINT_FILE, BEST_FILE = "config.json", "checkpoint.pt", "best.pt"
LOG_FILE, DECODING_FILE = "log.jsonl", "decoding.json"
#: What a run written before subwords existed used (its config.json has no "tokens" and "vocab" settings).
LEGACY_DEFAULTS = {
    "tokens": "words",
    "vocab": "separate",
    "average": 1,
    "late_dropout": 0.0,
    "pieces": 4000,
    "test_split": True,
}
SRC_VOCAB_FILE, TGT_VOCAB_FILE = "vocab.src.json", "vocab.tgt.json"


@dataclass
class Run:
    """A trained run folder, read back: configuration, vocabularies, spelling table, model."""

    folder: Path
    config: dict
    src_vocab: Vocab
    tgt_vocab: Vocab
    tokens: RunTokens
    model: Any = None
    extra: dict = field(default_factory=dict)
    decoding: dict = field(default_factory=dict)  # decoding.json: the decoding chosen on the validation pairs


def read_config(folder: Path) -> dict:
    """The run's ``config.json``, checked; a :class:`CommandError` that says what to do when it is not there."""
    path = folder / CONFIG_FILE
    train_one = f"train one with '{PROGRAM} train ... --out {folder}'"
    if not folder.exists():
        raise CommandError(f"no run folder at {str(folder)!r}: {train_one}")
    if not folder.is_dir():
        raise CommandError(f"{str(folder)!r} is a file, not a run folder (the --out folder of '{PROGRAM} train')")
    if not path.is_file():
        raise CommandError(f"{str(folder)!r} holds no trained model ({CONFIG_FILE} is missing): {train_one}")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CommandError(f"{path} is damaged (not JSON: {err})") from None
    if not isinstance(config, dict) or config.get("format") != RUN_FORMAT:
        raise CommandError(f"{path} is not the configuration of a run of this program (expected format {RUN_FORMAT!r})")
    for key in ("src_lang", "tgt_lang", "arch", "model", "settings", "pairs", "held_out"):
        if key not in config:
            raise CommandError(f"{path} is incomplete: it has no {key!r}")
    settings = config["settings"]
    for old, new in LEGACY_SETTINGS.items():  # a run folder written before the settings took the library's names
        if isinstance(settings, dict) and old in settings and new not in settings:
            settings[new] = settings.pop(old)
    if isinstance(settings, dict):
        for name, value in LEGACY_DEFAULTS.items():
            settings.setdefault(name, value)
    return config


def read_vocabularies(folder: Path) -> tuple[Vocab, Vocab]:
    """The source and target vocabularies of a run."""
    try:
        return Vocab.load(folder / SRC_VOCAB_FILE), Vocab.load(folder / TGT_VOCAB_FILE)
    except (OSError, ValueError) as err:
        raise CommandError(f"the vocabularies of {str(folder)!r} cannot be read: {err}") from None


def read_decoding(folder: Path, console: Console) -> dict:
    """The decoding chosen when the run was trained (``decoding.json``), or nothing."""
    path = folder / DECODING_FILE
    if not path.is_file():
        return {}
    try:
        chosen = json.loads(path.read_text(encoding="utf-8"))["chosen"]
        if "beam" in chosen and "beam_size" not in chosen:  # written before the setting's one name
            chosen["beam_size"] = chosen["beam"]
        return {k: chosen[k] for k in ("beam_size", "alpha", "max_len_a", "max_len_b") if k in chosen}
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        console.note(f"{DECODING_FILE} is damaged: the default decoding is used")
        return {}


def open_run(folder: str | Path, console: Console, device: torch.device | None = None) -> Run:
    """Read a run folder, rebuild its model and load the best weights (else the last ones) onto ``device``."""
    folder = Path(folder).expanduser()
    config = read_config(folder)
    src_vocab, tgt_vocab = read_vocabularies(folder)
    sizes = (config["model"].get("src_vocab_size"), config["model"].get("tgt_vocab_size"))
    if sizes != (len(src_vocab), len(tgt_vocab)):
        raise CommandError(
            f"the vocabularies in {str(folder)!r} ({len(src_vocab)} and {len(tgt_vocab)} tokens) "
            f"do not fit the model's configuration {sizes}"
        )
    tokens = RunTokens.load(folder, config, console)
    run = Run(folder, config, src_vocab, tgt_vocab, tokens, decoding=read_decoding(folder, console))
    if not (folder / CHECKPOINT_FILE).is_file():
        raise CommandError(
            f"{str(folder)!r} has no checkpoint yet ({CHECKPOINT_FILE} is missing): training stopped before its "
            f"first save; continue it with '{PROGRAM} train --out {folder} --resume'"
        )
    model = build_model(config["arch"], config["model"])
    model.to(precision(config["settings"].get("dtype", "float32"))[0])
    try:  # the weights of the epoch with the lowest validation loss, else the last ones
        run.extra = load_checkpoint(folder / BEST_FILE, model)
    except (FileNotFoundError, CheckpointMismatch) as best_error:
        try:
            run.extra = load_checkpoint(folder / CHECKPOINT_FILE, model)
        except CheckpointMismatch as err:
            raise CommandError(f"incompatible checkpoint in {str(folder)!r}: {one_line(err)}") from None
        if isinstance(best_error, CheckpointMismatch):
            console.note(f"{BEST_FILE} cannot be used ({one_line(best_error)}): the last checkpoint is used instead")
    run.model = model.to(device or "cpu").eval()
    return run


def best_valid_loss(folder: Path) -> float:
    """The validation loss stored with the best weights so far (infinity when there are none, or unreadable ones)."""
    try:
        return float(read_checkpoint(folder / BEST_FILE)["extra"]["valid_loss"])
    except Exception:  # no best.pt yet, or a damaged one: the next epoch writes a new one
        return math.inf


def one_line(err: BaseException) -> str:
    """An exception as one line: PyTorch's unpickling errors run over many."""
    text = str(err)
    if "is not a readable checkpoint" in text:
        return text.split(": ")[0] + f" is damaged or not a checkpoint ({text.split(': ')[1]})"
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    return first if len(first) <= 400 else first[:400] + " ..."


class TrainingLog:
    """The training log, ``log.jsonl``: one JSON object a line, appended; ``None`` writes nothing."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def write(self, **entry: Any) -> None:
        if self.path is None:
            return
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), **entry}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
