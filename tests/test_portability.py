"""The stored outputs of the notebooks that train reproduce on other CPUs, simulated on this one.

PyTorch chooses its CPU kernels when it is first imported: its own vectorized
kernels for the widest instruction set the CPU has (AVX-512, AVX2, or plain
code), MKL's matrix products for the CPU it finds, oneDNN's likewise. Other
CPUs (an Intel laptop without AVX-512, GitHub's runners, Colab, Apple silicon)
take other paths, whose float32 results differ in the last bits; training
amplifies those bits into visible differences. The course's answer is float64
in every notebook that trains (see book/reproducibility.md and the hygiene
test). This test is the proof: the normal strict nbval run of the suite checks
each such notebook on this machine's own kernel path, and here the same
notebook runs again, in a subprocess, on the most different path this machine
can take (ATen's plain C++ kernels, MKL's compatible code path, oneDNN limited
to SSE4.1), and every stored output must still match.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from notebook_index import ROOT, TRAINING_NOTEBOOKS

#: Another CPU, as far as PyTorch can tell: no vector kernels in ATen, MKL and oneDNN on their
#: most conservative code paths. (On ARM, ATen's "default" is valid too; the other two are ignored.)
OTHER_CPU = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}


def run_nbval(notebook: Path, env_changes: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    """Strict nbval over one notebook in a fresh pytest process, with ``env_changes`` in its environment."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": "0", **env_changes}
    for key in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST"):
        env.pop(key, None)
    command = [
        sys.executable, "-m", "pytest", str(notebook),
        "-o", "addopts=",  # not the suite's own options (no xdist inside a worker)
        "--nbval", "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"),
        "-p", "no:cacheprovider", "-q", "-rf", "--color=no",
    ]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_notebooks_that_train_are_found():
    assert {p.name for p in TRAINING_NOTEBOOKS} >= {"02_rnn_encoder_decoder.ipynb", "03_attention.ipynb"}


@pytest.mark.slow
@pytest.mark.parametrize("notebook", TRAINING_NOTEBOOKS, ids=[p.name for p in TRAINING_NOTEBOOKS])
def test_stored_outputs_reproduce_on_another_kernel_path(notebook):
    result = run_nbval(notebook, OTHER_CPU)
    report = "\n".join(result.stdout.splitlines()[-60:])
    assert result.returncode == 0, (
        f"{notebook.name}: the stored outputs do not reproduce with {OTHER_CPU}, so they would not reproduce on "
        f"other CPUs either. Does the notebook compute in float64 (see book/reproducibility.md)?\n{report}"
    )
