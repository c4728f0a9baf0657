"""The training loop, the padding-aware loss, and checkpoints."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import attnbook.notebook as notebook_module
from attnbook.rnn import Seq2Seq, Seq2SeqConfig
from attnbook.train import (
    CLIP,
    LOG_EVERY,
    CheckpointMismatch,
    History,
    NoamSchedule,
    evaluate,
    load_checkpoint,
    noam_lr,
    paper_optimizer,
    read_checkpoint,
    save_checkpoint,
    sequence_loss,
    smoothed_targets,
    train,
)
from toy_seq2seq import batches_of, one_thread, reversal_pairs  # noqa: F401 (fixture)

PAIRS = reversal_pairs(256, vocab_size=10, max_len=6)
TRAIN, VALID = batches_of(PAIRS[:192], 32), batches_of(PAIRS[192:], 64)


def _model(attention=True, hidden=24, **kw) -> Seq2Seq:
    torch.manual_seed(0)
    return Seq2Seq(Seq2SeqConfig(10, 10, embed_size=12, hidden_size=hidden, attention=attention, **kw))


# --- the loss ---------------------------------------------------------------------


def test_sequence_loss_is_the_mean_over_real_tokens():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 7)
    targets = torch.tensor([[4, 5, 2, 0], [6, 2, 0, 0]])
    per_token = F.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1), reduction="none").reshape(2, 4)
    real = targets != 0
    expected = per_token[real].sum() / real.sum()  # 5 real tokens, not 8 positions, not a mean of sentence means
    assert torch.isclose(sequence_loss(logits, targets), expected)
    assert torch.isclose(sequence_loss(logits, targets, reduction="sum"), per_token[real].sum())
    assert not torch.isclose(
        expected, per_token[real].mean() * 0 + (per_token[0, :3].mean() + per_token[1, :2].mean()) / 2
    )


def test_sequence_loss_ignores_whatever_the_model_says_at_padding():
    torch.manual_seed(1)
    logits = torch.randn(2, 4, 7)
    targets = torch.tensor([[4, 5, 2, 0], [6, 2, 0, 0]])
    noisy = logits.clone()
    noisy[targets == 0] = 100 * torch.randn_like(noisy[targets == 0])
    assert torch.isclose(sequence_loss(logits, targets), sequence_loss(noisy, targets))
    other_pad = torch.where(targets == 0, torch.tensor(6), targets)
    assert torch.isclose(
        sequence_loss(logits, other_pad, pad_id=6), sequence_loss(logits, targets.masked_fill(targets == 6, 0))
    )


def test_label_smoothing_by_hand():
    """V = 5, eps = 0.3: the true class gets 0.7, each of the 3 classes that are neither true nor <pad> gets 0.1."""
    logits = torch.tensor([[[0.0, 1.0, 2.0, 0.5, -1.0], [3.0, 0.0, 0.0, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0, 1.0]]])
    targets = torch.tensor([[2, 4, 0]])  # the third position is padding
    lp = torch.log_softmax(logits[0], dim=-1)
    first = -(0.7 * lp[0, 2] + 0.1 * (lp[0, 1] + lp[0, 3] + lp[0, 4]))  # column 0 (<pad>) gets nothing
    second = -(0.7 * lp[1, 4] + 0.1 * (lp[1, 1] + lp[1, 2] + lp[1, 3]))
    assert torch.isclose(sequence_loss(logits, targets, label_smoothing=0.3), (first + second) / 2)
    assert torch.isclose(sequence_loss(logits, targets, label_smoothing=0.3, reduction="sum"), first + second)
    expected = torch.tensor([[[0.0, 0.1, 0.7, 0.1, 0.1], [0.0, 0.1, 0.1, 0.1, 0.7], [0.0] * 5]])
    assert torch.allclose(smoothed_targets(targets, 5, 0.3), expected)


def test_label_smoothing_is_cross_entropy_against_the_smoothed_targets():
    torch.manual_seed(2)
    logits = torch.randn(3, 5, 9, dtype=torch.float64)
    targets = torch.randint(1, 9, (3, 5))
    targets[0, 3:] = 0
    real = targets != 0
    q = smoothed_targets(targets, 9, 0.1)
    assert torch.allclose(q[real].sum(-1), torch.ones(int(real.sum()), dtype=q.dtype))
    assert torch.all(q[..., 0] == 0) and torch.all(q[~real] == 0)
    assert torch.allclose(q[real].max(-1).values, torch.full((int(real.sum()),), 0.9, dtype=q.dtype))
    expected = -(q * torch.log_softmax(logits, -1)).sum(-1)[real].mean()
    assert torch.isclose(sequence_loss(logits, targets, label_smoothing=0.1), expected)
    # PyTorch's label_smoothing spreads eps over all V classes, the true one and <pad> included: another loss
    pytorch = F.cross_entropy(logits[real], targets[real], label_smoothing=0.1)
    assert not torch.isclose(sequence_loss(logits, targets, label_smoothing=0.1), pytorch)
    # without smoothing it is the plain cross-entropy (computed another way, so to the last bits only)
    torch.testing.assert_close(
        sequence_loss(logits, targets),
        F.cross_entropy(logits.reshape(-1, 9), targets.reshape(-1), ignore_index=0, reduction="sum") / real.sum(),
        rtol=1e-14,
        atol=0,
    )


def test_label_smoothing_ignores_padding_positions_and_is_minimal_at_its_targets():
    torch.manual_seed(3)
    logits = torch.randn(2, 4, 7, dtype=torch.float64)
    targets = torch.tensor([[4, 5, 2, 0], [6, 2, 0, 0]])
    noisy = logits.clone()
    noisy[targets == 0] = 100 * torch.randn_like(noisy[targets == 0])
    assert torch.isclose(
        sequence_loss(logits, targets, label_smoothing=0.1), sequence_loss(noisy, targets, label_smoothing=0.1)
    )
    # the loss is smallest when the model predicts exactly the smoothed distribution (its entropy)
    q = smoothed_targets(targets, 7, 0.1).double()
    best = torch.where(q > 0, q.log(), torch.tensor(-1e4, dtype=q.dtype))
    entropy = -torch.special.xlogy(q, q).sum(-1)[targets != 0].mean()
    assert torch.isclose(sequence_loss(best, targets, label_smoothing=0.1), entropy, atol=1e-9)
    assert sequence_loss(best + 0.1 * torch.randn_like(best), targets, label_smoothing=0.1) > entropy
    one_hot = torch.full_like(logits, -1e4).scatter(-1, targets[..., None], 0.0)
    assert sequence_loss(one_hot, targets, label_smoothing=0.1) > 999, (
        "a fully confident model pays for the smoothed mass"
    )
    assert sequence_loss(one_hot, targets) < 1e-9


def test_label_smoothing_errors():
    logits = torch.randn(1, 2, 5)
    targets = torch.tensor([[3, 4]])
    for bad in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\)"):
            sequence_loss(logits, targets, label_smoothing=bad)
    with pytest.raises(TypeError, match="label_smoothing must be a number"):
        sequence_loss(logits, targets, label_smoothing="0.1")
    with pytest.raises(ValueError, match="at least 3 tokens"):
        sequence_loss(logits[..., :2], torch.tensor([[1, 1]]), label_smoothing=0.1)


# --- the recipe: schedule and optimizer ------------------------------------------


def test_noam_lr_by_hand():
    assert math.isclose(noam_lr(1, 512, 4000), 512**-0.5 * 4000**-1.5)
    assert math.isclose(noam_lr(4000, 512, 4000), 512**-0.5 * 4000**-0.5)  # the peak
    assert math.isclose(noam_lr(16000, 512, 4000), 512**-0.5 / 126.49110640673517)
    assert math.isclose(noam_lr(10, 64, 100, factor=2.0), 2 * 64**-0.5 * 10 * 100**-1.5)
    steps = torch.arange(1, 20001)
    curve = noam_lr(steps, 512, 4000)
    assert (
        int(curve.argmax()) + 1 == 4000
        and torch.all(curve[1:4000] > curve[:3999])
        and torch.all(curve[4000:] < curve[3999:-1])
    )
    with pytest.raises(ValueError, match="steps count from 1"):
        noam_lr(0, 512)


def test_noam_schedule_sets_the_rate_of_every_optimizer_step():
    w = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.Adam([w], lr=123.0)  # the schedule sets the rate outright
    sched = NoamSchedule(opt, d_model=16, warmup=5, factor=2.0)
    seen = []
    for _ in range(12):
        seen.append(opt.param_groups[0]["lr"])
        w.grad = torch.ones(3)
        opt.step()
        sched.step()
    assert seen == pytest.approx([noam_lr(s, 16, 5, 2.0) for s in range(1, 13)], rel=1e-12)
    assert sched.get_last_lr() == pytest.approx([noam_lr(13, 16, 5, 2.0)])
    # resuming from a state dict continues the curve
    opt2 = torch.optim.Adam([torch.nn.Parameter(torch.zeros(3))], lr=1.0)
    resumed = NoamSchedule(opt2, d_model=16, warmup=5, factor=2.0)
    resumed.load_state_dict(sched.state_dict())
    resumed.step()
    sched.step()
    assert resumed.get_last_lr() == sched.get_last_lr()
    assert isinstance(sched, torch.optim.lr_scheduler.LRScheduler)


def test_noam_schedule_errors():
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
    with pytest.raises(ValueError, match="d_model must be an int >= 1"):
        NoamSchedule(opt, d_model=0)
    with pytest.raises(ValueError, match="warmup must be an int >= 1"):
        NoamSchedule(opt, d_model=8, warmup=0)
    with pytest.raises(ValueError, match="factor must be > 0"):
        NoamSchedule(opt, d_model=8, factor=0)


@pytest.mark.slow
def test_paper_optimizer_drives_train():
    from dataclasses import dataclass

    @dataclass
    class Config:
        d_model: int = 24

    model = _model()
    opt, sched = paper_optimizer(model, d_model=24, warmup=10)
    group = opt.param_groups[0]
    assert isinstance(opt, torch.optim.Adam) and group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
    assert group["lr"] == pytest.approx(noam_lr(1, 24, 10))
    train(model, TRAIN, epochs=2, optimizer=opt, scheduler=sched, plot=False, verbose=False)
    assert sched.last_epoch == 2 * len(TRAIN)
    assert group["lr"] == pytest.approx(noam_lr(2 * len(TRAIN) + 1, 24, 10))
    with pytest.raises(ValueError, match="no config.d_model"):
        paper_optimizer(model)
    linear = torch.nn.Linear(2, 2)
    linear.config = Config()
    assert paper_optimizer(linear)[1].d_model == 24


def test_sequence_loss_errors():
    logits = torch.randn(2, 3, 5)
    with pytest.raises(ValueError, match="do not match logits"):
        sequence_loss(logits, torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"shape \(B, T, V\)"):
        sequence_loss(logits[0], torch.ones(3, dtype=torch.long))
    with pytest.raises(IndexError, match="target index 5 is outside the vocabulary of size 5"):
        sequence_loss(logits, torch.full((2, 3), 5))
    with pytest.raises(TypeError, match="integer"):
        sequence_loss(logits, torch.ones(2, 3))
    with pytest.raises(ValueError, match="no real tokens"):
        sequence_loss(logits, torch.zeros(2, 3, dtype=torch.long))


# --- the loop ---------------------------------------------------------------------


@pytest.mark.slow
def test_training_learns_the_toy_task_and_records_history(capsys):
    model = _model()
    before = evaluate(model, VALID)
    history = train(model, TRAIN, VALID, epochs=6, lr=1e-2, plot=False)
    after = evaluate(model, VALID)
    assert after < 0.6 * before
    assert math.isclose(history.final_valid_loss, after, rel_tol=1e-6)
    assert [e.epoch for e in history.epochs] == list(range(1, 7))
    assert history.stopped_by == "epoch budget (6 epochs)"
    assert history.tokens == 6 * sum(int((b.tgt_out != 0).sum()) for b in TRAIN)
    assert history.tokens_per_second > 0
    assert len(history.steps) == 6 * len(TRAIN) // LOG_EVERY  # a point of the curve every LOG_EVERY batches
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 6 and lines[0].startswith("epoch  1/6: train loss ") and "valid loss" in lines[0]
    assert not model.training


@pytest.mark.slow
def test_training_is_deterministic():
    runs = []
    for draws in (0, 5):
        model = _model(dropout=0.2)
        torch.rand(draws)  # whatever was drawn before: train seeds PyTorch itself
        history = train(model, TRAIN, VALID, epochs=2, lr=1e-2, plot=False, verbose=False)
        runs.append(
            ([e.train_loss for e in history.epochs], [e.valid_loss for e in history.epochs], model.state_dict())
        )
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    assert all(torch.equal(runs[0][2][k], runs[1][2][k]) for k in runs[0][2])


def test_the_default_adam_updates_as_pytorchs_per_tensor_loop_bit_for_bit():
    """train's Adam and paper_optimizer's take one call per step of the formula for all tensors (``foreach``): the
    stored chapters were trained with PyTorch's per-tensor loop, and must train to the same weights."""

    def trained(recipe=None):
        model = _model(dropout=0.2)
        optimizer, scheduler = recipe(model) if recipe else (None, None)
        train(model, TRAIN[:3], epochs=2, lr=1e-2, optimizer=optimizer, scheduler=scheduler, plot=False, verbose=False)
        return model.state_dict()

    def per_tensor(model, noam=False):
        if not noam:
            return torch.optim.Adam(model.parameters(), lr=1e-2, foreach=False), None
        optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, foreach=False)
        return optimizer, NoamSchedule(optimizer, 24, 10)

    assert paper_optimizer(_model(), d_model=24, warmup=10)[0].defaults["foreach"] is True
    pairs = {
        "train's default": (trained(), trained(per_tensor)),
        "paper_optimizer": (
            trained(lambda model: paper_optimizer(model, d_model=24, warmup=10)),
            trained(lambda model: per_tensor(model, noam=True)),
        ),
    }
    for name, (ours, theirs) in pairs.items():
        # exact: the same element-wise operations on the same numbers, one tensor at a time or in one call
        assert all(torch.equal(ours[k], theirs[k]) for k in ours), name


def test_a_function_of_the_epoch_gives_fresh_batches_each_epoch():
    seen = []

    def batches(epoch):
        seen.append(epoch)
        return TRAIN[epoch % 2 :: 2]

    train(_model(), batches, epochs=3, plot=False, verbose=False)
    assert seen == [1, 2, 3]


class _Loud(torch.nn.Module):
    """A model whose logits are 100 times its inner model's: its gradient's norm is far above ``CLIP``."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner, self.config = inner, inner.config

    def forward(self, src, src_padding_mask, tgt_in):
        return 100 * self.inner(src, src_padding_mask, tgt_in)


def test_gradient_clipping_bounds_each_step():
    model, batch = _Loud(_model()), TRAIN[0]
    sequence_loss(model(batch.src, batch.src_padding_mask, batch.tgt_in), batch.tgt_out).backward()
    unclipped = torch.sqrt(sum((p.grad**2).sum() for p in model.parameters()))
    assert unclipped > 10 * CLIP
    before = [p.detach().clone() for p in model.parameters()]
    sgd = torch.optim.SGD(model.parameters(), lr=1.0)
    train(model, [batch], epochs=1, optimizer=sgd, plot=False, verbose=False)
    step = torch.sqrt(sum(((p.detach() - b) ** 2).sum() for p, b in zip(model.parameters(), before)))
    torch.testing.assert_close(step, torch.tensor(CLIP), rtol=1e-4, atol=0)  # SGD at rate 1 moves by the gradient


def test_scheduler_is_stepped_every_batch():
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (s + 1))
    train(model, TRAIN, epochs=1, optimizer=opt, scheduler=sched, plot=False, verbose=False)
    assert sched.last_epoch == len(TRAIN)


def test_the_callback_sees_every_step_and_can_stop_training(capsys):
    steps = []

    def on_step(info):
        steps.append(info)
        return info.step == len(TRAIN) + 2  # stop two batches into the second epoch

    history = train(_model(), TRAIN, VALID, epochs=5, plot=False, on_step=on_step)
    assert [s.step for s in steps] == list(range(1, len(TRAIN) + 3))
    assert [(s.epoch, s.batch, s.batches) for s in steps[-3:]] == [
        (1, len(TRAIN), len(TRAIN)),
        (2, 1, len(TRAIN)),
        (2, 2, len(TRAIN)),
    ]
    assert all(s.tokens == int((b.tgt_out != 0).sum()) and math.isfinite(s.loss) for s, b in zip(steps, TRAIN))
    assert history.stopped_by == "on_step during epoch 2" and len(history.epochs) == 2
    cut_short = history.epochs[1]  # validated and reported
    assert cut_short.valid_loss is not None and cut_short.tokens == sum(int((b.tgt_out != 0).sum()) for b in TRAIN[:2])
    assert capsys.readouterr().out.splitlines()[1].startswith("epoch  2/5: train loss ")


def test_bad_arguments_are_clear_errors():
    model = _model()
    with pytest.raises(ValueError, match="epochs must be an int >= 1"):
        train(model, TRAIN, epochs=0, plot=False)
    with pytest.raises(ValueError, match="train_batches is empty"):
        train(model, [], plot=False)
    with pytest.raises(ValueError, match="no batches"):
        evaluate(model, [])


# --- the figure -------------------------------------------------------------------


class _Handle:
    def __init__(self):
        self.updates = 0

    def update(self, obj):
        self.updates += 1


def _record_display(monkeypatch):
    import IPython.display

    import attnbook.train as train_module

    # What a notebook's setup passes in (attnbook.notebook.setup); restored after the test.
    monkeypatch.setattr(train_module, "_loss_figure", notebook_module.LossFigure.for_training)

    calls = []

    def display(obj, display_id=None):
        calls.append((obj, display_id))
        if display_id:
            calls[-1] = (obj, _Handle())
            return calls[-1][1]

    monkeypatch.setattr(IPython.display, "display", display)
    return calls


def test_not_live_leaves_exactly_one_figure(monkeypatch):
    from matplotlib.figure import Figure

    calls = _record_display(monkeypatch)
    monkeypatch.setattr(notebook_module, "_watched_interactively", lambda: False)  # run by nbclient or nbval
    train(_model(), TRAIN, VALID, epochs=2, plot=True, verbose=False)
    assert len(calls) == 1 and isinstance(calls[0][0], Figure) and calls[0][1] is None
    ax = calls[0][0].axes[0]
    assert [line.get_label() for line in ax.lines] == ["training batches", "training (epoch mean)", "validation"]


def test_live_updates_one_display_in_place(monkeypatch):
    calls = _record_display(monkeypatch)
    monkeypatch.setattr(notebook_module, "_watched_interactively", lambda: True)  # a person runs the notebook
    train(_model(), TRAIN, VALID, epochs=2, plot=True, verbose=False)
    assert len(calls) == 1, "one display, then updates of that same display"
    assert calls[0][1].updates >= 3  # each epoch, and the final figure


def test_outside_a_notebook_nothing_is_displayed(monkeypatch):
    calls = _record_display(monkeypatch)
    train(_model(), TRAIN, epochs=1, verbose=False)  # plot defaults to "in a notebook"
    assert calls == []
    assert notebook_module._watched_interactively() is False


def test_the_library_draws_only_the_figure_a_notebook_passes_in(monkeypatch):
    import ast

    import attnbook.train as train_module

    source = ast.parse(Path(train_module.__file__).read_text())
    imported = [n.module or "" for n in ast.walk(source) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(source) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if "notebook" in m], "the training loop imports nothing of the notebooks"
    # nor of the command line, whose recipe (attnbook.translate.recipe) may change without a chapter's output changing
    assert not [m for m in imported if "translate" in m], "the training loop imports nothing of the command line"
    monkeypatch.setattr(train_module, "_loss_figure", None)
    with pytest.raises(RuntimeError, match="attnbook.notebook.setup"):
        train(_model(), TRAIN, epochs=1, plot=True, verbose=False)
    train(_model(), TRAIN, epochs=1, verbose=False)  # plot by default: nothing passed in, nothing drawn
    with pytest.raises(TypeError, match="callable"):
        train_module.use_loss_figure("LossFigure")
    threads = torch.get_num_threads()
    notebook_module.setup(threads=threads, figures=False)
    assert train_module._loss_figure is None
    monkeypatch.setattr(notebook_module, "_figure_defaults", lambda: None)  # leave matplotlib's settings alone
    notebook_module.setup(threads=threads)
    assert train_module._loss_figure == notebook_module.LossFigure.for_training


def test_history_plot_draws_on_given_axes():
    from matplotlib.figure import Figure

    history = History()
    ax = Figure().add_subplot()
    assert history.plot(ax) is ax and not ax.lines  # empty history, empty plot
    history = train(_model(), TRAIN, VALID, epochs=1, plot=False, verbose=False)
    assert len(history.plot(ax).lines) == 3


# --- checkpoints ------------------------------------------------------------------


def test_checkpoint_round_trip(tmp_path):
    model = _model()
    train(model, TRAIN[:2], epochs=1, plot=False, verbose=False)
    path = save_checkpoint(tmp_path / "sub" / "model.pt", model, epochs=1, note="toy")
    raw = torch.load(path, weights_only=True)  # a plain, safe file
    assert raw["config"]["attention"] is True and raw["model_class"] == "Seq2Seq"
    fresh = _model()
    fresh.load_state_dict({k: torch.zeros_like(v) for k, v in fresh.state_dict().items()})
    extra = load_checkpoint(path, fresh)
    assert extra == {"epochs": 1, "note": "toy"}
    batch = VALID[0]
    assert torch.equal(
        model(batch.src, batch.src_padding_mask, batch.tgt_in), fresh(batch.src, batch.src_padding_mask, batch.tgt_in)
    )
    rebuilt = Seq2Seq(Seq2SeqConfig(**read_checkpoint(path)["config"]))
    load_checkpoint(path, rebuilt)


def test_checkpoint_from_another_configuration_is_refused(tmp_path):
    path = save_checkpoint(tmp_path / "model.pt", _model(hidden=24))
    with pytest.raises(CheckpointMismatch, match="hidden_size: checkpoint 24, model 16"):
        load_checkpoint(path, _model(hidden=16))
    with pytest.raises(CheckpointMismatch, match="attention: checkpoint True, model False"):
        load_checkpoint(path, _model(attention=False, hidden=24))
    with pytest.raises(CheckpointMismatch, match="holds a Seq2Seq, not a Linear"):
        load_checkpoint(path, torch.nn.Linear(2, 2))


def test_checkpoint_whose_weights_do_not_fit_is_refused(tmp_path):
    model = _model()
    path = save_checkpoint(tmp_path / "model.pt", model)
    payload = torch.load(path, weights_only=True)
    payload["state_dict"]["decoder.output.bias"] = torch.zeros(3)
    torch.save(payload, path)
    with pytest.raises(CheckpointMismatch, match="the weights do not fit"):
        load_checkpoint(path, _model())


class _Sneaky:
    """Any pickled object: weights_only loading refuses to build it."""


def test_files_that_are_not_checkpoints(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        read_checkpoint(tmp_path / "missing.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(CheckpointMismatch, match="not an attnbook checkpoint"):
        read_checkpoint(tmp_path / "other.pt")
    (tmp_path / "pickle.pt").write_bytes(pickle.dumps(_Sneaky(), protocol=2))
    with pytest.raises(CheckpointMismatch, match="not a readable checkpoint"):
        read_checkpoint(tmp_path / "pickle.pt")
    with pytest.raises(TypeError, match="no dataclass `config`"):
        save_checkpoint(tmp_path / "x.pt", torch.nn.Linear(2, 2))


@pytest.mark.slow
def test_a_notebook_run_by_nbclient_stores_one_clean_figure(tmp_path):
    """Executed as `make execute` and nbval do (stdin off), training leaves one figure and no live updates."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    tests = str(Path(__file__).parent)
    nb = new_notebook(
        cells=[
            new_code_cell(
                "import sys, torch\n"
                f"sys.path.insert(0, {tests!r})\n"
                "from attnbook.notebook import setup\n"
                "setup(threads=1)\n"
                "from attnbook.rnn import Seq2Seq, Seq2SeqConfig\n"
                "from attnbook.train import train\n"
                "from attnbook.notebook import _watched_interactively\n"
                "from toy_seq2seq import batches_of, reversal_pairs\n"
                "pairs = reversal_pairs(64)\n"
                "model = Seq2Seq(Seq2SeqConfig(12, 12, embed_size=8, hidden_size=8))\n"
                "print('live:', _watched_interactively())\n"
                "history = train(model, batches_of(pairs[:48]), batches_of(pairs[48:]), epochs=3)"
            )
        ]
    )
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    kinds = [o.output_type for o in outputs]
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"], outputs
    assert kinds.count("display_data") == 1, kinds
    figure = next(o for o in outputs if o.output_type == "display_data")
    assert "image/png" in figure.data and "display_id" not in figure.get("transient", {})
    text = "".join(o.text for o in outputs if o.output_type == "stream")
    assert text.startswith("live: False\nepoch  1/3: train loss")


@pytest.mark.slow
def test_a_person_running_the_notebook_sees_the_curve_update_live(tmp_path):
    """A front end that accepts input() (JupyterLab, Colab) gets one display updated in place."""
    from jupyter_client.manager import start_new_kernel

    tests = str(Path(__file__).parent)
    code = (
        "import sys\n"
        f"sys.path.insert(0, {tests!r})\n"
        "from attnbook.notebook import setup\n"
        "setup(threads=1)\n"
        "from attnbook.rnn import Seq2Seq, Seq2SeqConfig\n"
        "from attnbook.train import train\n"
        "from toy_seq2seq import batches_of, reversal_pairs\n"
        "pairs = reversal_pairs(64)\n"
        "model = Seq2Seq(Seq2SeqConfig(12, 12, embed_size=8, hidden_size=8))\n"
        "history = train(model, batches_of(pairs[:48]), batches_of(pairs[48:]), epochs=3, verbose=False)"
    )
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    messages = []
    try:
        reply = kc.execute_interactive(code, allow_stdin=True, timeout=120, output_hook=messages.append)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert reply["content"]["status"] == "ok"
    kinds = [m["msg_type"] for m in messages if m["msg_type"] not in {"status", "execute_input"}]
    assert kinds.count("display_data") == 1 and kinds.count("update_display_data") >= 3, kinds
    first = next(m for m in messages if m["msg_type"] == "display_data")
    ids = {m["content"]["transient"]["display_id"] for m in messages if m["msg_type"] == "update_display_data"}
    assert ids == {first["content"]["transient"]["display_id"]}


class _EpochLoader:
    """Like attnbook.data.make_batches: each pass advances an epoch counter, set_epoch jumps."""

    def __init__(self):
        self.batch_sampler = self
        self.epoch, self.seen = 0, []

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        self.seen.append(self.epoch)
        order = TRAIN[self.epoch % 2 :: 2]
        self.epoch += 1
        return iter(order)


def test_a_loader_with_set_epoch_starts_each_run_at_epoch_zero():
    loader = _EpochLoader()
    list(loader), list(loader)  # read twice before training, e.g. to show a batch
    first = train(_model(), loader, epochs=2, plot=False, verbose=False)
    second = train(_model(), loader, epochs=2, plot=False, verbose=False)
    assert loader.seen == [0, 1, 0, 1, 0, 1]
    assert [e.train_loss for e in first.epochs] == [e.train_loss for e in second.epochs]
