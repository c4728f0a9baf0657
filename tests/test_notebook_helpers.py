"""attnbook.notebook: setup seeds and fixes threads; show_source shows the real source."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from attnbook.masks import causal_mask
from attnbook.notebook import setup, show_source, source_of, timing_machine


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


def test_setup_leaves_the_cpu_kernels_to_pytorch():
    """Portability comes from float64, not from pinning kernels: a pin such as
    ATEN_CPU_CAPABILITY=avx2 is an invalid value on ARM, where PyTorch warns about it in every
    notebook, and it kept the suite from testing the machine's own kernels."""
    import os
    import subprocess
    import sys

    kernel_variables = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")
    code = (
        "import os; from attnbook.notebook import setup; setup(figures=False); "
        f"print(sorted(k for k in {kernel_variables!r} if k in os.environ))"
    )
    env = {k: v for k, v in os.environ.items() if k not in kernel_variables}
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.strip() == "[]"
    assert not result.stderr


def test_a_timing_names_its_machine_and_flags_a_busy_one(monkeypatch):
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 4.0, 3.0), raising=False)
    busy = timing_machine(threads=1)
    assert busy.startswith("measured on: ") and ", 1 thread;" in busy
    assert "load average 5.0 on 2 logical CPUs" in busy and "busy machine" in busy
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 0.3, 0.2), raising=False)
    quiet = timing_machine(threads=2)
    assert ", 2 threads;" in quiet and "busy" not in quiet
    name = quiet.removeprefix("measured on: ").split(",")[0]
    assert name.strip(), quiet
