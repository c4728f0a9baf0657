"""The translator's training, top to bottom: the model, its batches, and the loop that trains it within its budget.

:func:`train_run` is the whole of it. It builds the model (or restores it,
with the optimizer, the schedule and the random state, when a run resumes),
wraps it in :class:`~torch.nn.parallel.DistributedDataParallel` under
``torchrun`` (:class:`_Learner`: the weights, what moves them, and the step), and trains:

- each epoch, every process builds the same length-bucketed batches
  (:class:`attnbook.data.BucketBatchSampler`, a token budget) and takes every
  N-th (:class:`_Batches`); a resumed run starts at the saved batch of the saved
  epoch, so it takes the very batches an uninterrupted one would have;
- a step: forward (in mixed precision where the run computes in bfloat16),
  the label-smoothed loss, backward, clipping, the optimizer, the schedule.
  Nothing in it waits for the device: the losses and target tokens add up on
  the device and are read when the log is written (:class:`_Losses`), and on a
  GPU the next batches are made ready on the host (pinned memory, copies that
  do not block) while the device computes;
- after the step, :class:`~attnbook.translate.budget.Progress` says whether the
  budget is spent, a periodic save is due, or Ctrl-C asked to stop (then the
  step's state is saved first); once the speed is measured, the budget's plan
  (:meth:`~attnbook.translate.budget.Budget.plan`) fits the warm-up,
  ``--dropout auto`` and the snapshots for ``--average`` to the steps it allows;
- after each epoch (:func:`_end_epoch`): the validation loss, the checkpoint,
  ``--late-dropout`` when the loss is not the lowest so far, ``best.pt`` when it is;
- at the end, the last snapshots of the weights averaged, kept if that lowers
  the validation loss.

What the loop changes as it goes, besides the weights, the optimizer and the
schedule, is one object, :class:`_State`, passed to the functions that change it.

Before a new run with a time budget on a CPU starts, :func:`probe_seconds_per_step`
times a few steps of its model on a copy thrown away after, so that the
command can choose the recipe for the passes the budget allows
(:func:`attnbook.translate.cmd_train.fit_to_pace`) and build the model it
chose; those seconds count in the budget (:attr:`PreparedRun.spent`).

The run folder's files are read and written by :mod:`~attnbook.translate.run_folder`.
"""

from __future__ import annotations

import math
import queue
import signal
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.flop_counter import FlopCounterMode

from ..attention import MultiHeadAttention
from ..checks import values_unchecked
from ..data import Batch, BucketBatchSampler, Pair, PairDataset, Vocab, collate
from ..train import evaluate, load_checkpoint, noam_lr, save_checkpoint
from ..transformer import PositionwiseFFN
from .budget import AVERAGE_SPAN, START, WARMUP_SHARE, Budget, Pace, Plan, Position, Progress
from .cluster import Cluster
from .console import PROGRAM, CommandError, Console, format_duration
from .model import build_model, precision
from .recipe import (
    LinearDecaySchedule,
    fused_paper_optimizer,
    fused_sequence_loss,
    shorten_warmup,
    teacher_forced_logits,
)
from .run_folder import BEST_FILE, CHECKPOINT_FILE, LOG_FILE, TrainingLog, best_valid_loss, one_line
from .settings import AUTO, AUTO_DROPOUT_EPOCHS, MORE_DROPOUT, MORE_DROPOUT_EPOCHS, RunSettings
from .tokens import RunTokens
from .utilisation import describe_utilisation, peak_flops

__all__ = [
    "PreparedRun",
    "train_run",
    "training_step",
    "probe_seconds_per_step",
    "WARMUP_SHARE",
    "AVERAGE_SPAN",
]


@dataclass
class PreparedRun:
    """A run ready to train: its folder, configuration, budget, vocabularies, pairs; resumed, its saved state."""

    config: dict
    settings: RunSettings
    src_vocab: Vocab
    tgt_vocab: Vocab
    train_pairs: list[Pair]
    valid_pairs: list[Pair]
    folder: Path  # where the run is written: --out
    budget: Budget  # what it trains within (config.json records it, in minutes)
    tokens: RunTokens | None = None  # new runs: written once, beside the vocabularies
    state: dict | None = None  # resumed runs: the training state of the checkpoint
    spent: float = 0.0  # new runs: seconds of the time budget already spent (timing the steps to choose the recipe)


def train_run(
    run: PreparedRun,
    cluster: Cluster,
    console: Console,
    *,
    checkpoint_minutes: float = 5.0,
    log_every: int = 50,
) -> int:
    """Train a prepared run within its budget, saving into its folder; 0, or 130 when Ctrl-C stopped it."""
    s, device, resumed = run.settings, cluster.device, run.state is not None
    log_every = max(1, log_every)

    # --- the model, the optimizer and the schedule: new, or as the checkpoint left them ---------------------
    torch.manual_seed(s.seed)
    weights_dtype, autocast = precision(s.dtype, device)
    model = build_model(s.arch, run.config["model"]).to(dtype=weights_dtype, device=device)
    optimizer, scheduler = fused_paper_optimizer(
        model, d_model=s.d_model, warmup=s.warmup, factor=s.lr_factor, decay=s.decay
    )
    if resumed:
        _restore(run.state, run.folder / CHECKPOINT_FILE, model, optimizer, scheduler, cluster, console)
    else:
        torch.manual_seed(s.seed + 1 + cluster.rank)  # dropout: each process its own stream
    learner = _Learner(model, optimizer, scheduler, s, cluster, autocast)  # `model`: the weights; `learner`: the step

    # --- the batches, the budget, and what the loop keeps ---------------------------------------------------
    batches = _Batches(run, cluster)
    valid_batches = _valid_batches(run, s.batch_tokens)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None  # to time the steps
    start = (run.state or {}).get("position", {**START, "seconds": run.spent})
    progress = Progress(
        run.budget, start, batches.steps_per_epoch, cluster, checkpoint_minutes, f"the run in {str(run.folder)!r}", sync
    )
    log = TrainingLog(run.folder / LOG_FILE if cluster.is_first else None)
    session = _Session(s, cluster, console, log, run.folder, resumed)
    stored = (run.state or {}).get("dropout", s.dropout)  # auto: none until the budget is known
    state = _State(
        dropout=_set_dropout(model, 0.0 if stored == AUTO else stored),
        best_loss=best_valid_loss(run.folder) if resumed else math.inf,
        snapshots=deque(maxlen=s.average),
        last_epoch=progress.epoch,
    )
    learner.follow_budget(progress.share)  # a resumed run's budget may have grown

    # --- the first lines; without a time budget, the plan is known before the first step --------------------
    computes_in = f"{str(autocast).removeprefix('torch.')} mixed precision" if autocast else str(weights_dtype)[6:]
    _first_lines(run, model, progress, session, computes_in)
    if not progress.timed:  # with one: once the speed is measured
        plan = progress.plan(average=s.average)
        state.space_snapshots(plan, log)
        if s.dropout == AUTO and not resumed:
            state.dropout = _choose_dropout(plan, model, session)

    # --- the loop -----------------------------------------------------------------------------------------
    losses = _Losses(device, read_every=1 if device.type == "cpu" else log_every, step=progress.step)
    with _Signals(console) as signals:
        for epoch in progress.epochs():
            learner.train()
            losses.new_epoch()
            for batch in _ahead(batches.of(epoch, progress.start_position), device):
                losses.add(learner(batch), batch.n_real)  # nothing in the step waits for the device

                # after the step: the budget, Ctrl-C, saves, the log
                stop, save_due, interrupted = progress.after_step(batch.n_real, signals.requested)
                learner.follow_budget(progress.share)
                if interrupted:
                    return _stop_interrupted(learner, state, progress, session)
                if save_due and not stop:
                    _save("periodic", learner, state, progress, session)
                _log_step(progress, losses, scheduler, session, log_every)
                if (per_step := progress.measured_pace()) is not None:  # measured, or measured again: re-plan
                    _follow_pace(per_step, learner, state, progress, session)
                if cluster.is_first and state.snapshot_due(progress.steps_done):
                    state.snapshots.append((progress.step, _weights(model)))
                if stop:
                    break
            if not _end_epoch(epoch, losses, valid_batches, learner, state, progress, session):
                break  # the budget cut the epoch short

    # --- the end: the arithmetic's share of the device's, the average of the snapshots ---------------------
    model.eval()
    if learner.flops_per_token:
        _say_utilisation(learner.flops_per_token, progress, device, autocast or weights_dtype, session)
    if cluster.is_first and s.average > 1 and valid_batches is not None:
        _average_snapshots(model, state, progress.step, valid_batches, session)
    log.write(event="end", stopped_by=progress.stopped_by, position=progress.position())
    console.say(f"done ({progress.stopped_by}): {run.folder / CHECKPOINT_FILE}; next: {PROGRAM} evaluate {run.folder}")
    return 0


# --- What the loop keeps, and the steps it takes ------------------------------------------------------


@dataclass(frozen=True)
class _Session:
    """What stays the same through a session of training: its settings, its processes and where it writes."""

    settings: RunSettings
    cluster: Cluster
    console: Console
    log: TrainingLog
    folder: Path  # the run folder
    resumed: bool  # the session continues a run from its checkpoint


@dataclass
class _State:
    """What training changes as it goes, besides the weights, the optimizer and the schedule."""

    dropout: float  # the dropout --dropout sets, now (saved with each checkpoint)
    best_loss: float  # the lowest validation loss so far: best.pt's
    snapshots: deque  # (step, weights): the last snapshots, for --average (the first process's)
    last_epoch: int  # the last epoch trained, counted from 1 (an average kept as best.pt records it)
    snapshot_every: int | None = None  # steps between snapshots, once the steps the budget allows are known
    paced: bool = False  # the speed has been measured, and the plan followed it

    def space_snapshots(self, plan: Plan, log: TrainingLog) -> None:
        """Space the snapshots as ``plan`` says, if it says (``--average`` 2 or more, the steps allowed known)."""
        if plan.snapshot_every is not None:
            self.snapshot_every = plan.snapshot_every
            log.write(event="snapshots", steps_allowed=plan.steps_allowed, every=plan.snapshot_every)

    def snapshot_due(self, steps_done: int) -> bool:
        return bool(self.snapshot_every) and steps_done % self.snapshot_every == 0


class _Learner:
    """The model and what trains it: its optimizer, its schedule, and the training step.

    ``model`` holds the weights, which checkpoints save, evaluation reads and
    ``--average`` averages. Calling the learner takes a step: the model runs
    wrapped in :class:`~torch.nn.parallel.DistributedDataParallel` under
    ``torchrun`` and, with ``--compile``, compiled by :func:`torch.compile`,
    except on the session's first step (:attr:`first`), which runs uncompiled
    and counts the model's arithmetic (:attr:`flops_per_token`).
    """

    def __init__(self, model, optimizer, scheduler, settings: RunSettings, cluster: Cluster, autocast) -> None:
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.settings, self.autocast = settings, autocast
        self.wrapped = model
        if cluster.distributed:
            ids = [cluster.device.index] if cluster.device.type == "cuda" else None
            self.wrapped = DistributedDataParallel(model, device_ids=ids, broadcast_buffers=False)
        self.compiled = torch.compile(self.wrapped, dynamic=True) if settings.compile else self.wrapped
        self.first = True  # the session's first step is still to come
        self.flops_per_token = 0.0  # the model's arithmetic, counted on the first step

    def __call__(self, batch: _Ready) -> torch.Tensor:
        """One step on a batch made ready (:func:`training_step`), and the schedule's: the summed loss, not read."""
        if self.first:
            with FlopCounterMode(display=False) as counting:
                loss_sum = self._step(self.wrapped, batch)
            self.flops_per_token, self.first = counting.get_total_flops() / batch.n_real, False
        else:
            loss_sum = self._step(self.compiled, batch)
        self.scheduler.step()
        return loss_sum

    def _step(self, forward: nn.Module, batch: _Ready) -> torch.Tensor:
        return training_step(
            forward, self.model, self.optimizer, batch.on_device, batch.n_real, self.settings, self.autocast
        )

    def train(self) -> None:
        self.wrapped.train()

    def follow_budget(self, share: float) -> None:
        """A rate that falls in a straight line to zero falls with the ``share`` of the budget spent."""
        if isinstance(self.scheduler, LinearDecaySchedule):
            self.scheduler.set_spent(share)


class _Batches:
    """This process's batches, epoch by epoch: every process builds the same batches and takes every N-th."""

    def __init__(self, run: PreparedRun, cluster: Cluster) -> None:
        self.run, self.rank, self.world = run, cluster.rank, cluster.world
        self.dataset = PairDataset(run.train_pairs, run.src_vocab, run.tgt_vocab)
        s = run.settings
        self.sampler = BucketBatchSampler(self.dataset.lengths(), batch_tokens=s.batch_tokens, seed=s.seed)
        self.steps_per_epoch = len(self.sampler.batches(0)) // cluster.world
        if self.steps_per_epoch < 1:
            raise CommandError(
                f"too few training pairs for {cluster.world} processes: lower --batch-tokens or use fewer processes"
            )

    def of(self, epoch: int, start: Position) -> Iterator[Batch]:
        """The batches of the run's ``epoch``-th epoch (from 0), from where the session ``start``-ed."""
        mine = self.sampler.batches(epoch)[self.rank :: self.world][: self.steps_per_epoch]
        sources = _split_anew(self.run, [i for indices in mine for i in indices], epoch, self.rank)
        if epoch == start["epoch"]:
            mine = mine[start["step_in_epoch"] :]
        for indices in mine:
            yield collate([(sources.get(i, self.dataset.src_ids[i]), self.dataset.tgt_ids[i]) for i in indices])


class _Losses:
    """The summed losses and their target tokens, added up on the device, and read only when due.

    Reading a loss waits for the device: on a GPU it is read every
    ``read_every`` steps (and whenever the log is written), on a CPU every step.
    """

    def __init__(self, device: torch.device, read_every: int, step: int) -> None:
        self.zero = torch.zeros((), dtype=torch.float64, device=device)
        self.read_every, self.last_read, self.shown = read_every, step, math.nan
        self.window, self.window_tokens = self.zero.clone(), 0  # since the last reading
        self.epoch, self.epoch_tokens = self.zero.clone(), 0  # this epoch's, this process's

    def new_epoch(self) -> None:
        self.epoch, self.epoch_tokens = self.zero.clone(), 0

    def add(self, loss_sum: torch.Tensor, tokens: int) -> None:
        summed = loss_sum.double()
        self.window += summed
        self.epoch += summed
        self.window_tokens, self.epoch_tokens = self.window_tokens + tokens, self.epoch_tokens + tokens

    def read(self, step: int, now: bool = False) -> float:
        """The mean loss a token since the last reading, read ``now`` or when due; else the last one read."""
        if now or step - self.last_read >= self.read_every:
            self.shown = float(self.window) / max(self.window_tokens, 1)
            if not math.isfinite(self.shown):
                raise FloatingPointError(
                    f"the loss became {self.shown} between steps {self.last_read + 1:,} and "
                    f"{step:,}: lower the learning rate (--lr-factor)"
                )
            self.window.zero_()
            self.window_tokens, self.last_read = 0, step
        return self.shown


def _first_lines(run: PreparedRun, model: nn.Module, progress: Progress, session: _Session, computes_in: str) -> None:
    """The model, the budget and the device, said and logged."""
    s, cluster = run.settings, session.cluster
    n_params = sum(p.numel() for p in model.parameters())
    budget = run.budget
    where = f"epoch {progress.epoch + 1}, step {progress.step:,}; budget {budget}" if session.resumed else str(budget)
    session.console.say(
        f"model: {s.arch}, {n_params:,} parameters, d_model {s.d_model}, {s.num_layers} layers, {s.num_heads} heads; "
        f"{'resuming at' if session.resumed else 'training for'} {where} on {cluster.world} × "
        f"{cluster.device.type}, {computes_in}"
    )
    session.log.write(
        event="resume" if session.resumed else "start",
        **({} if session.resumed else {"config": run.config}),
        world=cluster.world,
        device=cluster.device.type,
        precision=computes_in,
        position=progress.start_position,
    )


def _log_step(progress: Progress, losses: _Losses, scheduler, session: _Session, log_every: int) -> None:
    """After a step: the loss read when due, the log every ``log_every`` steps, the progress line on a terminal."""
    logged = progress.step % log_every == 0
    shown = losses.read(progress.step, now=logged)
    if logged:
        session.log.write(
            event="step",
            **progress.position(),
            loss=shown,
            lr=scheduler.get_last_lr()[0],
            tokens_per_second=progress.tokens_per_second(),
        )
    if session.console.shows_progress:
        session.console.progress(progress.progress_line(shown))


def _follow_pace(per_step: float, learner: _Learner, state: _State, progress: Progress, session: _Session) -> None:
    """The speed is measured (or measured again): the budget's plan at that speed, followed.

    The first time in a new run, every process follows the first process's
    plan: the warm-up is shortened to what fits and ``--dropout auto`` chooses;
    every time, the snapshots are spaced over the steps the plan allows.
    """
    fit = not state.paced and not session.resumed
    plan = progress.plan(per_step, average=session.settings.average, agreed=fit)
    if fit:
        _fit_warmup(learner.scheduler, plan, per_step, session)
        if session.settings.dropout == AUTO:
            state.dropout = _choose_dropout(plan, learner.model, session)
    state.paced = True
    state.space_snapshots(plan, session.log)


def _fit_warmup(scheduler, plan: Plan, per_step: float, session: _Session) -> None:
    """Shorten the warm-up to the plan's: at most :data:`WARMUP_SHARE` of the steps the time budget allows.

    The schedule's state, saved with each checkpoint, keeps the new warm-up when the run resumes.
    """
    if plan.warmup >= scheduler.warmup:
        return
    # The same peak, reached sooner. (Keeping the factor would raise the peak, and on small batches a peak
    # about twice as high costs most of what a short run learns: book/results/translator_real.json.)
    peak = noam_lr(scheduler.warmup, scheduler.d_model, scheduler.warmup, scheduler.factor)
    allowed, was = plan.steps_allowed, scheduler.warmup
    session.log.write(event="warmup", steps_allowed=allowed, warmup=plan.warmup, was=was, peak_lr=peak)
    session.console.say(
        f"at {per_step:.2f} s a step, the budget allows about {allowed:,.0f} steps: "
        f"warm-up shortened from {was} to {plan.warmup} steps (the same peak rate, {peak:.2g})"
    )
    shorten_warmup(scheduler, plan.warmup)


def _choose_dropout(plan: Plan, model: nn.Module, session: _Session) -> float:
    """``--dropout auto``: the plan's dropout for the passes the budget allows, set, said and logged."""
    chosen, epochs = _set_dropout(model, plan.dropout), plan.epochs_allowed
    session.log.write(event="dropout", reason="auto", epochs_allowed=min(epochs, 1e9), dropout=chosen)
    shown = "no limit" if math.isinf(epochs) else f"about {epochs:,.1f}"
    session.console.say(
        f"the budget allows {shown} passes over the training pairs: dropout {chosen:g}"
        + (f" (--dropout auto turns it on from {AUTO_DROPOUT_EPOCHS})" if not chosen else "")
        + (f" ({MORE_DROPOUT:g} from {MORE_DROPOUT_EPOCHS})" if 0 < chosen < MORE_DROPOUT else "")
    )
    return chosen


def _save(reason: str, learner: _Learner, state: _State, progress: Progress, session: _Session) -> None:
    """The checkpoint, with the training state of every process (written by the first)."""
    cluster, device = session.cluster, session.cluster.device
    rng = cluster.gather(torch.get_rng_state())  # dropout's random state, of every process
    cuda_rng = cluster.gather(torch.cuda.get_rng_state(device)) if device.type == "cuda" else []
    if not cluster.is_first:
        return
    position = progress.position()
    train_state = {
        "optimizer": learner.optimizer.state_dict(),
        "scheduler": learner.scheduler.state_dict(),
        "rng": rng,
        "cuda_rng": cuda_rng,
        "world": cluster.world,
        "position": position,
        "dropout": state.dropout,
    }
    save_checkpoint(
        session.folder / CHECKPOINT_FILE, learner.model, train_state=train_state, arch=session.settings.arch
    )
    session.log.write(event="checkpoint", reason=reason, position=position)


def _stop_interrupted(learner: _Learner, state: _State, progress: Progress, session: _Session) -> int:
    """Ctrl-C (or SIGTERM) honoured after the step: the state saved, said and logged; the exit status, 130."""
    _save("interrupted", learner, state, progress, session)
    position = progress.position()
    session.log.write(event="interrupted", position=position)
    session.console.say(
        f"interrupted: the state after step {position['step']:,} is saved in {session.folder}; continue with --resume"
    )
    return 130


def _end_epoch(
    epoch: int,
    losses: _Losses,
    valid_batches: list[Batch] | None,
    learner: _Learner,
    state: _State,
    progress: Progress,
    session: _Session,
) -> bool:
    """After an epoch (one the budget cut short too): validation, the checkpoint, dropout, best.pt; was it complete?"""
    s, log = session.settings, session.log
    loss_sum, tokens = session.cluster.all_sum([float(losses.epoch), float(losses.epoch_tokens)])
    valid_loss = evaluate(learner.model, valid_batches, pad_id=0) if valid_batches is not None else None
    position, complete = progress.end_epoch()
    _save("epoch" if complete else "budget", learner, state, progress, session)
    line = {
        "epoch": epoch + 1,
        "complete": complete,
        "train_loss": loss_sum / max(tokens, 1),
        "valid_loss": valid_loss,
        "valid_perplexity": math.exp(min(valid_loss, 50)) if valid_loss is not None else None,
        "tokens_per_second": progress.tokens_per_second(),
        "seconds": position["seconds"],
        "step": position["step"],
    }
    log.write(event="epoch", **line)
    improved = valid_loss is not None and valid_loss < state.best_loss
    if valid_loss is not None and not improved and complete and s.late_dropout > state.dropout:
        state.dropout = _set_dropout(learner.model, s.late_dropout)  # learning its pairs by heart: regularize from now
        log.write(event="dropout", epoch=epoch + 1, dropout=state.dropout)
        session.console.say(f"the validation loss did not improve: dropout {state.dropout:g} from now on")
    if improved:
        state.best_loss = valid_loss
        if session.cluster.is_first:
            save_checkpoint(
                session.folder / BEST_FILE, learner.model, arch=s.arch, epoch=epoch + 1, valid_loss=valid_loss
            )
            log.write(event="best", epoch=epoch + 1, valid_loss=valid_loss)
    state.last_epoch = epoch + 1
    valid = "" if valid_loss is None else f", valid loss {valid_loss:.3f} (perplexity {line['valid_perplexity']:.1f})"
    session.console.say(
        f"epoch {epoch + 1}{'' if complete else ' (cut short)'}: train loss {line['train_loss']:.3f}{valid}, "
        f"{line['tokens_per_second']:,.0f} target tokens/s, {format_duration(line['seconds'])} so far"
    )
    return complete


def _say_utilisation(flops_per_token: float, progress: Progress, device, dtype, session: _Session) -> None:
    """What share of the device's arithmetic the steps used, said and logged."""
    peak = peak_flops(device, dtype)
    rate = progress.tokens_per_second()
    share, line = describe_utilisation(flops_per_token, rate, peak)
    session.log.write(
        event="utilisation", share=share, flops_per_token=flops_per_token, tokens_per_second=rate, peak_flops=peak
    )
    session.console.say(line)


# --- The pieces the loop calls ------------------------------------------------------------------------


def training_step(
    forward: nn.Module,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    n_tokens: int,
    settings: RunSettings,
    autocast: torch.dtype | None,
) -> torch.Tensor:
    """One optimizer step of the translator on ``batch`` (on the device); the loss summed over it, not read.

    ``forward`` computes the logits (``model`` itself, or it wrapped for
    several processes or compiled); ``model`` holds the weights that are
    clipped. Forward in mixed precision where ``autocast`` says, the
    label-smoothed loss (:func:`~attnbook.translate.recipe.fused_sequence_loss`) summed
    and scaled by ``n_tokens``, the real target tokens the host counted when it
    built the batch, backward, clipping, the optimizer's step. Nothing in it
    waits for the device: the batch's values are not checked (the loop built
    it), the loss is not read, the clipping and the fused optimizer stay on
    the device. The schedule's step is the loop's.
    """
    with values_unchecked():
        logits = teacher_forced_logits(forward, batch, autocast)  # products in bfloat16 where asked
        loss_sum = fused_sequence_loss(logits, batch.tgt_out, 0, settings.label_smoothing, "sum")
    optimizer.zero_grad(set_to_none=True)
    (loss_sum * (1.0 / n_tokens)).backward()
    if settings.clip:
        nn.utils.clip_grad_norm_(model.parameters(), settings.clip)
    optimizer.step()
    return loss_sum.detach()


def probe_seconds_per_step(
    settings: RunSettings,
    model_config: dict,
    train_pairs: list[Pair],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    device: torch.device,
    clock=time.monotonic,
    limit: float | None = None,
) -> float:
    """Seconds a training step of this model takes here, timed on a model of its own, thrown away after.

    The loop's step (forward, the label-smoothed loss, backward, clipping,
    fused Adam) on the run's first batches, timed as
    :class:`~attnbook.translate.budget.Pace` times the run: after
    ``SKIP_STEPS`` untimed steps, over the next ``PROBE_STEPS``. With a
    ``limit`` (seconds; the command gives a share of a time budget), a probe
    that reaches it after two steps or more stops there, with the steps timed
    so far, or, if it is still among the untimed ones, every step so far, one-off
    costs included (an overestimate, which can only lower the passes a budget
    this short allows): a budget of seconds is never spent timing steps. The
    random state is left as it was, so the run trains as it would without the
    probe. ``clock`` is injectable for tests.
    """
    rng = torch.get_rng_state()
    try:
        torch.manual_seed(settings.seed)
        weights_dtype, autocast = precision(settings.dtype, device)
        model = build_model(settings.arch, model_config).to(dtype=weights_dtype, device=device)
        _set_dropout(model, 0.0 if settings.dropout == AUTO else settings.dropout)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
        dataset = PairDataset(train_pairs, src_vocab, tgt_vocab)
        order = BucketBatchSampler(dataset.lengths(), batch_tokens=settings.batch_tokens, seed=settings.seed).batches(0)
        sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None
        pace, estimate, done = Pace(sync=sync, clock=clock), None, 0
        batches = (collate([dataset[i] for i in indices]) for indices in order)
        model.train()
        began = pace.now() if limit is not None else None
        while estimate is None:
            for ready in _ahead(batches, device):
                training_step(model, model, optimizer, ready.on_device, ready.n_real, settings, autocast)
                done += 1
                estimate = pace.after_step(done)
                if estimate is None and began is not None and done >= 2:
                    now = pace.now()
                    if now - began >= limit:
                        estimate = pace.average(done, now) or (now - began) / done
                if estimate is not None:
                    break
            else:  # fewer batches than the probe needs: go round again
                batches = (collate([dataset[i] for i in indices]) for indices in order)
        return estimate
    finally:
        torch.set_rng_state(rng)


def _restore(state: dict, checkpoint: Path, model, optimizer, scheduler, cluster: Cluster, console: Console) -> None:
    """The weights, optimizer, schedule and random state of the checkpoint being resumed."""
    try:
        load_checkpoint(checkpoint, model)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
    except Exception as err:
        raise CommandError(f"cannot resume from {checkpoint}: {one_line(err)}") from None
    mine = min(cluster.rank, len(state["rng"]) - 1)
    torch.set_rng_state(state["rng"][mine])
    if cluster.device.type == "cuda" and state.get("cuda_rng"):
        torch.cuda.set_rng_state(state["cuda_rng"][mine], cluster.device)
    if state["world"] != cluster.world:
        console.note(
            f"the run was trained by {state['world']} processes and continues on {cluster.world}: "
            "the batches differ from an uninterrupted run"
        )


def _valid_batches(run: PreparedRun, batch_tokens: int) -> list[Batch] | None:
    if not run.valid_pairs:
        return None
    valid = PairDataset(run.valid_pairs, run.src_vocab, run.tgt_vocab)
    sampler = BucketBatchSampler(valid.lengths(), batch_tokens=batch_tokens, shuffle=False)
    return [collate([valid[i] for i in indices]) for indices in sampler.batches(0)]


def _split_anew(run: PreparedRun, indices: list[int], epoch: int, rank: int) -> dict[int, list[int]]:
    """``--bpe-dropout``: this epoch's source ids of the pairs ``indices``, split anew (none when it is off).

    The splits depend on the seed, the epoch (from 0) and the process, and
    cover the whole of the process's epoch, so a resumed run splits as an
    uninterrupted one would. A split longer than ``--max-length`` is left
    as the usual one. Batches are formed on the usual lengths. (``train``
    refuses the option with words, which have no merges.)
    """
    p, s = run.settings.bpe_dropout, run.settings
    if not p:
        return {}
    seed = zlib.crc32(f"{s.seed}/{epoch}/{rank}".encode())
    split = run.tokens.src_subwords.sample([run.train_pairs[i].src for i in indices], p, seed)
    return {i: run.src_vocab.encode(pieces) for i, pieces in zip(indices, split) if len(pieces) <= s.max_length}


class _Ready:
    """A batch on its way to the device: its real target tokens counted on the host, and the moved batch."""

    __slots__ = ("n_real", "on_device")

    def __init__(self, batch: Batch, device: torch.device, pin: bool) -> None:
        self.n_real = int(batch.tgt_lengths.sum())
        if pin:
            batch = Batch(**{f.name: getattr(batch, f.name).pin_memory() for f in fields(batch)})
        self.on_device = batch.to(device, non_blocking=pin)


def _ahead(
    batches: Iterator[Batch], device: torch.device, depth: int = 2, thread: bool | None = None
) -> Iterator[_Ready]:
    """The batches, moved to ``device``; on a GPU, made ready ``depth`` ahead by a thread while the device computes.

    The order is the order given, on any device, so a run takes the same
    batches wherever it trains. ``thread`` (default: on a GPU) prepares them in
    a thread; on a GPU they also go through pinned memory, copied without
    blocking. A batch that fails to build raises in the loop; a loop that
    stops early stops the thread.
    """
    pin = device.type == "cuda"
    if not (pin if thread is None else thread):
        for batch in batches:
            yield _Ready(batch, device, pin=pin)
        return
    ready: queue.Queue = queue.Queue(maxsize=depth)
    done, closed = object(), threading.Event()

    def work() -> None:
        try:
            for batch in batches:
                if closed.is_set():  # the loop stopped early (the budget, Ctrl-C): nothing more to prepare
                    return
                ready.put(_Ready(batch, device, pin=pin))
        except BaseException as err:  # handed over to the loop, which raises it
            ready.put(err)
        ready.put(done)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        while (item := ready.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        closed.set()
        while worker.is_alive():  # unblock a worker waiting to put, until it sees the flag
            try:
                ready.get(timeout=0.1)
            except queue.Empty:
                pass


def _set_dropout(model: nn.Module, p: float) -> float:
    """Set the dropout that ``--dropout`` sets (not attention's nor the feed-forward's) from now on; return ``p``."""
    for parent in model.modules():
        if not isinstance(parent, (MultiHeadAttention, PositionwiseFFN)):
            for child in parent.children():
                if isinstance(child, nn.Dropout):
                    child.p = p
    return p


def _weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _average_snapshots(
    model: nn.Module, state: _State, final: int, valid_batches: list[Batch], session: _Session
) -> None:
    """Average the last snapshots of the weights, as the paper averages its last checkpoints; keep the better.

    The final weights (after step ``final``) and the ``--average`` − 1
    snapshots before them, spaced over the last :data:`AVERAGE_SPAN` of the
    session's steps, are averaged; the average replaces ``best.pt`` only if its
    validation loss is lower than the best epoch's: measured, not assumed.
    """
    recent, best_loss = state.snapshots, state.best_loss
    current = _weights(model)
    if not recent or recent[-1][0] != final:
        recent.append((final, current))
    if len(recent) < 2:
        return
    steps = [step for step, _ in recent]
    averaged = {
        k: sum(w[k].double() for _, w in recent).div(len(recent)).to(v.dtype) if v.is_floating_point() else v
        for k, v in current.items()
    }
    model.load_state_dict(averaged)
    loss = evaluate(model, valid_batches, pad_id=0)
    kept = loss < best_loss
    session.log.write(
        event="average", steps=steps, every=state.snapshot_every, valid_loss=loss, best_valid_loss=best_loss, kept=kept
    )
    which = f"the average of the weights at steps {', '.join(f'{n:,}' for n in steps)}"
    if kept:
        path, epoch = session.folder / BEST_FILE, state.last_epoch
        save_checkpoint(path, model, arch=session.settings.arch, epoch=epoch, valid_loss=loss, averaged=steps)
        session.console.say(f"{which} has a lower validation loss ({loss:.3f}): it is the translator")
    else:
        session.console.say(f"{which} (validation loss {loss:.3f}) is not better than the best epoch ({best_loss:.3f})")
    model.load_state_dict(current)


class _Signals:
    """Ctrl-C / SIGTERM ask training to stop after the current step; a second Ctrl-C stops at once."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.requested = False
        self.first = 0.0
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        # torchrun passes the terminal's Ctrl-C on to its processes, which get it from the terminal
        # too: a second SIGINT within a second is that echo, not a second press.
        if signum == signal.SIGINT and self.requested and time.monotonic() - self.first > 1.0:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        if not self.requested:
            self.first = time.monotonic()
            self.console.say("stopping after this step (the state is saved first; Ctrl-C again to stop at once)")
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
