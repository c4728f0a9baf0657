"""The translator's loop: the batches it makes ready ahead come in order, fail loudly, and stop with the loop.

On a GPU the loop prepares the next batches in a thread (pinned memory,
copies that do not block) while the device computes; here that thread runs on
the CPU, where the same code runs without pinning.
"""

from __future__ import annotations

import threading

import pytest
import torch

from attnbook.data import collate
from attnbook.translate.train import _ahead


def _batches(n: int, fail_at: int | None = None):
    for i in range(n):
        if i == fail_at:
            raise ValueError(f"batch {i} cannot be built")
        yield collate([([5 + i, 6], [7, 8, 9 + i][: 1 + i % 3]), ([5], [7])])


@pytest.mark.parametrize("thread", [False, True], ids=["in the loop", "in a thread"])
def test_batches_made_ready_ahead_come_in_order_with_their_tokens_counted(thread):
    got = list(_ahead(_batches(7), torch.device("cpu"), thread=thread))
    want = list(_batches(7))
    assert len(got) == 7
    for ready, batch in zip(got, want):
        assert torch.equal(ready.on_device.tgt_out, batch.tgt_out) and torch.equal(ready.on_device.src, batch.src)
        assert ready.n_real == int((batch.tgt_out != 0).sum())


def test_a_batch_that_fails_raises_in_the_loop_and_a_loop_that_stops_stops_the_thread():

    before = threading.active_count()
    with pytest.raises(ValueError, match="batch 3 cannot be built"):
        for _ in _ahead(_batches(7, fail_at=3), torch.device("cpu"), thread=True):
            pass
    ahead = _ahead(_batches(50), torch.device("cpu"), depth=2, thread=True)
    next(ahead)
    ahead.close()  # the budget ended the epoch: the thread, blocked on a full queue, must end too
    assert threading.active_count() == before
