"""What an exercise's text asks is what its checker checks: each stated requirement is read from the text.

The text is the ``{exercise}`` directive of the notebook; its checker is the ``check_<name>`` the attempt cell under
it calls. A text that says "no Python loop" has a checker that measures the work as the input grows (and a
checker that measures it says so in its text); a text that says a function "is refused" names a function the
checker refuses; a text that asks to build something "yourself" refuses the library's version of it; and the
statements that ask for more (no $d \\times d$ matrix, a state that does not grow, a cache that is used) have a
requirement that a planted answer breaking them fails.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from pathlib import Path

import pytest

import attnbook.exercises as exercises

for _module in pkgutil.iter_modules(exercises.__path__):
    importlib.import_module(f"attnbook.exercises.{_module.name}")
CHECKERS = exercises.registry()
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def exercise_texts() -> dict[str, str]:
    """``{checker name: the text of its exercise}``, the text read from the directive above the attempt cell."""
    found = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            text = "".join(cell["source"])
            if cell["cell_type"] != "markdown" or not re.match(r"`{3,}\{exercise\}", text):
                continue
            attempt = next(("".join(c["source"]) for c in cells[i + 1 :] if c["cell_type"] == "code"), "")
            called = re.search(r"^check_(\w+)\(", attempt, re.MULTILINE)
            if called and not attempt.startswith("# @title Solution"):
                found[called.group(1)] = " ".join(text.split())
    return found


TEXTS = exercise_texts()
NAMES = sorted(TEXTS)

_NO_LOOP = re.compile(r"\b(?:no|without an?y?) (?:Python )?loop\b", re.IGNORECASE)
#: A sentence (up to a full stop and a space, so that ``attnbook.masks.padding_mask`` stays whole) that refuses.
_REFUSED = re.compile(r"(?:[^.;]|\.(?!\s))*\b(?:refused|refuses)\b(?:[^.;]|\.(?!\s))*", re.IGNORECASE)


def test_every_checker_has_its_exercise_text():
    assert set(TEXTS) == set(CHECKERS), set(TEXTS) ^ set(CHECKERS)


@pytest.mark.parametrize("name", NAMES)
def test_a_text_says_no_loop_exactly_where_the_checker_measures_loops(name):
    says, checks = bool(_NO_LOOP.search(TEXTS[name])), CHECKERS[name].loop_free is not None
    assert says == checks, f"{name}: the text {'says' if says else 'does not say'} no loop, the checker " + (
        "measures loops" if checks else "does not"
    )


def _refused_last_names(checker) -> set[str]:
    return {dotted.rstrip(".*").rsplit(".", 1)[-1] for dotted in checker.forbidden}


@pytest.mark.parametrize("name", NAMES)
def test_every_function_the_text_calls_refused_is_refused(name):
    refused = _refused_last_names(CHECKERS[name])
    for sentence in _REFUSED.findall(TEXTS[name]):
        codes = re.findall(r"`([\w.]+(?:\(\))?)`", sentence)
        named = [c.rstrip("()").rsplit(".", 1)[-1] for c in codes if not c.startswith("attnbook.exercises")]
        named = [n for n in named if not n.startswith("check_") and n != name]
        if "allowed" in sentence:  # "(chapter 3's `masked_softmax` is allowed)": named, but not refused
            named = named[:1]
        assert named or "PyTorch" in sentence or "fused" in sentence, f"{name}: {sentence!r} names nothing"
        for function in named:
            assert function in refused, f"{name}: the text says `{function}` is refused; the checker refuses {refused}"


#: What a text asks beyond loops and refusals, the words that ask it, and what the checker does about it: a name
#: it refuses (its dotted name contains it), a requirement (its ``requirements`` list is not empty), a part of
#: the result it compares, or a case.
STATED = {
    "masked_softmax_per_query": (r"Build the mask yourself", {"refuses": ("masked_softmax", "padding_mask")}),
    "encoder_layer": (r"Build the padding mask from the lengths yourself", {"refuses": ("padding_mask",)}),
    "append_rotary_keys": (r"Write the rotation yourself", {"refuses": ("decoder_only",)}),
    "rotate_by_position": (r"without building any \$d \\times d\$ matrix", {"requirement": True}),
    "fastformer_step": (r"the state must not grow", {"compares": "state grows with the length"}),
    "cross_attention_steps": (r"cache", {"requirement": True}),
    "conv_layers_to_connect": (r"0 when \$n = 1\$", {"case": (1,)}),
}


@pytest.mark.parametrize("name", sorted(STATED))
def test_what_a_text_asks_beyond_loops_and_refusals_is_checked(name):
    words, checked = STATED[name]
    assert re.search(words, TEXTS[name]), f"{name}: the text no longer says {words!r}: update this table"
    checker = CHECKERS[name]
    for function in checked.get("refuses", ()):
        assert any(function in dotted for dotted in checker.forbidden), f"{name} does not refuse {function}"
    if checked.get("requirement"):
        assert checker.requirements, f"{name}: the text asks for it, and no requirement checks it"
    if "compares" in checked:
        assert checked["compares"] in checker._run(checker.reference, checker.cases[0]), name
    if "case" in checked:
        assert any(case.args[: len(checked["case"])] == checked["case"] for case in checker.cases), name


def test_a_rotation_by_a_block_diagonal_matrix_is_refused_and_one_by_complex_numbers_passes():
    import math

    import torch

    def by_matrix(x, positions):  # right, with the d x d matrix the text rules out, built without the library
        d = x.shape[-1]
        turns = []
        for p in positions.tolist():
            angles = [p * 10000 ** (-2 * i / d) for i in range(d // 2)]
            blocks = [torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]]) for a in angles]
            turns.append(torch.block_diag(*blocks).to(x.dtype))
        return torch.einsum("tij,btj->bti", torch.stack(turns), x)

    def by_complex(x, positions):  # right, pair by pair
        d = x.shape[-1]
        angles = positions.double()[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
        return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), -angles)).reshape(x.shape)

    checker = CHECKERS["rotate_by_position"]
    for case in checker.cases:
        expected = checker._run(checker.reference, case)
        assert torch.allclose(checker._run(by_matrix, case), expected, atol=1e-9)
    result = checker(by_matrix)
    assert not result.passed and result.mistake == "a d x d matrix built" and "(8, 8)" in result.message
    assert checker(by_complex).passed
