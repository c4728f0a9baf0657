"""No test asserts on how long something took: the timed suite runs on busy machines.

A wall-clock time, a rate or a ratio of two of them depends on what else the
machine is doing: CI's runners, a learner's laptop and a shared 2-core machine
are all busy. An assertion on one passes where the machine was idle and fails
where it was not (``d2l took 18.7 s against ours' 15.1 s``), whatever the code
does. So the tests check behaviour instead (each side stopped by its own
budget, read from its own record; a fake clock where time matters), and speed
is measured by ``make bench``, with medians and ratios side by side. This test
reads every test file and fails on an assertion that compares a quantity named
as a time or a rate with anything but zero.

A comparison that only looks like one may say why on its line or the one
above: ``# not a duration: ...`` (one measurement written in two records, say).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from notebook_index import ROOT

#: Names of times, rates and their ratios: ``train_seconds``, ``elapsed``, ``startup``, ``tokens_per_second``...
TIMED = re.compile(
    r"(?:^|_)(?:seconds|secs?|elapsed|duration|startup|wall|walltime|ms|millis|minutes|per_second|per_sec"
    r"|throughput|speedup|timing|timings|took)(?:_|$)|^(?:t0|t1|start_time|end_time)$|perf_counter|monotonic",
    re.IGNORECASE,
)
FAKE = re.compile(r"fake|clock\b", re.IGNORECASE)  # a fake clock's numbers are the test's own, not the machine's
MARK = "# not a duration:"


def _names(node: ast.AST) -> list[str]:
    """The variable, attribute and string-key names in an expression."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.append(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.append(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isidentifier():
            found.append(sub.value)
    return found


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in (0, 0.0) and not isinstance(node.value, bool)


def _timed(node: ast.AST) -> bool:
    return any(TIMED.search(name) for name in _names(node))


def timed_assertions(source: str) -> list[int]:
    """Line numbers of assertions that compare a time or a rate with something other than zero."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert):
            compares = [n for n in ast.walk(node.test) if isinstance(n, ast.Compare)]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("assert_close", "assertLess", "isclose"):
            compares = [node]
        else:
            continue
        for compare in compares:
            if isinstance(compare, ast.Compare):
                sides = [compare.left, *compare.comparators]
                if all(isinstance(op, (ast.In, ast.NotIn, ast.Is, ast.IsNot)) for op in compare.ops):
                    continue
            else:
                sides = list(compare.args[:2])
            if any(_is_zero(side) for side in sides):
                continue  # "it measured something": a positive rate, not a comparison of durations
            if not any(_timed(side) for side in sides):
                continue
            where = compare.lineno
            context = "\n".join(lines[max(0, where - 2) : getattr(compare, "end_lineno", where) or where])
            if MARK in context or FAKE.search(" ".join(_names(compare))):
                continue
            found.append(where)
    return sorted(set(found))


def test_no_test_asserts_on_a_duration_a_rate_or_their_ratio():
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if "benchmarks" in path.parts or path.name == Path(__file__).name:
            continue  # make bench measures speed; this file's own examples below
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for number in timed_assertions(source):
            offenders.append(f"{path.relative_to(ROOT)}:{number}: {lines[number - 1].strip()}")
    assert not offenders, (
        "an assertion on a wall-clock time, a rate or their ratio fails whenever the machine is busy: check what "
        "the code did instead (its own budget, from its own record; a fake clock), and leave speed to make bench "
        f"(or, where it only looks like a duration, say why with '{MARK}'):\n" + "\n".join(offenders)
    )


def test_the_rule_sees_the_assertions_it_is_for_and_leaves_others_alone():
    refused = [
        'assert d2l["train_seconds"] == pytest.approx(ours["train_seconds"], rel=0.2, abs=3.0)',
        "assert startup < STARTUP_SECONDS",
        "assert fused_ms * 1.5 < naive_ms",
        "assert history.tokens_per_second > 2 * baseline.tokens_per_second",
        "assert time.perf_counter() - t0 < 5",
        "torch.testing.assert_close(speedup, torch.tensor(2.0), rtol=0.3)",
    ]
    for line in refused:
        assert timed_assertions(line), line
    allowed = [
        "assert history.tokens_per_second > 0",
        'assert d2l["budget_seconds"] == ours["train_seconds"]  # not a duration: the budget it was given',
        "assert fake_clock.now() == 12.0",
        "assert history.stopped_by.startswith('time budget')",
        "assert loss < 1.0 and steps > 10",
        "assert 'seconds' in text",
    ]
    for line in allowed:
        assert not timed_assertions(line), line
