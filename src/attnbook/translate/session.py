"""One training session of a run: the model, its batches, and what happens after each step and epoch.

A session builds the model (or restores it, with the optimizer, the schedule
and the random state, when a run resumes), wraps it in
:class:`~torch.nn.parallel.DistributedDataParallel` under ``torchrun``, and
hands it to :func:`attnbook.train.train` with two callbacks: after every step
(the progress line, the log, the budget, a periodic save, Ctrl-C) and after
every epoch (the epoch's line, the checkpoint, ``best.pt`` when the validation
loss is the lowest so far).

Every process builds the same length-bucketed batches for an epoch
(:class:`attnbook.data.BucketBatchSampler` with a token budget) and takes
every N-th one; the position in the epoch is saved with the checkpoint, so a
resumed run takes the very batches an uninterrupted one would have.
"""

from __future__ import annotations

import math
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel

from ..attention import MultiHeadAttention
from ..data import Batch, BucketBatchSampler, Pair, PairDataset, Vocab, collate
from ..train import (
    EpochLog,
    LinearDecaySchedule,
    TrainStep,
    evaluate,
    load_checkpoint,
    noam_lr,
    paper_optimizer,
    save_checkpoint,
    shorten_warmup,
    train,
)
from ..transformer import PositionwiseFFN
from .cluster import Cluster
from .console import PROGRAM, CommandError, Console, format_duration
from .control import PROBE_STEPS, SKIP_STEPS, Interrupted, Pace, Position, Signals, Tracker
from .model import build_model, precision
from .run_folder import BEST_FILE, CHECKPOINT_FILE, LOG_FILE, TrainingLog, best_valid_loss, one_line
from .settings import AUTO, AUTO_DROPOUT_EPOCHS, MORE_DROPOUT, MORE_DROPOUT_EPOCHS, Budget, RunSettings, auto_dropout
from .tokens import RunTokens

__all__ = ["PreparedRun", "TrainingSession", "WARMUP_SHARE", "AVERAGE_SPAN"]

#: A run with a budget in minutes shortens its warm-up to at most this share of the steps the budget allows, as
#: soon as its speed is measured (:class:`~attnbook.translate.control.Pace`): the warm-up that suits a fast
#: machine would take a slow one's whole budget.
WARMUP_SHARE = 0.1

#: ``--average N`` averages N snapshots of the weights taken at equal intervals over this share of the
#: session's last steps, the final weights the last of them (the paper averages its last checkpoints).
AVERAGE_SPAN = 0.2


@dataclass
class PreparedRun:
    """A run ready to train: its configuration, vocabularies and pairs, and, when it resumes, its saved state."""

    config: dict
    settings: RunSettings
    src_vocab: Vocab
    tgt_vocab: Vocab
    train_pairs: list[Pair]
    valid_pairs: list[Pair]
    tokens: RunTokens | None = None  # new runs: written once, beside the vocabularies
    state: dict | None = None  # resumed runs: the training state of the checkpoint


class TrainingSession:
    """Train a prepared run within its budget, saving into ``out``; :meth:`run` returns the exit status."""

    def __init__(
        self,
        run: PreparedRun,
        budget: Budget,
        cluster: Cluster,
        console: Console,
        out: Path,
        checkpoint_minutes: float = 5.0,
        log_every: int = 50,
    ) -> None:
        self.prepared, self.budget, self.cluster, self.console, self.out = run, budget, cluster, console, out
        self.settings = s = run.settings
        self._build_model()
        self.dataset = PairDataset(run.train_pairs, run.src_vocab, run.tgt_vocab)
        self.sampler = BucketBatchSampler(self.dataset.lengths(), max_tokens=s.batch_tokens, seed=s.seed)
        self.steps_per_epoch = len(self.sampler.batches(0)) // cluster.world
        if self.steps_per_epoch < 1:
            raise CommandError(
                f"too few training pairs for {cluster.world} processes: lower --batch-tokens or use fewer processes"
            )
        self.valid_batches = self._valid_batches()
        self.position = self._start_position()
        self.log = TrainingLog(out / LOG_FILE if cluster.is_first else None)
        self.log_every = max(1, log_every)
        self.tracker = Tracker(cluster, budget, self.position, self.steps_per_epoch, checkpoint_minutes)
        if isinstance(self.scheduler, LinearDecaySchedule):  # a resumed run's budget may have grown
            self.scheduler.set_spent(self.tracker.share)
        self.best_loss = best_valid_loss(out) if run.state is not None else math.inf
        self.signals = Signals(console)
        self.recent: deque = deque(maxlen=s.average)  # (step, weights): the last snapshots
        self.snapshot_every: int | None = None  # steps between snapshots, once the budget's steps are known
        self.last_epoch = self.position["epoch"]
        sync = torch.cuda.synchronize if cluster.device.type == "cuda" else None
        self.pace = Pace(sync=(lambda: sync(cluster.device)) if sync else None)
        self._paced = False  # the warm-up and --dropout auto are fitted to the first measured speed only
        stored = (run.state or {}).get("dropout", s.dropout)
        self.set_dropout(0.0 if stored == AUTO else stored)  # auto: none until the budget is known (choose_dropout)

    @property
    def computes_in(self) -> str:
        """How the run computes: ``float32``, ``float64``, or ``bfloat16 mixed precision``."""
        name = str(self.autocast or next(self.model.parameters()).dtype).removeprefix("torch.")
        return f"{name} mixed precision" if self.autocast else name

    def _build_model(self) -> None:
        s, state, cluster = self.settings, self.prepared.state, self.cluster
        torch.manual_seed(s.seed)
        model = build_model(s.arch, self.prepared.config["model"])
        weights, self.autocast = precision(s.dtype, cluster.device)
        self.model = model.to(dtype=weights, device=cluster.device)
        self.optimizer, self.scheduler = paper_optimizer(
            self.model, d_model=s.d_model, warmup=s.warmup, factor=s.lr_factor, fused=True, decay=s.decay
        )
        if state is None:
            torch.manual_seed(s.seed + 1 + cluster.rank)  # dropout: each process its own stream
        else:
            self._restore(state)
        self.trained = self.model
        if cluster.distributed:
            ids = [cluster.device.index] if cluster.device.type == "cuda" else None
            self.trained = DistributedDataParallel(self.model, device_ids=ids, broadcast_buffers=False)

    def _restore(self, state: dict) -> None:
        """The weights, optimizer, schedule and random state of the checkpoint being resumed."""
        checkpoint, cluster = self.out / CHECKPOINT_FILE, self.cluster
        try:
            load_checkpoint(checkpoint, self.model)
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        except Exception as err:
            raise CommandError(f"cannot resume from {checkpoint}: {one_line(err)}") from None
        mine = min(cluster.rank, len(state["rng"]) - 1)
        torch.set_rng_state(state["rng"][mine])
        if cluster.device.type == "cuda" and state.get("cuda_rng"):
            torch.cuda.set_rng_state(state["cuda_rng"][mine], cluster.device)
        if state["world"] != cluster.world:
            self.console.note(
                f"the run was trained by {state['world']} processes and continues on {cluster.world}: "
                "the batches differ from an uninterrupted run"
            )

    def _valid_batches(self) -> list[Batch] | None:
        run = self.prepared
        if not run.valid_pairs:
            return None
        valid = PairDataset(run.valid_pairs, run.src_vocab, run.tgt_vocab)
        sampler = BucketBatchSampler(valid.lengths(), max_tokens=self.settings.batch_tokens, shuffle=False)
        return [collate([valid[i] for i in indices]) for indices in sampler.batches(0)]

    def _start_position(self) -> Position:
        """Where training starts (the saved position when resuming), after checking that budget is left."""
        state, budget = self.prepared.state, self.budget
        position = (
            dict(state["position"])
            if state
            else {"epoch": 0, "step_in_epoch": 0, "step": 0, "seconds": 0.0, "tokens": 0}
        )
        if position["step_in_epoch"] >= self.steps_per_epoch:
            position.update(epoch=position["epoch"] + 1, step_in_epoch=0)
        spent = f"the run in {str(self.out)!r} has already used its budget ({budget})"
        if (budget.epochs and position["epoch"] >= budget.epochs) or (
            budget.steps and position["step"] >= budget.steps
        ):
            raise CommandError(f"{spent}; give a larger --epochs or --steps to continue")
        if budget.minutes and position["seconds"] >= budget.minutes * 60:
            raise CommandError(f"{spent}; give a larger --minutes to continue")
        return position

    def batches_for(self, epoch: int) -> Iterator[Batch]:
        """This process's batches of the ``epoch``-th epoch of this session (from 1), from where the run stands."""
        absolute = self.position["epoch"] + epoch - 1
        everything = self.sampler.batches(absolute)
        mine = everything[self.cluster.rank :: self.cluster.world][: self.steps_per_epoch]
        sources = self._split_anew([i for indices in mine for i in indices], absolute)
        if epoch == 1:
            mine = mine[self.position["step_in_epoch"] :]
        for indices in mine:
            yield collate([(sources.get(i, self.dataset.src_ids[i]), self.dataset.tgt_ids[i]) for i in indices])

    def _split_anew(self, indices: list[int], epoch: int) -> dict[int, list[int]]:
        """``--bpe-dropout``: this epoch's source ids of the pairs ``indices``, split anew (none when it is off).

        The splits depend on the seed, the epoch (from 0) and the process, and
        cover the whole of the process's epoch, so a resumed run splits as an
        uninterrupted one would. A split longer than ``--max-length`` is left
        as the usual one. Batches are formed on the usual lengths. (``train``
        refuses the option with words, which have no merges.)
        """
        p, run = self.settings.bpe_dropout, self.prepared
        if not p:
            return {}
        seed = zlib.crc32(f"{self.settings.seed}/{epoch}/{self.cluster.rank}".encode())
        pairs, vocab, longest = run.train_pairs, run.src_vocab, self.settings.max_length
        split = run.tokens.src_subwords.sample([pairs[i].src for i in indices], p, seed)
        return {i: vocab.encode(pieces) for i, pieces in zip(indices, split) if len(pieces) <= longest}

    def run(self) -> int:
        """Train until the budget is spent or Ctrl-C; 0, or 130 when interrupted."""
        s, resumed, position, cluster = self.settings, self.prepared.state is not None, self.position, self.cluster
        n_params = sum(p.numel() for p in self.model.parameters())
        where = (
            f"epoch {position['epoch'] + 1}, step {position['step']:,}; budget {self.budget}"
            if resumed
            else str(self.budget)
        )
        self.console.say(
            f"model: {s.arch}, {n_params:,} parameters, "
            f"d_model {s.d_model}, {s.num_layers} layers, {s.num_heads} heads; "
            f"{'resuming at' if resumed else 'training for'} {where} on {cluster.world} × {cluster.device.type}, "
            f"{self.computes_in}"
        )
        started = {} if resumed else {"config": self.prepared.config}
        self.log.write(
            event="resume" if resumed else "start",
            **started,
            world=cluster.world,
            device=cluster.device.type,
            precision=self.computes_in,
            position=position,
        )
        if not self.budget.minutes:  # with minutes: after the first steps
            self.plan_snapshots(self.steps_allowed(None))
            if s.dropout == AUTO and not resumed:
                self.choose_dropout(self._epochs_allowed(math.inf))
        epochs_left = min(self.budget.epochs - position["epoch"], 10**6) if self.budget.epochs else 10**6
        try:
            with self.signals:
                history = train(
                    self.trained,
                    self.batches_for,
                    self.valid_batches,
                    epochs=epochs_left,
                    clip=s.clip or None,
                    pad_id=0,
                    label_smoothing=s.label_smoothing,
                    optimizer=self.optimizer,
                    scheduler=self.scheduler,
                    seed=None,
                    plot=False,
                    verbose=False,
                    on_step=self.on_step,
                    on_epoch=self.on_epoch,
                    autocast=self.autocast,
                    fused_loss=True,
                )
        except Interrupted:
            self.log.write(event="interrupted", position=self.tracker.position())
            step = self.tracker.position()["step"]
            self.console.say(
                f"interrupted: the state after step {step:,} is saved in {self.out}; continue with --resume"
            )
            return 130
        reason = self.tracker.reason or history.stopped_by
        self.average_snapshots()
        self.log.write(event="end", stopped_by=reason, position=self.tracker.position())
        self.console.say(f"done ({reason}): {self.out / CHECKPOINT_FILE}; next: {PROGRAM} evaluate {self.out}")
        return 0

    def on_step(self, info: TrainStep) -> bool:
        """After every step: stop, save or carry on; log every ``log_every`` steps; the progress line."""
        tracker = self.tracker
        tracker.step(info)
        want_stop, want_save, interrupted = tracker.decide(self.signals.requested)
        if isinstance(self.scheduler, LinearDecaySchedule):
            self.scheduler.set_spent(tracker.share)
        if interrupted:
            self.save(tracker.position(), "interrupted")
            raise Interrupted
        if want_save and not want_stop:
            self.save(tracker.position(), "periodic")
        if tracker.step_count % self.log_every == 0:
            lr = self.scheduler.get_last_lr()[0]
            self.log.write(
                event="step", **tracker.position(), loss=info.loss, lr=lr, tokens_per_second=tracker.tokens_per_second()
            )
        tracker.show(info.loss, self.console)
        tracker.stopping = tracker.stopping or want_stop
        steps_done = tracker.step_count - self.position["step"]  # in this session
        if self.budget.minutes:
            per_step = self.pace.after_step(steps_done)
            if per_step is not None:
                allowed = self.steps_allowed(per_step)
                if not self._paced and self.prepared.state is None:
                    allowed = self.fit_warmup(per_step, allowed)  # every process's, as the first measured it
                    if self.settings.dropout == AUTO:
                        self.choose_dropout(self._epochs_allowed(allowed))
                self._paced = True
                self.plan_snapshots(allowed)
        if self.snapshot_every and steps_done % self.snapshot_every == 0 and self.cluster.is_first:
            self.recent.append((tracker.step_count, self._weights()))
        return want_stop

    def steps_allowed(self, per_step: float | None) -> float:
        """How many steps this session's budget allows: by its steps, its epochs, and its minutes at ``per_step`` s.

        In minutes: the steps done so far, and as many more as the time left
        allows at ``per_step`` (the time of the first, slower steps is spent, not
        extrapolated).
        """
        budget, start = self.budget, self.position
        limits = [math.inf]
        if budget.steps:
            limits.append(budget.steps - start["step"])
        if budget.epochs:
            limits.append((budget.epochs - start["epoch"]) * self.steps_per_epoch - start["step_in_epoch"])
        if budget.minutes and per_step:
            done = self.tracker.step_count - start["step"]
            left = max(0.0, budget.minutes * 60 - self.tracker.elapsed())
            limits.append(done + left / max(per_step, 1e-9))
        return min(limits)

    @property
    def pace_steps(self) -> int:
        """The steps after which the speed is first known (a warm-up is never shortened below them)."""
        return SKIP_STEPS + PROBE_STEPS

    def plan_snapshots(self, steps: float) -> None:
        """Space ``--average`` snapshots so that they span :data:`AVERAGE_SPAN` of the session's ``steps``."""
        if self.settings.average > 1 and math.isfinite(steps):
            self.snapshot_every = max(1, round(steps * AVERAGE_SPAN / (self.settings.average - 1)))
            self.log.write(event="snapshots", steps_allowed=steps, every=self.snapshot_every)

    def _weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}

    def fit_warmup(self, per_step: float, allowed: float) -> float:
        """Shorten the warm-up to at most :data:`WARMUP_SHARE` of the ``allowed`` steps of the time budget.

        ``per_step`` (the measured seconds a step) and ``allowed`` are the first
        process's and shared, so that every process keeps the same schedule; the
        schedule's state, saved with each checkpoint, keeps the new warm-up when
        the run resumes. Returns the steps the budget allows.
        """
        first = self.cluster.is_first
        fitted = max(self.pace_steps, int(WARMUP_SHARE * allowed)) if first else 0
        fitted, allowed = (int(v) for v in self.cluster.all_sum([float(fitted), allowed if first else 0.0]))
        schedule = self.scheduler
        if fitted < schedule.warmup:
            # The same peak, reached sooner. (Keeping the factor would raise the peak, and on small batches a peak
            # about twice as high costs most of what a short run learns: book/results/translator_real.json.)
            peak = noam_lr(schedule.warmup, schedule.d_model, schedule.warmup, schedule.factor)
            self.log.write(event="warmup", steps_allowed=allowed, warmup=fitted, was=schedule.warmup, peak_lr=peak)
            self.console.say(
                f"at {per_step:.2f} s a step, the budget allows about {allowed:,.0f} steps: "
                f"warm-up shortened from {schedule.warmup} to {fitted} steps (the same peak rate, {peak:.2g})"
            )
            shorten_warmup(schedule, fitted)
        return allowed

    def _epochs_allowed(self, steps_in_time: float) -> float:
        """How many passes over the training pairs the budget allows: its epochs, or its steps or time at this speed."""
        steps = min(steps_in_time, self.budget.steps or math.inf)
        return min(self.budget.epochs or math.inf, steps / self.steps_per_epoch)

    def choose_dropout(self, epochs: float) -> None:
        """``--dropout auto``: the dropout :func:`~attnbook.translate.settings.auto_dropout` gives for ``epochs``.

        One pass over the pairs is too few for dropout to pay (it slows
        learning); many passes over a small file teach a model without it its
        training pairs by heart. The choice is logged and saved with each
        checkpoint, so a resumed run keeps it.
        """
        chosen = auto_dropout(epochs)
        self.set_dropout(chosen)
        self.log.write(event="dropout", reason="auto", epochs_allowed=min(epochs, 1e9), dropout=chosen)
        shown = "no limit" if math.isinf(epochs) else f"about {epochs:,.1f}"
        self.console.say(
            f"the budget allows {shown} passes over the training pairs: dropout {chosen:g}"
            + (f" (--dropout auto turns it on from {AUTO_DROPOUT_EPOCHS})" if not chosen else "")
            + (f" ({MORE_DROPOUT:g} from {MORE_DROPOUT_EPOCHS})" if 0 < chosen < MORE_DROPOUT else "")
        )

    def on_epoch(self, epoch_log: EpochLog) -> bool:
        """After every epoch: the checkpoint, the log, ``best.pt`` if this is the best epoch, one line."""
        loss_sum, tokens = self.cluster.all_sum([epoch_log.train_loss * epoch_log.tokens, float(epoch_log.tokens)])
        complete = not self.tracker.stopping
        position = self.tracker.end_epoch(complete)
        self.save(position, "epoch" if complete else "budget")
        epoch, valid_loss = self.position["epoch"] + epoch_log.epoch, epoch_log.valid_loss
        self.last_epoch = epoch
        line = {
            "epoch": epoch,
            "complete": complete,
            "train_loss": loss_sum / max(tokens, 1),
            "valid_loss": valid_loss,
            "valid_perplexity": math.exp(min(valid_loss, 50)) if valid_loss is not None else None,
            "tokens_per_second": self.tracker.tokens_per_second(),
            "seconds": position["seconds"],
            "step": position["step"],
        }
        self.log.write(event="epoch", **line)
        improved = valid_loss is not None and valid_loss < self.best_loss
        if valid_loss is not None and not improved and complete and self.settings.late_dropout > self.dropout:
            self.set_dropout(self.settings.late_dropout)  # learning the training pairs by heart: regularize from now on
            self.log.write(event="dropout", epoch=epoch, dropout=self.dropout)
            self.console.say(f"the validation loss did not improve: dropout {self.dropout:g} from now on")
        if improved:
            self.best_loss = valid_loss
        if self.cluster.is_first and improved:
            save_checkpoint(
                self.out / BEST_FILE, self.model, arch=self.settings.arch, epoch=epoch, valid_loss=valid_loss
            )
            self.log.write(event="best", epoch=epoch, valid_loss=valid_loss)
        valid = (
            f", valid loss {valid_loss:.3f} (perplexity {line['valid_perplexity']:.1f})"
            if valid_loss is not None
            else ""
        )
        self.console.say(
            f"epoch {epoch}{'' if complete else ' (cut short)'}: train loss {line['train_loss']:.3f}{valid}, "
            f"{line['tokens_per_second']:,.0f} target tokens/s, {format_duration(line['seconds'])} so far"
        )
        return False

    def set_dropout(self, p: float) -> None:
        """Set the dropout that ``--dropout`` sets (not attention's nor the feed-forward's) from now on."""
        self.dropout = p
        for parent in self.model.modules():
            if not isinstance(parent, (MultiHeadAttention, PositionwiseFFN)):
                for child in parent.children():
                    if isinstance(child, torch.nn.Dropout):
                        child.p = p

    def average_snapshots(self) -> None:
        """Average the last snapshots of the weights, as the paper averages its last checkpoints; keep the better.

        The final weights and the ``--average`` − 1 snapshots before them,
        spaced over the last :data:`AVERAGE_SPAN` of the session's steps, are
        averaged; the average replaces ``best.pt`` only if its validation loss
        is lower than the best epoch's: measured, not assumed.
        """
        if self.settings.average < 2 or self.valid_batches is None or not self.cluster.is_first:
            return
        current = self._weights()
        final = self.tracker.step_count
        if not self.recent or self.recent[-1][0] != final:
            self.recent.append((final, current))
        if len(self.recent) < 2:
            return
        steps = [step for step, _ in self.recent]
        averaged = {
            k: sum(w[k].double() for _, w in self.recent).div(len(self.recent)).to(v.dtype)
            if v.is_floating_point()
            else v
            for k, v in current.items()
        }
        self.model.load_state_dict(averaged)
        loss = evaluate(self.model, self.valid_batches, pad_id=0)
        kept = loss < self.best_loss
        self.log.write(
            event="average",
            steps=steps,
            every=self.snapshot_every,
            valid_loss=loss,
            best_valid_loss=self.best_loss,
            kept=kept,
        )
        which = f"the average of the weights at steps {', '.join(f'{s:,}' for s in steps)}"
        if kept:
            save_checkpoint(
                self.out / BEST_FILE,
                self.model,
                arch=self.settings.arch,
                epoch=self.last_epoch,
                valid_loss=loss,
                averaged=steps,
            )
            self.console.say(f"{which} has a lower validation loss ({loss:.3f}): it is the translator")
        else:
            self.console.say(
                f"{which} (validation loss {loss:.3f}) is not better than the best epoch ({self.best_loss:.3f})"
            )
        self.model.load_state_dict(current)

    def save(self, position: Position, reason: str) -> None:
        """The checkpoint with the training state of every process (written by the first)."""
        cluster = self.cluster
        rng = cluster.gather(torch.get_rng_state())  # dropout's random state, of every process
        cuda_rng = cluster.gather(torch.cuda.get_rng_state(cluster.device)) if cluster.device.type == "cuda" else []
        if not cluster.is_first:
            return
        train_state = {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng,
            "cuda_rng": cuda_rng,
            "world": cluster.world,
            "position": position,
            "dropout": self.dropout,
        }
        save_checkpoint(self.out / CHECKPOINT_FILE, self.model, train_state=train_state, arch=self.settings.arch)
        self.log.write(event="checkpoint", reason=reason, position=position)
