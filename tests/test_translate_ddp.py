"""`attnbook-translate train` under torchrun: two CPU processes (gloo) equal one over the same global batches."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import torch
from torch import nn

import attnbook.translate as cli
from attnbook.data import BucketBatchSampler, PairDataset, collate, generate_pairs
from attnbook.train import paper_optimizer, read_checkpoint, sequence_loss
from attnbook.translate.console import Console
from attnbook.translate.model import build_model
from attnbook.translate.run_folder import open_run, read_vocabularies
from attnbook.translate.run_pairs import reread_run_pairs
from attnbook.translate.tokens import RunTokens
from notebook_index import ROOT

TINY = [
    "--d-model",
    "16",
    "--num-heads",
    "2",
    "--num-layers",
    "1",
    "--d-ff",
    "32",
    "--batch-tokens",
    "120",
    "--warmup",
    "4",
    "--min-freq",
    "1",
]
STEPS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_equal_one_process_over_the_same_global_batches(tmp_path):
    pairs = tmp_path / "fra.txt"
    pairs.write_text(
        "".join(f"{p.src}\t{p.tgt}\n" for p in generate_pairs(160, seed=4, max_len=9, alignments=False)),
        encoding="utf-8",
    )
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    if sys.platform.startswith("linux"):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the loopback interface: no network needed
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
        "--master_addr=127.0.0.1", f"--master_port={free_port()}",
        "-m", "attnbook.translate", "train", "--pairs", str(pairs), "--src", "en", "--tgt", "fr", "--out", str(out),
        "--steps", str(STEPS), "--dtype", "float64", "--dropout", "0", "--device", "cpu", *TINY,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "on 2 × cpu" in result.stdout and result.stdout.count("model: transformer") == 1
    )  # only the first process speaks

    # Only the first process wrote: one start in the log, one checkpoint, from the two-process run.
    events = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events].count("start") == 1 and events[0]["world"] == 2
    payload = read_checkpoint(out / "checkpoint.pt")
    state = payload["extra"]["train_state"]
    assert state["world"] == 2 and state["position"]["step"] == STEPS and len(state["rng"]) == 2

    # The same steps in one process: the same initial weights, each step's gradient the mean over
    # the two processes' batches (global batches 2k and 2k + 1), then clipping, Adam and the schedule.
    config = json.loads((out / "config.json").read_text())
    s = config["settings"]
    splits, _ = reread_run_pairs(config, Console())
    src_vocab, tgt_vocab = read_vocabularies(out)
    train_pairs = RunTokens.load(out, config, Console()).pairs(splits.train)  # the run's subword pieces
    dataset = PairDataset(
        [p for p in train_pairs if len(p.src_tok) <= s["max_length"] and len(p.tgt_tok) <= s["max_length"]],
        src_vocab,
        tgt_vocab,
    )
    batches = BucketBatchSampler(dataset.lengths(), batch_tokens=s["batch_tokens"], seed=s["seed"]).batches(0)
    assert len(batches) >= 2 * STEPS

    def one_process(per_step: int) -> dict:
        torch.manual_seed(s["seed"])
        model = build_model(config["arch"], config["model"]).to(torch.float64)
        optimizer, scheduler = paper_optimizer(model, d_model=s["d_model"], warmup=s["warmup"], factor=s["lr_factor"])
        model.train()
        for k in range(STEPS):
            optimizer.zero_grad()
            losses = []
            for b in batches[per_step * k : per_step * k + per_step]:
                batch = collate([dataset[i] for i in b])
                losses.append(
                    sequence_loss(
                        model(batch.src, batch.src_padding_mask, batch.tgt_in), batch.tgt_out, 0, s["label_smoothing"]
                    )
                )
            (sum(losses) / len(losses)).backward()
            nn.utils.clip_grad_norm_(model.parameters(), s["clip"])
            optimizer.step()
            scheduler.step()
        return model.state_dict()

    two = payload["state_dict"]
    reference = one_process(per_step=2)
    assert two.keys() == reference.keys()
    for name in two:
        # The attention key bias shifts every score of a query alike, so softmax makes its true gradient 0:
        # what reaches it is rounding noise (~1e-17) that Adam scales up to ~1e-10 steps. Elsewhere: ~1e-15.
        tolerance = 1e-9 if name.endswith("in_proj.bias") else 1e-12
        assert torch.allclose(two[name], reference[name], rtol=0, atol=tolerance), name
    alone = one_process(per_step=1)  # the test can fail: one batch a step is another run
    assert not all(torch.allclose(two[name], alone[name], rtol=0, atol=1e-6) for name in two)

    # The checkpoint written by two processes loads in one, and translates.
    loaded = open_run(out, Console())
    assert all(torch.equal(loaded.model.state_dict()[k], two[k]) for k in two)
    assert cli.main(["translate", str(out), "--beam", "1", "The cat sleeps."]) == 0
