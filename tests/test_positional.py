"""Positional encodings: the sinusoidal table, the rotation for an offset, the modules and their length rules."""

from __future__ import annotations

import math

import pytest
import torch

from attnbook.positional import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    rotation_for_offset,
    sinusoid_frequencies,
    sinusoidal_table,
)


def test_table_follows_the_formula():
    d = 8
    table = sinusoidal_table(50, d, dtype=torch.float64)
    assert table.shape == (50, d)
    for p in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = p / 10000 ** (2 * i / d)
            assert math.isclose(table[p, 2 * i].item(), math.sin(angle), abs_tol=1e-12)
            assert math.isclose(table[p, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-12)
    assert torch.all(table[0, 0::2] == 0) and torch.all(table[0, 1::2] == 1)


def test_table_equals_d2l():
    from d2l import torch as d2l

    theirs = d2l.PositionalEncoding(32, 0.0, max_len=200).P[0]  # float32, computed in float32
    # float32 angles near 200 radians are uncertain by about 2e-5 (one unit in the last place), and so their sines
    torch.testing.assert_close(sinusoidal_table(200, 32), theirs, rtol=0, atol=1e-4)


def test_frequencies_run_from_one_to_about_one_over_base():
    w = sinusoid_frequencies(64)
    assert w.shape == (32,) and w[0] == 1.0 and torch.all(w[1:] < w[:-1])
    assert math.isclose(w[-1].item(), 10000 ** (-62 / 64))


@pytest.mark.parametrize("offset", [1, 3, 17, -5, 100])
def test_rotation_maps_every_position_to_position_plus_offset(offset):
    d = 16
    table = sinusoidal_table(400, d, dtype=torch.float64)
    m = rotation_for_offset(offset, d, dtype=torch.float64)
    positions = torch.arange(max(0, -offset), 400 - max(0, offset))
    moved = table[positions] @ m.T  # the same matrix for every p
    torch.testing.assert_close(moved, table[positions + offset], rtol=0, atol=1e-10)


def test_rotation_is_orthogonal_block_diagonal_and_composes():
    d = 12
    m = rotation_for_offset(4, d, dtype=torch.float64)
    torch.testing.assert_close(m @ m.T, torch.eye(d, dtype=torch.float64), rtol=0, atol=1e-12)
    off_blocks = m.clone()
    for i in range(0, d, 2):
        off_blocks[i : i + 2, i : i + 2] = 0
    assert torch.all(off_blocks == 0)
    torch.testing.assert_close(
        rotation_for_offset(3, d, dtype=torch.float64) @ rotation_for_offset(5, d, dtype=torch.float64),
        rotation_for_offset(8, d, dtype=torch.float64),
        rtol=0,
        atol=1e-12,
    )
    torch.testing.assert_close(rotation_for_offset(0, d), torch.eye(d))


def test_dot_product_depends_only_on_the_offset():
    d = 32
    table = sinusoidal_table(300, d, dtype=torch.float64)
    w = sinusoid_frequencies(d)
    for k in (0, 1, 10, 50):
        dots = (table[: 300 - k] * table[k:]).sum(-1)
        torch.testing.assert_close(dots, torch.cos(w * k).sum().expand_as(dots), rtol=0, atol=1e-10)


def test_sinusoidal_module_adds_the_table_from_start():
    pe = SinusoidalPositionalEncoding(16, max_len=32)
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(pe(x), x + sinusoidal_table(5, 16))
    torch.testing.assert_close(pe(x, start=7), x + sinusoidal_table(12, 16)[7:])
    assert "table" not in pe.state_dict()  # computed, not saved
    assert pe.double()(x.double()).dtype == torch.float64


def test_sinusoidal_table_is_computed_once_and_extended_by_the_rule():
    pe = SinusoidalPositionalEncoding(8, max_len=16)
    table = pe.table
    pe(torch.zeros(1, 16, 8))
    assert pe.table is table  # within the table: nothing recomputed
    out = pe(torch.zeros(1, 20, 8), start=3)  # needs positions up to 22: grows to 32
    assert pe.max_len == 32
    torch.testing.assert_close(out[0], sinusoidal_table(23, 8)[3:])
    strict = SinusoidalPositionalEncoding(8, max_len=16, extend=False)
    with pytest.raises(ValueError, match=r"positions up to 16 were asked for, but the table holds positions 0..15"):
        strict(torch.zeros(1, 17, 8))
    with pytest.raises(ValueError, match=r"positions up to 17 .* max_len >= 18"):
        strict(torch.zeros(1, 8, 8), start=10)


def test_learned_module_adds_a_trained_vector_per_position_and_cannot_extend():
    pe = LearnedPositionalEncoding(4, max_len=10)
    x = torch.randn(3, 6, 4)
    torch.testing.assert_close(pe(x), x + pe.embedding.weight[:6])
    torch.testing.assert_close(pe(x[:, :2], start=8), x[:, :2] + pe.embedding.weight[8:10])
    pe(x).sum().backward()
    assert torch.all(pe.embedding.weight.grad[:6] != 0) and torch.all(pe.embedding.weight.grad[6:] == 0)
    with pytest.raises(ValueError, match=r"only has vectors for positions 0..9; a learned table cannot be extended"):
        pe(torch.randn(1, 11, 4))


def test_bad_input_gets_clear_errors():
    with pytest.raises(ValueError, match="d_model must be an even integer"):
        sinusoidal_table(4, 7)
    with pytest.raises(ValueError, match="base must be > 1"):
        sinusoid_frequencies(8, base=1.0)
    with pytest.raises(ValueError, match="length must be >= 0"):
        sinusoidal_table(-1, 8)
    pe = SinusoidalPositionalEncoding(8, max_len=4)
    with pytest.raises(ValueError, match=r"the batch has width 6, but the encoding has d_model=8"):
        pe(torch.zeros(1, 2, 6))
    with pytest.raises(ValueError, match=r"expected a batch of shape \(B, T, d_model\)"):
        pe(torch.zeros(2, 8))
    with pytest.raises(ValueError, match="start .* must be an integer >= 0"):
        pe(torch.zeros(1, 2, 8), start=-1)
    with pytest.raises(ValueError, match="max_len must be >= 1"):
        SinusoidalPositionalEncoding(8, max_len=0)
