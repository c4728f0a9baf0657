"""Chapter 8's speed figures: training throughput, the key-value cache, beam search.

1. Training throughput, in target tokens per second, of three Transformers of
   the same configuration on the same batches of the bundled corpus (forward,
   the label-smoothed loss, backward, clipping, Adam):
   - ours: ``attnbook.transformer.Transformer``;
   - d2l: ``d2l.TransformerEncoder`` with a decoder of the d2l book's design
     assembled from d2l's blocks (the d2l package ships no decoder);
   - torch: ``torch.nn.Transformer`` between embeddings, the same sinusoidal
     positions and an output layer.
   Each is timed over the same list of batches, the three interleaved, and the
   script reports the medians and the ratios ours / d2l and ours / torch.
2. The key-value cache: generating 64 tokens for a batch, one step at a time,
   with the cache (``model.start(src, mask)``) and without it
   (``cache=False``: the decoder runs over the whole prefix at every step).
3. Beam search: seconds per test sentence for greedy decoding and for beam
   search with k = 1 and k = 4, on a model trained for a few epochs (so that
   translations end with ``<eos>`` where a trained model's do).
4. Adam's step, as a loop over the parameters and fused into one kernel
   (``fused_paper_optimizer`` of ``attnbook.translate.recipe``, what ``attnbook-translate train`` uses),
   on the command line's default model with subword vocabularies of the
   default size: the optimizer step alone, and whole training steps (a batch
   of 48 pairs of 12 and 14 tokens), interleaved; medians and ratios.
5. Precision: whole training steps of that model on that batch in float32 and
   in bfloat16 mixed precision (``attnbook-translate train --dtype bfloat16``,
   what ``--dtype auto`` chooses on a processor with bfloat16 instructions),
   interleaved; medians and their ratio, and whether the processor has the
   instructions (without them bfloat16 is emulated, and a few steps tell).
6. The run's step: whole training steps of that model with dropout 0.2 on
   that batch, as the chapters build it (PyTorch's dropout, the loss traced
   by autograd: ``sequence_loss``) and as the command line builds it
   (``UniformDropout``, ``fused_sequence_loss``), in float32 and, where the
   processor has the instructions, in bfloat16 mixed precision; interleaved,
   medians and ratios.

7. The command line's step as it was (the loss checked, averaged and read
   back at every step) and as it is (summed, scaled by the count the host
   knows, nothing read back), interleaved, medians and their ratio; and the
   model FLOP utilisation of the step as it is: the operations PyTorch's flop
   counter counts in one step, times the steps a second, over the rate of a
   large matrix product measured in the same run.

Float32 (the realistic case) but in parts 5, 6 and 7; two threads unless ``--threads`` says otherwise.
It writes its figures to ``tests/benchmarks/results/bench_translator.json``;
it has no target.

    python tests/benchmarks/bench_translator.py [--threads 2] [--repeats 5] [--batches 12] [--train-epochs 6]
        [--only throughput cache beam optimizer precision step loop]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from attnbook.data import load_corpus
from attnbook.decode import beam_search, greedy_decode
from attnbook.masks import padding_mask
from attnbook.positional import SinusoidalPositionalEncoding
from attnbook.train import paper_optimizer, sequence_loss, train
from attnbook.transformer import Transformer, TransformerConfig
from attnbook.translate.recipe import fused_paper_optimizer, fused_sequence_loss, teacher_forced_logits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import Report  # noqa: E402

#: The corpus the chapter trains on.
N_PAIRS, MAX_LEN, BATCH = 4_000, 25, 64
#: Configurations: the chapter's small model, and a wider, deeper one.
CONFIGS = {
    "chapter 8 (d=64, h=4, 2+2 layers, ff=256)": dict(d_model=64, num_heads=4, num_layers=2, d_ff=256),
    "wider (d=256, h=8, 3+3 layers, ff=1024)": dict(d_model=256, num_heads=8, num_layers=3, d_ff=1024),
}
DROPOUT = 0.1


# --- the three models --------------------------------------------------------------------------


def ours(src_vocab: int, tgt_vocab: int, d_model: int, num_heads: int, num_layers: int, d_ff: int) -> nn.Module:
    config = TransformerConfig(
        src_vocab,
        tgt_vocab,
        d_model=d_model,
        num_heads=num_heads,
        num_layers=num_layers,
        d_ff=d_ff,
        dropout=DROPOUT,
        max_len=256,
    )
    return Transformer(config)


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` (post-LN, batch first) between embeddings + sinusoidal positions and an output layer."""

    def __init__(
        self, src_vocab: int, tgt_vocab: int, d_model: int, num_heads: int, num_layers: int, d_ff: int
    ) -> None:
        super().__init__()
        self.scale = math.sqrt(d_model)
        self.src_embedding, self.tgt_embedding = nn.Embedding(src_vocab, d_model), nn.Embedding(tgt_vocab, d_model)
        self.positional = SinusoidalPositionalEncoding(d_model, max_len=256, dropout=DROPOUT)
        self.transformer = nn.Transformer(d_model, num_heads, num_layers, num_layers, d_ff, DROPOUT, batch_first=True)
        self.output = nn.Linear(d_model, tgt_vocab, bias=False)

    def forward(self, src, src_padding_mask, tgt_in):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1], dtype=torch.bool)
        x = self.positional(self.src_embedding(src) * self.scale)
        y = self.positional(self.tgt_embedding(tgt_in) * self.scale)
        out = self.transformer(
            x,
            y,
            tgt_mask=causal,
            src_key_padding_mask=src_padding_mask,
            memory_key_padding_mask=src_padding_mask,
            tgt_is_causal=True,
        )
        return self.output(out)


def d2l_transformer(
    src_vocab: int, tgt_vocab: int, d_model: int, num_heads: int, num_layers: int, d_ff: int, dropout: float = DROPOUT
) -> nn.Module:
    """d2l's encoder, and a decoder of the d2l book's design (section 11.7) built from d2l's blocks."""
    from d2l import torch as d2l

    class DecoderBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention1 = d2l.MultiHeadAttention(d_model, num_heads, dropout)
            self.addnorm1 = d2l.AddNorm(d_model, dropout)
            self.attention2 = d2l.MultiHeadAttention(d_model, num_heads, dropout)
            self.addnorm2 = d2l.AddNorm(d_model, dropout)
            self.ffn = d2l.PositionWiseFFN(d_ff, d_model)
            self.addnorm3 = d2l.AddNorm(d_model, dropout)

        def forward(self, x, memory, enc_valid_lens):
            B, T, _ = x.shape
            dec_valid_lens = torch.arange(1, T + 1).repeat(B, 1)  # (B, T): position t sees positions 0..t
            y = self.addnorm1(x, self.attention1(x, x, x, dec_valid_lens))
            z = self.addnorm2(y, self.attention2(y, memory, memory, enc_valid_lens))
            return self.addnorm3(z, self.ffn(z))

    class D2LTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = d2l.TransformerEncoder(src_vocab, d_model, d_ff, num_heads, num_layers, dropout)
            self.embedding = nn.Embedding(tgt_vocab, d_model)
            self.pos_encoding = d2l.PositionalEncoding(d_model, dropout)
            self.blocks = nn.ModuleList(DecoderBlock() for _ in range(num_layers))
            self.dense = nn.LazyLinear(tgt_vocab)

        def forward(self, src, src_padding_mask, tgt_in):
            enc_valid_lens = (~src_padding_mask).sum(dim=1)
            memory = self.encoder(src, enc_valid_lens)
            y = self.pos_encoding(self.embedding(tgt_in) * math.sqrt(d_model))
            for block in self.blocks:
                y = block(y, memory, enc_valid_lens)
            return self.dense(y)

    return D2LTransformer()


# --- 1. training throughput ----------------------------------------------------------------------


def training_step(model: nn.Module, optimizer, batch, autocast: torch.dtype | None = None, loss=sequence_loss) -> float:
    """One step: forward, the label-smoothed loss, backward, clipping, Adam; returns the seconds of Adam's step.

    With ``autocast``, the forward pass runs in mixed precision, as the command line's loop runs it.
    """
    logits = teacher_forced_logits(model, batch, autocast)
    loss = loss(logits, batch.tgt_out, label_smoothing=0.1)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    start = time.perf_counter()
    optimizer.step()
    return time.perf_counter() - start


def one_pass(model: nn.Module, optimizer, batches) -> tuple[float, int]:
    tokens = 0
    start = time.perf_counter()
    for batch in batches:
        training_step(model, optimizer, batch)
        tokens += int((batch.tgt_out != 0).sum())
    return time.perf_counter() - start, tokens


def throughput(corpus, batches, repeats: int) -> dict[str, dict]:
    results = {}
    for label, shape in CONFIGS.items():
        sizes = (len(corpus.src_vocab), len(corpus.tgt_vocab))
        models = {}
        for name, build in (("ours", ours), ("d2l", d2l_transformer), ("torch", TorchTransformer)):
            torch.manual_seed(0)
            model = build(*sizes, **shape).train()
            model(batches[0].src, batches[0].src_padding_mask, batches[0].tgt_in)  # materialize d2l's lazy layers
            models[name] = (model, torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9))
            one_pass(*models[name], batches[:2])  # warm up
        rates: dict[str, list[float]] = {name: [] for name in models}
        for _ in range(repeats):
            for name, (model, optimizer) in models.items():  # interleaved: a change of load hits all three
                seconds, tokens = one_pass(model, optimizer, batches)
                rates[name].append(tokens / seconds)
        r = {name: statistics.median(v) for name, v in rates.items()}
        params = {name: sum(p.numel() for p in m.parameters()) for name, (m, _) in models.items()}
        print(f"\n[1] training throughput, {label}; parameters " + ", ".join(f"{n} {p:,}" for n, p in params.items()))
        for name in models:
            print(f"  {name:>6}: {r[name]:9.0f} target tokens/s")
        print(f"  ours / d2l   = {r['ours'] / r['d2l']:.2f}x    ours / torch = {r['ours'] / r['torch']:.2f}x")
        results[label] = {
            "tokens_per_second": {name: round(v) for name, v in r.items()},
            "parameters": params,
            "ours_over_d2l": round(r["ours"] / r["d2l"], 2),
            "ours_over_torch": round(r["ours"] / r["torch"], 2),
        }
    return results


# --- 2. the key-value cache ----------------------------------------------------------------------


@torch.no_grad()
def generate(model: Transformer, src, src_padding_mask, n_tokens: int, cache: bool) -> float:
    start = time.perf_counter()
    state = model.start(src, src_padding_mask, cache=cache)
    tokens = torch.full((src.shape[0],), 1, dtype=torch.long)
    for _ in range(n_tokens):
        logits, state = model.step(tokens, state)
        tokens = logits.argmax(dim=-1)
    return time.perf_counter() - start


def kv_cache(corpus, repeats: int, n_tokens: int = 64) -> dict[str, dict[str, float]]:
    results = {}
    test = next(iter(corpus.batches("test", batch_size=32, shuffle=False, bucket=False)))
    for label, shape in CONFIGS.items():
        torch.manual_seed(0)
        model = ours(len(corpus.src_vocab), len(corpus.tgt_vocab), **shape).eval()
        print(f"\n[2] key-value cache, {label}: {n_tokens} generated tokens")
        for batch_size in (1, 32):
            src, mask = test.src[:batch_size], test.src_padding_mask[:batch_size]
            generate(model, src, mask, 4, True)
            times = {True: [], False: []}
            for _ in range(repeats):
                for cache in (True, False):
                    times[cache].append(generate(model, src, mask, n_tokens, cache))
            cached, uncached = statistics.median(times[True]), statistics.median(times[False])
            results[f"{label}, batch {batch_size}"] = {
                "cached_ms": round(1000 * cached, 1),
                "uncached_ms": round(1000 * uncached, 1),
                "speedup": round(uncached / cached, 2),
            }
            print(
                f"  batch {batch_size:>2}: cached {1000 * cached:8.1f} ms, uncached "
                f"{1000 * uncached:8.1f} ms, speed-up {uncached / cached:.1f}x"
            )
    return results


# --- 3. beam search ------------------------------------------------------------------------------


def beam_times(corpus, epochs: int, repeats: int) -> dict[str, dict[str, float]]:
    torch.manual_seed(0)
    shape = next(iter(CONFIGS.values()))
    model = ours(len(corpus.src_vocab), len(corpus.tgt_vocab), **shape)
    optimizer, scheduler = paper_optimizer(model, warmup=200, factor=2.0)
    train(
        model,
        corpus.batches("train", batch_size=BATCH, seed=0),
        epochs=epochs,
        optimizer=optimizer,
        scheduler=scheduler,
        label_smoothing=0.1,
        plot=False,
        verbose=False,
    )
    test = corpus.test[:200]
    print(
        f"\n[3] decoding {len(test)} test sentences with the chapter's "
        f"model trained {epochs} epochs (seconds per sentence)"
    )
    results = {}
    for batch_size in (64, 1):
        batches = list(corpus.batches("test", batch_size=batch_size, shuffle=False, bucket=False))
        batches = batches[: max(1, len(test) // batch_size)]
        n = sum(b.src.shape[0] for b in batches)
        runs = {
            "greedy": lambda b: greedy_decode(model, b.src, b.src_padding_mask, max_len=b.src.shape[1] + 50),
            "beam k=1": lambda b: beam_search(model, b.src, b.src_padding_mask, beam_size=1),
            "beam k=4": lambda b: beam_search(model, b.src, b.src_padding_mask, beam_size=4),
        }
        times = {name: [] for name in runs}
        for _ in range(repeats):
            for name, run in runs.items():
                start = time.perf_counter()
                for b in batches:
                    run(b)
                times[name].append((time.perf_counter() - start) / n)
        med = {name: statistics.median(t) for name, t in times.items()}
        line = ", ".join(f"{name} {1000 * t:6.2f} ms" for name, t in med.items())
        print(f"  batches of {batch_size:>2}: {line}; beam 4 / greedy {med['beam k=4'] / med['greedy']:.1f}x")
        results[f"batches of {batch_size}"] = {f"{name} ms per sentence": round(1000 * t, 2) for name, t in med.items()}
    return results


# --- 4. Adam's step: a loop over the parameters, or fused --------------------------------------------


def default_model_and_batch() -> tuple[dict, SimpleNamespace, int]:
    """The command line's default model configuration (subword vocabularies of the default size), a batch of
    48 pairs of 12 and 14 tokens, and the warm-up."""
    from attnbook.translate.model import model_config
    from attnbook.translate.settings import RunSettings

    settings = RunSettings()
    vocab = settings.pieces + 3  # as in a run folder: the pieces and three more reserved tokens
    config = model_config(settings, vocab, vocab)
    batch_size, src_len, tgt_len = 48, 12, 14
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, vocab, (batch_size, src_len), generator=generator)
    tgt = torch.randint(4, vocab, (batch_size, tgt_len + 1), generator=generator)
    batch = SimpleNamespace(
        src=src,
        src_padding_mask=padding_mask(torch.full((batch_size,), src_len), src_len),  # no padding
        tgt_in=tgt[:, :-1],
        tgt_out=tgt[:, 1:],
    )
    return config, batch, settings.warmup


def interleaved_steps(runs: dict, batch, n: int) -> dict[str, dict[str, float]]:
    """Medians, in seconds, of ``n`` training steps of each run (model, optimizer, autocast[, loss]), taken in turn."""
    for model, optimizer, autocast, *loss in runs.values():
        training_step(model, optimizer, batch, autocast, *loss)  # warm up
    times: dict[str, dict[str, list[float]]] = {name: {"optimizer": [], "step": []} for name in runs}
    for _ in range(n):
        for name, (model, optimizer, autocast, *loss) in runs.items():  # interleaved: a change of load hits all
            start = time.perf_counter()
            times[name]["optimizer"].append(training_step(model, optimizer, batch, autocast, *loss))
            times[name]["step"].append(time.perf_counter() - start)
    return {name: {k: statistics.median(v) for k, v in t.items()} for name, t in times.items()}


def optimizer_step(repeats: int, steps: int = 20) -> dict[str, dict[str, float]]:
    from attnbook.translate.model import build_model

    config, batch, warmup = default_model_and_batch()
    runs = {}
    for name, fused in (("loop", False), ("fused", True)):
        torch.manual_seed(0)
        model = build_model("transformer", config).train()
        make = partial(fused_paper_optimizer, d_model=config["d_model"]) if fused else paper_optimizer
        runs[name] = (model, make(model, warmup=warmup)[0], None)
    medians = interleaved_steps(runs, batch, repeats * steps)
    params = sum(p.numel() for p in runs["loop"][0].parameters())
    print(f"\n[4] Adam's step, the command line's default model ({params:,} parameters); medians of {repeats * steps}")
    for name, m in medians.items():
        print(f"  {name:>6}: optimizer {m['optimizer'] * 1e3:6.1f} ms of a {m['step'] * 1e3:6.1f} ms training step")
    loop, fused = medians["loop"], medians["fused"]
    print(
        f"  loop / fused: optimizer {loop['optimizer'] / fused['optimizer']:.2f}x, "
        f"training step {loop['step'] / fused['step']:.2f}x"
    )
    return {
        "parameters": params,
        **{f"{name}_ms": {k: round(v * 1e3, 2) for k, v in m.items()} for name, m in medians.items()},
        "loop_over_fused": {k: round(loop[k] / fused[k], 2) for k in loop},
    }


def precision_step(repeats: int, steps: int = 20) -> dict:
    """Whole training steps of the command line's default model in float32 and in bfloat16 mixed precision."""
    from attnbook.translate.model import build_model, native_bfloat16

    native = native_bfloat16(torch.device("cpu"))
    n = repeats * steps if native else max(1, repeats)  # emulated bfloat16 is many times slower: a few steps tell
    config, batch, warmup = default_model_and_batch()
    runs = {}
    for name, autocast in (("float32", None), ("bfloat16", torch.bfloat16)):
        torch.manual_seed(0)
        model = build_model("transformer", config).train()
        runs[name] = (model, fused_paper_optimizer(model, d_model=config["d_model"], warmup=warmup)[0], autocast)
    medians = interleaved_steps(runs, batch, n)
    plain, mixed = medians["float32"]["step"], medians["bfloat16"]["step"]
    print(
        f"\n[5] precision, the command line's default model; bfloat16 instructions: {'yes' if native else 'no'}; "
        f"medians of {n}\n  float32 {plain * 1e3:6.1f} ms, bfloat16 mixed precision {mixed * 1e3:6.1f} ms "
        f"a training step: float32 / bfloat16 {plain / mixed:.2f}x"
    )
    return {
        "native_bfloat16": native,
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA"),  # a cap makes a processor without the instructions
        "steps": n,
        "float32_ms": round(plain * 1e3, 2),
        "bfloat16_ms": round(mixed * 1e3, 2),
        "float32_over_bfloat16": round(plain / mixed, 2),
    }


def run_step(repeats: int, steps: int = 20, dropout: float = 0.2) -> dict:
    """Training steps of the default model with dropout as the chapters build it and as the command line does."""
    from attnbook.translate.model import build_model, native_bfloat16

    config, batch, warmup = default_model_and_batch()
    config = {**config, "dropout": dropout}
    precisions = {"float32": None, **({"bfloat16": torch.bfloat16} if native_bfloat16(torch.device("cpu")) else {})}
    results = {"dropout": dropout}
    print(f"\n[6] the run's step, the default model with dropout {dropout}; medians of {repeats * steps}")
    for label, autocast in precisions.items():
        runs = {}
        for name, (make, loss) in {
            "chapters": (lambda: Transformer(TransformerConfig(**config)), sequence_loss),
            "command line": (lambda: build_model("transformer", config), fused_sequence_loss),
        }.items():
            torch.manual_seed(0)
            model = make().train()
            runs[name] = (
                model,
                fused_paper_optimizer(model, d_model=config["d_model"], warmup=warmup)[0],
                autocast,
                loss,
            )
        medians = interleaved_steps(runs, batch, repeats * steps)
        chapters, ours = medians["chapters"]["step"], medians["command line"]["step"]
        print(
            f"  {label:>8}: as the chapters {chapters * 1e3:6.1f} ms, as the command line {ours * 1e3:6.1f} ms "
            f"a training step: {chapters / ours:.2f}x"
        )
        results[label] = {
            "chapters_ms": round(chapters * 1e3, 2),
            "command_line_ms": round(ours * 1e3, 2),
            "chapters_over_command_line": round(chapters / ours, 2),
        }
    return results


# --- 7. The command line's step as it was and as it is; its model FLOP utilisation -----------------------


def _step_batches(device: torch.device, batch_tokens: list[int]) -> tuple[dict, dict, torch.dtype | None]:
    """The model and the batches part 7 times: the CPU's default model and batch; on a GPU, the paper's base model
    (as ``train`` builds it there) and batches of ``batch_tokens`` padded tokens of pairs 24 and 26 tokens long."""
    from attnbook.data import Batch
    from attnbook.translate.model import GPU_BATCH_TOKENS, GPU_MODEL, model_config, native_bfloat16
    from attnbook.translate.settings import RunSettings

    autocast = torch.bfloat16 if native_bfloat16(device) else None
    if device.type == "cpu":
        config, batch, _ = default_model_and_batch()
        return config, {"48 pairs of 12 and 14 tokens": batch}, autocast
    settings = RunSettings(**GPU_MODEL, dropout=0.1)
    vocab = settings.pieces + 3
    config = model_config(settings, vocab, vocab)
    generator = torch.Generator().manual_seed(0)
    batches = {}
    for n in batch_tokens or [GPU_BATCH_TOKENS]:
        size, src_len, tgt_len = max(1, n // 26), 24, 26
        src = torch.randint(4, vocab, (size, src_len), generator=generator)
        tgt = torch.randint(4, vocab, (size, tgt_len + 1), generator=generator)
        src_lengths = torch.randint(src_len // 2, src_len + 1, (size,), generator=generator)
        src_lengths[0] = src_len
        tgt_lengths = torch.full((size,), tgt_len)
        batch = Batch(
            src=src,
            src_lengths=src_lengths,
            src_padding_mask=padding_mask(src_lengths, src_len),  # padded sources: the masked attention kernels
            tgt_in=tgt[:, :-1],
            tgt_out=tgt[:, 1:],
            tgt_padding_mask=padding_mask(tgt_lengths, tgt_len),
            tgt_lengths=tgt_lengths,
        )
        batches[f"{size} pairs of {src_len} and {tgt_len} tokens ({n:,} tokens a batch)"] = batch.to(device)
    return config, batches, autocast


def loop_step(
    repeats: int, steps: int = 20, device: str = "cpu", batch_tokens: list[int] | None = None, compiled: bool = False
) -> dict:
    """Whole training steps of the command line's model as its loop took them before and takes them now.

    Before: the loss checked and averaged on the device, then read back, with
    its count of tokens, at every step (``float(loss)``, a finiteness check);
    now: :func:`attnbook.translate.train.training_step`, the loss summed
    unchecked and scaled by the count the host already has, the batch's values
    unchecked, nothing read back; with ``compiled``, also that step with the
    model compiled (``train --compile``). On a CPU reading back costs little, so
    the first two should take about as long; on a GPU each read is a wait, and
    the script also lists where one step of "now" makes the host wait (none is
    the goal). Then the model FLOP utilisation of each: the step's operations
    counted by PyTorch's flop counter, over a large matrix product's rate
    measured here in the step's precision (``attnbook.translate.utilisation``).
    On a GPU the model is the paper's base model, as ``train`` builds it there,
    and the batches of each of ``batch_tokens``; the steps of a round run back
    to back, the clock read after the device has finished them.
    """
    from attnbook.translate.model import build_model
    from attnbook.translate.settings import RunSettings
    from attnbook.translate.train import training_step
    from attnbook.translate.utilisation import count_flops, describe_utilisation, host_waits, peak_flops

    device = torch.device(device)
    gpu = device.type == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    config, batches, autocast = _step_batches(device, batch_tokens or [])
    label = "bfloat16 mixed precision" if autocast else "float32"
    peak = peak_flops(device, autocast or torch.float32)
    results = {"device": torch.cuda.get_device_name(device) if gpu else "cpu", "precision": label, "batches": {}}
    print(
        f"\n[7] the command line's step on {results['device']}, {label}; "
        f"a large matrix product: {peak / 1e9:,.0f} GFLOP/s"
    )
    settings = RunSettings(label_smoothing=0.1, clip=1.0)
    for what, batch in batches.items():
        n_tokens = int((batch.tgt_out != 0).sum())

        def before(model, forward, optimizer, batch=batch):
            loss = fused_sequence_loss(teacher_forced_logits(forward, batch, autocast), batch.tgt_out, 0, 0.1)
            if not torch.isfinite(loss):
                raise FloatingPointError("the loss is not finite")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            return float(loss.detach()), int((batch.tgt_out != 0).sum())

        def now(model, forward, optimizer, batch=batch, n_tokens=n_tokens):
            training_step(forward, model, optimizer, batch, n_tokens, settings, autocast)

        runs = {}
        for name, step in (("before", before), ("now", now), *((("compiled", now),) if compiled else ())):
            torch.manual_seed(0)
            model = build_model("transformer", config).to(device).train()
            forward = torch.compile(model, dynamic=True) if name == "compiled" else model
            runs[name] = (model, forward, fused_paper_optimizer(model, d_model=config["d_model"], warmup=4000)[0], step)
        compile_seconds = None
        for name, (model, forward, optimizer, step) in runs.items():  # warm up (and compile)
            start = time.perf_counter()
            for _ in range(3):
                step(model, forward, optimizer)
            sync()
            if name == "compiled":
                compile_seconds = time.perf_counter() - start
        rounds = steps if not gpu else max(3, repeats)
        per_round = 1 if not gpu else steps
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeats * rounds if not gpu else rounds):
            for name, (model, forward, optimizer, step) in runs.items():  # interleaved: a change of load hits all
                sync()
                start = time.perf_counter()
                for _ in range(per_round):
                    step(model, forward, optimizer)
                sync()
                times[name].append((time.perf_counter() - start) / per_round)
        med = {name: statistics.median(t) for name, t in times.items()}
        model, forward, optimizer, step = runs["now"]
        flops = count_flops(lambda: step(model, model, optimizer))
        waits = host_waits(lambda: step(model, model, optimizer)) if gpu else None
        entry = {
            "target_tokens": n_tokens,
            "flops_per_step": flops,
            "ms": {name: round(m * 1e3, 2) for name, m in med.items()},
            "target_tokens_per_second": {name: round(n_tokens / m) for name, m in med.items()},
            "model_flop_utilisation": {},
            "before_over_now": round(med["before"] / med["now"], 3),
        }
        print(f"  {what}: {flops / n_tokens / 1e6:,.1f} MFLOP a target token; medians of {len(times['now'])}")
        for name, m in med.items():
            share, line = describe_utilisation(flops / n_tokens, n_tokens / m, peak)
            entry["model_flop_utilisation"][name] = round(share, 4)
            print(f"    {name:>8}: {m * 1e3:7.1f} ms a step, {n_tokens / m:10,.0f} target tokens/s; {line}")
        print(f"    before / now {med['before'] / med['now']:.2f}x", end="")
        if compiled:
            entry["now_over_compiled"] = round(med["now"] / med["compiled"], 3)
            entry["compile_and_warm_up_seconds"] = round(compile_seconds, 1)
            print(
                f", now / compiled {med['now'] / med['compiled']:.2f}x (compiling took {compile_seconds:.0f} s)", end=""
            )
        print()
        if waits is not None:
            entry["host_waits_in_a_step"] = waits
            print(f"    where a step makes the host wait for the GPU: {', '.join(waits) or 'nowhere'}")
        results["batches"][what] = entry
    results["peak_flops"] = round(peak)
    return results


PARTS = ["throughput", "cache", "beam", "optimizer", "precision", "step", "loop"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--train-epochs", type=int, default=6)
    parser.add_argument("--only", choices=PARTS, nargs="*")
    parser.add_argument("--device", default="cpu", help="part 7 (loop) on this device: cpu or cuda")
    parser.add_argument(
        "--batch-tokens", type=int, nargs="*", help="part 7 on a GPU: padded tokens a batch (default: what train uses)"
    )
    parser.add_argument("--compile", action="store_true", help="part 7: the step compiled too (train --compile)")
    args = parser.parse_args(argv)
    record = Report(__file__, argv)
    torch.set_num_threads(args.threads)
    corpus = load_corpus(n_pairs=N_PAIRS, seed=0, max_len=MAX_LEN)
    batches = [b for _, b in zip(range(args.batches), corpus.batches("train", batch_size=BATCH, seed=0))]
    n_tokens = sum(int((b.tgt_out != 0).sum()) for b in batches)
    print(
        f"{corpus}; {len(batches)} batches of {BATCH} pairs ({n_tokens} "
        f"target tokens); float32, {args.threads} threads; "
        f"medians of {args.repeats} runs"
    )
    record.figure(
        "setup",
        {
            "pairs": N_PAIRS,
            "max_len": MAX_LEN,
            "batches": len(batches),
            "batch_size": BATCH,
            "target_tokens": n_tokens,
            "repeats": args.repeats,
            "train_epochs": args.train_epochs,
        },
    )
    only = set(args.only or PARTS)
    if "throughput" in only:
        record.figure("throughput", throughput(corpus, batches, args.repeats))
    if "cache" in only:
        record.figure("kv_cache", kv_cache(corpus, args.repeats))
    if "beam" in only:
        record.figure("decoding", beam_times(corpus, args.train_epochs, max(1, args.repeats // 2)))
    if "optimizer" in only:
        record.figure("optimizer", optimizer_step(args.repeats))
    if "precision" in only:
        record.figure("precision", precision_step(args.repeats))
    if "step" in only:
        record.figure("step", run_step(args.repeats))
    if "loop" in only:
        record.figure(
            "loop", loop_step(args.repeats, device=args.device, batch_tokens=args.batch_tokens, compiled=args.compile)
        )
    return record.finish()


if __name__ == "__main__":
    raise SystemExit(main())
