"""Honest answers in other styles: every exercise has at least three correct answers that are not the book's.

A learner rarely writes the solution the way the book does. For every checker in the registry, this file holds
answers in styles different from the notebook's solution cell and from each other: einsum where the book multiplies
matrices, NumPy round trips where the exercise allows them, ``take_along_dim`` or a one-hot matrix where it indexes,
``lerp``, ``addcmul`` and ``torch.where`` where it does arithmetic on masks, complex numbers for rotations, a loop
where the text forbids none and a vectorised form where it does, integer arithmetic where it calls ``math.ceil``,
numbers returned as Python, NumPy or 0-d tensors, ``-inf`` where it fills with ``finfo.min``, ``F.linear``,
``F.layer_norm`` and ``F.embedding``, masks from comparisons of aranges where it calls ``tril`` and the reverse.
Each answer reads the exercise's text: it calls nothing the checker refuses and meets every stated requirement.

Each is first shown to compute the checker's reference on every case and on further random inputs within what the
text allows, then submitted to the checker, which must accept it. An answer that is right but
refused is a wrong verdict of the checker: it is kept here, marked as an expected failure with that verdict, so that
the suite records the bug without weakening the answer.
"""

from __future__ import annotations

import collections
import fractions
import functools
import heapq
import importlib
import json
import math
import numbers
import pkgutil
import queue
from pathlib import Path

import numpy as np
import pytest
import scipy.special
import sympy
import torch
import torch.nn.functional as F

import attnbook.exercises as exercises
from attnbook.attention import MultiHeadAttention, masked_softmax, scaled_dot_product_attention
from attnbook.exercises import Case, compare
from attnbook.fastformer import FastSelfAttention
from attnbook.masks import causal_mask, padding_mask
from notebook_index import in_float64

for _module in pkgutil.iter_modules(exercises.__path__):
    importlib.import_module(f"attnbook.exercises.{_module.name}")
CHECKERS = exercises.registry()
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

#: The chapters whose notebook computes in float64 (``torch.set_default_dtype(torch.float64)`` in its setup cell):
#: their learners' answers run with that default, as the doors' tests run the notebooks' own solutions.
FLOAT64_CHAPTERS = {
    path.name[:2]
    for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")
    if any(
        "set_default_dtype(torch.float64)" in "".join(cell["source"])
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
        if cell["cell_type"] == "code"
    )
}

#: exercise -> {style: answer}, in the order written below.
STYLES: dict[str, dict[str, object]] = {}


def style(exercise: str, how: str):
    """Files the function below as an answer to ``exercise`` written in the style ``how``."""

    def keep(fn):
        assert how not in STYLES.setdefault(exercise, {}), (exercise, how)
        STYLES[exercise][how] = fn
        return fn

    return keep


# --- chapter 0: tensors, shapes and softmax ----------------------------------------------------------------------


@style("stable_log_softmax", "the log-sum-exp written out, then x minus it")
def stable_log_softmax_minus_lse(x, dim=-1):
    m = x.max(dim=dim, keepdim=True).values
    lse = m + torch.log(torch.sum(torch.exp(x - m), dim=dim, keepdim=True))  # m + log(sum(exp(x - m)))
    return x - lse


@style("stable_log_softmax", "NumPy round trip")
def stable_log_softmax_numpy(x, dim=-1):
    a = x.numpy()
    shifted = a - a.max(axis=dim, keepdims=True)
    return torch.from_numpy(shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True)))


@style("stable_log_softmax", "a loop over the rows in Python floats")
def stable_log_softmax_rows(x, dim=-1):
    last = x.movedim(dim, -1)
    out = []
    for row in last.reshape(-1, last.shape[-1]).tolist():
        top = max(row)
        log_total = top + math.log(math.fsum(math.exp(v - top) for v in row))
        out.append([v - log_total for v in row])
    return torch.tensor(out, dtype=x.dtype).reshape(last.shape).movedim(-1, dim)


@style("stable_log_softmax", "moved to the last axis, log1p of the others")
def stable_log_softmax_log1p(x, dim=-1):
    last = x.movedim(dim, -1)
    top, where = last.max(dim=-1, keepdim=True)
    others = torch.exp(last - top).scatter(-1, where, 0.0).sum(dim=-1, keepdim=True)  # the maximum's own 1 left out
    return (last - top - torch.log1p(others)).movedim(-1, dim)


@style("penalized_scores", "einsum, and cdist of the positions")
def penalized_scores_einsum(queries, keys, slope):
    dots = torch.einsum("btd,bsd->bts", queries, keys) / queries.shape[-1] ** 0.5
    query_at = torch.arange(queries.shape[1], dtype=dots.dtype)[:, None]
    key_at = torch.arange(keys.shape[1], dtype=dots.dtype)[:, None]
    return dots - slope * torch.cdist(query_at, key_at, p=1)  # |i - j| between points on a line


@style("penalized_scores", "a distance grid from NumPy, torch.sub with alpha")
def penalized_scores_numpy_grid(queries, keys, slope):
    distance = torch.from_numpy(np.abs(np.subtract.outer(np.arange(queries.shape[1]), np.arange(keys.shape[1]))))
    scores = torch.matmul(queries, keys.mT).div(math.sqrt(queries.shape[-1]))
    return torch.sub(scores, distance, alpha=slope)


@style("penalized_scores", "baddbmm of the penalty and the scaled products")
def penalized_scores_baddbmm(queries, keys, slope):
    B, T, d = queries.shape
    S = keys.shape[1]
    steps = torch.arange(max(T, S))
    penalty = (-slope * (steps[:T, None] - steps[None, :S]).abs()).to(queries.dtype)
    return torch.baddbmm(penalty.expand(B, T, S), queries, keys.transpose(1, 2), alpha=d**-0.5)


# --- chapter 1: sequence-to-sequence data ------------------------------------------------------------------------


@style("decoder_input_and_target", "F.pad and scatter")
def decoder_input_and_target_pad(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    tgt_in = F.pad(tgt, (1, 0), value=bos_id)
    tgt_out = F.pad(tgt, (0, 1), value=pad_id).scatter(1, lengths[:, None], eos_id)
    return tgt_in, tgt_out


@style("decoder_input_and_target", "torch.where on a grid of columns")
def decoder_input_and_target_where(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    B, T = tgt.shape
    column = torch.arange(T + 1).expand(B, T + 1)
    end = lengths[:, None]
    shifted = torch.cat([tgt.new_full((B, 1), bos_id), tgt], dim=1)
    widened = torch.cat([tgt, tgt.new_full((B, 1), pad_id)], dim=1)
    tgt_in = torch.where(column <= end, shifted, pad_id)  # <bos> y_1 .. y_n, then padding
    tgt_out = torch.where(column < end, widened, torch.where(column == end, eos_id, pad_id))
    return tgt_in, tgt_out


@style("decoder_input_and_target", "NumPy round trip")
def decoder_input_and_target_numpy(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    a = tgt.numpy()
    tgt_in = np.insert(a, 0, bos_id, axis=1)
    tgt_out = np.append(a, np.full((a.shape[0], 1), pad_id, dtype=a.dtype), axis=1)
    tgt_out[np.arange(a.shape[0]), lengths.numpy()] = eos_id
    return torch.from_numpy(tgt_in), torch.from_numpy(tgt_out)


@style("decoder_input_and_target", "a one-hot mask of the end, hstack")
def decoder_input_and_target_one_hot(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    at_end = F.one_hot(lengths, tgt.shape[1] + 1).bool()
    widened = torch.hstack([tgt, torch.full_like(tgt[:, :1], pad_id)])
    return torch.hstack([torch.full_like(tgt[:, :1], bos_id), tgt]), widened.masked_fill(at_end, eos_id)


@style("decoder_input_and_target", "torch.vmap of a function of one sentence")
def decoder_input_and_target_vmap(tgt, lengths, bos_id=1, eos_id=2, pad_id=0):
    T = tgt.shape[1]

    def one_sentence(words, n):
        column = torch.arange(T + 1)
        widened = torch.cat([words, words.new_full((1,), pad_id)])
        return torch.cat([words.new_full((1,), bos_id), words]), torch.where(column == n, eos_id, widened)

    return torch.vmap(one_sentence)(tgt, lengths)


@style("clipped_precision_multi", "n-grams by zip, counts by list.count")
def clipped_precision_multi_zip(hypothesis, references, n):
    def grams(tokens):
        return list(zip(*(tokens[i:] for i in range(n))))

    hyp = grams(hypothesis)
    refs = [grams(reference) for reference in references]
    return sum(min(hyp.count(g), max(r.count(g) for r in refs)) for g in set(hyp)), len(hyp)


@style("clipped_precision_multi", "a budget per n-gram, spent in order")
def clipped_precision_multi_budget(hypothesis, references, n):
    counted = [collections.Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1)) for ref in references]
    budget = {gram: max(c[gram] for c in counted) for c in counted for gram in c}
    matches = total = 0
    for i in range(len(hypothesis) - n + 1):
        gram = tuple(hypothesis[i : i + n])
        total += 1
        if budget.get(gram, 0) > 0:
            budget[gram] -= 1
            matches += 1
    return matches, total


@style("clipped_precision_multi", "NumPy bincount, NumPy integers")
def clipped_precision_multi_numpy(hypothesis, references, n):
    def grams(tokens):
        return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]

    hyp, refs = grams(hypothesis), [grams(reference) for reference in references]
    index = {g: i for i, g in enumerate(dict.fromkeys(hyp + [g for r in refs for g in r]))}

    def counts(gs):
        return np.bincount(np.array([index[g] for g in gs], dtype=np.int64), minlength=len(index))

    most = np.max([counts(r) for r in refs], axis=0)  # the most copies in any one reference
    return np.minimum(counts(hyp), most).sum(), len(hyp)


@style("corpus_brevity_penalty", "closest by tuple comparison, exp of min(0, 1 - r/c)")
def corpus_brevity_penalty_tuples(hyp_lens, ref_lens):
    c = sum(hyp_lens)
    r = sum(min((abs(length - h), length) for length in refs)[1] for h, refs in zip(hyp_lens, ref_lens))
    if c == 0:
        return 0.0 if r > 0 else 1.0
    return math.exp(min(0.0, 1 - r / c))


@style("corpus_brevity_penalty", "NumPy lexsort, NumPy's inf arithmetic at c = 0")
def corpus_brevity_penalty_numpy(hyp_lens, ref_lens):
    hyp = np.asarray(hyp_lens, dtype=np.float64)
    chosen = []
    for h, refs in zip(hyp, ref_lens):
        refs = np.asarray(refs, dtype=np.float64)
        chosen.append(refs[np.lexsort((refs, np.abs(refs - h)))[0]])  # by distance, then the shorter
    c, r = hyp.sum(), np.sum(chosen)
    if c >= r:
        return np.float64(1.0)
    with np.errstate(divide="ignore"):
        return np.exp(1 - r / c)  # c = 0: r / c = inf and exp(-inf) = 0, the limit


@style("corpus_brevity_penalty", "a 0-d tensor, torch.where")
def corpus_brevity_penalty_tensor(hyp_lens, ref_lens):
    c = torch.tensor(hyp_lens, dtype=torch.float64).sum()
    r = torch.zeros((), dtype=torch.float64)
    for h, refs in zip(hyp_lens, ref_lens):
        refs = torch.tensor(refs, dtype=torch.float64)
        gap = (refs - h).abs()
        r = r + refs[gap == gap.min()].min()
    return torch.where(c >= r, torch.ones((), dtype=torch.float64), torch.exp(1 - r / c))


@style("corpus_brevity_penalty", "ties broken by integer arithmetic")
def corpus_brevity_penalty_integer_key(hyp_lens, ref_lens):
    c = sum(hyp_lens)
    r = sum(
        min(refs, key=lambda length, h=h: 2 * abs(length - h) + (length > h)) for h, refs in zip(hyp_lens, ref_lens)
    )
    return 1.0 if c >= r else (math.exp(1 - r / c) if c else 0.0)


# --- chapter 2: the RNN encoder-decoder --------------------------------------------------------------------------


@style("best_candidate", "take_along_dim, logsumexp and nanmean")
def best_candidate_nanmean(logits, targets, pad_id=0):
    picked = torch.take_along_dim(logits, targets.unsqueeze(-1), dim=-1).squeeze(-1) - logits.logsumexp(dim=-1)
    scores = picked.masked_fill(targets == pad_id, float("nan")).nanmean(dim=-1)
    return scores, scores.argmax(dim=-1)


@style("best_candidate", "a one-hot einsum of the log-probabilities")
def best_candidate_one_hot(logits, targets, pad_id=0):
    log_probs = F.log_softmax(logits, dim=-1)
    chosen = F.one_hot(targets, logits.shape[-1]).to(log_probs.dtype)
    per_token = torch.einsum("bktv,bktv->bkt", log_probs, chosen)
    real = targets != pad_id  # integer ids against the padding id
    scores = torch.where(real, per_token, 0.0).sum(dim=-1) / real.sum(dim=-1)
    return scores, scores.max(dim=-1).indices


@style("best_candidate", "NumPy round trip")
def best_candidate_numpy(logits, targets, pad_id=0):
    lg, tg = logits.numpy(), targets.numpy()
    top = lg.max(axis=-1, keepdims=True)
    log_probs = lg - top - np.log(np.exp(lg - top).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, tg[..., None], axis=-1)[..., 0]
    real = tg != pad_id
    scores = (picked * real).sum(axis=-1) / real.sum(axis=-1)
    return torch.from_numpy(scores), torch.from_numpy(scores.argmax(axis=-1))


@style("gru_step", "F.linear and lerp")
def gru_step_linear_lerp(x, h, W_ih, W_hh, b_ih, b_hh):
    H = h.shape[-1]
    gi, gh = F.linear(x, W_ih, b_ih), F.linear(h, W_hh, b_hh)
    r = torch.sigmoid(gi[:, :H] + gh[:, :H])
    z = torch.sigmoid(gi[:, H : 2 * H] + gh[:, H : 2 * H])
    n = torch.tanh(gi[:, 2 * H :] + r * gh[:, 2 * H :])
    return torch.lerp(n, h, z)  # n + z (h - n) = (1 - z) n + z h


@style("gru_step", "einsum over the three gates, addcmul")
def gru_step_einsum(x, h, W_ih, W_hh, b_ih, b_hh):
    H = h.shape[-1]
    gi = torch.einsum("ghe,be->gbh", W_ih.reshape(3, H, -1), x) + b_ih.reshape(3, 1, H)
    gh = torch.einsum("ghk,bk->gbh", W_hh.reshape(3, H, H), h) + b_hh.reshape(3, 1, H)
    r, z = torch.sigmoid(gi[:2] + gh[:2])
    n = torch.tanh(gi[2] + r * gh[2])
    return torch.addcmul(n, z, h - n)


@style("gru_step", "NumPy round trip")
def gru_step_numpy(x, h, W_ih, W_hh, b_ih, b_hh):
    def sigmoid(a):
        return 1 / (1 + np.exp(-a))

    hs = h.numpy()
    H = hs.shape[1]
    gi = x.numpy() @ W_ih.numpy().T + b_ih.numpy()
    gh = hs @ W_hh.numpy().T + b_hh.numpy()
    r, z = sigmoid(gi[:, :H] + gh[:, :H]), sigmoid(gi[:, H : 2 * H] + gh[:, H : 2 * H])
    n = np.tanh(gi[:, 2 * H :] + r * gh[:, 2 * H :])
    return torch.from_numpy(z * hs + (1 - z) * n)


@style("last_real_state", "take_along_dim")
def last_real_state_take(outputs, lengths):
    return torch.take_along_dim(outputs, (lengths - 1).view(-1, 1, 1), dim=1).squeeze(1)


@style("last_real_state", "a one-hot einsum")
def last_real_state_one_hot(outputs, lengths):
    pick = F.one_hot(lengths - 1, outputs.shape[1]).to(outputs.dtype)  # (B, S): 1 at each last real token
    return torch.einsum("bs,bsh->bh", pick, outputs)


@style("last_real_state", "index_select on the flattened batch")
def last_real_state_flat(outputs, lengths):
    B, S, H = outputs.shape
    return outputs.reshape(B * S, H).index_select(0, torch.arange(B) * S + lengths - 1)


@style("last_real_state", "NumPy fancy indexing")
def last_real_state_numpy(outputs, lengths):
    return torch.from_numpy(outputs.numpy()[np.arange(len(lengths)), lengths.numpy() - 1])


@style("last_real_state", "torch.vmap of a function of one sentence")
def last_real_state_vmap(outputs, lengths):
    def one_sentence(states, n):
        return states.index_select(0, n - 1).squeeze(0)

    return torch.vmap(one_sentence)(outputs, lengths.unsqueeze(-1))


@style("trim_after_eos", "cummax shifted by F.pad, torch.where")
def trim_after_eos_cummax(ids, eos_id=2, pad_id=0):
    reached = (ids == eos_id).int().cummax(dim=1).values  # 1 from the first <eos> on
    before = F.pad(reached[:, :-1], (1, 0))  # ... from the token after it on
    return torch.where(before.bool(), pad_id, ids)


@style("trim_after_eos", "the first <eos> by argmax, an arithmetic mask")
def trim_after_eos_argmax(ids, eos_id=2, pad_id=0):
    T = ids.shape[1]
    is_eos = ids == eos_id
    first = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1), T)  # T: no <eos>, keep it all
    keep = (torch.arange(T) <= first[:, None]).long()
    return ids * keep + pad_id * (1 - keep)


@style("trim_after_eos", "NumPy logical_or.accumulate")
def trim_after_eos_numpy(ids, eos_id=2, pad_id=0):
    a = ids.numpy()
    seen = np.logical_or.accumulate(a == eos_id, axis=1)
    before = np.zeros_like(seen)
    before[:, 1:] = seen[:, :-1]
    return torch.from_numpy(np.where(before, pad_id, a))


@style("trim_after_eos", "torch.vmap of a function of one row")
def trim_after_eos_vmap(ids, eos_id=2, pad_id=0):
    def one_row(row):
        ended_before = torch.cumsum(row == eos_id, dim=0) - (row == eos_id).long()
        return torch.where(ended_before > 0, pad_id, row)

    return torch.vmap(one_row)(ids)


# --- chapter 3: attention ----------------------------------------------------------------------------------------


@style("masked_softmax_per_query", "-inf, then nan_to_num")
def masked_softmax_per_query_nan(scores, valid_lens):
    ignore = torch.arange(scores.shape[-1]) >= valid_lens.unsqueeze(-1)
    return scores.masked_fill(ignore, float("-inf")).softmax(dim=-1).nan_to_num(0.0)  # no valid key: 0/0 -> 0


@style("masked_softmax_per_query", "exp by hand from the largest valid score")
def masked_softmax_per_query_by_hand(scores, valid_lens):
    B, T, S = scores.shape
    keep = torch.arange(S).expand(B, T, S) < valid_lens[..., None]
    top = torch.where(keep, scores, float("-inf")).amax(dim=-1, keepdim=True)
    top = torch.where(top.isfinite(), top, 0.0)
    e = torch.exp(scores - top) * keep
    return e / e.sum(dim=-1, keepdim=True).clamp(min=1.0)  # the sum is at least 1 wherever a key is valid


@style("masked_softmax_per_query", "a -1e9 penalty and a multiplied mask")
def masked_softmax_per_query_penalty(scores, valid_lens):
    keep = (torch.arange(scores.shape[-1]) < valid_lens[..., None]).to(scores.dtype)
    return F.softmax(scores - 1e9 * (1 - keep), dim=-1) * keep


@style("masked_softmax_per_query", "SciPy's softmax on a NumPy array, zeros where no key is valid")
def masked_softmax_per_query_scipy(scores, valid_lens):
    ignore = np.arange(scores.shape[-1]) >= valid_lens.numpy()[..., None]
    with np.errstate(invalid="ignore"):
        weights = scipy.special.softmax(np.where(ignore, -np.inf, scores.numpy()), axis=-1)
    return torch.from_numpy(np.nan_to_num(weights, nan=0.0))


@style("general_attention", "einsum of three operands, the library's masked_softmax")
def general_attention_einsum(queries, keys, values, W, key_padding_mask):
    scores = torch.einsum("btq,qk,bsk->bts", queries, W, keys)
    weights = masked_softmax(scores, key_padding_mask[:, None, :])
    return torch.einsum("bts,bsv->btv", weights, values), weights


@style("general_attention", "keys turned by W first, -inf masking")
def general_attention_keys_first(queries, keys, values, W, key_padding_mask):
    turned = keys @ W.T  # (B, S, d_q): W k for every key
    scores = queries @ turned.transpose(1, 2)
    weights = scores.masked_fill(key_padding_mask.unsqueeze(1), float("-inf")).softmax(dim=-1)
    return weights @ values, weights


@style("general_attention", "bmm and exp by hand")
def general_attention_bmm(queries, keys, values, W, key_padding_mask):
    scores = torch.bmm(queries.matmul(W), keys.transpose(1, 2))
    real = ~key_padding_mask[:, None, :]
    top = scores.masked_fill(~real, float("-inf")).amax(dim=-1, keepdim=True)
    e = (scores - top).exp() * real
    weights = e / e.sum(dim=-1, keepdim=True)
    return torch.bmm(weights, values), weights


@style("diagonal_attention", "linspace centres, F.softmax over -inf")
def diagonal_attention_linspace(scores, src_lengths, width):
    T, S = scores.shape[1:]
    centre = torch.linspace(0, 1, T, dtype=torch.float64)[None, :, None] * (src_lengths[:, None, None] - 1)
    j = torch.arange(S, dtype=torch.float64)
    gauss = -0.5 * ((j - centre) / width) ** 2
    padded = j >= src_lengths[:, None, None]  # (B, 1, S)
    return F.softmax((scores + gauss).masked_fill(padded, float("-inf")), dim=-1)


@style("diagonal_attention", "a loop over the sentences, each softmax over its real keys")
def diagonal_attention_loop(scores, src_lengths, width):
    T = scores.shape[1]
    weights = torch.zeros_like(scores)
    t = torch.arange(T, dtype=scores.dtype)[:, None]
    for b, length in enumerate(src_lengths.tolist()):
        gap = torch.arange(length, dtype=scores.dtype) - t * (length - 1) / (T - 1)
        weights[b, :, :length] = torch.softmax(scores[b, :, :length] - gap**2 / (2 * width**2), dim=-1)
    return weights


@style("diagonal_attention", "NumPy round trip")
def diagonal_attention_numpy(scores, src_lengths, width):
    s, lengths = scores.numpy().astype(np.float64), src_lengths.numpy()
    B, T, S = s.shape
    centre = np.arange(T)[None, :, None] * (lengths[:, None, None] - 1) / (T - 1)
    logits = s - (np.arange(S) - centre) ** 2 / (2 * width**2)
    logits = np.where(np.arange(S) < lengths[:, None, None], logits, -np.inf)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return torch.from_numpy(e / e.sum(axis=-1, keepdims=True))


@style("alignment_accuracy", "a one-hot of the argmax against the links, a 0-d tensor")
def alignment_accuracy_one_hot(weights, links):
    strongest = F.one_hot(weights.argmax(dim=-1), weights.shape[-1]).bool()
    return (strongest & links).any(dim=-1).sum() / links.any(dim=-1).sum()


@style("alignment_accuracy", "NumPy, a NumPy float")
def alignment_accuracy_numpy(weights, links):
    w, linked = weights.numpy(), links.numpy()
    hit = np.take_along_axis(linked, w.argmax(axis=-1)[..., None], axis=-1)[..., 0]
    return np.float64(hit.sum()) / linked.any(axis=-1).sum()


@style("alignment_accuracy", "the flattened argmax, Python floats")
def alignment_accuracy_flat(weights, links):
    B, T, S = weights.shape
    where = weights.argmax(dim=-1).flatten() + torch.arange(B * T) * S
    return float(links.flatten()[where].sum()) / float(links.any(dim=-1).sum())


@style("alignment_accuracy", "an exact fractions.Fraction")
def alignment_accuracy_fraction(weights, links):
    hit = links.gather(-1, weights.argmax(dim=-1, keepdim=True)).squeeze(-1)
    return fractions.Fraction(int(hit.sum()), int(links.any(dim=-1).sum()))  # a share, exactly


# --- chapter 4: self-attention -----------------------------------------------------------------------------------


@style("two_source_attention", "two blocks of scores, one softmax")
def two_source_attention_blocks(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    q = y @ w_q
    scale = q.shape[-1] ** -0.5
    scores = torch.cat([q @ (x1 @ w_k).transpose(1, 2) * scale, q @ (x2 @ w_k).transpose(1, 2) * scale], dim=-1)
    weights = scores.masked_fill(torch.cat([mask1, mask2], dim=1)[:, None], float("-inf")).softmax(dim=-1)
    S1 = x1.shape[1]
    return weights[..., :S1] @ (x1 @ w_v) + weights[..., S1:] @ (x2 @ w_v)


@style("two_source_attention", "two partial sums with a shared maximum, einsum")
def two_source_attention_partial_sums(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    q = torch.einsum("btd,dk->btk", y, w_q) / math.sqrt(w_q.shape[1])

    def source(x, mask):
        scores = torch.einsum("btk,bsd,dk->bts", q, x, w_k).masked_fill(mask[:, None], float("-inf"))
        return scores, torch.einsum("bsd,dv->bsv", x, w_v)

    (s1, v1), (s2, v2) = source(x1, mask1), source(x2, mask2)
    top = torch.maximum(s1.amax(dim=-1, keepdim=True), s2.amax(dim=-1, keepdim=True))
    e1, e2 = (s1 - top).exp(), (s2 - top).exp()
    return (e1 @ v1 + e2 @ v2) / (e1.sum(dim=-1, keepdim=True) + e2.sum(dim=-1, keepdim=True))


@style("two_source_attention", "F.linear projections, finfo.min fill, bmm")
def two_source_attention_linear(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    x = torch.cat((x1, x2), dim=1)
    pad = torch.cat((mask1, mask2), dim=1).unsqueeze(1)
    q, k, v = F.linear(y, w_q.T), F.linear(x, w_k.T), F.linear(x, w_v.T)
    scores = torch.bmm(q, k.transpose(1, 2)).div(math.sqrt(k.shape[-1]))
    weights = F.softmax(scores.masked_fill(pad, torch.finfo(scores.dtype).min), dim=-1).masked_fill(pad, 0.0)
    return torch.bmm(weights, v)


@style("two_source_attention", "NumPy round trip")
def two_source_attention_numpy(y, x1, mask1, x2, mask2, w_q, w_k, w_v):
    x = np.concatenate([x1.numpy(), x2.numpy()], axis=1)
    pad = np.concatenate([mask1.numpy(), mask2.numpy()], axis=1)[:, None, :]
    q, k, v = y.numpy() @ w_q.numpy(), x @ w_k.numpy(), x @ w_v.numpy()
    scores = np.where(pad, -np.inf, q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1]))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return torch.from_numpy(e / e.sum(axis=-1, keepdims=True) @ v)


@style("local_global_attention", "PyTorch's fused attention on a boolean pattern")
def local_global_attention_fused(q, k, v, key_padding_mask, half_width):
    i = torch.arange(q.shape[1])[:, None]
    j = torch.arange(q.shape[1])[None, :]
    reads = ((i - j).abs() <= half_width) | (i == 0) | (j == 0)
    allowed = reads & ~key_padding_mask[:, None, :]  # (B, T, T), True = read
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return torch.where(allowed.any(dim=-1, keepdim=True), out, 0.0)  # no key at all: a zero output


@style("local_global_attention", "a band from tril and triu, exp by hand")
def local_global_attention_tril(q, k, v, key_padding_mask, half_width):
    T = q.shape[1]
    ones = torch.ones(T, T, dtype=torch.bool)
    reads = ones.tril(half_width) & ones.triu(-half_width)
    reads[0, :] = True  # the global token reads everyone ...
    reads[:, 0] = True  # ... and everyone reads it
    reads = reads & ~key_padding_mask.unsqueeze(1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    top = scores.masked_fill(~reads, float("-inf")).amax(dim=-1, keepdim=True)
    top = torch.where(reads.any(dim=-1, keepdim=True), top, 0.0)
    e = torch.exp(scores - top) * reads
    total = e.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, (e @ v) / total, 0.0)


@style("local_global_attention", "a loop over the queries")
def local_global_attention_loop(q, k, v, key_padding_mask, half_width):
    B, T, d_k = q.shape
    out = q.new_zeros(B, T, v.shape[-1])
    for b in range(B):
        for i in range(T):
            read = [
                j for j in range(T) if not key_padding_mask[b, j] and (i == 0 or j == 0 or abs(i - j) <= half_width)
            ]
            if read:
                weights = torch.softmax(k[b, read] @ q[b, i] / math.sqrt(d_k), dim=0)
                out[b, i] = weights @ v[b, read]
    return out


@style("unshuffle", "assignment through the permutation")
def unshuffle_assign(outputs, perm):
    restored = torch.empty_like(outputs)
    restored[:, perm] = outputs  # the token at place i came from perm[i]: put it back there
    return restored


@style("unshuffle", "the inverse by scatter, index_select")
def unshuffle_scatter(outputs, perm):
    inverse = torch.empty_like(perm).scatter_(0, perm, torch.arange(len(perm)))
    return outputs.index_select(1, inverse)


@style("unshuffle", "a permutation matrix in einsum")
def unshuffle_matrix(outputs, perm):
    moved = F.one_hot(perm, len(perm)).to(outputs.dtype)  # moved[i, perm[i]] = 1
    return torch.einsum("ij,bid->bjd", moved, outputs)


@style("unshuffle", "NumPy take")
def unshuffle_numpy(outputs, perm):
    return torch.from_numpy(np.take(outputs.numpy(), np.argsort(perm.numpy()), axis=1))


@style("conv_layers_to_connect", "integer ceiling division")
def conv_layers_to_connect_floor_division(n, k):
    return -(-(n - 1) // (k - 1))


@style("conv_layers_to_connect", "a loop growing the reach")
def conv_layers_to_connect_loop(n, k):
    layers, seen = 0, 1
    while seen < n:
        seen += k - 1
        layers += 1
    return layers


@style("conv_layers_to_connect", "divmod, a remainder rounds up")
def conv_layers_to_connect_divmod(n, k):
    whole, left = divmod(n - 1, k - 1)
    return whole + (left > 0)


@style("conv_layers_to_connect", "NumPy ceil, a NumPy integer")
def conv_layers_to_connect_numpy(n, k):
    return np.ceil(np.float64(n - 1) / (k - 1)).astype(np.int64)


@style("conv_layers_to_connect", "a breadth-first search over positions, collections.deque")
def conv_layers_to_connect_deque(n, k):
    layers = {n - 1: 0}  # the last position, reached with no layer
    frontier = collections.deque([n - 1])
    while frontier:
        p = frontier.popleft()
        for earlier in range(max(0, p - (k - 1)), p):  # what one more layer lets position p see
            if earlier not in layers:
                layers[earlier] = layers[p] + 1
                frontier.append(earlier)
    return layers[0]


@style("conv_layers_to_connect", "a breadth-first search over positions, queue.Queue")
def conv_layers_to_connect_queue(n, k):
    layers = {n - 1: 0}
    frontier = queue.Queue()  # a FIFO, in this one thread
    frontier.put(n - 1)
    while not frontier.empty():
        p = frontier.get()
        for earlier in range(max(0, p - (k - 1)), p):
            if earlier not in layers:
                layers[earlier] = layers[p] + 1
                frontier.put(earlier)
    return layers[0]


@style("conv_layers_to_connect", "the reach of the first input simulated with max_pool1d")
def conv_layers_to_connect_pooling(n, k):
    reached = torch.zeros(1, 1, n)
    reached[..., 0] = 1.0  # the first input
    layers = 0
    while reached[0, 0, -1] == 0:  # one more causal layer: each position sees itself and the k - 1 before it
        reached = F.max_pool1d(F.pad(reached, (k - 1, 0)), kernel_size=k, stride=1)
        layers += 1
    return layers


# --- chapter 5: multi-head attention -----------------------------------------------------------------------------


@style("grouped_query_attention", "a group axis in einsum, no copies of the keys")
def grouped_query_attention_groups(x, W_q, W_k, W_v, num_heads, num_kv_heads):
    B, T, d = x.shape
    d_k, per = d // num_heads, num_heads // num_kv_heads
    q = (x @ W_q).view(B, T, num_kv_heads, per, d_k)  # query head g * per + p reads key-value head g
    k = (x @ W_k).view(B, T, num_kv_heads, d_k)
    v = (x @ W_v).view(B, T, num_kv_heads, d_k)
    weights = (torch.einsum("btgpe,bsge->bgpts", q, k) / math.sqrt(d_k)).softmax(dim=-1)
    return torch.einsum("bgpts,bsge->btgpe", weights, v).reshape(B, T, d)


@style("grouped_query_attention", "a loop over the query heads")
def grouped_query_attention_loop(x, W_q, W_k, W_v, num_heads, num_kv_heads):
    d_k = x.shape[-1] // num_heads
    per = num_heads // num_kv_heads
    heads = []
    for i in range(num_heads):
        mine, shared = slice(i * d_k, (i + 1) * d_k), slice(i // per * d_k, (i // per + 1) * d_k)
        q, k, v = x @ W_q[:, mine], x @ W_k[:, shared], x @ W_v[:, shared]
        heads.append(torch.softmax(q @ k.mT / d_k**0.5, dim=-1) @ v)
    return torch.cat(heads, dim=-1)


@style("grouped_query_attention", "expand and reshape, the library's attention")
def grouped_query_attention_expand(x, W_q, W_k, W_v, num_heads, num_kv_heads):
    B, T, d = x.shape
    d_k, per = d // num_heads, num_heads // num_kv_heads

    def shared(t):  # (B, T, g * d_k) -> (B, h, T, d_k), each key-value head seen by its group's query heads
        grouped = t.unflatten(-1, (num_kv_heads, 1, d_k)).expand(B, T, num_kv_heads, per, d_k)
        return grouped.reshape(B, T, num_heads, d_k).transpose(1, 2)

    q = (x @ W_q).unflatten(-1, (num_heads, d_k)).transpose(1, 2)
    heads, _ = scaled_dot_product_attention(q, shared(x @ W_k), shared(x @ W_v))
    return heads.transpose(1, 2).flatten(2)


@style("grouped_query_attention", "NumPy round trip with np.repeat")
def grouped_query_attention_numpy(x, W_q, W_k, W_v, num_heads, num_kv_heads):
    a = x.numpy()
    B, T, d = a.shape
    d_k = d // num_heads

    def heads(t, count):
        return t.reshape(B, T, count, d_k).transpose(0, 2, 1, 3)

    q = heads(a @ W_q.numpy(), num_heads)
    k = np.repeat(heads(a @ W_k.numpy(), num_kv_heads), num_heads // num_kv_heads, axis=1)
    v = np.repeat(heads(a @ W_v.numpy(), num_kv_heads), num_heads // num_kv_heads, axis=1)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_k)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return torch.from_numpy((e / e.sum(axis=-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(B, T, d))


@style("gqa_parameter_count", "(inputs + bias) x outputs, projection by projection")
def gqa_parameter_count_per_projection(d_model, num_heads, num_kv_heads, bias=True):
    kv = d_model // num_heads * num_kv_heads
    return sum((d_model + int(bias)) * width for width in (d_model, kv, kv, d_model))


@style("gqa_parameter_count", "factored: 2 (d + b)(d + kv)")
def gqa_parameter_count_factored(d_model, num_heads, num_kv_heads, bias=True):
    return 2 * (d_model + bias) * (d_model + d_model // num_heads * num_kv_heads)


@style("gqa_parameter_count", "NumPy shapes, a NumPy integer")
def gqa_parameter_count_numpy(d_model, num_heads, num_kv_heads, bias=True):
    kv = d_model // num_heads * num_kv_heads
    shapes = np.array([[d_model, d_model], [d_model, kv], [d_model, kv], [d_model, d_model]])
    return shapes.prod(axis=1).sum() + bias * shapes[:, 1].sum()


@style("attention_with_head_gates", "the gates folded into the rows of W_o, einsum attention")
def attention_with_head_gates_in_w_o(x, W_q, W_k, W_v, W_o, num_heads, gates):
    B, T, d = x.shape
    d_k = d // num_heads
    q, k, v = ((x @ W).view(B, T, num_heads, d_k) for W in (W_q, W_k, W_v))
    weights = torch.einsum("bthe,bshe->bhts", q, k).div(math.sqrt(d_k)).softmax(dim=-1)
    merged = torch.einsum("bhts,bshe->bthe", weights, v).reshape(B, T, d)
    return merged @ (W_o * gates.repeat_interleave(d_k).unsqueeze(1))  # row j of W_o reads head j // d_k


@style("attention_with_head_gates", "a loop over the heads, each head's share of W_o")
def attention_with_head_gates_loop(x, W_q, W_k, W_v, W_o, num_heads, gates):
    d_k = x.shape[-1] // num_heads
    out = 0
    for i in range(num_heads):
        cols = slice(i * d_k, (i + 1) * d_k)
        q, k, v = x @ W_q[:, cols], x @ W_k[:, cols], x @ W_v[:, cols]
        head = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1) @ v
        out = out + (gates[i] * head) @ W_o[cols]
    return out


@style("attention_with_head_gates", "the values scaled by the gates, the library's attention")
def attention_with_head_gates_values(x, W_q, W_k, W_v, W_o, num_heads, gates):
    def heads(t):
        return t.unflatten(-1, (num_heads, -1)).transpose(1, 2)

    # a head's output is linear in its values: gating the values gates the output
    out, _ = scaled_dot_product_attention(heads(x @ W_q), heads(x @ W_k), heads(x @ W_v) * gates.view(-1, 1, 1))
    return out.transpose(1, 2).flatten(2) @ W_o


@style("new_queries_mask", "triu with an offset diagonal")
def new_queries_mask_triu(lengths, T, S):
    later = torch.ones(T, S, dtype=torch.bool).triu(diagonal=S - T + 1)
    padded = torch.arange(S).expand(len(lengths), S) >= lengths.unsqueeze(1)
    return later.unsqueeze(0) | padded.unsqueeze(1)


@style("new_queries_mask", "the library's padding_mask, offsets of aranges")
def new_queries_mask_offsets(lengths, T, S):
    offset = torch.arange(S)[None, :] - torch.arange(T)[:, None]  # j - i
    return (offset > S - T)[None] | padding_mask(lengths, S)[:, None, :]


@style("new_queries_mask", "NumPy tri")
def new_queries_mask_numpy(lengths, T, S):
    seen = np.tri(T, S, k=S - T, dtype=bool)  # key j <= S - T + i
    padded = np.arange(S) >= lengths.numpy()[:, None]
    return torch.from_numpy(~seen[None] | padded[:, None])


@style("new_queries_mask", "the last key each query may read, torch.minimum")
def new_queries_mask_minimum(lengths, T, S):
    last = torch.minimum(torch.arange(S - T, S)[None, :, None], lengths[:, None, None] - 1)
    return torch.arange(S) > last


# --- chapter 6: positional encoding ------------------------------------------------------------------------------


@style("sinusoid_table_by_hand", "frequencies by exp and log, interleaved by stack")
def sinusoid_table_exp_log(length, d):
    frequency = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    angles = torch.outer(torch.arange(length, dtype=torch.float64), frequency)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1).float()


@style("sinusoid_table_by_hand", "NumPy, returned in float64")
def sinusoid_table_numpy(length, d):
    angles = np.arange(length)[:, None] / np.power(10000.0, 2 * np.arange(d // 2)[None, :] / d)
    table = np.empty((length, d))
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return torch.from_numpy(table)


@style("sinusoid_table_by_hand", "a complex exponential, its parts swapped into place")
def sinusoid_table_complex(length, d):
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(length, dtype=torch.float64)[:, None] * omega
    unit = torch.polar(torch.ones_like(angles), angles)  # cos + i sin
    return torch.view_as_real(unit).flip(-1).reshape(length, d)  # (sin, cos) side by side


@style("sinusoid_table_by_hand", "a Python loop with math.sin and math.cos")
def sinusoid_table_loop(length, d):
    rows = []
    for p in range(length):
        row = []
        for i in range(0, d, 2):
            angle = p / 10000 ** (i / d)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32)


@style("rotate_by_position", "complex numbers: each pair times e^(-i angle)")
def rotate_by_position_complex(x, positions):
    B, T, d = x.shape
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.to(torch.float64)[:, None] * omega
    pairs = torch.view_as_complex(x.to(torch.float64).reshape(B, T, d // 2, 2).contiguous())
    turned = pairs * torch.polar(torch.ones_like(angles), -angles)  # [cos, sin; -sin, cos] is a turn by -angle
    return torch.view_as_real(turned).reshape(B, T, d).to(x.dtype)


@style("rotate_by_position", "pairs unbound and stacked back, addcmul")
def rotate_by_position_stack(x, positions):
    d = x.shape[-1]
    angles = torch.outer(positions.double(), torch.pow(10000.0, -torch.arange(0, d, 2).double() / d))
    cos, sin = torch.cos(angles), torch.sin(angles)
    first, second = x.unflatten(-1, (d // 2, 2)).unbind(-1)
    turned = (torch.addcmul(cos * first, sin, second), torch.addcmul(cos * second, sin, first, value=-1))
    return torch.stack(turned, dim=-1).flatten(-2)


@style("rotate_by_position", "NumPy round trip")
def rotate_by_position_numpy(x, positions):
    a = x.numpy()
    d = a.shape[-1]
    angles = positions.numpy()[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    c, s = np.cos(angles), np.sin(angles)
    out = np.empty_like(a)
    out[..., ::2] = c * a[..., ::2] + s * a[..., 1::2]
    out[..., 1::2] = c * a[..., 1::2] - s * a[..., ::2]
    return torch.from_numpy(out)


@style("position_from_encoding", "the angle of a complex number")
def position_from_encoding_complex(pe):
    d = pe.shape[-1]
    turn = torch.complex(pe[:, -1], pe[:, -2]).angle()  # cos + i sin: its angle, in (-pi, pi]
    turn = torch.remainder(turn, 2 * math.pi)
    return (turn * 10000.0 ** ((d - 2) / d)).round().to(torch.int64)


@style("position_from_encoding", "NumPy arctan2, negative angles moved up by 2 pi")
def position_from_encoding_numpy(pe):
    a = pe.numpy()
    d = a.shape[-1]
    angle = np.arctan2(a[:, -2], a[:, -1])
    angle = np.where(angle < 0, angle + 2 * np.pi, angle)
    return torch.from_numpy(np.rint(angle / 10000.0 ** (-(d - 2) / d)).astype(np.int64))


@style("position_from_encoding", "math.atan2 row by row")
def position_from_encoding_loop(pe):
    speed = 10000 ** (-(pe.shape[-1] - 2) / pe.shape[-1])  # radians per position of the slowest pair
    found = [round((math.atan2(sine, cosine) % math.tau) / speed) for sine, cosine in pe[:, -2:].tolist()]
    return torch.tensor(found, dtype=torch.long)


@style("add_positions_left_padded", "positions by cumsum of the real mask, torch.where")
def add_positions_left_padded_cumsum(x, table, lengths):
    T = x.shape[1]
    real = torch.arange(T) >= (T - lengths).unsqueeze(1)
    position = real.long().cumsum(dim=1) - 1
    return torch.where(real.unsqueeze(-1), x + table[position.clamp(min=0)], x)


@style("add_positions_left_padded", "a one-hot matrix of positions times the table")
def add_positions_left_padded_one_hot(x, table, lengths):
    T = x.shape[1]
    position = torch.arange(T) - (T - lengths)[:, None]
    pick = (position[..., None] == torch.arange(table.shape[0])).to(x.dtype)  # the padding (< 0) picks no row
    return x + torch.einsum("btn,nd->btd", pick, table)


@style("add_positions_left_padded", "F.embedding and addcmul")
def add_positions_left_padded_embedding(x, table, lengths):
    T = x.shape[1]
    position = torch.arange(T).unsqueeze(0) + lengths.unsqueeze(1) - T
    rows = F.embedding(position.clamp(min=0), table)
    return torch.addcmul(x, rows, (position >= 0).unsqueeze(-1).to(x.dtype))


@style("add_positions_left_padded", "NumPy round trip")
def add_positions_left_padded_numpy(x, table, lengths):
    T = x.shape[1]
    position = np.arange(T)[None, :] - (T - lengths.numpy())[:, None]
    rows = table.numpy()[np.clip(position, 0, None)]
    return x + torch.from_numpy(np.where(position[..., None] >= 0, rows, 0.0))


@style("add_positions_left_padded", "torch.vmap of a function of one sentence")
def add_positions_left_padded_vmap(x, table, lengths):
    T = x.shape[1]

    def one_sentence(tokens, n):
        position = torch.arange(T) - (T - n)
        real = (position >= 0).unsqueeze(-1)
        return tokens + table.index_select(0, position.clamp(min=0)) * real

    return torch.vmap(one_sentence)(x, lengths)


# --- chapter 7: the Transformer ----------------------------------------------------------------------------------


@style("encoder_layer", "F.layer_norm with the norms' own parameters")
def encoder_layer_functional(x, src_lengths, attention, ffn, norm1, norm2):
    padded = src_lengths.unsqueeze(1) <= torch.arange(x.shape[1])

    def add_norm(a, b, norm):
        return F.layer_norm(a + b, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    h = add_norm(x, attention(x, x, x, key_padding_mask=padded), norm1)
    return add_norm(h, ffn(h), norm2)


@style("encoder_layer", "a cumsum mask, the attention's weights asked for")
def encoder_layer_cumsum(x, src_lengths, attention, ffn, norm1, norm2):
    counted = torch.ones(x.shape[:2], dtype=torch.long).cumsum(dim=1)  # 1, 2, ..., S
    attended, _ = attention(x, x, x, key_padding_mask=counted > src_lengths[:, None], need_weights=True)
    h = norm1(attended + x)
    return norm2(ffn(h) + h)


@style("encoder_layer", "a NumPy mask, the sublayers in a loop")
def encoder_layer_loop(x, src_lengths, attention, ffn, norm1, norm2):
    mask = torch.from_numpy(np.arange(x.shape[1]) >= src_lengths.numpy()[:, None])
    sublayers = [lambda h: attention(h, h, h, key_padding_mask=mask), ffn]
    for sublayer, norm in zip(sublayers, (norm1, norm2)):
        x = norm(x + sublayer(x))
    return x


@style("pre_ln_decoder_layer", "the library's padding_mask, the sublayers in a loop")
def pre_ln_decoder_layer_loop(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    mask = padding_mask(src_lengths, memory.shape[1])
    sublayers = (
        lambda h: self_attention(h, h, h, is_causal=True),
        lambda h: cross_attention(h, memory, memory, key_padding_mask=mask),
        ffn,
    )
    for norm, sublayer in zip(norms, sublayers):
        y = y + sublayer(norm(y))
    return y


@style("pre_ln_decoder_layer", "F.layer_norm, torch.add, the self-attention's weights asked for")
def pre_ln_decoder_layer_functional(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    def normalized(t, norm):
        return F.layer_norm(t, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    keep = torch.arange(memory.shape[1]).unsqueeze(0) < src_lengths.unsqueeze(1)
    h = normalized(y, norms[0])
    y = torch.add(y, self_attention(h, h, h, is_causal=True, need_weights=True)[0])
    y = torch.add(y, cross_attention(normalized(y, norms[1]), memory, memory, key_padding_mask=~keep))
    return torch.add(y, ffn(normalized(y, norms[2])))


@style("pre_ln_decoder_layer", "a one-hot cumsum mask, functools.reduce over the sublayers")
def pre_ln_decoder_layer_reduce(y, memory, src_lengths, self_attention, cross_attention, ffn, norms):
    S = memory.shape[1]
    mask = F.one_hot(src_lengths, S + 1).cumsum(dim=-1)[:, :S].bool()  # 1 from column length on

    def attend_self(h):
        return self_attention(h, h, h, is_causal=True)

    def attend_source(h):
        return cross_attention(h, memory, memory, key_padding_mask=mask)

    steps = zip(norms, (attend_self, attend_source, ffn))
    return functools.reduce(lambda stream, step: stream + step[1](step[0](stream)), steps, y)


@style("prefix_lm_mask", "causal, the source columns opened (triu)")
def prefix_lm_mask_triu(src_lengths, tgt_lengths, S, T):
    ignore = torch.ones(S + T, S + T, dtype=torch.bool).triu(1)
    ignore[:, :S] = False  # every query reads the whole source; a source query still never reads the target
    real = torch.cat([torch.arange(S) < src_lengths[:, None], torch.arange(T) < tgt_lengths[:, None]], dim=1)
    return ignore.unsqueeze(0) | ~real.unsqueeze(1)


@style("prefix_lm_mask", "torch.where over the key positions")
def prefix_lm_mask_where(src_lengths, tgt_lengths, S, T):
    key = torch.arange(S + T)
    real = torch.where(key < S, key < src_lengths[:, None], key - S < tgt_lengths[:, None])  # (B, S + T)
    later_target = (key[None, :] > key[:, None]) & (key[None, :] >= S)
    return later_target[None] | ~real[:, None, :]


@style("prefix_lm_mask", "NumPy blocks")
def prefix_lm_mask_numpy(src_lengths, tgt_lengths, S, T):
    ignore = np.zeros((S + T, S + T), dtype=bool)
    ignore[:S, S:] = True  # the source never reads the target
    ignore[S:, S:] = np.triu(np.ones((T, T), dtype=bool), k=1)  # the target reads its own past only
    pad = np.concatenate(
        [np.arange(S) >= src_lengths.numpy()[:, None], np.arange(T) >= tgt_lengths.numpy()[:, None]], axis=1
    )
    return torch.from_numpy(ignore[None] | pad[:, None, :])


@style("prefix_lm_mask", "the library's causal_mask and padding_mask")
def prefix_lm_mask_library(src_lengths, tgt_lengths, S, T):
    ignore = causal_mask(S + T).clone()
    ignore[:S, :S] = False  # the source reads all of itself, as an encoder would
    padded = torch.cat([padding_mask(src_lengths, S), padding_mask(tgt_lengths, T)], dim=1)
    return ignore.unsqueeze(0) | padded.unsqueeze(1)


@style("transformer_parameter_count", "every weight's shape listed, math.prod")
def transformer_parameter_count_shapes(
    src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False
):
    d, f = d_model, d_ff
    attention = [(d, d), (d,)] * 4
    ffn = [(d, f), (f,), (f, d), (d,)]
    norm = [(d,), (d,)]
    layers = num_layers * (attention + ffn + 2 * norm + 2 * attention + ffn + 3 * norm)
    embeddings = [(tgt_vocab_size, d)] + ([] if share_embeddings else [(src_vocab_size, d)])
    return sum(math.prod(shape) for shape in embeddings + layers)


@style("transformer_parameter_count", "a closed polynomial in d and d_ff")
def transformer_parameter_count_polynomial(
    src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False
):
    d, f = d_model, d_ff
    vocab = tgt_vocab_size + (0 if share_embeddings else src_vocab_size)
    return num_layers * (12 * d * d + 4 * d * f + 2 * f + 24 * d) + vocab * d


@style("transformer_parameter_count", "NumPy: sublayers per layer times their sizes")
def transformer_parameter_count_numpy(
    src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False
):
    sizes = np.array([4 * d_model * (d_model + 1), 2 * d_model * d_ff + d_ff + d_model, 2 * d_model])
    used = np.array([[1, 1, 2], [2, 1, 3]])  # attentions, FFNs and LayerNorms of an encoder and a decoder layer
    vocab = tgt_vocab_size if share_embeddings else src_vocab_size + tgt_vocab_size
    return num_layers * (used @ sizes).sum() + vocab * d_model


@style("transformer_parameter_count", "torch.Size of every weight, numel")
def transformer_parameter_count_sizes(
    src_vocab_size, tgt_vocab_size, d_model, num_heads, num_layers, d_ff, share_embeddings=False
):
    def linear(n_in, n_out):
        return torch.Size([n_in, n_out]).numel() + torch.Size([n_out]).numel()

    attention = sum(linear(d_model, d_model) for _ in ("q", "k", "v", "o"))
    ffn = linear(d_model, d_ff) + linear(d_ff, d_model)
    norm = torch.Size([2, d_model]).numel()
    tables = [torch.Size([tgt_vocab_size, d_model])] + [torch.Size([src_vocab_size, d_model])] * (not share_embeddings)
    return sum(t.numel() for t in tables) + num_layers * (3 * attention + 2 * ffn + 5 * norm)


# --- chapter 8: training a translator ----------------------------------------------------------------------------


@style("noam_lambda", "warm-up and decay as two branches")
def noam_lambda_branches(s, d_model, warmup, base_lr):
    step = s + 1
    rate = step * warmup**-1.5 if step < warmup else step**-0.5
    return rate / (math.sqrt(d_model) * base_lr)


@style("noam_lambda", "NumPy, a NumPy float")
def noam_lambda_numpy(s, d_model, warmup, base_lr):
    step = np.float64(s + 1)
    return np.minimum(1 / np.sqrt(step), step / np.power(warmup, 1.5)) / np.sqrt(d_model) / base_lr


@style("noam_lambda", "a 0-d tensor with rsqrt")
def noam_lambda_tensor(s, d_model, warmup, base_lr):
    step = torch.tensor(s + 1, dtype=torch.float64)
    return torch.minimum(step.rsqrt(), step * warmup**-1.5) * d_model**-0.5 / base_lr


@style("prior_smoothed_loss", "F.cross_entropy with probability targets, lerp")
def prior_smoothed_loss_soft_targets(logits, targets, eps, prior, pad_id):
    V = logits.shape[-1]
    u = torch.where(torch.arange(V) == pad_id, 0.0, prior.to(logits.dtype))
    u = u / u.sum()
    q = torch.lerp(F.one_hot(targets, V).to(logits.dtype), u.expand(*targets.shape, V), eps)
    real = targets != pad_id
    return F.cross_entropy(logits[real], q[real])  # the mean over the real tokens of the batch


@style("prior_smoothed_loss", "(1 - eps) NLL + eps against the prior, logsumexp")
def prior_smoothed_loss_two_terms(logits, targets, eps, prior, pad_id):
    log_probs = logits - logits.logsumexp(dim=-1, keepdim=True)
    weights = prior.to(log_probs.dtype).index_fill(0, torch.tensor([pad_id]), 0.0)
    weights = weights / weights.sum()
    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    per_token = torch.lerp(nll, -(log_probs @ weights), eps)
    real = (targets != pad_id).to(per_token.dtype)
    return (per_token * real).sum() / real.sum()


@style("prior_smoothed_loss", "NumPy round trip, a NumPy float")
def prior_smoothed_loss_numpy(logits, targets, eps, prior, pad_id):
    lg, tg = logits.numpy(), targets.numpy()
    counts = prior.numpy().astype(np.float64)
    counts[pad_id] = 0.0
    top = lg.max(axis=-1, keepdims=True)
    log_probs = lg - top - np.log(np.exp(lg - top).sum(axis=-1, keepdims=True))
    q = eps * counts / counts.sum() + (1 - eps) * np.eye(lg.shape[-1])[tg]
    return -(q * log_probs).sum(axis=-1)[tg != pad_id].mean()


@style("beam_step", "a stable sort of the flattened scores, take_along_dim")
def beam_step_sort(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    B, k, V = next_log_probs.shape
    frozen = torch.where(torch.arange(V) == eos_id, log_p[..., None], float("-inf"))
    cand_lp = torch.where(finished[..., None], frozen, log_p[..., None] + next_log_probs)
    cand_len = (lengths + (~finished).long())[..., None].expand(B, k, V)
    score = cand_lp / ((5 + cand_len) / 6) ** alpha
    best = score.flatten(1).sort(dim=1, descending=True, stable=True).indices[:, :k]
    origin, token = torch.div(best, V, rounding_mode="floor"), best.remainder(V)
    return (
        torch.take_along_dim(cand_lp.flatten(1), best, dim=1),
        torch.take_along_dim(cand_len.flatten(1), best, dim=1),
        finished.gather(1, origin) | (token == eos_id),
        origin,
        token,
    )


@style("beam_step", "heapq per sentence, in Python numbers")
def beam_step_heapq(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    B, k, V = next_log_probs.shape
    rows = []
    for b in range(B):
        candidates = []
        for i in range(k):
            lp, n, done = log_p[b, i].item(), int(lengths[b, i]), bool(finished[b, i])
            for token, step_lp in enumerate(next_log_probs[b, i].tolist()):
                if done:  # frozen: one more <eos> for free, nothing else
                    new_lp, new_n = (lp if token == eos_id else -math.inf), n
                else:
                    new_lp, new_n = lp + step_lp, n + 1
                score = new_lp / ((5 + new_n) / 6) ** alpha
                candidates.append((score, new_lp, new_n, done or token == eos_id, i, token))
        rows.append(heapq.nlargest(k, candidates, key=lambda c: c[0]))

    def column(j, dtype):
        return torch.tensor([[c[j] for c in row] for row in rows], dtype=dtype)

    return (
        column(1, log_p.dtype),
        column(2, lengths.dtype),
        column(3, torch.bool),
        *(column(j, torch.long) for j in (4, 5)),
    )


@style("beam_step", "NumPy round trip with argsort")
def beam_step_numpy(log_p, lengths, finished, next_log_probs, alpha, eos_id=2):
    lp, n, done, following = log_p.numpy(), lengths.numpy(), finished.numpy(), next_log_probs.numpy()
    B, k, V = following.shape
    only_eos = np.where(np.arange(V) == eos_id, 0.0, -np.inf)
    cand_lp = lp[..., None] + np.where(done[..., None], only_eos, following)
    cand_len = np.broadcast_to((n + ~done)[..., None], (B, k, V))
    score = cand_lp / ((5 + cand_len) / 6) ** alpha
    best = np.argsort(-score.reshape(B, -1), axis=1, kind="stable")[:, :k]
    origin, token = np.divmod(best, V)

    def chosen(a):
        return torch.from_numpy(np.take_along_axis(a.reshape(B, -1), best, axis=1))

    now_done = np.take_along_axis(done, origin, axis=1) | (token == eos_id)
    return (
        chosen(cand_lp),
        chosen(cand_len),
        torch.from_numpy(now_done),
        torch.from_numpy(origin),
        torch.from_numpy(token),
    )


@style("cross_attention_steps", "F.linear once for the memory, einsum at each step")
def cross_attention_steps_einsum(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    B, S, d = memory.shape
    d_k = d // num_heads
    keys = F.linear(memory, w_k.T, b_k).view(B, S, num_heads, d_k).permute(0, 2, 1, 3)  # (B, h, S, d_k), once
    values = F.linear(memory, w_v.T, b_v).view(B, S, num_heads, d_k).permute(0, 2, 1, 3)
    hidden = src_padding_mask[:, None, :]  # (B, 1, S)
    steps = []
    for t in range(y.shape[1]):
        q = F.linear(y[:, t], w_q.T, b_q).view(B, num_heads, d_k)  # this position's query only
        scores = torch.einsum("bhe,bhse->bhs", q, keys) / math.sqrt(d_k)
        weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
        steps.append(torch.einsum("bhs,bhse->bhe", weights, values).reshape(B, d))
    return torch.stack(steps, dim=1)


@style("cross_attention_steps", "a cache dict and addmm, one query at a time")
def cross_attention_steps_addmm(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    B, S, d = memory.shape
    flat = memory.reshape(B * S, d)
    cache = {
        "keys": torch.addmm(b_k, flat, w_k).view(B, S, num_heads, -1).transpose(1, 2),
        "values": torch.addmm(b_v, flat, w_v).view(B, S, num_heads, -1).transpose(1, 2),
    }
    scale = cache["keys"].shape[-1] ** -0.5
    out = torch.empty_like(y)
    for t, y_t in enumerate(y.unbind(dim=1)):
        q = torch.addmm(b_q, y_t, w_q).view(B, num_heads, 1, -1)
        scores = (q @ cache["keys"].transpose(-1, -2)).mul(scale)
        scores = scores.masked_fill(src_padding_mask.view(B, 1, 1, S), float("-inf"))
        out[:, t] = (scores.softmax(dim=-1) @ cache["values"]).view(B, d)
    return out


@style("cross_attention_steps", "a loop over the heads, each with its slice of the weights")
def cross_attention_steps_per_head(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    B, T, d = y.shape
    d_k = d // num_heads
    parts = [slice(j * d_k, (j + 1) * d_k) for j in range(num_heads)]
    keys = torch.stack([memory @ w_k[:, p] + b_k[p] for p in parts], dim=1)  # (B, h, S, d_k), before the steps
    values = torch.stack([memory @ w_v[:, p] + b_v[p] for p in parts], dim=1)
    ignore = src_padding_mask[:, None, :]
    rows = []
    for t in range(T):
        heads = []
        for j, p in enumerate(parts):
            q = y[:, t : t + 1] @ w_q[:, p] + b_q[p]  # (B, 1, d_k)
            s = (q @ keys[:, j].transpose(1, 2) / math.sqrt(d_k)).masked_fill(ignore, float("-inf"))
            heads.append(torch.softmax(s, dim=-1) @ values[:, j])
        rows.append(torch.cat(heads, dim=-1))
    return torch.cat(rows, dim=1)


@style("cross_attention_steps", "NumPy round trip")
def cross_attention_steps_numpy(y, memory, src_padding_mask, w_q, b_q, w_k, b_k, w_v, b_v, num_heads):
    mem, ys = memory.numpy(), y.numpy()
    B, S, d = mem.shape
    d_k = d // num_heads
    keys = (mem @ w_k.numpy() + b_k.numpy()).reshape(B, S, num_heads, d_k).transpose(0, 2, 1, 3)  # once
    values = (mem @ w_v.numpy() + b_v.numpy()).reshape(B, S, num_heads, d_k).transpose(0, 2, 1, 3)
    pad = src_padding_mask.numpy()[:, None, None, :]
    out = np.empty_like(ys)
    for t in range(ys.shape[1]):
        q = (ys[:, t] @ w_q.numpy() + b_q.numpy()).reshape(B, num_heads, 1, d_k)  # this position's query only
        scores = np.where(pad, -np.inf, q @ keys.transpose(0, 1, 3, 2) / np.sqrt(d_k))
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        out[:, t] = (e / e.sum(axis=-1, keepdims=True) @ values).reshape(B, d)
    return torch.from_numpy(out)


# --- chapter 9: Fastformer ---------------------------------------------------------------------------------------


@style("global_query", "einsum over the positions")
def global_query_einsum(q, scores, num_heads):
    alpha = scores.softmax(dim=1)
    return torch.einsum("bnh,bnhe->bhe", alpha, q.unflatten(-1, (num_heads, -1))).flatten(1)


@style("global_query", "a loop over the heads with bmm")
def global_query_loop(q, scores, num_heads):
    d_h = q.shape[-1] // num_heads
    parts = []
    for h in range(num_heads):
        alpha = torch.softmax(scores[:, :, h], dim=1)  # (B, N)
        parts.append(torch.bmm(alpha.unsqueeze(1), q[:, :, h * d_h : (h + 1) * d_h]).squeeze(1))
    return torch.cat(parts, dim=-1)


@style("global_query", "weights repeated to every feature of their head")
def global_query_repeated(q, scores, num_heads):
    weights = F.softmax(scores, dim=1).repeat_interleave(q.shape[-1] // num_heads, dim=-1)  # (B, N, d)
    return (weights * q).sum(dim=1)


@style("global_keys_packed", "a loop over the sentence slots, finfo.min and zeroed weights")
def global_keys_packed_loop(k, q_global, weight, bias, num_heads, segments):
    B, N, d = k.shape
    d_h = d // num_heads
    keys = []
    for g in range(q_global.shape[1]):
        member = (segments == g + 1).unsqueeze(-1)  # (B, N, 1)
        p = k * q_global[:, g : g + 1]  # sentence g's positions mixed with its own global query
        scores = F.linear(p, weight, bias) / math.sqrt(d_h)  # (B, N, H)
        beta = torch.softmax(scores.masked_fill(~member, torch.finfo(scores.dtype).min), dim=1) * member
        keys.append(torch.einsum("bnh,bnhe->bhe", beta, p.view(B, N, num_heads, d_h)).reshape(B, d))
    return torch.stack(keys, dim=1)


@style("global_keys_packed", "scatter_reduce by segment, the padding in slot 0")
def global_keys_packed_scatter(k, q_global, weight, bias, num_heads, segments):
    B, N, d = k.shape
    G, H = q_global.shape[1], num_heads
    own = torch.take_along_dim(q_global, (segments - 1).clamp(min=0).unsqueeze(-1), dim=1)  # (B, N, d)
    p = k * own
    scores = F.linear(p, weight, bias) / math.sqrt(d // H)  # (B, N, H)
    slot = segments.unsqueeze(-1).expand(B, N, H)
    top = scores.new_full((B, G + 1, H), float("-inf")).scatter_reduce(1, slot, scores, "amax")
    e = torch.exp(scores - top.gather(1, slot))
    total = scores.new_zeros(B, G + 1, H).scatter_add(1, slot, e)
    weighted = e.unsqueeze(-1) * p.view(B, N, H, d // H)
    summed = p.new_zeros(B, G + 1, H, d // H).scatter_add(1, slot.unsqueeze(-1).expand_as(weighted), weighted)
    pooled = torch.where(total.unsqueeze(-1) > 0, summed / total.unsqueeze(-1), 0.0)  # an empty slot: zero
    return pooled[:, 1:].reshape(B, G, d)


@style("global_keys_packed", "NumPy round trip")
def global_keys_packed_numpy(k, q_global, weight, bias, num_heads, segments):
    keys, queries, w, b, seg = (t.numpy() for t in (k, q_global, weight, bias, segments))
    B, N, d = keys.shape
    G, d_h = queries.shape[1], d // num_heads
    member = seg[..., None] == np.arange(1, G + 1)  # (B, N, G)
    p = keys * np.einsum("bng,bgd->bnd", member.astype(keys.dtype), queries)
    scores = (p @ w.T + b) / np.sqrt(d_h)  # (B, N, H)
    s = np.where(member[..., None], scores[:, :, None, :], -np.inf)  # (B, N, G, H)
    top = s.max(axis=1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))  # exp(-inf) = 0 off the sentence
    total = e.sum(axis=1)  # (B, G, H)
    pooled = np.einsum("bngh,bnhe->bghe", e, p.reshape(B, N, num_heads, d_h))
    return torch.from_numpy((pooled / np.where(total > 0, total, 1.0)[..., None]).reshape(B, G, d))


@style("fastformer_step", "one packed tensor: each pooling's maximum, sum and weighted sums side by side")
def fastformer_step_packed(layer, x_t, state):
    H, d_h = layer.num_heads, layer.head_dim

    def pool(packed, scores, values):
        v = values.unflatten(-1, (H, d_h))  # (B, H, d_h)
        token = torch.cat([scores[..., None], torch.ones_like(scores)[..., None], v], dim=-1)  # (B, H, 2 + d_h)
        if packed is None:  # the first token: maximum s, sum exp(s - s) = 1, weighted sum v
            kept = token
        else:
            m_old = packed[..., :1]
            m = torch.maximum(m_old, token[..., :1])
            sums = packed[..., 1:] * torch.exp(m_old - m) + token[..., 1:] * torch.exp(token[..., :1] - m)
            kept = torch.cat([m, sums], dim=-1)
        return (kept[..., 2:] / kept[..., 1:2]).flatten(-2), kept

    query_kept, key_kept = (None, None) if state is None else state.unbind(0)
    q = layer.query(x_t)
    q_global, query_kept = pool(query_kept, layer.query_att(q) / d_h**0.5, q)
    p = layer.key(x_t) * q_global  # the key mixed with the global query that includes token t
    k_global, key_kept = pool(key_kept, layer.key_att(p) / d_h**0.5, p)
    return layer.transform(k_global * q) + q, torch.stack([query_kept, key_kept])


@style("fastformer_step", "a dict state with the running maximum, F.linear on the layer's weights")
def fastformer_step_dict(layer, x_t, state):
    def linear(module, t):
        return F.linear(t, module.weight, module.bias)

    H, scale = layer.num_heads, math.sqrt(layer.head_dim)
    state = state or {}
    new_state = {}

    def pool(name, scores, values):
        v = values.view(values.shape[0], H, -1)
        if name not in state:
            m, total, weighted = scores, torch.ones_like(scores), v
        else:
            m_old = state[name]["max"]
            m = torch.where(scores > m_old, scores, m_old)
            old, new = torch.exp(m_old - m), torch.exp(scores - m)
            total = state[name]["sum"] * old + new
            weighted = torch.addcmul(state[name]["weighted"] * old[..., None], new[..., None], v)
        new_state[name] = {"max": m, "sum": total, "weighted": weighted}
        return (weighted / total[..., None]).flatten(1)

    q = linear(layer.query, x_t)
    q_bar = pool("query", linear(layer.query_att, q) / scale, q)
    p = linear(layer.key, x_t) * q_bar
    k_bar = pool("key", linear(layer.key_att, p) / scale, p)
    return linear(layer.transform, k_bar * q) + q, new_state


@style("fastformer_step", "a NumPy state")
def fastformer_step_numpy(layer, x_t, state):
    def linear(module, t):
        return t @ module.weight.detach().numpy().T + module.bias.detach().numpy()

    H, scale = layer.num_heads, np.sqrt(layer.head_dim)
    x = x_t.numpy()
    kept = [None, None] if state is None else list(state)

    def pool(which, scores, values):
        v = values.reshape(values.shape[0], H, -1)
        if kept[which] is None:
            m, total, weighted = scores, np.ones_like(scores), v
        else:
            m_old, total, weighted = kept[which]
            m = np.maximum(m_old, scores)
            total = total * np.exp(m_old - m) + np.exp(scores - m)
            weighted = weighted * np.exp(m_old - m)[..., None] + np.exp(scores - m)[..., None] * v
        kept[which] = (m, total, weighted)
        return (weighted / total[..., None]).reshape(values.shape)

    q = linear(layer.query, x)
    q_global = pool(0, linear(layer.query_att, q) / scale, q)
    p = linear(layer.key, x) * q_global
    k_global = pool(1, linear(layer.key_att, p) / scale, p)
    return torch.from_numpy(linear(layer.transform, k_global * q) + q), tuple(kept)


@style("fastformer_parameter_count", "(inputs + 1) x outputs for each linear layer")
def fastformer_parameter_count_layers(d_model, num_heads, share_value=True):
    layers = [(d_model, d_model)] * 3 + [(d_model, num_heads)] * 2  # query, key, transform; query_att, key_att
    if not share_value:
        layers.append((d_model, d_model))  # value
    return sum((n_in + 1) * n_out for n_in, n_out in layers)


@style("fastformer_parameter_count", "a closed form, the flag as a number")
def fastformer_parameter_count_closed(d_model, num_heads, share_value=True):
    return (d_model + 1) * ((4 - share_value) * d_model + 2 * num_heads)


@style("fastformer_parameter_count", "NumPy shapes, a NumPy integer")
def fastformer_parameter_count_numpy(d_model, num_heads, share_value=True):
    shapes = np.array([[d_model, d_model]] * (3 if share_value else 4) + [[d_model, num_heads]] * 2)
    return ((shapes[:, 0] + 1) * shapes[:, 1]).sum()


@style("step_multiplications", "itemized in dictionaries")
def step_multiplications_itemized(N, d, H):
    d_h = d // H
    fastformer = {"query, key, transform": 3 * d * d, "two scorers": 2 * d * H, "two pooling updates": 2 * d}
    fastformer["p = k * q_bar, u = k_bar * q"] = 2 * d
    softmax = {"four projections": 4 * d * d, "scores": (N + 1) * d, "weighted sum": (N + 1) * d}
    linear = {"four projections": 4 * d * d, "S_h update": H * d_h * d_h, "S_h read": H * d_h * d_h}
    linear["normaliser"] = H * d_h
    return tuple(sum(part.values()) for part in (fastformer, softmax, linear))


@style("step_multiplications", "a NumPy table of counts, NumPy integers")
def step_multiplications_numpy(N, d, H):
    table = np.array(
        [
            [3 * d * d, 2 * d * H, 4 * d],
            [4 * d * d, 2 * (N + 1) * d, 0],
            [4 * d * d, 2 * H * (d // H) ** 2, d],
        ],
        dtype=np.int64,
    )
    return tuple(table.sum(axis=1))


@style("step_multiplications", "0-d tensors")
def step_multiplications_tensors(N, d, H):
    per_token = torch.tensor(
        [[3 * d * d, 2 * d * H, 4 * d], [4 * d * d, (N + 1) * d, (N + 1) * d], [4 * d * d, 2 * d * (d // H), d]]
    )
    return tuple(per_token.sum(dim=1))


# --- chapter 10: the decoder alone -------------------------------------------------------------------------------


@style("decoder_parameters", "a helper per linear layer")
def decoder_parameters_linear(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    def linear(n_in, n_out):
        return (n_in + 1) * n_out

    kv = num_kv_heads * (d_model // num_heads)
    attention = linear(d_model, d_model + 2 * kv) + linear(d_model, d_model)
    layer = attention + linear(d_model, d_ff) + linear(d_ff, d_model) + 2 * (2 * d_model)
    return num_layers * layer + (vocab_size + max_len) * d_model + 2 * d_model


@style("decoder_parameters", "a closed form")
def decoder_parameters_closed(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    kv = num_kv_heads * (d_model // num_heads)
    per_layer = 2 * (d_model + 1) * (d_model + kv) + 2 * d_model * d_ff + d_ff + 5 * d_model
    return num_layers * per_layer + (vocab_size + max_len + 2) * d_model


@style("decoder_parameters", "NumPy shapes, a NumPy integer")
def decoder_parameters_numpy(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    kv = num_kv_heads * (d_model // num_heads)
    linears = np.array([[d_model, d_model + 2 * kv], [d_model, d_model], [d_model, d_ff], [d_ff, d_model]])
    per_layer = ((linears[:, 0] + 1) * linears[:, 1]).sum() + 4 * d_model
    return num_layers * per_layer + d_model * (vocab_size + max_len + 2)


@style("decoder_parameters", "SymPy, the formula evaluated to an int")
def decoder_parameters_sympy(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    V, d, L, kv, f, P = sympy.symbols("V d L kv f P", positive=True, integer=True)
    attention = (d + 1) * (d + 2 * kv) + (d + 1) * d  # in_proj (queries, keys, values) and out_proj, with biases
    layer = attention + (d + 1) * f + (f + 1) * d + 4 * d  # the FFN, two LayerNorms
    total = L * layer + (V + P) * d + 2 * d  # tied embedding, positions, the final LayerNorm
    sizes = {V: vocab_size, d: d_model, L: num_layers, kv: num_kv_heads * (d_model // num_heads), f: d_ff, P: max_len}
    return int(total.subs(sizes))


@style("append_rotary_keys", "complex numbers")
def append_rotary_keys_complex(past_keys, new_keys, base=10000.0):
    start = past_keys.shape[-2]
    *_, n, d_k = new_keys.shape
    omega = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angles = torch.arange(start, start + n, dtype=torch.float64).outer(omega)
    pairs = torch.view_as_complex(new_keys.unflatten(-1, (d_k // 2, 2)).contiguous())  # even + i odd
    turned = torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)
    return torch.cat((past_keys, turned), dim=-2)


@style("append_rotary_keys", "2 x 2 blocks in einsum")
def append_rotary_keys_blocks(past_keys, new_keys, base=10000.0):
    *_, n, d_k = new_keys.shape
    start = past_keys.shape[-2]
    angles = torch.arange(start, start + n).double()[:, None] / base ** (torch.arange(0, d_k, 2).double() / d_k)
    c, s = angles.cos(), angles.sin()
    blocks = torch.stack([torch.stack([c, -s], dim=-1), torch.stack([s, c], dim=-1)], dim=-2)  # (n, d_k/2, 2, 2)
    turned = torch.einsum("npij,bhnpj->bhnpi", blocks, new_keys.unflatten(-1, (-1, 2))).flatten(-2)
    return torch.cat([past_keys, turned], dim=-2)


@style("append_rotary_keys", "NumPy round trip")
def append_rotary_keys_numpy(past_keys, new_keys, base=10000.0):
    new = new_keys.numpy()
    start, d_k = past_keys.shape[-2], new.shape[-1]
    angles = np.arange(start, start + new.shape[-2])[:, None] * np.power(base, -np.arange(0, d_k, 2) / d_k)
    even, odd = new[..., 0::2], new[..., 1::2]
    turned = np.empty_like(new)
    turned[..., 0::2] = even * np.cos(angles) - odd * np.sin(angles)
    turned[..., 1::2] = even * np.sin(angles) + odd * np.cos(angles)
    return torch.cat([past_keys, torch.from_numpy(turned)], dim=-2)


@style("target_loss_mask", "the separator's column by argmax")
def target_loss_mask_argmax(tokens, sep_id, pad_id):
    is_sep = tokens == sep_id
    sep_at = is_sep.int().argmax(dim=1, keepdim=True)
    after = (torch.arange(tokens.shape[1]) > sep_at) & is_sep.any(dim=1, keepdim=True)
    return (after & (tokens != pad_id))[:, 1:]


@style("target_loss_mask", "read on the shifted tokens")
def target_loss_mask_shifted(tokens, sep_id, pad_id):
    predicted = tokens[:, 1:]
    separator_seen = torch.cumsum(tokens[:, :-1] == sep_id, dim=1).bool()  # at or before position t
    return separator_seen & (predicted != pad_id) & (predicted != sep_id)


@style("target_loss_mask", "NumPy logical_or.accumulate")
def target_loss_mask_numpy(tokens, sep_id, pad_id):
    a = tokens.numpy()
    target = np.logical_or.accumulate(a == sep_id, axis=1) & (a != sep_id) & (a != pad_id)
    return torch.from_numpy(np.ascontiguousarray(target[:, 1:]))


@style("kv_cache_bytes", "math.prod of the factors")
def kv_cache_bytes_prod(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    return math.prod((2, num_layers, num_kv_heads, d_model // num_heads, length, batch_size, bytes_per_number))


@style("kv_cache_bytes", "NumPy, a NumPy integer")
def kv_cache_bytes_numpy(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    factors = [2, num_layers, num_kv_heads, d_model // num_heads, length, batch_size, bytes_per_number]
    return np.prod(np.array(factors, dtype=np.int64))


@style("kv_cache_bytes", "a 0-d tensor")
def kv_cache_bytes_tensor(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    keys_and_values = torch.tensor([2, num_kv_heads, d_model // num_heads])  # numbers per token and layer
    return keys_and_values.prod() * num_layers * length * batch_size * bytes_per_number


@style("kv_cache_bytes", "a sum over the layers")
def kv_cache_bytes_layers(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    one_layer = 2 * num_kv_heads * (d_model // num_heads) * length * batch_size * bytes_per_number
    return sum(one_layer for _ in range(num_layers))


@style("kv_cache_bytes", "SymPy, the formula evaluated")
def kv_cache_bytes_sympy(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    L, d, h, g, n, b, p = sympy.symbols("L d h g n b p", positive=True, integer=True)
    cache = 2 * L * g * sympy.floor(d / h) * n * b * p  # a key and a value per layer, key-value head and token
    values = {L: num_layers, d: d_model, h: num_heads, g: num_kv_heads, n: length, b: batch_size, p: bytes_per_number}
    return cache.subs(values)


# --- further random inputs -----------------------------------------------------------------------------------------
# For each exercise, a few more inputs drawn at random within what its text allows, on which every answer must
# compute what the checker's reference computes: an answer written another way must be right, not only on the cases.


def _draw(seed):
    g = torch.Generator().manual_seed(1000 + seed)

    def randint(low, high, shape=()):  # low .. high, both included
        value = torch.randint(low, high + 1, shape, generator=g)
        return value if shape else int(value)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    return g, randint, randn


def _attention_module(d, h, randn):
    module = MultiHeadAttention(d, h).double()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(0.5 * randn(*parameter.shape))
    return module


def _layer_norm(d, randn):
    norm = torch.nn.LayerNorm(d).double()
    with torch.no_grad():
        norm.weight.copy_(1 + 0.3 * randn(d))
        norm.bias.copy_(0.3 * randn(d))
    return norm


def _ffn(d, randn):
    ffn = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.ReLU(), torch.nn.Linear(2 * d, d)).double()
    with torch.no_grad():
        for parameter in ffn.parameters():
            parameter.copy_(0.5 * randn(*parameter.shape))
    return ffn


def _lengths(randint, B, low, high):
    return randint(low, high, (B,))


def _pad_mask(lengths, size):
    return torch.arange(size)[None, :] >= lengths[:, None]


def _extra_case(name, seed):
    g, randint, randn = _draw(seed)
    B, T, S, d = randint(1, 3), randint(2, 6), randint(2, 7), 2 * randint(1, 4)
    if name == "stable_log_softmax":
        shape = [randint(1, 4) for _ in range(randint(1, 3))]
        dim = randint(-len(shape), len(shape) - 1)
        return (randn(*shape) * 300 + 1000 * randint(-1, 1),), {"dim": dim}
    if name == "penalized_scores":
        return (randn(B, T, d), randn(B, S, d), float(randn(()).abs())), {}
    if name == "decoder_input_and_target":
        lengths = _lengths(randint, B, 1, T)
        pad = randint(0, 3)
        tgt = torch.where(_pad_mask(lengths, T), pad, randint(4, 20, (B, T)))
        return (tgt, lengths), {"bos_id": (pad + 1) % 4, "eos_id": (pad + 2) % 4, "pad_id": pad}
    if name == "clipped_precision_multi":
        words = "a b c d".split()

        def sentence():
            return [words[i] for i in randint(0, 3, (randint(0, 8),)).tolist()]

        return (sentence(), [sentence() for _ in range(randint(1, 3))], randint(1, 3)), {}
    if name == "corpus_brevity_penalty":
        n = randint(1, 4)
        hyp = [0] * n if seed == 0 else randint(0, 15, (n,)).tolist()
        return (hyp, [randint(1, 15, (randint(1, 3),)).tolist() for _ in range(n)]), {}
    if name == "best_candidate":
        K, V = randint(1, 4), randint(3, 7)
        lengths = randint(1, T, (B, K))
        targets = torch.where(torch.arange(T) < lengths[..., None], randint(1, V - 1, (B, K, T)), 0)
        return (2 * randn(B, K, T, V), targets), {}
    if name == "gru_step":
        E, H = randint(1, 5), randint(1, 5)
        return (randn(B, E), randn(B, H), randn(3 * H, E), randn(3 * H, H), randn(3 * H), randn(3 * H)), {}
    if name == "last_real_state":
        return (randn(B, S, d), _lengths(randint, B, 1, S)), {}
    if name == "trim_after_eos":
        return (randint(2, 5, (B, T)),), {} if seed % 2 else {"eos_id": 4, "pad_id": 1}
    if name == "masked_softmax_per_query":
        return (3 * randn(B, T, S), randint(0, S, (B, T))), {}
    if name == "general_attention":
        d_q, d_k, d_v = randint(1, 5), randint(1, 5), randint(1, 5)
        mask = _pad_mask(_lengths(randint, B, 1, S), S)
        return (randn(B, T, d_q), randn(B, S, d_k), randn(B, S, d_v), randn(d_q, d_k), mask), {}
    if name == "diagonal_attention":
        return (randn(B, T, S), _lengths(randint, B, 1, S), 0.3 + 3 * float(torch.rand((), generator=g))), {}
    if name == "alignment_accuracy":
        links = torch.rand(B, T, S, generator=g) > 0.6
        links[0, 0, randint(0, S - 1)] = True
        return (torch.rand(B, T, S, generator=g, dtype=torch.float64).softmax(-1), links), {}
    if name == "two_source_attention":
        S2, d_x, d_k, d_v = randint(1, 5), randint(1, 5), randint(1, 5), randint(1, 5)
        lengths1, lengths2 = _lengths(randint, B, 0, S), _lengths(randint, B, 1, S2)
        x1, x2, y = randn(B, S, d_x), randn(B, S2, d_x), randn(B, T, d)
        weights = randn(d, d_k), randn(d_x, d_k), randn(d_x, d_v)
        return (y, x1, _pad_mask(lengths1, S), x2, _pad_mask(lengths2, S2), *weights), {}
    if name == "local_global_attention":
        T = randint(1, 8)
        mask = _pad_mask(_lengths(randint, B, 0, T), T)
        return (randn(B, T, d), randn(B, T, d), randn(B, T, 3), mask, randint(0, 3)), {}
    if name == "unshuffle":
        return (randn(B, T, d), torch.randperm(T, generator=g)), {}
    if name == "conv_layers_to_connect":
        return (randint(1, 300), randint(2, 9)), {}
    if name in ("grouped_query_attention", "gqa_parameter_count"):
        g_heads, per, d_k = randint(1, 3), randint(1, 3), randint(1, 3)
        h = g_heads * per
        if name == "gqa_parameter_count":
            return (h * d_k, h, g_heads), {"bias": bool(seed % 2)}
        x = randn(B, T, h * d_k)
        return (
            x,
            randn(h * d_k, h * d_k),
            randn(h * d_k, g_heads * d_k),
            randn(h * d_k, g_heads * d_k),
            h,
            g_heads,
        ), {}
    if name == "attention_with_head_gates":
        h, d_k = randint(1, 4), randint(1, 3)
        D = h * d_k
        return (randn(B, T, D), randn(D, D), randn(D, D), randn(D, D), randn(D, D), h, randn(h)), {}
    if name == "new_queries_mask":
        T = randint(1, S)
        return (_lengths(randint, B, 0, S), T, S), {}
    if name == "sinusoid_table_by_hand":
        return (randint(1, 2000), d), {}
    if name == "rotate_by_position":
        return (randn(B, T, d), randint(0, 100, (T,))), {}
    if name == "position_from_encoding":
        d = (8, 16)[seed % 2]
        turn = 2 * math.pi * 10000 ** ((d - 2) / d)
        positions = torch.randint(0, int(0.99 * turn), (6,), generator=g, dtype=torch.float64)
        angles = positions[:, None] * 10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        return (torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(6, d),), {}
    if name == "add_positions_left_padded":
        return (randn(B, T, d), randn(T + randint(0, 3), d), _lengths(randint, B, 0, T)), {}
    if name == "encoder_layer":
        h = randint(1, 2)
        lengths = _lengths(randint, B, 1, S)
        modules = _attention_module(2 * h, h, randn), _ffn(2 * h, randn), _layer_norm(2 * h, randn)
        return (randn(B, S, 2 * h), lengths, *modules, _layer_norm(2 * h, randn)), {}
    if name == "pre_ln_decoder_layer":
        h = randint(1, 2)
        D = 2 * h
        attentions = _attention_module(D, h, randn), _attention_module(D, h, randn)
        norms = tuple(_layer_norm(D, randn) for _ in range(3))
        return (randn(B, T, D), randn(B, S, D), _lengths(randint, B, 1, S), *attentions, _ffn(D, randn), norms), {}
    if name == "prefix_lm_mask":
        return (_lengths(randint, B, 0, S), _lengths(randint, B, 0, T), S, T), {}
    if name == "transformer_parameter_count":
        sizes = randint(1, 100), randint(1, 100), d, randint(1, 4), randint(1, 6), randint(1, 64)
        return sizes, {"share_embeddings": bool(seed % 2)}
    if name == "noam_lambda":
        return (randint(0, 100_000), 2 ** randint(4, 10), randint(1, 8000), 10.0 ** -randint(0, 5)), {}
    if name == "prior_smoothed_loss":
        V = randint(3, 8)
        pad = randint(0, V - 1)
        targets = randint(0, V - 1, (B, T))
        targets[0, 0] = (pad + 1) % V  # at least one real token
        prior = randint(0, 30, (V,)).double()
        prior[(pad + 1) % V] += 1  # some count apart from <pad>
        return (randn(B, T, V), targets, float(torch.rand((), generator=g)), prior, pad), {}
    if name == "beam_step":
        k = randint(1, 4)
        V = max(3, k + randint(1, 4))  # the vocabulary holds <eos>, id 2
        finished = torch.rand(B, k, generator=g) < 0.4
        log_p = -(5 * torch.rand(B, k, generator=g, dtype=torch.float64) + 0.1)
        following = torch.log_softmax(2 * randn(B, k, V), dim=-1)
        return (log_p, randint(1, 9, (B, k)), finished, following, (0.0, 0.6, 1.3)[seed % 3]), {}
    if name == "cross_attention_steps":
        h = randint(1, 3)
        D = h * randint(1, 3)
        weights = [randn(D, D) if i % 2 == 0 else randn(D) for i in range(6)]
        return (randn(B, T, D), randn(B, S, D), _pad_mask(_lengths(randint, B, 1, S), S), *weights, h), {}
    if name in ("global_query", "global_keys_packed", "fastformer_step"):
        H = randint(1, 3)
        D = H * randint(1, 3)
        if name == "global_query":
            return (randn(B, T, D), randn(B, T, H), H), {}
        if name == "fastformer_step":
            layer = FastSelfAttention(D, H).double()
            with torch.no_grad():
                for parameter in layer.parameters():
                    parameter.copy_(0.5 * randn(*parameter.shape))
                layer.query_att.weight.mul_((1.0, 300.0)[seed % 2])
                layer.key_att.weight.mul_((1.0, 300.0)[seed % 2])
            return (layer, randn(B, T + 2, D)), {}
        G = randint(1, 3)
        segments = torch.zeros(B, 8, dtype=torch.long)
        for b in range(B):
            at = 0
            for sentence in range(1, G + 1):
                n = randint(0, 8 // G)
                segments[b, at : at + n] = sentence
                at += n
        return (randn(B, 8, D), randn(B, G, D), randn(H, D), randn(H), H, segments), {}
    if name == "fastformer_parameter_count":
        H = randint(1, 8)
        return (H * randint(1, 16), H), {"share_value": bool(seed % 2)}
    if name == "step_multiplications":
        H = randint(1, 8)
        return (randint(0, 5000), H * randint(1, 32), H), {}
    if name in ("decoder_parameters", "kv_cache_bytes"):
        g_heads, per, d_k = randint(1, 4), randint(1, 4), randint(1, 16)
        h = g_heads * per
        if name == "kv_cache_bytes":
            return (randint(1, 48), h * d_k, h, g_heads, randint(1, 4096)), {"batch_size": randint(1, 16)}
        return (randint(10, 60000), h * d_k, randint(1, 12), h, g_heads, randint(1, 512), randint(1, 2048)), {}
    if name == "append_rotary_keys":
        h, t, n = randint(1, 3), randint(0, 6), randint(1, 4)
        return (randn(B, h, t, d), randn(B, h, n, d)), {"base": (10000.0, 500.0)[seed % 2]}
    if name == "target_loss_mask":
        rows = []
        for _ in range(B):
            source, target = randint(1, 4), randint(0, 4)
            rows.append([1] + randint(4, 9, (source,)).tolist() + [3] + randint(4, 9, (target,)).tolist() + [2])
        width = max(map(len, rows)) + randint(0, 2)
        return (torch.tensor([r + [0] * (width - len(r)) for r in rows]), 3, 0), {}
    raise KeyError(name)


def _extra_cases(name):
    with torch.random.fork_rng(devices=[]):  # the modules built start from the global generator: leave it as it was
        return [Case(f"random input {seed}", *_extra_case(name, seed)) for seed in range(6)]


# --- the checks --------------------------------------------------------------------------------------------------

#: A right answer that its checker refuses: (exercise, style) -> (what the checker says, why the answer is right).
#: Each is kept as an expected failure, strict: the day the checker accepts it, the mark must go.
FALSE_REFUSALS: dict[tuple[str, str], tuple[str, str]] = {}


class FalseRefusal(Exception):
    """The checker's verdict on a right answer recorded in :data:`FALSE_REFUSALS`."""


def _chapter(name: str) -> str:
    return CHECKERS[name].reference.__module__.rsplit(".", 1)[-1][2:4]


def _as_in_its_notebook(name, fn):
    """The answer as its notebook runs it: with float64 the default dtype where the notebook sets it."""
    return in_float64(fn) if _chapter(name) in FLOAT64_CHAPTERS else fn


def _value(result):
    """A number of a type that ``compare`` does not read (a ``Fraction``, a SymPy ``Integer``) as the Python number it
    equals: here, the value is what is checked."""
    if isinstance(result, (bool, int, float, np.generic, torch.Tensor)) or not isinstance(result, numbers.Number):
        return result
    return int(result) if isinstance(result, numbers.Integral) else float(result)


def _right_on(name, fn, cases):
    checker = CHECKERS[name]
    for case in cases:
        expected, got = checker._run(checker.reference, case), _value(checker._run(fn, case))
        problem = compare(expected, got, checker.atol, checker.rtol)
        assert problem is None, f"{name}: not an answer on '{case.name}': {problem}"


ANSWERS = [(name, how) for name in sorted(STYLES) for how in STYLES[name]]


def _wrong_verdict(name, how):
    said, why = FALSE_REFUSALS[name, how]
    return f"{name} refuses a right answer: '{said}', although {why}"


def _params(marked: bool):
    return [
        pytest.param(
            name,
            how,
            id=f"{name}: {how}",
            marks=[pytest.mark.xfail(strict=True, raises=FalseRefusal, reason=_wrong_verdict(name, how))]
            if marked and (name, how) in FALSE_REFUSALS
            else [],
        )
        for name, how in ANSWERS
    ]


def test_every_checker_has_three_styles_or_more():
    assert set(STYLES) == set(CHECKERS), set(STYLES) ^ set(CHECKERS)
    few = {name: len(styles) for name, styles in STYLES.items() if len(styles) < 3}
    assert not few, few


def test_the_false_refusals_name_answers_of_this_file():
    assert set(FALSE_REFUSALS) <= set(ANSWERS), set(FALSE_REFUSALS) - set(ANSWERS)


@pytest.mark.parametrize(("name", "how"), _params(marked=False))
def test_the_answer_computes_the_reference_on_every_case(name, how):
    _right_on(name, _as_in_its_notebook(name, STYLES[name][how]), CHECKERS[name].cases)


@pytest.mark.parametrize(("name", "how"), _params(marked=False))
def test_the_answer_computes_the_reference_on_further_random_inputs(name, how):
    _right_on(name, _as_in_its_notebook(name, STYLES[name][how]), _extra_cases(name))


@pytest.mark.parametrize(("name", "how"), _params(marked=True))
def test_the_checker_accepts_the_answer(name, how):
    result = CHECKERS[name](_as_in_its_notebook(name, STYLES[name][how]))
    if not result.passed and (name, how) in FALSE_REFUSALS:
        assert FALSE_REFUSALS[name, how][0] in result.message, result.message  # refused, but for another reason
        raise FalseRefusal(result.message)
    assert result.passed, result.message
