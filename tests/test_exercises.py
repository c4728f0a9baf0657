"""Every checker accepts its solution and rejects its planted mistakes, naming them."""

from __future__ import annotations

import importlib
import math
import pkgutil

import pytest
import torch

import attnbook.exercises as exercises
from attnbook.exercises import NOT_ATTEMPTED, Case, Checker, Mistake, compare

for module in pkgutil.iter_modules(exercises.__path__):
    importlib.import_module(f"attnbook.exercises.{module.name}")
CHECKERS = exercises.registry()


def test_every_chapter_module_has_checkers():
    modules = {m.name for m in pkgutil.iter_modules(exercises.__path__) if m.name[:2] == "ch" and m.name[2:4].isdigit()}
    owners = {checker.reference.__module__.rsplit(".", 1)[-1] for checker in CHECKERS.values()}
    assert modules <= owners, f"modules without checkers: {modules - owners}"


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_checker_accepts_its_solution(name):
    result = CHECKERS[name].verify()
    assert result.passed, result.message
    assert result.message.startswith("✓")


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_checker_rejects_and_names_each_planted_mistake(name):
    checker = CHECKERS[name]
    assert len(checker.mistakes) >= 2, f"{name} needs at least two planted mistakes"
    for mistake in checker.mistakes:
        result = checker.verify(mistake.fn)  # as a learner's, it would be refused: it is the checker's own code
        assert not result.passed, f"{name} accepted the mistake '{mistake.name}'"
        assert result.mistake == mistake.name, (
            f"{name}: '{mistake.name}' was reported as {result.mistake!r}:\n{result.message}"
        )
        assert mistake.explanation in result.message


def _double(x):
    return 2 * x


def _demo_checker():
    return Checker(
        "double_demo",
        reference=_double,
        cases=[Case("a small tensor", (torch.tensor([1.0, 2.0]),))],
        mistakes=[Mistake("adds instead", "multiply by two, do not add two.", lambda x: x + 2)],
    )


def test_checker_reports_exceptions_and_not_implemented_without_raising():
    checker = _demo_checker()

    def crashes(x):
        raise IndexError("boom")

    def todo(x):
        raise NotImplementedError

    def stub(x):
        """Double ``x``."""
        ...

    def forgets_return_later(x):
        if x.numel() == 2:
            return x * 2

    assert "raised IndexError: boom" in checker(crashes).message
    assert "expected a function" in checker(3).message
    for unattempted in (todo, stub):
        result = checker(unattempted)
        assert not result and result.message.startswith(f"○ double_demo: {NOT_ATTEMPTED}"), result.message
    two_cases = Checker(
        "double",
        reference=_double,
        mistakes=[],
        cases=[
            Case("two entries", (torch.tensor([1.0, 2.0]),)),
            Case("three entries", (torch.tensor([1.0, 2.0, 3.0]),)),
        ],
    )
    result = two_cases(forgets_return_later)
    assert not result and "returned None" in result.message and NOT_ATTEMPTED not in result.message


def test_checker_reports_case_expected_and_got_for_an_unknown_mistake():
    result = _demo_checker()(lambda x: x * 3)
    assert not result and result.case == "a small tensor" and result.mistake is None
    assert "expected: tensor([2., 4.])" in result.message and "got:      tensor([3., 6.])" in result.message


def test_checker_is_not_fooled_by_a_function_that_changes_its_input():
    def doubles_in_place(x):
        x.mul_(2)
        return x

    assert _demo_checker()(doubles_in_place).passed  # inputs are copied, so the reference saw the original


def test_compare_explains_shape_dtype_and_type_problems():
    assert "shape (2,)" in compare(torch.zeros(2), torch.zeros(3))
    assert "torch.Tensor" in compare(torch.zeros(2), [0.0, 0.0])
    assert "dtype torch.bool" in compare(torch.zeros(2, dtype=torch.bool), torch.zeros(2))
    assert compare(torch.tensor([float("nan")]), torch.tensor([float("nan")])) is not None
    assert compare(torch.tensor([float("nan")]), torch.tensor([float("nan")]), equal_nan=True) is None
    assert compare((1, [2.0, "a"]), (1, [2.0 + 1e-9, "a"])) is None
    assert "item 1" in compare([1.0, 2.0], [1.0, 2.5])
    assert compare({"a": 1}, {"b": 1}) is not None


def test_checker_needs_cases():
    with pytest.raises(ValueError, match="at least one case"):
        Checker("empty", reference=_double, cases=[], mistakes=[])


def test_messages_show_a_few_significant_digits_not_float32_last_bits():
    """A checker's message reads the same on every CPU: float32's last bits (about 1e-7) never show."""
    from attnbook.exercises import format_number, format_pair

    # float32 results of one computation on two kernel paths differ in the last bits; the message must not
    expected = torch.tensor([-2.061055898666382], dtype=torch.float32)
    on_another_cpu = expected * (1 + 2e-7)
    got = torch.tensor([-1.8459538221359253], dtype=torch.float32)
    here, there = compare(expected, got), compare(on_another_cpu, got)
    assert here == there, (here, there)
    assert "expected -2.061, got -1.846" in here
    assert compare(2.272828411977469, 2.0647380458235864) == "the result should be 2.273, got 2.065"
    # more digits only while the two would read the same, and never past what float32 can hold
    assert format_pair(2.2731, 2.2734) == ("2.2731", "2.2734")
    assert format_pair(1.0, 1.0 + 1e-9) == ("1.0", "1.0") and format_pair(1.0, 0.0) == ("1.0", "0.0")
    assert format_number(float("nan")) == "nan" and format_number(3) == "3" and format_number("a") == "'a'"
    assert "expected 0.09003, got nan" in compare(torch.tensor([0.09003057330846786]), torch.tensor([float("nan")]))
    import numpy

    assert "expected 0.5, got 0.25" in compare(numpy.array([0.5]), numpy.array([0.25]))


FORBIDDING = sorted(name for name, checker in CHECKERS.items() if any(checker.forbidden.values()))
LOOP_FREE = sorted(name for name, checker in CHECKERS.items() if checker.loop_free)


@pytest.mark.parametrize("name", LOOP_FREE)
def test_checker_refuses_a_right_answer_computed_with_a_python_loop(name):
    from attnbook.exercises import LOOP_MISTAKE

    checker = CHECKERS[name]
    assert checker.looped is not None, f"{name}: plant a right answer that loops"
    for case in checker.cases:  # the planted loop is right: only the loop is wrong with it
        assert compare(checker._run(checker.reference, case), checker._run(checker.looped, case)) is None
    result = checker.verify(checker.looped)
    assert not result and result.mistake == LOOP_MISTAKE, result.message
    assert "Python loop" in result.message and "for 4" in result.message and "for 12" in result.message
    few, many = checker.steps(checker.reference, 4), checker.steps(checker.reference, 12)
    assert sum(many) <= sum(few) + 2, (few, many)  # the reference's work does not grow


@pytest.mark.parametrize("name", FORBIDDING)
def test_checker_rejects_the_packaged_answer_with_a_clear_message(name):
    """The planted mistake 'calls the library': a true answer without the block, refused with the message under it."""
    from attnbook.exercises import LIBRARY_MISTAKE

    checker = CHECKERS[name]
    planted = {dotted: answer for dotted, answer in checker.forbidden.items() if answer is not None}
    assert planted, f"{name}: plant at least one function that answers with a refused name"
    for dotted, answer in planted.items():  # the names without a planted answer: tests/test_exercises_cheating.py
        for case in checker.cases:  # unblocked, the planted call answers every case: it is the packaged answer
            problem = compare(
                checker._run(checker.reference, case), checker._run(answer, case), checker.atol, checker.rtol
            )
            assert problem is None, f"{name}: the planted call of {dotted} is not an answer ({case.name}: {problem})"
        result = checker(answer)
        assert not result and result.mistake == LIBRARY_MISTAKE, result.message
        assert "it called `" in result.message and "This exercise asks you to write it: " in result.message
        named = result.message.split("This exercise asks you to write it: ")[1].split("`")[1]
        assert named in checker.forbidden or f"{named}.*" in checker.forbidden, result.message  # one declared answer
    assert checker.verify().passed  # and everything was put back


def test_watch_sees_a_refused_answer_however_it_is_reached_and_patches_nothing():
    import functools
    import sys

    import torch.nn.functional as F

    import attnbook.masks
    from attnbook.exercises import Refusals, watch
    from attnbook.masks import padding_mask

    profile_before = sys.getprofile()
    refused = Refusals(
        ["attnbook.masks.padding_mask", "torch.Tensor.exp", "torch.nn.GRUCell", "torch.ops.aten.log_softmax"]
        + ["torch.ops.aten._log_softmax", "d2l.*"]
    )
    x = torch.zeros(2)
    alias = padding_mask

    def default_argument(lengths, _mask=padding_mask):
        return _mask(lengths, 2)

    class Sub(torch.nn.GRUCell):
        pass

    calls = {
        "alias": (lambda: alias(torch.tensor([1]), 2), "attnbook.masks.padding_mask"),
        "module": (lambda: attnbook.masks.padding_mask(torch.tensor([1]), 2), "attnbook.masks.padding_mask"),
        "default argument": (lambda: default_argument(torch.tensor([1])), "attnbook.masks.padding_mask"),
        "partial": (
            lambda: functools.partial(padding_mask, max_len=2)(torch.tensor([1])),
            "attnbook.masks.padding_mask",
        ),
        "method": (lambda: x.exp(), "torch.Tensor.exp"),
        "function": (lambda: torch.exp(x), "torch.Tensor.exp"),
        "aten": (lambda: torch.ops.aten.exp.default(x), "torch.Tensor.exp"),
        "class": (lambda: torch.nn.GRUCell(2, 3), "torch.nn.GRUCell"),
        "subclass": (lambda: Sub(2, 3), "torch.nn.GRUCell"),
        "F": (lambda: F.log_softmax(x, 0), "torch.ops.aten._log_softmax"),  # a Python function: seen in ATen
        "C": (lambda: torch._C._VariableFunctions.log_softmax(x, 0), "torch.ops.aten.log_softmax"),
    }
    for how, (call, answer) in calls.items():
        with watch(refused) as seen:
            call()
        assert [a for _, a in seen.hits][:1] == [answer], (how, seen.hits)
    with watch(refused) as seen:
        torch.zeros(2).sin() @ torch.ones(2)  # what is not refused is not recorded
        torch.nn.Linear(2, 2)
    assert seen.hits == [] and seen.ops > 0
    assert attnbook.masks.padding_mask is padding_mask and "exp" not in torch.Tensor.__dict__  # nothing patched
    assert sys.getprofile() is profile_before  # the interpreter's hook is given back


def test_a_forbidden_call_is_reported_even_when_the_learner_catches_it():
    from attnbook.exercises import LIBRARY_MISTAKE

    def _halve(x):
        return x / 2

    checker = Checker(
        "forbid_demo",
        reference=lambda x: x.exp() / 2,
        cases=[Case("a tensor", (torch.tensor([1.0, 2.0]),))],
        mistakes=[],
        forbidden={"torch.exp": lambda x: torch.exp(x) / 2},
    )

    def sneaky(x):
        try:
            return torch.exp(x) / 2
        except Exception:
            return _halve(x.exp())

    result = checker(sneaky)
    assert not result and result.mistake == LIBRARY_MISTAKE, result.message
    assert (
        "it called `torch.exp`" in result.message or "it called `torch._C._VariableFunctions.exp`" in result.message
    ), result.message
    assert checker(lambda x: _halve(math.e**x)).passed  # the same numbers through another operator pass
    assert not checker(lambda x: _halve(x.exp()))  # the method is the same operator as torch.exp
