"""Short training runs of every kind of model the chapters train, printed as JSON.

``python tests/portability_probe.py float64`` (or ``float32``) trains, from fixed
seeds, each kind of model that a chapter trains, for a few dozen steps with the
pieces the chapters use (Adam, the warm-up schedule, label smoothing, dropout,
gradient clipping, greedy decoding and beam search), and prints what the
chapters print of such runs: the loss of every step, the validation loss,
statistics of the trained weights, and the decoded tokens.

``tests/test_portability.py`` runs it twice, on this machine's own CPU kernel
path and on another one (:data:`OTHER_CPU`), and compares: in float64 the two
runs must agree far beyond the three significant digits the chapters print; in
float32 (the quicker kinds only, in the same process: ``--and-float32 NAME``) they must differ, which shows that the
other kernel path really is another path (the comparison could fail) and that float64 is what makes the
difference.

``python tests/portability_probe.py --record book/results/portability.json``
does what the test does, every kind's runs on both paths in both dtypes (four processes), and writes
what it found: for each kind of model and each dtype, the largest relative
difference between the two paths (:func:`largest_drift`) and whether the
decoded tokens agree, with the machine it ran on. The page on reproducibility
quotes it. About a minute on two cores.

:data:`COVERED` lists the library's modules that these runs train;
``tests/test_portability.py`` checks that every notebook that trains uses no
other module of the library, so a new kind of model in a chapter needs a run here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch import nn

from notebook_index import OTHER_CPU  # another CPU's kernel path (imported by the tests from here too)

#: The library modules (``attnbook.<module>.<name>``) whose training these runs exercise.
COVERED = {
    "attnbook.rnn": {
        "Seq2Seq",
        "GRUEncoder",
        "GRUDecoder",
        "PlainDecoder",
        "AttentionDecoder",
    },  # GRUDecoder: both decoders
    "attnbook.attention": {"MultiHeadAttention", "AdditiveAttention", "DotProductAttention"},
    "attnbook.positional": {"SinusoidalPositionalEncoding", "LearnedPositionalEncoding"},
    "attnbook.transformer": {"Transformer", "EncoderLayer", "DecoderLayer", "PositionwiseFFN", "AddNorm"},
    "attnbook.decode": {"Uncached"},
    "attnbook.fastformer": {
        "FastSelfAttention",
        "FastformerEncoder",
        "SoftmaxEncoder",
        "AttentionPooling",
        "LinearSelfAttention",
        "LinformerSelfAttention",
    },
    "attnbook.decoder_only": {"DecoderOnlyTransformer", "DecoderOnlyLayer", "CausalSelfAttention", "FeedForward"},
}

STEPS_PER_RUN = 24


def _weights(model: nn.Module) -> dict[str, float]:
    """Statistics of the trained weights (no sum with cancellations: each is as precise as the weights)."""
    flat = torch.cat([p.detach().flatten().double() for p in model.parameters()])
    return {
        "norm": flat.norm().item(),
        "mean |w|": flat.abs().mean().item(),
        "largest |w|": flat.abs().max().item(),
        "first": flat[0].item(),
        "last": flat[-1].item(),
    }


def _translation_run(model: nn.Module, corpus, *, label_smoothing: float, recipe: bool) -> dict:
    from attnbook.decode import Uncached, translate
    from attnbook.train import paper_optimizer, train

    batches = corpus.batches("train", batch_size=16, seed=0)
    optimizer, scheduler = paper_optimizer(model, warmup=8, factor=2.0) if recipe else (None, None)
    losses: list[float] = []
    history = train(
        model,
        batches,
        corpus.batches("valid", batch_size=64),
        epochs=100,
        lr=3e-3,
        label_smoothing=label_smoothing,
        optimizer=optimizer,
        scheduler=scheduler,
        plot=False,
        verbose=False,
        on_step=lambda step: (losses.append(step.loss), len(losses) >= STEPS_PER_RUN)[1],
    )
    model.eval()
    sources = [p.src_tokens for p in corpus.valid[:8]]
    with torch.no_grad():
        greedy = translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, max_len=20)
        beam = translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, beam_size=3, max_len=20)
        uncached = translate(Uncached(model), sources, corpus.src_vocab, corpus.tgt_vocab, max_len=20)
    return {
        "losses": losses,
        "valid_loss": history.final_valid_loss,
        "weights": _weights(model),
        "greedy": [" ".join(t) for t in greedy],
        "beam": [" ".join(t) for t in beam],
        "uncached": [" ".join(t) for t in uncached],
    }


def _encoder_run(kind: str, causal: bool = False) -> dict:
    """Chapter 9: a Fastformer (or softmax) encoder and attention pooling, trained to classify sequences."""
    from attnbook.fastformer import AttentionPooling, FastformerEncoder, SoftmaxEncoder
    from attnbook.positional import SinusoidalPositionalEncoding

    torch.manual_seed(0)
    embed, positions = nn.Embedding(20, 32), SinusoidalPositionalEncoding(32, max_len=64)
    stack = FastformerEncoder if kind == "Fastformer" else SoftmaxEncoder
    encoder = stack(32, 4, 2, d_ff=64, dropout=0.1)
    pool, out = AttentionPooling(32), nn.Linear(32, 2)
    model = nn.ModuleList([embed, positions, encoder, pool, out])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS_PER_RUN):
        ids = torch.randint(1, 20, (16, 24), generator=data)
        lengths = torch.randint(8, 25, (16,), generator=data)
        padding = torch.arange(24)[None, :] >= lengths[:, None]
        labels = (ids[:, :8] > 10).sum(dim=1).remainder(2)
        h = encoder(positions(embed(ids)), padding, is_causal=causal)
        loss = nn.functional.cross_entropy(out(pool(h, padding)), labels)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses, "weights": _weights(model)}


def _efficient_attention_run(kind: str) -> dict:
    """Chapter 9: kernelized (linear) or low-rank (Linformer) attention, a residual LayerNorm, trained to classify."""
    from attnbook.fastformer import AttentionPooling, LinearSelfAttention, LinformerSelfAttention

    torch.manual_seed(0)
    layer = LinearSelfAttention(32, 4) if kind == "linear" else LinformerSelfAttention(32, 4, max_len=24, k=8)
    model = nn.ModuleList([nn.Embedding(20, 32), layer, nn.LayerNorm(32), AttentionPooling(32), nn.Linear(32, 2)])
    embed, _, norm, pool, out = model
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS_PER_RUN):
        ids = torch.randint(1, 20, (16, 24), generator=data)
        lengths = torch.randint(8, 25, (16,), generator=data)
        padding = torch.arange(24)[None, :] >= lengths[:, None]
        labels = (ids[:, :8] > 10).sum(dim=1).remainder(2)
        h = embed(ids)
        h = norm(h + layer(h, padding))
        loss = nn.functional.cross_entropy(out(pool(h, padding)), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses, "weights": _weights(model)}


def _attention_head_run(kind: str) -> dict:
    """Chapters 3, 5 and 6: attention over learned positions, trained to report the previous token.

    ``kind`` is ``"multi-head"`` (one :class:`MultiHeadAttention` layer, causal) or ``"dot-product"``
    (:class:`DotProductAttention` over projected queries, keys and values, with the causal mask).
    """
    from attnbook.attention import DotProductAttention, MultiHeadAttention
    from attnbook.masks import causal_mask
    from attnbook.positional import LearnedPositionalEncoding

    torch.manual_seed(0)
    mixer = MultiHeadAttention(32, 4) if kind == "multi-head" else nn.Linear(32, 96)
    model = nn.ModuleList([nn.Embedding(10, 32), LearnedPositionalEncoding(32, max_len=16), mixer, nn.Linear(32, 10)])
    embed, position, _, readout = model
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS_PER_RUN):
        tokens = torch.randint(0, 10, (32, 12), generator=data)
        x = position(embed(tokens))
        if kind == "multi-head":
            mixed = mixer(x, x, x, is_causal=True)
        else:
            mixed = DotProductAttention()(*mixer(x).chunk(3, dim=-1), causal_mask(12)[None])[0]
        logits = readout(mixed)[:, 1:]
        loss = nn.functional.cross_entropy(logits.reshape(-1, 10), tokens[:, :-1].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses, "weights": _weights(model)}


def _language_model_run(**changes) -> dict:
    """Chapter 10: a decoder-only language model trained on next tokens, then greedy generation with its cache."""
    from attnbook.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer, generate, next_token_loss

    torch.manual_seed(0)
    config = DecoderOnlyConfig(20, d_model=32, num_heads=4, num_layers=2, d_ff=64, max_len=32, **changes)
    model = DecoderOnlyTransformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS_PER_RUN):
        start = torch.randint(1, 20, (16, 1), generator=data)
        tokens = (start + torch.arange(24)).remainder(19) + 1  # counting: the next token follows from the last
        loss = next_token_loss(model(tokens), tokens)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    prompt = torch.tensor([[3, 4, 5], [11, 12, 13]])
    greedy = generate(model, prompt, 8).tolist()
    uncached = generate(model, prompt, 8, cache=False).tolist()
    return {"losses": losses, "weights": _weights(model), "greedy": greedy, "uncached": uncached}


def runs(names=None) -> dict[str, dict]:
    """Every kind of model's run (only those of ``names``, a collection of the names below, if given)."""
    from attnbook.data import load_corpus
    from attnbook.rnn import Seq2Seq, Seq2SeqConfig
    from attnbook.transformer import Transformer, TransformerConfig

    corpus = load_corpus(n_pairs=500, seed=0, max_len=10)
    sizes = dict(src_vocab_size=len(corpus.src_vocab), tgt_vocab_size=len(corpus.tgt_vocab))

    def translation(make, label_smoothing: float, recipe: bool):
        def run():
            torch.manual_seed(0)
            return _translation_run(make(), corpus, label_smoothing=label_smoothing, recipe=recipe)

        return run

    kinds = {
        "GRU encoder-decoder (chapter 2)": translation(
            lambda: Seq2Seq(Seq2SeqConfig(**sizes, embed_size=32, hidden_size=64, num_layers=2, dropout=0.1)),
            label_smoothing=0.0,
            recipe=False,
        ),
        "attention RNN (chapters 3 and 8)": translation(
            lambda: Seq2Seq(Seq2SeqConfig(**sizes, embed_size=32, hidden_size=64, attention=True, bidirectional=True)),
            label_smoothing=0.1,
            recipe=False,
        ),
        "Transformer (chapters 7 and 8)": translation(
            lambda: Transformer(
                TransformerConfig(**sizes, d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.1, max_len=64)
            ),
            label_smoothing=0.1,
            recipe=True,
        ),
        "multi-head attention with learned positions (chapters 5 and 6)": lambda: _attention_head_run("multi-head"),
        "dot-product attention (chapter 3)": lambda: _attention_head_run("dot-product"),
        "Fastformer (chapter 9)": lambda: _encoder_run("Fastformer"),
        "causal Fastformer (chapter 9)": lambda: _encoder_run("Fastformer", causal=True),
        "softmax encoder (chapter 9)": lambda: _encoder_run("softmax"),
        "linear attention (chapter 9)": lambda: _efficient_attention_run("linear"),
        "Linformer (chapter 9)": lambda: _efficient_attention_run("Linformer"),
        "decoder-only language model (chapter 10)": _language_model_run,
        "decoder-only, rotary and grouped-query (chapter 10)": lambda: _language_model_run(
            positions="rotary", num_kv_heads=2, activation="relu"
        ),
    }
    unknown = set(names or ()) - kinds.keys()
    if unknown:
        raise ValueError(f"no run is called {sorted(unknown)}; the runs are {list(kinds)}")
    return {name: run() for name, run in kinds.items() if names is None or name in names}


# --- Comparing two runs ----------------------------------------------------------------------------


def figures(run: dict) -> dict[str, float]:
    """Every number of one run, by name."""
    found = {f"loss at step {i + 1}": x for i, x in enumerate(run["losses"])}
    found.update({f"weights' {name}": x for name, x in run["weights"].items()})
    if run.get("valid_loss") is not None:
        found["validation loss"] = run["valid_loss"]
    return found


def largest_drift(here: dict, other: dict) -> tuple[float, str]:
    """The largest relative difference between two runs' figures, and which figure it is.

    A single weight is compared relative to the weights' mean magnitude (it may itself be near zero).
    """
    scale = min(here["weights"]["mean |w|"], other["weights"]["mean |w|"])

    def relative(a: float, b: float) -> float:
        return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b), scale)

    a, b = figures(here), figures(other)
    return max((relative(a[k], b[k]), k) for k in a)


DECODINGS = ("greedy", "beam", "uncached")


# --- Recording what the test compares -----------------------------------------------------------


def probe_in_subprocess(dtype: str, env_changes: dict[str, str]) -> dict:
    """The probe's runs in ``dtype``, in a fresh process whose environment has ``env_changes``."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "PYTHONHASHSEED": "0", **env_changes}
    result = subprocess.run(
        [sys.executable, __file__, dtype], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    if result.returncode:
        raise RuntimeError(f"the probe failed ({dtype}, {env_changes or 'this path'}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def record(path: Path) -> dict:
    """Run the probe on both paths in both dtypes (two at a time) and write what differs to ``path``."""
    sys.path.insert(0, str(Path(__file__).parent))
    from machine import describe

    jobs = {
        (dtype, where): (dtype, {} if where == "here" else OTHER_CPU)
        for dtype in ("float64", "float32")
        for where in ("here", "other")
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(probe_in_subprocess, *args) for key, args in jobs.items()}
        probes = {key: future.result() for key, future in futures.items()}
    drift, figure, same_tokens = {}, {}, {}
    for name in probes["float64", "here"]["runs"]:
        for dtype in ("float64", "float32"):
            here, other = probes[dtype, "here"]["runs"][name], probes[dtype, "other"]["runs"][name]
            value, which = largest_drift(here, other)
            drift.setdefault(name, {})[dtype] = float(f"{value:.2g}")
            figure.setdefault(name, {})[dtype] = which
            if "greedy" in here:
                same_tokens.setdefault(name, {})[dtype] = all(here[d] == other[d] for d in DECODINGS)
    report = {
        "what": "each kind of model the chapters train, trained briefly from the same seeds on this machine's own "
        "CPU kernel path and on another CPU's, in float64 and in float32: the largest relative difference between "
        "the two paths among the losses of every step, the validation loss and statistics of the trained weights; "
        "and whether greedy, beam and uncached decoding wrote the same tokens on both paths",
        "command": "python tests/portability_probe.py --record " + str(path),
        "machine": describe(),
        "steps per run": STEPS_PER_RUN,
        "threads": 1,
        "kernel paths": {
            "here": {"environment": {}, "torch's own kernels": probes["float64", "here"]["capability"]},
            "other": {"environment": OTHER_CPU, "torch's own kernels": probes["float64", "other"]["capability"]},
        },
        "largest relative drift": drift,
        "largest over every model": {dtype: max(d[dtype] for d in drift.values()) for dtype in ("float64", "float32")},
        "smallest over every model": {dtype: min(d[dtype] for d in drift.values()) for dtype in ("float64", "float32")},
        "the figure that drifts most": figure,
        "same decoded tokens on both paths": same_tokens,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dtype", nargs="?", default="float64", choices=["float64", "float32"])
    parser.add_argument("--record", type=Path, metavar="JSON", help="run on both paths in both dtypes, write here")
    parser.add_argument("--only", action="append", metavar="NAME", help="only this kind of model's run (repeatable)")
    parser.add_argument(
        "--and-float32",
        action="append",
        metavar="NAME",
        help="after the float64 runs, this kind's run in float32 too, in the same process (repeatable); the JSON is "
        "then {dtype: report}",
    )
    args = parser.parse_args(argv)
    if args.and_float32 and args.dtype != "float64":
        parser.error("--and-float32 follows float64 runs: leave DTYPE float64")
    if args.record:
        report = record(args.record)
        for name, drifts in report["largest relative drift"].items():
            print(f"{name:<66} float64 {drifts['float64']:.1e}   float32 {drifts['float32']:.1e}")
        print(f"written to {args.record}")
        return 0
    torch.set_num_threads(1)
    reports = {}
    for name, only in {args.dtype: args.only, **({"float32": args.and_float32} if args.and_float32 else {})}.items():
        dtype = {"float64": torch.float64, "float32": torch.float32}[name]
        torch.set_default_dtype(dtype)
        reports[name] = {"capability": torch.backends.cpu.get_cpu_capability(), "dtype": str(dtype), "runs": runs(only)}
    json.dump(reports if args.and_float32 else reports[args.dtype], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
