"""Requirements measured by behaviour, whatever the learner's code looks like.

An exercise that asks for a cache or for a state of fixed size states a requirement about work and memory, not about
syntax. These measures watch what the learner's function does:

- :func:`count_projections` counts the projections a function computes (chapter 8: the memory's keys and values
  projected once, the queries one position at a time), by following which inputs each tensor was computed from;
- :func:`state_size` counts the numbers a state holds, whatever holds them (chapter 9: a recurrent step's state
  must not grow with the sequence);
- :func:`shapes_made` lists the shapes of the tensors a function's operations make (chapter 6: a rotation computed
  pair by pair builds no d x d matrix).
"""

from __future__ import annotations

import functools
import types

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

__all__ = ["count_projections", "state_size", "shapes_made"]


def _meets(labels: list[set], data: str, weights: set[str]) -> bool:
    """Whether an operation brings ``data`` (not yet projected) together with one of ``weights`` (not yet applied
    to it): the work of a projection, be it a matrix product, an einsum, or a multiply then a sum."""
    return any(data in a and not a & weights for a in labels) and any(a & weights and data not in a for a in labels)


def count_projections(fn, args, named: dict, projections: dict) -> dict[str, int]:
    """How many times ``fn(*args)`` does the work of each projection.

    ``named`` names the input tensors (``{"memory": memory, "w_k": w_k, ...}``); ``projections`` maps a count's name
    to (the data, the weights that project it): ``{"memory": ("memory", {"w_k", "w_v"})}``. Every tensor is labelled
    with the named inputs it was computed from, the labels follow each operation, and an operation that first
    brings the data and one of its weights together counts as one projection, whatever operation it is (a matrix
    product, an einsum, a multiply then a sum). The labels follow the data into NumPy too (``tensor.numpy()``, and
    back through ``torch.as_tensor`` or ``torch.tensor``), so that work done there is counted as well.
    """
    from torch.overrides import TorchFunctionMode
    from torch.utils._pytree import tree_flatten

    labels = {id(t): {name} for name, t in named.items()}
    kept = list(named.values())  # alive, so that no id is reused
    counts = dict.fromkeys(projections, 0)

    def met(found: list[set]) -> set:
        for count, (data, weights) in projections.items():
            if _meets(found, data, weights):
                counts[count] += 1
        return set().union(*found) if found else set()

    class Labels(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            inputs = [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)]
            seen = met([labels.get(id(t), set()) for t in inputs])
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    labels[id(t)] = labels.get(id(t), set()) | seen
                    kept.append(t)
            return out

    class Crossings(TorchFunctionMode):
        """Tensors into NumPy arrays that keep their labels (:class:`_Followed`), and such arrays back."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.Tensor.numpy and isinstance(out, np.ndarray):
                out = out.view(_Followed)
                out.labels, out.met = set(labels.get(id(args[0]), set())), met
            elif func in (torch.as_tensor, torch.tensor) and isinstance(out, torch.Tensor):
                arrays = [a for a in tree_leaves(args[:1]) if isinstance(a, _Followed)]
                if arrays:
                    labels[id(out)] = labels.get(id(out), set()).union(*(a.labels for a in arrays))
                    kept.append(out)
            return out

    with torch.no_grad(), Labels(), Crossings():
        fn(*args)
    return counts


class _Followed(np.ndarray):
    """A NumPy array that carries the labels of :func:`count_projections` through NumPy: every ufunc (``@``, ``+``,
    ``exp``, a reduction, in place or not) and every function (``einsum``, ``where``, ``concatenate``) reports the
    labels its inputs bring together, and its results carry their union; views, copies and assignments keep them."""

    labels: set
    met = None

    def __array_finalize__(self, obj) -> None:
        self.labels = set(getattr(obj, "labels", set()))
        self.met = getattr(obj, "met", None)

    def _meet(self, values) -> set:
        found = [set(a.labels) for a in tree_leaves(list(values)) if isinstance(a, _Followed)]
        return self.met(found) if self.met is not None else set().union(*found)

    def _result(self, out, seen: set):
        if isinstance(out, tuple):
            return tuple(self._result(o, seen) for o in out)
        if isinstance(out, np.ndarray):
            out = out.view(_Followed)
            out.labels, out.met = set(seen), self.met
        return out

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        given = kwargs.get("out")
        if given:
            kwargs = {**kwargs, "out": tuple(_plain(a) for a in given)}
        seen = self._meet(list(inputs) + list(given or ()))
        out = getattr(ufunc, method)(*(_plain(a) for a in inputs), **kwargs)
        if not given:
            return self._result(out, seen)
        for a in given:
            if isinstance(a, _Followed):
                a.labels |= seen
        return given[0] if len(given) == 1 else given

    def __array_function__(self, func, types, args, kwargs):
        seen = self._meet(list(args) + list(kwargs.values()))
        return self._result(func(*tree_map(_plain, args), **tree_map(_plain, kwargs)), seen)

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, _plain(value))
        if isinstance(value, _Followed):
            self.labels |= value.labels


def _plain(a):
    return a.view(np.ndarray) if isinstance(a, _Followed) else a


def shapes_made(fn, args) -> list[tuple[int, ...]]:
    """The shapes of the tensors that the PyTorch operations of ``fn(*args)`` return, in the order they are made
    (factories such as ``zeros`` and ``eye`` included; views too, since a view of a matrix is that matrix)."""
    from torch.utils._pytree import tree_flatten

    shapes: list[tuple[int, ...]] = []

    class Shapes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            shapes.extend(tuple(t.shape) for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
            return out

    with torch.no_grad(), Shapes():
        fn(*args)
    return shapes


def state_size(state, seen=None) -> int:
    """How many numbers ``state`` holds, whatever holds them: tensors, NumPy arrays, numbers, containers, objects
    (``SimpleNamespace``, dataclasses, classes with ``__slots__``, and the attributes of their classes), classes,
    ``functools.partial`` s, and functions (their closures, defaults and the data in the globals they read).

    Every number counts each time it is held: a step counter and ``num_heads`` are two numbers even when they are
    equal (small integers are one object in Python). Other objects count once, however often they are reached.
    """
    seen = set() if seen is None else seen
    if state is None or isinstance(state, (str, bytes, types.ModuleType, types.BuiltinFunctionType)):
        return 0
    if isinstance(state, (bool, int, float, complex, np.generic)):
        return 1
    if id(state) in seen:
        return 0
    seen.add(id(state))
    if isinstance(state, torch.Tensor):
        return state.numel()
    if isinstance(state, np.ndarray):
        return int(state.size) if state.dtype != object else sum(state_size(v, seen) for v in state.flat)
    if isinstance(state, dict) or type(state).__name__ == "mappingproxy":
        return sum(state_size(k, seen) + state_size(v, seen) for k, v in state.items())
    if isinstance(state, (tuple, list, set, frozenset)) or type(state).__name__ == "deque":
        return sum(state_size(v, seen) for v in state)
    if isinstance(state, functools.partial):
        return state_size(state.func, seen) + state_size(state.args, seen) + state_size(state.keywords, seen)
    if isinstance(state, types.MethodType):
        return state_size(state.__func__, seen) + state_size(state.__self__, seen)
    if isinstance(state, types.FunctionType):
        cells = [c.cell_contents for c in (state.__closure__ or ()) if _filled(c) and c.cell_contents is not state]
        data = [state.__globals__.get(name) for name in _names_read(state.__code__)]
        data = [value for value in data if not callable(value) and not isinstance(value, types.ModuleType)]
        return state_size(cells + data, seen) + state_size((state.__defaults__, state.__kwdefaults__), seen)
    if isinstance(state, type):
        return _class_data(state, seen)
    total = state_size(getattr(state, "__dict__", {}), seen) + _class_data(type(state), seen)
    for name in getattr(type(state), "__slots__", ()):
        total += state_size(getattr(state, name, None), seen)
    return total


def _filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:  # an empty cell: a variable of the closure not yet assigned
        return False
    return True


def _names_read(code) -> set:
    """The global names a function's code (and the code nested in it) reads."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


def _class_data(cls: type, seen: set) -> int:
    """The numbers a learner's class holds in its class attributes (PyTorch's and Python's own classes hold none
    of the learner's)."""
    if cls.__module__ in ("builtins", "types") or cls.__module__.startswith(("torch", "numpy", "collections")):
        return 0
    total = 0
    for klass in cls.__mro__[:-1]:
        for name, value in vars(klass).items():
            if not name.startswith("__") and not callable(value) and not isinstance(value, _DESCRIPTORS):
                total += state_size(value, seen)
    return total


#: Class attributes that are no state: properties, and the member descriptors of ``__slots__``.
_DESCRIPTORS = (property, types.MemberDescriptorType, types.GetSetDescriptorType, staticmethod, classmethod)
