"""The budget's plan: every decision a budget takes, made by one pure function of where a run stands and its pace.

:meth:`attnbook.translate.budget.Budget.plan` says when to stop, how many steps
and passes the budget allows, the warm-up that fits them, what ``--dropout
auto`` chooses and how far apart the ``--average`` snapshots go. A fake clock
stands in for the machine: the steps take the seconds each test says, the pace
is measured on that clock (:class:`~attnbook.translate.budget.Pace`), and no
test waits for, or asserts on, a real duration.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import FrozenInstanceError

import pytest

from attnbook.translate.budget import (
    AVERAGE_SPAN,
    PROBE_STEPS,
    SKIP_STEPS,
    START,
    WARMUP_SHARE,
    Budget,
    Progress,
    Where,
)
from attnbook.translate.cluster import Cluster
from attnbook.translate.console import CommandError
from attnbook.translate.settings import AUTO_DROPOUT, MORE_DROPOUT, add_options, auto_dropout, from_args


class FakeClock:
    """A clock that moves only when a test says a step took so long."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_plan_is_a_pure_function_of_the_budget_the_position_and_the_pace():
    budget = Budget(seconds=600.0, epochs=100)
    where = Where(steps_per_epoch=40, epoch=1, in_epoch=5, step=45, steps_done=45, seconds=30.0)
    plan = budget.plan(where, 0.5, average=5)
    assert plan == budget.plan(where, 0.5, average=5)  # nothing else goes in: the same inputs, the same plan
    with pytest.raises(FrozenInstanceError):
        plan.stop = True  # a plan is read, not changed
    # in time: the steps done, and as many more as the time left allows at the measured speed
    assert plan.steps_allowed == pytest.approx(45 + (600 - 30) / 0.5)
    assert plan.epochs_allowed == pytest.approx(plan.steps_allowed / 40)
    assert plan.warmup == int(WARMUP_SHARE * plan.steps_allowed)
    assert plan.dropout == auto_dropout(plan.epochs_allowed) == MORE_DROPOUT  # about 29 passes
    assert plan.snapshot_every == round(plan.steps_allowed * AVERAGE_SPAN / 4)
    assert not plan.stop and plan.reason == "" and plan.spent == pytest.approx(30 / 600)
    # the epochs limit the steps as well: at a faster pace, the hundred epochs end first
    fast = budget.plan(where, 0.01, average=5)
    assert fast.steps_allowed == 100 * 40 and fast.epochs_allowed == 100  # the 45 steps done and the 3,955 left
    # without a measured pace a time budget does not limit the steps yet; the warm-up then has no bound either
    unmeasured = Budget(seconds=600.0).plan(where)
    assert math.isinf(unmeasured.steps_allowed) and unmeasured.warmup is None and unmeasured.snapshot_every is None
    assert unmeasured.epochs_allowed == math.inf and unmeasured.dropout == MORE_DROPOUT


def test_a_run_on_a_fake_clock_fits_its_warm_up_dropout_and_snapshots_once_the_pace_is_measured():
    clock = FakeClock()
    budget = Budget(seconds=60.0)  # --minutes 1
    progress = Progress(budget, START, steps_per_epoch=200, cluster=Cluster(), checkpoint_minutes=5.0, clock=clock)
    assert progress.timed and not progress.plan().stop
    plans = {}
    for seconds in [3.0, 2.0, 1.0, 1.0, 0.5] + [0.1] * 40:  # slow first steps (their one-off costs), then 0.1 s
        clock.now += seconds
        progress.after_step(tokens=50, interrupted=False)
        if (per_step := progress.measured_pace()) is not None:
            plans[progress.steps_done] = progress.plan(per_step, average=5, agreed=True)
    # measured once, after the untimed steps and the timed ones; the pace is the fake clock's 0.1 s a step
    first = SKIP_STEPS + PROBE_STEPS
    assert list(plans) == [first]
    plan = plans[first]
    spent_on_the_clock = 3.0 + 2.0 + 1.0 + 1.0 + 0.5 + 0.1 * (first - SKIP_STEPS)
    allowed = plan.steps_allowed
    # the first steps' seconds are spent, not extrapolated: the steps done, and the time left at 0.1 s a step
    assert allowed == pytest.approx(first + (60.0 - spent_on_the_clock) / 0.1, abs=1)
    assert isinstance(allowed, int)  # agreed by every process: in whole steps
    assert plan.warmup == max(first, int(WARMUP_SHARE * allowed)) and first <= plan.warmup < 200
    assert plan.epochs_allowed == pytest.approx(allowed / 200) and plan.dropout == 0.0  # under four passes: none
    assert plan.snapshot_every == round(allowed * AVERAGE_SPAN / 4)


def test_the_plan_says_when_to_stop_and_which_budget_ended_the_run():
    on_time = Where(steps_per_epoch=10, epoch=0, in_epoch=7, step=7, steps_done=7, seconds=59.0)
    both = Budget(seconds=60.0, steps=7)
    assert both.plan(on_time).stop and both.plan(on_time).reason == "step budget (7 steps)"
    late = Where(steps_per_epoch=10, epoch=0, in_epoch=7, step=7, steps_done=7, seconds=60.0)
    assert both.plan(late).reason == "time budget (1 minutes)"  # the time, when both are spent
    assert both.plan(late).spent == 1.0
    # an epoch budget ends with its last epoch's batches: it names the reason, the loop ends the epoch itself
    end_of_last = Where(steps_per_epoch=10, epoch=1, in_epoch=10, step=20, steps_done=20)
    plan = Budget(epochs=2).plan(end_of_last)
    assert not plan.stop and plan.reason == "epoch budget (2 epochs)" and plan.spent == 1.0
    assert not Budget(epochs=3).plan(end_of_last).reason


def test_progress_stops_after_the_step_that_reaches_the_time_budget_on_a_fake_clock():
    clock = FakeClock()
    progress = Progress(
        Budget(seconds=1.0), START, steps_per_epoch=100, cluster=Cluster(), checkpoint_minutes=5.0, clock=clock
    )
    stops = []
    for _ in range(12):
        clock.now += 0.25
        stops.append(progress.after_step(tokens=10, interrupted=False)[0])
    assert stops.index(True) == 3 and progress.stopped_by == "time budget (0.0166667 minutes)"
    assert progress.share == 1.0


def test_without_a_time_budget_the_plan_is_known_before_the_first_step():
    budget = Budget(epochs=4)
    plan = budget.plan(Where(steps_per_epoch=25), average=5)
    assert plan.steps_allowed == 100 and plan.epochs_allowed == 4 and plan.dropout == AUTO_DROPOUT
    assert plan.snapshot_every == round(100 * AVERAGE_SPAN / 4)
    steps = Budget(steps=30).plan(Where(steps_per_epoch=25), average=1)
    assert steps.epochs_allowed == pytest.approx(30 / 25) and steps.dropout == 0.0 and steps.snapshot_every is None
    # a resumed run plans the steps left to its session
    resumed = Budget(epochs=4).plan(Where(steps_per_epoch=25, epoch=2, in_epoch=5, step=55))
    assert resumed.steps_allowed == 45


def test_the_budget_is_read_in_seconds_once_and_recorded_in_the_minutes_it_was_given():
    parser = argparse.ArgumentParser()
    add_options(parser, Budget)
    budget = from_args(Budget, parser.parse_args(["--minutes", "0.03", "--steps", "20"]))
    # not a duration: the budget given, 0.03 minutes, held in seconds
    assert budget.seconds == 0.03 * 60 and budget.steps == 20 and budget.epochs is None
    assert str(budget) == "0.03 minutes or 20 steps"
    # not a duration: the budget given, recorded as it was given (0.03, not 0.029999999999999995)
    assert budget.record() == {"minutes": 0.03, "epochs": None, "steps": 20}
    assert Budget.from_record(budget.record()) == budget
    for given in ["10", "2.5", "0.2", "0.001", "7.123456789", "1e3"]:
        again = Budget.from_record(from_args(Budget, parser.parse_args(["--minutes", given])).record())
        # not a duration: the budget given, recorded again as it was given
        assert again.record()["minutes"] == float(given)
    with pytest.raises(CommandError, match="--minutes must be > 0, got -2"):
        from_args(Budget, parser.parse_args(["--minutes", "-2"]))
    with pytest.raises(CommandError, match="--epochs must be at least 1"):
        Budget.from_record({"minutes": None, "epochs": 0, "steps": None})
