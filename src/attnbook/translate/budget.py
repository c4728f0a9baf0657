"""How long a run trains, and where it stands: the budget's arithmetic in one object.

A budget (``--minutes``, ``--epochs``, ``--steps``: whichever ends first) is
:class:`~attnbook.translate.settings.Budget`, the options. :class:`Progress`
is a run measured against it: where training is (epoch, step, seconds,
target tokens), the share of the budget spent, how many steps and passes it
still allows, when to save, and when to stop. Every decision is taken on the
first process and shared with the others in one small all-reduce a step, so
that every process stops, and saves, after the same step. :class:`Pace` says
how fast steps go, which a budget in minutes needs to plan by.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from .cluster import Cluster
from .console import CommandError, format_duration
from .settings import Budget

__all__ = ["Position", "Progress", "Pace", "SKIP_STEPS", "PROBE_STEPS", "DRIFT", "START"]

Position = dict  # {"epoch", "step_in_epoch", "step", "seconds", "tokens"}: where a run is, as saved in its checkpoint
START: Position = {"epoch": 0, "step_in_epoch": 0, "step": 0, "seconds": 0.0, "tokens": 0}

#: How the speed of a run is measured: the first ``SKIP_STEPS`` steps carry one-off costs (on a GPU: starting
#: CUDA, the allocator, choosing kernels; on a CPU: first-touch memory), so the clock starts after them and
#: times the next ``PROBE_STEPS``; from then on the speed is re-measured every ``PROBE_STEPS`` steps, and a
#: new estimate is taken when the average since the start of timing has moved by more than ``DRIFT``.
SKIP_STEPS, PROBE_STEPS, DRIFT = 5, 20, 0.15


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

    def _now(self) -> float:
        self.sync()
        return self.clock()

    def after_step(self, steps_done: int) -> float | None:
        if steps_done == SKIP_STEPS:
            self.started = self._now()
            return None
        timed = steps_done - SKIP_STEPS
        if self.started is None or timed <= 0 or timed % PROBE_STEPS:
            return None
        average = (self._now() - self.started) / timed
        if self.per_step is None or abs(average / self.per_step - 1) > DRIFT:
            self.per_step = average
            return average
        return None


class Progress:
    """A run against its budget: where it is, what is spent and left, when to save and when to stop.

    ``position`` is where this session starts (:data:`START`, or the saved
    position of a resumed run); a budget already spent there is refused with
    words that say which option to raise. ``steps_per_epoch`` is this
    process's; ``save_minutes`` spaces the periodic checkpoints.
    """

    def __init__(
        self,
        budget: Budget,
        position: Position,
        steps_per_epoch: int,
        cluster: Cluster,
        save_minutes: float,
        run_name: str = "the run",
    ) -> None:
        self.budget, self.cluster, self.steps_per_epoch = budget, cluster, steps_per_epoch
        position = dict(position)
        if position["step_in_epoch"] >= steps_per_epoch:  # saved at the end of an epoch
            position.update(epoch=position["epoch"] + 1, step_in_epoch=0)
        spent = f"{run_name} has already used its budget ({budget})"
        if (budget.epochs and position["epoch"] >= budget.epochs) or (
            budget.steps and position["step"] >= budget.steps
        ):
            raise CommandError(f"{spent}; give a larger --epochs or --steps to continue")
        if budget.minutes and position["seconds"] >= budget.minutes * 60:
            raise CommandError(f"{spent}; give a larger --minutes to continue")
        self.start_position = position
        self.epoch, self.in_epoch, self.step = position["epoch"], position["step_in_epoch"], position["step"]
        self.seconds_before, self.tokens_before = position["seconds"], position["tokens"]
        self.start = self.last_save = time.monotonic()
        self.save_seconds = save_minutes * 60
        self.tokens = 0  # target tokens trained in this session, every process's
        self.stopping = False  # the budget ended this epoch early
        self.reason = ""  # which budget ended the run
        # the share of the budget spent, as the first process measured it after the last step (here: as saved)
        self.share = self.spent(position["seconds"])

    # --- where the run is -----------------------------------------------------------------------------
    @property
    def steps_done(self) -> int:
        """Steps of this session."""
        return self.step - self.start_position["step"]

    def elapsed(self) -> float:
        """Seconds of training, earlier sessions' included."""
        return self.seconds_before + time.monotonic() - self.start

    def position(self) -> Position:
        return {
            "epoch": self.epoch,
            "step_in_epoch": self.in_epoch,
            "step": self.step,
            "seconds": self.elapsed(),
            "tokens": self.tokens_before + self.tokens,
        }

    def tokens_per_second(self) -> float:
        return self.tokens / max(1e-9, time.monotonic() - self.start)

    # --- what is spent, and what is left --------------------------------------------------------------
    def spent(self, seconds: float | None = None) -> float:
        """The share of the budget used, 0 to 1: the largest of its parts' (the first to end ends the run).

        ``seconds``: the time spent, when not the clock's.
        """
        budget, shares = self.budget, [0.0]
        if budget.steps:
            shares.append(self.step / budget.steps)
        if budget.epochs:
            shares.append((self.epoch + self.in_epoch / self.steps_per_epoch) / budget.epochs)
        if budget.minutes:
            shares.append((self.elapsed() if seconds is None else seconds) / (budget.minutes * 60))
        return min(1.0, max(shares))

    def epochs_left(self) -> int:
        """The epochs this session may start (the first one may be partly done)."""
        return self.budget.epochs - self.epoch if self.budget.epochs else 10**6

    def steps_allowed(self, per_step: float | None) -> float:
        """How many steps this session's budget allows: by its steps, its epochs, and its minutes at ``per_step`` s.

        In minutes: the steps done so far, and as many more as the time left
        allows at ``per_step`` (the time of the first, slower steps is spent, not
        extrapolated). Infinite when nothing limits it.
        """
        budget, start = self.budget, self.start_position
        limits = [math.inf]
        if budget.steps:
            limits.append(budget.steps - start["step"])
        if budget.epochs:
            limits.append((budget.epochs - start["epoch"]) * self.steps_per_epoch - start["step_in_epoch"])
        if budget.minutes and per_step:
            left = max(0.0, budget.minutes * 60 - self.elapsed())
            limits.append(self.steps_done + left / max(per_step, 1e-9))
        return min(limits)

    def epochs_allowed(self, steps_in_time: float) -> float:
        """How many passes over the training pairs the budget allows: its epochs, or its steps or time at this speed."""
        steps = min(steps_in_time, self.budget.steps or math.inf)
        return min(self.budget.epochs or math.inf, steps / self.steps_per_epoch)

    def time_left(self, per_step: float) -> float:
        """Seconds until the nearest budget ends, at ``per_step`` seconds a step."""
        budget, lefts = self.budget, [math.inf]
        if budget.minutes:
            lefts.append(budget.minutes * 60 - self.elapsed())
        if budget.epochs:
            lefts.append(((budget.epochs - self.epoch) * self.steps_per_epoch - self.in_epoch) * per_step)
        if budget.steps:
            lefts.append((budget.steps - self.step) * per_step)
        return min(lefts)

    # --- after each step, and each epoch --------------------------------------------------------------
    def after_step(self, tokens: int, interrupted: bool) -> tuple[bool, bool, bool]:
        """Count a step of ``tokens`` target tokens; ``(stop, save, interrupted)``, agreed by every process."""
        self.step += 1
        self.in_epoch += 1
        budget, stop = self.budget, 0.0
        if budget.steps and self.step >= budget.steps:
            stop, self.reason = 1.0, f"step budget ({budget.steps} steps)"
        if budget.minutes and self.elapsed() >= budget.minutes * 60:
            stop, self.reason = 1.0, f"time budget ({budget.minutes:g} minutes)"
        if budget.epochs and self.in_epoch >= self.steps_per_epoch and self.epoch + 1 >= budget.epochs:
            self.reason = f"epoch budget ({budget.epochs} epochs)"
        first = self.cluster.is_first
        due = 1.0 if first and time.monotonic() - self.last_save >= self.save_seconds else 0.0
        # one all-reduce a step: the flags (any process raising one counts), the first process's share of the
        # budget spent (so that every process keeps the same learning rate) and the step's target tokens
        stop, due, interrupted_any, self.share, tokens_all = self.cluster.all_sum(
            [stop, due, float(interrupted), self.spent() if first else 0.0, float(tokens)]
        )
        self.tokens += int(tokens_all)
        if due:
            self.last_save = time.monotonic()
        self.stopping = self.stopping or bool(stop)
        return bool(stop), bool(due), bool(interrupted_any)

    def end_epoch(self) -> tuple[Position, bool]:
        """The position after an epoch, and whether the epoch was complete (else the budget cut it short)."""
        complete = not self.stopping
        if complete:
            self.epoch, self.in_epoch = self.epoch + 1, 0
        self.last_save = time.monotonic()
        return self.position(), complete

    def progress_line(self, loss: float) -> str:
        """Epoch, step, loss, throughput and the time left by the nearest budget."""
        per_step = (time.monotonic() - self.start) / max(1, self.steps_done)
        left = self.time_left(per_step)
        eta = f" · ETA {format_duration(left)}" if math.isfinite(left) else ""
        done = self.in_epoch / self.steps_per_epoch
        return (
            f"epoch {self.epoch + 1} {100 * done:3.0f}% · step {self.step:,} · loss {loss:.3f} · "
            f"{self.tokens_per_second():,.0f} tok/s{eta}"
        )
