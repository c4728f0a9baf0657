"""Decoding: from a trained model to token indices, greedily or by beam search, and back to text.

Both decoders work for any model with the library's decoding protocol
(``model.start(src, src_padding_mask) -> state`` and
``model.step(tokens, state) -> (logits, state)``, see :mod:`attnbook.rnn`), so
the RNNs of chapters 2 and 3 and the Transformer of chapter 7 share them.

:func:`greedy_decode` decodes a whole batch at once: every sentence starts from
``<bos>``, takes the most likely token at each step, and is finished once it has
produced ``<eos>``; decoding stops when every sentence is finished or after
``max_len`` tokens. Finished sentences are padded, so a batched result equals
decoding each sentence alone.

:func:`beam_search_sentence` (chapter 8) is beam search written to be read: one
sentence, its hypotheses a list of (tokens, log-probability, decoder state).
:func:`beam_search` is the same search for a whole batch at once, in tensors:
it keeps the ``k`` most probable prefixes of each
sentence instead of one, and ranks the finished translations ``Y`` by
``log p(Y | X) / lp(Y)`` with the length penalty of Wu et al. (2016),
``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (:func:`length_penalty`). It needs one more
thing from the protocol: the decoder state's ``select(index)``, which returns
the state of the batch rows ``index``, to copy a sentence's state into its
beams and to reorder the beams after each step. :class:`Uncached` runs any
model without its decoder state (recomputing the whole prefix at every step):
the reference that a key-value cache must equal.

Neither decoder ever writes ``<pad>`` or ``<bos>``: they are not words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    "EXTRA_OUTPUT_TOKENS",
    "output_limit",
    "Decoded",
    "greedy_decode",
    "length_penalty",
    "Hypothesis",
    "BeamDecoded",
    "beam_search",
    "beam_search_sentence",
    "Uncached",
    "cut_at_eos",
    "ids_to_tokens",
    "ids_to_text",
    "translate",
]

#: The paper's output budget, the default of :func:`output_limit`: a translation has at most
#: its source's length plus this many tokens.
EXTRA_OUTPUT_TOKENS = 50


def output_limit(src_len, max_len_a: float = 1.0, max_len_b: int = EXTRA_OUTPUT_TOKENS, cap: int | None = None):
    """The most tokens a translation of a ``src_len``-token source may have: ``⌈a × src_len⌉ + b``, at most ``cap``.

    The library's one output-length rule: :func:`beam_search` and :func:`translate` use it
    with the paper's ``a = 1, b = 50`` (capped at the model's
    ``config.max_len`` where it has one), the command line with its own ``--max-len-a``
    and ``--max-len-b`` (capped at its positional table). ``src_len`` is an int or a
    tensor of lengths; the result is of the same kind, and at least 1.
    """
    if isinstance(src_len, torch.Tensor):
        limit = torch.ceil(src_len.double() * max_len_a).long() + max_len_b
        return limit.clamp(min=1, max=cap)
    limit = math.ceil(max_len_a * src_len) + max_len_b
    return max(1, limit if cap is None else min(limit, cap))


@dataclass
class Decoded:
    """The result of :func:`greedy_decode`.

    ``tokens (B, L)`` holds the generated indices (without ``<bos>``; with the
    ``<eos>`` that ended each sentence; ``pad_id`` after it); ``lengths (B,)``
    counts the tokens up to and including ``<eos>``; ``attention (B, L, S)`` holds
    each step's attention weights when the model exposes them, else ``None``.
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    attention: torch.Tensor | None = None


@torch.no_grad()
def greedy_decode(
    model: nn.Module,
    src: torch.Tensor,
    src_padding_mask: torch.Tensor | None = None,
    *,
    max_len: int | None = None,
    bos_id: int = 1,
    eos_id: int = 2,
    pad_id: int = 0,
) -> Decoded:
    """Decode a batch greedily, stopping at ``<eos>`` or after ``max_len`` tokens.

    By default each sentence may have :func:`output_limit` of its source's length (the
    source's length + 50, within the model's ``config.max_len``).
    """
    if max_len is not None and (not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1):
        raise ValueError(f"max_len must be an int >= 1 (the most tokens to generate) or None, got {max_len!r}")
    if src.dim() != 2:
        raise ValueError(f"src must have shape (B, S), got shape {tuple(src.shape)}")
    batch = src.shape[0]
    if max_len is None:  # each sentence its own limit
        src_len = (~src_padding_mask).sum(1) if src_padding_mask is not None else torch.full((batch,), src.shape[1])
        limit = output_limit(src_len.cpu().long(), cap=_model_cap(model)).to(src.device)
    else:
        limit = torch.full((batch,), max_len, dtype=torch.long, device=src.device)
    was_training = model.training
    model.eval()
    try:
        state = model.start(src, src_padding_mask)
        tokens = torch.full((batch,), bos_id, dtype=torch.long, device=src.device)
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        lengths = limit.clone()
        out, weights = [], []
        for t in range(int(limit.max())):
            logits, state = model.step(tokens, state)
            never = torch.tensor([pad_id, bos_id], device=logits.device)
            tokens = logits.index_fill(1, never, float("-inf")).argmax(dim=-1)  # <pad> and <bos> are never written
            tokens = tokens.masked_fill(finished, pad_id)  # a finished sentence only pads
            out.append(tokens)
            w = getattr(state, "attention", None)
            if w is not None:
                weights.append(w.masked_fill(finished[:, None], 0.0))
            just_ended = ~finished & (tokens == eos_id)
            lengths[just_ended] = t + 1
            finished |= just_ended | (limit <= t + 1)  # at its limit, a sentence ends
            if finished.all():
                break
    finally:
        model.train(was_training)
    attention = torch.stack(weights, dim=1) if weights else None
    return Decoded(torch.stack(out, dim=1), lengths, attention)


# --- Beam search ------------------------------------------------------------------


def length_penalty(length: int | torch.Tensor, alpha: float = 0.6):
    """``((5 + length) / 6) ** alpha``, the length penalty of Wu et al. (2016); 1 for ``alpha = 0``.

    A hypothesis's score is its log-probability divided by this, so that longer
    translations, which add more negative log-probabilities, are not crowded out
    by short ones. ``length`` counts the generated tokens, ``<eos>`` included.
    """
    return ((5 + length) / 6) ** alpha


@dataclass
class Hypothesis:
    """One finished translation: its tokens (with ``<eos>`` if it ended with one), ``log p(Y | X)``, its score."""

    tokens: list[int]
    log_prob: float
    score: float


@dataclass
class BeamDecoded(Decoded):
    """The result of :func:`beam_search`: the best hypothesis of each sentence, as in :class:`Decoded`.

    ``scores (B,)`` are their length-penalized scores, ``log_probs (B,)`` their
    log-probabilities; ``nbest``, when asked for, lists each sentence's best
    finished hypotheses, best first.
    """

    scores: torch.Tensor | None = None
    log_probs: torch.Tensor | None = None
    nbest: list[list[Hypothesis]] | None = None


def _check_state(state) -> None:
    if not callable(getattr(state, "select", None)):
        raise TypeError(
            f"beam search needs a decoder state with a select(index) method (the rows of the batch to keep), "
            f"and {type(state).__name__} has none"
        )


@torch.no_grad()
def beam_search(
    model: nn.Module,
    src: torch.Tensor,
    src_padding_mask: torch.Tensor | None = None,
    *,
    beam_size: int = 4,
    alpha: float = 0.6,
    max_len: int | None = None,
    n_best: int | None = None,
    bos_id: int = 1,
    eos_id: int = 2,
    pad_id: int = 0,
) -> BeamDecoded:
    """Decode a batch with beam search; return each sentence's best hypothesis.

    Each sentence keeps ``beam_size`` hypotheses. At every step the ``beam_size``
    live hypotheses of a sentence are extended by every token, and the
    ``2 * beam_size`` most probable extensions are kept as candidates, ranked by
    ``log p``. A candidate that ends with ``<eos>`` and ranks among the first
    ``beam_size`` is *finished*: it is set aside with its score
    ``log p / lp(|Y|)`` (:func:`length_penalty`, ``|Y|`` counting ``<eos>``) and
    never extended again, so no token after ``<eos>`` is scored. The first
    ``beam_size`` candidates that do not end with ``<eos>`` are the next step's
    live hypotheses. A sentence is done once ``beam_size`` hypotheses have
    finished, or at its maximum length, where the best live ones are finished
    as they are. The result is the finished hypothesis with the best score.
    With ``beam_size = 1`` this is exactly :func:`greedy_decode`.

    ``max_len`` is the most tokens a translation may have; by default each
    sentence's source length + 50, as in the paper (capped at the model's
    ``config.max_len`` when it has one). ``n_best`` returns that many
    hypotheses per sentence in ``.nbest``. Finished sentences leave the batch,
    and nothing a sentence computes depends on the others: the result of a
    sentence does not depend on the batch it is decoded in.
    """
    limit = _beam_limits(model, src, src_padding_mask, beam_size, alpha, max_len, n_best)  # each sentence's longest
    k, device = beam_size, src.device
    was_training = model.training
    model.eval()
    try:
        state = model.start(src, src_padding_mask)
        _check_state(state)
        state = state.select(torch.arange(len(src), device=device).repeat_interleave(k))  # sentence b: rows b*k..
        beams = _Beams(len(src), k, int(limit.max()), bos_id, pad_id, device)
        for t in range(beams.longest):
            logits, state = model.step(beams.tokens, state)  # (n * k, V)
            log_probs = torch.log_softmax(logits, dim=-1).view(beams.active.numel(), k, -1)
            log_probs[..., [pad_id, bos_id]] = float("-inf")  # never written: they are not words
            top_lp, origin, token = beams.candidates(log_probs)
            last = (limit[beams.active] == t + 1).to(device)  # (n,): this sentence may not grow further
            beams.finish(t, top_lp, origin, token, last, eos_id, alpha)
            going = beams.live_on(t, top_lp, origin, token, last, eos_id)
            if going is None:
                break
            state = state.select(going)
    finally:
        model.train(was_training)
    return beams.best_first(n_best)


@torch.no_grad()
def beam_search_sentence(
    model: nn.Module, src: torch.Tensor, *, beam_size: int = 4, alpha: float = 0.6, max_len: int | None = None
) -> list[Hypothesis]:
    """Beam search for one sentence ``src (S,)``, written to be read; its finished hypotheses, best first.

    The same search as :func:`beam_search` (which a test holds it to), for one
    sentence and in Python lists: no batch, no padding, no sentences leaving it.
    ``<bos>``, ``<eos>`` and ``<pad>`` are 1, 2 and 0, as in the course's vocabularies.
    """
    bos, eos, pad = 1, 2, 0
    (max_len,) = _beam_limits(model, src[None], None, beam_size, alpha, max_len, None).tolist()
    was_training = model.training
    model.eval()
    live = [([], 0.0, model.start(src[None]))]  # (the tokens so far, their log p, the decoder state after them)
    finished: list[Hypothesis] = []
    for length in range(1, max_len + 1):
        candidates = []  # every hypothesis extended by each of its 2k likeliest next tokens
        for tokens, log_p, state in live:
            logits, after = model.step(torch.tensor([tokens[-1] if tokens else bos], device=src.device), state)
            log_probs = torch.log_softmax(logits[0].double(), dim=-1)
            log_probs[[pad, bos]] = float("-inf")  # never written: they are not words
            top = log_probs.topk(min(2 * beam_size, len(log_probs)))
            for lp, token in zip(top.values.tolist(), top.indices.tolist()):
                if lp > float("-inf"):
                    candidates.append((tokens + [token], log_p + lp, after))
        candidates.sort(key=lambda c: c[1], reverse=True)  # the likeliest first; keep 2k of them
        live = []
        for rank, (tokens, log_p, state) in enumerate(candidates[: 2 * beam_size]):
            ends = tokens[-1] == eos or length == max_len  # at the longest allowed, every hypothesis ends
            if ends and rank < beam_size and len(finished) < beam_size:
                finished.append(Hypothesis(tokens, log_p, log_p / length_penalty(length, alpha)))
            elif tokens[-1] != eos and len(live) < beam_size:
                live.append((tokens, log_p, state))  # the first k that did not end go on
        if len(finished) == beam_size or not live or length == max_len:
            break
    model.train(was_training)
    return sorted(finished, key=lambda h: h.score, reverse=True)


def _beam_limits(model, src, src_padding_mask, beam_size, alpha, max_len, n_best) -> torch.Tensor:
    """:func:`beam_search`'s arguments checked; the most tokens each sentence may have, on the CPU."""
    if not isinstance(beam_size, int) or isinstance(beam_size, bool) or beam_size < 1:
        raise ValueError(f"beam_size must be an int >= 1, got {beam_size!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha >= 0 or alpha == float("inf"):
        raise ValueError(f"alpha (the length penalty's exponent) must be a finite number >= 0, got {alpha!r}")
    if max_len is not None and (not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1):
        raise ValueError(f"max_len must be an int >= 1 (the most tokens to generate) or None, got {max_len!r}")
    if n_best is not None and (not isinstance(n_best, int) or isinstance(n_best, bool) or not 1 <= n_best <= beam_size):
        raise ValueError(f"n_best must be an int from 1 to beam_size = {beam_size}, got {n_best!r}")
    if not isinstance(src, torch.Tensor) or src.dim() != 2:
        raise ValueError(f"src must have shape (B, S), got shape {tuple(getattr(src, 'shape', ()))}")
    n_sent, width = src.shape
    if n_sent == 0:
        raise ValueError("src holds no sentences")
    if src_padding_mask is not None and src_padding_mask.shape != src.shape:
        raise ValueError(
            f"src_padding_mask of shape {tuple(src_padding_mask.shape)} does not match src of shape {tuple(src.shape)}"
        )
    src_len = (
        (~src_padding_mask).sum(dim=1)
        if src_padding_mask is not None
        else torch.full((n_sent,), width, device=src.device)
    )
    if width == 0 or (src_len == 0).any():
        empty = [0] if width == 0 else (src_len == 0).nonzero().flatten().tolist()
        raise ValueError(f"cannot translate an empty source sentence (rows {empty} hold no tokens)")
    if max_len is not None:
        return torch.full((n_sent,), max_len, dtype=torch.long)
    return output_limit(src_len.cpu().long(), cap=_model_cap(model))


def _model_cap(model) -> int | None:
    """The longest sequence the model's configuration allows (its positional table), if it says."""
    cap = getattr(getattr(model, "config", None), "max_len", None)
    return cap if isinstance(cap, int) else None


class _Beams:
    """The hypotheses of :func:`beam_search`: the live ones of the sentences still in the batch, and the finished.

    ``active`` lists the sentences still searched (their original rows, on the
    CPU); ``alive_lp (n, k)`` and ``alive_seq (n, k, t)`` are their live
    hypotheses' log-probabilities and tokens, ``tokens (n * k,)`` the tokens they
    feed the model next; ``fin_*`` hold every sentence's finished hypotheses.
    """

    def __init__(self, n_sent: int, k: int, longest: int, bos_id: int, pad_id: int, device: torch.device) -> None:
        self.k, self.longest, self.device = k, longest, device
        self.active = torch.arange(n_sent)  # the sentences still in the batch (original indices)
        self.alive_lp = torch.full((n_sent, k), float("-inf"), device=device)
        self.alive_lp[:, 0] = 0.0  # at first the k beams are the same <bos>: start from one of them
        self.alive_seq = torch.zeros(n_sent, k, 0, dtype=torch.long, device=device)
        self.tokens = torch.full((n_sent * k,), bos_id, dtype=torch.long, device=device)
        self.fin_seq = torch.full((n_sent, k, longest), pad_id, dtype=torch.long, device=device)
        self.fin_lp = torch.full((n_sent, k), float("-inf"), dtype=torch.float64, device=device)
        self.fin_score = torch.full((n_sent, k), float("-inf"), dtype=torch.float64, device=device)
        self.fin_len = torch.zeros(n_sent, k, dtype=torch.long, device=device)
        self.fin_count = torch.zeros(n_sent, dtype=torch.long, device=device)

    def candidates(self, log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The ``2k`` most probable extensions of each sentence's live hypotheses: ``log p``, origin and token."""
        n, k, vocab = log_probs.shape
        if self.alive_lp.dtype != log_probs.dtype:
            self.alive_lp = self.alive_lp.to(log_probs.dtype)
        candidates = (self.alive_lp[:, :, None] + log_probs).view(n, k * vocab)
        top_lp, top_idx = candidates.topk(min(2 * k, k * vocab), dim=1)  # (n, 2k), best first
        return top_lp, top_idx // vocab, top_idx % vocab  # which live hypothesis, which next token

    def finish(self, t, top_lp, origin, token, last, eos_id: int, alpha: float) -> None:
        """Set aside ``<eos>`` among the first k candidates (any candidate at the last step), while there is room."""
        k, device, length = self.k, self.device, t + 1  # tokens in each candidate, <eos> included
        first_k = torch.arange(top_lp.shape[1], device=device) < k
        finish = first_k & torch.isfinite(top_lp) & ((token == eos_id) | last[:, None])
        rank = finish.cumsum(dim=1)  # 1, 2, ... among this sentence's finishing candidates
        sent = self.active.to(device)
        finish &= rank <= (k - self.fin_count[sent])[:, None]
        if finish.any():
            rows, cols = finish.nonzero(as_tuple=True)
            who = sent[rows]
            slot = self.fin_count[who] + rank[rows, cols] - 1
            self.fin_seq[who, slot, :t] = self.alive_seq[rows, origin[rows, cols]]
            self.fin_seq[who, slot, t] = token[rows, cols]
            self.fin_lp[who, slot] = top_lp[rows, cols].double()
            self.fin_score[who, slot] = top_lp[rows, cols].double() / length_penalty(length, alpha)
            self.fin_len[who, slot] = length
            self.fin_count.index_add_(0, who, torch.ones_like(who))

    def live_on(self, t, top_lp, origin, token, last, eos_id: int) -> torch.Tensor | None:
        """Keep the first k candidates that do not end with ``<eos>``; drop the sentences that are done.

        Returns the rows of the decoder state to keep, in their new order, or
        ``None`` when every sentence is done.
        """
        k, device = self.k, self.device
        order = torch.arange(top_lp.shape[1], device=device) + top_lp.shape[1] * (token == eos_id)
        keep = order.topk(k, dim=1, largest=False).indices  # (n, k), ascending
        self.alive_lp = top_lp.gather(1, keep)
        beam_origin, beam_token = origin.gather(1, keep), token.gather(1, keep)
        self.alive_seq = torch.cat(
            [self.alive_seq.gather(1, beam_origin[..., None].expand(-1, -1, t)), beam_token[..., None]], dim=2
        )
        done = (self.fin_count[self.active.to(device)] >= k) | last | ~torch.isfinite(self.alive_lp).any(dim=1)
        if bool(done.all()):
            return None
        going = (~done).nonzero().flatten()
        self.active, self.alive_lp, self.alive_seq = (
            self.active[going.cpu()],
            self.alive_lp[going],
            self.alive_seq[going],
        )
        self.tokens = beam_token[going].flatten()
        return (going[:, None] * k + beam_origin[going]).flatten()

    def best_first(self, n_best: int | None) -> BeamDecoded:
        """Each sentence's best finished hypothesis (and its ``n_best``), by score."""
        order = self.fin_score.argsort(dim=1, descending=True, stable=True)  # (B, k): best first
        fin_score, fin_lp, fin_len = (x.gather(1, order) for x in (self.fin_score, self.fin_lp, self.fin_len))
        fin_seq = self.fin_seq.gather(1, order[..., None].expand(-1, -1, self.longest))
        width_out = int(fin_len[:, 0].max())
        nbest = None
        if n_best is not None:
            nbest = [
                [
                    Hypothesis(fin_seq[b, j, : fin_len[b, j]].tolist(), float(fin_lp[b, j]), float(fin_score[b, j]))
                    for j in range(min(n_best, int(self.fin_count[b])))
                ]
                for b in range(len(fin_seq))
            ]
        return BeamDecoded(
            tokens=fin_seq[:, 0, :width_out],
            lengths=fin_len[:, 0],
            attention=None,
            scores=fin_score[:, 0],
            log_probs=fin_lp[:, 0],
            nbest=nbest,
        )


@dataclass
class _PrefixState:
    src: torch.Tensor
    src_padding_mask: torch.Tensor | None
    prefix: torch.Tensor  # (B, t): <bos> and the tokens fed so far

    def select(self, index: torch.Tensor) -> "_PrefixState":
        mask = None if self.src_padding_mask is None else self.src_padding_mask[index]
        return _PrefixState(self.src[index], mask, self.prefix[index])


class Uncached(nn.Module):
    """Any model, decoded without its decoder state: each step runs the whole model on the whole prefix.

    ``Uncached(model).step`` feeds ``<bos> y_1 .. y_t`` through ``model(src,
    src_padding_mask, prefix)`` and keeps the last position's logits. It is how a
    Transformer would decode without a key-value cache (``t`` positions of work
    at step ``t``, so quadratic in the length), and the reference that cached
    decoding must equal: both decoders accept it like any model.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = getattr(model, "config", None)

    def start(self, src: torch.Tensor, src_padding_mask: torch.Tensor | None = None) -> _PrefixState:
        return _PrefixState(src, src_padding_mask, torch.zeros(src.shape[0], 0, dtype=torch.long, device=src.device))

    def step(self, tokens: torch.Tensor, state: _PrefixState) -> tuple[torch.Tensor, _PrefixState]:
        prefix = torch.cat([state.prefix, tokens[:, None]], dim=1)
        logits = self.model(state.src, state.src_padding_mask, prefix)
        return logits[:, -1], _PrefixState(state.src, state.src_padding_mask, prefix)


def cut_at_eos(ids: Sequence[int] | torch.Tensor, eos_id: int = 2) -> list[int]:
    """The indices before the first ``eos_id`` (all of them when there is none)."""
    ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    return ids[: ids.index(eos_id)] if eos_id in ids else ids


def ids_to_tokens(ids: torch.Tensor | Sequence[Sequence[int]], vocab) -> list[list[str]]:
    """Turn a batch of generated indices ``(B, L)`` into token lists, cut at ``<eos>``, without special tokens."""
    rows = ids.tolist() if isinstance(ids, torch.Tensor) else [list(r) for r in ids]
    if isinstance(ids, torch.Tensor) and ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, L), got shape {tuple(ids.shape)}")
    size = len(vocab)
    result = []
    for row in rows:
        for i in row:
            if not 0 <= i < size:
                raise IndexError(f"index {i} is outside the vocabulary of size {size}")
        result.append(vocab.decode(cut_at_eos(row, vocab.eos_id), strip_special=True))
    return result


def ids_to_text(ids: torch.Tensor | Sequence[Sequence[int]], vocab, lang: str | None = None) -> list[str]:
    """Like :func:`ids_to_tokens`, as text: detokenized for ``lang`` (``"fr"``, ...), or joined with spaces."""
    rows = ids_to_tokens(ids, vocab)
    if lang is None:
        return [" ".join(tokens) for tokens in rows]
    from .data import detokenize

    return [detokenize(tokens, lang) for tokens in rows]


def translate(
    model: nn.Module,
    sources: Sequence[Sequence[str]],
    src_vocab,
    tgt_vocab,
    *,
    max_len: int | None = None,
    batch_size: int = 128,
    beam_size: int = 1,
    alpha: float = 0.6,
) -> list[list[str]]:
    """Translate tokenized ``sources`` in batches; return the target token lists, in order.

    Greedily by default (``beam_size=1``, which is what a beam of one computes, by the
    faster :func:`greedy_decode`); with ``beam_size=k``, by :func:`beam_search` with the
    length penalty's ``alpha``. A translation has at most ``max_len`` tokens, by default
    :func:`output_limit` of its source's length (the source's length + 50). Because
    decoding a padded batch equals decoding each sentence alone, the batch size changes
    the speed, never the result.
    """
    from .masks import padding_mask

    if isinstance(sources, str) or any(isinstance(s, str) for s in sources):
        raise TypeError("translate expects tokenized sentences (lists of tokens), not strings; call tokenize first")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not isinstance(beam_size, int) or isinstance(beam_size, bool) or beam_size < 1:
        raise ValueError(f"beam_size must be an int >= 1 (1 decodes greedily), got {beam_size!r}")
    if any(len(s) == 0 for s in sources):
        raise ValueError("cannot translate an empty sentence")
    device = next(model.parameters()).device
    result: list[list[str]] = []
    for start in range(0, len(sources), batch_size):
        ids = [src_vocab.encode(list(s)) for s in sources[start : start + batch_size]]
        lengths = torch.tensor([len(x) for x in ids])
        longest = int(lengths.max())
        src = torch.tensor([x + [src_vocab.pad_id] * (longest - len(x)) for x in ids], device=device)
        ends = dict(bos_id=tgt_vocab.bos_id, eos_id=tgt_vocab.eos_id, pad_id=tgt_vocab.pad_id)
        if beam_size == 1:
            out = greedy_decode(model, src, padding_mask(lengths, longest).to(device), max_len=max_len, **ends)
        else:
            out = beam_search(
                model,
                src,
                padding_mask(lengths, longest).to(device),
                beam_size=beam_size,
                alpha=alpha,
                max_len=max_len,
                **ends,
            )
        result.extend(ids_to_tokens(out.tokens.cpu(), tgt_vocab))
    return result
