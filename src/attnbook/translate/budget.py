"""How long a run trains, and every decision its budget takes: the budget, its plan, and where a run stands.

A budget (``--minutes``, ``--epochs``, ``--steps``: whichever ends first) is
:class:`Budget`, read from the command line once and held in seconds from then
on. :meth:`Budget.plan` takes every decision the budget takes, as a pure
function of where a session stands (:class:`Where`) and how fast its steps go:
the share of the budget spent and whether to stop, the steps and the passes
over the training pairs it allows, the warm-up that fits them, the dropout
``--dropout auto`` chooses, and how far apart the ``--average`` snapshots go
(a :class:`Plan`). :class:`Progress` is a run measured against it: it counts the
steps, reads the clock, asks the plan, and shares what the first process decided
with the others in one small all-reduce a step, so that every process stops,
and saves, after the same step. :class:`Pace` says how fast steps go, which a
budget in time needs to plan by.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .console import CommandError, format_duration
from .settings import at_least, auto_dropout, check, setting

if TYPE_CHECKING:
    from .cluster import Cluster

__all__ = [
    "Budget",
    "Where",
    "Plan",
    "Position",
    "Progress",
    "Pace",
    "SKIP_STEPS",
    "PROBE_STEPS",
    "DRIFT",
    "START",
    "WARMUP_SHARE",
    "AVERAGE_SPAN",
]

Position = dict  # {"epoch", "step_in_epoch", "step", "seconds", "tokens"}: where a run is, as saved in its checkpoint
START: Position = {"epoch": 0, "step_in_epoch": 0, "step": 0, "seconds": 0.0, "tokens": 0}

#: How the speed of a run is measured: the first ``SKIP_STEPS`` steps carry one-off costs (on a GPU: starting
#: CUDA, the allocator, choosing kernels; on a CPU: first-touch memory), so the clock starts after them and
#: times the next ``PROBE_STEPS``; from then on the speed is re-measured every ``PROBE_STEPS`` steps, and a
#: new estimate is taken when the average since the start of timing has moved by more than ``DRIFT``.
SKIP_STEPS, PROBE_STEPS, DRIFT = 5, 20, 0.15
#: A run with a time budget shortens its warm-up to at most this share of the steps the budget allows, as soon
#: as its speed is measured: the warm-up that suits a fast machine would take a slow one's whole budget.
WARMUP_SHARE = 0.1
#: ``--average N`` averages N snapshots of the weights taken at equal intervals over this share of the
#: session's last steps, the final weights the last of them (the paper averages its last checkpoints).
AVERAGE_SPAN = 0.2


@dataclass(frozen=True)
class Where:
    """Where a session stands, as its budget reads it; the start of a new run unless said."""

    steps_per_epoch: int  # this process's
    epoch: int = 0  # the epoch under way, from 0
    in_epoch: int = 0  # its steps done
    step: int = 0  # steps done, earlier sessions' included
    steps_done: int = 0  # steps done in this session
    seconds: float = 0.0  # seconds of training, earlier sessions' included


@dataclass(frozen=True)
class Plan:
    """What the budget decides at a point of a run (:meth:`Budget.plan`)."""

    spent: float  # the share of the budget used, 0 to 1: its largest part's (the first part to end ends the run)
    stop: bool  # the steps or the time are used up: stop after this step
    reason: str  # the budget that ends the run here, an epoch budget's included ("" while none does)
    seconds_left: float  # until the nearest budget ends, at the speed given (without one: the time budget's)
    steps_allowed: float  # the session's steps, done and to come (inf: nothing limits them)
    epochs_allowed: float  # the passes over the training pairs the budget allows
    warmup: int | None  # the longest that fits: WARMUP_SHARE of the steps allowed (at least the steps timed)
    dropout: float  # what --dropout auto chooses for the passes allowed
    snapshot_every: int | None  # steps between the --average snapshots, spread over AVERAGE_SPAN of the steps allowed


def _minutes(seconds: float) -> float:
    """Seconds back in minutes, as they were given: the shortest decimal whose 60-fold they are.

    ``--minutes 0.03`` is 0.03 × 60 = 1.7999999999999998 s; back in minutes, 0.03 (not 0.029999999999999995).
    """
    for digits in range(1, 18):
        minutes = float(f"{seconds / 60:.{digits}g}")
        if minutes * 60 == seconds:
            return minutes
    return seconds / 60


def _minutes_option(text: str) -> float:
    """``--minutes M``: M minutes, in seconds."""
    try:
        return float(text) * 60
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None


def _positive_minutes(seconds: float) -> str | None:
    return None if seconds > 0 else f"must be > 0, got {_minutes(seconds):g}"


@dataclass(frozen=True)
class Budget:
    """How long ``train`` runs: whichever of its parts ends first (10 minutes when none is given).

    The time is in seconds from the moment the command line is read
    (``--minutes M`` is 60 M seconds); the run folder's ``config.json`` records
    it in minutes, as it was given (:meth:`record`, :meth:`from_record`).
    :meth:`plan` takes every decision the budget takes.
    """

    seconds: float | None = setting(
        None,
        "train for M minutes of wall-clock time",
        kind=_minutes_option,
        metavar="M",
        rule=_positive_minutes,
        flag="--minutes",
    )
    epochs: int | None = setting(
        None, "train for E passes over the training pairs", kind=int, metavar="E", rule=at_least(1)
    )
    steps: int | None = setting(None, "train for N optimizer steps", kind=int, metavar="N", rule=at_least(1))

    def __str__(self) -> str:
        parts = []
        if self.seconds:
            parts.append(f"{_minutes(self.seconds):g} minutes")
        if self.epochs:
            parts.append(f"{self.epochs} epochs")
        if self.steps:
            parts.append(f"{self.steps} steps")
        return " or ".join(parts)

    def record(self) -> dict:
        """The budget as the run folder's ``config.json`` records it: the time in minutes, as given."""
        minutes = _minutes(self.seconds) if self.seconds is not None else None
        return {"minutes": minutes, "epochs": self.epochs, "steps": self.steps}

    @classmethod
    def from_record(cls, record: dict) -> Budget:
        """The budget a run folder recorded (:meth:`record`), checked as the command line's is."""
        minutes = record.get("minutes")
        budget = cls(minutes * 60 if minutes is not None else None, record.get("epochs"), record.get("steps"))
        check(budget)
        return budget

    def plan(self, at: Where, per_step: float | None = None, *, average: int = 1, whole_steps: bool = False) -> Plan:
        """Every decision of the budget at ``at``, steps taking ``per_step`` seconds (``None``: not measured).

        Pure: the same budget, position and speed make the same plan, on any
        process. The steps allowed are the fewest of what the budget's steps,
        its epochs and, at ``per_step``, its time allow: in time, the steps done
        so far and as many more as the time left allows (the first, slower
        steps are spent, not extrapolated). ``whole_steps`` counts them in whole
        steps, as every process agrees on them when the warm-up is fitted;
        ``average`` is ``--average``.
        """
        per_epoch = at.steps_per_epoch
        steps_left = min(
            self.steps - at.step if self.steps else math.inf,
            (self.epochs - at.epoch) * per_epoch - at.in_epoch if self.epochs else math.inf,
        )
        time_left = self.seconds - at.seconds if self.seconds else math.inf
        in_time = max(0.0, time_left) / max(per_step, 1e-9) if self.seconds and per_step else math.inf
        allowed = at.steps_done + min(steps_left, in_time)
        finite = math.isfinite(allowed)
        warmup = max(SKIP_STEPS + PROBE_STEPS, int(WARMUP_SHARE * allowed)) if finite else None
        steps = int(allowed) if whole_steps and finite else allowed
        epochs = min(self.epochs or math.inf, min(steps, self.steps or math.inf) / per_epoch)

        shares, reason = [0.0], ""
        if self.steps:
            shares.append(at.step / self.steps)
            reason = f"step budget ({self.steps} steps)" if at.step >= self.steps else reason
        if self.epochs:
            shares.append((at.epoch + at.in_epoch / per_epoch) / self.epochs)
        if self.seconds:
            shares.append(at.seconds / self.seconds)
            reason = f"time budget ({_minutes(self.seconds):g} minutes)" if at.seconds >= self.seconds else reason
        stop = bool(reason)  # an epoch budget ends with the last epoch's batches
        if self.epochs and at.in_epoch >= per_epoch and at.epoch + 1 >= self.epochs:
            reason = f"epoch budget ({self.epochs} epochs)"
        at_speed = steps_left * per_step if per_step is not None and math.isfinite(steps_left) else math.inf
        return Plan(
            spent=min(1.0, max(shares)),
            stop=stop,
            reason=reason,
            seconds_left=min(time_left, at_speed),
            steps_allowed=steps,
            epochs_allowed=epochs,
            warmup=warmup,
            dropout=auto_dropout(epochs),
            snapshot_every=max(1, round(steps * AVERAGE_SPAN / (average - 1))) if average > 1 and finite else None,
        )


class Pace:
    """Seconds per step, measured after the one-off costs of the first steps, and measured again when it drifts.

    :meth:`after_step` is called after each step of a session with the number
    of steps this session has done. It returns the new estimate of seconds per
    step when there is one — first after ``SKIP_STEPS + PROBE_STEPS`` steps,
    then whenever the average since the clock started differs from the last
    estimate by more than ``DRIFT`` (checked every ``PROBE_STEPS`` steps) —
    else ``None``. ``sync`` waits for the device (a GPU runs ahead of the host,
    so its clock would read the time to queue the steps, not to run them), and
    is called only where the clock is read. ``clock`` is injectable for tests.
    """

    def __init__(self, sync: Callable[[], None] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.sync, self.clock = sync or (lambda: None), clock
        self.started: float | None = None
        self.per_step: float | None = None  # the estimate in use

    def now(self) -> float:
        """The clock, once the device has caught up."""
        self.sync()
        return self.clock()

    def average(self, steps_done: int, now: float) -> float | None:
        """Seconds per step over the steps timed so far (``now``: the clock read after the last), or ``None``
        while the untimed first steps are still running."""
        timed = steps_done - SKIP_STEPS
        return (now - self.started) / timed if self.started is not None and timed > 0 else None

    def after_step(self, steps_done: int) -> float | None:
        if steps_done == SKIP_STEPS:
            self.started = self.now()
            return None
        timed = steps_done - SKIP_STEPS
        if self.started is None or timed <= 0 or timed % PROBE_STEPS:
            return None
        average = self.average(steps_done, self.now())
        if self.per_step is None or abs(average / self.per_step - 1) > DRIFT:
            self.per_step = average
            return average
        return None


class Progress:
    """A run against its budget: where it is, what the budget's plan says there, when to save and when to stop.

    ``position`` is where this session starts (:data:`START`, or the saved
    position of a resumed run); a budget already spent there is refused with
    words that say which option to raise. ``steps_per_epoch`` is this
    process's; ``checkpoint_minutes`` spaces the periodic checkpoints; ``sync`` waits
    for the device where the steps are timed (:class:`Pace`). ``clock`` is
    injectable for tests.
    """

    def __init__(
        self,
        budget: Budget,
        position: Position,
        steps_per_epoch: int,
        cluster: Cluster,
        checkpoint_minutes: float,
        run_name: str = "the run",
        sync: Callable[[], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.budget, self.cluster, self.steps_per_epoch = budget, cluster, steps_per_epoch
        self.clock = clock or time.monotonic
        position = dict(position)
        if position["step_in_epoch"] >= steps_per_epoch:  # saved at the end of an epoch
            position.update(epoch=position["epoch"] + 1, step_in_epoch=0)
        spent = f"{run_name} has already used its budget ({budget})"
        if (budget.epochs and position["epoch"] >= budget.epochs) or (
            budget.steps and position["step"] >= budget.steps
        ):
            raise CommandError(f"{spent}; give a larger --epochs or --steps to continue")
        if budget.seconds and position["seconds"] >= budget.seconds:
            raise CommandError(f"{spent}; give a larger --minutes to continue")
        self.start_position = position
        self.epoch, self.in_epoch, self.step = position["epoch"], position["step_in_epoch"], position["step"]
        self.seconds_before, self.tokens_before = position["seconds"], position["tokens"]
        self.start = self.last_save = self.clock()
        self.checkpoint_seconds = checkpoint_minutes * 60
        self.pace = Pace(sync=sync, clock=self.clock)
        self.tokens = 0  # target tokens trained in this session, every process's
        self.stopping = False  # the budget ended this epoch early
        self.reason = ""  # which budget ended the run
        # the share of the budget spent, as the first process measured it after the last step (here: as saved)
        self.share = budget.plan(self.where(position["seconds"])).spent

    # --- where the run is -----------------------------------------------------------------------------
    @property
    def steps_done(self) -> int:
        """Steps of this session."""
        return self.step - self.start_position["step"]

    def elapsed(self) -> float:
        """Seconds of training, earlier sessions' included."""
        return self.seconds_before + self.clock() - self.start

    def position(self) -> Position:
        return {
            "epoch": self.epoch,
            "step_in_epoch": self.in_epoch,
            "step": self.step,
            "seconds": self.elapsed(),
            "tokens": self.tokens_before + self.tokens,
        }

    def where(self, seconds: float | None = None) -> Where:
        """Where the run stands, for the budget's plan; ``seconds``: the time spent, when not the clock's."""
        seconds = self.elapsed() if seconds is None else seconds
        return Where(self.steps_per_epoch, self.epoch, self.in_epoch, self.step, self.steps_done, seconds)

    def tokens_per_second(self) -> float:
        return self.tokens / max(1e-9, self.clock() - self.start)

    def epochs(self) -> range:
        """The epochs this session may train (the first one may be partly done)."""
        return range(self.epoch, self.budget.epochs or self.epoch + 10**6)

    # --- what the budget decides ----------------------------------------------------------------------
    @property
    def timed(self) -> bool:
        """Whether the budget has a time part, whose plan waits for the speed to be measured."""
        return bool(self.budget.seconds)

    def measured_pace(self) -> float | None:
        """After a step: the seconds a step takes, when the time budget's :class:`Pace` has a new measure."""
        return self.pace.after_step(self.steps_done) if self.timed else None

    def plan(self, per_step: float | None = None, *, average: int = 1, agreed: bool = False) -> Plan:
        """The budget's plan where the run stands, steps taking ``per_step`` seconds (:meth:`Budget.plan`).

        ``agreed``: the first process's plan, on every process: made from its
        clock and its speed, shared, and counted in whole steps (an all-reduce,
        that every process makes at the same step).
        """
        seconds = self.elapsed()
        if agreed:
            first = self.cluster.is_first
            per_step, seconds = self.cluster.all_sum([per_step, seconds] if first else [0.0, 0.0])
        return self.budget.plan(self.where(seconds), per_step, average=average, whole_steps=agreed)

    @property
    def stopped_by(self) -> str:
        """Which budget ended the run."""
        return self.reason or f"epoch budget ({self.budget.epochs} epochs)"

    # --- after each step, and each epoch --------------------------------------------------------------
    def after_step(self, tokens: int, interrupted: bool) -> tuple[bool, bool, bool]:
        """Count a step of ``tokens`` target tokens; ``(stop, save, interrupted)``, agreed by every process."""
        self.step += 1
        self.in_epoch += 1
        plan = self.budget.plan(self.where())
        self.reason = plan.reason or self.reason
        first = self.cluster.is_first
        due = 1.0 if first and self.clock() - self.last_save >= self.checkpoint_seconds else 0.0
        # one all-reduce a step: the flags (any process raising one counts), the first process's share of the
        # budget spent (so that every process keeps the same learning rate) and the step's target tokens
        stop, due, interrupted_any, self.share, tokens_all = self.cluster.all_sum(
            [float(plan.stop), due, float(interrupted), plan.spent if first else 0.0, float(tokens)]
        )
        self.tokens += int(tokens_all)
        if due:
            self.last_save = self.clock()
        self.stopping = self.stopping or bool(stop)
        return bool(stop), bool(due), bool(interrupted_any)

    def end_epoch(self) -> tuple[Position, bool]:
        """The position after an epoch, and whether the epoch was complete (else the budget cut it short)."""
        complete = not self.stopping
        if complete:
            self.epoch, self.in_epoch = self.epoch + 1, 0
        self.last_save = self.clock()
        return self.position(), complete

    def progress_line(self, loss: float) -> str:
        """Epoch, step, loss, throughput and the time left by the nearest budget."""
        per_step = (self.clock() - self.start) / max(1, self.steps_done)
        left = self.budget.plan(self.where(), per_step).seconds_left
        eta = f" · ETA {format_duration(left)}" if math.isfinite(left) else ""
        done = self.in_epoch / self.steps_per_epoch
        return (
            f"epoch {self.epoch + 1} {100 * done:3.0f}% · step {self.step:,} · loss {loss:.3f} · "
            f"{self.tokens_per_second():,.0f} tok/s{eta}"
        )
