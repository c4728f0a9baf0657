"""attnbook.notebook: setup seeds and fixes threads; show_source shows the real source."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from attnbook.masks import causal_mask
from attnbook.notebook import setup, show_source, source_of


def test_setup_makes_random_draws_repeatable():
    setup(seed=3, figures=False)
    first = (random.random(), np.random.rand(), torch.rand(2))
    setup(seed=3, figures=False)
    second = (random.random(), np.random.rand(), torch.rand(2))
    assert first[0] == second[0] and first[1] == second[1]
    assert torch.equal(first[2], second[2])


def test_setup_fixes_threads_and_defaults_to_cpu():
    before = torch.get_num_threads()
    try:
        info = setup(seed=0, threads=1, figures=False)
        assert torch.get_num_threads() == 1
        assert info.device == "cpu"
        assert "seed=0, threads=1, device=cpu" in repr(info)
    finally:
        torch.set_num_threads(before)


def test_setup_rejects_bad_requests():
    with pytest.raises(ValueError, match="threads must be >= 1"):
        setup(threads=0, figures=False)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        setup(device="tpu", figures=False)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA GPU is visible"):
            setup(device="cuda", figures=False)


def test_show_source_text_is_the_source():
    shown = show_source(causal_mask)
    assert shown.data == source_of(causal_mask)
    assert shown.data.startswith("def causal_mask(")
    with pytest.raises(TypeError, match="cannot show the source"):
        source_of(42)


def test_setup_pins_cpu_kernels_when_it_runs_before_torch():
    import subprocess
    import sys

    code = (
        "from attnbook.notebook import setup, PINNED_CPU_KERNELS; import os; setup(figures=False); "
        "import torch; print(all(os.environ[k] == v for k, v in PINNED_CPU_KERNELS.items()), torch.backends.cpu.get_cpu_capability())"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")}
    pinned, capability = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout.split()
    assert pinned == "True"
    assert capability != "AVX512", "setup() must cap PyTorch's CPU kernels below AVX-512"
