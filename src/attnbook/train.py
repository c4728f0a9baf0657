"""The training loop that every chapter uses, its loss and the paper's recipe, and checkpoints.

:func:`train` takes any sequence-to-sequence model that follows the library's
protocol (``model(src, src_padding_mask, tgt_in) -> logits (B, T, V)`` and a
``model.config`` dataclass) and batches with the fields of
:class:`attnbook.data.Batch`. Each epoch it trains with teacher forcing,
clipping the gradient norm, then measures the loss on the validation batches.
In a notebook it draws the loss curve with the figure that
:func:`attnbook.notebook.setup` passes in (:func:`use_loss_figure`); the
library itself draws nothing.

The recipe of Vaswani et al. (2017), chapter 8: :class:`NoamSchedule`, the
learning rate that warms up linearly and then decays as the inverse square root
of the step; :func:`paper_optimizer`, Adam with beta = (0.9, 0.98) and
eps = 1e-9 driven by that schedule; and label smoothing in
:func:`sequence_loss`, in a variant that keeps the mass off ``<pad>``
(:func:`smoothed_targets` spells out its target distribution).

Everything here is written to be read, and the chapters show it. The command
line's translator trains the same recipe with faster pieces and a schedule
fitted to its budget (:mod:`attnbook.translate.recipe`), in a loop of its own
(:mod:`attnbook.translate.train`); nothing here imports them.

A checkpoint stores the weights and, beside them, the model's configuration;
loading it into a model built from another configuration is an error that
names the differences. Checkpoints are written atomically (a save cut short
leaves the previous file) and read with ``weights_only=True``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from . import train_cache
from .checks import values_checked
from .files import written_whole

__all__ = [
    "sequence_loss",
    "smoothed_targets",
    "noam_lr",
    "NoamSchedule",
    "paper_optimizer",
    "evaluate",
    "EpochLog",
    "TrainStep",
    "History",
    "train",
    "use_loss_figure",
    "save_checkpoint",
    "read_checkpoint",
    "load_checkpoint",
    "CheckpointMismatch",
]

CHECKPOINT_FORMAT = "attnbook-checkpoint-v1"


# --- The loss ---------------------------------------------------------------


def _check_smoothing(label_smoothing: float, vocab: int) -> float:
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)):
        raise TypeError(f"label_smoothing must be a number in [0, 1), got {label_smoothing!r}")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    if label_smoothing > 0 and vocab < 3:
        raise ValueError(
            f"label smoothing needs a vocabulary of at least 3 tokens (the true one, <pad>, another), got {vocab}"
        )
    return float(label_smoothing)


def _check_loss_inputs(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float, reduction: str):
    """The vocabulary size and the smoothing of a loss's inputs; a clear error when they do not fit."""
    if logits.dim() != 3:
        raise ValueError(f"logits must have shape (B, T, V), got shape {tuple(logits.shape)}")
    if targets.shape != logits.shape[:2]:
        raise ValueError(
            f"targets of shape {tuple(targets.shape)} do not match "
            f"logits of shape {tuple(logits.shape)} (expected (B, T))"
        )
    if targets.is_floating_point() or targets.dtype == torch.bool:
        raise TypeError(f"targets must hold integer token indices, got dtype {targets.dtype}")
    vocab = logits.shape[-1]
    if values_checked() and targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= vocab):
        bad = int(targets.min()) if int(targets.min()) < 0 else int(targets.max())
        raise IndexError(f"target index {bad} is outside the vocabulary of size {vocab}")
    if reduction not in {"mean", "sum"}:
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    eps = _check_smoothing(label_smoothing, vocab)
    return vocab, eps


def smoothed_targets(targets: torch.Tensor, vocab_size: int, label_smoothing: float, pad_id: int = 0) -> torch.Tensor:
    """The target distribution of label smoothing, ``(*targets.shape, vocab_size)``.

    The library's variant of the target of Szegedy et al. (2016), which gives
    every class ``label_smoothing / vocab_size`` on top of
    ``(1 - label_smoothing) * one_hot`` (see :func:`sequence_loss`): here the
    true class gets ``1 - label_smoothing``, and the rest is spread evenly over
    the ``vocab_size - 2`` classes that are neither the true one nor ``<pad>``.
    ``<pad>`` gets nothing, because it is never a correct next token: mass on it
    would teach the model to write a token it must never write. Rows whose
    target is ``<pad>`` are all zero: padding positions carry no loss.
    """
    eps = _check_smoothing(label_smoothing, vocab_size)
    dist = torch.full((*targets.shape, vocab_size), eps / (vocab_size - 2) if vocab_size > 2 else 0.0)
    dist[..., pad_id] = 0.0
    dist.scatter_(-1, targets[..., None], 1.0 - eps)
    return dist.masked_fill((targets == pad_id)[..., None], 0.0)


def sequence_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    pad_id: int = 0,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy of ``logits (B, T, V)`` against ``targets (B, T)``, ignoring padding.

    ``reduction="mean"`` averages over the real (non-padding) target tokens of
    the whole batch, so that every token counts once whatever its sentence's
    length; ``"sum"`` returns the total, for averaging over many batches.

    With ``label_smoothing = eps > 0`` the target is no longer one-hot: the true
    class gets ``1 - eps`` and each of the ``V - 2`` classes that are neither the
    true one nor ``<pad>`` gets ``eps / (V - 2)`` (see :func:`smoothed_targets`),
    so the loss of a token is ``-(1 - eps) log p_y - eps / (V - 2) * sum log p_c``.
    This is the library's variant. The Transformer paper gives no formula; it
    cites Szegedy et al. (2016), whose target is ``(1 - eps) * one_hot + eps / V``
    over all ``V`` classes (the true class gets ``1 - eps + eps / V``, ``<pad>``
    gets ``eps / V``), exactly what PyTorch's ``label_smoothing`` argument
    computes. The variant gives ``<pad>``, never a correct next token, nothing.
    """
    vocab, eps = _check_loss_inputs(logits, targets, label_smoothing, reduction)
    log_probs = torch.log_softmax(logits, dim=-1)  # (B, T, V), once for both terms
    # sum of -log p_y: F.cross_entropy is this log_softmax followed by this nll_loss
    total = F.nll_loss(log_probs.reshape(-1, vocab), targets.reshape(-1), ignore_index=pad_id, reduction="sum")
    real = targets != pad_id  # (B, T)
    if eps > 0:
        # -sum of log p_c over the classes c that are neither y nor <pad>, without building (B, T, V) targets
        others = -log_probs.sum(-1) + log_probs.gather(-1, targets[..., None]).squeeze(-1) + log_probs[..., pad_id]
        total = (1.0 - eps) * total + eps / (vocab - 2) * others.masked_fill(~real, 0.0).sum()
    if reduction == "sum":
        return total
    n_tokens = int(real.sum())
    if n_tokens == 0:
        raise ValueError("the targets hold no real tokens (everything is padding)")
    return total / n_tokens


def _device_of(model: nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable, pad_id: int = 0) -> float:
    """Mean loss per real target token over ``batches``, in evaluation mode."""
    was_training = model.training
    model.eval()
    device = _device_of(model)
    total, tokens = 0.0, 0
    try:
        for batch in batches:
            batch = batch.to(device)
            logits = model(batch.src, batch.src_padding_mask, batch.tgt_in)
            total += float(sequence_loss(logits, batch.tgt_out, pad_id, reduction="sum"))
            tokens += int((batch.tgt_out != pad_id).sum())
    finally:
        model.train(was_training)
    if tokens == 0:
        raise ValueError("evaluate() got no batches (or only padding)")
    return total / tokens


# --- The recipe: warm-up schedule and optimizer ------------------------------------


def noam_lr(step: int | torch.Tensor, d_model: int, warmup: int = 4000, factor: float = 1.0):
    """The paper's learning rate at optimizer step ``step`` (1, 2, ...).

    ``factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)``: it grows
    linearly for ``warmup`` steps, peaks at ``factor / sqrt(d_model * warmup)``,
    then decays as ``1 / sqrt(step)``. Works on an int or a tensor of steps.
    """
    if isinstance(step, torch.Tensor):
        if (step < 1).any():
            raise ValueError("steps count from 1")
        step = step.double()
        return factor * d_model**-0.5 * torch.minimum(step**-0.5, step * warmup**-1.5)
    if step < 1:
        raise ValueError(f"steps count from 1, got {step}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


class NoamSchedule(torch.optim.lr_scheduler.LRScheduler):
    """The learning-rate schedule of Vaswani et al. (2017), as a PyTorch scheduler.

    ``lrate = factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)``,
    where ``step`` counts optimizer steps from 1 (see :func:`noam_lr`): the
    first ``optimizer.step()`` uses the rate of step 1, and each call of
    ``scheduler.step()`` (once per batch) moves to the next step. The rate is
    set outright: the optimizer's own ``lr`` is ignored. ``factor`` scales the
    whole curve (the paper uses 1; small models often train better with 2).
    ``state_dict()`` / ``load_state_dict()`` resume it where it stopped.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        d_model: int,
        warmup: int = 4000,
        factor: float = 1.0,
        last_epoch: int = -1,
    ) -> None:
        if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"d_model must be an int >= 1, got {d_model!r}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
            raise ValueError(f"warmup must be an int >= 1 (steps), got {warmup!r}")
        if not factor > 0:
            raise ValueError(f"factor must be > 0, got {factor!r}")
        self.d_model, self.warmup, self.factor = d_model, warmup, float(factor)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        # last_epoch is 0 after construction: the coming optimizer step is step 1
        lr = noam_lr(self.last_epoch + 1, self.d_model, self.warmup, self.factor)
        return [lr for _ in self.optimizer.param_groups]

    _get_closed_form_lr = get_lr


def _adam(parameters, **options) -> torch.optim.Adam:
    """Adam updating all its tensors with one operation per step of its formula (``foreach``), not one per tensor:
    the same arithmetic, element for element, as the per-tensor loop PyTorch picks by default on a CPU, with a tenth
    of the calls, which a small model's step feels (tests/test_train.py holds the two equal bit for bit)."""
    return torch.optim.Adam(parameters, foreach=True, **options)


def paper_optimizer(
    model: nn.Module,
    *,
    d_model: int | None = None,
    warmup: int = 4000,
    factor: float = 1.0,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-9,
) -> tuple[torch.optim.Adam, NoamSchedule]:
    """The paper's optimizer: Adam with beta = (0.9, 0.98), eps = 1e-9, and its :class:`NoamSchedule`.

    Returns ``(optimizer, scheduler)``, ready for :func:`train`
    (``train(..., optimizer=opt, scheduler=sched)``, which steps the scheduler
    after every batch). ``d_model`` defaults to ``model.config.d_model``.
    """
    if d_model is None:
        d_model = getattr(getattr(model, "config", None), "d_model", None)
        if d_model is None:
            raise ValueError(f"{type(model).__name__} has no config.d_model; pass d_model= explicitly")
    optimizer = _adam(model.parameters(), lr=1.0, betas=betas, eps=eps)
    return optimizer, NoamSchedule(optimizer, d_model, warmup, factor)


# --- What training records ------------------------------------------------------


@dataclass
class EpochLog:
    """One epoch: mean training loss per token, validation loss (if any), and its duration."""

    epoch: int
    train_loss: float
    valid_loss: float | None
    seconds: float
    tokens: int


@dataclass
class TrainStep:
    """What :func:`train` tells an ``on_step`` callback after every optimizer step.

    ``epoch`` counts from 1 within this call of :func:`train`; ``batch`` is the
    number of batches done in that epoch, out of ``batches``; ``step`` counts
    the optimizer steps of this call; ``loss`` is the batch's mean loss per
    target token and ``tokens`` its number of real target tokens.
    """

    epoch: int
    batch: int
    batches: int
    step: int
    loss: float
    tokens: int


@dataclass
class History:
    """Everything :func:`train` measured.

    ``steps`` holds ``(fractional epoch, loss)`` of every :data:`LOG_EVERY`-th
    batch, for the loss curve; ``stopped_by`` says what ended training (the
    epochs, or ``on_step``).
    """

    epochs: list[EpochLog] = field(default_factory=list)
    steps: list[tuple[float, float]] = field(default_factory=list)
    stopped_by: str = ""
    train_seconds: float = 0.0
    tokens: int = 0

    @property
    def tokens_per_second(self) -> float:
        """Training throughput in target tokens per second (validation excluded)."""
        return self.tokens / self.train_seconds if self.train_seconds > 0 else float("nan")

    @property
    def final_valid_loss(self) -> float | None:
        return self.epochs[-1].valid_loss if self.epochs else None

    def plot(self, ax=None, title: str | None = None):
        """Draw the loss curve on ``ax`` (a new figure when ``None``); return the axes."""
        if ax is None:
            from matplotlib.figure import Figure

            ax = Figure(figsize=(6.0, 3.4)).add_subplot()
        ax.clear()
        if self.steps:
            x, y = zip(*self.steps)
            ax.plot(x, y, color="tab:blue", alpha=0.35, lw=1, label="training batches")
        valid = [e for e in self.epochs if e.valid_loss is not None]
        for logs, loss, style, color, label in (
            (self.epochs, "train_loss", "o-", "tab:blue", "training (epoch mean)"),
            (valid, "valid_loss", "s-", "tab:orange", "validation"),
        ):
            if logs:
                ax.plot([e.epoch for e in logs], [getattr(e, loss) for e in logs], style, color=color, label=label)
        ax.set(xlabel="epoch", ylabel="loss per target token", title=title or "Training")
        ax.grid(True, alpha=0.3)
        if self.steps or self.epochs:
            ax.legend(loc="upper right")
        return ax


# --- The loop --------------------------------------------------------------------

#: The gradient norm every step is clipped to (a recurrent network's gradient occasionally explodes).
CLIP = 1.0
#: Every how many batches the loss curve gets a point; a person watching sees it redrawn every four points.
LOG_EVERY = 5
#: What every run seeds PyTorch with (dropout draws from it), so that a run is reproducible.
SEED = 0


def _batches_of_epoch(train_batches: Iterable | Callable[[int], Iterable], epoch: int) -> list:
    """Epoch ``epoch``'s batches (counted from 1): from a function of the epoch, or a loader put at that epoch."""
    if callable(train_batches) and not hasattr(train_batches, "__iter__"):
        batches = train_batches(epoch)
    else:
        # A loader that reshuffles per epoch (attnbook.data.make_batches) is put at this
        # run's epoch, so that a run never depends on how often it was read before.
        sampler = getattr(train_batches, "batch_sampler", train_batches)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch - 1)
        batches = train_batches
    batches = list(batches)
    if not batches:
        raise ValueError("train_batches is empty")
    return batches


#: What draws the loss curve of :func:`train`: ``factory(history, title, plot=, every=)`` returns ``None``
#: or an object with ``on_step``, ``on_epoch`` and ``finish``. None (the default) draws nothing.
_loss_figure: Callable[..., Any] | None = None


def use_loss_figure(factory: Callable[..., Any] | None) -> None:
    """Let :func:`train` draw its loss curve with ``factory`` (``None``: draw nothing).

    A notebook's setup passes in :meth:`attnbook.notebook.LossFigure.for_training`.
    """
    global _loss_figure
    if factory is not None and not callable(factory):
        raise TypeError(f"use_loss_figure expects a callable or None, got {type(factory).__name__}")
    _loss_figure = factory


def _figure_of(history: History, plot: bool | None, title: str | None):
    """The loss curve's figure for this run, or ``None``: none asked for, or none passed in."""
    if plot is False:
        return None
    if _loss_figure is None:
        if plot:
            raise RuntimeError(
                "train(plot=True) draws with the figure a notebook's setup passes in: "
                "call attnbook.notebook.setup() first (or train.use_loss_figure)"
            )
        return None
    return _loss_figure(history, title, plot=plot, every=4 * LOG_EVERY)


def train(
    model: nn.Module,
    train_batches: Iterable | Callable[[int], Iterable],
    valid_batches: Iterable | None = None,
    *,
    epochs: int = 10,
    lr: float = 1e-3,
    label_smoothing: float = 0.0,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    on_step: Callable[[TrainStep], bool | None] | None = None,
    plot: bool | None = None,
    title: str | None = None,
    verbose: bool = True,
) -> History:
    """Train ``model`` with teacher forcing for ``epochs`` epochs; return the :class:`History`.

    ``train_batches`` is re-read every epoch; pass a function ``epoch -> batches``
    to reshuffle per epoch, or a loader whose sampler has ``set_epoch`` (as
    :func:`attnbook.data.make_batches` gives): it is set to epochs 0, 1, ...
    The model is validated after every epoch. The default optimizer is Adam
    with learning rate ``lr``; ``scheduler``, if given, is stepped after every
    batch. The loss is :func:`sequence_loss` with ``label_smoothing``, the
    gradient norm is clipped to :data:`CLIP`, and PyTorch is seeded with
    :data:`SEED` first, so that a run (its dropout) is reproducible.
    ``verbose`` prints one line per epoch.

    ``on_step(TrainStep)`` is called after every optimizer (and scheduler)
    step; returning ``True`` ends training there (the cut-short epoch is
    still validated), recorded as ``stopped_by``. In a notebook the loss curve
    is drawn by the figure the notebook's setup passes in
    (:func:`use_loss_figure`): ``plot`` (default: in a notebook) draws it,
    updated as training goes when a person runs the notebook, ``title``
    names it. ``plot=True`` where nothing was passed in is an error.
    """
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be an int >= 1, got {epochs!r}")
    pad_id = getattr(getattr(model, "config", None), "pad_id", 0)
    device = _device_of(model)
    torch.manual_seed(SEED)
    # In the test suite, a run that an earlier notebook made is read back, not made again (attnbook.train_cache).
    history = History()
    figure = _figure_of(history, plot, title)
    remembered = None  # the key's settings: every argument that changes what the loop computes
    if optimizer is None and scheduler is None and on_step is None and not getattr(figure, "live", False):
        settings = {"lr": lr, "label_smoothing": label_smoothing, "pad_id": pad_id, "clip": CLIP, "seed": SEED}
        settings["log_every"] = LOG_EVERY
        remembered = train_cache.remembered_run(
            model, train_batches, valid_batches, epochs, settings, _batches_of_epoch
        )
    optimizer = optimizer or _adam(model.parameters(), lr=lr)
    step_hooks = [hook for hook in (figure and figure.on_step, on_step) if hook is not None]

    done = 0  # epochs read back: all of them, or none
    if remembered is not None and remembered.restore(epochs, model, history):
        done = epochs
        for log in history.epochs:  # printed and drawn as the run that made them printed and drew them
            if verbose:
                _print_epoch(log, epochs)
            if figure is not None:
                figure.on_epoch(log)
    step = 0
    for epoch in range(done + 1, epochs + 1):
        model.train()
        epoch_start = time.perf_counter()
        total, tokens = 0.0, 0
        batches = _batches_of_epoch(train_batches, epoch)
        for i, batch in enumerate(batches):
            batch = batch.to(device)  # every tensor of it: the loss reads the targets on the model's device
            logits = model(batch.src, batch.src_padding_mask, batch.tgt_in)  # teacher forcing
            loss = sequence_loss(logits, batch.tgt_out, pad_id, label_smoothing)
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"the loss became {float(loss)} at epoch {epoch}, batch {i}: lower the learning rate"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()

            loss, n = float(loss.detach()), int((batch.tgt_out != pad_id).sum())
            total, tokens, step = total + loss * n, tokens + n, step + 1
            if step % LOG_EVERY == 0:
                history.steps.append((epoch - 1 + (i + 1) / len(batches), loss))
            report = TrainStep(epoch, i + 1, len(batches), step, loss, n)
            if any([hook(report) for hook in step_hooks]):  # every hook hears of every step
                history.stopped_by = f"on_step during epoch {epoch}"
                break
        history.train_seconds += time.perf_counter() - epoch_start
        history.tokens += tokens
        valid = evaluate(model, valid_batches, pad_id) if valid_batches is not None else None
        log = EpochLog(epoch, total / tokens, valid, time.perf_counter() - epoch_start, tokens)
        history.epochs.append(log)
        if verbose:
            _print_epoch(log, epochs)
        if figure is not None:
            figure.on_epoch(log)  # a cut-short epoch too
        if history.stopped_by:
            break
        if remembered is not None:  # a whole epoch: one that on_step cut short ended the loop above
            remembered.write(epoch, model, history)
    else:  # also when every epoch was read back
        history.stopped_by = f"epoch budget ({epochs} epochs)"
    model.eval()
    if figure is not None:
        figure.finish()
    return history


def _print_epoch(log: EpochLog, epochs: int) -> None:
    line = f"epoch {log.epoch:>2}/{epochs}: train loss {log.train_loss:.3f}"
    if log.valid_loss is not None:
        line += f", valid loss {log.valid_loss:.3f}"
    print(line + f"  ({log.seconds:.1f} s)", flush=True)


# --- Checkpoints ------------------------------------------------------------------


class CheckpointMismatch(ValueError):
    """A checkpoint does not fit the model it is being loaded into."""


def _config_dict(model: nn.Module) -> dict:
    config = getattr(model, "config", None)
    if config is None or not dataclasses.is_dataclass(config):
        raise TypeError(
            f"{type(model).__name__} has no dataclass `config`; a checkpoint stores the config beside the weights"
        )
    return dataclasses.asdict(config)


def save_checkpoint(path: str | Path, model: nn.Module, **extra: Any) -> Path:
    """Save the weights of ``model``, its class name and config, and any ``extra`` plain values.

    The file is written whole or not at all: into a temporary file beside
    ``path``, flushed to disk, then renamed over ``path`` (an atomic step).
    Whenever the program stops, even in the middle of a save, ``path`` holds
    the previous checkpoint or the new one, never a part of one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CHECKPOINT_FORMAT,
        "model_class": type(model).__name__,
        "config": _config_dict(model),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "extra": extra,
    }
    with written_whole(path, sync=True) as tmp:  # a run resumes from it: flushed to the disk, then renamed
        torch.save(payload, tmp)
    return path


def read_checkpoint(path: str | Path) -> dict:
    """Read a checkpoint safely (``weights_only=True``); raise a clear error if it is not one of ours."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # unpickling errors have many types
        raise CheckpointMismatch(f"{path.name} is not a readable checkpoint: {type(err).__name__}: {err}") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointMismatch(f"{path.name} is not an attnbook checkpoint (expected format {CHECKPOINT_FORMAT!r})")
    return payload


def load_checkpoint(path: str | Path, model: nn.Module) -> dict:
    """Load the weights saved at ``path`` into ``model``, which must have the same class and config.

    Returns the ``extra`` values saved with the checkpoint. To rebuild a model
    from the file alone, read its config first: ``Seq2Seq(Seq2SeqConfig(**read_checkpoint(p)["config"]))``.
    """
    payload = read_checkpoint(path)
    name = Path(path).name
    if payload["model_class"] != type(model).__name__:
        raise CheckpointMismatch(f"{name} holds a {payload['model_class']}, not a {type(model).__name__}")
    saved, ours = payload["config"], _config_dict(model)
    if saved != ours:
        keys = sorted(set(saved) | set(ours))
        diffs = [
            f"{k}: checkpoint {saved.get(k, '<missing>')!r}, model {ours.get(k, '<missing>')!r}"
            for k in keys
            if saved.get(k) != ours.get(k)
        ]
        raise CheckpointMismatch(f"{name} was saved from another configuration; " + "; ".join(diffs))
    try:
        model.load_state_dict(payload["state_dict"])
    except RuntimeError as err:
        raise CheckpointMismatch(f"{name}: the weights do not fit the model: {err}") from None
    return payload["extra"]
