"""When training stops and saves: the budget, the clock, Ctrl-C.

:class:`Tracker` knows where training is (epoch, step, seconds, tokens) and
decides after every step whether the budget is spent and whether a periodic
save is due. Every decision is taken on the first process and shared with the
others in one small all-reduce a step, so that every process stops, and
saves, after the same step. :class:`Signals` turns Ctrl-C (or SIGTERM) into a
request to stop after the current step; a second Ctrl-C stops at once.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

from ..train import TrainStep
from .cluster import Cluster
from .console import Console, format_duration
from .settings import Budget

__all__ = ["Position", "Tracker", "Pace", "Signals", "Interrupted", "SKIP_STEPS", "PROBE_STEPS", "DRIFT"]

#: How the speed of a run is measured: the first ``SKIP_STEPS`` steps carry one-off costs (on a GPU: starting
#: CUDA, the allocator, choosing kernels; on a CPU: first-touch memory), so the clock starts after them and
#: times the next ``PROBE_STEPS``; from then on the speed is re-measured every ``PROBE_STEPS`` steps, and a
#: new estimate is taken when the average since the start of timing has moved by more than ``DRIFT``.
SKIP_STEPS, PROBE_STEPS, DRIFT = 5, 20, 0.15

Position = dict  # {"epoch", "step_in_epoch", "step", "seconds", "tokens"}: where a run is, as saved in its checkpoint


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) was honoured: the step finished and the state was saved."""


class Tracker:
    """Where training is (epoch, step, time, tokens), the budget, and when to save or stop."""

    def __init__(
        self, cluster: Cluster, budget: Budget, position: Position, steps_per_epoch: int, save_minutes: float
    ) -> None:
        self.cluster, self.budget = cluster, budget
        self.steps_per_epoch = steps_per_epoch
        self.epoch, self.in_epoch = position["epoch"], position["step_in_epoch"]
        self.step_count, self.seconds_before, self.tokens_before = (
            position["step"],
            position["seconds"],
            position["tokens"],
        )
        self.first_step = position["step"]  # where this session started
        self.start = self.last_save = time.monotonic()
        self.save_seconds = save_minutes * 60
        self.tokens = self.step_tokens = 0
        self.stopping = False  # the budget ended this epoch early
        # the share of the budget spent after the last step, as the first process measured it (here: as saved)
        self.share = self.spent(position["seconds"])
        self.reason = ""

    def elapsed(self) -> float:
        return self.seconds_before + time.monotonic() - self.start

    def step(self, info: TrainStep) -> None:
        self.step_count += 1
        self.in_epoch += 1
        self.step_tokens = info.tokens

    def decide(self, interrupted: bool) -> tuple[bool, bool, bool]:
        """``(stop, save, interrupted)`` after this step, agreed by every process."""
        budget = self.budget
        stop = 0.0
        if budget.steps and self.step_count >= budget.steps:
            stop, self.reason = 1.0, f"step budget ({budget.steps} steps)"
        if budget.minutes and self.elapsed() >= budget.minutes * 60:
            stop, self.reason = 1.0, f"time budget ({budget.minutes:g} minutes)"
        if budget.epochs and self.in_epoch >= self.steps_per_epoch and self.epoch + 1 >= budget.epochs:
            self.reason = f"epoch budget ({budget.epochs} epochs)"
        due = 1.0 if self.cluster.is_first and time.monotonic() - self.last_save >= self.save_seconds else 0.0
        spent = self.spent() if self.cluster.is_first else 0.0
        # one all-reduce a step: the flags (any process raising one counts), the first process's share of the
        # budget spent (so that every process keeps the same learning rate) and the step's target tokens
        stop, due, interrupted_any, self.share, tokens = self.cluster.all_sum(
            [stop, due, float(interrupted), spent, float(self.step_tokens)]
        )
        self.tokens += int(tokens)
        if due:
            self.last_save = time.monotonic()
        return bool(stop), bool(due), bool(interrupted_any)

    def spent(self, seconds: float | None = None) -> float:
        """The share of the budget used so far, 0 to 1: the largest of its parts' (the first to end ends the run).

        ``seconds``: the time spent, when not the clock's.
        """
        budget, shares = self.budget, [0.0]
        if budget.steps:
            shares.append(self.step_count / budget.steps)
        if budget.epochs:
            shares.append((self.epoch + self.in_epoch / self.steps_per_epoch) / budget.epochs)
        if budget.minutes:
            shares.append((self.elapsed() if seconds is None else seconds) / (budget.minutes * 60))
        return min(1.0, max(shares))

    def position(self) -> Position:
        return {
            "epoch": self.epoch,
            "step_in_epoch": self.in_epoch,
            "step": self.step_count,
            "seconds": self.elapsed(),
            "tokens": self.tokens_before + self.tokens,
        }

    def end_epoch(self, complete: bool) -> Position:
        if complete:
            self.epoch, self.in_epoch = self.epoch + 1, 0
        self.last_save = time.monotonic()
        return self.position()

    def tokens_per_second(self) -> float:
        return self.tokens / max(1e-9, time.monotonic() - self.start)

    def show(self, loss: float, console: Console) -> None:
        """The progress line: epoch, step, loss, throughput and the time left by the nearest budget."""
        if not console.shows_progress:
            return
        budget, done = self.budget, self.in_epoch / self.steps_per_epoch
        rate = (time.monotonic() - self.start) / max(1, self.step_count - self.first_step)  # this session's steps
        lefts = []
        if budget.minutes:
            lefts.append(budget.minutes * 60 - self.elapsed())
        if budget.epochs:
            lefts.append(((budget.epochs - self.epoch) * self.steps_per_epoch - self.in_epoch) * rate)
        if budget.steps:
            lefts.append((budget.steps - self.step_count) * rate)
        eta = f" · ETA {format_duration(min(lefts))}" if lefts else ""
        console.progress(
            f"epoch {self.epoch + 1} {100 * done:3.0f}% · step {self.step_count:,} · loss {loss:.3f} · "
            f"{self.tokens_per_second():,.0f} tok/s{eta}"
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


class Signals:
    """Ctrl-C / SIGTERM ask training to stop after the current step; a second Ctrl-C stops at once."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.requested = False
        self.first = 0.0
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
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
