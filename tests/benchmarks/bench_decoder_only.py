"""Benchmark: greedy generation with chapter 10's decoder-only model against GPT-2 of the ``transformers`` package.

One configuration for both, float32, 2 threads: a vocabulary of 8,192 tokens,
d_model 384, 6 heads, 6 layers, an FFN of 4 x 384, positions up to 256. Both
models hold the same weights (``tests/gpt2_twins.py``: GPT-2's random weights,
nudged, copied into ours), so they compute the same function. One measurement
is one greedy generation of 64 new tokens after a prompt of 16, for a batch of
1 and of 8 prompts:

- ours:          ``attnbook.decoder_only.generate(model, prompt, 64)``, with the key-value cache;
- transformers:  ``GPT2LMHeadModel.generate(prompt, max_new_tokens=64, do_sample=False, use_cache=True)``,
                 no end-of-sequence token, so that both write all 64 tokens;
- ours, no cache: ``generate(..., cache=False)``, every step reading the whole sequence again
                 (chapter 10's comparison; batch 1 only, no target).

Before timing, the script checks that the two libraries write the same tokens.
The contenders are interleaved: each round times each of them once, in a
shuffled order, so that a change in the machine's load hits them all alike.
The script prints the median tokens per second of each and the median per-round
ratio ours / transformers with its 95% confidence interval.

Target, at each batch size: ours at least as fast as ``transformers``, parity
within noise included: met while the 95% interval of the per-round ratio of
tokens per second, ours / transformers, reaches 1.0 or above.

Run it standalone (``make bench`` runs every benchmark); it writes its figures
to ``tests/benchmarks/results/bench_decoder_only.json`` and exits non-zero if a
target is missed:

    PYTHONPATH=src python tests/benchmarks/bench_decoder_only.py [--rounds 7] [--threads 2]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from attnbook.decoder_only import generate

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the shared gpt2_twins

from _report import Report, median_interval  # noqa: E402
from gpt2_twins import gpt2_twins  # noqa: E402

VOCAB, D_MODEL, HEADS, LAYERS, MAX_LEN = 8192, 384, 6, 6, 256
PROMPT, NEW_TOKENS, BATCHES = 16, 64, (1, 8)
TARGET = 1.0
CONTENDERS = ("ours", "transformers", "ours, no cache")
UNCACHED_AT = (1,)  # the batch sizes at which ours is also timed without the cache (slow: about 9x at batch 8)


def prompts(batch: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(3, VOCAB, (batch, PROMPT), generator=torch.Generator().manual_seed(seed))


def runners(ours, theirs) -> dict:
    def transformers_generate(prompt):
        return theirs.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=NEW_TOKENS,
            do_sample=False,
            use_cache=True,
            pad_token_id=0,
            eos_token_id=None,
        )

    return {
        "ours": lambda prompt: generate(ours, prompt, NEW_TOKENS),
        "transformers": torch.no_grad()(transformers_generate),
        "ours, no cache": lambda prompt: generate(ours, prompt, NEW_TOKENS, cache=False),
    }


def bench(batch: int, run: dict, rounds: int, warmup: int = 2, seed: int = 0) -> dict[str, list[float]]:
    """Seconds of each contender's generation, ``rounds`` interleaved rounds after ``warmup``."""
    prompt = prompts(batch, seed)
    order = [name for name in CONTENDERS if name != "ours, no cache" or batch in UNCACHED_AT]
    outputs = {name: run[name](prompt).tolist() for name in order}
    same = all(tokens == outputs["ours"] for tokens in outputs.values())
    print(f"\nbatch {batch}: {', '.join(order)} write the same tokens: {same}")
    if not same:
        raise SystemExit("the contenders wrote different tokens: the comparison would not be of the same work")
    shuffle = random.Random(seed)
    times: dict[str, list[float]] = {name: [] for name in order}
    for r in range(warmup + rounds):
        shuffle.shuffle(order)
        for name in order:
            start = time.perf_counter()
            run[name](prompt)
            if r >= warmup:
                times[name].append(time.perf_counter() - start)
    return times


def report(batch: int, times: dict[str, list[float]], record: Report) -> None:
    tokens = batch * NEW_TOKENS
    rate = {name: tokens / statistics.median(t) for name, t in times.items()}
    per_round = [t / o for o, t in zip(times["ours"], times["transformers"], strict=True)]  # speed ratio
    low, high = median_interval(per_round)
    ratio = statistics.median(per_round)
    print(f"greedy generation of {NEW_TOKENS} tokens after {PROMPT}, batch {batch}: median of {len(per_round)} rounds")
    for name, r in rate.items():
        print(f"  {name:<16} {r:10,.0f} tokens/s")
    print(
        f"  ours / transformers, tokens/s: {rate['ours'] / rate['transformers']:.3f} (ratio of medians); "
        f"per round: median {ratio:.3f}, 95% interval {low:.3f} to {high:.3f}"
    )
    figures = {
        "tokens_per_second": {name: round(r, 1) for name, r in rate.items()},
        "ours_over_transformers": round(rate["ours"] / rate["transformers"], 3),
        "per_round_median": round(ratio, 3),
        "per_round_interval_95": [round(low, 3), round(high, 3)],
        "rounds": len(per_round),
    }
    if "ours, no cache" in rate:
        figures["cache_speedup"] = round(rate["ours"] / rate["ours, no cache"], 2)
        print(f"  the cache's speed-up, ours: {figures['cache_speedup']:.2f} x")
    record.figure(f"generation, batch {batch}", figures)
    met = high >= TARGET
    record.target(
        f"generation tokens/s, ours / transformers, batch {batch}",
        ratio,
        TARGET,
        higher_is_better=True,
        met=met,
        rule=f"at least a tie: 95% CI {low:.3f}-{high:.3f}",
        note="at least as fast, parity within noise included: met while the 95% confidence interval "
        "of the median per-round ratio of tokens per second reaches 1.0",
    )
    print(f"  target at least as fast (95% interval reaches {TARGET}): {'met' if met else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per batch size (default 7)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    record = Report(__file__, argv)
    torch.set_num_threads(args.threads)
    ours, theirs = gpt2_twins(VOCAB, D_MODEL, HEADS, LAYERS, MAX_LEN, dtype=torch.float32)
    import transformers

    attention = getattr(theirs.config, "_attn_implementation", "?")
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__} (attention: {attention}), "
        f"{torch.get_num_threads()} threads, float32; V={VOCAB}, d={D_MODEL}, {HEADS} heads, {LAYERS} layers"
    )
    record.figure(
        "configuration",
        {
            "vocab_size": VOCAB,
            "d_model": D_MODEL,
            "heads": HEADS,
            "layers": LAYERS,
            "prompt": PROMPT,
            "new_tokens": NEW_TOKENS,
            "transformers": transformers.__version__,
            "transformers_attention": attention,
        },
    )
    run = runners(ours, theirs)
    for batch in BATCHES:
        report(batch, bench(batch, run, args.rounds), record)
    return record.finish()


if __name__ == "__main__":
    sys.exit(main())
