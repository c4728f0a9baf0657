"""Benchmark: multi-head self-attention, forward + backward, on 2 CPU threads: against its peers and against its limit.

Contenders, all with the same bias setting, float32, the same input and the
same upstream gradient:

- ours:  ``attnbook.attention.MultiHeadAttention`` (fast path, no weights);
- torch: ``torch.nn.MultiheadAttention(batch_first=True)``, timed in both of its
  call forms, ``need_weights=False`` and its default ``need_weights=True``; the
  faster of the two is torch's figure;
- d2l:   ``d2l.MultiHeadAttention``;
- sdpa:  a minimal module: one fused input projection, a reshape into heads,
  ``torch.nn.functional.scaled_dot_product_attention``, the output projection;
- floor: the same two projections with the attention between them removed
  (the output projection applied to the value slice): the matrix products that
  every implementation must do, and so the limit that none can beat by much.

One measurement is one forward and one backward pass (the input requires a
gradient, as it does inside a network). The contenders are interleaved: every
round times each of them once, in a shuffled order, so that a change in the
machine's load hits them all alike. The script prints each contender's median
and its ratio to the floor, our ratios to the peers, and the median of the
per-round ratios with a 95% confidence interval, and checks the targets:

    B=32, T=64,  d=256, 8 heads: ours / floor <= 1.25, and ours at parity with the
                                 faster of torch and d2l: not slower beyond noise
                                 (the confidence interval of the per-round ratio
                                 reaches 1.0 or below; a tie is not a miss)
    B=4,  T=512, d=256, 8 heads: ours / faster of torch and d2l <= 0.9

At B=32, T=64 every implementation is close to the floor, so there is nothing
left to win against the peers; at T=512 the attention itself is real work.
Run it standalone (``make bench`` runs every benchmark):

    PYTHONPATH=src python tests/benchmarks/bench_multihead.py [--rounds N] [--bias both|true|false]

Wall-clock figures vary with the machine and its load; the ratios, measured
side by side, are what to compare.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import Report, median_interval  # noqa: E402

from attnbook.attention import MultiHeadAttention  # noqa: E402

#: (B, T, d_model, heads, target for ours / faster peer: None = parity within noise)
CONFIGS = [
    (32, 64, 256, 8, None),
    (4, 512, 256, 8, 0.9),
]
FLOOR_TARGET = 1.25  # ours / floor at B=32, T=64
PEERS = ["torch (need_weights=False)", "torch (default call)", "d2l"]


class MinimalSDPA(nn.Module):
    """Multi-head self-attention in five lines: fused projection, heads by reshape, PyTorch's kernel,
    output projection.
    """

    def __init__(self, d: int, h: int, bias: bool) -> None:
        super().__init__()
        self.h = h
        self.in_proj = nn.Linear(d, 3 * d, bias=bias)
        self.out_proj = nn.Linear(d, d, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.in_proj(x).view(B, T, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        return self.out_proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, d))


class ProjectionsOnly(nn.Module):
    """The floor: the two projections of multi-head attention, forward and backward, with no attention between."""

    def __init__(self, d: int, bias: bool) -> None:
        super().__init__()
        self.d = d
        self.in_proj = nn.Linear(d, 3 * d, bias=bias)
        self.out_proj = nn.Linear(d, d, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.in_proj(x)[..., 2 * self.d :])


def _contenders(d: int, h: int, bias: bool, x: torch.Tensor) -> dict:
    from d2l import torch as d2l

    ours = MultiHeadAttention(d, h, bias=bias)
    ref = nn.MultiheadAttention(d, h, bias=bias, batch_first=True)
    theirs = d2l.MultiHeadAttention(d, h, 0.0, bias=bias)
    theirs(x[:1], x[:1], x[:1], None)  # materialize d2l's lazy layers
    sdpa = MinimalSDPA(d, h, bias)
    floor = ProjectionsOnly(d, bias)
    return {
        "floor (projections only)": (floor, lambda: floor(x)),
        "ours": (ours, lambda: ours(x, x, x)),
        "minimal SDPA module": (sdpa, lambda: sdpa(x)),
        "torch (need_weights=False)": (ref, lambda: ref(x, x, x, need_weights=False)[0]),
        "torch (default call)": (ref, lambda: ref(x, x, x)[0]),
        "d2l": (theirs, lambda: theirs(x, x, x, None)),
    }


def _time_once(module: nn.Module, run, x: torch.Tensor, grad: torch.Tensor) -> float:
    module.zero_grad(set_to_none=True)
    x.grad = None
    start = time.perf_counter()
    run().backward(grad)
    return time.perf_counter() - start


def bench(B: int, T: int, d: int, h: int, bias: bool, rounds: int, warmup: int = 5, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    x = torch.randn(B, T, d, requires_grad=True)
    grad = torch.randn(B, T, d)
    contenders = _contenders(d, h, bias, x)
    order = list(contenders)
    shuffle = random.Random(seed)
    times: dict[str, list[float]] = {name: [] for name in order}
    for r in range(warmup + rounds):
        shuffle.shuffle(order)
        for name in order:
            seconds = _time_once(*contenders[name], x, grad)
            if r >= warmup:
                times[name].append(seconds)
    return times


def report(B: int, T: int, d: int, h: int, bias: bool, target: float | None, times: dict, record: Report) -> None:
    rounds = len(times["ours"])
    medians = {name: statistics.median(t) for name, t in times.items()}
    floor = medians["floor (projections only)"]
    torch_best = min(medians["torch (need_weights=False)"], medians["torch (default call)"])
    best_peer = min(PEERS, key=medians.__getitem__)
    ratio = medians["ours"] / medians[best_peer]
    per_round = [o / min(times[name][i] for name in PEERS) for i, o in enumerate(times["ours"])]
    low, high = median_interval(per_round)
    over_floor = [o / f for o, f in zip(times["ours"], times["floor (projections only)"])]
    label = f"B={B} T={T} bias={bias}"
    print(f"\nB={B}, T={T}, d={d}, heads={h}, bias={bias}: forward + backward, median of {rounds} rounds")
    print(f"  {'':<28} {'median':>9}  {'/ floor':>7}")
    for name, m in medians.items():
        print(f"  {name:<28} {m * 1e3:6.2f} ms  {m / floor:7.3f}")
    print(f"  ours / torch (faster form)   {medians['ours'] / torch_best:6.3f}")
    print(f"  ours / d2l                   {medians['ours'] / medians['d2l']:6.3f}")
    print(f"  ours / minimal SDPA module   {medians['ours'] / medians['minimal SDPA module']:6.3f}")
    print(
        f"  ours / faster peer ({best_peer}): {ratio:.3f} (ratio of medians); per round: median "
        f"{statistics.median(per_round):.3f}, 95% interval {low:.3f} to {high:.3f}"
    )
    record.figure(
        label,
        {
            "B": B,
            "T": T,
            "d_model": d,
            "heads": h,
            "bias": bias,
            "rounds": rounds,
            "median_ms": {name: round(m * 1e3, 3) for name, m in medians.items()},
            "over_floor": {name: round(m / floor, 3) for name, m in medians.items()},
            "ours_over_faster_peer": round(ratio, 3),
            "faster_peer": best_peer,
            "ours_over_faster_peer_per_round": {
                "median": round(statistics.median(per_round), 3),
                "interval_95": [round(low, 3), round(high, 3)],
            },
            "ours_over_floor_per_round_median": round(statistics.median(over_floor), 3),
        },
    )
    if target is None:
        met = record.target(f"ours / floor, {label}", medians["ours"] / floor, FLOOR_TARGET)
        print(f"  target ours / floor <= {FLOOR_TARGET}: {medians['ours'] / floor:.3f}, {'met' if met else 'NOT met'}")
        tie = low <= 1.0
        record.target(
            f"ours / faster peer, {label}",
            statistics.median(per_round),
            1.0,
            met=tie,
            rule=f"tie: 95% CI {low:.3f}-{high:.3f}",
            note="tie: parity within noise, met while the 95% confidence interval "
            "of the median per-round ratio reaches 1.0",
        )
        print(f"  target parity with the faster peer (95% interval reaches 1.0): {'met' if tie else 'NOT met'}")
    else:
        met = record.target(f"ours / faster peer, {label}", ratio, target)
        print(f"  target ours / faster peer <= {target}: {ratio:.3f}, {'met' if met else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60, help="timed rounds per configuration (default 60)")
    parser.add_argument("--bias", choices=["both", "true", "false"], default="both")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    record = Report(__file__, argv)
    torch.set_num_threads(args.threads)
    biases = {"both": [True, False], "true": [True], "false": [False]}[args.bias]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32")
    for bias in biases:
        for B, T, d, h, target in CONFIGS:
            times = bench(B, T, d, h, bias, args.rounds)
            report(B, T, d, h, bias, target, times, record)
    return record.finish()


if __name__ == "__main__":
    sys.exit(main())
