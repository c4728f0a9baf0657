"""Benchmark: generating the corpus, building its vocabularies and its batches.

    python tests/benchmarks/bench_data.py              # 100,000 pairs, 3 repeats
    python tests/benchmarks/bench_data.py --pairs 20000 --repeats 5

Prints the median wall time of each stage over the repeats, and, side by side
in the same run, two contenders for the batching: length-bucketed against
random batches, and the library's ``collate`` against a version built on
``torch.nn.utils.rnn.pad_sequence``. It writes its figures to
``tests/benchmarks/results/bench_data.json``; it has no target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from _report import Report  # noqa: E402  (this folder)
from torch.nn.utils.rnn import pad_sequence  # noqa: E402

from attnbook.data import Batch, Vocab, collate, generate_pairs, make_batches, split_by_index, tokenize  # noqa: E402
from attnbook.masks import padding_mask  # noqa: E402


def timed(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def collate_pad_sequence(examples, pad_id=0, bos_id=1, eos_id=2) -> Batch:
    """The contender: the same Batch, padded with torch.nn.utils.rnn.pad_sequence."""
    srcs = [torch.tensor(s) for s, _ in examples]
    tgts_in = [torch.tensor([bos_id, *t]) for _, t in examples]
    tgts_out = [torch.tensor([*t, eos_id]) for _, t in examples]
    src = pad_sequence(srcs, batch_first=True, padding_value=pad_id)
    tgt_in = pad_sequence(tgts_in, batch_first=True, padding_value=pad_id)
    tgt_out = pad_sequence(tgts_out, batch_first=True, padding_value=pad_id)
    src_lengths = torch.tensor([len(s) for s in srcs])
    tgt_lengths = torch.tensor([len(t) for t in tgts_in])
    return Batch(
        src,
        src_lengths,
        padding_mask(src_lengths, src.shape[1]),
        tgt_in,
        tgt_out,
        padding_mask(tgt_lengths, tgt_in.shape[1]),
        tgt_lengths,
    )


def epoch(loader) -> tuple[int, float]:
    padded = total = batches = 0
    for b in loader:
        batches += 1
        padded += int(b.src_padding_mask.sum() + b.tgt_padding_mask.sum())
        total += b.src_padding_mask.numel() + b.tgt_padding_mask.numel()
    return batches, padded / total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    record = Report(__file__, argv)
    torch.set_num_threads(2)
    n, r = args.pairs, args.repeats
    print(
        f"corpus of {n:,} pairs (lengths 3-40, uniform), batch size {args.batch_size}, "
        f"median of {r} runs, {torch.get_num_threads()} threads\n"
    )

    t_gen, pairs = timed(lambda: generate_pairs(n, seed=0), r)
    train, _, _ = split_by_index(pairs)
    n_tokens = sum(len(p.src_tokens) + len(p.tgt_tokens) for p in pairs)
    t_tok, _ = timed(lambda: [(tokenize(p.src, "en"), tokenize(p.tgt, "fr")) for p in pairs], r)
    t_vocab, (src_vocab, tgt_vocab) = timed(
        lambda: (Vocab.build(p.src_tokens for p in train), Vocab.build(p.tgt_tokens for p in train)), r
    )
    t_loader, loader = timed(lambda: make_batches(train, src_vocab, tgt_vocab, args.batch_size, seed=0), r)
    t_epoch, (n_batches, share) = timed(lambda: epoch(loader), r)
    plain = make_batches(train, src_vocab, tgt_vocab, args.batch_size, seed=0, bucket=False)
    t_epoch_plain, (_, share_plain) = timed(lambda: epoch(plain), r)

    examples = [
        (src_vocab.encode(p.src_tokens), tgt_vocab.encode(p.tgt_tokens)) for p in train[: 200 * args.batch_size]
    ]
    chunks = [examples[i : i + args.batch_size] for i in range(0, len(examples), args.batch_size)]
    t_ours, _ = timed(lambda: [collate(c) for c in chunks], r)
    t_pad_seq, _ = timed(lambda: [collate_pad_sequence(c) for c in chunks], r)
    a, b = collate(chunks[0]), collate_pad_sequence(chunks[0])
    assert all(
        torch.equal(getattr(a, f), getattr(b, f))
        for f in ("src", "src_padding_mask", "tgt_in", "tgt_out", "tgt_padding_mask")
    ), "contenders disagree"

    total = t_gen + t_vocab + t_loader + t_epoch
    print(f"{'stage':<52}{'seconds':>9}")
    print(f"{f'generate {n:,} pairs ({n_tokens:,} tokens)':<52}{t_gen:>9.2f}   ({n / t_gen:,.0f} pairs/s)")
    print(f"{'re-tokenize every sentence from its text':<52}{t_tok:>9.2f}   ({2 * n / t_tok:,.0f} sentences/s)")
    print(
        f"{f'build both vocabularies ({len(train):,} training pairs)':<52}{t_vocab:>9.2f}   "
        f"({len(src_vocab)} / {len(tgt_vocab)} tokens)"
    )
    print(f"{'encode the training pairs (make_batches)':<52}{t_loader:>9.2f}")
    print(f"{f'one epoch of {n_batches:,} bucketed batches':<52}{t_epoch:>9.2f}   (padding {share:.1%})")
    print(f"{'generate + vocabularies + encode + one epoch':<52}{total:>9.2f}")
    print()
    print("contenders, side by side")
    print(f"{'one epoch, random batches (no bucketing)':<52}{t_epoch_plain:>9.2f}   (padding {share_plain:.1%})")
    print(f"{'  ratio random / bucketed':<52}{t_epoch_plain / t_epoch:>9.2f}")
    print(f"{f'collate, {len(chunks)} batches: attnbook.data.collate':<52}{t_ours:>9.3f}")
    print(f"{f'collate, {len(chunks)} batches: pad_sequence':<52}{t_pad_seq:>9.3f}")
    print(f"{'  ratio pad_sequence / collate':<52}{t_pad_seq / t_ours:>9.2f}")
    record.figure(
        "setup",
        {
            "pairs": n,
            "tokens": n_tokens,
            "training_pairs": len(train),
            "batch_size": args.batch_size,
            "repeats": r,
            "vocabulary": [len(src_vocab), len(tgt_vocab)],
        },
    )
    record.figure(
        "seconds",
        {
            key: round(value, 3)
            for key, value in {
                "generate": t_gen,
                "tokenize": t_tok,
                "vocabularies": t_vocab,
                "encode": t_loader,
                "epoch_bucketed": t_epoch,
                "total": total,
                "epoch_random": t_epoch_plain,
                "collate_ours": t_ours,
                "collate_pad_sequence": t_pad_seq,
            }.items()
        },
    )
    record.figure("padding_share", {"bucketed": round(share, 4), "random": round(share_plain, 4)})
    record.figure(
        "ratios",
        {
            "random_over_bucketed": round(t_epoch_plain / t_epoch, 2),
            "pad_sequence_over_collate": round(t_pad_seq / t_ours, 2),
        },
    )
    return record.finish()


if __name__ == "__main__":
    sys.exit(main())
