"""Checkers for chapter 2, *The RNN encoder–decoder* (``notebooks/02_rnn_encoder_decoder.ipynb``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import Case, Checker, Mistake

__all__ = ["check_padded_loss", "check_gru_step", "check_last_real_state", "check_trim_after_eos"]

_gen = torch.Generator().manual_seed(2)


# --- Exercise: a loss that ignores padding ---------------------------------------


def _padded_loss(logits: torch.Tensor, targets: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    per_token = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T)
    real = targets != pad_id
    return (per_token * real).sum() / real.sum()


def _loss_over_every_position(logits, targets, pad_id=0):
    return F.cross_entropy(logits.transpose(1, 2), targets)


def _loss_mean_of_sentence_means(logits, targets, pad_id=0):
    per_token = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    real = targets != pad_id
    return ((per_token * real).sum(1) / real.sum(1)).mean()


def _loss_summed(logits, targets, pad_id=0):
    per_token = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    return (per_token * (targets != pad_id)).sum()


def _loss_pad_is_zero(logits, targets, pad_id=0):
    per_token = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    real = targets != 0
    return (per_token * real).sum() / real.sum()


check_padded_loss = Checker(
    "padded_loss",
    reference=_padded_loss,
    cases=[
        Case("one sentence, no padding", (torch.randn(1, 3, 5, generator=_gen), torch.tensor([[4, 1, 2]]))),
        Case(
            "two sentences of lengths 4 and 2",
            (torch.randn(2, 4, 6, generator=_gen), torch.tensor([[3, 4, 5, 2], [5, 2, 0, 0]])),
        ),
        Case(
            "three sentences of lengths 5, 1 and 3",
            (torch.randn(3, 5, 7, generator=_gen), torch.tensor([[6, 5, 4, 3, 2], [2, 0, 0, 0, 0], [4, 4, 2, 0, 0]])),
        ),
        Case(
            "padding id 1 instead of 0",
            (torch.randn(2, 3, 5, generator=_gen), torch.tensor([[0, 4, 2], [3, 1, 1]])),
            {"pad_id": 1},
        ),
    ],
    mistakes=[
        Mistake(
            "padding counted",
            "the mean runs over every position, padding included: the model is rewarded for predicting <pad> "
            "and short sentences weigh less. Multiply the per-token losses by `targets != pad_id` and divide by "
            "the number of real tokens.",
            _loss_over_every_position,
        ),
        Mistake(
            "mean of sentence means",
            "averaging each sentence first, then the sentences, gives a token of a short sentence more weight than a "
            "token of a long one; divide the sum over all real tokens of the batch by their count.",
            _loss_mean_of_sentence_means,
        ),
        Mistake(
            "sum instead of mean",
            "the sum grows with the batch and with sentence length, so the learning rate would have to change with "
            "them; divide by the number of real tokens.",
            _loss_summed,
        ),
        Mistake(
            "pad id hard-coded to 0",
            "use the `pad_id` argument to find the padding, not the literal 0.",
            _loss_pad_is_zero,
        ),
    ],
)


# --- Exercise: one GRU step by hand -------------------------------------------------


def _gru_step(x, h, W_ih, W_hh, b_ih, b_hh):
    """PyTorch's GRU cell: gates in the order reset, update, candidate."""
    i_r, i_z, i_n = (x @ W_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = (h @ W_hh.T + b_hh).chunk(3, dim=-1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def _gru_update_flipped(x, h, W_ih, W_hh, b_ih, b_hh):
    i_r, i_z, i_n = (x @ W_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = (h @ W_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    return z * torch.tanh(i_n + r * h_n) + (1 - z) * h


def _gru_reset_before_bias(x, h, W_ih, W_hh, b_ih, b_hh):
    H = h.shape[-1]
    i_r, i_z, i_n = (x @ W_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, _ = (h @ W_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * (h @ W_hh[2 * H :].T) + b_hh[2 * H :])
    return (1 - z) * n + z * h


def _gru_gates_swapped(x, h, W_ih, W_hh, b_ih, b_hh):
    i_z, i_r, i_n = (x @ W_ih.T + b_ih).chunk(3, dim=-1)
    h_z, h_r, h_n = (h @ W_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    return (1 - z) * torch.tanh(i_n + r * h_n) + z * h


def _gru_case(B, E, H):
    return (
        torch.randn(B, E, generator=_gen),
        torch.randn(B, H, generator=_gen),
        torch.randn(3 * H, E, generator=_gen),
        torch.randn(3 * H, H, generator=_gen),
        torch.randn(3 * H, generator=_gen),
        torch.randn(3 * H, generator=_gen),
    )


check_gru_step = Checker(
    "gru_step",
    reference=_gru_step,
    cases=[
        Case("one sentence, E=3, H=2", _gru_case(1, 3, 2)),
        Case("a batch of 4, E=5, H=3", _gru_case(4, 5, 3)),
    ],
    mistakes=[
        Mistake(
            "update gate flipped",
            "in PyTorch's convention z close to 1 KEEPS the old state: h' = (1 - z) * n + z * h. "
            "(Cho et al. 2014 write it this way too; some later texts swap z and 1 - z. "
            "Both are GRUs, but only this one equals nn.GRU.)",
            _gru_update_flipped,
        ),
        Mistake(
            "reset gate outside the bias",
            "the reset gate multiplies the whole hidden part of the candidate, bias included: "
            "n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).",
            _gru_reset_before_bias,
        ),
        Mistake(
            "gates in the wrong order",
            "nn.GRU stacks its three blocks of rows as reset, update, candidate (r, z, n): chunk in that order.",
            _gru_gates_swapped,
        ),
    ],
)


# --- Exercise: the encoder's state after the last real token -------------------------


def _last_real_state(outputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    index = (lengths - 1)[:, None, None].expand(-1, 1, outputs.shape[-1])  # (B, 1, H)
    return outputs.gather(1, index).squeeze(1)


def _last_position(outputs, lengths):
    return outputs[:, -1]


def _one_past_the_end(outputs, lengths):
    return outputs[torch.arange(outputs.shape[0]), lengths.clamp(max=outputs.shape[1] - 1)]


def _first_position(outputs, lengths):
    return outputs[:, 0]


check_last_real_state = Checker(
    "last_real_state",
    reference=_last_real_state,
    cases=[
        Case("one sentence without padding (B=1, S=3, H=2)", (torch.randn(1, 3, 2, generator=_gen), torch.tensor([3]))),
        Case(
            "lengths 2, 4, 1 in a batch padded to 5",
            (torch.randn(3, 5, 4, generator=_gen), torch.tensor([2, 4, 1])),
        ),
    ],
    mistakes=[
        Mistake(
            "last padded position",
            "outputs[:, -1] is the state after the padding for every sentence shorter than the batch; take position "
            "lengths[b] - 1 of each sentence (torch.gather, or indexing with torch.arange(B) and lengths - 1).",
            _last_position,
        ),
        Mistake(
            "one past the end",
            "positions count from 0: the last real token of a sentence of length n is at position n - 1.",
            _one_past_the_end,
        ),
        Mistake(
            "first position",
            "the state after the whole sentence is at its last real token, not at position 0.",
            _first_position,
        ),
    ],
)


# --- Exercise: greedy decoding's stop rule ---------------------------------------------


def _trim_after_eos(ids: torch.Tensor, eos_id: int = 2, pad_id: int = 0) -> torch.Tensor:
    is_eos = ids == eos_id
    seen_before = (is_eos.cumsum(dim=1) - is_eos.long()) > 0  # an <eos> came strictly earlier
    return ids.masked_fill(seen_before, pad_id)


def _trim_drops_eos(ids, eos_id=2, pad_id=0):
    return ids.masked_fill((ids == eos_id).cumsum(dim=1) > 0, pad_id)


def _trim_at_last_eos(ids, eos_id=2, pad_id=0):
    is_eos = (ids == eos_id).long()
    after_last = is_eos.flip(1).cumsum(1).flip(1) == 0
    has_eos = is_eos.any(dim=1, keepdim=True)
    return ids.masked_fill(after_last & has_eos, pad_id)


def _trim_with_argmax(ids, eos_id=2, pad_id=0):
    first = (ids == eos_id).long().argmax(dim=1)  # 0 when there is no <eos>
    positions = torch.arange(ids.shape[1])[None, :]
    return ids.masked_fill(positions > first[:, None], pad_id)


check_trim_after_eos = Checker(
    "trim_after_eos",
    reference=_trim_after_eos,
    cases=[
        Case("one <eos> in the middle", (torch.tensor([[5, 6, 2, 7, 8]]),)),
        Case("a sentence that never ends", (torch.tensor([[5, 6, 2, 7], [4, 4, 4, 4]]),)),
        Case("two <eos> in one row", (torch.tensor([[5, 2, 6, 2, 7]]),)),
        Case("other ids", (torch.tensor([[9, 3, 9, 9], [3, 9, 9, 3]]),), {"eos_id": 3, "pad_id": 1}),
    ],
    mistakes=[
        Mistake(
            "<eos> removed",
            "keep the <eos> itself (it tells the reader the sentence ended); pad only what comes after it.",
            _trim_drops_eos,
        ),
        Mistake(
            "no <eos> means cut at 0",
            "argmax of `ids == eos_id` is 0 when a row has no <eos>, which cuts that row after its first token; "
            "a row without <eos> must be kept whole (it was cut by max_len).",
            _trim_with_argmax,
        ),
        Mistake(
            "cut at the last <eos>",
            "decoding stops at the FIRST <eos>: everything after it is padding, including later <eos> tokens.",
            _trim_at_last_eos,
        ),
    ],
)
