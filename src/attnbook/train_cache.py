"""Runs of :func:`attnbook.train.train` remembered within one test session, so that the same run is not made twice.

The chapters retrain some models on purpose: chapter 8 compares the
Transformer with chapter 3's attention RNN, trained exactly as chapter 3
trains it, and chapter 3 trains chapter 2's plain encoder–decoder for the
first four of chapter 2's six epochs. A reader who opens chapter 8 alone must
be able to run it, so each notebook trains what it shows. When the test suite
executes the notebooks one after another, though, the second run would compute
again, bit for bit, what the first one computed.

With the environment variable :data:`ENV` naming a folder (the suite's
``notebooks/conftest.py`` sets it for the notebooks' kernels; nothing else
does), :func:`~attnbook.train.train` writes, after every epoch of a run it can
remember, the model's weights, PyTorch's random state and the
:class:`~attnbook.train.History` so far, under a key made of everything the
run depends on: the model's class, structure and starting weights, every
batch of every epoch and of validation, the settings of the loop, the default
dtype, the threads, the CPU kernel path, the versions of PyTorch and Python,
the code of each module's ``forward`` and the library's own source. (It does
not see changes made while the process runs, such as a function of the library
replaced in a notebook, a hook, or parameters frozen by hand: the notebooks that
share runs do none of these.) A later run with the same key, for as many
epochs or fewer, reads them back instead of training: the same weights, the
same random state, the same printed lines (with the first run's durations),
the same figure. A run it cannot see whole is never remembered: one with its
own optimizer, scheduler or step callback, with batches made by a function
or by a loader that would be moved on by reading it ahead, on a GPU, or drawn
live for a person watching. Gradients are not kept: a run read back leaves
none on the parameters. Without the variable, nothing
is read or written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
from pathlib import Path

import torch
from torch import nn

from .files import written_whole

#: The environment variable that names the folder of remembered runs.
ENV = "ATTNBOOK_TRAIN_CACHE"
#: What decides which kernels run (and so the last bits of every result), besides the threads.
_KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")

_library_digest: str | None = None


def _library_source() -> str:
    """A digest of every source file of the library: a change to any of them is another run."""
    global _library_digest
    if _library_digest is None:
        digest = hashlib.sha256()
        package = Path(__file__).resolve().parent
        for path in sorted(package.rglob("*.py")):
            digest.update(str(path.relative_to(package)).encode())
            digest.update(path.read_bytes())
        _library_digest = digest.hexdigest()
    return _library_digest


def _add_tensor(digest, tensor: torch.Tensor) -> None:
    tensor = tensor.detach().cpu().contiguous()
    digest.update(f"{tensor.dtype}{tuple(tensor.shape)}".encode())
    digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())


def _add_batch(digest, batch) -> None:
    if isinstance(batch, torch.Tensor):
        _add_tensor(digest, batch)
    elif dataclasses.is_dataclass(batch):
        for item in dataclasses.fields(batch):
            digest.update(item.name.encode())
            _add_batch(digest, getattr(batch, item.name))
    elif isinstance(batch, (list, tuple)):
        digest.update(f"{type(batch).__name__}{len(batch)}".encode())
        for item in batch:
            _add_batch(digest, item)
    else:
        digest.update(repr(batch).encode())


class RememberedRun:
    """One run's epochs: epoch N under the key of everything up to its batches, so a shorter run finds them."""

    def __init__(self, root: Path, keys: list[str]) -> None:
        self.root, self.keys = root, keys

    def _path(self, epoch: int) -> Path:
        return self.root / self.keys[epoch - 1][:32] / f"epoch-{epoch}.pt"

    def restore(self, epochs: int, model: nn.Module, history) -> bool:
        """Put ``model``, PyTorch's random state and ``history`` where a run with this key was after ``epochs``
        epochs; ``False`` (nothing changed) if none got that far."""
        path = self._path(epochs)
        if not path.is_file():
            return False
        state = torch.load(path, weights_only=False)
        model.load_state_dict(state["weights"])
        torch.set_rng_state(state["rng"])
        history.__dict__.update(state["history"].__dict__)  # a history of its own, just read
        return True

    def write(self, epoch: int, model: nn.Module, history) -> None:
        """Keep the run as it is after ``epoch`` epochs (written whole, or not at all)."""
        path = self._path(epoch)
        path.parent.mkdir(parents=True, exist_ok=True)
        with written_whole(path) as tmp:  # saved at once: no copy of the weights or the history is needed
            torch.save({"weights": model.state_dict(), "rng": torch.get_rng_state(), "history": history}, tmp)


def _read_again(batches, *, training: bool) -> bool:
    """Whether reading ``batches`` for the key leaves the run as it was: a list; for training, a loader that the
    loop puts at each epoch (``set_epoch``, as :func:`attnbook.data.make_batches` gives); for validation, a loader
    that does not shuffle. A loader that draws its order from a generator of its own is never read ahead."""
    if isinstance(batches, (list, tuple)):
        return True
    if not isinstance(batches, torch.utils.data.DataLoader) or batches.generator is not None:
        return False
    sampler = batches.batch_sampler
    return hasattr(sampler, "set_epoch") if training else getattr(sampler, "shuffle", True) is False


def _add_code(digest, model: nn.Module) -> None:
    """What each module of ``model`` computes: its class and the code of its ``forward``."""
    for name, module in model.named_modules():
        forward = getattr(type(module).forward, "__code__", None)
        digest.update(f"{name}:{type(module).__module__}.{type(module).__qualname__}".encode())
        if forward is not None:
            digest.update(forward.co_code + repr(forward.co_consts).encode() + repr(forward.co_names).encode())


def remembered_run(
    model: nn.Module, train_batches, valid_batches, epochs: int, settings: dict, batches_of_epoch
) -> RememberedRun | None:
    """The place of this run among the remembered ones, or ``None`` when runs are not remembered or it cannot be.

    ``settings``: every argument of the loop that changes what it computes;
    ``batches_of_epoch(train_batches, epoch)``: the loop's own way of reading an epoch's batches.
    """
    folder = os.environ.get(ENV)
    if not folder:
        return None
    if not _read_again(train_batches, training=True) or not (
        valid_batches is None or _read_again(valid_batches, training=False)
    ):
        return None  # reading these ahead for the key would change the run, or they cannot be read twice
    if any(p.device.type != "cpu" for p in model.parameters()):
        return None
    digest = hashlib.sha256()
    context = {
        "model": f"{type(model).__module__}.{type(model).__qualname__}\n{model!r}\n{getattr(model, 'config', None)!r}",
        "settings": sorted(settings.items()),
        "dtype": str(torch.get_default_dtype()),
        "threads": torch.get_num_threads(),
        "kernels": [os.environ.get(name) for name in _KERNEL_VARIABLES],
        "capability": torch.backends.cpu.get_cpu_capability(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "versions": (torch.__version__, platform.python_version()),
        "library": _library_source(),
    }
    digest.update(repr(context).encode())
    _add_code(digest, model)
    for name, value in model.state_dict().items():
        digest.update(name.encode())
        _add_tensor(digest, value)
    rng = torch.get_rng_state()  # a loader draws from it each time it is read: the run must not see these reads
    try:
        for batch in valid_batches or []:
            _add_batch(digest, batch)
        # An epoch's batches can depend on the epoch (a loader reshuffles): the key covers the epochs asked for,
        # and a run of more epochs keeps each epoch under the key of the epochs so far.
        keys = []
        for epoch in range(1, epochs + 1):
            digest.update(f"epoch {epoch}".encode())
            for batch in batches_of_epoch(train_batches, epoch):
                _add_batch(digest, batch)
            keys.append(digest.copy().hexdigest())
    finally:
        torch.set_rng_state(rng)
    return RememberedRun(Path(folder), keys)
