"""Training throughput of chapter 2's plain encoder–decoder and chapter 3's attention model.

Both models train on the same batches of the bundled corpus, generated and
sized as in the chapters (4,000 pairs of 3 to 25 tokens; embeddings 64, GRUs
128). One measurement is a pass of training steps (forward, loss, backward,
clipping, Adam) over a fixed list of batches; the script reports the median
over repeats of the target tokens per second, for both models side by side and
for one and two threads (the chapters train on one), and the ratios. It writes
its figures to ``tests/benchmarks/results/bench_rnn.json``; it has no target.

    python tests/benchmarks/bench_rnn.py [--threads 1 2] [--repeats 5] [--batches 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

from attnbook.data import load_corpus, make_batches
from attnbook.rnn import Seq2Seq, Seq2SeqConfig
from attnbook.train import sequence_loss

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import Report  # noqa: E402

#: The corpus and sizes the chapters use (notebooks 02 and 03).
N_PAIRS, MAX_LEN, EMBED, HIDDEN, BATCH = 4_000, 25, 64, 128, 64


def one_pass(model: nn.Module, optimizer: torch.optim.Optimizer, batches) -> tuple[float, int]:
    """Train on every batch once; return (seconds, target tokens)."""
    tokens = 0
    start = time.perf_counter()
    for batch in batches:
        logits = model(batch.src, batch.src_padding_mask, batch.tgt_in)
        loss = sequence_loss(logits, batch.tgt_out)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        tokens += int((batch.tgt_out != 0).sum())
    return time.perf_counter() - start, tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args(argv)
    record = Report(__file__, argv)

    corpus = load_corpus(n_pairs=N_PAIRS, seed=0, max_len=MAX_LEN)
    loader = make_batches(corpus.train, corpus.src_vocab, corpus.tgt_vocab, batch_size=BATCH, shuffle=True, seed=0)
    batches = [b for _, b in zip(range(args.batches), loader)]
    n_tokens = sum(int((b.tgt_out != 0).sum()) for b in batches)
    print(
        f"{len(batches)} batches of {BATCH} pairs, {n_tokens} target tokens; embed={EMBED}, hidden={HIDDEN}; "
        f"median of {args.repeats} passes"
    )

    rates: dict[tuple[str, int], float] = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        for name, attention in (("plain", False), ("attention", True)):
            torch.manual_seed(0)
            config = Seq2SeqConfig(len(corpus.src_vocab), len(corpus.tgt_vocab), EMBED, HIDDEN, attention=attention)
            model = Seq2Seq(config).train()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            one_pass(model, optimizer, batches[:2])  # warm-up
            passes = [one_pass(model, optimizer, batches) for _ in range(args.repeats)]
            rates[name, threads] = statistics.median(tokens / seconds for seconds, tokens in passes)

    print(f"{'threads':>8} {'plain tok/s':>12} {'attention tok/s':>16} {'plain / attention':>18}")
    for threads in args.threads:
        plain, attention = rates["plain", threads], rates["attention", threads]
        print(f"{threads:>8} {plain:>12.0f} {attention:>16.0f} {plain / attention:>17.2f}x")
    if len(args.threads) > 1:
        first, last = args.threads[0], args.threads[-1]
        for name in ("plain", "attention"):
            print(f"{name}: {last} threads / {first} thread(s) = {rates[name, last] / rates[name, first]:.2f}x")
    record.figure(
        "setup",
        {
            "batches": len(batches),
            "batch_size": BATCH,
            "target_tokens": n_tokens,
            "embed": EMBED,
            "hidden": HIDDEN,
            "repeats": args.repeats,
        },
    )
    record.figure(
        "tokens_per_second", {f"{name}, {threads} threads": round(rate) for (name, threads), rate in rates.items()}
    )
    record.figure(
        "plain_over_attention",
        {
            f"{threads} threads": round(rates["plain", threads] / rates["attention", threads], 2)
            for threads in args.threads
        },
    )
    return record.finish()


if __name__ == "__main__":
    sys.exit(main())
