"""The packaged answers that checkers refuse, in groups, by dotted name (see :class:`~.watching.Refusals`)."""

from __future__ import annotations

__all__ = [
    "FUSED_ATTENTION",
    "PYTORCH_ATTENTION",
    "CROSS_ENTROPY",
    "LOG_SOFTMAX_HOMES",
    "NO_MODEL",
    "THREADS",
    "refusing",
]

#: PyTorch's fused attention, whatever the entry point (``F.*``, ``torch._C._nn.*``, ``torch.ops.aten.*``, the
#: kernels it picks), its multi-head modules, the library's attention, and d2l's: refused where attention is the answer.
FUSED_ATTENTION = (
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.ops.aten._scaled_dot_product_attention_math",
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    "torch.ops.aten._scaled_dot_product_flash_attention",
    "torch.ops.aten._scaled_dot_product_efficient_attention",
    "torch.ops.aten._scaled_dot_product_cudnn_attention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch.ops.aten._native_multi_head_attention",
    "torch.nn.MultiheadAttention",
    "attnbook.attention.scaled_dot_product_attention",
    "attnbook.attention.DotProductAttention",
    "attnbook.attention.MultiHeadAttention",
    "d2l.*",
)

#: PyTorch's own attention and multi-head layers (without the library's): refused where the library's chapter-3
#: ``scaled_dot_product_attention`` is a building block and what the exercise adds (grouped heads, gates) is the answer.
PYTORCH_ATTENTION = tuple(
    name
    for name in FUSED_ATTENTION
    if name not in ("attnbook.attention.scaled_dot_product_attention", "attnbook.attention.DotProductAttention")
)

#: The cross-entropy and negative log-likelihood losses of PyTorch, under every name, and the library's.
CROSS_ENTROPY = (
    "torch.nn.functional.cross_entropy",
    "torch.ops.aten.cross_entropy_loss",
    "torch.nn.functional.nll_loss",
    "torch.ops.aten.nll_loss_nd",
    "torch.ops.aten.nll_loss",
    "torch.ops.aten.nll_loss_forward",
    "torch.ops.aten.nll_loss2d_forward",
    "torch.nn.CrossEntropyLoss",
    "torch.nn.NLLLoss",
    "torch.nn.functional.kl_div",  # against a one-hot target, the same number
    "torch.ops.aten.kl_div",
    "torch.nn.KLDivLoss",
    "torch.nn.functional.poisson_nll_loss",  # log_input=True against a one-hot target: 1 - log p(y)
    "torch.nn.PoissonNLLLoss",
    "torch.distributions.Categorical",  # its log_prob is the picked log-softmax
    "attnbook.train.sequence_loss",
    "attnbook.train.smoothed_targets",
    "d2l.*",
)

#: The other homes of a log-softmax or a log-sum-exp: PyTorch's reference and decomposed implementations
#: (``torch._refs``, ``torch._decomp``), its running log-sum-exp, SciPy's, and a ``Categorical`` distribution
#: (which normalises its logits).
LOG_SOFTMAX_HOMES = (
    "torch._refs.*",
    "torch._decomp.*",
    "torch.ops.aten.logcumsumexp",
    "torch.ops.aten._logcumsumexp",
    "torch.distributions.Categorical",
    "scipy.special.*",
    "d2l.*",
)

#: Work handed to another thread or process, which no watch follows: starting a thread (``threading``, ``_thread``;
#: a ``queue.Queue`` alone is a first-in first-out list, fine in one thread),
#: an executor or a pool (``concurrent.futures``, ``multiprocessing``, ``joblib``), a process (``subprocess``; a fork
#: or an ``os.system`` is seen through the interpreter's audit events). Every checker refuses them while the learner's
#: function runs; PyTorch's own intra-op threads are no Python code and run as always.
THREADS = (
    "threading.Thread.start",
    "threading.Thread.join",
    "threading.Condition.wait",
    "threading.Event.wait",
    "threading.Barrier.wait",
    "_thread.start_new_thread",
    "concurrent.*",
    "multiprocessing.*",
    "subprocess.*",
    "joblib.*",
)

#: What kind of refusal a name in :data:`THREADS` is: the message says "another thread" or "another process".
KINDS = {name: "process" if name in ("multiprocessing.*", "subprocess.*", "joblib.*") else "thread" for name in THREADS}

#: For an exercise whose answer is a formula (a count): building any module, or letting PyTorch count, is refused.
NO_MODEL = ("torch.nn.Module.__init__", "torch.utils.flop_counter.*", "d2l.*")


def refusing(*groups, **planted) -> dict:
    """A checker's ``forbidden``: the planted answers first (they name the refusal in messages), then the groups."""
    forbidden: dict = {}
    for group in groups:
        if isinstance(group, dict):
            forbidden.update(group)
        else:
            for name in (group,) if isinstance(group, str) else group:
                forbidden.setdefault(name, None)
    return forbidden
