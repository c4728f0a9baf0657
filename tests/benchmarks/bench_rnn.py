"""Training throughput of chapter 2's plain encoder–decoder and chapter 3's attention model.

Both models train on the same batches of the bundled corpus, with the same
sizes as in the chapters, and the same thread count as the notebooks. One
measurement is one optimizer step (forward, loss, backward, clipping, Adam)
over a fixed list of batches; the script reports the median over repeats of
the target tokens per second, side by side, and their ratio.

    python tests/benchmarks/bench_rnn.py [--threads 2] [--repeats 5] [--batches 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch import nn

from attnbook.data import load_corpus, make_batches
from attnbook.rnn import Seq2Seq, Seq2SeqConfig
from attnbook.train import sequence_loss

#: The sizes the chapters use (notebooks 02 and 03).
EMBED, HIDDEN, BATCH = 64, 128, 64


def one_pass(model: nn.Module, optimizer: torch.optim.Optimizer, batches) -> tuple[float, int]:
    """Train on every batch once; return (seconds, target tokens)."""
    tokens = 0
    start = time.perf_counter()
    for batch in batches:
        logits = model(batch.src, batch.src_mask, batch.tgt_in)
        loss = sequence_loss(logits, batch.tgt_out)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        tokens += int((batch.tgt_out != 0).sum())
    return time.perf_counter() - start, tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    corpus = load_corpus()
    loader = make_batches(corpus.train, corpus.src_vocab, corpus.tgt_vocab, batch_size=BATCH, shuffle=True, seed=0)
    batches = [b for _, b in zip(range(args.batches), loader)]
    n_tokens = sum(int((b.tgt_out != 0).sum()) for b in batches)
    print(f"{len(batches)} batches of {BATCH} pairs, {n_tokens} target tokens; threads={args.threads}, "
          f"embed={EMBED}, hidden={HIDDEN}; median of {args.repeats} passes")

    rates = {}
    for name, attention in (("plain", False), ("attention", True)):
        config = Seq2SeqConfig(len(corpus.src_vocab), len(corpus.tgt_vocab), EMBED, HIDDEN, attention=attention)
        model = Seq2Seq(config).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        one_pass(model, optimizer, batches[:2])  # warm-up
        rates[name] = statistics.median(tokens / seconds for seconds, tokens in (one_pass(model, optimizer, batches) for _ in range(args.repeats)))
    for name, rate in rates.items():
        print(f"{name:>10}: {rate:9.0f} target tokens/s")
    print(f"plain / attention: {rates['plain'] / rates['attention']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
