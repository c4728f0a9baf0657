"""Which CPU kernels give different floating-point results on different CPUs? (not a timed test)

The stored outputs of the notebooks must reproduce on any CPU. PyTorch picks
its CPU kernels at run time: its own vectorized kernels (ATen) for the widest
instruction set the CPU offers, MKL's matrix products for the CPU it finds, and
oneDNN's kernels likewise. Three environment variables, read when torch is
first imported, let one machine take the paths that other machines take:

- ``ATEN_CPU_CAPABILITY`` = ``default`` | ``avx2`` | ``avx512`` (ARM has its own);
- ``MKL_CBWR`` = ``AUTO`` | ``COMPATIBLE`` | ``AVX2`` | ``AVX512`` (MKL's code path);
- ``ONEDNN_MAX_CPU_ISA`` = ``SSE41`` | ``AVX2`` | ``AVX512_CORE`` | ``ALL``.

This script finds which operations differ, in three steps, each run in a fresh
subprocess per kernel path:

1. ``record``: under the reference path, build chapter 3's attention
   encoder-decoder and chapter 5's two-head model, and take ONE training step
   (forward, loss, backward, gradient clipping, Adam) while a
   ``TorchDispatchMode`` records every ATen operation with its inputs and
   outputs;
2. ``replay``: under every other path, run each recorded operation again *on
   the recorded inputs* and compare its outputs bit for bit with the recorded
   ones, so that each difference is charged to the operation that makes it,
   not to the ones it propagates to;
3. ``train``: train chapter 3's attention model for a few hundred steps
   from the same seed under every path, in float32 and in float64, and report
   how far the parameters drift apart.

Random initialisation (``normal_``, ``uniform_``) is replayed from the same
generator state, so it is compared too.

Run it from the repository root (it starts about thirty subprocesses: a quarter
of an hour on a quiet 2-core machine, much longer on a busy one; paths that the
CPU cannot take are reported as such)::

    PYTHONPATH=src .venv/bin/python tests/benchmarks/probe_kernel_paths.py
    PYTHONPATH=src .venv/bin/python tests/benchmarks/probe_kernel_paths.py --dtype float64 --skip-train

The summary table lists, for each kernel path, the operations whose results
differ from the reference and the largest relative difference seen.

``--record book/results/kernel_paths.json`` runs steps 1 and 2 in float32 and
in float64 (about two minutes on two cores) and writes the table of each, with
the kernels each path really got and the machine; the page on reproducibility
quotes it. (How far whole training runs drift apart is recorded by
``tests/portability_probe.py --record``, for every kind of model.)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: The reference path (what setup() pinned before the course moved to float64), then the others.
REFERENCE = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
PATHS = {
    "aten=default": {"ATEN_CPU_CAPABILITY": "default"},
    "aten=avx512": {"ATEN_CPU_CAPABILITY": "avx512"},
    "mkl=AUTO": {"MKL_CBWR": "AUTO"},
    "mkl=COMPATIBLE": {"MKL_CBWR": "COMPATIBLE"},
    "mkl=AVX512": {"MKL_CBWR": "AVX512"},
    "onednn=SSE41": {"ONEDNN_MAX_CPU_ISA": "SSE41"},
    "onednn=AVX512_CORE": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
    "onednn=ALL": {"ONEDNN_MAX_CPU_ISA": "ALL"},
    "nothing pinned": {"ATEN_CPU_CAPABILITY": None, "MKL_CBWR": None, "ONEDNN_MAX_CPU_ISA": None},
}


# --- the two training steps -------------------------------------------------------------------


def _chapter3_step(torch):
    """One step of chapter 3's attention model (float32 or float64, whatever the default is)."""
    from attnbook.data import load_corpus
    from attnbook.rnn import Seq2Seq, Seq2SeqConfig
    from attnbook.train import sequence_loss

    corpus = load_corpus(n_pairs=4000, seed=0, max_len=25)
    batch = next(iter(corpus.batches("train", batch_size=16, seed=0)))
    torch.manual_seed(0)
    config = Seq2SeqConfig(len(corpus.src_vocab), len(corpus.tgt_vocab), embed_size=64, hidden_size=128, attention=True)
    model = Seq2Seq(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    loss = sequence_loss(model(batch.src, batch.src_padding_mask, batch.tgt_in), batch.tgt_out)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def _chapter5_step(torch):
    """One step of chapter 5's two-lookup model with two heads."""
    from torch import nn

    from attnbook.attention import MultiHeadAttention
    from attnbook.positional import LearnedPositionalEncoding

    torch.manual_seed(0)
    embed, position = nn.Embedding(10, 32), LearnedPositionalEncoding(32, max_len=12)
    attention, readout = MultiHeadAttention(32, 2), nn.Linear(32, 20)
    params = [p for m in (embed, position, attention, readout) for p in m.parameters()]
    optimizer = torch.optim.Adam(params, lr=3e-3)
    tokens = torch.randint(0, 10, (64, 12), generator=torch.Generator().manual_seed(1))
    targets = torch.stack([tokens.roll(1, dims=1), tokens.roll(2, dims=1)], dim=-1)
    x = position(embed(tokens))
    logits = readout(attention(x, x, x)).unflatten(-1, (2, 10))[:, 2:]
    loss = nn.functional.cross_entropy(logits.reshape(-1, 10), targets[:, 2:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


STEPS = {"ch03 attention GRU": _chapter3_step, "ch05 two heads": _chapter5_step}


# --- record and replay (run inside the subprocess) -------------------------------------------


def _op_table(torch):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    def clone(x):
        if isinstance(x, torch.memory_format):  # does not pickle: stored by name
            return ("memory_format", str(x).removeprefix("torch."))
        return x.detach().clone() if isinstance(x, torch.Tensor) else x

    class Recorder(TorchDispatchMode):
        def __init__(self, records):
            super().__init__()
            self.records = records

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func.namespace != "aten" or "empty" in str(func):  # profiler markers; uninitialised memory
                return func(*args, **kwargs)
            inputs = tree_map(clone, (args, kwargs))
            state = torch.get_rng_state()
            out = func(*args, **kwargs)
            self.records.append((str(func), inputs, tree_map(clone, out), state))
            return out

    return Recorder


def _resolve(torch, name):
    namespace, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


def _tensors(tree, torch):
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def child_record(out: Path, dtype: str) -> None:
    import torch

    from attnbook.notebook import setup

    setup(figures=False)
    torch.set_num_threads(1)
    torch.set_default_dtype(getattr(torch, dtype))
    Recorder = _op_table(torch)
    records = {}
    for name, step in STEPS.items():
        records[name] = []
        torch.manual_seed(0)
        with Recorder(records[name]):
            step(torch)
    torch.save(records, out)


def child_replay(recorded: Path, out: Path) -> None:
    import torch
    from torch.utils._pytree import tree_map

    from attnbook.notebook import setup

    setup(figures=False)
    torch.set_num_threads(1)
    records = torch.load(recorded, weights_only=False)
    report = {}
    for step_name, ops in records.items():
        per_op = collections.defaultdict(lambda: {"calls": 0, "differ": 0, "max_rel": 0.0})
        for name, (args, kwargs), expected, state in ops:
            func = _resolve(torch, name)
            args, kwargs = tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, (args, kwargs))
            kwargs = {
                k: getattr(torch, v[1]) if isinstance(v, tuple) and v[:1] == ("memory_format",) else v
                for k, v in kwargs.items()
            }
            torch.set_rng_state(state)
            got = func(*args, **kwargs)
            if name.endswith("_.default") or "_foreach" in name:  # in place: the result is in the inputs
                got = (got, args)
                expected_t = _tensors(expected, torch)
                got_t = _tensors(got, torch)[: len(expected_t)]
            else:
                expected_t, got_t = _tensors(expected, torch), _tensors(got, torch)
            entry = per_op[name]
            entry["calls"] += 1
            for e, g in zip(expected_t, got_t):
                if not e.is_floating_point() or e.shape != g.shape:
                    continue
                if not torch.equal(e, g):
                    entry["differ"] += 1
                    scale = e.abs().max().item() or 1.0
                    entry["max_rel"] = max(entry["max_rel"], (e - g).abs().max().item() / scale)
                    break
        report[step_name] = dict(per_op)
    out.write_text(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(), "steps": report}))


def child_train(out: Path, dtype: str, steps: int) -> None:
    import torch

    from attnbook.data import load_corpus
    from attnbook.notebook import setup
    from attnbook.rnn import Seq2Seq, Seq2SeqConfig
    from attnbook.train import sequence_loss

    setup(figures=False)
    torch.set_num_threads(1)
    torch.set_default_dtype(getattr(torch, dtype))
    corpus = load_corpus(n_pairs=4000, seed=0, max_len=25)
    torch.manual_seed(0)
    model = Seq2Seq(
        Seq2SeqConfig(len(corpus.src_vocab), len(corpus.tgt_vocab), embed_size=64, hidden_size=128, attention=True)
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    done = 0
    while done < steps:
        for batch in corpus.batches("train", batch_size=64, seed=done):
            loss = sequence_loss(model(batch.src, batch.src_padding_mask, batch.tgt_in), batch.tgt_out)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            done += 1
            if done == steps:
                break
    flat = torch.cat([p.detach().flatten().double() for p in model.parameters()])
    torch.save({"params": flat, "loss": loss.item()}, out)


# --- the driver ------------------------------------------------------------------------------


def _environment(changes: dict) -> dict:
    env = dict(os.environ)
    for key in REFERENCE:
        env.pop(key, None)
    settings = {**REFERENCE, **changes}
    for key, value in settings.items():
        if value is not None:
            env[key] = value
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def _run(mode: str, changes: dict, *args: str) -> None:
    cmd = [sys.executable, __file__, "--child", mode, *args]
    result = subprocess.run(cmd, env=_environment(changes), capture_output=True, text=True)
    if result.returncode:
        how = f"killed by signal {-result.returncode}" if result.returncode < 0 else f"exit status {result.returncode}"
        raise RuntimeError(f"{mode} under {changes} failed ({how}):\n{result.stderr[-2000:]}")


def compare_paths(dtype: str, folder: Path) -> dict:
    """Record one step of each model on the reference path, replay it on every other path; what differs.

    Returns ``{"differing": {(step, op): {path: (calls that differ, calls, largest relative difference)}},
    "capability": {path: torch's own kernels there}, "failed": {path: why}}``.
    """
    recorded = folder / f"recorded-{dtype}.pt"
    print(f"reference path: {REFERENCE}; dtype {dtype}; one training step recorded op by op", flush=True)
    _run("record", {}, str(recorded), dtype)
    differing = collections.defaultdict(dict)  # (step, op) -> {path: (differ, calls, max_rel)}
    capability, failed = {}, {}
    for label, changes in PATHS.items():
        out = folder / f"replay-{dtype}-{label}.json"
        try:
            _run("replay", changes, str(recorded), str(out))
        except RuntimeError as err:
            failed[label] = str(err).splitlines()[0]
            print(f"  {label}: could not run ({failed[label]})")
            continue
        report = json.loads(out.read_text())
        capability[label] = report["capability"]
        n_diff = 0
        for step_name, ops in report["steps"].items():
            for op, entry in ops.items():
                if entry["differ"]:
                    differing[step_name, op][label] = (entry["differ"], entry["calls"], entry["max_rel"])
                    n_diff += 1
        print(f"  {label:>20}: {n_diff} (step, operation) pairs differ from the reference", flush=True)
    return {"differing": differing, "capability": capability, "failed": failed}


def record(path: Path, folder: Path) -> int:
    """Compare the paths in float32 and in float64; write both tables, the paths' kernels and the machine."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from machine import describe

    report = {
        "what": "one training step of chapter 3's attention GRU and of chapter 5's two-head model, recorded "
        "operation by operation on the reference path, then every operation replayed on the same inputs under "
        "each other path: the operations whose results differ, how many of their calls differ, and the largest "
        "difference relative to the largest magnitude of the result",
        "command": f"python tests/benchmarks/probe_kernel_paths.py --record {path}",
        "machine": describe(),
        "reference path": REFERENCE,
        "paths": {},
    }
    for dtype in ("float32", "float64"):
        compared = compare_paths(dtype, folder)
        rows = [
            {
                "step": step_name,
                "operation": op,
                "path": label,
                "calls that differ": d,
                "calls": c,
                "largest relative difference": float(f"{r:.1g}"),
            }
            for (step_name, op), by_path in sorted(compared["differing"].items())
            for label, (d, c, r) in by_path.items()
        ]
        largest = {
            label: max((row["largest relative difference"] for row in rows if row["path"] == label), default=0.0)
            for label in compared["capability"]
        }
        report[dtype] = {"differing operations": rows, "largest relative difference by path": largest}
        for label, changes in PATHS.items():
            entry = report["paths"].setdefault(label, {"environment": changes})
            if label in compared["failed"]:
                entry["could not run"] = compared["failed"][label]
            else:
                entry["torch's own kernels"] = compared["capability"][label]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"written to {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--train-steps", type=int, default=150)
    parser.add_argument("--skip-train", action="store_true")
    parser.add_argument(
        "--record",
        type=Path,
        metavar="JSON",
        help="compare the paths in float32 and float64 (no training) and write the tables here",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        mode, *rest = args.child
        {
            "record": lambda: child_record(Path(rest[0]), rest[1]),
            "replay": lambda: child_replay(Path(rest[0]), Path(rest[1])),
            "train": lambda: child_train(Path(rest[0]), rest[1], int(rest[2])),
        }[mode]()
        return 0

    folder = Path(tempfile.mkdtemp(prefix="kernel-paths-"))
    if args.record:
        return record(args.record, folder)
    compared = compare_paths(args.dtype, folder)
    labels = list(PATHS)
    print(f"\nOperations whose result differs from the reference path ({args.dtype}), on identical inputs:")
    print("calls that differ / calls, largest relative difference")
    for (step_name, op), by_path in sorted(compared["differing"].items()):
        cells = [f"{label}: {d}/{c} ({r:.0e})" for label in labels if (hit := by_path.get(label)) for d, c, r in [hit]]
        print(f"  [{step_name}] {op}: " + "; ".join(cells))

    if not args.skip_train:
        print(f"\nChapter 3's attention model, {args.train_steps} Adam steps from the same seed:")
        for dtype in ("float32", "float64"):
            results = {}
            for label, changes in {"reference": {}, **PATHS}.items():
                out = folder / f"train-{dtype}-{label}.pt"
                try:
                    _run("train", changes, str(out), dtype, str(args.train_steps))
                except RuntimeError:
                    continue
                import torch

                results[label] = torch.load(out)
            ref = results["reference"]
            for label, res in results.items():
                if label == "reference":
                    continue
                drift = (res["params"] - ref["params"]).abs().max().item()
                print(
                    f"  {dtype} {label:>20}: largest parameter difference {drift:.1e}, "
                    f"loss {res['loss']:.6f} (reference {ref['loss']:.6f})",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
