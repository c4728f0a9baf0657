"""The repository root and the notebooks, for the tests to import.

A module of its own, not conftest.py: notebooks/ has a conftest.py too, and a test that
imported names from "conftest" could get that one.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

#: Another CPU, as far as PyTorch can tell: no vector kernels in ATen, MKL and oneDNN on their
#: most conservative code paths. (On ARM, ATen's "default" is valid too; the other two are ignored.)
OTHER_CPU = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"}

#: The notebooks whose strict nbval run in the suite uses this machine's own kernel path: those that train
#: for minutes (``make portability`` reruns them on :data:`OTHER_CPU`). Every other notebook's nbval kernel
#: runs on :data:`OTHER_CPU` (notebooks/conftest.py), so the suite's one run of it is also the proof that its
#: outputs reproduce on another processor. tests/test_portability.py keeps this list equal to the long ones.
OWN_PATH_NOTEBOOKS = frozenset(
    {"02_rnn_encoder_decoder", "03_attention", "08_training_a_translator", "09_fastformer", "10_the_decoder_alone"}
)


def kernel_environment(notebook: Path) -> dict[str, str]:
    """What nbval's kernel for ``notebook`` adds to its environment: the other CPU's kernel path, or nothing."""
    return {} if Path(notebook).stem in OWN_PATH_NOTEBOOKS else dict(OTHER_CPU)


#: A folder of the machine that wrote a file, which a notebook's outputs and a recorded run must not show.
LOCAL_PATH = re.compile(r"(/home/|/Users/|/root/|/tmp/|/work/|[A-Z]:\\\\Users|site-packages|\.venv)")


def in_float64(fn):
    """``fn`` as a notebook that computes in float64 runs it: with float64 the default dtype while it runs."""
    import functools

    import torch

    @functools.wraps(fn)
    def run(*args, **kwargs):
        saved = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_default_dtype(saved)

    return run


def read_notebook(path: Path):
    import nbformat  # here: the tests that read no notebook run without Jupyter (make test-gpu on a GPU box)

    return nbformat.read(path, as_version=4)


def _calls(source: str):
    """Every call in a code cell's source (IPython magics turned into Python first)."""
    import ast

    from IPython.core.inputtransformer2 import TransformerManager

    tree = ast.parse(TransformerManager().transform_cell(source))
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def is_training_call(call) -> bool:
    """``train(...)`` / ``attnbook.train.train(...)``, ``x.backward(...)``, or an optimizer's ``opt.step()``.

    A decoder's ``model.step(tokens, state)`` takes arguments and is not a training step;
    ``model.train()`` (the mode switch) is a method of a module, not the function ``train``.
    """
    import ast

    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "train"
    if isinstance(func, ast.Attribute):
        if func.attr == "backward":
            return True
        if func.attr == "step":
            return not call.args and not call.keywords
        if func.attr == "train":  # attnbook.train.train(...) or train.train(...)
            owner = func.value
            return (
                isinstance(owner, (ast.Name, ast.Attribute))
                and getattr(owner, "attr", getattr(owner, "id", "")) == "train"
            )
    return False


def training_cells(nb) -> list[int]:
    """Indices (among the code cells) of the cells whose code trains."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    return [i for i, cell in enumerate(code) if any(is_training_call(call) for call in _calls(cell.source))]


def trains(path: Path) -> bool:
    """Does this notebook's code train (so that its outputs depend on training)?"""
    return bool(training_cells(read_notebook(path)))


def __getattr__(name: str):
    """``TRAINING_NOTEBOOKS``, read when first imported (reading needs Jupyter, which a GPU box may lack)."""
    if name != "TRAINING_NOTEBOOKS":
        raise AttributeError(name)
    #: The notebooks whose outputs depend on training: they compute in float64 (the hygiene test
    #: checks it) and test_portability runs them under another CPU kernel path.
    globals()[name] = [p for p in NOTEBOOKS if trains(p)]
    return globals()[name]
