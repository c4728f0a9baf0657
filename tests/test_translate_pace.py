"""The speed a run plans its budget by: measured after the first steps' one-off costs, and again when it drifts.

A fake clock stands in for the device: the steps take the seconds each test
says, and :class:`attnbook.translate.budget.Pace` reads only that clock.
"""

from __future__ import annotations

import pytest

from attnbook.translate.budget import DRIFT, PROBE_STEPS, SKIP_STEPS, Pace


class FakeDevice:
    """A clock that advances by each step's seconds, and counts the synchronizations it is asked for."""

    def __init__(self) -> None:
        self.now, self.syncs = 0.0, 0

    def clock(self) -> float:
        return self.now

    def sync(self) -> None:
        self.syncs += 1


def run(pace: Pace, device: FakeDevice, seconds_of_steps) -> dict[int, float]:
    """Advance the clock step by step; the estimates ``pace`` gives, by the step after which it gave them."""
    estimates = {}
    for done, seconds in enumerate(seconds_of_steps, start=1):
        device.now += seconds
        estimate = pace.after_step(done)
        if estimate is not None:
            estimates[done] = estimate
    return estimates


def test_the_first_steps_one_off_costs_are_not_counted():
    device = FakeDevice()
    pace = Pace(sync=device.sync, clock=device.clock)
    # a GPU's first steps: CUDA starts, the allocator grows, kernels are chosen; then 0.05 s a step
    steps = [8.0, 3.0, 1.0, 0.5, 0.2] + [0.05] * 200
    estimates = run(pace, device, steps)
    first = SKIP_STEPS + PROBE_STEPS
    assert list(estimates) == [first] and estimates[first] == pytest.approx(0.05)
    # timing every step from the first would have said 0.5 s: a budget ten times too small
    assert sum(steps[:first]) / first > 9 * estimates[first]
    # the device is waited for only where the clock is read: once at the start, then every PROBE_STEPS steps
    assert device.syncs == 1 + (len(steps) - SKIP_STEPS) // PROBE_STEPS


def test_a_speed_that_drifts_is_measured_again_and_noise_is_not():
    device = FakeDevice()
    pace = Pace(sync=device.sync, clock=device.clock)
    noisy = [1.0, 1.1, 0.9, 1.05, 0.95] * 40  # within 10% around 1 s: no new estimate
    estimates = run(pace, device, [2.0] * SKIP_STEPS + noisy)
    assert list(estimates) == [SKIP_STEPS + PROBE_STEPS]
    # the machine slows down to 2 s a step (another job, a hotter chip): a new estimate once the average moves
    slower = run(pace, device, [])  # nothing yet
    assert not slower
    more = {}
    for done, seconds in enumerate([2.0] * 200, start=SKIP_STEPS + len(noisy) + 1):
        device.now += seconds
        estimate = pace.after_step(done)
        if estimate is not None:
            more[done] = estimate
    assert more, "a speed that halved was never measured again"
    first_change = min(more)
    timed = first_change - SKIP_STEPS
    assert more[first_change] == pytest.approx((sum(noisy) + 2.0 * (timed - len(noisy))) / timed)
    assert more[first_change] > 1 + DRIFT
    assert all(b > a for a, b in zip(list(more.values()), list(more.values())[1:]))  # it keeps following the drift


def test_without_a_device_to_wait_for_it_reads_the_clock_alone():
    ticks = iter(range(0, 10_000))
    pace = Pace(clock=lambda: float(next(ticks)))
    estimates = {done: e for done in range(1, 60) if (e := pace.after_step(done)) is not None}
    assert estimates == {SKIP_STEPS + PROBE_STEPS: pytest.approx(1 / PROBE_STEPS)}  # one tick between two reads
