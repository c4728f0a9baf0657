"""The recipe as the passes allow: a run with a time budget times a few steps, then chooses how to train.

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

from attnbook.data import BucketBatchSampler, PairDataset, generate_pairs
from attnbook.translate import cmd_train
from attnbook.translate.budget import PROBE_STEPS, SKIP_STEPS
from attnbook.translate.settings import FEW_PASSES, FEW_PASSES_FROM, FEW_PASSES_RECIPE, RunSettings, few_passes_recipe

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
    from attnbook.translate.model import model_config
    from attnbook.translate.tokens import RunTokens
    from attnbook.translate.train import probe_seconds_per_step

    settings = RunSettings(d_model=16, num_heads=2, num_layers=1, d_ff=32, batch_tokens=160, tokens="words")
    pairs = generate_pairs(60, seed=3, max_len=8, alignments=False)
    tokens = RunTokens.learn(pairs, settings, "en", "fr")
    run_pairs = tokens.pairs(pairs)
    src_vocab, tgt_vocab = tokens.vocabularies(run_pairs, settings)
    config = model_config(settings, len(src_vocab), len(tgt_vocab))
    # the clock is read twice: when the untimed steps are done, and PROBE_STEPS steps later; whatever the first
    # steps took (here 50 s: a cold start) is not counted
    readings = iter([50.0, 50.0 + 0.25 * PROBE_STEPS])
    state = torch.get_rng_state()
    per_step = probe_seconds_per_step(
        settings, config, run_pairs, src_vocab, tgt_vocab, torch.device("cpu"), clock=lambda: next(readings)
    )
    assert per_step == pytest.approx(0.25)
    assert torch.equal(torch.get_rng_state(), state)  # the run draws the same random numbers as without the probe
    assert next(readings, None) is None  # both readings taken, and no more
    assert SKIP_STEPS > 0


def _pace(monkeypatch, passes: float) -> list:
    """Let the probe measure the speed at which 10 minutes allow ``passes`` passes; return the probes' calls."""
    calls = []

    def probe(settings, config, pairs, src_vocab, tgt_vocab, device):
        calls.append(settings)
        lengths = PairDataset(pairs, src_vocab, tgt_vocab).lengths()
        steps_per_epoch = len(BucketBatchSampler(lengths, batch_tokens=settings.batch_tokens).batches(0))
        return 600 / (passes * steps_per_epoch)

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
