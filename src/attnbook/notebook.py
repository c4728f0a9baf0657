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

Under the test suite (the environment variable ``ATTNBOOK_STRICT_WARNINGS``
set), ``setup()`` also turns every DeprecationWarning raised while the course's
own code runs, a notebook cell or ``attnbook``, into an error, wherever the
warning is attributed: NumPy's warning about a tensor handed to Matplotlib is
raised inside Matplotlib, on behalf of the cell that passed the tensor.
"""

from __future__ import annotations

import inspect
import os
import random
import re
import sys
import textwrap
import warnings
from dataclasses import dataclass

__all__ = [
    "Setup",
    "in_colab",
    "setup",
    "show_source",
    "source_of",
    "LossFigure",
    "STRICT_WARNINGS",
    "strict_deprecations",
    "timing_machine",
]

#: Threads used everywhere unless asked otherwise: Colab's free tier and CI have 2 cores.
DEFAULT_THREADS = 2

#: When this environment variable is set (non-empty, not "0"), ``setup()`` calls :func:`strict_deprecations`.
#: The test suite sets it for the kernels it starts (``notebooks/conftest.py``), and so does ``attnbook.book.execute``.
STRICT_WARNINGS = "ATTNBOOK_STRICT_WARNINGS"

#: The file names IPython gives a cell's code: ipykernel's ``.../ipykernel_<pid>/<hash>.py``,
#: the terminal's ``<ipython-input-...>``.
_CELL_FILE = re.compile(r"ipykernel_\d+[\\/]\d+\.py$|^<ipython-input-")


def _is_course_frame(frame) -> bool:
    if frame.f_code is _strict_tensor_array.__code__:  # the strict mode's own check, not the course
        return False
    name = frame.f_globals.get("__name__") or ""
    return name == "attnbook" or name.startswith("attnbook.") or bool(_CELL_FILE.search(frame.f_code.co_filename))


class _CourseCodeRunning:
    """A warnings-filter pattern that matches while a notebook cell or ``attnbook`` is on the call stack.

    The :mod:`warnings` machinery calls ``match(module)`` on a filter's module
    pattern; this one ignores the name the warning is attributed to and looks
    at who is running instead.
    """

    def match(self, module: str) -> bool:
        frame = sys._getframe(1)
        while frame is not None:
            if _is_course_frame(frame):
                return True
            frame = frame.f_back
        return False

    def __eq__(self, other) -> bool:
        return isinstance(other, _CourseCodeRunning)

    def __hash__(self) -> int:
        return hash(_CourseCodeRunning)

    def __repr__(self) -> str:
        return "<while a notebook cell or attnbook runs>"


_STRICT_FILTER = ("error", None, DeprecationWarning, _CourseCodeRunning(), 0)


def strict_deprecations() -> None:
    """Raise every DeprecationWarning that the course's code provokes, as an error; idempotent.

    A warning counts as the course's when a notebook cell or a module of
    ``attnbook`` is on the call stack when it is raised, whichever library
    raises it: NumPy 2's warning about a tensor's ``__array__`` (it takes no
    ``copy`` argument) is raised inside Matplotlib, on behalf of the cell that
    handed it a tensor. NumPy raises that warning only on some of Matplotlib's
    paths (``imshow``, ``bar``, not ``plot``), and which ones varies with the
    versions; so that the suite holds every chapter to the rule "give Matplotlib
    arrays, never tensors" on any version, a tensor that Matplotlib converts
    raises the same DeprecationWarning here. Warnings of the machinery around a
    cell (the kernel, the display of a figure after the cell ran) keep their
    usual treatment.
    """
    if _STRICT_FILTER not in warnings.filters:
        warnings.filters.insert(0, _STRICT_FILTER)
    # The public call tells the warnings machinery that its filters changed (it caches their decisions),
    # and covers warnings attributed to attnbook itself.
    warnings.filterwarnings("error", category=DeprecationWarning, module=r"attnbook(\.|$)")
    _warn_when_matplotlib_converts_tensors()


_tensor_to_array = None  # torch's own Tensor.__array__, once strict mode replaced it


def _warn_when_matplotlib_converts_tensors() -> None:
    global _tensor_to_array
    import torch

    if torch.Tensor.__array__ is not _strict_tensor_array:
        _tensor_to_array = torch.Tensor.__array__
        torch.Tensor.__array__ = _strict_tensor_array


def _strict_tensor_array(self, *args, **kwargs):
    """``Tensor.__array__`` in strict mode: as torch's, with a DeprecationWarning when Matplotlib asks."""
    if _matplotlib_running():
        warnings.warn(
            "a tensor was passed to Matplotlib, which converts it with NumPy's __array__ protocol; NumPy 2 "
            "deprecates that for tensors (their __array__ takes no copy argument): pass tensor.numpy() instead",
            DeprecationWarning,
            stacklevel=2,
        )
    return _tensor_to_array(self, *args, **kwargs)


def _matplotlib_running() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if (frame.f_globals.get("__name__") or "").startswith("matplotlib."):
            return True
        frame = frame.f_back
    return False


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


def _processor_name() -> str:
    """The CPU's model name where the system tells it (Linux's /proc/cpuinfo), else what Python knows."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine() or "an unnamed processor"


def timing_machine(threads: int | None = None) -> str:
    """The line a timing cell prints first: the kind of machine its times hold for.

    The processor, the threads the timed code ran on (``threads``, or PyTorch's current
    count) and, where the system reports it, the load average against the logical CPUs:
    a machine busier than its CPUs inflates every time and makes ratios noisy, and the
    line says so. A wall-clock figure holds for the kind of machine that made it; this
    line puts that machine beside the figures in the stored output.
    """
    import torch

    threads = torch.get_num_threads() if threads is None else threads
    line = f"measured on: {_processor_name()}, {threads} thread{'' if threads == 1 else 's'}"
    if hasattr(os, "getloadavg"):
        load, cpus = os.getloadavg()[0], os.cpu_count() or 1
        line += f"; load average {load:.1f} on {cpus} logical CPUs"
        if load > cpus:
            line += " (a busy machine: times inflated and noisy)"
    return line


def _pick_device(device: str | None) -> str:
    from .attention import attention_kernels_for
    from .checks import resolve_device

    wanted = device or os.environ.get("ATTNBOOK_DEVICE", "cpu")
    try:
        chosen = resolve_device(wanted)
        attention_kernels_for(chosen)  # on a GPU: kernels that need no plan for each new shape of batch
        return str(chosen)
    except RuntimeError as err:
        raise RuntimeError(
            f"device={wanted!r} was asked for but {err}; in Colab choose "
            "Runtime > Change runtime type > GPU, or pass device='cpu'"
        ) from None


def setup(
    seed: int = 0,
    threads: int = DEFAULT_THREADS,
    device: str | None = None,
    figures: bool = True,
    language: str | None = None,
) -> Setup:
    """Seed everything, fix the thread count, pick the device, set figure defaults.

    ``device`` is ``"cpu"`` unless asked otherwise (argument, or the environment
    variable ``ATTNBOOK_DEVICE``); ``"auto"`` takes a GPU when there is one.
    The CPU is the default so that the stored outputs are reproduced exactly.
    ``language`` is the language of the exercises' checkers: the Chinese edition's
    notebooks pass ``"zh"``; left out, it stays what it was (``ATTNBOOK_LANGUAGE``, else English).
    """
    import numpy as np
    import torch

    from attnbook.language import set_language

    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if language is not None:
        set_language(language)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    chosen = _pick_device(device)
    if figures:
        _figure_defaults()
    from attnbook.train import use_loss_figure

    use_loss_figure(LossFigure.for_training if figures else None)  # train() draws its loss curve with it
    if os.environ.get(STRICT_WARNINGS, "") not in ("", "0"):
        strict_deprecations()
    return Setup(seed=seed, threads=threads, device=chosen, colab=in_colab())


def _in_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _figure_defaults() -> None:
    import matplotlib as mpl

    if _in_kernel():  # figures inline, whatever MPLBACKEND says
        mpl.use("module://matplotlib_inline.backend_inline")
        # Importing the backend hooks it into IPython now rather than at the first pyplot call, so that
        # a Figure made without pyplot (attnbook.diagrams) shows as an image when a cell ends with it.
        import matplotlib_inline.backend_inline  # noqa: F401

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


# --- The loss curve of a training run ---------------------------------------------


def _watched_interactively() -> bool:
    """True in a notebook a person is running: the front end accepts ``input()``.

    Notebooks executed by nbclient or nbval are run with stdin disabled, so
    they get no live updates: they display only the final figure, and the
    stored output holds exactly one clean figure.
    """
    if not _in_kernel():
        return False
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    return bool(getattr(kernel, "_allow_stdin", False))


class LossFigure:
    """The loss curve of :func:`attnbook.train.train`, as two of its callbacks.

    ``on_step`` redraws it every ``every`` optimizer steps and ``on_epoch``
    after every epoch, while a person watches (``live``); ``finish`` shows the
    final figure once, so an executed notebook stores exactly one clean figure.
    """

    def __init__(self, history, title: str | None = None, live: bool = False, every: int = 20) -> None:
        import matplotlib.pyplot as plt

        self.history, self.title, self.live, self.every = history, title, live, every
        # Made by pyplot, so that the notebook knows how to render it; closed at once,
        # so that pyplot does not show it a second time when the cell ends.
        self.figure = plt.figure(figsize=(6.0, 3.4), layout="constrained")
        plt.close(self.figure)
        self.ax = self.figure.add_subplot()
        self.handle = None
        if live:
            from IPython.display import display

            history.plot(self.ax, title)
            self.handle = display(self.figure, display_id=True)

    @classmethod
    def for_training(cls, history, title, *, plot: bool | None, every: int) -> LossFigure | None:
        """The figure :func:`~attnbook.train.train` draws: by default in a notebook, live when a person watches."""
        if plot is None:
            plot = _in_kernel()
        if not plot:
            return None
        return cls(history, title, _watched_interactively(), every)

    def _redraw(self) -> None:
        if self.live and self.handle is not None:
            self.history.plot(self.ax, self.title)
            self.handle.update(self.figure)

    def on_step(self, step) -> None:
        if step.step % self.every == 0:
            self._redraw()

    def on_epoch(self, log) -> None:
        self._redraw()

    def finish(self) -> None:
        self.history.plot(self.ax, self.title)
        if self.handle is not None:
            self.handle.update(self.figure)
        else:
            from IPython.display import display

            display(self.figure)
