"""Checkers for chapter 6, *Positional encoding* (``notebooks/06_positional_encoding.ipynb``)."""

from __future__ import annotations

import math

import torch

from ..positional import SinusoidalPositionalEncoding, rotation_for_offset, sinusoid_frequencies, sinusoidal_table
from . import Case, Checker, Mistake
from .measuring import shapes_made
from .wording import Template, say, words

__all__ = [
    "check_sinusoid_table_by_hand",
    "check_rotate_by_position",
    "check_position_from_encoding",
    "check_add_positions_left_padded",
]


def _freqs(d, base=10000.0):
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


# --- Exercise (try first, before the chapter builds it): the sinusoidal table ------------------------------------


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
    angles = torch.arange(length, dtype=torch.float64)[:, None] * 10000.0 ** (
        -torch.arange(d // 2, dtype=torch.float64) / d
    )
    return torch.stack([angles.sin(), angles.cos()], -1).reshape(length, d).float()


def _table_swapped(length, d):
    angles = torch.arange(length, dtype=torch.float64)[:, None] * _freqs(d)
    return torch.stack([angles.cos(), angles.sin()], -1).reshape(length, d).float()


def _table_angles_in_float32(length, d):
    angles = torch.arange(length, dtype=torch.float32)[:, None] * _freqs(d).float()
    table = torch.zeros(length, d)
    table[:, 0::2] = angles.sin()
    table[:, 1::2] = angles.cos()
    return table


def _table_from_library(length, d):
    return sinusoidal_table(length, d, dtype=torch.float32)


def _table_from_module(length, d):
    return SinusoidalPositionalEncoding(d, max_len=length)(torch.zeros(1, length, d, dtype=torch.float32))[0].float()


def _table_from_library_frequencies(length, d):
    angles = torch.arange(length, dtype=torch.float64)[:, None] * sinusoid_frequencies(d)
    return torch.stack([angles.sin(), angles.cos()], -1).reshape(length, d).float()


check_sinusoid_table_by_hand = Checker(
    "sinusoid_table_by_hand",
    reference=_sinusoid_table,
    cases=[
        Case("4 positions, d=4", (4, 4)),
        Case("10 positions, d=8", (10, 8)),
        Case("50 positions, d=16", (50, 16)),
        Case("1000 positions, d=16: angles up to 999 radians, where float32 keeps 4 decimals", (1000, 16)),
    ],
    mistakes=[
        Mistake(
            "sines and cosines in halves",
            "the pair of one frequency sits side by side: sin in column 2i, cos in column 2i + 1 "
            "(not all sines, then all cosines).",
            _table_halves,
        ),
        Mistake(
            "exponent i / d",
            "the frequency of pair i is 10000 ** (-2i / d): "
            "the exponent counts columns 0, 2, 4, ..., not pairs 0, 1, 2.",
            _table_exponent_i,
        ),
        Mistake("sine and cosine swapped", "even columns hold sin(ω p), odd columns cos(ω p).", _table_swapped),
        Mistake(
            "angles in float32",
            "an angle of 999 radians holds only about 4 decimals in float32, so its sine is off by up to 1e-5; compute "
            "positions, frequencies and angles in float64 (dtype=torch.float64) and convert the table at the end.",
            _table_angles_in_float32,
        ),
    ],
    atol=2e-6,  # both tables are rounded to float32 from float64 values: they differ by a float32 step at most
    rtol=0.0,
    forbidden={
        "attnbook.positional.sinusoidal_table": _table_from_library,
        "attnbook.positional.SinusoidalPositionalEncoding": _table_from_module,
        "attnbook.positional.sinusoid_frequencies": _table_from_library_frequencies,
    },
    refuses=("attnbook.positional.*", "d2l.*"),
)


# --- Exercise: turn every vector by its position, pair by pair, without the matrix ---------------------------------


def _rotate_by_position(x, positions):
    angles = positions.to(torch.float64)[:, None] * _freqs(x.shape[-1])  # (T, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    first, second = x[..., 0::2], x[..., 1::2]  # (B, T, d/2): the two features of each pair
    out = torch.empty_like(x)
    out[..., 0::2] = cos * first + sin * second
    out[..., 1::2] = -sin * first + cos * second
    return out


def _rotate_wrong_way(x, positions):
    return _rotate_by_position(x, -positions)


def _rotate_halves(x, positions):
    d = x.shape[-1]
    angles = positions.to(torch.float64)[:, None] * _freqs(d)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    first, second = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([cos * first + sin * second, -sin * first + cos * second], dim=-1)


def _rotate_one_angle(x, positions):
    angles = positions.to(torch.float64)[:, None].expand(-1, x.shape[-1] // 2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    out = torch.empty_like(x)
    out[..., 0::2] = cos * x[..., 0::2] + sin * x[..., 1::2]
    out[..., 1::2] = -sin * x[..., 0::2] + cos * x[..., 1::2]
    return out


def _rotate_with_matrices(x, positions):
    turns = torch.stack([rotation_for_offset(int(p), x.shape[-1], dtype=x.dtype) for p in positions])  # (T, d, d)
    return torch.einsum("tij,btj->bti", turns, x)


_SQUARE = words("a d x d matrix built", "mistake")
_SQUARE_BUILT = Template(
    "the answers are right, but for d = {d} your function built a tensor of shape {shape}: a d x d matrix, the d² "
    "numbers the exercise asks you to do without. Turn each pair (2i, 2i + 1) by its own angle with its sine and "
    "cosine: 2d multiplications instead of d².",
    "requirement",
)


def _no_d_by_d_matrix(fn):
    """The text's requirement: no d x d matrix, whatever builds it (``rotation_for_offset`` is refused by name;
    ``block_diag`` of the 2 x 2 blocks, ``eye``, an einsum into one are not, and are found here by their shape)."""
    B, T, d = 2, 3, 8
    x = torch.randn(B, T, d, generator=torch.Generator().manual_seed(62), dtype=torch.float64)
    square = [shape for shape in shapes_made(fn, (x, torch.arange(T))) if shape.count(d) >= 2]
    if square:
        return (_SQUARE, say(_SQUARE_BUILT, d=d, shape=square[0]))
    return None


_gr = torch.Generator().manual_seed(61)

check_rotate_by_position = Checker(
    "rotate_by_position",
    reference=_rotate_by_position,
    cases=[
        Case(
            "one vector (1, 0, 1, 0) at position 1, d=4",
            (torch.tensor([[[1.0, 0.0, 1.0, 0.0]]], dtype=torch.float64), torch.tensor([1])),
        ),
        Case(
            "B=2, T=3 at positions 0, 1, 2, d=8",
            (torch.randn(2, 3, 8, generator=_gr, dtype=torch.float64), torch.arange(3)),
        ),
        Case(
            "positions 7, 3, 40, 0, 12 (any order), d=16",
            (torch.randn(1, 5, 16, generator=_gr, dtype=torch.float64), torch.tensor([7, 3, 40, 0, 12])),
        ),
    ],
    mistakes=[
        Mistake(
            "rotating the wrong way",
            "the block of pair i is [[cos ωp, sin ωp], [-sin ωp, cos ωp]]: the first feature becomes "
            "cos·first + sin·second, the second -sin·first + cos·second (that is what moves PE(0) to PE(p)).",
            _rotate_wrong_way,
        ),
        Mistake(
            "pairs made of the two halves",
            "in this chapter pair i is features 2i and 2i + 1, side by side (x[..., 0::2] and x[..., 1::2]), "
            "not feature i with feature i + d/2.",
            _rotate_halves,
        ),
        Mistake(
            "one angle for every pair",
            "pair i turns by its own angle ω_i p, with ω_i = 10000 ** (-2i / d); only pair 0 turns by p.",
            _rotate_one_angle,
        ),
    ],
    atol=1e-9,
    forbidden={"attnbook.positional.rotation_for_offset": _rotate_with_matrices},
    refuses=("d2l.*",),
    requirements=[_no_d_by_d_matrix],
)


# --- Exercise: read the position back from an encoding -------------------------------------------------------------


def _position_from_encoding(pe):
    d = pe.shape[-1]
    slowest = _freqs(d)[-1]  # the last pair turns once in 2π / ω positions: no two positions within it look alike
    angle = torch.atan2(pe[:, -2].double(), pe[:, -1].double()) % (2 * math.pi)  # in [0, 2π)
    return torch.round(angle / slowest).long()


def _position_fastest_pair(pe):
    angle = torch.atan2(pe[:, 0].double(), pe[:, 1].double()) % (2 * math.pi)
    return torch.round(angle).long()


def _position_swapped(pe):
    d = pe.shape[-1]
    angle = torch.atan2(pe[:, -1].double(), pe[:, -2].double()) % (2 * math.pi)
    return torch.round(angle / _freqs(d)[-1]).long()


def _position_not_wrapped(pe):
    d = pe.shape[-1]
    angle = torch.atan2(pe[:, -2].double(), pe[:, -1].double())
    return torch.round(angle / _freqs(d)[-1]).long()


def _table_rows(positions, d):
    angles = torch.tensor(positions, dtype=torch.float64)[:, None] * _freqs(d)
    return torch.stack([angles.sin(), angles.cos()], -1).reshape(len(positions), d)


check_position_from_encoding = Checker(
    "position_from_encoding",
    reference=_position_from_encoding,
    cases=[
        Case("positions 0, 1, 2, 3, d=8", (_table_rows([0, 1, 2, 3], 8),)),
        Case("positions 5, 17, 250, 999, d=16", (_table_rows([5, 17, 250, 999], 16),)),
        Case(
            "positions past half a turn of the slowest pair: 12000 and 19000, d=16",
            (_table_rows([12000, 19000, 7], 16),),
        ),
    ],
    mistakes=[
        Mistake(
            "the fastest pair",
            "pair 0 turns once every 2π ≈ 6.3 positions, so its angle tells p only up to a multiple of 2π; "
            "read the slowest pair (the last two columns), which does not come round within the positions asked for.",
            _position_fastest_pair,
        ),
        Mistake(
            "sine and cosine swapped",
            "column 2i holds sin(ωp) and column 2i + 1 cos(ωp): the angle is atan2(sine, cosine), sine first.",
            _position_swapped,
        ),
        Mistake(
            "the angle not wrapped",
            "atan2 returns an angle in (-π, π]; past half a turn it is negative, so bring it into [0, 2π) "
            "(add 2π, or take it % (2 * math.pi)) before dividing by ω.",
            _position_not_wrapped,
        ),
    ],
    refuses=(
        "attnbook.positional.sinusoidal_table",
        "attnbook.positional.SinusoidalPositionalEncoding",
        "d2l.*",
    ),
)


# --- Exercise: positions for a batch padded on the left ------------------------------------------------------------


def _add_positions_left_padded(x, table, lengths):
    B, T, _ = x.shape
    positions = torch.arange(T)[None, :] - (T - lengths)[:, None]  # (B, T): 0 at the first real token
    real = positions >= 0
    rows = table[positions.clamp(min=0)]  # (B, T, d)
    return x + rows * real[..., None]


def _left_from_the_edge(x, table, lengths):
    return x + table[: x.shape[1]]


def _left_padding_gets_row0(x, table, lengths):
    T = x.shape[1]
    positions = (torch.arange(T)[None, :] - (T - lengths)[:, None]).clamp(min=0)
    return x + table[positions]


def _left_one_late(x, table, lengths):
    B, T, _ = x.shape
    positions = torch.arange(T)[None, :] - (T - lengths)[:, None] + 1
    real = positions >= 1
    return x + table[positions.clamp(min=0)] * real[..., None]


_tab6 = (
    torch.arange(12.0, dtype=torch.float64)[:, None] * torch.tensor([1.0, -1.0, 0.5, 2.0], dtype=torch.float64) + 100
)
_x6 = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(62), dtype=torch.float64)


def _left_case(n):
    x = torch.randn(n, 5, 4, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    return Case(f"{n} sentences", (x, _tab6, torch.arange(n) % 6))


def _left_looped(x, table, lengths):
    """Right, but one Python step per sentence: the mistake 'a Python loop'."""
    out = x.clone()
    T = x.shape[1]
    for b in range(x.shape[0]):
        n = int(lengths[b])
        out[b, T - n :] += table[:n]
    return out


check_add_positions_left_padded = Checker(
    "add_positions_left_padded",
    reference=_add_positions_left_padded,
    cases=[
        Case("one sentence, no padding (length 5 of 5)", (_x6[:1], _tab6, torch.tensor([5]))),
        Case("lengths 5, 3 and 1, padded on the left to 5", (_x6, _tab6, torch.tensor([5, 3, 1]))),
        Case("lengths 2, 4 and 0", (_x6, _tab6, torch.tensor([2, 4, 0]))),
    ],
    mistakes=[
        Mistake(
            "positions counted from the left edge",
            "with padding on the left, a sentence of n tokens starts at column T - n: that token is at position 0, "
            "so sentence b needs rows 0, 1, ... from column T - lengths[b] on, not rows 0 .. T - 1 for every sentence.",
            _left_from_the_edge,
        ),
        Mistake(
            "the padding gets a position",
            "the padding columns are not tokens: add nothing there (multiply the rows by the mask of real tokens), "
            "rather than clamping them to row 0.",
            _left_padding_gets_row0,
        ),
        Mistake("one position late", "the first real token is at position 0, so it gets row table[0].", _left_one_late),
    ],
    refuses=("d2l.*",),
    loop_free=("sentences", _left_case),
    looped=_left_looped,
)
