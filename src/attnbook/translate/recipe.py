"""The paper's recipe as the command line trains with it: the chapters' loss, optimizer and schedule, made fast.

The chapters train with :mod:`attnbook.train`, written to be read. The
command line trains the same recipe with pieces that are faster, or that a
budget needs; they live here, so that changing them changes nothing a chapter
shows:

- :func:`fused_sequence_loss`, :func:`attnbook.train.sequence_loss` with its
  gradient written out (:class:`_SmoothedCrossEntropy`);
- :func:`fused_paper_optimizer`, :func:`attnbook.train.paper_optimizer`'s Adam
  updating every parameter in one kernel, with the schedule ``--decay`` names
  (:data:`SCHEDULES`): the paper's :class:`~attnbook.train.NoamSchedule`, or
  :class:`LinearDecaySchedule`, whose rate ends with the budget;
- :func:`shorten_warmup`, the same peak rate reached sooner, when the budget
  allows fewer steps than the warm-up was meant for;
- :func:`teacher_forced_logits`, the forward pass in mixed precision where the
  run computes in bfloat16.

The chapters keep the traced loss and Adam's loop over the parameters, whose
rounding their stored outputs were computed with.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..train import NoamSchedule, _check_loss_inputs, noam_lr

__all__ = [
    "fused_sequence_loss",
    "LinearDecaySchedule",
    "SCHEDULES",
    "fused_paper_optimizer",
    "shorten_warmup",
    "teacher_forced_logits",
]


# --- The loss, its gradient written out ----------------------------------------------------------------


def fused_sequence_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    pad_id: int = 0,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """:func:`attnbook.train.sequence_loss`, the same value and gradient, in a few passes over the logits.

    The same arguments and the same errors. With ``reduction="sum"`` inside
    :func:`~attnbook.checks.values_unchecked` nothing in it waits for the device.
    """
    vocab, eps = _check_loss_inputs(logits, targets, label_smoothing, reduction)
    return _SmoothedCrossEntropy.apply(logits.reshape(-1, vocab), targets.reshape(-1), pad_id, eps, reduction)


class _SmoothedCrossEntropy(torch.autograd.Function):
    """The label-smoothed loss of flat ``logits (N, V)``, its gradient written out instead of traced.

    The value is :func:`~attnbook.train.sequence_loss`'s. The gradient too, up
    to rounding: with respect to the logits it is the softmax minus the target
    distribution (for padding positions, zero), which the backward pass writes
    out directly, where autograd would go back through the log-softmax, the
    gather, the sum over the vocabulary and the padding mask, each a pass over
    a ``(B, T, V)`` tensor. With 8,000 pieces the loss is a large part of a
    small model's step.
    """

    @staticmethod
    def forward(ctx, logits, targets, pad_id: int, eps: float, reduction: str):
        vocab = logits.shape[-1]
        log_probs = torch.log_softmax(logits, dim=-1)
        real = targets != pad_id
        picked = log_probs.gather(1, targets[:, None]).squeeze(1)
        per_token = -picked
        if eps > 0:
            others = -log_probs.sum(-1) + picked + log_probs[:, pad_id]
            per_token = (1.0 - eps) * per_token + eps / (vocab - 2) * others
        scale = 1.0
        if reduction == "mean":  # the count of real tokens is read on the host
            n_tokens = int(real.sum())
            if n_tokens == 0:
                raise ValueError("the targets hold no real tokens (everything is padding)")
            scale = 1.0 / n_tokens
        ctx.save_for_backward(log_probs, targets, real)
        ctx.pad_id, ctx.eps, ctx.scale = pad_id, eps, scale
        return per_token.masked_fill(~real, 0.0).sum() * ctx.scale

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        log_probs, targets, real = ctx.saved_tensors
        off = ctx.eps / (log_probs.shape[-1] - 2) if ctx.eps > 0 else 0.0
        # softmax minus the target distribution: 1 - eps on the true token, eps / (V - 2) on all but it and <pad>
        g = log_probs.exp()
        if off:
            g.sub_(off)
            g[:, ctx.pad_id] += off
        g.scatter_add_(1, targets[:, None], torch.full_like(g[:, :1], -(1.0 - ctx.eps - off)))
        g.mul_((real * (grad * ctx.scale))[:, None])  # padding positions carry no loss
        return g, None, None, None, None


# --- The optimizer and the schedule ------------------------------------------------------------------


class LinearDecaySchedule(NoamSchedule):
    """:class:`~attnbook.train.NoamSchedule`'s warm-up, then a straight fall to zero as the run's budget is spent.

    The paper's rate decays as ``1 / sqrt(step)`` because its runs have no
    fixed end. A run with a budget (of minutes, epochs or steps) knows how much
    of it is left, and can spend it differently: keep the rate high while there
    is time to learn, and bring it down to zero just as the budget ends, so that
    the last steps settle the weights instead of shaking them (Li et al. (2020)
    call this a budget-aware schedule). The rate of the coming step is
    ``noam_lr(min(step, warmup)) * (1 - spent)``: the warm-up to its peak,
    scaled by the share of the budget still left. The caller says how much is
    spent, after every step, with :meth:`set_spent` (0 to 1); ``state_dict()``
    keeps it with the step.
    """

    spent: float = 0.0  # nothing spent until the caller says otherwise

    def get_lr(self) -> list[float]:
        step = min(self.last_epoch + 1, self.warmup)
        lr = noam_lr(step, self.d_model, self.warmup, self.factor) * (1.0 - self.spent)
        return [lr for _ in self.optimizer.param_groups]

    _get_closed_form_lr = get_lr

    def set_spent(self, share: float) -> None:
        """The share of the budget spent so far, ``0 <= share <= 1``; the coming step already uses it."""
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"the share of the budget spent must be in [0, 1], got {share!r}")
        self.spent = float(share)
        _set_rates(self)


#: The schedule of each ``--decay`` (:data:`attnbook.translate.settings.DECAYS`): how the rate falls after the
#: warm-up, as the paper's, or in a straight line to zero at the budget's end.
SCHEDULES: dict[str, type[NoamSchedule]] = {"inverse-sqrt": NoamSchedule, "linear": LinearDecaySchedule}


def fused_paper_optimizer(
    model: nn.Module, *, d_model: int, warmup: int = 4000, factor: float = 1.0, decay: str = "inverse-sqrt"
) -> tuple[torch.optim.Adam, NoamSchedule]:
    """The paper's Adam (beta = (0.9, 0.98), eps = 1e-9) fused into one kernel, and the schedule ``decay`` names.

    :func:`attnbook.train.paper_optimizer`'s algorithm, about three times
    faster on a CPU, rounded slightly differently. Returns
    ``(optimizer, schedule)``; the schedule is stepped after every batch.
    """
    if decay not in SCHEDULES:
        raise ValueError(f"decay must be one of {', '.join(SCHEDULES)}, got {decay!r}")
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, fused=True)
    return optimizer, SCHEDULES[decay](optimizer, d_model, warmup, factor)


def shorten_warmup(scheduler: NoamSchedule, warmup: int) -> None:
    """Make ``scheduler`` reach its peak rate after ``warmup`` steps instead, the peak unchanged.

    The peak is ``factor / sqrt(d_model * warmup)``, so the factor shrinks with
    the warm-up's square root (keeping it would raise the peak). The coming
    optimizer step already uses the new curve.
    """
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 1 <= warmup <= scheduler.warmup:
        raise ValueError(f"warmup must be an int in [1, {scheduler.warmup}] (the current warm-up), got {warmup!r}")
    scheduler.factor *= math.sqrt(warmup / scheduler.warmup)
    scheduler.warmup = warmup
    _set_rates(scheduler)


def _set_rates(scheduler: NoamSchedule) -> None:
    """Give the coming optimizer step the rate the schedule's (changed) curve gives it.

    PyTorch's schedulers set the rate only when stepped; this sets it now, and
    what ``get_last_lr()`` reports with it (PyTorch keeps that in ``_last_lr``).
    """
    scheduler._last_lr = scheduler.get_lr()
    for group, lr in zip(scheduler.optimizer.param_groups, scheduler._last_lr):
        group["lr"] = lr


# --- The forward pass ----------------------------------------------------------------------------------


def teacher_forced_logits(model: nn.Module, batch, autocast: torch.dtype | None = None) -> torch.Tensor:
    """The model's logits for ``batch`` with teacher forcing; with ``autocast``, in mixed precision.

    Mixed precision runs the forward pass under :func:`torch.autocast` (its
    matrix products in ``autocast``) and returns the logits in float32, so
    that the loss is computed in full precision.
    """
    if autocast is None:
        return model(batch.src, batch.src_padding_mask, batch.tgt_in)
    device = next(model.parameters()).device
    with torch.autocast(device.type, dtype=autocast):
        logits = model(batch.src, batch.src_padding_mask, batch.tgt_in)
    return logits.float()
