"""The settings of the command line, each declared once: its default, its help, its rule.

Dataclasses hold every setting the commands take:

- :class:`RunSettings`, what defines a run (the model and the training
  recipe): stored in the run folder's ``config.json``, and a resumed run must
  agree with them;
- :class:`Decoding`, how ``evaluate`` and ``translate`` decode;
- and, declared the same way beside the decisions it takes,
  :class:`~attnbook.translate.budget.Budget`, how long to train (``--minutes``,
  ``--epochs``, ``--steps``), which a resumed run may extend.

Each field is declared with :func:`setting`: its default, its help text, and
the rule its value must follow. The parser's options (:func:`add_options`),
the values of a command (:func:`from_args`), the run folder's configuration
(``dataclasses.asdict``) and the check on resuming (:func:`given`) are all
derived from these declarations. The rules of the model itself (``--d-model``
divisible by ``--num-heads``, a dropout below 1, ...) are not repeated here: the
model's configuration enforces them (:mod:`attnbook.translate.model`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from .console import CommandError

__all__ = [
    "Option",
    "AUTO",
    "AUTO_DROPOUT",
    "AUTO_DROPOUT_EPOCHS",
    "MORE_DROPOUT",
    "MORE_DROPOUT_EPOCHS",
    "auto_dropout",
    "FEW_PASSES",
    "FEW_PASSES_FROM",
    "FEW_PASSES_RECIPE",
    "few_passes_recipe",
    "setting",
    "RunSettings",
    "Decoding",
    "add_options",
    "from_args",
    "given",
    "flag",
    "option_name",
]

#: ``--dropout auto`` (the default): 0.1, the paper's, when the budget allows at least this many passes over the
#: training pairs, else none. Over one pass dropout only slows learning down (book/results/translate_dropout.json
#: scores held-out pairs with and without it); from about five passes over a small file it keeps the model from
#: learning its training pairs by heart (book/results/translate_sweep_dropout.json).
AUTO, AUTO_DROPOUT, AUTO_DROPOUT_EPOCHS = "auto", 0.1, 4
#: ... and this much from this many passes: at nine passes 0.1 no longer kept the validation loss from rising, and
#: 0.2 did (book/results/translate_sweep_dropout_nine_passes.json); at four and a half and at six passes 0.2 did
#: worse than 0.1 (translate_sweep_dropout.json, translate_sweep_dropout_seven_minutes.json); 0.3 at nine did worse
#: than 0.2 (translate_sweep_dropout_nine_passes_0.3.json).
MORE_DROPOUT, MORE_DROPOUT_EPOCHS = 0.2, 8
DROPOUT_NOTE = (
    f"auto: {AUTO_DROPOUT:g} when the budget allows {AUTO_DROPOUT_EPOCHS} or more epochs, "
    f"{MORE_DROPOUT:g} from {MORE_DROPOUT_EPOCHS}, else 0"
)


def auto_dropout(epochs: float) -> float:
    """The dropout ``--dropout auto`` chooses for a budget of ``epochs`` passes over the training pairs."""
    if epochs >= MORE_DROPOUT_EPOCHS:
        return MORE_DROPOUT
    return AUTO_DROPOUT if epochs >= AUTO_DROPOUT_EPOCHS else 0.0


#: A run whose time budget allows from ``FEW_PASSES_FROM`` up to (not including) ``FEW_PASSES`` passes over the
#: training pairs (measured with the model the settings make, before training) trains by
#: :data:`FEW_PASSES_RECIPE` in whatever the command line left to the defaults. The defaults were tuned where ten
#: minutes allowed four to nine passes, and stay there and above. On one core of a processor without bfloat16
#: instructions, ten minutes allowed about two passes from Chinese to English, where the recipe scored 16.9 BLEU
#: against 15.3 for the defaults, and less than one from English to French, where it scored 21.6 against 24.0
#: (book/results/translator_one_core_tuning.json): when nearly every step sees pairs for the first time, a
#: narrower model and a rate that falls to zero learn less from each, and the defaults stay below
#: ``FEW_PASSES_FROM`` too.
FEW_PASSES_FROM, FEW_PASSES = 1.5, 4
#: The recipe for few passes: a narrower feed-forward layer, so that each step costs less and the budget allows
#: more of them, and a rate that falls in a straight line to zero at the end of the budget, so that the last steps
#: settle the weights.
FEW_PASSES_RECIPE = {"d_ff": 256, "decay": "linear"}


def few_passes_recipe(passes: float, chosen: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """The settings a run changes for a budget of ``passes`` passes: :data:`FEW_PASSES_RECIPE` from
    :data:`FEW_PASSES_FROM` up to :data:`FEW_PASSES`, else none; never a setting named in ``chosen`` (those the
    command line gave)."""
    if not FEW_PASSES_FROM <= passes < FEW_PASSES:
        return {}
    return {name: value for name, value in FEW_PASSES_RECIPE.items() if name not in chosen}


FEW_PASSES_NOTE = f"from {FEW_PASSES_FROM:g} up to {FEW_PASSES:g} passes in a time budget on a CPU"

MODELS, DTYPES = ("transformer", "rnn"), (AUTO, "float32", "float64", "bfloat16")
#: How the learning rate falls after the warm-up: as the paper's, or in a straight line to zero at the budget's end
#: (each one's schedule: :data:`attnbook.translate.recipe.SCHEDULES`).
DECAYS = ("inverse-sqrt", "linear")
#: What a run reads and writes: subword pieces (SentencePiece) or chapter 1's words; one subword model or two.
TOKEN_KINDS, VOCAB_SHARING = ("subwords", "words"), ("auto", "shared", "separate")

Rule = Callable[[Any], "str | None"]  # the complaint about a value, or None when it is fine


def at_least(low: float, why: str = "") -> Rule:
    return lambda v: None if v >= low else f"must be at least {low:g}{why}, got {v:g}"


def above(low: float, why: str = "") -> Rule:
    return lambda v: None if v > low else f"must be > {low:g}{why}, got {v:g}"


def not_negative(why: str = "") -> Rule:
    return lambda v: None if v >= 0 else f"must be >= 0{why}, got {v:g}"


def probability(v: float) -> str | None:
    return None if 0 <= v < 1 else f"must be in [0, 1), got {v:g}"


def dropout_value(text: str) -> float | str:
    """``--dropout``: ``auto`` or a number."""
    if text == AUTO:
        return AUTO
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or a number in [0, 1), got {text!r}") from None


@dataclass(frozen=True)
class Option:
    """How a setting appears on the command line; a field's ``metadata["option"]``."""

    help: str
    group: str = ""
    metavar: str | None = None
    kind: type | None = None  # the type of its values: the default's unless said
    choices: tuple[str, ...] | None = None
    rule: Rule | None = None
    off: tuple[str, str] | None = None  # a True/False setting: the flag that turns it off, and its help
    aliases: tuple[str, ...] = ()  # older spellings of the flag, still accepted
    flag: str | None = None  # the flag, when it is not the field's name (a budget's seconds are given in --minutes)


def setting(default: Any, help: str, **option: Any) -> Any:
    """A dataclass field that is also a command-line option; see :class:`Option` for the keywords."""
    return field(default=default, metadata={"option": Option(help, **option)})


def vocabulary_size(help: str, low: int, why: str) -> Any:
    """A cap of N entries on a vocabulary (``--pieces``, ``--max-vocab``): 8000 unless said, N >= ``low``."""
    return setting(8000, help, group="vocabulary", metavar="N", rule=at_least(low, why))


def flag(name: str) -> str:
    """The command-line flag of a setting: ``d_model`` → ``--d-model``."""
    return "--" + name.replace("_", "-")


def _flag_of(f: Field) -> str:
    """The flag of a declared field: its option's own, else its name's."""
    return f.metadata["option"].flag or flag(f.name)


@dataclass(frozen=True)
class RunSettings:
    """What defines a run: the model and the training recipe (stored in ``config.json``).

    The defaults make a model that learns fast on a CPU: two pre-LN layers of
    width 256, small batches and a short warm-up, so that a run of minutes makes
    many optimizer steps. book/running.md names the recorded runs that measured
    the recipe.
    """

    arch: str = setting("transformer", "transformer, or chapter 3's GRU with attention", group="model", choices=MODELS)
    d_model: int = setting(256, "model width", group="model", metavar="D")
    num_heads: int = setting(4, "attention heads", group="model", metavar="H")
    num_layers: int = setting(2, "encoder and decoder layers", group="model", metavar="L")
    d_ff: int = setting(
        1024, f"feed-forward width ({FEW_PASSES_RECIPE['d_ff']} {FEW_PASSES_NOTE})", group="model", metavar="F"
    )
    dropout: float | str = setting(
        AUTO,
        f"dropout on the sublayers' outputs and the embeddings ({DROPOUT_NOTE})",
        group="model",
        metavar="P",
        kind=dropout_value,  # a number's rule is the model's (a probability)
    )
    late_dropout: float = setting(
        0.0,
        "dropout from the first epoch whose validation loss is not the lowest so far (0: never)",
        group="model",
        metavar="P",
        rule=probability,
    )
    norm_first: bool = setting(
        True,
        "pre-LN: normalize before each sublayer (default; trains stably with short warm-ups)",
        group="model",
        off=("--post-norm", "post-LN, as in the paper"),
    )
    batch_tokens: int = setting(
        700, "padded tokens per batch and process", group="training", metavar="N", rule=at_least(1)
    )
    warmup: int = setting(
        200, "warm-up steps of the learning-rate schedule", group="training", metavar="W", rule=at_least(1)
    )
    lr_factor: float = setting(
        0.45,
        "multiplies the schedule's learning rate (the paper: 1); the peak is X / sqrt(d_model * warmup), "
        "0.002 by default",
        group="training",
        metavar="X",
        rule=above(0),
    )
    decay: str = setting(
        "inverse-sqrt",
        "after the warm-up the learning rate falls as 1/sqrt(step), as in the paper (inverse-sqrt), "
        f"or in a straight line to zero at the end of the budget (linear; the default {FEW_PASSES_NOTE})",
        group="training",
        choices=DECAYS,
    )
    label_smoothing: float = setting(0.1, "label smoothing", group="training", metavar="E", rule=probability)
    clip: float = setting(
        1.0, "gradient-norm clipping, 0 for none", group="training", metavar="C", rule=not_negative(" (0: no clipping)")
    )
    max_length: int = setting(
        50, "leave out training pairs longer than N tokens", group="training", metavar="N", rule=at_least(1)
    )
    test_split: bool = setting(
        True,
        "hold out about 2,000 pairs of the file as the test split that evaluate scores by default",
        group="training",
        off=(
            "--no-test-split",
            "train on those pairs too, when the test pairs are a file of their own (evaluate --test FILE)",
        ),
    )
    tokens: str = setting(
        "subwords",
        "subwords: byte-pair pieces learned with SentencePiece, never <unk>; words: chapter 1's words",
        group="vocabulary",
        choices=TOKEN_KINDS,
    )
    vocab: str = setting(
        "auto",
        "subwords: one vocabulary for both languages (shared), one each (separate), "
        "or shared when both are written in one script (auto)",
        group="vocabulary",
        choices=VOCAB_SHARING,
    )
    pieces: int = vocabulary_size(
        "subwords: at most N pieces per vocabulary, 256 bytes included", 300, " (256 of them are bytes)"
    )
    bpe_dropout: float = setting(
        0.0,
        "subwords: every epoch, split the training source sentences anew, each merge left out with probability P "
        "(BPE-dropout; 0: off)",
        group="vocabulary",
        metavar="P",
        rule=probability,
    )
    max_vocab: int = vocabulary_size("words: at most N tokens per language", 5, " (4 reserved tokens and a word)")
    min_freq: int = setting(
        2, "words: keep the words seen at least N times", group="vocabulary", metavar="N", rule=at_least(1)
    )
    average: int = setting(
        5,
        "also average N snapshots of the weights spread over the last fifth of the steps, "
        "kept if that lowers the validation loss (1: off)",
        group="training",
        metavar="N",
        rule=at_least(1),
    )
    seed: int = setting(0, "random seed", group="training")
    compile: bool = setting(
        False,
        "compile the model with torch.compile after the first step (it takes a minute to compile: worth it for "
        "long runs on a GPU, where it fuses the many small operations between the matrix products; "
        "book/running.md has the measurements)",
        group="training",
        off=("--no-compile", "run the model as it is written (default)"),
    )
    dtype: str = setting(
        AUTO,
        "bfloat16: mixed precision (float32 weights, bfloat16 matrix products), fast only where the processor has "
        "bfloat16 instructions (AVX512-BF16, AMX) or the GPU supports it; auto: bfloat16 there, float32 elsewhere; "
        "float64: the same numbers on any CPU, and slower",
        group="training",
        choices=DTYPES,
    )


@dataclass(frozen=True)
class Decoding:
    """How ``evaluate`` and ``translate`` turn a source sentence into its translation."""

    beam_size: int = setting(
        4,
        "beam size, 1 for greedy decoding (default: the run's choice, else 4, the paper's); --beam is the same",
        metavar="K",
        rule=at_least(1, " (1 is greedy decoding)"),
        aliases=("--beam",),
    )
    alpha: float = setting(
        0.6,
        "length penalty ((5 + |Y|) / 6)^A (default: the run's choice, else 0.6)",
        metavar="A",
        rule=not_negative(" (0: no length penalty)"),
    )
    max_len_a: float = setting(
        1.0,
        "translations have at most A × source tokens + B tokens (default: the run's choice, else 1)",
        metavar="A",
        rule=above(0),
    )
    max_len_b: int = setting(
        50, "(see --max-len-a; default: the run's choice, else 50, the paper's)", metavar="B", rule=at_least(0)
    )
    batch_size: int = setting(64, "sentences decoded together", metavar="N", rule=at_least(1))
    device: str = setting("auto", "auto (a GPU if there is one), cpu, cuda or cuda:N")


def add_options(parser: argparse.ArgumentParser, cls: type, groups: dict[str, Any] | None = None) -> None:
    """Add an option for each field of ``cls`` to ``parser`` (or to its argument group in ``groups``).

    Every option defaults to ``None``, so that :func:`given` can tell what the
    command line said; :func:`from_args` puts the field's default in its place.
    """
    for f in fields(cls):
        option: Option = f.metadata["option"]
        where = (groups or {}).get(option.group, parser)
        shown = f" (default {f.default})" if f.default is not None else ""
        if option.off is not None:  # a pair of flags, one for True and one for False
            pair = where.add_mutually_exclusive_group()
            pair.add_argument(_flag_of(f), dest=f.name, action="store_const", const=True, help=option.help)
            pair.add_argument(option.off[0], dest=f.name, action="store_const", const=False, help=option.off[1])
            continue
        where.add_argument(
            _flag_of(f),
            *option.aliases,
            dest=f.name,
            type=option.kind or type(f.default),
            metavar=option.metavar,
            choices=option.choices,
            help=option.help + shown,
        )


def from_args(cls: type, args: argparse.Namespace, stored: dict | None = None) -> Any:
    """An instance of ``cls``: what the command line gave, else what ``stored`` holds, else the default; checked."""
    values = {}
    for f in fields(cls):
        given_value = getattr(args, f.name, None)
        if given_value is not None:
            values[f.name] = given_value
        elif stored is not None and f.name in stored:
            values[f.name] = stored[f.name]
        else:
            values[f.name] = f.default if f.default is not MISSING else None
    instance = cls(**values)
    check(instance)
    return instance


def check(instance: Any) -> None:
    """Raise a :class:`CommandError` naming the option whose value breaks its rule."""
    for f in fields(instance):
        rule = f.metadata["option"].rule
        value = getattr(instance, f.name)
        complaint = rule(value) if rule is not None and value is not None else None
        if complaint:
            raise CommandError(f"{_flag_of(f)} {complaint}")


def given(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``cls`` that the command line set, with their values."""
    return {f.name: getattr(args, f.name) for f in fields(cls) if getattr(args, f.name, None) is not None}


def option_name(cls: type, name: str) -> str:
    """How the command line spells a field: ``--norm-first/--post-norm`` for a pair of flags."""
    declared = next(f for f in fields(cls) if f.name == name)
    option: Option = declared.metadata["option"]
    return _flag_of(declared) + (f"/{option.off[0]}" if option.off else "")
