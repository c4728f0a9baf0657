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
from other_kernels import LIBRARY_TESTS, ShapeDependentRounding

from notebook_index import OTHER_CPU, ROOT

_EXACT = re.compile(
    r"rtol\s*=\s*0(?![.\deE])[^)]*atol\s*=\s*0(?![.\deE])|atol\s*=\s*0(?![.\deE])[^)]*rtol\s*=\s*0(?![.\deE])"
)
#: A test that two computations differ in their bits: ``not torch.equal(a, b)``, ``torch.ne(a, b)``, ``a.ne(b)``,
#: ``(a != b).any()`` (a comparison with a literal number, ``grad != 0``, is not one). It is as tied to the
#: processor as a test that they are equal: the kernels that made two results differ here may agree on another.
_DIFFER = re.compile(
    r"\bnot\s+(?:torch|np|numpy)\.(?:equal|array_equal)\s*\(|\btorch\.ne\s*\(|\.ne\s*\("
    r"|!=\s*(?![-+.\d\s])[^()]*(?:\([^()]*\))?[^()]*\)\s*\.\s*(?:any|all)\s*\("
)


def _unexplained(rule: re.Pattern, *, benchmarks: bool = True) -> list[str]:
    """The lines of the test files (this one's examples left out) that ``rule`` finds with no '# exact:' near."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == Path(__file__).name or (not benchmarks and "benchmarks" in path.parts):
            continue  # the rules' own examples; a benchmark's probe that reports which paths differ
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if rule.search(line.split("#", 1)[0]):
                nearby = "\n".join(lines[max(0, i - 2) : i + 1])
                if "# exact:" not in nearby:
                    found.append(f"{path.relative_to(ROOT)}:{i + 1}: {line.strip()}")
    return found


def test_every_exact_comparison_says_why_it_is_exact():
    unexplained = _unexplained(_EXACT)
    assert not unexplained, (
        "a comparison with rtol=0 and atol=0 is bit for bit: another processor may round another way. Give a "
        "tolerance, or, where the operation is exact by construction, say why in an '# exact:' comment:\n"
        + "\n".join(unexplained)
    )


def test_no_test_asserts_that_two_computations_differ_in_their_bits_without_saying_why():
    unexplained = _unexplained(_DIFFER, benchmarks=False)
    assert not unexplained, (
        "a test that two results differ bit for bit passes only where this processor's kernels happen to make "
        "them differ (on Intel with AMX, a row alone and the same row among ten did not). Assert what the code "
        "did instead, or, where they must differ on every processor (other integers drawn, dropout in training), "
        "say why in an '# exact:' comment:\n" + "\n".join(unexplained)
    )


def test_the_hygiene_rule_sees_both_spellings():
    assert _EXACT.search("assert_close(a, b, rtol=0, atol=0)")
    assert _EXACT.search("assert_close(a, b, atol=0, rtol=0)")
    assert not _EXACT.search("assert_close(a, b, rtol=0, atol=1e-12)")
    assert not _EXACT.search("allclose(a, b, rtol=1e-12, atol=0)")
    assert not _EXACT.search("assert_close(a, b, rtol=0, atol=0.5)")


def test_the_rule_on_differing_bits_sees_each_spelling_and_leaves_comparisons_with_numbers_alone():
    for line in (
        "assert not torch.equal(alone, among_ten)",
        "assert not np.array_equal(a, b)",
        "assert torch.ne(a, b).any()",
        "assert a.ne(b).any()",
        "assert (a != b).any()",
        "assert (model(x) != model(y)).all()",
    ):
        assert _DIFFER.search(line), line
    for line in (
        "assert torch.equal(a, b)",
        "assert torch.all(grad[:6] != 0)",
        "assert (grad != 0).any()",
        "assert batches != token_batches(lengths, 100, seed=1)",
        "assert not torch.allclose(a, b, atol=0.1)",
    ):
        assert not _DIFFER.search(line), line


def test_the_mode_rounds_another_shape_another_way_and_the_same_shape_the_same_way():
    torch.manual_seed(0)
    w, x = torch.randn(16, 16, dtype=torch.float64), torch.randn(10, 16, dtype=torch.float64)
    with ShapeDependentRounding() as mode:
        alone, among_ten = x[3:4] @ w, (x @ w)[3:4]
        again = x[3:4] @ w
    # what the mode did, whatever this processor's own kernels do: one unit for each shape, two units in all
    assert mode.perturbed == 3
    (units,) = [met for operation, met in mode.units.items() if operation.startswith("aten.mm")]
    assert units == {((1, 16), (16, 16)): 1, ((10, 16), (16, 16)): -1}
    eps = torch.finfo(torch.float64).eps
    # exact: the same native product scaled by the same factor, once in the mode and once here
    assert torch.equal(alone, (x[3:4] @ w) * (1 + eps)) and torch.equal(again, alone)
    # exact: the same native product of ten rows, its fourth row scaled here as the mode scaled it
    assert torch.equal(among_ten, (x @ w)[3:4] * (1 - eps))
    torch.testing.assert_close(alone, among_ten, rtol=1e-14, atol=0)  # by a few units in the last place


def test_the_mode_gives_consecutive_shapes_of_one_operation_different_units():
    mode = ShapeDependentRounding()
    shapes = [((n, 16), (16, 16)) for n in range(1, 10)]
    units = [mode.unit("aten.mm.default", s) for s in shapes]
    assert all(u != 0 for u in units)
    assert all(len(set(units[i : i + 4])) == 4 for i in range(len(units) - 3))  # any four in a row all differ
    assert [mode.unit("aten.mm.default", s) for s in shapes] == units  # a shape met again keeps its unit
    assert mode.unit("aten.bmm.default", shapes[1]) == units[0]  # each operation numbers its own shapes


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
        "-p",
        "no:nbval",  # no notebook among these tests: the plugin's imports (nbformat, jupyter_client) cost seconds
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
