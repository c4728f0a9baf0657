"""The command line's recipe: its pieces, and the recipe as the passes allow.

The pieces (:mod:`attnbook.translate.recipe`) are the chapters' loss, Adam and
schedule made fast, so each is checked against the chapters' own
(:mod:`attnbook.train`); the schedule that ends with the budget and the shorter
warm-up are the command line's alone.

From ``FEW_PASSES_FROM`` up to ``FEW_PASSES`` passes over the training pairs (a
slow processor, a short budget) the settings the command line left to the
defaults follow ``FEW_PASSES_RECIPE``; with more, or fewer, the defaults stay. The speed is injected
here (a fake clock for the probe, a fixed rate for the command line), so no
test waits for a real budget.
"""

from __future__ import annotations

import json

import pytest
import torch
from test_translate_cli import run, write_anki

from attnbook.checks import values_unchecked
from attnbook.data import BucketBatchSampler, PairDataset, generate_pairs
from attnbook.rnn import Seq2Seq, Seq2SeqConfig
from attnbook.train import NoamSchedule, evaluate, noam_lr, paper_optimizer, sequence_loss, smoothed_targets, train
from attnbook.translate import cmd_train
from attnbook.translate.budget import PROBE_STEPS, SKIP_STEPS
from attnbook.translate.recipe import (
    SCHEDULES,
    LinearDecaySchedule,
    fused_paper_optimizer,
    fused_sequence_loss,
    shorten_warmup,
    teacher_forced_logits,
)
from attnbook.translate.settings import (
    DECAYS,
    FEW_PASSES,
    FEW_PASSES_FROM,
    FEW_PASSES_RECIPE,
    RunSettings,
    few_passes_recipe,
)
from toy_seq2seq import batches_of, reversal_pairs

# --- The recipe's pieces (attnbook.translate.recipe): the chapters' loss, optimizer and schedule, made fast ----------

PAIRS = reversal_pairs(256, vocab_size=10, max_len=6)
TRAIN, VALID = batches_of(PAIRS[:192], 32), batches_of(PAIRS[192:], 64)


def _model(**kw) -> Seq2Seq:
    torch.manual_seed(0)
    return Seq2Seq(Seq2SeqConfig(10, 10, embed_size=12, hidden_size=24, attention=True, **kw))


def test_shortening_the_warm_up_keeps_the_peak_and_applies_to_the_coming_step():
    w = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.Adam([w], lr=1.0)
    sched = NoamSchedule(opt, d_model=16, warmup=400, factor=0.5)
    peak = noam_lr(400, 16, 400, 0.5)
    for _ in range(3):  # steps 1, 2, 3 on the long warm-up
        w.grad = torch.ones(3)
        opt.step()
        sched.step()
    shorten_warmup(sched, 10)
    seen = []
    for _ in range(20):  # steps 4 ... 23 on the short one
        seen.append(opt.param_groups[0]["lr"])
        w.grad = torch.ones(3)
        opt.step()
        sched.step()
    expected = [peak * min(s / 10, (10 / s) ** 0.5) for s in range(4, 24)]
    assert seen == pytest.approx(expected, rel=1e-12) and max(seen) == pytest.approx(peak, rel=1e-12)
    for bad in (0, 401, 2.5, True):
        long = NoamSchedule(torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))]), d_model=16, warmup=400)
        with pytest.raises(ValueError, match=r"warmup must be an int in \[1, 400\]"):
            shorten_warmup(long, bad)


def test_linear_decay_warms_up_as_the_paper_then_falls_to_zero_with_the_budget():
    w = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.Adam([w], lr=123.0)
    sched = LinearDecaySchedule(opt, d_model=16, warmup=5, factor=2.0)
    peak = noam_lr(5, 16, 5, 2.0)
    seen = []
    for step in range(1, 31):  # a budget of 30 steps, spent evenly
        seen.append(opt.param_groups[0]["lr"])
        w.grad = torch.ones(3)
        opt.step()
        sched.step()
        sched.set_spent(step / 30)
    spent_before = [(s - 1) / 30 for s in range(1, 31)]
    expected = [noam_lr(min(s, 5), 16, 5, 2.0) * (1 - f) for s, f in zip(range(1, 31), spent_before)]
    assert seen == pytest.approx(expected, rel=1e-12)
    assert seen[:5] == pytest.approx([peak * s / 5 * (1 - f) for s, f in zip(range(1, 6), spent_before)])
    assert all(a > b for a, b in zip(seen[4:], seen[5:])) and sched.get_last_lr() == [0.0]
    # the share spent travels with the step in the state dict, and a shortened warm-up keeps the peak
    resumed = LinearDecaySchedule(torch.optim.Adam([torch.nn.Parameter(torch.zeros(3))]), d_model=16, warmup=5)
    resumed.load_state_dict(sched.state_dict())
    assert (resumed.spent, resumed.last_epoch, resumed.factor) == (1.0, 30, 2.0)
    w = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([w])
    fresh = LinearDecaySchedule(opt, d_model=16, warmup=400)
    fresh.set_spent(0.25)
    shorten_warmup(fresh, 10)
    for _ in range(9):
        w.grad = torch.ones(1)
        opt.step()
        fresh.step()
    assert fresh.get_last_lr() == pytest.approx([noam_lr(400, 16, 400) * 0.75], rel=1e-12)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="share of the budget spent must be in"):
            fresh.set_spent(bad)
    _, linear = fused_paper_optimizer(torch.nn.Linear(4, 4), d_model=8, decay="linear")
    assert isinstance(linear, LinearDecaySchedule)
    with pytest.raises(ValueError, match="decay must be one of inverse-sqrt, linear"):
        fused_paper_optimizer(torch.nn.Linear(4, 4), d_model=8, decay="cosine")
    assert tuple(SCHEDULES) == DECAYS  # every --decay has its schedule


@pytest.mark.slow
def test_the_fused_paper_optimizer_takes_the_same_steps_as_the_chapters_loop():
    """PyTorch's one-kernel Adam with the paper's settings: the same updates as the chapters' loop, to rounding."""
    loop_model, fused_model = _model(), _model()  # the same initial weights
    (loop, loop_schedule), (fused, fused_schedule) = (
        paper_optimizer(loop_model, d_model=24, warmup=10),
        fused_paper_optimizer(fused_model, d_model=24, warmup=10),
    )
    assert fused.defaults["fused"] and not loop.defaults["fused"]
    assert {k: fused.defaults[k] for k in ("betas", "eps")} == {k: loop.defaults[k] for k in ("betas", "eps")}
    assert type(fused_schedule) is NoamSchedule
    for model, opt, sched in ((loop_model, loop, loop_schedule), (fused_model, fused, fused_schedule)):
        train(model, TRAIN, epochs=2, optimizer=opt, scheduler=sched, plot=False, verbose=False)
    moved = max((a - b).abs().max().item() for a, b in zip(loop_model.parameters(), _model().parameters()))
    differ = max((a - b).abs().max().item() for a, b in zip(loop_model.parameters(), fused_model.parameters()))
    assert moved > 1e-3 and differ < 1e-5


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("pad_id", [0, 3])
def test_the_fused_loss_has_the_loss_and_the_gradient_of_the_traced_one(smoothing, reduction, pad_id):
    torch.manual_seed(4)
    logits = (3 * torch.randn(4, 6, 11, dtype=torch.float64)).requires_grad_()
    targets = torch.randint(0, 11, (4, 6))
    targets[targets == pad_id] = (pad_id + 1) % 11
    targets[0, 2:], targets[2, 5:] = pad_id, pad_id
    traced = sequence_loss(logits, targets, pad_id, smoothing, reduction)
    fused = fused_sequence_loss(logits, targets, pad_id, smoothing, reduction)
    assert torch.allclose(fused, traced, rtol=1e-12, atol=0)
    upstream = torch.tensor(1.7, dtype=torch.float64)  # a gradient from above scales the one below
    (want,) = torch.autograd.grad(traced, logits, upstream)
    (got,) = torch.autograd.grad(fused, logits, upstream)
    assert torch.allclose(got, want, rtol=1e-10, atol=1e-14)
    assert torch.all(got[targets == pad_id] == 0), "padding positions carry no gradient"
    # against the definition: softmax minus the smoothed target distribution, over the real tokens
    q = smoothed_targets(targets, 11, smoothing, pad_id).double()  # built in float32: its rounding, 1e-7 at most
    expected = (torch.softmax(logits, -1) - q) * (targets != pad_id)[..., None]
    expected = expected / (1 if reduction == "sum" else int((targets != pad_id).sum()))
    assert torch.allclose(got, 1.7 * expected, rtol=0, atol=1e-7)


def test_the_fused_loss_unchecked_and_summed_reads_nothing_back_and_gives_the_same(monkeypatch):
    torch.manual_seed(5)
    logits = torch.randn(3, 4, 9, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(1, 9, (3, 4))
    targets[1, 2:] = 0
    checked = fused_sequence_loss(logits, targets, 0, 0.1, "sum")
    reads = []
    monkeypatch.setattr(torch.Tensor, "item", lambda t: reads.append(t) or 0)
    monkeypatch.setattr(torch.Tensor, "__int__", lambda t: reads.append(t) or 0)
    with values_unchecked():
        unchecked = fused_sequence_loss(logits, targets, 0, 0.1, "sum")
    assert reads == [], "the unchecked sum waited for the values of a tensor"
    monkeypatch.undo()
    torch.testing.assert_close(unchecked, checked, rtol=0, atol=0)  # exact: the same operations on the same inputs
    (a,) = torch.autograd.grad(checked, logits)
    (b,) = torch.autograd.grad(unchecked, logits)
    torch.testing.assert_close(a, b, rtol=0, atol=0)  # exact: the same operations on the same inputs


@pytest.mark.slow
def test_the_fused_loss_trains_as_the_traced_one_and_refuses_what_it_refuses():
    runs = []
    for loss_of in (sequence_loss, fused_sequence_loss):
        model = _model(dropout=0.2).double()
        _steps(
            model,
            TRAIN,
            epochs=2,
            loss_of=lambda logits, targets: loss_of(logits, targets, pad_id=0, label_smoothing=0.1),
        )
        runs.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.allclose(runs[0], runs[1], rtol=0, atol=1e-9)
    logits = torch.randn(2, 3, 5)
    for bad, error, message in (
        (dict(targets=torch.ones(2, 4, dtype=torch.long)), ValueError, "do not match logits"),
        (dict(targets=torch.full((2, 3), 5)), IndexError, "outside the vocabulary of size 5"),
        (dict(targets=torch.ones(2, 3)), TypeError, "integer"),
        (dict(targets=torch.zeros(2, 3, dtype=torch.long)), ValueError, "no real tokens"),
        (dict(targets=torch.ones(2, 3, dtype=torch.long), label_smoothing=1.0), ValueError, "label_smoothing"),
        (dict(targets=torch.ones(2, 3, dtype=torch.long), reduction="none"), ValueError, "reduction"),
    ):
        with pytest.raises(error, match=message):
            fused_sequence_loss(logits, **bad)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_mixed_precision_multiplies_in_bfloat16_and_keeps_the_weights_in_float32(arch):
    from attnbook.transformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    if arch == "transformer":
        model = Transformer(TransformerConfig(10, 10, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0))
    else:
        model = _model()
    products = []  # the dtype of every linear map's output during training
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(lambda m, args, out: products.append(out.dtype) if m.training else None)
    before = evaluate(model, VALID)
    _steps(model, TRAIN, epochs=6, autocast=torch.bfloat16)  # as the command line's loop trains
    assert products and set(products) == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert evaluate(model, VALID) < 0.6 * before  # it learns
    products.clear()
    train(model, TRAIN, epochs=1, plot=False, verbose=False)  # the chapters' loop: float32
    assert set(products) == {torch.float32}


def _steps(model, batches, epochs: int, autocast=None, loss_of=sequence_loss) -> None:
    """Teacher-forced steps with Adam at 0.01 and clipping, in mixed precision with ``autocast``."""
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(epochs):
        for batch in batches:
            loss = loss_of(teacher_forced_logits(model, batch, autocast), batch.tgt_out)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()


# --- The recipe as the passes allow ------------------------------------------------------------------------

SMALL = ["--d-model", "16", "--num-heads", "2", "--num-layers", "1", "--batch-tokens", "160", "--warmup", "20"]
SMALL += ["--min-freq", "1", "--average", "1"]


def test_few_passes_choose_the_few_passes_recipe_and_many_keep_the_defaults():
    assert few_passes_recipe(FEW_PASSES_FROM) == few_passes_recipe(FEW_PASSES - 0.01) == FEW_PASSES_RECIPE
    assert few_passes_recipe(FEW_PASSES) == few_passes_recipe(40.0) == few_passes_recipe(float("inf")) == {}
    # below FEW_PASSES_FROM nearly every step sees new pairs: the defaults stay too
    assert few_passes_recipe(FEW_PASSES_FROM - 0.01) == few_passes_recipe(0.5) == {}
    assert 0 < FEW_PASSES_FROM < FEW_PASSES
    # what the command line gave is never changed
    assert few_passes_recipe(2.0, {"d_ff"}) == {k: v for k, v in FEW_PASSES_RECIPE.items() if k != "d_ff"}
    assert few_passes_recipe(2.0, set(FEW_PASSES_RECIPE)) == {}
    # every setting the recipe changes is one of the run's, and differs from its default
    defaults = RunSettings()
    assert all(getattr(defaults, k) != v for k, v in FEW_PASSES_RECIPE.items())


def test_the_probe_times_the_steps_after_the_untimed_ones_and_leaves_the_random_state():
    # the clock is read twice: when the untimed steps are done, and PROBE_STEPS steps later; whatever the first
    # steps took (here 50 s: a cold start) is not counted
    readings = [50.0, 50.0 + 0.25 * PROBE_STEPS]
    state = torch.get_rng_state()
    assert _probe_under(None, readings) == pytest.approx(0.25)  # every reading taken, and no more (see below)
    assert torch.equal(torch.get_rng_state(), state)  # the run draws the same random numbers as without the probe
    assert SKIP_STEPS > 0


def _probe_under(limit, readings):
    from attnbook.translate.model import model_config
    from attnbook.translate.tokens import RunTokens
    from attnbook.translate.train import probe_seconds_per_step

    settings = RunSettings(d_model=16, num_heads=2, num_layers=1, d_ff=32, batch_tokens=160, tokens="words")
    pairs = generate_pairs(60, seed=3, max_len=8, alignments=False)
    tokens = RunTokens.learn(pairs, settings, "en", "fr")
    run_pairs = tokens.pairs(pairs)
    src_vocab, tgt_vocab = tokens.vocabularies(run_pairs, settings)
    config = model_config(settings, len(src_vocab), len(tgt_vocab))
    clock = iter(readings)
    per_step = probe_seconds_per_step(
        settings, config, run_pairs, src_vocab, tgt_vocab, torch.device("cpu"), clock=lambda: next(clock), limit=limit
    )
    assert next(clock, None) is None  # every reading taken, and no more
    return per_step


def test_a_probe_under_a_short_budget_stops_at_its_limit_with_what_it_has_timed():
    # 2 s a step from the start, a limit of 3 s: the probe stops after its second step, still among the untimed
    # ones, and every step so far is the estimate (clock: the start, then after steps 2 and later)
    assert _probe_under(3.0, [0.0, 4.0]) == pytest.approx(2.0)
    # past the untimed steps (read after each step from the second for the limit, and once more when the timing
    # starts), the steps timed so far: 9 s for the five untimed ones, then 0.5 s a step for two steps
    readings = [0.0] + [1.0, 1.5, 2.0] + [9.0, 9.0] + [9.5, 10.0]
    assert _probe_under(10.0, readings) == pytest.approx(0.5)


def _pace(monkeypatch, passes: float) -> list:
    """Let the probe measure the speed at which 10 minutes allow ``passes`` passes; return the probes' calls (the
    limits they were given: ``cmd_train.probe_seconds_per_step.limits``)."""
    calls, limits = [], []

    def probe(settings, config, pairs, src_vocab, tgt_vocab, device, limit=None):
        calls.append(settings)
        limits.append(limit)
        lengths = PairDataset(pairs, src_vocab, tgt_vocab).lengths()
        steps_per_epoch = len(BucketBatchSampler(lengths, batch_tokens=settings.batch_tokens).batches(0))
        return 600 / (passes * steps_per_epoch)

    probe.limits = limits
    monkeypatch.setattr(cmd_train, "probe_seconds_per_step", probe)
    return calls


def _events(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]


def test_a_slow_processor_gets_the_few_passes_recipe_printed_recorded_and_resumed(tmp_path, capsys, monkeypatch):
    pairs = write_anki(tmp_path / "fra.txt", [(p.src, p.tgt) for p in generate_pairs(120, seed=3, max_len=10)])
    common = ["--pairs", pairs, "--src", "en", "--tgt", "fr", *SMALL]
    passes = (FEW_PASSES_FROM + FEW_PASSES) / 2
    calls = _pace(monkeypatch, passes)
    status, out, err = run(["train", *common, "--out", tmp_path / "slow", "--minutes", 10, "--epochs", 3], capsys)
    assert status == 0, err
    assert len(calls) == 1 and calls[0].d_ff == RunSettings().d_ff  # timed with the default model
    # not a duration: the limit the probe was given, a share of the 10 minutes, passed on and read back
    limits = cmd_train.probe_seconds_per_step.limits
    assert limits == [pytest.approx(600 * cmd_train.PROBE_SHARE)]
    config = json.loads((tmp_path / "slow" / "config.json").read_text())
    recipe = config["recipe"]
    assert recipe["few_passes"] and recipe["changed"] == FEW_PASSES_RECIPE and recipe["kept"] == []
    assert recipe["passes"] == pytest.approx(min(passes, 3))
    # the first lines say it, and the run folder keeps it: the settings, the model, the log's first event
    changed = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in FEW_PASSES_RECIPE.items())
    line = next(x for x in out.splitlines() if "s a step of this model" in x)
    speed = f"at {recipe['seconds_per_step']:.2f} s a step of this model, the budget (10 minutes or 3 epochs) allows"
    assert line.startswith(speed) and f"about {min(passes, 3):.1f} passes over the training pairs" in line
    assert line.endswith(f"{FEW_PASSES_FROM:g} to {FEW_PASSES:g}: the few-passes recipe, {changed}")
    assert out.index(line) < out.index("model: transformer")
    assert {k: config["settings"][k] for k in FEW_PASSES_RECIPE} == FEW_PASSES_RECIPE
    assert config["model"]["d_ff"] == FEW_PASSES_RECIPE["d_ff"]
    (start,) = [e for e in _events(tmp_path / "slow") if e["event"] == "start"]
    assert start["config"]["recipe"] == recipe
    # the probe's seconds count in the budget
    # not a duration: the probe's one measured time, written in two records
    assert start["position"]["seconds"] == pytest.approx(recipe["probe_seconds"]) and recipe["probe_seconds"] > 0

    # --resume goes on with the recipe chosen, without timing anew; a setting against it is refused
    calls.clear()
    status, out, err = run(["train", "--out", tmp_path / "slow", "--resume", "--epochs", 4], capsys)
    assert status == 0 and not calls, err
    again = json.loads((tmp_path / "slow" / "config.json").read_text())
    assert again["settings"] == config["settings"] and again["recipe"] == recipe
    status, out, err = run(["train", "--out", tmp_path / "slow", "--resume", "--epochs", 5, "--d-ff", 1024], capsys)
    assert status == 2 and f"--d-ff 1024 differs from the run being resumed ({FEW_PASSES_RECIPE['d_ff']})" in err


def test_what_the_command_line_gives_wins_over_the_recipe(tmp_path, capsys, monkeypatch):
    pairs = write_anki(tmp_path / "fra.txt", [(p.src, p.tgt) for p in generate_pairs(120, seed=3, max_len=10)])
    common = ["--pairs", pairs, "--src", "en", "--tgt", "fr", *SMALL, "--minutes", 10, "--epochs", 2]
    _pace(monkeypatch, 2.5)
    status, out, err = run(["train", *common, "--out", tmp_path / "given", "--decay", "inverse-sqrt"], capsys)
    assert status == 0, err
    config = json.loads((tmp_path / "given" / "config.json").read_text())
    assert config["settings"]["decay"] == "inverse-sqrt" and config["settings"]["d_ff"] == FEW_PASSES_RECIPE["d_ff"]
    assert config["recipe"]["kept"] == ["decay"] and "kept as given: --decay" in out
    status, out, err = run(["train", *common, "--out", tmp_path / "all", "--decay", "linear", "--d-ff", 64], capsys)
    assert status == 0, err
    config = json.loads((tmp_path / "all" / "config.json").read_text())
    assert config["settings"]["d_ff"] == 64 and config["recipe"]["changed"] == {}
    assert "the few-passes recipe, nothing left to change" in out


@pytest.mark.parametrize("passes", [FEW_PASSES, FEW_PASSES_FROM / 2])
def test_many_or_hardly_one_pass_keep_the_defaults_and_a_budget_without_minutes_is_not_timed(
    passes, tmp_path, capsys, monkeypatch
):
    pairs = write_anki(tmp_path / "fra.txt", [(p.src, p.tgt) for p in generate_pairs(120, seed=3, max_len=10)])
    common = ["--pairs", pairs, "--src", "en", "--tgt", "fr", *SMALL]
    calls = _pace(monkeypatch, passes)
    status, out, err = run(["train", *common, "--out", tmp_path / "run", "--minutes", 10, "--epochs", 4], capsys)
    assert status == 0 and len(calls) == 1, err
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["recipe"]["passes"] == pytest.approx(min(passes, 4))
    assert not config["recipe"]["few_passes"] and config["recipe"]["changed"] == {}
    defaults = RunSettings()
    assert {k: config["settings"][k] for k in FEW_PASSES_RECIPE} == {k: getattr(defaults, k) for k in FEW_PASSES_RECIPE}
    assert f"the default recipe (the few-passes one is for {FEW_PASSES_FROM:g} to {FEW_PASSES:g} passes)" in out
    # --epochs or --steps alone: the passes are known without a clock, and the defaults stay
    calls.clear()
    status, out, err = run(["train", *common, "--out", tmp_path / "steps", "--steps", 2], capsys)
    assert status == 0 and not calls, err
    config = json.loads((tmp_path / "steps" / "config.json").read_text())
    assert "recipe" not in config and config["settings"]["d_ff"] == defaults.d_ff
