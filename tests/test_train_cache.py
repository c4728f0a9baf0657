"""Remembered training runs (attnbook.train_cache): read back exactly as made, and only for the same run."""

from __future__ import annotations

import os
import re

import pytest
import torch

from attnbook import train_cache
from attnbook.data import load_corpus
from attnbook.rnn import Seq2Seq, Seq2SeqConfig
from attnbook.train import _batches_of_epoch, paper_optimizer, train


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(n_pairs=240, seed=0, max_len=10)


@pytest.fixture
def float64_one_thread():
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)
    yield
    torch.set_default_dtype(dtype)
    torch.set_num_threads(threads)


def _model(corpus, hidden=24):
    torch.manual_seed(0)
    config = Seq2SeqConfig(len(corpus.src_vocab), len(corpus.tgt_vocab), embed_size=12, hidden_size=hidden)
    return Seq2Seq(config)


def _run(corpus, epochs, capsys, model=None, **options):
    model = model or _model(corpus)
    history = train(
        model,
        corpus.batches("train", batch_size=32, seed=0),  # a loader that reshuffles every epoch
        corpus.batches("valid", batch_size=64),
        epochs=epochs,
        lr=options.pop("lr", 5e-3),
        plot=False,
        **options,
    )
    printed = capsys.readouterr().out
    return model, history, torch.get_rng_state(), re.sub(r"\(\d+\.\d s\)", "(DURATION)", printed)


def test_a_shorter_run_with_the_same_start_is_read_back_as_it_would_have_trained(
    corpus, capsys, tmp_path, monkeypatch, float64_one_thread
):
    made, made_history, made_rng, made_printed = _run(corpus, 3, capsys)  # no folder named: nothing remembered
    monkeypatch.setenv(train_cache.ENV, str(tmp_path))
    _run(corpus, 5, capsys)  # remembers each of its five epochs
    assert len(list(tmp_path.glob("*/epoch-*.pt"))) == 5
    read, read_history, read_rng, read_printed = _run(corpus, 3, capsys)
    assert len(list(tmp_path.glob("*/epoch-*.pt"))) == 5, "a run read back writes nothing"
    for name, value in made.state_dict().items():
        # exact: the same training in the same process, made once here and once by the run of five epochs
        assert torch.equal(read.state_dict()[name], value), name
    assert torch.equal(read_rng, made_rng)  # exact: the random state the next cell starts from
    assert read_printed == made_printed and "epoch  3/3" in read_printed
    keep = ("epoch", "train_loss", "valid_loss", "tokens")
    assert [[getattr(e, k) for k in keep] for e in read_history.epochs] == [
        [getattr(e, k) for k in keep] for e in made_history.epochs
    ]
    assert read_history.steps == made_history.steps and read_history.stopped_by == made_history.stopped_by
    assert not read.training  # as train leaves every model


def test_without_the_variable_nothing_is_read_or_written(corpus, capsys, tmp_path, monkeypatch, float64_one_thread):
    monkeypatch.delenv(train_cache.ENV, raising=False)
    assert train_cache.remembered_run(_model(corpus), [], None, 1, {}, _batches_of_epoch) is None


def test_a_run_the_loop_cannot_see_whole_is_never_remembered(corpus, capsys, tmp_path, monkeypatch, float64_one_thread):
    monkeypatch.setenv(train_cache.ENV, str(tmp_path))
    model = _model(corpus)
    optimizer, scheduler = paper_optimizer(model, d_model=24, warmup=4)
    _run(corpus, 1, capsys, model=model, optimizer=optimizer)
    _run(corpus, 1, capsys, scheduler=torch.optim.lr_scheduler.StepLR(optimizer, 1))
    _run(corpus, 1, capsys, on_step=lambda step: None)
    batches = list(corpus.batches("train", batch_size=32, seed=0))
    train(_model(corpus), lambda epoch: batches, epochs=1, plot=False, verbose=False)  # a function of the epoch
    train(_model(corpus), iter(batches), epochs=1, plot=False, verbose=False)  # read once only
    own_order = torch.utils.data.DataLoader(batches, batch_size=None, shuffle=True, generator=torch.Generator())
    train(_model(corpus), own_order, epochs=1, plot=False, verbose=False)  # reading it ahead would move its generator
    assert not list(tmp_path.iterdir())


def _key(corpus, model=None, settings=None, batches=None, epochs=2):
    run = train_cache.remembered_run(
        model or _model(corpus),
        batches or corpus.batches("train", batch_size=32, seed=0),
        corpus.batches("valid", batch_size=64),
        epochs,
        settings or {"lr": 5e-3},
        _batches_of_epoch,
    )
    return run.keys


def test_the_key_changes_with_everything_the_run_depends_on(corpus, tmp_path, monkeypatch, float64_one_thread):
    monkeypatch.setenv(train_cache.ENV, str(tmp_path))
    model = _model(corpus)  # seeds the generator: the state below is the one after it
    rng = torch.get_rng_state()
    base = _key(corpus, model=model)
    # exact: reading the loaders for the key draws from PyTorch's generator, and the state is put back
    assert torch.equal(torch.get_rng_state(), rng), "the key must not move the random state the run starts from"
    assert _key(corpus) == base and _key(corpus, epochs=3)[:2] == base  # a longer run: the same first epochs
    other_weights = _model(corpus)
    with torch.no_grad():
        next(other_weights.parameters())[0, 0] += 1.0
    changed = {
        "the starting weights": _key(corpus, model=other_weights),
        "the model": _key(corpus, model=_model(corpus, hidden=20)),
        "a setting of the loop": _key(corpus, settings={"lr": 1e-3}),
        "the batches": _key(corpus, batches=corpus.batches("train", batch_size=32, seed=1)),
    }

    class OtherForward(Seq2Seq):
        def forward(self, src, src_padding_mask, tgt_in):
            return super().forward(src, src_padding_mask, tgt_in) * 2

    # the same name, module, structure and weights: only what forward computes tells them apart
    OtherForward.__name__, OtherForward.__qualname__, OtherForward.__module__ = "Seq2Seq", "Seq2Seq", Seq2Seq.__module__
    torch.manual_seed(0)
    other_code = OtherForward(_model(corpus).config)
    other_code.load_state_dict(model.state_dict())
    changed["the code of forward"] = _key(corpus, model=other_code)
    torch.set_num_threads(2)
    changed["the threads"] = _key(corpus)
    torch.set_num_threads(1)
    with monkeypatch.context() as patched:  # another path than the one this run was given (make test may set one)
        other = "avx2" if os.environ.get("ATEN_CPU_CAPABILITY") == "default" else "default"
        patched.setenv("ATEN_CPU_CAPABILITY", other)
        changed["the CPU kernel path"] = _key(corpus)
    torch.set_default_dtype(torch.float32)
    changed["the default dtype"] = _key(corpus, model=_model(corpus))
    for what, keys in changed.items():
        assert keys[0] != base[0], f"a run with other {what} would be read back as this one"
