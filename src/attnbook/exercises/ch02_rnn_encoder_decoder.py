"""Checkers for chapter 2, *The RNN encoder–decoder* (``notebooks/02_rnn_encoder_decoder.ipynb``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..train import sequence_loss
from . import CROSS_ENTROPY, Case, Checker, Mistake

__all__ = ["check_best_candidate", "check_gru_step", "check_last_real_state", "check_trim_after_eos"]

_gen = torch.Generator().manual_seed(2)


# --- Exercise: pick the best of several candidate translations, per word ---------------------------------------


def _candidate_scores(logits, targets, pad_id=0, divide_by="real", raw=False, score_padding=False):
    picked = logits if raw else torch.log_softmax(logits, dim=-1)
    picked = picked.gather(-1, targets[..., None])[..., 0]  # (B, K, T): log p(y_t | ...) of each candidate's tokens
    real = torch.ones_like(targets, dtype=torch.bool) if score_padding else targets != pad_id
    total = (picked * real).sum(dim=-1)  # (B, K)
    if divide_by == "nothing":
        return total
    if divide_by == "T":
        return total / targets.shape[-1]
    return total / real.sum(dim=-1)


def _best_candidate(logits, targets, pad_id=0):
    scores = _candidate_scores(logits, targets, pad_id)  # (B, K): mean log-probability per real token
    return scores, scores.argmax(dim=-1)


def _bc_summed(logits, targets, pad_id=0):
    scores = _candidate_scores(logits, targets, pad_id, divide_by="nothing")
    return scores, scores.argmax(dim=-1)


def _bc_over_padded_length(logits, targets, pad_id=0):
    scores = _candidate_scores(logits, targets, pad_id, divide_by="T")
    return scores, scores.argmax(dim=-1)


def _bc_padding_scored(logits, targets, pad_id=0):
    scores = _candidate_scores(logits, targets, pad_id, score_padding=True)
    return scores, scores.argmax(dim=-1)


def _bc_raw_logits(logits, targets, pad_id=0):
    scores = _candidate_scores(logits, targets, pad_id, raw=True)
    return scores, scores.argmax(dim=-1)


def _bc_least_likely(logits, targets, pad_id=0):
    scores = _candidate_scores(logits, targets, pad_id)
    return scores, scores.argmin(dim=-1)


def _bc_with_library(logits, targets, pad_id=0):
    B, K, T, V = logits.shape
    pairs = zip(logits.reshape(B * K, T, V), targets.reshape(B * K, T))
    total = torch.stack([-sequence_loss(lo[None], t[None], pad_id, reduction="sum") for lo, t in pairs])
    scores = total.reshape(B, K) / (targets != pad_id).sum(-1)
    return scores, scores.argmax(dim=-1)


def _bc_with_torch(logits, targets, pad_id=0):
    B, K, T, V = logits.shape
    nll = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=pad_id, reduction="none")
    scores = -nll.reshape(B, K, T).sum(-1) / (targets != pad_id).sum(-1)
    return scores, scores.argmax(dim=-1)


_gs = torch.Generator().manual_seed(21)


def _bc_logits(*shape):
    return 2 * torch.randn(*shape, generator=_gs, dtype=torch.float64)


def _bc_case(n):
    """``n`` sentences of ``n`` candidates of ``n`` positions: a loop over any of the three grows with ``n``."""
    generator = torch.Generator().manual_seed(n)
    logits = torch.randn(n, n, n, 5, generator=generator, dtype=torch.float64)
    targets = torch.randint(1, 5, (n, n, n), generator=generator)
    targets[..., n // 2 + 1 :] = 0  # every candidate padded after its first n // 2 + 1 tokens
    return Case(f"{n} sentences of {n} candidates of {n} positions", (logits, targets))


def _bc_looped(logits, targets, pad_id=0):
    """Right, but a Python loop over the sentences, the candidates and time: the mistake 'a Python loop'."""
    B, K, T, V = logits.shape
    scores = torch.zeros(B, K, dtype=logits.dtype)
    for b in range(B):
        for k in range(K):
            total, n = 0.0, 0
            for t in range(T):
                if targets[b, k, t] != pad_id:
                    total = total + torch.log_softmax(logits[b, k, t], dim=-1)[targets[b, k, t]]
                    n += 1
            scores[b, k] = total / n
    return scores, scores.argmax(dim=-1)


check_best_candidate = Checker(
    "best_candidate",
    reference=_best_candidate,
    cases=[
        Case(
            "one sentence, 2 candidates of 3 tokens, no padding, V=5",
            (_bc_logits(1, 2, 3, 5), torch.tensor([[[3, 1, 2], [4, 4, 2]]])),
        ),
        Case(
            "2 sentences, 3 candidates of lengths 2 to 5, V=6",
            (
                _bc_logits(2, 3, 5, 6),
                torch.tensor(
                    [
                        [[4, 2, 0, 0, 0], [5, 3, 1, 4, 2], [3, 3, 2, 0, 0]],
                        [[1, 5, 4, 3, 2], [2, 0, 0, 0, 0], [4, 2, 0, 0, 0]],
                    ]
                ),
            ),
        ),
        Case(
            "<pad> is id 7, a short and a long candidate, V=8",
            (_bc_logits(2, 2, 4, 8), torch.tensor([[[1, 2, 7, 7], [3, 4, 5, 2]], [[6, 5, 4, 2], [1, 7, 7, 7]]])),
            {"pad_id": 7},
        ),
    ],
    mistakes=[
        Mistake(
            "summed, not averaged",
            "a sum of log-probabilities is lower the more words a candidate has, so it favours short translations; "
            "divide each candidate's sum by its number of real tokens.",
            _bc_summed,
        ),
        Mistake(
            "averaged over the padded length",
            "a candidate's padding is not part of it: divide by its own number of real tokens, "
            "(targets != pad_id).sum(-1), not by T.",
            _bc_over_padded_length,
        ),
        Mistake(
            "padding scored",
            "the log-probability the model gives <pad> after the end is no part of the translation: multiply by "
            "targets != pad_id before summing, and count only those tokens.",
            _bc_padding_scored,
        ),
        Mistake(
            "logits taken for log-probabilities",
            "a logit is not a log-probability: apply log_softmax over the vocabulary first, "
            "then pick the target's entry.",
            _bc_raw_logits,
        ),
        Mistake(
            "the least likely chosen",
            "the best candidate has the HIGHEST mean log-probability (the lowest loss): argmax over the candidates.",
            _bc_least_likely,
        ),
    ],
    atol=1e-9,
    rtol=1e-7,
    forbidden={"attnbook.train.sequence_loss": _bc_with_library, "torch.nn.functional.cross_entropy": _bc_with_torch},
    refuses=CROSS_ENTROPY,
    loop_free=("sentences, candidates and positions", _bc_case),
    looped=_bc_looped,
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


def _gru_with_cell(x, h, W_ih, W_hh, b_ih, b_hh):
    cell = torch.nn.GRUCell(x.shape[1], h.shape[1]).to(x.dtype)
    cell.load_state_dict({"weight_ih": W_ih, "weight_hh": W_hh, "bias_ih": b_ih, "bias_hh": b_hh})
    return cell(x, h).detach()


def _gru_with_layer(x, h, W_ih, W_hh, b_ih, b_hh):
    gru = torch.nn.GRU(x.shape[1], h.shape[1], batch_first=True).to(x.dtype)
    gru.load_state_dict({"weight_ih_l0": W_ih, "weight_hh_l0": W_hh, "bias_ih_l0": b_ih, "bias_hh_l0": b_hh})
    return gru(x[:, None], h[None])[1][0].detach()


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
    forbidden={"torch.nn.GRUCell": _gru_with_cell, "torch.nn.GRU": _gru_with_layer},
    refuses=(
        "torch.ops.aten.gru_cell",
        "torch.ops.aten._thnn_fused_gru_cell",
        "torch.ops.aten.gru",
        "attnbook.rnn.*",
        "d2l.*",
    ),
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


def _lrs_case(n):
    return Case(
        f"{n} sentences", (torch.randn(n, 5, 3, generator=torch.Generator().manual_seed(n)), torch.arange(n) % 5 + 1)
    )


def _lrs_looped(outputs, lengths):
    """Right, but one Python step per sentence: the mistake 'a Python loop'."""
    return torch.stack([outputs[b, lengths[b] - 1] for b in range(outputs.shape[0])])


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
    refuses=("torch.nn.utils.rnn.*", "d2l.*"),
    loop_free=("sentences", _lrs_case),
    looped=_lrs_looped,
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


def _trim_case(n):
    ids = torch.arange(n * n).reshape(n, n) % 5 + 2  # an <eos> (2) every five tokens
    return Case(f"{n} sentences of {n} tokens", (ids,))


def _trim_looped(ids, eos_id=2, pad_id=0):
    """Right, but one Python step per token: the mistake 'a Python loop'."""
    out = ids.clone()
    for row in out:
        ended = False
        for t in range(row.shape[0]):
            if ended:
                row[t] = pad_id
            elif row[t] == eos_id:
                ended = True
    return out


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
    refuses=("attnbook.decode.cut_at_eos", "attnbook.decode.ids_to_tokens", "d2l.*"),
    loop_free=("sentences and positions", _trim_case),
    looped=_trim_looped,
)
