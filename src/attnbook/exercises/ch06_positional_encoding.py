"""Checkers for chapter 6, *Positional encoding* (``notebooks/06_positional_encoding.ipynb``)."""

from __future__ import annotations

import math

import torch

from . import Case, Checker, Mistake

__all__ = ["check_sinusoid_table_by_hand", "check_rotation_by_hand", "check_encoding_dot", "check_add_positions"]


def _freqs(d, base=10000.0):
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


# --- Exercise: the sinusoidal table --------------------------------------------------------


def _sinusoid_table(length, d):
    angles = torch.arange(length, dtype=torch.float64)[:, None] * _freqs(d)
    table = torch.zeros(length, d, dtype=torch.float64)
    table[:, 0::2] = angles.sin()
    table[:, 1::2] = angles.cos()
    return table.float()


def _table_halves(length, d):
    angles = torch.arange(length, dtype=torch.float64)[:, None] * _freqs(d)
    return torch.cat([angles.sin(), angles.cos()], dim=1).float()


def _table_exponent_i(length, d):
    angles = torch.arange(length, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / d)
    return torch.stack([angles.sin(), angles.cos()], -1).reshape(length, d).float()


def _table_swapped(length, d):
    angles = torch.arange(length, dtype=torch.float64)[:, None] * _freqs(d)
    return torch.stack([angles.cos(), angles.sin()], -1).reshape(length, d).float()


check_sinusoid_table_by_hand = Checker(
    "sinusoid_table_by_hand",
    reference=_sinusoid_table,
    cases=[Case("4 positions, d=4", (4, 4)), Case("10 positions, d=8", (10, 8)), Case("50 positions, d=16", (50, 16))],
    mistakes=[
        Mistake(
            "sines and cosines in halves",
            "the pair of one frequency sits side by side: sin in column 2i, cos in column 2i + 1 (not all sines, then all cosines).",
            _table_halves,
        ),
        Mistake(
            "exponent i / d",
            "the frequency of pair i is 10000 ** (-2i / d): the exponent counts columns 0, 2, 4, ..., not pairs 0, 1, 2.",
            _table_exponent_i,
        ),
        Mistake("sine and cosine swapped", "even columns hold sin(ω p), odd columns cos(ω p).", _table_swapped),
    ],
)


# --- Exercise: the rotation for an offset ------------------------------------------------------


def _offset_rotation(k, d):
    m = torch.zeros(d, d, dtype=torch.float64)
    for i, w in enumerate(_freqs(d)):
        c, s = math.cos(w * k), math.sin(w * k)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    return m


def _rotation_wrong_way(k, d):
    return _offset_rotation(k, d).T.contiguous()


def _rotation_no_offset(k, d):
    return _offset_rotation(1, d)


def _rotation_one_angle(k, d):
    m = torch.zeros(d, d, dtype=torch.float64)
    c, s = math.cos(k), math.sin(k)
    for i in range(d // 2):
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    return m


check_rotation_by_hand = Checker(
    "rotation_by_hand",
    reference=_offset_rotation,
    cases=[Case("offset 2, d=4", (2, 4)), Case("offset 5, d=8", (5, 8)), Case("offset -3, d=6", (-3, 6))],
    mistakes=[
        Mistake(
            "rotating the wrong way",
            "sin(a + b) = sin a cos b + cos a sin b: the sine row of the block is [cos ωk, sin ωk] and the "
            "cosine row is [-sin ωk, cos ωk]; the transposed block moves p to p - k.",
            _rotation_wrong_way,
        ),
        Mistake("the offset left out", "the angle of pair i is ω_i times the offset k, not ω_i alone.", _rotation_no_offset),
        Mistake(
            "one angle for every pair",
            "each pair turns by its own angle ω_i k, with ω_i = 10000 ** (-2i / d).",
            _rotation_one_angle,
        ),
    ],
    atol=1e-6,
)


# --- Exercise: the dot product of two encodings ------------------------------------------------


def _encoding_dot(offset, d):
    return float(torch.cos(_freqs(d) * offset).sum())


def _dot_sines(offset, d):
    return float(torch.sin(_freqs(d) * offset).sum())


def _dot_angles(offset, d):
    return float((_freqs(d) * offset).sum())


check_encoding_dot = Checker(
    "encoding_dot",
    reference=_encoding_dot,
    cases=[Case("offset 3, d=8", (3, 8)), Case("offset 0, d=16: the squared length", (0, 16)), Case("offset 40, d=64", (40, 64))],
    mistakes=[
        Mistake(
            "sines instead of cosines",
            "sin(ωp) sin(ω(p+k)) + cos(ωp) cos(ω(p+k)) = cos(ωk): each pair contributes a cosine.",
            _dot_sines,
        ),
        Mistake("the angles added up", "each pair contributes cos(ω_i k), not the angle ω_i k itself.", _dot_angles),
    ],
)


# --- Exercise: add the encodings from a start position --------------------------------------------


def _add_positions(x, table, start=0):
    return x + table[start : start + x.shape[1]]


def _add_from_zero(x, table, start=0):
    return x + table[: x.shape[1]]


def _add_one_late(x, table, start=0):
    return x + table[start + 1 : start + 1 + x.shape[1]]


_tab = torch.arange(20.0)[:, None] * torch.tensor([1.0, -1.0, 0.5, 2.0])
_x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(6))

check_add_positions = Checker(
    "add_positions",
    reference=_add_positions,
    cases=[
        Case("3 tokens from position 0", (_x, _tab)),
        Case("3 tokens from position 5", (_x, _tab), {"start": 5}),
        Case("one token at position 12 (decoding step by step)", (_x[:, :1], _tab), {"start": 12}),
    ],
    mistakes=[
        Mistake("one position late", "the first token is at position start, so it gets row table[start].", _add_one_late),
        Mistake(
            "always from position 0",
            "when decoding one token at a time, the token is at position start, not 0: slice table[start : start + T].",
            _add_from_zero,
        ),
    ],
)
