"""Batches: padded id tensors, lengths, masks and the teacher-forcing shift.

Sentences have different lengths but a tensor is a rectangle, so a batch pads
every sentence to the longest one with ``<pad>`` (id 0) and carries masks that
say where the padding is, in PyTorch's convention: bool, ``True`` = ignore.

For the decoder, the target sentence ``y1 .. yn`` is used twice, shifted by
one position (*teacher forcing*): the decoder reads ``<bos> y1 .. yn`` and
must predict ``y1 .. yn <eos>``, so at step ``t`` it has seen the true words
before ``y_t`` and is asked for ``y_t``.

Sorting sentences of similar length into the same batch (*bucketing*) wastes
less compute on padding; the batches are still shuffled, deterministically for
a given seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ..masks import padding_mask
from .text import Vocab

__all__ = ["Batch", "PairDataset", "BucketBatchSampler", "collate", "make_batches"]


@dataclass(eq=False)
class Batch:
    """A batch of ``B`` sentence pairs, padded with 0.

    Attributes
    ----------
    src : LongTensor (B, S)
        source ids ``x1 .. xm`` (no ``<bos>``/``<eos>``), padded.
    src_lengths : LongTensor (B,)
        the true length ``m`` of each source sentence.
    src_padding_mask : BoolTensor (B, S)
        ``True`` at padding positions (to be ignored).
    tgt_in : LongTensor (B, T)
        decoder input ``<bos> y1 .. yn``, padded (``T = max n + 1``).
    tgt_out : LongTensor (B, T)
        decoder target ``y1 .. yn <eos>``, padded.
    tgt_padding_mask : BoolTensor (B, T)
        ``True`` at padding positions of ``tgt_in`` and ``tgt_out``.
    tgt_lengths : LongTensor (B,)
        ``n + 1``, the number of real positions of ``tgt_in`` and ``tgt_out``.
    """

    src: torch.Tensor
    src_lengths: torch.Tensor
    src_padding_mask: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    tgt_padding_mask: torch.Tensor
    tgt_lengths: torch.Tensor

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        """The same batch with every tensor on ``device``."""
        return Batch(**{f.name: getattr(self, f.name).to(device, non_blocking=non_blocking) for f in fields(self)})

    def __len__(self) -> int:
        return self.src.shape[0]

    @property
    def n_tokens(self) -> int:
        """The number of real (non-padding) target positions: what a per-token loss averages over."""
        return int(self.tgt_lengths.sum())

    def __repr__(self) -> str:
        B, S = self.src.shape
        T = self.tgt_in.shape[1]
        return f"Batch(B={B}, S={S}, T={T}, device={self.src.device.type})"


def _check_ids(ids: Sequence[int], what: str, i: int) -> None:
    if isinstance(ids, str):
        raise TypeError(f"example {i}: the {what} must be a list of ids, got a string; encode it with a Vocab first")


def collate(
    examples: Sequence[tuple[Sequence[int], Sequence[int]]],
    pad_id: int = Vocab.pad_id,
    bos_id: int = Vocab.bos_id,
    eos_id: int = Vocab.eos_id,
) -> Batch:
    """Turn ``(source ids, target ids)`` examples into one padded :class:`Batch`.

    Neither sequence carries special tokens; ``collate`` adds ``<bos>`` and
    ``<eos>`` to the target and pads everything with ``pad_id``.
    """
    if len(examples) == 0:
        raise ValueError("collate needs at least one example; got an empty list")
    srcs, tgts = [], []
    for i, example in enumerate(examples):
        try:
            src, tgt = example
        except (TypeError, ValueError):
            raise TypeError(f"example {i} must be a (source ids, target ids) pair, got {example!r}") from None
        _check_ids(src, "source", i)
        _check_ids(tgt, "target", i)
        if hasattr(src, "tolist"):
            src = src.tolist()
        if hasattr(tgt, "tolist"):
            tgt = tgt.tolist()
        if len(src) == 0:
            raise ValueError(f"example {i} has an empty source sentence: nothing for the encoder to read")
        srcs.append(list(src))
        tgts.append(list(tgt))
    S = max(map(len, srcs))
    T = max(map(len, tgts)) + 1
    src = torch.tensor([s + [pad_id] * (S - len(s)) for s in srcs], dtype=torch.long)
    tgt_in = torch.tensor([[bos_id] + t + [pad_id] * (T - 1 - len(t)) for t in tgts], dtype=torch.long)
    tgt_out = torch.tensor([t + [eos_id] + [pad_id] * (T - 1 - len(t)) for t in tgts], dtype=torch.long)
    src_lengths = torch.tensor([len(s) for s in srcs], dtype=torch.long)
    tgt_lengths = torch.tensor([len(t) + 1 for t in tgts], dtype=torch.long)
    return Batch(
        src=src,
        src_lengths=src_lengths,
        src_padding_mask=padding_mask(src_lengths, S),
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        tgt_padding_mask=padding_mask(tgt_lengths, T),
        tgt_lengths=tgt_lengths,
    )


class PairDataset(Dataset):
    """Sentence pairs encoded once: item ``i`` is ``(source ids, target ids)``, without special tokens.

    ``pairs`` are objects with ``src_tokens`` and ``tgt_tokens`` (such as
    :class:`attnbook.data.Pair`) or ``(source tokens, target tokens)`` tuples.
    """

    def __init__(self, pairs: Sequence, src_vocab: Vocab, tgt_vocab: Vocab) -> None:
        if not isinstance(src_vocab, Vocab) or not isinstance(tgt_vocab, Vocab):
            raise TypeError("PairDataset needs two Vocab objects (source and target)")
        if len(pairs) == 0:
            raise ValueError("cannot make batches from an empty corpus: there are no sentence pairs")
        self.src_ids: list[list[int]] = []
        self.tgt_ids: list[list[int]] = []
        for pair in pairs:
            if hasattr(pair, "src_tokens"):
                src_tokens, tgt_tokens = pair.src_tokens, pair.tgt_tokens
            else:
                src_tokens, tgt_tokens = pair
            self.src_ids.append(src_vocab.encode(src_tokens))
            self.tgt_ids.append(tgt_vocab.encode(tgt_tokens))

    def __len__(self) -> int:
        return len(self.src_ids)

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self.src_ids[i], self.tgt_ids[i]

    def lengths(self) -> list[tuple[int, int]]:
        """``(source length, target length)`` of every example."""
        return [(len(s), len(t)) for s, t in zip(self.src_ids, self.tgt_ids)]


class BucketBatchSampler(Sampler):
    """Yields lists of indices: batches, optionally of similar lengths, deterministic per seed.

    A batch holds ``batch_size`` examples, or, with ``batch_tokens`` instead, as
    many as fit in that many padded positions: a batch of ``B`` pairs whose
    longest source has ``S`` tokens and longest target ``T`` (plus ``<eos>``)
    costs ``B * max(S, T + 1)`` positions, and a pair longer than ``batch_tokens``
    gets a batch of its own. A token budget keeps the memory of a step about
    constant: many short sentences or a few long ones.

    With ``shuffle``, every pass over the data (an *epoch*) draws a new order
    from ``(seed, epoch)``: the examples are shuffled, cut into pools of
    ``pool_batches`` batches, each pool is sorted by length and cut into
    batches, and the batches are shuffled. Without ``shuffle`` and with
    ``bucket``, the whole corpus is sorted by length; with neither, batches
    follow the corpus order.
    """

    def __init__(
        self,
        lengths: Sequence[tuple[int, int]],
        batch_size: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        bucket: bool = True,
        drop_last: bool = False,
        pool_batches: int = 50,
        *,
        batch_tokens: int | None = None,
    ) -> None:
        if (batch_size is None) == (batch_tokens is None):
            raise ValueError("give either batch_size (examples per batch) or batch_tokens (padded positions per batch)")
        for name, value in (("batch_size", batch_size), ("batch_tokens", batch_tokens)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if pool_batches < 1:
            raise ValueError(f"pool_batches must be >= 1, got {pool_batches}")
        if drop_last and batch_tokens is not None:
            raise ValueError("drop_last goes with batch_size: batches of a token budget have no fixed size")
        self.lengths = list(lengths)
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.bucket = bucket
        self.drop_last = drop_last
        self.pool_batches = pool_batches
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next pass yields."""
        self.epoch = epoch

    def batches(self, epoch: int) -> list[list[int]]:
        """The batches of indices of one epoch (the same for the same seed and epoch)."""
        n = len(self.lengths)
        rng = random.Random(self.seed * 1_000_003 + epoch)
        order = list(range(n))
        if self.shuffle:
            rng.shuffle(order)
        if self.bucket:
            key = self.lengths.__getitem__
            if self.shuffle:
                pool = self._pool_size()
                order = [i for start in range(0, n, pool) for i in sorted(order[start : start + pool], key=key)]
            else:
                order.sort(key=key)
        if self.batch_tokens is None:
            batches = [order[i : i + self.batch_size] for i in range(0, n, self.batch_size)]
        else:
            batches = self._fill(order)
        if self.drop_last:
            batches = [b for b in batches if len(b) == self.batch_size]
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def _cost(self, i: int) -> int:
        """The positions example ``i`` takes in a batch: its source, or its target and ``<eos>``."""
        src, tgt = self.lengths[i]
        return max(src, tgt + 1)

    def _pool_size(self) -> int:
        """How many examples are sorted together: about ``pool_batches`` batches' worth."""
        if self.batch_tokens is None:
            return self.batch_size * self.pool_batches
        total = sum(self._cost(i) for i in range(len(self.lengths)))
        return max(1, self.pool_batches * self.batch_tokens * len(self.lengths) // max(1, total))

    def _fill(self, order: list[int]) -> list[list[int]]:
        """Cut ``order`` into consecutive batches of at most ``batch_tokens`` padded positions."""
        batches: list[list[int]] = []
        current: list[int] = []
        longest = 0
        for i in order:
            cost = self._cost(i)
            if current and max(longest, cost) * (len(current) + 1) > self.batch_tokens:
                batches.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, cost)
        if current:
            batches.append(current)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        epoch = self.epoch
        self.epoch += 1
        return iter(self.batches(epoch))

    def __len__(self) -> int:
        if self.batch_tokens is not None:  # how many fit depends on the order: count this epoch's
            return len(self.batches(self.epoch))
        full, rest = divmod(len(self.lengths), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)


def make_batches(
    pairs: Sequence,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int = 64,
    shuffle: bool = True,
    seed: int = 0,
    bucket: bool = True,
    drop_last: bool = False,
) -> DataLoader:
    """An iterable of :class:`Batch` over ``pairs``: a ``DataLoader`` with length bucketing.

    Each pass over it is one epoch; the ``k``-th pass gives the same batches
    for the same ``seed`` on any machine. ``loader.batch_sampler.set_epoch(k)``
    jumps to epoch ``k``.
    """
    dataset = PairDataset(pairs, src_vocab, tgt_vocab)
    sampler = BucketBatchSampler(
        dataset.lengths(), batch_size, shuffle=shuffle, seed=seed, bucket=bucket, drop_last=drop_last
    )
    return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate)
