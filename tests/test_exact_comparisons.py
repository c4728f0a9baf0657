"""No test compares two different floating-point computations bit for bit: it would fail on another processor.

Three guards. A test that says ``rtol=0, atol=0`` (or ``torch.equal`` on floats)
is right only when the operation is exact by construction (indexing, masking,
copying): such a line says why in an ``# exact:`` comment, and
:func:`test_every_exact_comparison_says_why_it_is_exact` holds every test file
to that. :class:`other_kernels.ShapeDependentRounding` makes this machine round
the way another processor might (the last bits depend on the shapes); its own
tests below show that it does, and that it leaves exact operations exact.
Finally, the library's own tests run again inside that mode, on another CPU
kernel path as well, so that a bit-for-bit comparison of two computations
fails here and not first on a learner's processor.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import torch
from other_kernels import ShapeDependentRounding
from portability_probe import OTHER_CPU

from notebook_index import ROOT

#: The library's own tests, rerun inside the mode: every file that compares what the library computes.
LIBRARY_TESTS = [
    "test_attention.py",
    "test_attention_scoring.py",
    "test_self_attention.py",
    "test_multihead.py",
    "test_positional.py",
    "test_transformer.py",
    "test_fastformer.py",
    "test_rnn.py",
    "test_masks.py",
    "test_decode.py",
    "test_beam.py",
    "test_train.py",
    "test_metrics.py",
]

_EXACT = re.compile(
    r"rtol\s*=\s*0(?![.\deE])[^)]*atol\s*=\s*0(?![.\deE])|atol\s*=\s*0(?![.\deE])[^)]*rtol\s*=\s*0(?![.\deE])"
)


def test_every_exact_comparison_says_why_it_is_exact():
    unexplained = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == Path(__file__).name:  # the rule's own examples
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if _EXACT.search(line.split("#", 1)[0]):
                nearby = "\n".join(lines[max(0, i - 2) : i + 1])
                if "# exact:" not in nearby:
                    unexplained.append(f"{path.relative_to(ROOT)}:{i + 1}: {line.strip()}")
    assert not unexplained, (
        "a comparison with rtol=0 and atol=0 is bit for bit: another processor may round another way. Give a "
        "tolerance, or, where the operation is exact by construction, say why in an '# exact:' comment:\n"
        + "\n".join(unexplained)
    )


def test_the_hygiene_rule_sees_both_spellings():
    assert _EXACT.search("assert_close(a, b, rtol=0, atol=0)")
    assert _EXACT.search("assert_close(a, b, atol=0, rtol=0)")
    assert not _EXACT.search("assert_close(a, b, rtol=0, atol=1e-12)")
    assert not _EXACT.search("allclose(a, b, rtol=1e-12, atol=0)")
    assert not _EXACT.search("assert_close(a, b, rtol=0, atol=0.5)")


def test_the_mode_rounds_another_shape_another_way_and_the_same_shape_the_same_way():
    torch.manual_seed(0)
    w, x = torch.randn(16, 16, dtype=torch.float64), torch.randn(10, 16, dtype=torch.float64)
    with ShapeDependentRounding() as mode:
        alone, among_ten = x[3:4] @ w, (x @ w)[3:4]
        again = x[3:4] @ w
    assert mode.perturbed == 3
    assert torch.equal(alone, again)  # exact: the same operation on the same shapes, twice
    assert not torch.equal(alone, among_ten)  # the test that failed on Intel AMX fails here too
    torch.testing.assert_close(alone, among_ten, rtol=1e-14, atol=0)  # by a few units in the last place


def test_the_mode_leaves_exact_operations_and_whole_numbers_alone():
    x = torch.randn(4, 5, dtype=torch.float64)
    with ShapeDependentRounding() as mode:
        moved = [x[1:3], x.clone(), x.masked_fill(x > 0, 0.0), torch.cat([x, x]), x + x, x * 2, x.max(-1).values]
        whole = [torch.cos(torch.zeros(3)), torch.exp(torch.zeros(3)), torch.ones(3, 4) @ torch.ones(4, 2)]
    for got, want in zip(moved, [x[1:3], x, x.masked_fill(x > 0, 0.0), torch.cat([x, x]), 2 * x, 2 * x]):
        assert torch.equal(got, want)  # exact: indexing, copying, masking, concatenating, one rounding per element
    assert torch.equal(moved[-1], x.max(-1).values)  # exact: a maximum picks one of its inputs
    assert torch.equal(whole[0], torch.ones(3)) and torch.equal(whole[1], torch.ones(3))  # exact: whole numbers
    assert torch.equal(whole[2], torch.full((3, 2), 4.0))  # exact: a sum of whole numbers
    assert mode.perturbed >= 3  # it did act: on cos, exp and the product, whose results it kept


def test_the_librarys_tests_pass_when_the_last_bits_depend_on_the_shapes():
    """The library's tests (those not marked slow), inside the mode and on another CPU kernel path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": "0", **OTHER_CPU}
    for key in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST"):
        env.pop(key, None)
    command = [
        sys.executable,
        "-m",
        "pytest",
        *(f"tests/{name}" for name in LIBRARY_TESTS),
        "-o",
        "addopts=",
        "-m",
        "not slow",
        "--other-kernels",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rf",
        "--color=no",
    ]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    report = "\n".join(result.stdout.splitlines()[-40:])
    assert result.returncode == 0, (
        "a test of the library fails when the last bits of a result depend on the shapes computed, as on another "
        "class of processor: it compares two different computations bit for bit (give it a tolerance)\n" + report
    )
    assert re.search(r"\d+ passed", report) and "deselected" in report, report
