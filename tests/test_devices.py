"""Nothing is left on the wrong device: the command line and the models on a second device, without a GPU.

``tests/second_device.py`` lends these tests a device other than the CPU, with
real values, on which an operation that meets a tensor left on the CPU fails
as it fails on a GPU. The command line trains there (with validation, weight
averaging and a periodic save), resumes, evaluates and translates; the models
train a step and decode there. ``tests/test_gpu.py`` runs the same on a real
GPU wherever one is visible.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
from second_device import Elsewhere, MixedDevices, SecondDevice
from test_translate_cli import TINY, en_fr_rows, write_anki

import attnbook.translate as cli
import attnbook.translate.cluster as cluster
import attnbook.translate.cmd_evaluate as cmd_evaluate
import attnbook.translate.cmd_translate as cmd_translate
from attnbook.decode import beam_search, greedy_decode
from attnbook.fastformer import FastformerEncoder
from attnbook.train import read_checkpoint, sequence_loss
from attnbook.transformer import Transformer, TransformerConfig
from attnbook.translate.model import (
    GPU_BATCH_TOKENS,
    GPU_MEMORY_SHARE,
    GPU_MODEL,
    activation_bytes_per_token,
    fit_to_device,
)
from attnbook.translate.recipe import fused_sequence_loss
from attnbook.translate.settings import RunSettings


def test_the_second_device_refuses_a_tensor_left_on_the_cpu_as_a_gpu_does():
    with SecondDevice() as device:
        logits = torch.randn(2, 3, 7).to(device).requires_grad_()
        targets = torch.randint(1, 7, (2, 3))  # left on the CPU: the bug of the command line's first step
        assert isinstance(logits, Elsewhere) and logits.device == device
        for loss in (fused_sequence_loss, sequence_loss):
            with pytest.raises(MixedDevices, match=r"shape \(6,( 1)?\) on the cpu"):
                loss(logits, targets)
        value = fused_sequence_loss(logits, targets.to(device))  # moved: it computes, with real values
        value.backward()
        torch.testing.assert_close(float(value), float(fused_sequence_loss(logits.cpu(), targets)), rtol=1e-6, atol=0)
        assert logits.grad.device == device
        shifted = logits + torch.tensor(1.0)  # a 0-dimensional tensor on the CPU may meet it, as on a GPU
        torch.testing.assert_close(shifted.cpu(), logits.cpu() + 1, rtol=0, atol=1e-6)


def _on(device, monkeypatch):
    """Every command on ``device`` (each command's module is imported first: they bind ``pick_device`` by name)."""
    for module in (cluster, cmd_evaluate, cmd_translate):
        monkeypatch.setattr(module, "pick_device", lambda name: device)


def test_the_command_line_trains_resumes_evaluates_and_translates_on_a_second_device(tmp_path, capsys, monkeypatch):
    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(160))
    run = tmp_path / "run"
    common = ["--pairs", pairs, "--src", "en", "--tgt", "fr", "--out", run, *TINY, "--dropout", "0.1"]
    with SecondDevice() as device:
        _on(device, monkeypatch)
        # validation every epoch, three snapshots averaged, and a cut after five steps to resume from
        assert cli.main(["train", *map(str, common), "--epochs", "2", "--steps", "5", "--average", "3"]) == 0
        assert cli.main(["train", "--out", str(run), "--resume", "--epochs", "2"]) == 0
        assert cli.main(["evaluate", str(run)]) == 0
        assert cli.main(["translate", str(run), "--beam", "3", "The cat is here."]) == 0
        assert cli.main(["translate", str(run), "--beam", "1", "The cat is here."]) == 0
    out = capsys.readouterr().out
    assert "on 1 × meta" in out and "resuming at epoch 1, step 5" in out
    assert "BLEU" in out  # evaluate scored the test pairs, decoded on the second device
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [e["event"] for e in log].count("epoch") >= 2 and any(e["event"] == "average" for e in log)
    weights = read_checkpoint(run / "checkpoint.pt")["state_dict"]
    assert all(type(w) is torch.Tensor and w.device.type == "cpu" for w in weights.values())  # readable anywhere
    assert all(torch.isfinite(w).all() for w in weights.values() if w.is_floating_point())


MODELS = {
    "transformer": lambda: Transformer(TransformerConfig(23, 19, d_model=16, num_heads=2, num_layers=2, d_ff=32)),
    "pre-LN": lambda: Transformer(
        TransformerConfig(23, 19, d_model=16, num_heads=2, num_layers=2, d_ff=32, norm_first=True)
    ),
}
# The RNN is left to tests/test_gpu.py: its packed GRU runs in C++ code whose internal tensors the second
# device cannot follow (the gradients of the packed sequence come back in another layout).


@pytest.mark.parametrize("name", MODELS)
def test_a_model_trains_a_step_and_decodes_greedy_and_beam_on_a_second_device(name):
    torch.manual_seed(0)
    model = MODELS[name]()
    src = torch.randint(3, 23, (3, 7))
    src_padding_mask = torch.zeros(3, 7, dtype=torch.bool)
    src_padding_mask[1, 5:] = True
    tgt = torch.randint(3, 19, (3, 6))
    with SecondDevice() as device:
        model = model.to(device)
        batch = [t.to(device) for t in (src, src_padding_mask, tgt)]
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
        loss = fused_sequence_loss(model(batch[0], batch[1], batch[2][:, :-1]), batch[2][:, 1:])
        loss.backward()
        optimizer.step()
        model.eval()
        greedy = greedy_decode(model, batch[0], batch[1], max_len=6)
        beams = beam_search(model, batch[0], batch[1], beam_size=3, max_len=6)
        assert float(greedy.tokens.sum()) >= 0 and float(beams.scores.sum()) <= 0  # real values, read back
    assert math.isfinite(float(loss.detach()))
    assert greedy.tokens.device == device and beams.tokens.device == device  # on the device they were made on
    assert greedy.tokens.shape[0] == 3 and beams.tokens.shape[0] == 3 and beams.scores.shape == (3,)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_fastformer_trains_a_step_on_a_second_device(causal):
    torch.manual_seed(0)
    model = FastformerEncoder(d_model=16, num_heads=2, num_layers=2, d_ff=32)
    x = torch.randn(4, 9, 16)
    ignore = torch.zeros(4, 9, dtype=torch.bool)
    ignore[2, 6:] = True
    with SecondDevice() as device:
        model = model.to(device)
        out = model(x.to(device), ignore.to(device), is_causal=causal)
        out.pow(2).mean().backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(g.device == device for g in grads)


def test_on_a_gpu_the_default_model_grows_to_the_base_size_and_the_batch_to_what_memory_holds(monkeypatch):
    card = SimpleNamespace(total_memory=80 * 2**30)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: card)
    gpu = torch.device("cuda", 0)
    settings, reasons = fit_to_device(RunSettings(), set(), gpu, 8000)
    assert {k: getattr(settings, k) for k in GPU_MODEL} == GPU_MODEL
    assert settings.batch_tokens == GPU_BATCH_TOKENS and len(reasons) == 2
    assert "the paper's base model" in reasons[0] and "80 GiB: --batch-tokens 8,000" in reasons[1]
    # a small card: the batch its memory holds for that model, in hundreds
    card.total_memory = 4 * 2**30
    settings, reasons = fit_to_device(RunSettings(), set(), gpu, 8000)
    expected = GPU_MEMORY_SHARE * card.total_memory / activation_bytes_per_token(settings, 8000)
    assert settings.batch_tokens == int(expected) // 100 * 100 < GPU_BATCH_TOKENS
    assert "what its memory holds" in reasons[1]
    # what the command line chose stays: a width given keeps the CPU's sizes; a batch given is kept
    settings, reasons = fit_to_device(
        RunSettings(d_model=128, batch_tokens=900), {"d_model", "batch_tokens"}, gpu, 8000
    )
    assert (settings.d_model, settings.num_layers, settings.batch_tokens) == (128, RunSettings().num_layers, 900)
    assert reasons == []
    # on the CPU nothing changes
    assert fit_to_device(RunSettings(), set(), torch.device("cpu"), 8000) == (RunSettings(), [])
