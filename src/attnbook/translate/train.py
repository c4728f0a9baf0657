"""The translator's training, top to bottom: the model, its batches, and the loop that trains it within its budget.

:func:`train_run` is the whole of it. It builds the model (or restores it,
with the optimizer, the schedule and the random state, when a run resumes),
wraps it in :class:`~torch.nn.parallel.DistributedDataParallel` under
``torchrun``, and trains:

- each epoch, every process builds the same length-bucketed batches
  (:class:`attnbook.data.BucketBatchSampler`, a token budget) and takes every
  N-th; a resumed run starts at the saved batch of the saved epoch, so it takes
  the very batches an uninterrupted one would have;
- a step: forward (in mixed precision where the run computes in bfloat16),
  the label-smoothed loss, backward, clipping, the optimizer, the schedule.
  Nothing in it waits for the device: the losses and target tokens add up on
  the device and are read when the log is written, and on a GPU the next
  batches are made ready on the host (pinned memory, copies that do not
  block) while the device computes;
- after the step, :class:`~attnbook.translate.budget.Progress` says whether the
  budget is spent, a periodic save is due, or Ctrl-C asked to stop (then the
  step's state is saved first); once the speed is measured
  (:class:`~attnbook.translate.budget.Pace`), the warm-up, ``--dropout auto``
  and the snapshots for ``--average`` are fitted to the steps the budget allows;
- after each epoch: the validation loss, the checkpoint, ``best.pt`` when the
  loss is the lowest so far, and ``--late-dropout`` when it is not;
- at the end, the last snapshots of the weights averaged, kept if that lowers
  the validation loss.

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
from ..train import (
    LinearDecaySchedule,
    evaluate,
    load_checkpoint,
    noam_lr,
    paper_optimizer,
    save_checkpoint,
    sequence_loss,
    shorten_warmup,
    teacher_forced_logits,
)
from ..transformer import PositionwiseFFN
from .budget import PROBE_STEPS, SKIP_STEPS, START, Pace, Progress
from .cluster import Cluster
from .console import PROGRAM, CommandError, Console, format_duration
from .model import build_model, precision
from .run_folder import BEST_FILE, CHECKPOINT_FILE, LOG_FILE, TrainingLog, best_valid_loss, one_line
from .settings import AUTO, AUTO_DROPOUT_EPOCHS, MORE_DROPOUT, MORE_DROPOUT_EPOCHS, Budget, RunSettings, auto_dropout
from .tokens import RunTokens
from .utilisation import describe_utilisation, peak_flops

__all__ = [
    "PreparedRun",
    "train_run",
    "training_step",
    "probe_seconds_per_step",
    "WARMUP_SHARE",
    "AVERAGE_SPAN",
    "Interrupted",
]

#: A run with a budget in minutes shortens its warm-up to at most this share of the steps the budget allows, as
#: soon as its speed is measured: the warm-up that suits a fast machine would take a slow one's whole budget.
WARMUP_SHARE = 0.1
#: ``--average N`` averages N snapshots of the weights taken at equal intervals over this share of the
#: session's last steps, the final weights the last of them (the paper averages its last checkpoints).
AVERAGE_SPAN = 0.2


@dataclass
class PreparedRun:
    """A run ready to train: its folder, configuration, vocabularies and pairs; when it resumes, its saved state."""

    config: dict
    settings: RunSettings
    src_vocab: Vocab
    tgt_vocab: Vocab
    train_pairs: list[Pair]
    valid_pairs: list[Pair]
    folder: Path  # where the run is written: --out
    tokens: RunTokens | None = None  # new runs: written once, beside the vocabularies
    state: dict | None = None  # resumed runs: the training state of the checkpoint
    spent: float = 0.0  # new runs: seconds of the time budget already spent (timing the steps to choose the recipe)

    @property
    def budget(self) -> Budget:
        """What the run trains within, as its configuration records it (``train`` stores it there)."""
        return Budget(**self.config["budget"])


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) was honoured: the step finished and the state was saved."""


def train_run(
    run: PreparedRun,
    cluster: Cluster,
    console: Console,
    *,
    checkpoint_minutes: float = 5.0,
    log_every: int = 50,
) -> int:
    """Train a prepared run within its budget, saving into its folder; 0, or 130 when Ctrl-C stopped it."""
    s, resumed, device = run.settings, run.state is not None, cluster.device
    budget, out = run.budget, run.folder
    log_every = max(1, log_every)

    # --- the model, the optimizer and the schedule: new, or as the checkpoint left them ---------------------
    torch.manual_seed(s.seed)
    weights_dtype, autocast = precision(s.dtype, device)
    model = build_model(s.arch, run.config["model"]).to(dtype=weights_dtype, device=device)
    optimizer, schedule = paper_optimizer(
        model, d_model=s.d_model, warmup=s.warmup, factor=s.lr_factor, fused=True, decay=s.decay
    )
    if resumed:
        _restore(run.state, out / CHECKPOINT_FILE, model, optimizer, schedule, cluster, console)
    else:
        torch.manual_seed(s.seed + 1 + cluster.rank)  # dropout: each process its own stream
    trained = model
    if cluster.distributed:
        ids = [device.index] if device.type == "cuda" else None
        trained = DistributedDataParallel(model, device_ids=ids, broadcast_buffers=False)
    computes_in = f"{str(autocast).removeprefix('torch.')} mixed precision" if autocast else str(weights_dtype)[6:]
    # --compile: the steps after the first run the model compiled by torch.compile (the first, uncompiled, counts
    # the model's arithmetic); the weights are the model's, so checkpoints and evaluation do not change
    stepper = torch.compile(trained, dynamic=True) if s.compile else trained

    # --- the batches ----------------------------------------------------------------------------------------
    dataset = PairDataset(run.train_pairs, run.src_vocab, run.tgt_vocab)
    sampler = BucketBatchSampler(dataset.lengths(), batch_tokens=s.batch_tokens, seed=s.seed)
    steps_per_epoch = len(sampler.batches(0)) // cluster.world
    if steps_per_epoch < 1:
        raise CommandError(
            f"too few training pairs for {cluster.world} processes: lower --batch-tokens or use fewer processes"
        )
    valid_batches = _valid_batches(run, s.batch_tokens)
    progress = Progress(
        budget,
        (run.state or {}).get("position", {**START, "seconds": run.spent}),
        steps_per_epoch,
        cluster,
        checkpoint_minutes,
        f"the run in {str(out)!r}",
    )
    first_position = progress.start_position

    def batches_of(epoch: int) -> Iterator[Batch]:
        """This process's batches of the run's ``epoch``-th epoch (from 0), from where the run stands."""
        everything = sampler.batches(epoch)
        mine = everything[cluster.rank :: cluster.world][:steps_per_epoch]
        sources = _split_anew(run, [i for indices in mine for i in indices], epoch, cluster.rank)
        if epoch == first_position["epoch"]:
            mine = mine[first_position["step_in_epoch"] :]
        for indices in mine:
            yield collate([(sources.get(i, dataset.src_ids[i]), dataset.tgt_ids[i]) for i in indices])

    # --- what is kept across steps ----------------------------------------------------------------------
    log = TrainingLog(out / LOG_FILE if cluster.is_first else None)
    best_loss = best_valid_loss(out) if resumed else math.inf
    recent: deque = deque(maxlen=s.average)  # (step, weights): the last snapshots, for --average
    snapshot_every: int | None = None  # steps between snapshots, once the budget's steps are known
    stored = (run.state or {}).get("dropout", s.dropout)
    dropout = _set_dropout(model, 0.0 if stored == AUTO else stored)  # auto: none until the budget is known
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None
    pace, paced = Pace(sync=sync), False
    if isinstance(schedule, LinearDecaySchedule):  # a resumed run's budget may have grown
        schedule.set_spent(progress.share)

    def save(reason: str) -> None:
        """The checkpoint, with the training state of every process (written by the first)."""
        rng = cluster.gather(torch.get_rng_state())  # dropout's random state, of every process
        cuda_rng = cluster.gather(torch.cuda.get_rng_state(device)) if device.type == "cuda" else []
        if not cluster.is_first:
            return
        position = progress.position()
        train_state = {
            "optimizer": optimizer.state_dict(),
            "scheduler": schedule.state_dict(),
            "rng": rng,
            "cuda_rng": cuda_rng,
            "world": cluster.world,
            "position": position,
            "dropout": dropout,
        }
        save_checkpoint(out / CHECKPOINT_FILE, model, train_state=train_state, arch=s.arch)
        log.write(event="checkpoint", reason=reason, position=position)

    def plan_snapshots(steps: float) -> int | None:
        """Space ``--average`` snapshots so that they span :data:`AVERAGE_SPAN` of the session's ``steps``."""
        if s.average < 2 or not math.isfinite(steps):
            return snapshot_every
        every = max(1, round(steps * AVERAGE_SPAN / (s.average - 1)))
        log.write(event="snapshots", steps_allowed=steps, every=every)
        return every

    def choose_dropout(epochs: float) -> float:
        """``--dropout auto``: the dropout :func:`auto_dropout` gives for ``epochs`` passes, said and logged."""
        chosen = _set_dropout(model, auto_dropout(epochs))
        log.write(event="dropout", reason="auto", epochs_allowed=min(epochs, 1e9), dropout=chosen)
        shown = "no limit" if math.isinf(epochs) else f"about {epochs:,.1f}"
        console.say(
            f"the budget allows {shown} passes over the training pairs: dropout {chosen:g}"
            + (f" (--dropout auto turns it on from {AUTO_DROPOUT_EPOCHS})" if not chosen else "")
            + (f" ({MORE_DROPOUT:g} from {MORE_DROPOUT_EPOCHS})" if 0 < chosen < MORE_DROPOUT else "")
        )
        return chosen

    # --- the first lines ----------------------------------------------------------------------------------
    n_params = sum(p.numel() for p in model.parameters())
    where = f"epoch {progress.epoch + 1}, step {progress.step:,}; budget {budget}" if resumed else str(budget)
    console.say(
        f"model: {s.arch}, {n_params:,} parameters, d_model {s.d_model}, {s.num_layers} layers, {s.num_heads} heads; "
        f"{'resuming at' if resumed else 'training for'} {where} on {cluster.world} × {device.type}, {computes_in}"
    )
    started = {} if resumed else {"config": run.config}
    log.write(
        event="resume" if resumed else "start",
        **started,
        world=cluster.world,
        device=device.type,
        precision=computes_in,
        position=progress.start_position,
    )
    if not budget.minutes:  # with minutes: once the speed is measured
        snapshot_every = plan_snapshots(progress.steps_allowed(None))
        if s.dropout == AUTO and not resumed:
            dropout = choose_dropout(progress.epochs_allowed(math.inf))

    # --- the loop -----------------------------------------------------------------------------------------
    read_every = 1 if device.type == "cpu" else log_every  # reading a loss waits for the device: on a GPU, rarely
    zero = torch.zeros((), dtype=torch.float64, device=device)
    window_loss, window_tokens, epoch_loss, epoch_tokens = zero.clone(), 0, zero.clone(), 0
    shown_loss, last_read, last_epoch = math.nan, progress.step, first_position["epoch"]
    flops_per_token: float | None = None
    try:
        with _Signals(console) as signals:
            for epoch in range(first_position["epoch"], first_position["epoch"] + progress.epochs_left()):
                trained.train()
                epoch_loss, epoch_tokens = zero.clone(), 0
                for batch in _ahead(batches_of(epoch), device):
                    # one step (training_step): nothing in it waits for the device
                    n_tokens = batch.n_real  # counted on the host, before the batch moved
                    if flops_per_token is None:  # the session's first step, uncompiled, counts the arithmetic
                        with FlopCounterMode(display=False) as counting:
                            loss_sum = training_step(trained, model, optimizer, batch.on_device, n_tokens, s, autocast)
                        flops_per_token = counting.get_total_flops() / n_tokens
                    else:
                        loss_sum = training_step(stepper, model, optimizer, batch.on_device, n_tokens, s, autocast)
                    schedule.step()
                    summed = loss_sum.double()
                    window_loss += summed
                    epoch_loss += summed
                    window_tokens, epoch_tokens = window_tokens + n_tokens, epoch_tokens + n_tokens

                    # after the step: the budget, Ctrl-C, saves, the log
                    stop, save_due, interrupted = progress.after_step(n_tokens, signals.requested)
                    if isinstance(schedule, LinearDecaySchedule):
                        schedule.set_spent(progress.share)
                    if interrupted:
                        save("interrupted")
                        raise Interrupted
                    if save_due and not stop:
                        save("periodic")
                    logged = progress.step % log_every == 0
                    if logged or progress.step - last_read >= read_every:
                        shown_loss = float(window_loss) / max(window_tokens, 1)
                        if not math.isfinite(shown_loss):
                            raise FloatingPointError(
                                f"the loss became {shown_loss} between steps {last_read + 1:,} and "
                                f"{progress.step:,}: lower the learning rate (--lr-factor)"
                            )
                        window_loss.zero_()
                        window_tokens, last_read = 0, progress.step
                    if logged:
                        log.write(
                            event="step",
                            **progress.position(),
                            loss=shown_loss,
                            lr=schedule.get_last_lr()[0],
                            tokens_per_second=progress.tokens_per_second(),
                        )
                    if console.shows_progress:
                        console.progress(progress.progress_line(shown_loss))

                    # once the speed is known: the warm-up, --dropout auto, the snapshots, fitted to the budget
                    per_step = pace.after_step(progress.steps_done) if budget.minutes else None
                    if per_step is not None:
                        allowed = progress.steps_allowed(per_step)
                        if not paced and not resumed:
                            allowed = _fit_warmup(schedule, per_step, allowed, cluster, log, console)
                            if s.dropout == AUTO:
                                dropout = choose_dropout(progress.epochs_allowed(allowed))
                        paced = True
                        snapshot_every = plan_snapshots(allowed)
                    if snapshot_every and progress.steps_done % snapshot_every == 0 and cluster.is_first:
                        recent.append((progress.step, _weights(model)))
                    if stop:
                        break

                # after the epoch (one the budget cut short too): validation, the checkpoint, best.pt
                loss_sum, tokens = cluster.all_sum([float(epoch_loss), float(epoch_tokens)])
                valid_loss = evaluate(model, valid_batches, pad_id=0) if valid_batches is not None else None
                position, complete = progress.end_epoch()
                save("epoch" if complete else "budget")
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
                improved = valid_loss is not None and valid_loss < best_loss
                if valid_loss is not None and not improved and complete and s.late_dropout > dropout:
                    dropout = _set_dropout(model, s.late_dropout)  # learning its pairs by heart: regularize from now
                    log.write(event="dropout", epoch=epoch + 1, dropout=dropout)
                    console.say(f"the validation loss did not improve: dropout {dropout:g} from now on")
                if improved:
                    best_loss = valid_loss
                    if cluster.is_first:
                        save_checkpoint(out / BEST_FILE, model, arch=s.arch, epoch=epoch + 1, valid_loss=valid_loss)
                        log.write(event="best", epoch=epoch + 1, valid_loss=valid_loss)
                valid = (
                    ""
                    if valid_loss is None
                    else f", valid loss {valid_loss:.3f} (perplexity {line['valid_perplexity']:.1f})"
                )
                last_epoch = epoch + 1
                cut = "" if complete else " (cut short)"
                console.say(
                    f"epoch {epoch + 1}{cut}: train loss {line['train_loss']:.3f}{valid}, "
                    f"{line['tokens_per_second']:,.0f} target tokens/s, {format_duration(line['seconds'])} so far"
                )
                if not complete:
                    break
    except Interrupted:
        step = progress.position()["step"]
        log.write(event="interrupted", position=progress.position())
        console.say(f"interrupted: the state after step {step:,} is saved in {out}; continue with --resume")
        return 130
    reason = progress.reason or f"epoch budget ({budget.epochs} epochs)"
    model.eval()
    if flops_per_token:  # what share of the device's arithmetic the steps used
        peak = peak_flops(device, autocast or weights_dtype)
        rate = progress.tokens_per_second()
        share, line = describe_utilisation(flops_per_token, rate, peak)
        log.write(
            event="utilisation",
            share=share,
            flops_per_token=flops_per_token,
            tokens_per_second=rate,
            peak_flops=peak,
        )
        console.say(line)
    if cluster.is_first and s.average > 1 and valid_batches is not None:
        _average_snapshots(
            model, recent, progress.step, valid_batches, best_loss, snapshot_every, last_epoch, s, out, log, console
        )
    log.write(event="end", stopped_by=reason, position=progress.position())
    console.say(f"done ({reason}): {out / CHECKPOINT_FILE}; next: {PROGRAM} evaluate {out}")
    return 0


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
    label-smoothed loss (:func:`~attnbook.train.sequence_loss`, fused) summed
    and scaled by ``n_tokens``, the real target tokens the host counted when it
    built the batch, backward, clipping, the optimizer's step. Nothing in it
    waits for the device: the batch's values are not checked (the loop built
    it), the loss is not read, the clipping and the fused optimizer stay on
    the device. The schedule's step is the loop's.
    """
    with values_unchecked():
        logits = teacher_forced_logits(forward, batch, autocast)  # products in bfloat16 where asked
        loss_sum = sequence_loss(logits, batch.tgt_out, 0, settings.label_smoothing, "sum", fused=True)
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
) -> float:
    """Seconds a training step of this model takes here, timed on a model of its own, thrown away after.

    The loop's step (forward, the label-smoothed loss, backward, clipping,
    fused Adam) on the run's first batches, timed as
    :class:`~attnbook.translate.budget.Pace` times the run: after
    ``SKIP_STEPS`` untimed steps, over the next ``PROBE_STEPS``. The random
    state is left as it was, so the run trains as it would without the probe.
    ``clock`` is injectable for tests.
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
        while estimate is None:
            for ready in _ahead(batches, device):
                training_step(model, model, optimizer, ready.on_device, ready.n_real, settings, autocast)
                done += 1
                estimate = pace.after_step(done)
                if estimate is not None:
                    break
            else:  # fewer batches than the probe needs: go round again
                batches = (collate([dataset[i] for i in indices]) for indices in order)
        return estimate
    finally:
        torch.set_rng_state(rng)


def _restore(state: dict, checkpoint: Path, model, optimizer, schedule, cluster: Cluster, console: Console) -> None:
    """The weights, optimizer, schedule and random state of the checkpoint being resumed."""
    try:
        load_checkpoint(checkpoint, model)
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["scheduler"])
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


def _fit_warmup(
    schedule, per_step: float, allowed: float, cluster: Cluster, log: TrainingLog, console: Console
) -> float:
    """Shorten the warm-up to at most :data:`WARMUP_SHARE` of the ``allowed`` steps of the time budget.

    ``per_step`` (the measured seconds a step) and ``allowed`` are the first
    process's and shared, so that every process keeps the same schedule; the
    schedule's state, saved with each checkpoint, keeps the new warm-up when
    the run resumes. Never below the steps it took to measure the speed.
    Returns the steps the budget allows, as every process now knows them.
    """
    first = cluster.is_first
    fitted = max(SKIP_STEPS + PROBE_STEPS, int(WARMUP_SHARE * allowed)) if first else 0
    fitted, allowed = (int(v) for v in cluster.all_sum([float(fitted), allowed if first else 0.0]))
    if fitted < schedule.warmup:
        # The same peak, reached sooner. (Keeping the factor would raise the peak, and on small batches a peak
        # about twice as high costs most of what a short run learns: book/results/translator_real.json.)
        peak = noam_lr(schedule.warmup, schedule.d_model, schedule.warmup, schedule.factor)
        log.write(event="warmup", steps_allowed=allowed, warmup=fitted, was=schedule.warmup, peak_lr=peak)
        console.say(
            f"at {per_step:.2f} s a step, the budget allows about {allowed:,.0f} steps: "
            f"warm-up shortened from {schedule.warmup} to {fitted} steps (the same peak rate, {peak:.2g})"
        )
        shorten_warmup(schedule, fitted)
    return allowed


def _average_snapshots(
    model,
    recent: deque,
    final: int,
    valid_batches,
    best_loss,
    every,
    epoch: int,
    s: RunSettings,
    out: Path,
    log,
    console,
) -> None:
    """Average the last snapshots of the weights, as the paper averages its last checkpoints; keep the better.

    The final weights and the ``--average`` − 1 snapshots before them, spaced
    over the last :data:`AVERAGE_SPAN` of the session's steps, are averaged;
    the average replaces ``best.pt`` only if its validation loss is lower than
    the best epoch's: measured, not assumed.
    """
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
    log.write(event="average", steps=steps, every=every, valid_loss=loss, best_valid_loss=best_loss, kept=kept)
    which = f"the average of the weights at steps {', '.join(f'{n:,}' for n in steps)}"
    if kept:
        save_checkpoint(out / BEST_FILE, model, arch=s.arch, epoch=epoch, valid_loss=loss, averaged=steps)
        console.say(f"{which} has a lower validation loss ({loss:.3f}): it is the translator")
    else:
        console.say(f"{which} (validation loss {loss:.3f}) is not better than the best epoch ({best_loss:.3f})")
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
