"""Model FLOP utilisation: the share of the device's arithmetic that training turns into the model's arithmetic.

Two numbers make it, both measured in the run that reports it:

- the floating-point operations of the model's forward and backward passes
  for one batch, counted by PyTorch's :class:`~torch.utils.flop_counter.FlopCounterMode`
  (matrix products and attention; the elementwise work is not counted, as is
  usual), divided by the batch's target tokens: the model's operations per
  target token (attention makes this grow a little with the sentences' length);
- the device's peak, as a large matrix product in the run's precision reaches
  it here and now (:func:`peak_flops`): on a CPU no table says what its cores
  do with the threads a run has, so it is measured; on a GPU too, for the
  clocks and the power limit it runs at.

The utilisation is then ``operations per token × tokens a second / peak``.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["count_flops", "peak_flops", "describe_utilisation", "host_waits"]


def count_flops(run: Callable[[], None]) -> int:
    """The floating-point operations that ``run()`` performs in matrix products and attention."""
    with FlopCounterMode(display=False) as counter:
        run()
    return int(counter.get_total_flops())


def peak_flops(
    device: torch.device, dtype: torch.dtype, size: int | None = None, repeats: int = 5, seconds: float = 1.0
) -> float:
    """Floating-point operations a second of a ``size × size`` matrix product in ``dtype`` on ``device``: the best of
    ``repeats``, or of those that fit in ``seconds`` (two at least).

    The best, not the median: a peak is what the device reaches, and a
    processor's clock or a neighbour's load can only slow a product down. The
    size is one that the device's fastest kernels are made for: 8192 on a GPU;
    2048 in float32 on a CPU, where a product of 1024 reached a quarter less on
    a two-core machine than the model's own larger products; 1024 in the other
    dtypes, which a CPU without their instructions emulates, many times slower
    (there a product takes a second or more, and two are enough). A process
    measures each device, dtype and thread count once: a sweep or a test that
    trains several runs does not pay for the measurement again.
    """
    if size is None:
        size = 8192 if device.type == "cuda" else 2048 if dtype == torch.float32 else 1024
    key = (str(device), dtype, size, torch.get_num_threads())
    if key in _PEAKS:
        return _PEAKS[key]
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda *_: None)
    a @ b  # the first product chooses its kernel and warms the caches
    sync(device)
    times = []
    while len(times) < repeats and (len(times) < 2 or sum(times) < seconds):
        start = time.perf_counter()
        a @ b
        sync(device)
        times.append(time.perf_counter() - start)
    _PEAKS[key] = 2 * size**3 / min(times)
    return _PEAKS[key]


_PEAKS: dict = {}  # (device, dtype, size, threads) -> the peak measured in this process


def describe_utilisation(flops_per_token: float, tokens_per_second: float, peak: float) -> tuple[float, str]:
    """The utilisation, and a line that says it with what it is made of."""
    achieved = flops_per_token * tokens_per_second
    share = achieved / peak
    return share, (
        f"model FLOP utilisation {100 * share:.1f}%: {achieved / 1e9:,.1f} GFLOP/s of the model's arithmetic "
        f"({flops_per_token / 1e6:,.1f} MFLOP a target token) against {peak / 1e9:,.1f} GFLOP/s "
        "that a large matrix product reaches here"
    )


def host_waits(run: Callable[[], None]) -> list[str]:
    """Where ``run()`` makes the host wait for the GPU: ``name:line`` of each call (PyTorch's sync debug mode).

    A step that keeps a GPU busy gives none: each wait empties the queue of
    work the host had sent ahead. PyTorch warns that the mode does not yet see
    every kind of wait, so an empty list is evidence, not proof.
    """
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return [f"{os.path.basename(w.filename)}:{w.lineno}" for w in caught if "synchroniz" in str(w.message)]
