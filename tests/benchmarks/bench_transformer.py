"""Benchmark: one training step of the Transformer, and what the key-value cache saves when decoding.

Part 1, a training step (forward, loss, backward, Adam step), float32, 2 threads,
at d_model 256, 8 heads, 2 + 2 layers, d_ff 1024, a batch of 64 sentence pairs
of source and target length 32 (the sources padded from random lengths 16..32),
vocabularies of 2,000. Contenders:

- ours:  ``attnbook.transformer.Transformer``;
- torch: the same model built on ``torch.nn.Transformer`` (the same embeddings,
  sinusoidal positions and tied output around it; the final LayerNorms it adds to a
  post-LN stack removed, so the two models are the same function);
- d2l:   d2l's Transformer encoder (``d2l.TransformerEncoder``) with a decoder of
  the d2l book's design assembled from d2l's blocks (``d2l.MultiHeadAttention``,
  ``d2l.AddNorm``, ``d2l.PositionWiseFFN``, ``d2l.PositionalEncoding``); the d2l
  package ships the encoder but not the decoder. Attention biases on, as in ours;
  its output layer is a separate linear layer with a bias (d2l does not tie it).

By default dropout is 0, so that the three compute the same function and the
comparison is of implementations alone. With ``--dropout 0.1`` each library drops
where it does by design (torch: residual, attention weights, FFN hidden layer;
d2l: residual, attention weights, embeddings; the paper, and ours by default:
residual and embeddings), and ours is timed twice more, dropping like torch and
like d2l, so that each comparison is of the same work; no target applies then.

The contenders are interleaved: each round times one step of each, in a shuffled
order, so that a change in the machine's load hits them all alike. Target (at
dropout 0): ours at parity with the faster of torch and d2l, not slower beyond
noise: the 95% confidence interval of the median per-round ratio ours / faster
reaches 1.0 or below (a tie is not a miss; the three do the same matrix products).

Part 2, decoding: greedy generation of 64 tokens for a batch of source sentences
with ``start()`` and 64 calls of ``step()``, with the key-value cache
(``start(..., cache=True)``, each step runs the decoder on the new token only)
and without it (each step runs the decoder over the whole prefix). Target: the
cache is >= 3 x faster at batch 64; batch 1 is reported too.

Run it standalone (``make bench`` runs every benchmark); it writes its figures
to ``tests/benchmarks/results/bench_transformer.json`` and exits non-zero if a
target is missed:

    PYTHONPATH=src python tests/benchmarks/bench_transformer.py [--rounds N]
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
import torch.nn.functional as F
from torch import nn

from attnbook.masks import causal_mask, padding_mask
from attnbook.positional import sinusoidal_table
from attnbook.transformer import Transformer, TransformerConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import Report, median_interval  # noqa: E402

D_MODEL, HEADS, LAYERS, D_FF, BATCH, LENGTH, VOCAB = 256, 8, 2, 1024, 64, 32, 2000
DROPOUT = 0.0  # set by --dropout
PAD = 0
TRAIN_TARGET, CACHE_TARGET, GENERATED = 1.0, 3.0, 64


# --- the contenders -----------------------------------------------------------------------------


class TorchTransformer(nn.Module):
    """Embeddings scaled by √d, sinusoidal positions, torch.nn.Transformer, output tied to the target embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.src_embedding = nn.Embedding(VOCAB, D_MODEL)
        self.tgt_embedding = nn.Embedding(VOCAB, D_MODEL)
        for e in (self.src_embedding, self.tgt_embedding):
            nn.init.normal_(e.weight, std=D_MODEL**-0.5)
        self.register_buffer("table", sinusoidal_table(128, D_MODEL), persistent=False)
        self.dropout = nn.Dropout(DROPOUT)
        self.core = nn.Transformer(D_MODEL, HEADS, LAYERS, LAYERS, D_FF, DROPOUT, batch_first=True)
        self.core.encoder.norm = None  # the paper's post-LN stacks end with their last layer's LayerNorm
        self.core.decoder.norm = None

    def _embed(self, ids, embedding):
        return self.dropout(embedding(ids) * math.sqrt(D_MODEL) + self.table[: ids.shape[1]])

    def forward(self, src, src_padding_mask, tgt_in):
        T = tgt_in.shape[1]
        out = self.core(
            self._embed(src, self.src_embedding),
            self._embed(tgt_in, self.tgt_embedding),
            tgt_mask=causal_mask(T),
            src_key_padding_mask=src_padding_mask,
            memory_key_padding_mask=src_padding_mask,
            tgt_is_causal=True,
        )
        return F.linear(out, self.tgt_embedding.weight)


def _d2l_model():
    """d2l's encoder, and a decoder of the d2l book's design built from d2l's blocks."""
    from d2l import torch as d2l

    class DecoderBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention1 = d2l.MultiHeadAttention(D_MODEL, HEADS, DROPOUT, bias=True)
            self.addnorm1 = d2l.AddNorm(D_MODEL, DROPOUT)
            self.attention2 = d2l.MultiHeadAttention(D_MODEL, HEADS, DROPOUT, bias=True)
            self.addnorm2 = d2l.AddNorm(D_MODEL, DROPOUT)
            self.ffn = d2l.PositionWiseFFN(D_FF, D_MODEL)
            self.addnorm3 = d2l.AddNorm(D_MODEL, DROPOUT)

        def forward(self, x, memory, src_valid_lens):
            B, T, _ = x.shape
            visible = torch.arange(1, T + 1).repeat(B, 1)  # training: query t sees keys 0..t
            y = self.addnorm1(x, self.attention1(x, x, x, visible))
            z = self.addnorm2(y, self.attention2(y, memory, memory, src_valid_lens))
            return self.addnorm3(z, self.ffn(z))

    class D2LTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = d2l.TransformerEncoder(VOCAB, D_MODEL, D_FF, HEADS, LAYERS, DROPOUT, use_bias=True)
            self.embedding = nn.Embedding(VOCAB, D_MODEL)
            self.positions = d2l.PositionalEncoding(D_MODEL, DROPOUT)
            self.blocks = nn.ModuleList(DecoderBlock() for _ in range(LAYERS))
            self.dense = nn.LazyLinear(VOCAB)

        def forward(self, src, src_valid_lens, tgt_in):
            memory = self.encoder(src, src_valid_lens)
            x = self.positions(self.embedding(tgt_in) * math.sqrt(D_MODEL))
            for block in self.blocks:
                x = block(x, memory, src_valid_lens)
            return self.dense(x)

    return D2LTransformer()


def _ours(like: str = "paper") -> Transformer:
    """Our model; ``like`` says where it drops: as the paper does, or as ``torch`` or ``d2l`` do."""
    extra = {
        "paper": {},
        "torch": {"attention_dropout": DROPOUT, "ffn_dropout": DROPOUT},
        "d2l": {"attention_dropout": DROPOUT},
    }
    return Transformer(
        TransformerConfig(VOCAB, VOCAB, D_MODEL, HEADS, LAYERS, D_FF, DROPOUT, max_len=128, **extra[like])
    )


# --- part 1: a training step ---------------------------------------------------------------------


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(LENGTH // 2, LENGTH + 1, (BATCH,), generator=g)
    lengths[0] = LENGTH
    src_padding_mask = padding_mask(lengths, LENGTH)
    src = torch.randint(4, VOCAB, (BATCH, LENGTH), generator=g).masked_fill(src_padding_mask, PAD)
    tgt = torch.randint(4, VOCAB, (BATCH, LENGTH + 1), generator=g)
    return src, src_padding_mask, lengths, tgt[:, :-1], tgt[:, 1:]


def bench_training(rounds: int, warmup: int = 3, seed: int = 0) -> dict[str, list[float]]:
    torch.manual_seed(seed)
    src, src_padding_mask, lengths, tgt_in, tgt_out = _batch(seed)
    models = {"ours": _ours(), "torch": TorchTransformer(), "d2l": _d2l_model()}
    if DROPOUT > 0:
        models["ours, dropping like torch"] = _ours("torch")
        models["ours, dropping like d2l"] = _ours("d2l")
    inputs = {name: (src, src_padding_mask, tgt_in) for name in models}  # d2l masks by lengths
    inputs["d2l"] = (src, lengths, tgt_in)
    models["d2l"](*inputs["d2l"])  # materialize d2l's lazy layers
    optimizers = {
        name: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9) for name, m in models.items()
    }
    for m in models.values():
        m.train()

    def one_step(name: str) -> float:
        model, optimizer = models[name], optimizers[name]
        start = time.perf_counter()
        logits = model(*inputs[name])
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return time.perf_counter() - start

    order = list(models)
    shuffle = random.Random(seed)
    times: dict[str, list[float]] = {name: [] for name in order}
    for r in range(warmup + rounds):
        shuffle.shuffle(order)
        for name in order:
            seconds = one_step(name)
            if r >= warmup:
                times[name].append(seconds)
    return times


def report_training(times: dict[str, list[float]], record: Report) -> None:
    medians = {name: statistics.median(t) for name, t in times.items()}
    print(
        f"\nTraining step (forward, backward, Adam), B={BATCH}, S=T={LENGTH}, d={D_MODEL}, {HEADS} heads, "
        f"{LAYERS}+{LAYERS} layers, d_ff={D_FF}, V={VOCAB}, dropout {DROPOUT}: median of {len(times['ours'])} rounds"
    )
    for name, m in medians.items():
        print(f"  {name:<28} {m * 1e3:8.1f} ms")
    figures = {
        "dropout": DROPOUT,
        "rounds": len(times["ours"]),
        "median_ms": {n: round(m * 1e3, 1) for n, m in medians.items()},
    }
    if DROPOUT > 0:
        figures["ours_over_torch_same_dropout"] = round(medians["ours, dropping like torch"] / medians["torch"], 3)
        figures["ours_over_d2l_same_dropout"] = round(medians["ours, dropping like d2l"] / medians["d2l"], 3)
        print(f"  ours / torch, same dropout   {figures['ours_over_torch_same_dropout']:8.3f}")
        print(f"  ours / d2l, same dropout     {figures['ours_over_d2l_same_dropout']:8.3f}")
        print("  (no target with dropout: the libraries drop in different places)")
        record.figure("training", figures)
        return
    others = ["torch", "d2l"]
    best = min(others, key=medians.__getitem__)
    ratio = medians["ours"] / medians[best]
    per_round = [o / min(times[n][i] for n in others) for i, o in enumerate(times["ours"])]
    low, high = median_interval(per_round)
    print(f"  ours / torch                 {medians['ours'] / medians['torch']:8.3f}")
    print(f"  ours / d2l                   {medians['ours'] / medians['d2l']:8.3f}")
    print(
        f"  ours / faster of the two     {ratio:8.3f}   (ratio of medians; per round: median "
        f"{statistics.median(per_round):.3f}, 95% interval {low:.3f} to {high:.3f})"
    )
    figures.update(
        ours_over_torch=round(medians["ours"] / medians["torch"], 3),
        ours_over_d2l=round(medians["ours"] / medians["d2l"], 3),
        ours_over_faster=round(ratio, 3),
        per_round_median=round(statistics.median(per_round), 3),
        per_round_interval_95=[round(low, 3), round(high, 3)],
    )
    record.figure("training", figures)
    tie = low <= TRAIN_TARGET
    record.target(
        "training step, ours / faster of torch and d2l",
        statistics.median(per_round),
        TRAIN_TARGET,
        met=tie,
        rule=f"tie: 95% CI {low:.3f}-{high:.3f}",
        note="tie: parity within noise, met while the 95% confidence interval "
        "of the median per-round ratio reaches 1.0",
    )
    print(f"  target parity with the faster (95% interval reaches {TRAIN_TARGET}): {'met' if tie else 'NOT met'}")


# --- part 2: decoding with and without the key-value cache ----------------------------------------


@torch.no_grad()
def _generate(model: Transformer, src, src_padding_mask, cache: bool) -> torch.Tensor:
    state = model.start(src, src_padding_mask, cache=cache)
    tokens = torch.full((src.shape[0],), 1, dtype=torch.long)
    out = []
    for _ in range(GENERATED):
        logits, state = model.step(tokens, state)
        tokens = logits.argmax(-1)
        out.append(tokens)
    return torch.stack(out, 1)


def bench_cache(batch: int, rounds: int, warmup: int = 1, seed: int = 0) -> dict[str, list[float]]:
    torch.manual_seed(seed)
    model = _ours().eval()
    src, src_padding_mask, *_ = _batch(seed)
    src, src_padding_mask = src[:batch], src_padding_mask[:batch]
    assert torch.equal(_generate(model, src, src_padding_mask, True), _generate(model, src, src_padding_mask, False)), (
        "cached != uncached"
    )
    times: dict[str, list[float]] = {"cached": [], "uncached": []}
    order = list(times)
    shuffle = random.Random(seed)
    for r in range(warmup + rounds):
        shuffle.shuffle(order)
        for name in order:
            start = time.perf_counter()
            _generate(model, src, src_padding_mask, name == "cached")
            if r >= warmup:
                times[name].append(time.perf_counter() - start)
    return times


def report_cache(batch: int, times: dict[str, list[float]], target: float | None, record: Report) -> None:
    cached, uncached = statistics.median(times["cached"]), statistics.median(times["uncached"])
    speedup = uncached / cached
    print(
        f"\nGreedy decoding of {GENERATED} tokens, batch {batch}, source length {LENGTH}: "
        f"median of {len(times['cached'])} rounds"
    )
    print(f"  with the key-value cache     {cached * 1e3:8.1f} ms")
    print(f"  without (whole prefix)       {uncached * 1e3:8.1f} ms")
    record.figure(
        f"decoding, batch {batch}",
        {
            "cached_ms": round(cached * 1e3, 1),
            "uncached_ms": round(uncached * 1e3, 1),
            "speedup": round(speedup, 2),
            "rounds": len(times["cached"]),
        },
    )
    if target is None:
        print(f"  speed-up                     {speedup:8.2f} x")
        return
    ok = record.target(f"key-value cache speed-up, batch {batch}", speedup, target, higher_is_better=True)
    print(f"  speed-up                     {speedup:8.2f} x   (target >= {target}: {'met' if ok else 'NOT met'})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed training rounds (default 15)")
    parser.add_argument("--decode-rounds", type=int, default=5, help="timed decoding rounds (default 5)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--dropout", type=float, default=0.0, help="0 (default, with the target) or e.g. 0.1 (no target)"
    )
    parser.add_argument("--skip-decoding", action="store_true", help="time the training step only")
    args = parser.parse_args(argv)
    record = Report(__file__, argv)
    global DROPOUT
    DROPOUT = args.dropout
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32")
    report_training(bench_training(args.rounds), record)
    if not args.skip_decoding:
        report_cache(BATCH, bench_cache(BATCH, args.decode_rounds), CACHE_TARGET, record)
        report_cache(1, bench_cache(1, args.decode_rounds), None, record)
    return record.finish()


if __name__ == "__main__":
    sys.exit(main())
