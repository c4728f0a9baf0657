"""A second device on a machine that has only a CPU: a tensor left behind on the CPU fails as on a GPU.

On a GPU, an operation that meets a tensor on the GPU and a tensor (not a
0-dimensional one) on the CPU stops with "Expected all tensors to be on the
same device". On a machine without a GPU nothing ever stops, so a forgotten
``.to(device)`` hides until someone trains on a GPU. This module lends the
tests a second device with real values:

- :class:`Elsewhere` is a tensor that reports PyTorch's ``meta`` device and holds
  its values on the CPU. Every operation on it checks its operands the way a
  GPU's kernels do: an ``Elsewhere`` tensor meets only others like it, Python
  numbers and 0-dimensional CPU tensors; anything else raises
  :class:`MixedDevices`, naming the operation and the shape of the tensor left
  on the CPU. Its results are ``Elsewhere`` tensors again. (``meta`` is the one
  device besides the CPU that PyTorch's autograd accepts without a driver;
  what matters is that it is not the CPU.)
- :class:`SecondDevice` is the mode under which code moves tensors there:
  ``.to(meta)``, ``.to("meta")``, ``model.to(device)`` and factories called with
  ``device=`` the second device make ``Elsewhere`` tensors; ``.cpu()``,
  ``.to("cpu")``, ``.item()``, ``.tolist()`` and ``float(...)`` read them back, as
  a GPU's tensors are read.

Within ``with SecondDevice() as device:``, ``device`` is the ``torch.device``
to hand to the code under test in place of ``cuda``.
"""

from __future__ import annotations

import importlib

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

#: The device the second device reports.
DEVICE = torch.device("meta")


class MixedDevices(RuntimeError):
    """An operation met a tensor on the second device and one on the CPU: a GPU would stop here."""


def _is_second(device) -> bool:
    return device is not None and torch.device(device).type == DEVICE.type


#: Operations that copy between devices (``dst.copy_(src)``, as ``load_state_dict`` does): a GPU allows them.
#: Packed sequences keep their batch sizes on the CPU whatever the device of the sequences.
_COPIES = {
    torch.ops.aten.copy_.default,
    torch.ops.aten._copy_from.default,
    torch.ops.aten._copy_from_and_resize.default,
    torch.ops.aten._pack_padded_sequence.default,
    torch.ops.aten._pad_packed_sequence.default,
    torch.ops.aten.gru.data,
    torch.ops.aten.lstm.data,
}
#: The results they leave on the CPU: the batch sizes of a packed sequence, the lengths of an unpacked one.
_LEFT_ON_THE_CPU = {torch.ops.aten._pack_padded_sequence.default: {1}, torch.ops.aten._pad_packed_sequence.default: {1}}


#: Operations whose indices may stay on the CPU when the indexed tensor is on a GPU (``x[cpu_indices]``).
_INDEXING = {torch.ops.aten.index.Tensor, torch.ops.aten.index_put_.default, torch.ops.aten.index_put.default}


def _listed(index):
    return torch.tensor(index) if isinstance(index, list) else index


def _is_cpu_tensor(x) -> bool:
    return isinstance(x, torch.Tensor) and not isinstance(x, Elsewhere) and x.device.type == "cpu"


class Elsewhere(torch.Tensor):
    """A tensor on the second device: reports ``meta``, keeps its values on the CPU in ``.held``."""

    held: torch.Tensor

    @property
    def is_meta(self) -> bool:  # it holds values: load_state_dict copies into it (it skips meta parameters)
        return False

    @staticmethod
    def __new__(cls, held: torch.Tensor) -> Elsewhere:
        assert not isinstance(held, Elsewhere)
        made = torch.Tensor._make_wrapper_subclass(
            cls,
            held.size(),
            strides=held.stride(),
            storage_offset=held.storage_offset(),
            dtype=held.dtype,
            layout=held.layout,
            device=DEVICE,
            requires_grad=held.requires_grad,
        )
        made.held = held
        return made

    def __repr__(self) -> str:
        return f"Elsewhere({self.held!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}

        copies = func in _COPIES  # a copy between devices is allowed, as on a GPU, and lengths packed on the CPU
        if func in _INDEXING:  # so are indices on the CPU: PyTorch moves them
            args = (args[0], tree_map(lambda i: Elsewhere(i) if _is_cpu_tensor(i) else i, args[1]), *args[2:])

        def unwrap(x):
            if isinstance(x, Elsewhere):
                return x.held
            if isinstance(x, torch.Tensor) and x.dim() > 0 and not copies:
                raise MixedDevices(
                    f"{func} met a tensor of shape {tuple(x.shape)} on the {x.device.type} "
                    "beside tensors on the second device: on a GPU this stops with "
                    "'Expected all tensors to be on the same device'"
                )
            return x

        def on_cpu(value):
            return torch.device("cpu") if isinstance(value, torch.device) and _is_second(value) else value

        kwargs = {k: on_cpu(v) for k, v in kwargs.items()}
        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))
        if func is torch.ops.aten._local_scalar_dense.default:
            return out
        if func in _LEFT_ON_THE_CPU:
            return tuple(x if i in _LEFT_ON_THE_CPU[func] else Elsewhere(x) for i, x in enumerate(out))
        return tree_map(lambda x: Elsewhere(x) if isinstance(x, torch.Tensor) else x, out)


#: Reading a value back to the host: allowed, as on a GPU (it synchronizes there).
_HOST_READS = {
    torch.Tensor.__float__,
    torch.Tensor.__int__,
    torch.Tensor.__bool__,
    torch.Tensor.__index__,
    torch.Tensor.__format__,
    torch.Tensor.__repr__,
    torch.Tensor.item,
    torch.Tensor.tolist,
    torch.Tensor.numpy,
}


_OPTIMIZER_MODULES = [importlib.import_module(f"torch.optim.{name}") for name in ("optimizer", "adam", "adamw", "sgd")]


class _MadeThere(TorchDispatchMode):
    """Tensors that PyTorch's own C++ code makes "on the device of" a second-device tensor: made on the CPU, held."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _is_second(kwargs.get("device")):
            return Elsewhere(func(*args, **{**kwargs, "device": torch.device("cpu")}))
        return func(*args, **kwargs)


class SecondDevice(TorchFunctionMode):
    """While active, :data:`DEVICE` is a second device whose tensors refuse to meet the CPU's."""

    def __enter__(self) -> torch.device:
        # PyTorch's fused optimizers accept the devices that have their kernels: here, the CPU's, on what is held
        check = _OPTIMIZER_MODULES[0]._device_dtype_check_for_fused
        self._patched = [m for m in _OPTIMIZER_MODULES if getattr(m, "_device_dtype_check_for_fused", None) is check]
        for module in self._patched:
            module._device_dtype_check_for_fused = lambda p, cuda_unsupported=False: (
                None if isinstance(p, Elsewhere) else check(p, cuda_unsupported)
            )
        self._fused_check = check
        self._made_there = _MadeThere()
        self._made_there.__enter__()
        super().__enter__()
        return DEVICE

    def __exit__(self, *exc):
        for module in self._patched:
            module._device_dtype_check_for_fused = self._fused_check
        done = super().__exit__(*exc)
        self._made_there.__exit__(*exc)
        return done

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.to:
            copy = bool(kwargs.get("copy"))
            device, dtype, _, _ = torch._C._nn._parse_to(*args[1:], **{k: v for k, v in kwargs.items() if k != "copy"})
            x = args[0]
            inner = x.held if isinstance(x, Elsewhere) else x
            if _is_second(device):
                moved = inner.to(dtype=dtype or inner.dtype, copy=copy)
                return x if isinstance(x, Elsewhere) and moved is inner else Elsewhere(moved)
            if device is not None and device.type == "cpu" and isinstance(x, Elsewhere):
                return inner.to(dtype=dtype or inner.dtype, copy=True)
        if func is torch.Tensor.cpu and isinstance(args[0], Elsewhere):
            return args[0].held.clone()
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and isinstance(args[0], Elsewhere):
            # PyTorch would make a list index, or the number in x[i] = 0.0, a tensor on the reported device (meta),
            # which holds no values: here they become tensors on the CPU (indices) and on the second device (values)
            index = args[1]
            index = tuple(_listed(i) for i in index) if isinstance(index, tuple) else _listed(index)
            if func is torch.Tensor.__getitem__:
                return func(args[0], index)
            value = args[2]
            if not isinstance(value, torch.Tensor):
                value = Elsewhere(torch.tensor(value, dtype=args[0].dtype))
            return func(args[0], index, value)
        if func in _HOST_READS and isinstance(args[0], Elsewhere):
            return func(args[0].held, *args[1:], **kwargs)
        if func is torch.Tensor.__reduce_ex__ and isinstance(args[0], Elsewhere):
            return args[0].held.__reduce_ex__(*args[1:])  # saved as the CPU tensor it holds
        if func is torch.nn.functional.scaled_dot_product_attention and any(isinstance(a, Elsewhere) for a in args):
            return _attention_on_the_second_device(*args, **kwargs)
        if _is_second(kwargs.get("device")) and func is not torch._C._nn._parse_to:  # a factory: made there
            out = func(*args, **{**kwargs, "device": torch.device("cpu")})
            return tree_map(lambda x: Elsewhere(x) if isinstance(x, torch.Tensor) else x, out)
        return func(*args, **kwargs)


def _attention_on_the_second_device(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **rest):
    """``F.scaled_dot_product_attention`` on the second device: the operands checked, then the formula.

    PyTorch's fused attention picks its kernel by the device its operands
    report, and for ``meta`` it makes helper tensors that hold no values; the
    formula, in operations that each check their operands, computes the same.
    """
    if rest.get("enable_gqa"):
        raise NotImplementedError("the second device does not emulate grouped-query attention")
    for name, t in (("key", k), ("value", v), ("attn_mask", attn_mask)):
        if isinstance(t, torch.Tensor) and not isinstance(t, Elsewhere) and t.dim() > 0:
            raise MixedDevices(
                f"scaled_dot_product_attention got its {name} of shape {tuple(t.shape)} on the {t.device.type} "
                "and its query on the second device"
            )
    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if is_causal:
        causal = Elsewhere(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril())
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    weights = torch.softmax(scores, dim=-1)
    if dropout_p:
        weights = torch.nn.functional.dropout(weights, dropout_p)
    return weights @ v
