"""The stored outputs of every notebook reproduce on other CPUs, simulated on this one.

PyTorch chooses its CPU kernels when it is first imported: its own vectorized
kernels for the widest instruction set the CPU has (AVX-512, AVX2, or plain
code), MKL's matrix products for the CPU it finds, oneDNN's likewise. Other
CPUs (an Intel laptop without AVX-512, GitHub's runners, Colab, Apple silicon)
take other paths, whose float32 results differ in the last bits; training
amplifies those bits into visible differences. The course's answer is float64
in every notebook that trains (see book/reproducibility.md and the hygiene
test), and outputs that never print float32's last bits elsewhere.

The proof runs every notebook on another path, the most different one this
machine can take (ATen's plain C++ kernels, MKL's compatible code path, oneDNN
limited to SSE4.1: ``notebook_index.OTHER_CPU``), in ways chosen for what they
cost:

- a notebook that does not train, or trains for about half a minute
  (:data:`CHEAP_TRAINING_NOTEBOOKS`), runs on the other path in the suite's own
  strict nbval run (notebooks/conftest.py gives its kernel that path): every
  stored output must match, and for the training ones only a whole run shows
  that a chapter's training is stable enough to stay reproducible over
  hundreds of steps. One run serves both checks, with no second run here;
- for the notebooks that train for minutes, each kind of model that a chapter
  trains (:data:`portability_probe.COVERED`) is trained briefly, from the same
  seeds, on both paths, in float64 (every kind) and in float32 (the quicker
  kinds, :data:`FLOAT32_KINDS`): in float64 the two paths must agree far
  beyond the three significant digits that the chapters print, and in float32
  they must differ (so the comparison can fail, and float64 is what makes the
  difference). With the hygiene test's rules (the notebook
  computes in float64 from its first cell; no stored output prints a
  rounding-level figure), that covers each model's arithmetic; the suite's
  nbval runs these notebooks on this machine's own path.

The long training notebooks (:data:`LONG_TRAINING_NOTEBOOKS`) rerun whole on
the other path too, in tests marked ``long_rerun``: about fourteen minutes on two
cores, too slow for the timed suite, so ``make test`` deselects them (see
pyproject.toml) and ``make portability`` runs them (``pytest -m long_rerun``).
Run it after changing how a chapter trains. One notebook alone:
``ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=SSE41
.venv/bin/python -m pytest notebooks/NN_topic.ipynb``.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from portability_probe import OTHER_CPU, largest_drift  # another CPU's kernel path; how far two runs drift apart

from notebook_index import NOTEBOOKS, OWN_PATH_NOTEBOOKS, ROOT, TRAINING_NOTEBOOKS, kernel_environment, read_notebook

#: Notebooks that do not train: rerun whole on the other path.
QUICK_NOTEBOOKS = [p for p in NOTEBOOKS if p not in TRAINING_NOTEBOOKS]

#: Notebooks that train but take only about half a minute: rerun whole on the other path too. The probe's
#: 24 steps show that a model's arithmetic agrees on both paths; whether a chapter's own, longer training is
#: stable enough to keep it so only a whole rerun shows (chapter 7's reverser once trained post-LN at 3e-3,
#: and after its 480 steps the two paths' float64 runs ended with validation losses 0.043 and 0.140:
#: tests/benchmarks/training_stability.py). The other training notebooks take under a minute to about three and a
#: half minutes each.
CHEAP_TRAINING_NOTEBOOKS = [
    p for p in TRAINING_NOTEBOOKS if p.stem in {"05_multihead_attention", "06_positional_encoding", "07_transformer"}
]

#: The other notebooks that train (under a minute to about three and a half minutes each, about fourteen minutes in
#: all on two workers): rerun whole by ``make portability`` (the ``long_rerun`` mark), not by ``make test``.
LONG_TRAINING_NOTEBOOKS = [p for p in TRAINING_NOTEBOOKS if p not in CHEAP_TRAINING_NOTEBOOKS]

#: How far apart the two paths may end up in float64, relative: the chapters print trained figures
#: at three significant digits (5e-4 relative), and a run here drifts by about 1e-12.
FLOAT64_AGREEMENT = 1e-9

PROBE = ROOT / "tests" / "portability_probe.py"


def _environment(env_changes: dict[str, str], drop: tuple[str, ...] = ()) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": "0", **env_changes}
    for key in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST", *drop):
        env.pop(key, None)
    return env


def run_nbval(
    notebook: Path, env_changes: dict[str, str], timeout: int = 900, drop: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """Strict nbval over one notebook in a fresh pytest process, with ``env_changes`` in its environment."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(notebook),
        "-o",
        "addopts=",  # not the suite's own options (no xdist inside a worker)
        "--nbval",
        "--nbval-sanitize-with",
        str(ROOT / "tests" / "nbval_sanitize.cfg"),
        "-p",
        "no:cacheprovider",
        "-q",
        "-rf",
        "--color=no",
    ]
    return subprocess.run(
        command, cwd=ROOT, env=_environment(env_changes, drop), capture_output=True, text=True, timeout=timeout
    )


def _reproduces_whole(notebook: Path, advice: str, timeout: int = 900) -> None:
    """Strict nbval over the whole notebook on the other path; on a mismatch, fail with ``advice``."""
    result = run_nbval(notebook, OTHER_CPU, timeout)
    report = "\n".join(result.stdout.splitlines()[-60:])
    assert result.returncode == 0, (
        f"{notebook.name}: the stored outputs do not reproduce with {OTHER_CPU}, {advice}\n{report}"
    )


def test_the_notebooks_are_sorted_into_training_and_quick():
    assert {p.name for p in TRAINING_NOTEBOOKS} >= {"02_rnn_encoder_decoder.ipynb", "03_attention.ipynb"}
    assert {p.name for p in QUICK_NOTEBOOKS} >= {"00_tensors.ipynb", "04_self_attention.ipynb"}


def test_the_suites_nbval_runs_every_notebook_but_the_long_ones_on_the_other_path():
    """The quick notebooks and the cheap training ones are not rerun here: the suite's strict nbval runs them
    on the other path itself (notebooks/conftest.py), and the long training ones on this machine's own."""
    assert OWN_PATH_NOTEBOOKS == {p.stem for p in LONG_TRAINING_NOTEBOOKS}, (
        "notebook_index.OWN_PATH_NOTEBOOKS must list exactly the long training notebooks (make portability's)"
    )
    for notebook in QUICK_NOTEBOOKS + CHEAP_TRAINING_NOTEBOOKS:
        assert kernel_environment(notebook) == OTHER_CPU, notebook.name
    for notebook in LONG_TRAINING_NOTEBOOKS:
        assert kernel_environment(notebook) == {}, notebook.name


@pytest.mark.slow
def test_nbvals_kernel_gets_the_other_path_and_no_other_process_does(tmp_path):
    """A notebook that prints its kernel's ATen path passes strict nbval only if the kernel ran on the other path."""
    import nbformat

    probe = ROOT / "notebooks" / "_kernel_path_probe.ipynb"
    source = (
        "import os\nimport torch\nprint(os.environ.get('ATEN_CPU_CAPABILITY'), torch.backends.cpu.get_cpu_capability())"
    )
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="default DEFAULT\n")]
    cell.execution_count = 1
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nbformat.write(nb, probe)
    try:
        result = run_nbval(probe, {}, drop=tuple(OTHER_CPU))  # the pytest process itself runs on this path
    finally:
        probe.unlink()
    assert result.returncode == 0, "nbval's kernel did not run on the other path:\n" + result.stdout[-2000:]


UNSTABLE_TRAINING = (
    "although the notebook computes in float64. If a trained figure moved, the training is unstable (a loss "
    "that jumps up now and then magnifies the last bits at every jump): a lower learning rate, a warm-up or "
    "pre-LN steadies it; tests/benchmarks/training_stability.py shows how to measure it."
)


@pytest.mark.long_rerun
@pytest.mark.parametrize("notebook", LONG_TRAINING_NOTEBOOKS, ids=[p.name for p in LONG_TRAINING_NOTEBOOKS])
def test_a_long_training_notebook_reproduces_whole_on_another_kernel_path(notebook):
    _reproduces_whole(notebook, UNSTABLE_TRAINING, timeout=1800)


def test_every_training_notebook_is_rerun_whole_by_the_suite_or_by_make_portability():
    assert len(CHEAP_TRAINING_NOTEBOOKS) == 3, [p.name for p in CHEAP_TRAINING_NOTEBOOKS]
    assert LONG_TRAINING_NOTEBOOKS, "no long training notebook: drop the long_rerun mark and make portability"
    assert set(CHEAP_TRAINING_NOTEBOOKS) | set(LONG_TRAINING_NOTEBOOKS) == set(TRAINING_NOTEBOOKS)


def test_make_test_leaves_the_long_reruns_to_make_portability(root):
    """The long reruns are deselected from the timed suite, and the Makefile's portability target selects them."""
    import tomllib

    addopts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert "-m 'not long_rerun'" in addopts, addopts
    makefile = (root / "Makefile").read_text()
    assert "\nportability: env\n" in makefile and "-m long_rerun tests/test_portability.py" in makefile


# --- Notebooks that train: every kind of model, trained briefly on both paths -----------------------


#: The kinds of model the float32 runs train: enough to show that the other path computes otherwise (any one that
#: drifts would do), without the three translation runs, which take most of the probe's time. The record that the
#: page on reproducibility quotes (``portability_probe.py --record``) compares every kind in both dtypes.
FLOAT32_KINDS = (
    "multi-head attention with learned positions (chapters 5 and 6)",
    "dot-product attention (chapter 3)",
    "Fastformer (chapter 9)",
    "linear attention (chapter 9)",
    "decoder-only language model (chapter 10)",
)


def _probe(env_changes: dict[str, str]) -> dict:
    """Every kind's run in float64, then :data:`FLOAT32_KINDS`' in float32, in one process: ``{dtype: report}``."""
    float32 = [option for name in FLOAT32_KINDS for option in ("--and-float32", name)]
    result = subprocess.run(
        [sys.executable, str(PROBE), "float64", *float32],
        cwd=ROOT,
        env=_environment(env_changes),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"the portability probe failed ({env_changes or 'this path'}):\n{result.stderr[-3000:]}"
    )
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def probes() -> dict[tuple[str, str], dict]:
    """The probe's runs by (float64 | float32, this path | the other path): one process per path, both at once."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {path: pool.submit(_probe, {} if path == "here" else OTHER_CPU) for path in ("here", "other")}
        found = {path: future.result() for path, future in futures.items()}
    return {(dtype, path): found[path][dtype] for path in found for dtype in ("float64", "float32")}


def _paths_differ(probes) -> bool:
    return probes["float64", "here"]["capability"] != probes["float64", "other"]["capability"]


@pytest.mark.slow
def test_every_kind_of_model_trains_to_the_same_figures_on_another_kernel_path_in_float64(probes):
    here, other = probes["float64", "here"], probes["float64", "other"]
    assert here["runs"].keys() == other["runs"].keys()
    for name in here["runs"]:
        drift, where = largest_drift(here["runs"][name], other["runs"][name])
        assert drift <= FLOAT64_AGREEMENT, (
            f"{name}: in float64, its {where} differs by {drift:.1e} (relative) between this CPU's kernels "
            f"({here['capability']}) and {OTHER_CPU}: the chapters' trained figures would not reproduce on other CPUs"
        )
        for decoding in ("greedy", "beam", "uncached"):
            assert here["runs"][name].get(decoding) == other["runs"][name].get(decoding), (
                f"{name}: {decoding} decoding gives other tokens with {OTHER_CPU}"
            )


@pytest.mark.slow
def test_in_float32_the_same_runs_differ_so_the_comparison_can_fail(probes):
    if not _paths_differ(probes):
        pytest.skip(
            f"this machine's own kernel path is already {probes['float64', 'here']['capability']}: "
            "there is no second path to compare with"
        )
    here, other = probes["float32", "here"], probes["float32", "other"]
    drifts = {name: largest_drift(here["runs"][name], other["runs"][name])[0] for name in here["runs"]}
    assert max(drifts.values()) > 100 * FLOAT64_AGREEMENT, (
        f"in float32 the two kernel paths gave the same figures ({drifts}): the other path is not another path, "
        "so the float64 comparison proves nothing"
    )


def _library_modules_used(notebook: Path) -> set[tuple[str, str]]:
    """``(module, name)`` of every name a notebook imports from ``attnbook``."""
    from IPython.core.inputtransformer2 import TransformerManager

    used = set()
    for cell in read_notebook(notebook).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(TransformerManager().transform_cell(cell.source))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attnbook"):
                used.update((node.module, alias.name) for alias in node.names)
    return used


@pytest.mark.parametrize("notebook", TRAINING_NOTEBOOKS, ids=[p.name for p in TRAINING_NOTEBOOKS])
def test_every_model_a_notebook_trains_is_one_the_probe_trains(notebook):
    """A new kind of model in a chapter needs a run in tests/portability_probe.py (its COVERED list)."""
    import torch

    sys.path.insert(0, str(PROBE.parent))
    try:
        from portability_probe import COVERED
    finally:
        sys.path.remove(str(PROBE.parent))
    missing = []
    for module, name in sorted(_library_modules_used(notebook)):
        obj = getattr(importlib.import_module(module), name, None)
        is_model = isinstance(obj, type) and issubclass(obj, torch.nn.Module)
        if is_model and name not in COVERED.get(module, set()):
            missing.append(f"{module}.{name}")
    assert not missing, (
        f"{notebook.name} uses {missing}, which tests/portability_probe.py does not train: add a short run of it there "
        "(and its name to COVERED), so that the suite proves its training reproduces on other CPUs"
    )


def test_the_probe_covers_only_names_that_exist():
    sys.path.insert(0, str(PROBE.parent))
    try:
        from portability_probe import COVERED
    finally:
        sys.path.remove(str(PROBE.parent))
    for module, names in COVERED.items():
        for name in names:
            assert hasattr(importlib.import_module(module), name), f"{module}.{name} does not exist"
