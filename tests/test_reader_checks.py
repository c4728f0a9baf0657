"""What readers kept finding, mechanised (DESIGN.md, "Prose and outputs" and "Exercises").

A sentence can match every printed number and still be wrong. Three kinds of slip that fresh reads of the
chapters kept finding are checked here, by reading the text and what it points at:

- **An exercise promises a check its checker does not make.** A statement that rules out a loop ("no Python
  loop", "without a loop") has a checker that refuses a right answer computed with one; every edge case the
  statement names ("when $c = 0$", "a row without `<eos>`", "a query with no valid key") is an input its
  checker runs and judges. The phrases are found in the ``{exercise}`` directive by a small grammar
  (:data:`EDGE_PHRASES`); each one found is mapped, in :data:`EDGE_CASES`, to a test of the checker's inputs
  that says when the edge case holds, and the checker must refuse an answer that is right everywhere except
  there. A phrase the grammar finds that the table lacks, or a table entry the text no longer says, fails.
- **A typed exercise number.** Exercises are referred to with ``{numref}`` so that the number follows the
  book; "Exercise 5" or "exercises 3 and 4" typed into the prose goes stale when exercises move (the Chinese
  edition likewise: "练习 5").
- **A glossary chapter that is not where the term is introduced.** ``book/glossary.md`` gives, for each term,
  the chapter where it is introduced: that chapter uses the term in its own teaching (outside exercises and
  solutions, in a sentence that does not point at another chapter), and no earlier chapter defines it, the
  book's mark of a definition being the term set in italics or bold (``*teacher forcing*``,
  ``**warm-up**``).

Settings that a sentence says are another chapter's ("as in chapters 5 and 6") are held to that chapter's
code by attnbook.book.claims (tests/test_claims.py).
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
import torch

from attnbook.book.claims import _EXERCISE, chapters_named, prose_of, sentences
from notebook_index import NOTEBOOKS, ROOT, read_notebook

PAGES = sorted((ROOT / "book").glob("*.md"))
ZH_NOTEBOOKS = sorted((ROOT / "zh" / "notebooks").glob("*.ipynb"))
ZH_PAGES = sorted((ROOT / "zh" / "book").glob("*.md"))

# --- exercises and their checkers -------------------------------------------------------------------------------

_DIRECTIVE = re.compile(r"(`{3,4})\{exercise\}[^\n]*\n(?P<body>.*?)\n\1", re.DOTALL)
_LABEL = re.compile(r"^:label:\s*(\S+)", re.MULTILINE)
_CHECK_NAME = re.compile(r"\b(check_\w+)")


@dataclass
class Exercise:
    label: str
    notebook: Path
    statement: str  # the directive's text, whitespace collapsed
    checkers: dict[str, object] = field(default_factory=dict)  # check_x -> its Checker

    def __str__(self) -> str:
        return f"{self.label} ({self.notebook.name})"


@cache
def exercises() -> tuple[Exercise, ...]:
    """Every ``{exercise}`` of the chapters, with the checkers its statement names or its attempt cell calls."""
    found = []
    for path in NOTEBOOKS:
        cells = read_notebook(path).cells
        module = None
        for index, cell in enumerate(cells):
            directive = _DIRECTIVE.search(cell.source) if cell.cell_type == "markdown" else None
            if directive is None:
                continue
            statement = " ".join(directive.group("body").split())
            label = _LABEL.search(directive.group("body"))
            assert label, f"{path.name}, cell {index}: an exercise without a :label:"
            names = set(_CHECK_NAME.findall(statement))
            for later in cells[index + 1 :]:  # the attempt cell, up to the folded solution
                if later.cell_type == "markdown":
                    break
                names |= set(re.findall(r"\b(check_\w+)\s*\(", later.source))
            if names and module is None:
                module = importlib.import_module(f"attnbook.exercises.ch{path.stem}")
            checkers = {}
            for name in sorted(names):
                assert hasattr(module, name), f"{label.group(1)} names {name}, which {module.__name__} lacks"
                checkers[name] = getattr(module, name)
            found.append(Exercise(label.group(1), path, statement, checkers))
    return tuple(found)


def test_the_exercises_and_their_checkers_are_found():
    found = exercises()
    assert len(found) >= 40, f"only {len(found)} exercises found: has the directive's form changed?"
    checked = [e for e in found if e.checkers]
    assert len(checked) >= 30, [str(e) for e in checked]
    assert {"ex-corpus-bp", "ex-sentence-log-probs", "ex-conv-path"} <= {e.label for e in checked}


def _size(value) -> int:
    """How big an input is: the entries of its tensors and the items of its lists, all told."""
    if isinstance(value, torch.Tensor):
        return int(value.numel())
    if isinstance(value, (list, tuple)):
        return len(value) + sum(_size(v) for v in value)
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    return 0


def _with_a_loop(answer):
    """The same answer, also running a Python loop as long as its input: what "no loop" rules out."""

    def looping(*args, **kwargs):
        for _ in range(_size((args, kwargs))):
            pass
        return answer(*args, **kwargs)

    return looping


def _planted_verdict(checker, planted):
    """The checker's verdict on one of its own planted functions (``verify`` lets the checker's own code run)."""
    return checker.verify(planted) if hasattr(checker, "verify") else checker(planted)


#: "No Python loop over the sentences", "without a Python loop", "No loop over ... time".
NO_LOOP = re.compile(r"\b(?:no|without\s+(?:a|any))\s+(?:Python\s+)?loops?\b", re.IGNORECASE)
LOOP_FREE = [e for e in exercises() if NO_LOOP.search(e.statement)]


def test_the_exercises_that_rule_out_a_loop_are_found():
    assert len(LOOP_FREE) >= 5, [str(e) for e in LOOP_FREE]


@pytest.mark.parametrize("exercise", LOOP_FREE, ids=str)
def test_an_exercise_that_rules_out_a_loop_has_a_checker_that_refuses_one(exercise):
    """The checker declares a loop check, its measure sees a loop over the input it varies, and it refuses its
    own planted right answer that loops."""
    said = NO_LOOP.search(exercise.statement).group(0)
    assert exercise.checkers, f"{exercise} says “{said}” and has no checker to hold a learner to it"
    for name, checker in exercise.checkers.items():
        assert checker.loop_free is not None and checker.looped is not None, (
            f"{exercise} says “{said}”, but {name} makes no loop check: give it loop_free=(what, make_case) and "
            "a planted right answer that loops (looped=...)"
        )
        few, many = (sum(checker.steps(_with_a_loop(checker.reference), n)) for n in (4, 12))
        assert many > few + 2, f"{name}'s loop check varies no input that a loop over it would show ({few}, {many})"
        looped = _planted_verdict(checker, checker.looped)
        assert not looped.passed and "loop" in looped.message.lower(), (
            f"{name} lets its looped answer through:\n{looped}"
        )


# --- the edge cases an exercise names ---------------------------------------------------------------------------

#: The phrases that name an edge case in an exercise's statement: an equation ("when $c = 0$", "$g = 1$",
#: "$T = S$"), something empty, something with none of what it usually has ("a row without `<eos>`", "a query
#: with no valid key"), something too short ("a hypothesis shorter than `n`"), and the list after "it must be
#: right for" ("scores of 1000, ..., rows far apart and along any axis").
EDGE_PHRASES = [
    re.compile(r"\bwhen\s+\$[^$]+\$"),
    re.compile(r"(?<!when )\$\s*\\?[A-Za-z]\w*\s*=\s*(?:0|1|\\?[A-Za-z]\w*)\s*\$"),
    re.compile(r"\ban?\s+empty\s+[\w-]+", re.IGNORECASE),
    re.compile(
        r"\b(?:a|an|any|each)\s+(?:[\w`<>-]+\s+){1,2}?(?:left\s+)?(?:with\s+no|without)\s+"
        r"(?!(?:a\s+|any\s+)?(?:Python\s+)?loops?\b)(?:(?:valid|real)\s+)?[\w`<>-]+",
        re.IGNORECASE,
    ),
    re.compile(r"\ban?\s+[\w-]+\s+shorter\s+than\s+\S+?(?=[\s.,;:)]|$)", re.IGNORECASE),
]
_RIGHT_FOR = re.compile(r"\bmust\s+be\s+right\s+for\s+(?P<list>[^.]+)", re.IGNORECASE)


def test_the_edge_phrases_of_a_statement_are_found():
    statement = (
        "It returns a float, and when $c = 0$ the limit. With $n = 1$ or an empty hypothesis, or a row without "
        "`<eos>`, a query with no valid key, a hypothesis shorter than `n`: no Python loop. It must be right for "
        "scores of 1000, for rows far apart and along any axis."
    )
    assert edge_phrases(statement) == [
        "when $c = 0$",
        "$n = 1$",
        "an empty hypothesis",
        "a row without `<eos>`",
        "a query with no valid key",
        "a hypothesis shorter than `n`",
        "scores of 1000",
        "rows far apart",
        "along any axis",
    ]


def edge_phrases(statement: str) -> list[str]:
    found = [m.group(0) for pattern in EDGE_PHRASES for m in pattern.finditer(statement)]
    listed = _RIGHT_FOR.search(statement)
    if listed:
        found += [p for p in re.split(r",\s*(?:and\s+)?(?:for\s+)?|\s+and\s+(?:for\s+)?", listed["list"]) if p]
    return [" ".join(p.split()) for p in found]


def _no_real_key_for_some_query(a) -> bool:
    """``local_global_attention``: query i reads the real keys j with |i - j| <= half_width, key 0, and, for
    query 0, every key; is some query of some sentence left with none?"""
    mask, w = a["key_padding_mask"], a["half_width"]
    T = mask.shape[-1]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    allowed = ((i - j).abs() <= w) | (j == 0) | (i == 0)
    readable = allowed[None] & ~mask[:, None, :]
    return bool((~readable.any(-1)).any())


def _along_last(a):
    return a["x"].movedim(a["dim"], -1)


#: A score this far below a row's maximum has weight exp(-104) < 1e-45: 0 in float32 (the statement's own figure).
UNDERFLOW = 104.0

#: (exercise, phrase as its statement says it) -> when the edge case holds, as a test of the checker's inputs
#: (bound to the reference's parameters by name), or the reason it names no input of the function.
EDGE_CASES: dict[tuple[str, str], object] = {
    ("ex-stable-log-softmax", "scores of 1000"): lambda a: bool(a["x"].abs().max() >= 1000),
    ("ex-stable-log-softmax", "a score 200 below the others"): lambda a: bool(
        (_along_last(a).shape[-1] > 1)
        and ((lambda s: s[..., 1] - s[..., 0])(_along_last(a).sort(-1).values) >= 200).any()
    ),
    ("ex-stable-log-softmax", "rows far apart"): lambda a: bool(
        (lambda m: m.max() - m.min())(_along_last(a).amax(-1).flatten()) > UNDERFLOW
    ),
    ("ex-stable-log-softmax", "along any axis"): lambda a: a["dim"] not in (-1, a["x"].dim() - 1),
    ("ex-clipped-precision-multi", "a hypothesis shorter than `n`"): lambda a: len(a["hypothesis"]) < a["n"],
    ("ex-corpus-bp", "when $c = 0$"): lambda a: sum(a["hyp_lens"]) == 0,
    ("ex-trim-after-eos", "a row without `<eos>`"): lambda a: bool((~(a["ids"] == a["eos_id"]).any(-1)).any()),
    ("ex-masked-softmax-per-query", "a query with no valid key"): lambda a: bool((a["valid_lens"] <= 0).any()),
    ("ex-local-attention", "A query left with no real key"): _no_real_key_for_some_query,
    ("ex-conv-path", "when $n = 1$"): lambda a: a["n"] == 1,
    ("ex-gqa", "$g = 1$"): lambda a: a["num_kv_heads"] == 1,
    ("ex-gqa", "$g = h$"): lambda a: a["num_kv_heads"] == a["num_heads"],
    ("ex-new-queries-mask", "$T = S$"): lambda a: a["T"] == a["S"],
    ("ch07-decoder-masks", "A model with no encoder"): "the exercise's subject, a decoder-only model, not an input",
    ("ch08-beam-step", "$\\alpha = 1$"): lambda a: a["alpha"] == 1,
    ("ch09-global-key-padding", "A sentence slot with no position"): lambda a: any(
        int((a["segments"][b] == g).sum()) == 0
        for b in range(a["segments"].shape[0])
        for g in range(1, a["q_global"].shape[1] + 1)
    ),
}

EDGES = [(e, phrase) for e in exercises() if e.checkers for phrase in edge_phrases(e.statement)]


def test_every_edge_case_an_exercise_names_is_in_the_table_and_every_entry_is_still_named():
    named = {(e.label, phrase) for e, phrase in EDGES}
    assert named - set(EDGE_CASES) == set(), (
        "an exercise names an edge case that EDGE_CASES does not say how to recognise in its checker's inputs: "
        "add it (a test of the inputs, or the reason it names no input)"
    )
    assert set(EDGE_CASES) - named == set(), "EDGE_CASES holds phrases that no checked exercise says any more"
    assert len(named) >= 10


def _perturbed(value):
    """A wrong answer of the same kind: one more, or the opposite truth."""
    if isinstance(value, torch.Tensor):
        return ~value if value.dtype == torch.bool else value + 1
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, (tuple, list)):
        return type(value)([_perturbed(value[0]), *value[1:]])
    raise TypeError(f"cannot make a wrong answer like {type(value).__name__}")


def _ignoring(reference, holds):
    """The reference everywhere, but wrong wherever the edge case holds: a learner who forgot it."""
    signature = inspect.signature(reference)

    def answer(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        edge = holds(dict(bound.arguments))
        result = reference(*args, **kwargs)
        return _perturbed(result) if edge else result

    return answer


def _cases_where(checker, holds) -> list[str]:
    signature = inspect.signature(checker.reference)
    found = []
    for case in checker.cases:
        bound = signature.bind(*case.args, **case.kwargs)
        bound.apply_defaults()
        if holds(dict(bound.arguments)):
            found.append(case.name)
    return found


def _never(arguments) -> bool:
    return False


@pytest.mark.parametrize(
    "exercise, phrase",
    [pytest.param(e, p, id=f"{e.label}: {p}") for e, p in EDGES if callable(EDGE_CASES.get((e.label, p)))],
)
def test_every_edge_case_an_exercise_names_is_one_its_checker_judges(exercise, phrase):
    """A case of the checker has the edge case, and an answer wrong only there is refused at such a case."""
    holds = EDGE_CASES[(exercise.label, phrase)]
    for name, checker in exercise.checkers.items():
        cases = _cases_where(checker, holds)
        assert cases, (
            f"{exercise} asks for the right answer for {phrase!r}, and no case of {name} has it "
            f"(its cases: {[c.name for c in checker.cases]})"
        )
        # the learner's path: the verdicts on two answers that differ only where the edge case holds
        right, forgot = checker(_ignoring(checker.reference, _never)), checker(_ignoring(checker.reference, holds))
        assert not forgot.passed and forgot.case in cases and forgot.message != right.message, (
            f"{name} does not refuse an answer that is wrong only for {phrase!r} at a case that has it:\n{forgot}"
        )


def test_a_checker_that_forgets_an_edge_case_or_a_loop_is_caught():
    """The machinery itself, on a learner's answers (not the checkers' own solutions): a checker whose cases all
    miss the edge case accepts an answer wrong there, one that tries it refuses it at that case; a checker with a
    loop check refuses the same answer with a loop over its input, and its measure sees that loop."""
    from attnbook.exercises import Case, Checker

    def clip(x):
        return max(x, 0.0)

    def mine(x):
        return x if x > 0 else 0.0

    cases = [Case("a positive number", (2.0,)), Case("a larger one", (5.0,))]
    blind = Checker("clip_demo", clip, cases, mistakes=[])
    sees = Checker("clip_demo", clip, [*cases, Case("x = 0", (0.0,))], mistakes=[])
    at_zero = _ignoring(mine, lambda a: a["x"] == 0)
    assert blind(at_zero).passed and sees(_ignoring(mine, _never)).passed
    refused = sees(at_zero)
    assert not refused.passed and refused.case == "x = 0" and _cases_where(sees, lambda a: a["x"] == 0) == ["x = 0"]

    def total(x):
        return x.sum()

    def looped(x):
        result = x.new_zeros(())
        for value in x:
            result = result + value
        return result

    def learners(x):
        return torch.sum(x)

    entries = [Case("three entries", (torch.arange(3.0),))]
    no_loop_check = Checker("total_demo", total, entries, mistakes=[])
    loop_check = Checker(
        "total_demo",
        total,
        entries,
        mistakes=[],
        loop_free=("entries", lambda n: Case(f"{n}", (torch.ones(n),))),
        looped=looped,
    )
    assert no_loop_check(_with_a_loop(learners)).passed and loop_check(learners).passed
    refused = loop_check(_with_a_loop(learners))
    assert not refused.passed and "loop" in refused.message.lower()
    assert sum(loop_check.steps(_with_a_loop(learners), 12)) > sum(loop_check.steps(_with_a_loop(learners), 4)) + 2


# --- exercises are referred to by {numref} ----------------------------------------------------------------------

TYPED_EXERCISE = re.compile(
    r"\bexercises?\s+\d+(?:\s*(?:,|and|or|to|–)\s*\d+)*"
    r"|\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)\s+exercise\b",
    re.IGNORECASE,
)
TYPED_EXERCISE_ZH = re.compile(r"(?:练习|习题)\s*\d+|第\s*\d+\s*(?:个|道)?\s*(?:练习|习题)")


def _markdown_of(path: Path) -> list[tuple[str, str]]:
    if path.suffix == ".md":
        return [(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))]
    return [
        (f"{path.relative_to(ROOT)}, cell {i}", cell.source)
        for i, cell in enumerate(read_notebook(path).cells)
        if cell.cell_type == "markdown"
    ]


def _typed_numbers(paths, pattern) -> list[str]:
    found = []
    for path in paths:
        for where, text in _markdown_of(path):
            text = re.sub(r"`[^`\n]*`", " ", text)  # a role's target or code is not prose
            found += [f"{where}: “{' '.join(m.group(0).split())}”" for m in pattern.finditer(text)]
    return found


def test_exercises_are_referred_to_by_numref_not_by_a_typed_number():
    found = _typed_numbers(NOTEBOOKS + PAGES, TYPED_EXERCISE)
    assert not found, "write {numref}`label` instead of a typed exercise number:\n" + "\n".join(found)


def test_the_chinese_edition_refers_to_exercises_by_numref_too():
    assert ZH_NOTEBOOKS and ZH_PAGES, "zh/ is missing: python -m attnbook.book.edition build"
    found = _typed_numbers(ZH_NOTEBOOKS + ZH_PAGES, TYPED_EXERCISE_ZH)
    assert not found, "write {numref}`label` in the Chinese passage too:\n" + "\n".join(found)


def test_a_typed_exercise_number_is_recognised_and_a_numref_is_not():
    assert TYPED_EXERCISE.search("Exercise 5 counts it") and TYPED_EXERCISE.search("as exercises 3 and 4 show")
    assert TYPED_EXERCISE.search("the third exercise asks") and TYPED_EXERCISE_ZH.search("练习 6 表明")
    assert not TYPED_EXERCISE.search(re.sub(r"`[^`\n]*`", " ", "{numref}`ch09-causal-step` asks; the exercise"))


# --- the glossary's chapters ------------------------------------------------------------------------------------

#: How the book writes a term whose glossary label it does not use word for word (case, a plural and a hyphen
#: for a space are allowed for every term).
FORMS = {
    "batched matrix multiplication": r"batched\s+matri(?:x|ces)\s+(?:multiplications?|products?)",
    "numerical stability": r"numerical(?:ly)?\s+stab\w+|stable\s+softmax",
    "scaled dot-product attention": r"scaled\s+dot[\s-]products?(?:\s+attention|\s+scores?)?",
    "sinusoidal positional encoding": r"sinusoidal\s+(?:positional\s+)?encodings?",
    "KV cache": r"KV\s+cache|key[–-]value\s+cache",
    "weight tying": r"weight\s+tying|(?:tied|tying)(?:\s+the)?\s+(?:output|embeddings?)\w*",
    "additive attention pooling": r"additive\s+attention\s+pooling|poolings?",
    "query, key, value": r"quer(?:y|ies),?\s+keys?,?\s+and\s+values?",
    "additive attention": r"additive\s+(?:attention|scores?)",
    "permutation equivariance": r"permutation\s+equivarian(?:ce|t)",
}


def _term(english: str) -> re.Pattern:
    form = FORMS.get(english, re.escape(english).replace(r"\ ", r"[\s-]+").replace(r"\-", r"[\s-]") + r"(?:s|es)?")
    return re.compile(rf"(?<![\w-])(?:{form})(?![\w-])", re.IGNORECASE)


def glossary_rows(path: Path) -> list[tuple[str, str]]:
    """(first column, last column) of every row of the table on a glossary page, below its header."""
    rows, below_header = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            below_header = False
        elif all(set(c) <= set("-: ") for c in cells):
            below_header = True
        elif below_header:
            rows.append((cells[0], cells[-1]))
    return rows


@cache
def _teaching() -> dict[int, list[str]]:
    """Each chapter's own teaching: its markdown outside exercise statements and solutions."""
    chapters = {}
    for path in NOTEBOOKS:
        cells, solution = [], False
        for cell in read_notebook(path).cells:
            if cell.cell_type != "markdown":
                continue
            solution = solution or "{solution-start}" in cell.source or "{solution}" in cell.source
            if not solution:
                cells.append(_EXERCISE.sub(" ", cell.source))
            if "{solution-end}" in cell.source or (
                "{solution}" in cell.source and "{solution-start}" not in cell.source
            ):
                solution = False
        chapters[int(path.name[:2])] = cells
    return chapters


#: A term set in italics or bold, the book's mark of a definition: "*teacher forcing*", "**Brevity penalty.**".
EMPHASIS = re.compile(r"(?<![\w*])(\*\*|\*)(?=[^\s*])(.+?)(?<=[^\s*])\1(?![\w*])", re.DOTALL)


def introduced(term: re.Pattern) -> tuple[set[int], list[int]]:
    """(the chapters whose own teaching uses the term, the chapters that define it, in order)."""
    uses, defines = set(), []
    for chapter, cells in sorted(_teaching().items()):
        for markdown in cells:
            if any(
                m[2].strip().rstrip(".:") and term.fullmatch(m[2].strip().rstrip(".:"))
                for m in EMPHASIS.finditer(markdown)
            ):
                defines.append(chapter)
            if any(term.search(s) and not chapters_named(s) - {chapter} for s in sentences(prose_of(markdown))):
                uses.add(chapter)
    return uses, sorted(set(defines))


def test_the_glossary_gives_each_term_the_chapter_that_introduces_it():
    rows = glossary_rows(ROOT / "book" / "glossary.md")
    assert len(rows) >= 40, rows
    wrong = []
    for english, chapter in rows:
        assert chapter.isdigit(), f"glossary: {english!r} has chapter {chapter!r}, not a chapter's number"
        uses, defines = introduced(_term(english))
        earlier = [c for c in defines if c < int(chapter)]
        if int(chapter) not in uses:
            wrong.append(
                f"{english}: chapter {chapter} never uses the term in its own teaching (used in {sorted(uses)})"
            )
        elif earlier:
            wrong.append(
                f"{english}: chapter {chapter}, but chapter {earlier[0]} defines it (sets it in italics or bold)"
            )
    assert not wrong, "book/glossary.md:\n" + "\n".join(wrong)


def test_the_chinese_glossary_gives_the_same_chapters():
    english = glossary_rows(ROOT / "book" / "glossary.md")
    chinese = glossary_rows(ROOT / "zh" / "book" / "glossary.md")
    assert [c for _, c in chinese] == [c for _, c in english], (
        "zh/book/glossary.md: python -m attnbook.book.edition build"
    )


def test_a_term_defined_before_its_glossary_chapter_is_caught():
    term = _term("teacher forcing")
    assert term.fullmatch("Teacher forcing") and term.search("with teacher-forcing") and not term.search("forcings")
    assert EMPHASIS.findall("The decoder is trained with *teacher forcing* and a **warm-up**.") == [
        ("*", "teacher forcing"),
        ("**", "warm-up"),
    ]
    assert not EMPHASIS.findall("a * b * c and 2*3*4")
