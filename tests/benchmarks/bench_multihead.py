"""Benchmark: multi-head self-attention, forward + backward, on 2 CPU threads.

Contenders, all with the same bias setting, float32, the same input and the
same upstream gradient:

- ours:  ``attnbook.attention.MultiHeadAttention`` (fast path, no weights);
- torch: ``torch.nn.MultiheadAttention(batch_first=True)``, timed in both of its
  call forms, ``need_weights=False`` and its default ``need_weights=True``; the
  faster of the two is torch's figure;
- d2l:   ``d2l.MultiHeadAttention``.

One measurement is one forward and one backward pass (the input requires a
gradient, as it does inside a network). The contenders are interleaved: every
round times each of them once, in a shuffled order, so that a change in the
machine's load hits them all alike. The script prints each contender's median,
our median over the faster of the others' medians, and the median of the
per-round ratios, and checks them against the targets:

    B=32, T=64,  d=256, 8 heads: ours / faster of torch and d2l <= 1.0
    B=4,  T=512, d=256, 8 heads: ours / faster of torch and d2l <= 0.9

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

import torch
from torch import nn

from attnbook.attention import MultiHeadAttention

CONFIGS = [  # (B, T, d_model, heads, target ratio)
    (32, 64, 256, 8, 1.0),
    (4, 512, 256, 8, 0.9),
]


def _contenders(d: int, h: int, bias: bool, x: torch.Tensor) -> dict:
    from d2l import torch as d2l

    ours = MultiHeadAttention(d, h, bias=bias)
    ref = nn.MultiheadAttention(d, h, bias=bias, batch_first=True)
    theirs = d2l.MultiHeadAttention(d, h, 0.0, bias=bias)
    theirs(x[:1], x[:1], x[:1], None)  # materialize d2l's lazy layers
    return {
        "ours": (ours, lambda: ours(x, x, x)),
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


def report(B: int, T: int, d: int, h: int, bias: bool, target: float, times: dict) -> bool:
    medians = {name: statistics.median(t) for name, t in times.items()}
    others = [name for name in times if name != "ours"]
    torch_best = min(medians["torch (need_weights=False)"], medians["torch (default call)"])
    best_name = min(others, key=medians.__getitem__)
    ratio = medians["ours"] / medians[best_name]
    per_round = statistics.median(
        o / min(times[name][i] for name in others) for i, o in enumerate(times["ours"])
    )
    print(f"\nB={B}, T={T}, d={d}, heads={h}, bias={bias}: forward + backward, median of {len(times['ours'])} rounds")
    for name, m in medians.items():
        print(f"  {name:<28} {m * 1e3:8.2f} ms")
    print(f"  ours / torch (faster form)   {medians['ours'] / torch_best:8.3f}")
    print(f"  ours / d2l                   {medians['ours'] / medians['d2l']:8.3f}")
    ok = ratio <= target
    print(f"  ours / faster of the others  {ratio:8.3f}   (target <= {target}: {'met' if ok else 'NOT met'}; "
          f"median of per-round ratios {per_round:.3f})")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60, help="timed rounds per configuration (default 60)")
    parser.add_argument("--bias", choices=["both", "true", "false"], default="both")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    biases = {"both": [True, False], "true": [True], "false": [False]}[args.bias]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32")
    all_ok = True
    for bias in biases:
        for B, T, d, h, target in CONFIGS:
            times = bench(B, T, d, h, bias, args.rounds)
            all_ok &= report(B, T, d, h, bias, target, times)
    print("\nall targets met" if all_ok else "\nsome targets NOT met (on a loaded machine, run again)")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
