"""Batches: padding, lengths, masks in PyTorch's convention, the teacher-forcing shift, bucketing."""

from __future__ import annotations

import pytest
import torch

from attnbook.data import Batch, BucketBatchSampler, PairDataset, Vocab, collate, load_corpus, make_batches
from attnbook.masks import padding_mask


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(600, seed=2, max_len=20)


def test_collate_pads_shifts_and_masks():
    batch = collate([([5, 6, 7], [8, 9]), ([5], [8, 9, 10, 11])])
    assert isinstance(batch, Batch) and len(batch) == 2
    assert batch.src.tolist() == [[5, 6, 7], [5, 0, 0]]
    assert batch.src_lengths.tolist() == [3, 1]
    assert batch.src_padding_mask.tolist() == [[False, False, False], [False, True, True]]
    assert batch.tgt_in.tolist() == [[1, 8, 9, 0, 0], [1, 8, 9, 10, 11]]
    assert batch.tgt_out.tolist() == [[8, 9, 2, 0, 0], [8, 9, 10, 11, 2]]
    assert batch.tgt_padding_mask.tolist() == [[False, False, False, True, True], [False] * 5]
    assert batch.tgt_lengths.tolist() == [3, 5] and batch.n_tokens == 8
    for t in (batch.src, batch.tgt_in, batch.tgt_out, batch.src_lengths):
        assert t.dtype == torch.long
    assert batch.src_padding_mask.dtype == torch.bool and batch.tgt_padding_mask.dtype == torch.bool
    assert repr(batch) == "Batch(B=2, S=3, T=5, device=cpu)"


def test_collate_rejects_bad_examples():
    with pytest.raises(ValueError, match="at least one example"):
        collate([])
    with pytest.raises(ValueError, match="example 1 has an empty source"):
        collate([([4], [5]), ([], [5])])
    with pytest.raises(TypeError, match="encode it with a Vocab"):
        collate([("le chat", [5])])
    with pytest.raises(TypeError, match=r"\(source ids, target ids\) pair"):
        collate([[4, 5, 6]])


def test_batches_cover_every_pair_once_with_consistent_tensors(corpus):
    loader = make_batches(corpus.train, corpus.src_vocab, corpus.tgt_vocab, batch_size=32, seed=0)
    seen = []
    for batch in loader:
        B, S = batch.src.shape
        T = batch.tgt_in.shape[1]
        assert B <= 32 and batch.tgt_out.shape == (B, T) and batch.src_padding_mask.shape == (B, S)
        assert torch.equal(batch.src_padding_mask, padding_mask(batch.src_lengths, S))
        assert torch.equal(batch.tgt_padding_mask, padding_mask(batch.tgt_lengths, T))
        assert torch.equal(batch.src_padding_mask, batch.src == 0)  # no real token has id 0
        assert (batch.tgt_in[:, 0] == 1).all()
        for b in range(B):
            n = int(batch.tgt_lengths[b]) - 1
            assert torch.equal(batch.tgt_in[b, 1 : n + 1], batch.tgt_out[b, :n])  # the shift by one
            assert batch.tgt_out[b, n] == 2
            seen.append(
                (tuple(corpus.src_vocab.decode(batch.src[b])), tuple(corpus.tgt_vocab.decode(batch.tgt_out[b])))
            )
    assert sorted(seen) == sorted((tuple(p.src_tokens), tuple(p.tgt_tokens)) for p in corpus.train)
    assert len(loader) == -(-len(corpus.train) // 32)


def _order(loader):
    return [tuple(b.src_lengths.tolist()) + tuple(b.src[:, 0].tolist()) for b in loader]


def test_batches_are_deterministic_per_seed_and_epoch(corpus):
    def make(seed):
        return make_batches(corpus.train, corpus.src_vocab, corpus.tgt_vocab, batch_size=16, seed=seed)

    a, b = make(0), make(0)
    epoch0 = _order(a)
    assert epoch0 == _order(b)  # same seed, same batches
    epoch1 = _order(a)
    assert epoch1 != epoch0  # the next pass is the next epoch: a new order
    b.batch_sampler.set_epoch(1)
    assert _order(b) == epoch1
    assert _order(make(1)) != epoch0


def test_bucketing_reduces_padding(corpus):
    def padding(loader):
        return sum(int(b.src_padding_mask.sum()) + int(b.tgt_padding_mask.sum()) for b in loader)

    plain = make_batches(corpus.train, corpus.src_vocab, corpus.tgt_vocab, batch_size=16, bucket=False)
    bucketed = make_batches(corpus.train, corpus.src_vocab, corpus.tgt_vocab, batch_size=16, bucket=True)
    assert padding(bucketed) < 0.5 * padding(plain)
    ordered = make_batches(corpus.train, corpus.src_vocab, corpus.tgt_vocab, batch_size=16, shuffle=False, bucket=True)
    lengths = [length for b in ordered for length in b.src_lengths.tolist()]
    assert lengths == sorted(lengths)
    in_order = make_batches(
        corpus.train, corpus.src_vocab, corpus.tgt_vocab, batch_size=16, shuffle=False, bucket=False
    )
    first = next(iter(in_order))
    assert corpus.src_vocab.decode(first.src[0]) == corpus.train[0].src_tokens


def test_drop_last_and_sampler_lengths():
    sampler = BucketBatchSampler([(3, 3)] * 10, batch_size=4, drop_last=True)
    assert len(sampler) == 2 and all(len(b) == 4 for b in sampler)
    assert len(BucketBatchSampler([(3, 3)] * 10, batch_size=4)) == 3
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        BucketBatchSampler([(3, 3)], batch_size=0)


def test_a_token_budget_instead_of_a_batch_size(corpus):
    lengths = PairDataset(corpus.train, corpus.src_vocab, corpus.tgt_vocab).lengths()
    sampler = BucketBatchSampler(lengths, batch_tokens=300, seed=3)
    batches = sampler.batches(0)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(len(b) * max(max(lengths[i][0], lengths[i][1] + 1) for i in b) <= 300 or len(b) == 1 for b in batches)
    assert len({len(b) for b in batches}) > 1  # short sentences make larger batches
    assert len(sampler) == len(batches) and list(sampler) == batches and sampler.batches(1) != batches
    in_order = BucketBatchSampler(lengths, batch_tokens=300, shuffle=False).batches(0)
    assert [lengths[i] for b in in_order for i in b] == sorted(lengths)
    for kwargs, message in [
        ({}, "give either batch_size"),
        ({"batch_size": 8, "batch_tokens": 300}, "give either batch_size"),
        ({"batch_tokens": 0}, "batch_tokens must be a positive integer"),
        ({"batch_tokens": 300, "drop_last": True}, "drop_last goes with batch_size"),
    ]:
        with pytest.raises(ValueError, match=message):
            BucketBatchSampler(lengths, **kwargs)


def test_dataset_accepts_token_tuples_and_rejects_an_empty_corpus():
    vocab = Vocab.build([["a", "b"], ["c"]])
    data = PairDataset([(["a", "b"], ["c"]), (["z"], ["a"])], vocab, vocab)
    assert data[1] == ([3], [vocab["a"]]) and len(data) == 2 and data.lengths() == [(2, 1), (1, 1)]
    with pytest.raises(ValueError, match="empty corpus"):
        PairDataset([], vocab, vocab)
    with pytest.raises(ValueError, match="empty corpus"):
        make_batches([], vocab, vocab)
    with pytest.raises(TypeError, match="two Vocab"):
        PairDataset([(["a"], ["b"])], vocab, None)


def test_to_device_and_corpus_batches(corpus):
    batch = next(iter(corpus.batches("valid", batch_size=8)))
    moved = batch.to("cpu")
    assert isinstance(moved, Batch) and moved is not batch and torch.equal(moved.src, batch.src)
    lengths = [int(n) for b in corpus.batches("valid", batch_size=8) for n in b.src_lengths]
    assert lengths == sorted(lengths)  # evaluation batches are not shuffled, only sorted by length
