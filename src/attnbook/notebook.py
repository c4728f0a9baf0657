"""Notebook conventions: one setup call, and a way to show the library's source.

Every chapter starts with ``setup()``: it seeds Python, NumPy and PyTorch, fixes
the thread count (so numbers printed on a laptop, in CI and in Colab agree),
picks the device and sets figure defaults. It leaves the choice of CPU kernels
to PyTorch: a chapter whose outputs depend on training computes in float64
instead, which makes its printed numbers the same on every CPU (see the book's
page on reproducibility). Every chapter that packages an idea
shows the packaged code with ``show_source``; because the source lands in the
stored output, nbval notices when the library changed but the notebook was not
re-run.
"""

from __future__ import annotations

import inspect
import os
import random
import sys
import textwrap
from dataclasses import dataclass

__all__ = ["Setup", "in_colab", "setup", "show_source", "source_of"]

#: Threads used everywhere unless asked otherwise: Colab's free tier and CI have 2 cores.
DEFAULT_THREADS = 2

def in_colab() -> bool:
    """True when running inside Google Colab."""
    return "google.colab" in sys.modules


@dataclass(frozen=True)
class Setup:
    """What ``setup()`` fixed; its ``repr`` is the one line a notebook prints."""

    seed: int
    threads: int
    device: str
    colab: bool

    def __repr__(self) -> str:
        where = "Colab" if self.colab else "local"
        return f"attnbook setup: seed={self.seed}, threads={self.threads}, device={self.device}, running {where}"


def _pick_device(device: str | None) -> str:
    import torch

    wanted = device or os.environ.get("ATTNBOOK_DEVICE", "cpu")
    if wanted == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if wanted == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "device='cuda' was asked for but no CUDA GPU is visible; in Colab choose "
            "Runtime > Change runtime type > GPU, or pass device='cpu'"
        )
    if wanted not in {"cpu", "cuda", "mps"}:
        raise ValueError(f"unknown device {wanted!r}: use 'cpu', 'cuda', 'mps' or 'auto'")
    return wanted


def setup(seed: int = 0, threads: int = DEFAULT_THREADS, device: str | None = None, figures: bool = True) -> Setup:
    """Seed everything, fix the thread count, pick the device, set figure defaults.

    ``device`` is ``"cpu"`` unless asked otherwise (argument, or the environment
    variable ``ATTNBOOK_DEVICE``); ``"auto"`` takes a GPU when there is one.
    The CPU is the default so that the stored outputs are reproduced exactly.
    """
    import numpy as np
    import torch

    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    chosen = _pick_device(device)
    if figures:
        _figure_defaults()
    return Setup(seed=seed, threads=threads, device=chosen, colab=in_colab())


def _in_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _figure_defaults() -> None:
    import matplotlib as mpl

    if _in_kernel():  # figures inline, whatever MPLBACKEND says
        mpl.use("module://matplotlib_inline.backend_inline")

    mpl.rcParams.update(
        {
            "figure.figsize": (6.0, 3.6),
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "font.size": 10,
            "image.cmap": "viridis",
            "svg.hashsalt": "attnbook",
        }
    )


def source_of(obj) -> str:
    """The source code of a library function, class or method, dedented."""
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (TypeError, OSError) as err:
        raise TypeError(f"cannot show the source of {obj!r}: {err}") from None


def show_source(obj):
    """Display the source of a library object, highlighted, in a notebook.

    The returned object's plain-text form is the source itself, so the stored
    output changes whenever the library does.
    """
    from IPython.display import Code

    return Code(source_of(obj), language="python")
