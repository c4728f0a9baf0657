"""Argument checks: what the library says when it is given something it cannot use.

A wrong argument deep inside a model usually surfaces as an index error in an
embedding or a shape error three layers down. The models check their inputs at
the door instead, with the functions below, and say what was wrong and what to
do about it. They sit at the bottom of the library, beside :mod:`attnbook.masks`,
so that every module can use them:

- :func:`check_positive` and :func:`check_probability` for sizes and rates;
- :func:`check_token_ids` for a tensor of token indices and its vocabulary;
- :func:`check_mask` for a boolean mask and the scores it must broadcast to;
- :func:`check_rows` for the batch rows a decoder state's ``select`` keeps (beam search);
- :func:`resolve_device` for a device name (``"auto"``, ``"cpu"``, ``"cuda:1"``, ...).

Checks of a tensor's shape and dtype cost nothing. Checks of its *values*
(token ids inside the vocabulary, a sentence that is not all padding) read the
tensor: on a GPU each is a wait for the device, the queue of work emptied.
Inside :func:`values_unchecked` they are left out; the command line's training
step runs there, on batches it built itself (:func:`values_checked` says which
way it is).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

__all__ = [
    "check_positive",
    "check_probability",
    "check_token_ids",
    "check_mask",
    "check_rows",
    "resolve_device",
    "values_unchecked",
    "values_checked",
]

_values_checked = True


@contextmanager
def values_unchecked() -> Iterator[None]:
    """Inside, the checks that read a tensor's values are left out (those of shapes and dtypes stay)."""
    global _values_checked
    before, _values_checked = _values_checked, False
    try:
        yield
    finally:
        _values_checked = before


def values_checked() -> bool:
    """Whether the checks that read a tensor's values are made here (everywhere but in :func:`values_unchecked`)."""
    return _values_checked


def check_positive(**values: int) -> None:
    """Raise a ``ValueError`` unless every value is an ``int`` of at least 1: ``check_positive(d_model=512)``."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def check_probability(p: float, name: str) -> None:
    """Raise a ``ValueError`` unless ``p`` is in ``[0, 1)`` (a dropout rate, a smoothing weight)."""
    if not 0.0 <= float(p) < 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1), got {p}")


def check_token_ids(ids: torch.Tensor, vocab_size: int, name: str = "token ids") -> None:
    """Raise a clear error unless ``ids`` is an integer tensor with values in ``[0, vocab_size)``."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token indices, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token indices, got dtype {ids.dtype}")
    if ids.numel() == 0 or not _values_checked:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise IndexError(
            f"{name} contain the index {bad}, outside the vocabulary of size {vocab_size} "
            f"(valid indices are 0 to {vocab_size - 1}); was the batch built with another vocabulary?"
        )


def check_mask(mask: torch.Tensor, shape: torch.Size | tuple[int, ...], name: str = "mask") -> None:
    """Raise a clear error unless ``mask`` is boolean and broadcasts to ``shape``."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor (True = ignore), got dtype {mask.dtype}; "
            f"convert a 0/1 mask with `{name}.bool()` or a lengths vector with attnbook.masks.padding_mask"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, tuple(shape))
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(shape):
        raise ValueError(f"{name} of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(shape)}")


def check_rows(index: torch.Tensor, batch_size: int) -> None:
    """Raise unless ``index`` is a 1-D integer tensor of rows of a batch of ``batch_size`` (repeats allowed)."""
    if (
        not isinstance(index, torch.Tensor)
        or index.dim() != 1
        or index.is_floating_point()
        or index.dtype == torch.bool
    ):
        raise TypeError(
            "select takes a 1-D tensor of integer row indices, got "
            f"{getattr(index, 'dtype', type(index).__name__)} of shape {tuple(getattr(index, 'shape', ()))}"
        )
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= batch_size):
        raise IndexError(f"select: row indices must be in [0, {batch_size}), got {index.tolist()}")


def resolve_device(name: str, prefer: Sequence[str] = ("cuda", "mps")) -> torch.device:
    """The device that ``name`` means on this machine, or a clear error.

    ``"auto"`` is the first of ``prefer`` that PyTorch sees (a CUDA GPU, then
    Apple's), else the CPU. Any other name is taken as PyTorch spells devices
    (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``): a ``ValueError`` when it is
    not a device, a ``RuntimeError`` when this machine does not have it.
    """
    available = {"cuda": torch.cuda.is_available, "mps": _mps_available}
    if name == "auto":
        chosen = next((kind for kind in prefer if kind in available and available[kind]()), "cpu")
        return torch.device(chosen)
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {name!r}: use 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'") from None
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"unknown device {name!r}: use 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA GPU is visible to PyTorch on this machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise RuntimeError(f"there is no GPU {device.index}: PyTorch sees {torch.cuda.device_count()}")
    if device.type == "mps" and not _mps_available():
        raise RuntimeError("Apple's GPU (mps) is not available to PyTorch on this machine")
    return device


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()
