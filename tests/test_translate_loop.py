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


def test_the_checks_that_read_values_are_left_out_inside_values_unchecked_and_back_after():
    from attnbook.checks import check_token_ids, values_checked, values_unchecked

    ids = torch.tensor([[3, 99]])
    with pytest.raises(IndexError, match="99"):
        check_token_ids(ids, 10)
    with pytest.raises(RuntimeError), values_unchecked():
        assert not values_checked()
        check_token_ids(ids, 10)  # not read: no error here
        raise RuntimeError("a step that fails")
    assert values_checked()  # back, even after an error
    with pytest.raises(IndexError):
        check_token_ids(ids, 10)


def test_the_training_step_returns_the_summed_loss_and_takes_one_clipped_step():
    from attnbook.translate.model import build_model, model_config
    from attnbook.translate.recipe import fused_sequence_loss, teacher_forced_logits
    from attnbook.translate.settings import RunSettings
    from attnbook.translate.train import training_step

    settings = RunSettings(d_model=16, num_heads=2, num_layers=1, d_ff=32, clip=0.5, label_smoothing=0.1)
    torch.manual_seed(0)
    model = build_model("transformer", model_config(settings, 40, 40))
    model.eval()  # no dropout: the loss before the step is the step's
    batch = collate([([5, 6, 7], [8, 9]), ([5], [10, 11, 12])])
    with torch.no_grad():
        expected = fused_sequence_loss(teacher_forced_logits(model, batch), batch.tgt_out, 0, 0.1, "sum")
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    loss_sum = training_step(model, model, optimizer, batch, batch.n_tokens, settings, None)
    torch.testing.assert_close(loss_sum, expected)
    assert not loss_sum.requires_grad
    moved = torch.sqrt(sum(((p.detach() - b) ** 2).sum() for p, b in zip(model.parameters(), before)))
    torch.testing.assert_close(moved, torch.tensor(0.5))  # SGD with rate 1 moves by the clipped gradient: norm 0.5


def test_the_utilisation_counts_a_products_operations_and_says_its_share():
    from attnbook.translate.utilisation import count_flops, describe_utilisation, peak_flops

    layer = torch.nn.Linear(64, 32, bias=False)
    x = torch.randn(10, 64, requires_grad=True)
    flops = count_flops(lambda: layer(x).sum().backward())
    assert flops == 3 * 2 * 10 * 64 * 32  # forward, and the gradients of the input and of the weights
    peak = peak_flops(torch.device("cpu"), torch.float32, size=256, repeats=2)
    assert peak > 0
    share, line = describe_utilisation(1e6, 2e3, 8e9)
    assert share == 0.25 and "model FLOP utilisation 25.0%" in line


def test_the_peak_is_measured_once_a_process_and_within_its_seconds():
    from attnbook.translate import utilisation
    from attnbook.translate.utilisation import count_flops, peak_flops

    cpu, product = torch.device("cpu"), 2 * 96**3
    utilisation._PEAKS.clear()
    # no time to spare: the product that warms up, then the two timed ones that a best needs at least
    assert count_flops(lambda: peak_flops(cpu, torch.float32, size=96, repeats=5, seconds=0.0)) == 3 * product
    # asked again in the same process, with as many threads: the measurement is not repeated
    assert count_flops(lambda: peak_flops(cpu, torch.float32, size=96, repeats=5, seconds=0.0)) == 0
    # time enough: every repeat
    assert count_flops(lambda: peak_flops(cpu, torch.float32, size=97, repeats=4, seconds=1e9)) == 5 * 2 * 97**3
    utilisation._PEAKS.clear()
