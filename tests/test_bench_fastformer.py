"""tests/benchmarks/bench_fastformer.py: its contenders, Linformer among them, and where it runs (--device)."""

from __future__ import annotations

import sys

import pytest
import torch

from notebook_index import ROOT

sys.path.insert(0, str(ROOT / "tests" / "benchmarks"))

import bench_fastformer as bench  # noqa: E402 (tests/benchmarks is on the path only from here)


@pytest.fixture
def on(monkeypatch):
    """Set where the benchmark measures, as main() does from --device and --dtype, for one test."""

    def set_device(device: str, dtype: torch.dtype = torch.float32) -> None:
        monkeypatch.setattr(bench, "DEVICE", torch.device(device))
        monkeypatch.setattr(bench, "DTYPE", dtype)

    return set_device


def test_linformer_is_timed_beside_fastformer_and_softmax_attention_on_a_cpu(on):
    on("cpu")
    runs = bench.contenders(max_len=64)
    assert bench.names() == ["fastformer", "causal", "linformer", "mha", "explicit"]
    assert sorted(runs) == sorted(bench.names())
    x, grad = bench._inputs(64, seed=0)
    for name in bench.names():
        module, run = runs[name]
        assert run(x).shape == (1, 64, bench.WIDTH), name
        assert bench.time_once(module, run, x, grad) > 0
        assert x.grad is not None and x.grad.shape == x.shape, name
    assert bench.peak_bytes(*runs["linformer"], x, grad) > 0


def test_a_measurement_in_bfloat16_builds_everything_in_bfloat16(on):
    on("cpu", torch.bfloat16)
    x, grad = bench._inputs(32, seed=0)
    runs = bench.contenders(max_len=32)
    assert x.dtype == grad.dtype == torch.bfloat16
    assert all(p.dtype == torch.bfloat16 for module, _ in runs.values() for p in module.parameters())
    assert bench.explicit_bytes(32) * 2 == 4 * bench.MHA_HEADS * 32 * 32 * 4  # two bytes a number, not four


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the refusal is for machines without it")
def test_device_cuda_without_a_gpu_is_refused_with_a_message(capsys):
    with pytest.raises(SystemExit) as stop:
        bench.main(["--device", "cuda", "--max-n", "64"])
    assert stop.value.code == 2
    assert "no CUDA device" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_pytorchs_own_layer_joins_and_every_contender_runs_there(on):
    on("cuda", torch.bfloat16)
    runs = bench.contenders(max_len=128)
    assert "torch_mha" in runs and bench.names()[-1] == "torch_mha"
    x, grad = bench._inputs(128, seed=0)
    for name in bench.names():
        module, run = runs[name]
        assert bench.time_once(module, run, x, grad) > 0
        assert bench.peak_bytes(module, run, x, grad) > 0, name
