"""Another processor's rounding, simulated: results whose last bits depend on the shapes computed.

On a processor of another class (Intel with AMX, say), the matrix product of
one row and the same row inside a product of ten can differ in the last bit:
the kernel that a library picks, and the order in which it adds, depend on
the shapes. A test that compares two such computations bit for bit passes on
the processors it was written on and fails on the first processor of another
class. This machine's kernels may never show the difference, so this module
makes it show here.

:class:`ShapeDependentRounding` is a ``TorchDispatchMode``: every operation
that rounds (a product, a sum, a softmax, an exponential, a norm, ...) has its
floating-point result scaled by ``1 + k·ε``, one or two units in the last place
(whole numbers, which every processor computes exactly, are kept), where ``k``
depends on the operation and on the shapes of its inputs. The same operation
on the same shapes rounds the same way every time, as on any real processor
with fixed threads. The same operation on other shapes rounds another way by
construction, not by chance: the mode numbers the shapes each operation meets
in the order it meets them and gives consecutive ones the units +1, -1, +2,
-2 in turn, so that any two of the last four shapes of one operation get
different units (a hash of the shapes could give two of them the same unit,
and then only the processor's own kernels would tell the two apart: on Intel
with AMX they did not). Operations that are exact by construction
(indexing, masking, copying, concatenating, comparisons, taking a maximum,
one IEEE addition, subtraction, multiplication or division per element, and
random draws) are left alone, as are views and in-place operations.

``pytest --other-kernels`` (an option that ``tests/conftest.py`` adds) runs
every test inside the mode; ``tests/test_exact_comparisons.py`` runs the library's
own tests (:data:`LIBRARY_TESTS`) that way, on another CPU kernel path too, inside ``make test``.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only

#: Operations whose results do not depend on the shapes they are computed in: they move, select, compare or
#: round once per element (and the random ones, whose draws a seed fixes). Names of ``torch.ops.aten`` packets.
EXACT = frozenset(
    """
    _to_copy clone copy copy_ _copy_from _copy_from_and_resize contiguous lift_fresh lift_fresh_copy detach
    cat stack index index_select gather scatter masked_fill masked_scatter masked_select where embedding
    index_put index_put_ slice_scatter select_scatter diagonal_scatter as_strided_scatter
    constant_pad_nd reflection_pad1d replication_pad1d tril triu flip roll repeat repeat_interleave expand_copy
    permute_copy transpose_copy view_copy unsqueeze_copy squeeze_copy unfold_copy narrow_copy
    fill zero zeros zeros_like ones ones_like empty empty_like empty_strided new_zeros new_ones new_empty
    new_empty_strided new_full full full_like scalar_tensor arange linspace eye tensor _local_scalar_dense
    max min amax amin maximum minimum clamp clamp_min clamp_max relu threshold threshold_backward hardtanh
    neg abs sign sgn floor ceil round trunc frac add sub rsub mul div reciprocal sqrt remainder fmod
    sort topk argmax argmin argsort nonzero unique _unique2 isnan isinf isfinite logical_not logical_and
    logical_or bitwise_and bitwise_or bitwise_not eq ne lt le gt ge equal any all count_nonzero
    bernoulli native_dropout native_dropout_backward randint randn rand randperm normal uniform multinomial
    _fused_dropout masked_fill_ alias set_ resize_ _reshape_alias _unsafe_view
    """.split()
)


#: The units in the last place given in turn to the shapes one operation meets: consecutive shapes differ.
UNITS = (1, -1, 2, -2)


#: The library's own tests, every file that compares what the library computes. ``make test`` runs those not marked
#: slow once, inside the mode and on another CPU kernel path (tests/test_exact_comparisons.py), and not a second
#: time on this machine's own path (tests/conftest.py deselects them there).
LIBRARY_TESTS = [
    "test_attention.py",
    "test_attention_scoring.py",
    "test_self_attention.py",
    "test_multihead.py",
    "test_positional.py",
    "test_transformer.py",
    "test_fastformer.py",
    "test_rnn.py",
    "test_masks.py",
    "test_decode.py",
    "test_beam.py",
    "test_train.py",
    "test_metrics.py",
]


class ShapeDependentRounding(TorchDispatchMode):
    """Scale every rounding operation's float result by ``1 + k·ε``, ``k`` chosen by the operation and its shapes."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # PyTorch wraps a mode's __torch_dispatch__ so that torch.compile does not trace into it, at a cost on each
        # of the million operations a run of the library's tests dispatches; nothing inside this mode is compiled.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.perturbed = 0  # how many results were changed: a test of the mode can see that it acted
        self.units: dict[str, dict[tuple, int]] = {}  # operation -> its shapes, in the order met -> their unit
        self._alone: dict = {}  # operation -> whether the mode leaves its results alone
        self._names: dict = {}  # operation -> its name, or "" if the mode leaves its results alone

    def unit(self, operation: str, shapes: tuple) -> int:
        """The unit of ``operation`` on ``shapes``: fixed once met; the next shape met gets the next unit of UNITS."""
        met = self.units.setdefault(operation, {})
        if shapes not in met:
            met[shapes] = UNITS[len(met) % len(UNITS)]
        return met[shapes]

    def leaves_alone(self, func) -> bool:
        """Whether ``func`` is exact by construction, a view or in place (decided once per operation)."""
        known = self._alone.get(func)
        if known is None:
            schema = func._schema
            name = func.overloadpacket.__name__
            known = self._alone[func] = (
                name.lstrip("_") in EXACT
                or name in EXACT
                or name.removeprefix("_foreach_") in EXACT  # the same, one call for a list of tensors
                or schema.is_mutable
                or any(r.alias_info is not None for r in schema.returns)
            )
        return known

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # Called for each of the million operations a run of the library's tests dispatches: the checks that
        # leave a result alone come first, and what is known of an operation is looked up once.
        out = func(*args, **kwargs) if kwargs else func(*args)
        name = self._names.get(func)
        if name is None:  # "" for an operation left alone
            name = self._names[func] = "" if self.leaves_alone(func) else str(func)
        if not name or not (_rounded(out) if isinstance(out, torch.Tensor) else any(map(_rounded, _tensors(out)))):
            return out
        shapes: list = []
        _shapes(args, shapes)
        if kwargs:
            _shapes(kwargs.values(), shapes)
        k = self.unit(name, tuple(shapes))

        def perturb(t):
            if not _rounded(t):
                return t
            self.perturbed += 1
            eps = _EPS.get(t.dtype) or _EPS.setdefault(t.dtype, torch.finfo(t.dtype).eps)
            rounded = t * (1 + k * eps)
            # a whole number (0, 1, a count) is exact on every processor: cos(0), exp(0), a sum of integers
            return torch.where(t == t.round(), t, rounded)

        if isinstance(out, torch.Tensor):
            return perturb(out)
        if type(out) in (tuple, list):
            return type(out)(perturb(t) for t in out)
        return tree_map_only(torch.Tensor, perturb, out)


_EPS: dict = {}  # dtype -> its machine epsilon


def _tensors(value):
    """The tensors in nested tuples, lists and dicts, in the order PyTorch's pytree flattens them."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _shapes(values, into: list) -> None:
    """Append the shapes of the tensors in ``values`` (nested tuples, lists, dicts) to ``into``, in pytree's order."""
    for value in values:
        if isinstance(value, torch.Tensor):
            into.append(value.shape)
        elif isinstance(value, (tuple, list)):
            _shapes(value, into)
        elif isinstance(value, dict):
            _shapes(value.values(), into)


def _rounded(t) -> bool:
    """Whether the mode may change ``t``: a non-empty floating-point tensor with data."""
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() != 0 and not t.is_meta
