"""Small synthetic batches for the model, training and decoding tests (no corpus needed).

They are built by the library's own `collate`, so they are real `attnbook.data.Batch`es:
``tgt_in = <bos> y``, ``tgt_out = y <eos>``, ids 0..3 reserved for <pad> <bos> <eos> <unk>.
"""

from __future__ import annotations

import random

import pytest
import torch

from attnbook.data import Batch, Vocab, collate

PAD, BOS, EOS, UNK = Vocab.pad_id, Vocab.bos_id, Vocab.eos_id, Vocab.unk_id


def make_batch(sources: list[list[int]], targets: list[list[int]]) -> Batch:
    """One padded batch, built by the library's own collate."""
    return collate(list(zip(sources, targets)))


def reversal_pairs(n: int, vocab_size: int = 12, min_len: int = 2, max_len: int = 7, seed: int = 0):
    """Pairs (x, reversed x) over the tokens 4..vocab_size-1: a task attention learns fast."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        x = [rng.randrange(4, vocab_size) for _ in range(rng.randint(min_len, max_len))]
        pairs.append((x, x[::-1]))
    return pairs


def batches_of(pairs, batch_size: int = 16) -> list[Batch]:
    return [
        make_batch([x for x, _ in pairs[i : i + batch_size]], [y for _, y in pairs[i : i + batch_size]])
        for i in range(0, len(pairs), batch_size)
    ]


def ToyVocab(words: list[str]) -> Vocab:
    """A vocabulary whose ids 4, 5, ... are ``words`` in order."""
    return Vocab(words)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The toy models are tiny: one thread is faster, and immune to a busy machine's contention."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
