"""Small synthetic batches for the model, training and decoding tests (no corpus needed).

They follow the data contract: ``src`` padded with 0, ``src_mask`` True at padding,
``tgt_in = <bos> y``, ``tgt_out = y <eos>``, ids 0..3 reserved for <pad> <bos> <eos> <unk>.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields

import pytest
import torch

PAD, BOS, EOS, UNK = 0, 1, 2, 3


@dataclass
class ToyBatch:
    src: torch.Tensor
    src_lengths: torch.Tensor
    src_mask: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    tgt_mask: torch.Tensor

    def to(self, device):
        return ToyBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def make_batch(sources: list[list[int]], targets: list[list[int]]) -> ToyBatch:
    S = max(map(len, sources))
    T = max(map(len, targets)) + 1
    B = len(sources)
    src = torch.full((B, S), PAD, dtype=torch.long)
    tgt_in = torch.full((B, T), PAD, dtype=torch.long)
    tgt_out = torch.full((B, T), PAD, dtype=torch.long)
    for b, (x, y) in enumerate(zip(sources, targets)):
        src[b, : len(x)] = torch.tensor(x)
        tgt_in[b, : len(y) + 1] = torch.tensor([BOS, *y])
        tgt_out[b, : len(y) + 1] = torch.tensor([*y, EOS])
    return ToyBatch(src, torch.tensor([len(x) for x in sources]), src == PAD, tgt_in, tgt_out, tgt_out == PAD)


def reversal_pairs(n: int, vocab_size: int = 12, min_len: int = 2, max_len: int = 7, seed: int = 0):
    """Pairs (x, reversed x) over the tokens 4..vocab_size-1: a task attention learns fast."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        x = [rng.randrange(4, vocab_size) for _ in range(rng.randint(min_len, max_len))]
        pairs.append((x, x[::-1]))
    return pairs


def batches_of(pairs, batch_size: int = 16) -> list[ToyBatch]:
    return [make_batch([x for x, _ in pairs[i : i + batch_size]], [y for _, y in pairs[i : i + batch_size]]) for i in range(0, len(pairs), batch_size)]


class ToyVocab:
    """The part of attnbook.data.Vocab that decoding uses."""

    pad_id, bos_id, eos_id, unk_id = PAD, BOS, EOS, UNK

    def __init__(self, words: list[str]):
        self.tokens = ["<pad>", "<bos>", "<eos>", "<unk>", *words]

    def __len__(self):
        return len(self.tokens)

    def decode(self, ids, strip_special=True):
        out = []
        for i in ids:
            if strip_special and i == EOS:
                break
            if strip_special and i < 4:
                continue
            out.append(self.tokens[i])
        return out


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The toy models are tiny: one thread is faster, and immune to a busy machine's contention."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
