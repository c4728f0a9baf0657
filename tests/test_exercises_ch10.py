"""Chapter 10's checkers: each accepts its solution, names every planted mistake, and refuses the packaged answer."""

from __future__ import annotations

import pytest
import torch

from attnbook import decoder_only as D
from attnbook.exercises import ch10_the_decoder_alone as ch10

CHECKERS = [
    ch10.check_decoder_parameters,
    ch10.check_append_rotary_keys,
    ch10.check_target_loss_mask,
    ch10.check_kv_cache_bytes,
]


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.name)
def test_the_solution_passes(checker):
    result = checker.verify()
    assert result, result.message


@pytest.mark.parametrize(
    "checker, mistake",
    [(c, m) for c in CHECKERS for m in c.mistakes],
    ids=[f"{c.name}: {m.name}" for c in CHECKERS for m in c.mistakes],
)
def test_each_planted_mistake_is_refused_and_named(checker, mistake):
    result = checker.verify(mistake.fn)
    assert not result and result.mistake == mistake.name, result.message


def test_a_stub_is_not_attempted_yet():
    assert "not attempted yet" in repr(ch10.check_kv_cache_bytes(lambda *args, **kwargs: None))


def _packaged_parameters(vocab_size, d_model, num_layers, num_heads, num_kv_heads, d_ff, max_len):
    config = D.DecoderOnlyConfig(vocab_size, d_model, num_heads, num_layers, d_ff, max_len, num_kv_heads=num_kv_heads)
    return D.parameter_count(config)


def _packaged_rotary(past_keys, new_keys, base=10000.0):
    return torch.cat([past_keys, D.rotate_pairs(new_keys, past_keys.shape[-2], base)], dim=-2)


def _packaged_cache(num_layers, d_model, num_heads, num_kv_heads, length, batch_size=1, bytes_per_number=2):
    config = D.DecoderOnlyConfig(10, d_model, num_heads, num_layers, num_kv_heads=num_kv_heads)
    return D.cache_numbers(config, length, batch_size) * bytes_per_number


@pytest.mark.parametrize(
    "checker, packaged",
    [
        (ch10.check_decoder_parameters, _packaged_parameters),
        (ch10.check_append_rotary_keys, _packaged_rotary),
        (ch10.check_kv_cache_bytes, _packaged_cache),
        (
            ch10.check_target_loss_mask,
            D.target_prediction_mask,
        ),  # the library's own (chapter 10's last section trains with it)
    ],
    ids=lambda x: getattr(x, "name", getattr(x, "__name__", "")),
)
def test_the_packaged_answer_is_refused(checker, packaged):
    result = checker(packaged)
    assert not result and "attnbook.decoder_only" in result.message, result.message
