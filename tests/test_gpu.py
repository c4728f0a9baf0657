"""On a real GPU: the command line end to end, ``torchrun`` with NCCL, and the models against the CPU in float64.

These run wherever PyTorch sees a CUDA GPU (``make test-gpu`` runs them
alone) and are skipped elsewhere, saying so; on a machine without one,
``tests/test_devices.py`` runs the same paths on a second device that fails as
a GPU fails when a tensor is left on the CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from test_translate_cli import TINY, en_fr_rows, write_anki

import attnbook.translate as cli
from attnbook.decode import beam_search, greedy_decode
from attnbook.fastformer import FastformerEncoder
from attnbook.rnn import Seq2Seq, Seq2SeqConfig
from attnbook.transformer import Transformer, TransformerConfig
from attnbook.translate.recipe import fused_sequence_loss
from notebook_index import ROOT

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="no CUDA GPU is visible to PyTorch here (tests/test_devices.py covers these paths on a second device)",
    ),
]


def _cli(argv) -> int:
    return cli.main([str(a) for a in argv])


def test_the_command_line_trains_resumes_evaluates_and_translates_on_the_gpu(tmp_path, capsys):
    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(240))
    run = tmp_path / "run"
    common = ["--pairs", pairs, "--src", "en", "--tgt", "fr", "--out", run, *TINY, "--device", "cuda"]
    assert _cli(["train", *common, "--epochs", "2", "--steps", "6", "--average", "3", "--dropout", "0.1"]) == 0
    assert _cli(["train", "--out", run, "--resume", "--epochs", "2", "--device", "cuda"]) == 0
    assert _cli(["evaluate", run, "--device", "cuda"]) == 0
    assert _cli(["translate", run, "--device", "cuda", "--beam", "3", "The cat is here."]) == 0
    out = capsys.readouterr().out
    assert "× cuda" in out and "resuming at" in out
    assert not torch.backends.cuda.cudnn_sdp_enabled()  # cuDNN's attention plans a kernel for every new shape
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert any(e["event"] == "epoch" for e in log)


def test_the_defaults_on_a_gpu_say_what_they_chose(tmp_path, capsys):
    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(240))
    argv = ["train", "--pairs", pairs, "--src", "en", "--tgt", "fr", "--out", tmp_path / "run", "--steps", "3"]
    assert _cli([*argv, "--device", "cuda", "--min-freq", "1"]) == 0
    out = capsys.readouterr().out
    assert "the paper's base model" in out and "--batch-tokens" in out


def test_torchrun_on_one_gpu_with_nccl(tmp_path):
    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(240))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m"]
    command += ["attnbook.translate", "train", "--pairs", str(pairs), "--src", "en", "--tgt", "fr"]
    command += ["--out", str(tmp_path / "run"), "--steps", "4", "--device", "cuda", *map(str, TINY)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "run" / "checkpoint.pt").is_file()


def _models():
    return {
        "transformer": Transformer(TransformerConfig(23, 19, d_model=16, num_heads=2, num_layers=2, d_ff=32)),
        "pre-LN": Transformer(
            TransformerConfig(23, 19, d_model=16, num_heads=2, num_layers=2, d_ff=32, norm_first=True)
        ),
        "rnn": Seq2Seq(Seq2SeqConfig(23, 19, embed_size=8, hidden_size=16, attention=True)),
    }


@pytest.mark.parametrize("name", ["transformer", "pre-LN", "rnn"])
def test_a_model_computes_the_same_on_the_gpu_as_on_the_cpu_in_float64(name):
    torch.manual_seed(0)
    model = _models()[name].double().eval()
    src = torch.randint(3, 23, (3, 7))
    src_padding_mask = torch.zeros(3, 7, dtype=torch.bool)
    src_padding_mask[1, 5:] = True
    tgt = torch.randint(3, 19, (3, 6))
    here = model(src, src_padding_mask, tgt[:, :-1])
    gpu = model.to("cuda")
    there = gpu(src.cuda(), src_padding_mask.cuda(), tgt[:, :-1].cuda())
    torch.testing.assert_close(there.cpu(), here, rtol=1e-10, atol=1e-12)
    gpu.train()  # cuDNN runs a GRU backward only in training mode; dropout does not matter to this check
    loss = fused_sequence_loss(gpu(src.cuda(), src_padding_mask.cuda(), tgt[:, :-1].cuda()), tgt[:, 1:].cuda())
    loss.backward()
    gpu.eval()
    assert all(p.grad is None or p.grad.is_cuda for p in gpu.parameters())
    greedy = greedy_decode(gpu, src.cuda(), src_padding_mask.cuda(), max_len=6)
    cached_cpu = greedy_decode(model.cpu(), src, src_padding_mask, max_len=6)
    assert torch.equal(greedy.tokens.cpu(), cached_cpu.tokens)  # exact: tokens, chosen by argmax of close logits
    beams = beam_search(model.to("cuda"), src.cuda(), src_padding_mask.cuda(), beam_size=3, max_len=6)
    assert beams.tokens.is_cuda and beams.scores.shape == (3,)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_fastformer_computes_the_same_on_the_gpu_as_on_the_cpu_in_float64(causal):
    torch.manual_seed(0)
    model = FastformerEncoder(d_model=16, num_heads=2, num_layers=2, d_ff=32).double().eval()
    x = torch.randn(4, 9, 16, dtype=torch.float64)
    ignore = torch.zeros(4, 9, dtype=torch.bool)
    ignore[2, 6:] = True
    here = model(x, ignore, is_causal=causal)
    there = model.to("cuda")(x.cuda(), ignore.cuda(), is_causal=causal)
    torch.testing.assert_close(there.cpu(), here, rtol=1e-10, atol=1e-12)


def test_the_training_step_never_waits_for_the_gpu():
    """The command line's step (forward, loss, backward, clipping, fused Adam) asks the GPU for nothing back.

    PyTorch's sync debug mode warns at every operation that makes the host wait
    for the device; after a warm-up step, one whole step must trigger none.
    """
    from attnbook.data import Batch
    from attnbook.masks import padding_mask
    from attnbook.translate.model import build_model, model_config
    from attnbook.translate.settings import RunSettings
    from attnbook.translate.train import training_step
    from attnbook.translate.utilisation import host_waits

    settings = RunSettings(d_model=32, num_heads=2, num_layers=2, d_ff=64)
    torch.manual_seed(0)
    model = build_model("transformer", model_config(settings, 50, 60)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    src_lengths, tgt_lengths = torch.tensor([7, 5, 3]), torch.tensor([6, 4, 2])
    src, tgt = torch.randint(4, 50, (3, 8)), torch.randint(4, 60, (3, 7))
    batch = Batch(
        src=src,
        src_lengths=src_lengths,
        src_padding_mask=padding_mask(src_lengths, 8),
        tgt_in=tgt,
        tgt_out=tgt,
        tgt_padding_mask=padding_mask(tgt_lengths, 7),
        tgt_lengths=tgt_lengths,
    ).to("cuda")
    n_tokens = int(tgt_lengths.sum())
    bf16, losses = torch.bfloat16, []
    training_step(model, model, optimizer, batch, n_tokens, settings, bf16)  # warm-up: kernels chosen
    waits = host_waits(lambda: losses.append(training_step(model, model, optimizer, batch, n_tokens, settings, bf16)))
    assert not waits, "\n".join(waits)
    assert torch.isfinite(losses[0]).item()


def test_a_compiled_run_trains_on_the_gpu(tmp_path, capsys):
    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(240))
    run = tmp_path / "run"
    argv = ["train", "--pairs", pairs, "--src", "en", "--tgt", "fr", "--out", run, *TINY, "--device", "cuda"]
    assert _cli([*argv, "--steps", "8", "--compile"]) == 0
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert json.loads((run / "config.json").read_text())["settings"]["compile"] is True
    assert any(e["event"] == "utilisation" and 0 < e["share"] < 1 for e in log)
