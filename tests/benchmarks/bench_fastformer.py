"""Benchmark: Fastformer against softmax attention, time and peak memory against sequence length (chapter 9).

One measurement is one forward and one backward pass of self-attention over a
single sequence (batch 1) of width 256, float32, on 2 CPU threads (or, with
``--device cuda``, on a GPU, in ``--dtype``), for:

- fastformer: ``attnbook.fastformer.FastSelfAttention(256, 16)``, the authors' configuration;
- mha:        ``attnbook.attention.MultiHeadAttention(256, 8)``, fast path (PyTorch's fused
              kernel from 192 keys on); 8 heads, its faster setting here (16 heads of width 16 are slower);
- explicit:   the same layer with ``need_weights=True``: chapter 4's ``scaled_dot_product_attention``,
              which builds the ``N x N`` weights; run only where they fit in ``--max-gb``;
- causal:     ``FastSelfAttention(256, 16)`` with ``is_causal=True`` (running poolings by prefix sums);
- linformer:  ``attnbook.fastformer.LinformerSelfAttention(256, 16, k=256)``, low-rank attention: the
              keys and values mixed into 256 rows along the length, so its cost is linear in ``N``;
- torch_mha:  on a GPU only, ``torch.nn.MultiheadAttention(256, 16)``, PyTorch's own layer on its fused
              kernel (the layer of the GPU run that chapter 9 quotes).

On a GPU every pass is followed by ``torch.cuda.synchronize()`` before the clock
stops, and peak memory is ``torch.cuda.max_memory_allocated`` over the pass.

The measurements are interleaved: every round times each contender at each
length once, all in one shuffled order, so that a change in the machine's load
hits all contenders and all lengths alike; the script prints medians. Peak memory is measured once per
contender and length, from the allocations PyTorch's profiler records during
one forward and backward pass (what the profiler's library prints to the
console meanwhile is swallowed). Then it fits the slope of log(time) against
log(N) from N = 1,024 on, finds the length at which Fastformer overtakes each
softmax attention, and checks the goals:

    Fastformer's time grows as N^s with s <= 1.1 (N >= 1,024)
    at N = 4,096, Fastformer is at least 10x faster than MultiHeadAttention
    at every length, the causal Fastformer takes at most 2x the bidirectional one's time

The causal target is measured apart, in side-by-side pairs (bidirectional,
causal, causal, bidirectional) at each length, so that other work on the
machine weighs on both alike: the script prints the ratio at each length,
records it as ``causal_over_bidirectional``, and prints whether the target is
met. ``--only-causal`` measures only that.

It writes its figures to ``tests/benchmarks/results/bench_fastformer.json`` and
exits with status 1 when a goal is missed. Run it standalone (``make bench``
runs every benchmark):

    PYTHONPATH=src python tests/benchmarks/bench_fastformer.py [--rounds 5] [--max-n 16384] [--max-gb 3]
    PYTHONPATH=src python tests/benchmarks/bench_fastformer.py --device cuda --dtype bfloat16 --min-n 1024 --max-n 65536

The second repeats the GPU measurement recorded in
``book/results/fastformer_gpu_h100.json`` (one H100, bfloat16).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from attnbook.attention import MultiHeadAttention
from attnbook.fastformer import FastSelfAttention, LinformerSelfAttention

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import Report, quiet_output  # noqa: E402

WIDTH, FAST_HEADS, MHA_HEADS, LINFORMER_ROWS = 256, 16, 8, 256
SLOPE_FROM, SLOPE_GOAL, RATIO_AT, RATIO_GOAL, CAUSAL_GOAL = 1024, 1.1, 4096, 10.0, 2.0
NAMES = ["fastformer", "causal", "linformer", "mha", "explicit"]
GPU_NAMES = ["torch_mha"]  # measured only with --device cuda
#: Where the measurement runs (main() sets them from --device and --dtype).
DEVICE, DTYPE = torch.device("cpu"), torch.float32


def contenders(seed: int = 0, max_len: int = 16384) -> dict:
    torch.manual_seed(seed)
    fast = FastSelfAttention(WIDTH, FAST_HEADS).to(DEVICE, DTYPE)
    mha = MultiHeadAttention(WIDTH, MHA_HEADS).to(DEVICE, DTYPE)
    linformer = LinformerSelfAttention(WIDTH, FAST_HEADS, max_len=max_len, k=LINFORMER_ROWS).to(DEVICE, DTYPE)
    runs = {
        "fastformer": (fast, lambda x: fast(x)),
        "mha": (mha, lambda x: mha(x, x, x)),
        "explicit": (mha, lambda x: mha(x, x, x, need_weights=True)[0]),
        "causal": (fast, lambda x: fast(x, is_causal=True)),
        "linformer": (linformer, lambda x: linformer(x)),
    }
    if DEVICE.type == "cuda":
        torch_mha = torch.nn.MultiheadAttention(WIDTH, FAST_HEADS, batch_first=True).to(DEVICE, DTYPE)
        runs["torch_mha"] = (torch_mha, lambda x: torch_mha(x, x, x, need_weights=False)[0])
    return runs


def names() -> list[str]:
    return NAMES + (GPU_NAMES if DEVICE.type == "cuda" else [])


def _synchronize() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


def explicit_bytes(n: int) -> int:
    """What explicit attention holds at its peak, about: scores, weights and two gradients of (heads, N, N) floats."""
    return 4 * MHA_HEADS * n * n * torch.finfo(DTYPE).bits // 8


def time_once(module, run, x: torch.Tensor, grad: torch.Tensor) -> float:
    module.zero_grad(set_to_none=True)
    x.grad = None
    _synchronize()
    start = time.perf_counter()
    run(x).backward(grad)
    _synchronize()
    return time.perf_counter() - start


def peak_bytes(module, run, x: torch.Tensor, grad: torch.Tensor) -> int:
    """The peak of the bytes allocated during one forward + backward pass, from the profiler's allocation records."""
    from torch.profiler import ProfilerActivity, profile

    module.zero_grad(set_to_none=True)
    x.grad = None
    if DEVICE.type == "cuda":
        _synchronize()
        torch.cuda.reset_peak_memory_stats(DEVICE)
        before = torch.cuda.memory_allocated(DEVICE)
        run(x).backward(grad)
        _synchronize()
        return torch.cuda.max_memory_allocated(DEVICE) - before
    with quiet_output(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run(x).backward(grad)
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    current = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        current += event.nbytes()
        peak = max(peak, current)
    return peak


def measure(lengths: list[int], rounds: int, max_gb: float, max_seconds: float, seed: int = 0) -> tuple[dict, dict]:
    """Median seconds and peak bytes of every (contender, length) that fits, measured in interleaved rounds.

    A warm-up pass, contender by contender and length by length, decides what runs: the explicit
    attention only where its ``N x N`` tensors fit in ``max_gb``, and no contender beyond the
    length where one pass took longer than ``max_seconds``. Then every round times each
    (contender, length) once, all in one shuffled order, so that a change in the machine's load
    hits every contender *and every length* alike: the slopes compare like with like.
    """
    runs = contenders(seed, max_len=max(lengths))
    inputs = {n: _inputs(n, seed) for n in lengths}
    plan: list[tuple[str, int]] = []
    for name in names():
        for n in lengths:
            if name == "explicit" and explicit_bytes(n) > max_gb * 2**30:
                print(
                    f"  {name}: not run from N={n}: its N x N tensors would need about "
                    f"{explicit_bytes(n) / 2**30:.1f} GB (--max-gb {max_gb})"
                )
                break
            seconds = time_once(*runs[name], *inputs[n])
            plan.append((name, n))
            if seconds > max_seconds and n != lengths[-1]:
                print(f"  {name}: not run beyond N={n}: one pass took {seconds:.1f} s (--max-seconds {max_seconds})")
                break
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in plan}
    shuffle = random.Random(seed)
    for _ in range(rounds):
        shuffle.shuffle(plan)
        for name, n in plan:
            samples[name, n].append(time_once(*runs[name], *inputs[n]))
    times: dict[str, dict[int, float]] = {name: {} for name in names()}
    memory: dict[str, dict[int, int]] = {name: {} for name in names()}
    for (name, n), values in sorted(samples.items(), key=lambda item: item[0][1]):
        times[name][n] = statistics.median(values)
        memory[name][n] = peak_bytes(*runs[name], *inputs[n])
    print(f"\nforward + backward, median of {rounds} interleaved rounds (ms):")
    print(_table(lengths, {name: {n: t * 1e3 for n, t in times[name].items()} for name in names()}, "{:.1f}"))
    print("\npeak memory of one forward + backward pass (MB):")
    print(
        _table(lengths, {name: {n: b / 2**20 for n, b in memory[name].items()} for name in names()}, "{:.1f}"),
        flush=True,
    )
    return times, memory


def paired_causal_ratios(lengths: list[int], rounds: int, seed: int = 0) -> dict[int, float]:
    """causal / bidirectional time at each length, from measurements taken side by side.

    At each length, each round times the two in the order bidirectional, causal,
    causal, bidirectional (so that a load that rises or falls during the round
    weighs on both alike) and takes the ratio of the two sums; the result is the
    median over the rounds. Sharing the machine with other work slows both of a
    pair about equally, which a ratio of medians taken minutes apart does not
    promise.
    """
    runs = contenders(seed, max_len=max(lengths))
    ratios = {}
    for n in lengths:
        x, grad = _inputs(n, seed)
        for name in ("fastformer", "causal"):  # warm-up
            time_once(*runs[name], x, grad)
        per_round = []
        for _ in range(rounds):
            b1 = time_once(*runs["fastformer"], x, grad)
            c1 = time_once(*runs["causal"], x, grad)
            c2 = time_once(*runs["causal"], x, grad)
            b2 = time_once(*runs["fastformer"], x, grad)
            per_round.append((c1 + c2) / (b1 + b2))
        ratios[n] = statistics.median(per_round)
    return ratios


def _inputs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The input (which needs its gradient) and the output gradient of one pass at length ``n``."""
    g = torch.Generator().manual_seed(seed + n)
    x, grad = torch.randn(1, n, WIDTH, generator=g), torch.randn(1, n, WIDTH, generator=g)
    return x.to(DEVICE, DTYPE).requires_grad_(), grad.to(DEVICE, DTYPE)


def _table(lengths: list[int], columns: dict[str, dict[int, float]], fmt: str) -> str:
    """One row per length, one column per contender; a blank where it was not run."""
    widths = [max(11, len(name)) + 2 for name in columns]
    lines = [f"{'N':>7}" + "".join(f"{name:>{w}}" for name, w in zip(columns, widths))]
    for n in lengths:
        cells = (fmt.format(col[n]) if n in col else "" for col in columns.values())
        lines.append(f"{n:>7,}" + "".join(f"{cell:>{w}}" for cell, w in zip(cells, widths)))
    return "\n".join(lines)


def slope(series: dict[int, float], start: int = SLOPE_FROM) -> float:
    """Least-squares slope of log(time) against log(N), over the lengths >= start."""
    points = [(math.log(n), math.log(t)) for n, t in series.items() if n >= start]
    if len(points) < 2:
        return float("nan")
    mx = statistics.fmean(p[0] for p in points)
    my = statistics.fmean(p[1] for p in points)
    return sum((px - mx) * (py - my) for px, py in points) / sum((px - mx) ** 2 for px, _ in points)


def crossover(fast: dict[int, float], other: dict[int, float]) -> str:
    """The length from which ``fast`` stays faster than ``other``, interpolated on log-log axes."""
    common = sorted(set(fast) & set(other))
    if not common:
        return "not measured"
    ratios = [(n, other[n] / fast[n]) for n in common]
    slower = [i for i, (_, r) in enumerate(ratios) if r < 1]
    if not slower:
        return f"at or below N={ratios[0][0]} (already {ratios[0][1]:.2f}x faster there)"
    last = slower[-1]
    if last == len(ratios) - 1:
        return f"above N={common[-1]} (still {1 / ratios[-1][1]:.2f}x slower there)"
    (n0, r0), (n1, r1) = ratios[last], ratios[last + 1]
    t = -math.log(r0) / (math.log(r1) - math.log(r0))
    crossing = math.exp(math.log(n0) + t * (math.log(n1) - math.log(n0)))
    return f"N ~ {crossing:,.0f} (between {n0} and {n1}; faster at every length after)"


def report(times: dict, memory: dict, paired: dict[int, float], record: Report) -> None:
    fast = times["fastformer"]
    lengths = sorted(fast)
    ratios = {
        f"{name} / fastformer": {n: times[name][n] / fast[n] for n in lengths if n in times[name]}
        for name in names()
        if name != "fastformer"
    }
    print("\nratios of medians (time of each / time of the bidirectional Fastformer):")
    print(_table(lengths, ratios, "{:.2f}"))
    print(f"\nslopes of log(time) and log(peak memory) against log(N), from N={SLOPE_FROM}:")
    slopes = {name: slope(times[name]) for name in names()}
    mem_slopes = {name: slope({n: float(b) for n, b in memory[name].items() if b > 0}) for name in names()}
    for name in names():
        span = [n for n in times[name] if n >= SLOPE_FROM]
        if span:
            print(
                f"  {name:<11} time {slopes[name]:5.2f}   peak memory "
                f"{mem_slopes[name]:5.2f}   (N={min(span)}..{max(span)})"
            )
    crossings = {name: crossover(fast, times[name]) for name in names() if name not in ("fastformer", "causal")}
    print("\ncrossover (Fastformer becomes the faster one):")
    for name, where in crossings.items():
        print(f"  against {name:<9} {where}")
    record.figure("median_ms", {name: {n: round(t * 1e3, 2) for n, t in times[name].items()} for name in names()})
    record.figure("peak_mb", {name: {n: round(b / 2**20, 1) for n, b in memory[name].items()} for name in names()})
    record.figure("ratios", {key: {n: round(r, 2) for n, r in series.items()} for key, series in ratios.items()})
    record.figure("time_slopes", {name: round(v, 2) for name, v in slopes.items() if not math.isnan(v)})
    record.figure("memory_slopes", {name: round(v, 2) for name, v in mem_slopes.items() if not math.isnan(v)})
    record.figure("crossover", crossings)

    print()
    s = slopes["fastformer"]
    met = record.target(f"Fastformer's time slope, N >= {SLOPE_FROM}", s, SLOPE_GOAL)
    print(f"goal: Fastformer's slope <= {SLOPE_GOAL}: {s:.2f}, {'met' if met else 'NOT met'}")
    r = ratios["mha / fastformer"].get(RATIO_AT, float("nan"))
    met = record.target(f"MultiHeadAttention / Fastformer at N={RATIO_AT}", r, RATIO_GOAL, higher_is_better=True)
    print(
        f"goal: at N={RATIO_AT}, MultiHeadAttention / Fastformer "
        f">= {RATIO_GOAL}: {r:.1f}, {'met' if met else 'NOT met'}"
    )
    report_causal(paired, record, lengths)


def report_causal(paired: dict[int, float], record: Report, lengths: list[int]) -> bool:
    """Print causal / bidirectional at every length, record it, and check the target."""
    print("\ncausal / bidirectional Fastformer, by length (median over rounds of side-by-side pairs):")
    for n, r in paired.items():
        print(f"  N={n:>6,}  {r:5.2f}  {'within' if r <= CAUSAL_GOAL else 'NOT within'} {CAUSAL_GOAL:g}x")
    record.figure("causal_over_bidirectional", {n: round(r, 3) for n, r in paired.items()})
    worst = max(paired, key=paired.get) if paired else None
    r = paired[worst] if paired else float("nan")
    span = f"{lengths[0]:,}..{lengths[-1]:,}"
    every = bool(paired) and set(paired) == set(lengths)  # a length left out is not a length met
    met = record.target(
        f"causal within {CAUSAL_GOAL:g}x of bidirectional at every length {span} (worst: N={worst})",
        r,
        CAUSAL_GOAL,
        met=every and r <= CAUSAL_GOAL,
        rule=f"<= {CAUSAL_GOAL:g} at every length",
    )
    print(
        f"target: causal within {CAUSAL_GOAL:g}\u00d7 of bidirectional at every length {span}: "
        f"{'met' if met else 'NOT met'} (worst {r:.2f} at N={worst})"
    )
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds, each over every contender and length")
    parser.add_argument("--min-n", type=int, default=64)
    parser.add_argument("--max-n", type=int, default=16384)
    parser.add_argument(
        "--max-gb", type=float, default=3.0, help="skip the explicit attention where its N x N tensors exceed this"
    )
    parser.add_argument(
        "--max-seconds", type=float, default=20.0, help="stop a contender after a length where one pass took longer"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda: where the passes run")
    parser.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16", "float16"], help="the precision (default float32)"
    )
    parser.add_argument(
        "--only-causal",
        action="store_true",
        help="measure only causal against bidirectional Fastformer, side by side (a few minutes)",
    )
    args = parser.parse_args(argv)
    global DEVICE, DTYPE
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to PyTorch here")
    DEVICE, DTYPE = torch.device(args.device), getattr(torch, args.dtype)
    record = Report(__file__, argv)
    torch.set_num_threads(args.threads)
    lengths = [n for n in (2**k for k in range(4, 18)) if args.min_n <= n <= args.max_n]
    where = torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    record.figure("device", where)
    record.figure("dtype", args.dtype)
    print(
        f"torch {torch.__version__}, {where}, {args.dtype}, batch 1, width {WIDTH}; "
        f"Fastformer {FAST_HEADS} heads, Linformer {FAST_HEADS} heads and k={LINFORMER_ROWS}, "
        f"MultiHeadAttention {MHA_HEADS} heads"
    )
    if args.only_causal:
        record.figure("rounds", args.rounds)
        report_causal(paired_causal_ratios(lengths, args.rounds), record, lengths)
        return record.finish()
    times, memory = measure(lengths, args.rounds, args.max_gb, args.max_seconds)
    paired = paired_causal_ratios(lengths, args.rounds)
    record.figure("rounds", args.rounds)
    report(times, memory, paired, record)
    return record.finish()


if __name__ == "__main__":
    sys.exit(main())
