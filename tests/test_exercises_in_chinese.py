"""The checkers speak the reader's language: English by default, byte for byte as before; Chinese in the Chinese
edition, whose notebooks start with ``setup(language="zh")``.

- every message a checker can print (the verdicts, the requirements, what a comparison found, every case's name,
  every mistake's name and explanation) has a translation in ``locales/zh_CN/LC_MESSAGES/exercises.po`` that keeps
  its placeholders, code spans, numbers and identifiers, and the package ships it compiled;
- a wrong answer written into a Chinese notebook's exercise is explained in Chinese, as the learner sees it;
- what a checker says in Chinese is what the edition's build makes of the English it stores;
- the Chinese notebooks store their checkers' verdicts in Chinese.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tomllib

import nbformat
import pytest

import attnbook.exercises as exercises
from attnbook import language
from attnbook.book import edition, feedback
from attnbook.exercises import wording
from attnbook.exercises.wording import catalogue, translate
from attnbook.language import speaking
from notebook_index import NOTEBOOKS, ROOT

for _module in pkgutil.iter_modules(exercises.__path__):
    importlib.import_module(f"attnbook.exercises.{_module.name}")
CHECKERS = {name: c for name, c in exercises.registry().items() if c.reference.__module__.startswith("attnbook.")}
ZH = ROOT / edition.EDITION / "notebooks"

#: Three English words in a row (outside code spans and printouts): an English sentence left in a message.
ENGLISH = re.compile(r"(?<![\w.'])[A-Za-z]{2,}(?:[ ,]+[A-Za-z]{2,}){2,}(?![\w(.'])")
_PRINTOUT = re.compile(r"^  (?:期望|得到)：.*?(?=^  \S|\Z)", re.M | re.S)


def english_left(message: str) -> list[str]:
    """The English sentences of a Chinese message, its printouts, code spans and quoted English aside."""
    prose = _PRINTOUT.sub("", re.sub(r"`[^`]*`|“[^”\u3400-\u9fff]*”", " ", message))
    return ENGLISH.findall(prose)


# --- the catalogue --------------------------------------------------------------------------------------------


def test_every_message_has_a_translation_that_keeps_its_structure():
    found = feedback.english_messages()
    kinds = {kind: sum(m.kind == kind for m in found) for kind in ("case", "mistake", "explanation", "verdict")}
    assert kinds["case"] > 120 and kinds["mistake"] > 150 and kinds["explanation"] > 150, kinds
    assert kinds["verdict"] >= 19, kinds
    problems = feedback.check(ROOT, edition.term_problems)
    assert not problems, (
        f"{len(problems)} message(s) of the checkers need a translator (python -m attnbook.book.edition check):\n"
        + "\n".join(problems[:40])
    )


def test_the_messages_are_read_from_the_checkers_themselves():
    found = {(m.kind, m.english) for m in feedback.english_messages()}
    for name, checker in CHECKERS.items():
        assert all(("case", case.name) in found for case in checker.cases), name
        assert all(("mistake", m.name) in found and ("explanation", m.explanation) in found for m in checker.mistakes)
    from attnbook.exercises import verdicts

    templates = [v for v in vars(verdicts).values() if isinstance(v, wording.Template)]
    assert templates and all((t.kind, str(t)) in found for t in templates)
    for name in ("LIBRARY_MISTAKE", "LOOP_MISTAKE", "THREAD_MISTAKE", "SOLUTION_MISTAKE", "WATCH_MISTAKE"):
        assert ("mistake", getattr(verdicts, name)) in found, name


@pytest.mark.parametrize(
    "chinese, lost",
    [
        ("✗ {name}，用例“{case}”：它返回了 None；是不是某条路径上漏了 `return`？", None),
        ("✗ {name}，用例：它返回了 None；是不是某条路径上漏了 `return`？", "placeholder 'case'"),
        ("✗ {name}，用例“{case}”：它返回了 None；是不是某条路径上漏了 return？", "code '`return`'"),
        ("{name}，用例“{case}”：它返回了 None；是不是某条路径上漏了 `return`？", "symbol '✗'"),
        ("✗ {name}，用例“{case}”：它返回了None；是不是某条路径上漏了 `return`？", "no space"),
        ("✗ {name}，用例“{case}”：它返回了 None；是不是某条路径上漏了 `return` 吗?", "ASCII punctuation"),
    ],
)
def test_a_translation_keeps_placeholders_code_symbols_and_chinese_style(chinese, lost):
    english = "✗ {name}, case '{case}': it returned None; did a `return` go missing on some path?"
    problems = feedback.problems(english, chinese, {"case": "case"})
    if lost is None:
        assert problems == []
    else:
        assert any(p.startswith(lost) for p in problems), problems


def test_a_translation_keeps_numbers_and_identifiers_and_the_glossary_terms():
    english = "divide its scores by sqrt(d_k), not sqrt(d): 2 heads of width 4 share the padding mask."
    good = "把它的评分除以 sqrt(d_k)，而不是 sqrt(d)：2 个宽度为 4 的头共享填充掩码。"
    terms = dict(terms=edition.glossary_terms(ROOT), term_problems=edition.term_problems)
    assert feedback.problems(english, good, **terms) == []
    assert any("figure '4'" in p for p in feedback.problems(english, good.replace("4", "四")))
    assert any("'d_k'" in p for p in feedback.problems(english, good.replace("sqrt(d_k)", "头宽的平方根")))
    assert any("'padding'" in p for p in feedback.problems(english, good.replace("填充", "补齐"), **terms))


def test_a_changed_message_makes_its_translation_fuzzy(tmp_path):
    shutil.copytree(ROOT / "locales", tmp_path / "locales")
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / "glossary.md", tmp_path / "book" / "glossary.md")
    feedback.compiled_path(tmp_path).parent.mkdir(parents=True)  # a book that ships the exercises
    po = feedback.load(tmp_path)
    entry = next(e for e in po if e.msgctxt == "explanation" and e.msgid.startswith("outputs[:, perm] applies"))
    entry.msgid = entry.msgid.replace("a second time", "once more")  # the catalogue now lags behind the English
    po.save(str(feedback.catalogue_path(tmp_path)))
    counts = feedback.update(tmp_path)
    assert counts["fuzzy"] == 1 and counts["dropped"] == 1, counts
    problems = feedback.check(tmp_path)
    assert any("fuzzy" in p and "outputs[:, perm] applies" in p for p in problems), problems


def test_the_package_ships_the_compiled_catalogue():
    path = feedback.compiled_path(ROOT)
    assert path.read_text(encoding="utf-8") == feedback.compiled_text(ROOT), "python -m attnbook.book.edition build"
    assert path.parent == ROOT / "src" / "attnbook" / "exercises"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["attnbook"]
    relative = path.relative_to(ROOT / "src" / "attnbook").as_posix()
    assert any(fnmatch.fnmatch(relative, p) for p in patterns), f"{relative} is not package data: {patterns}"


@pytest.mark.slow
def test_the_library_speaks_chinese_without_the_repository(tmp_path):
    """As in Colab, where the library is installed from the repository: no locales/, the compiled table only."""
    shutil.copytree(ROOT / "src" / "attnbook", tmp_path / "attnbook", ignore=shutil.ignore_patterns("__pycache__"))
    code = (
        "from attnbook.exercises.ch04_self_attention import check_unshuffle\n"
        "def unshuffle(outputs, perm):\n"
        "    ...\n"
        "print(check_unshuffle(unshuffle))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), language.ENVIRONMENT: "zh"}
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == (
        "○ unshuffle：尚未作答（它返回了 None）。请把你的代码写在 `...` 处，然后再次运行这个单元格；解答折叠在下方。"
    )


# --- the language ---------------------------------------------------------------------------------------------


def test_the_language_is_english_unless_set(monkeypatch):
    monkeypatch.delenv(language.ENVIRONMENT, raising=False)
    assert language.current() == "en"
    monkeypatch.setenv(language.ENVIRONMENT, "zh")
    assert language.current() == "zh"
    with speaking("en"):
        assert language.current() == "en"
    monkeypatch.setenv(language.ENVIRONMENT, "fr")
    with pytest.raises(ValueError, match="not a language of the book"):
        language.current()
    with pytest.raises(ValueError, match="not a language of the book"):
        language.set_language("fr")


def test_setup_sets_the_language():
    from attnbook.notebook import setup

    try:
        setup(figures=False, language="zh")
        assert language.current() == "zh"
    finally:
        language.set_language(None)


# --- English unchanged ----------------------------------------------------------------------------------------


def _shuffled_again(outputs, perm):
    return outputs[:, perm]


def _stub(outputs, perm):
    """Undo the shuffle."""
    ...


def test_the_english_verdicts_are_as_they_were():
    check = CHECKERS["unshuffle"]
    with speaking("en"):
        assert check.verify().message == "✓ unshuffle: all 3 cases pass."
        assert check(_stub).message == (
            "○ unshuffle: not attempted yet (it returned None). Write your code in place of `...`, then run this "
            "cell again; the solution is folded below."
        )
        assert check(3).message == "✗ unshuffle: expected a function, got int"
        wrong = check(_shuffled_again).message
        assert wrong.startswith(
            "✗ unshuffle, case '3 tokens of width 3, perm = [2, 0, 1]':\n"
            "  the result differs at index (0, 0, 0): expected 0.659, got -0.05581 (9 of 9 entries wrong)\n"
            "  expected: tensor([[[ 0.659, -0.338,  0.165],\n"
        )
        assert wrong.endswith(
            "\n  This is the mistake 'shuffled again': outputs[:, perm] applies the shuffle a second time; the token "
            "that went to place i came from perm[i], so put it back with the inverse permutation, torch.argsort(perm)."
        )
        looped = CHECKERS["penalized_scores"]
        assert looped.verify(looped.looped).message.startswith(
            "✗ penalized_scores: the answers are right, but the work grows with the number of positions: "
        )
        cache = CHECKERS["cross_attention_steps"]
        mistake = next(m for m in cache.mistakes if m.name == "the whole target at once")
        assert cache.verify(mistake.fn).message == (
            "✗ cross_attention_steps: the target's queries were projected 1 time, whether it had 2 positions or 6: "
            "all the queries were projected at once, as in training. A decoder meets one position at a time: project "
            "the query of position t inside the loop over t.\n  This is the mistake 'the whole target at once'."
        )


# --- Chinese at run time, and the same from what a notebook stores -------------------------------------------------


def _planted(checker):
    yield "solution", None
    for mistake in checker.mistakes:
        yield mistake.name, mistake.fn
    if checker.looped is not None:
        yield "looped", checker.looped
    for answer, fn in checker.forbidden.items():
        if fn is not None:
            yield answer, fn


def _without_printouts(message: str) -> str:
    return (
        _PRINTOUT.sub("", message)
        if "期望：" in message
        else re.sub(r"^  (expected|got): .*?(?=^  \S|\Z)", "", message, flags=re.M | re.S)
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_a_checker_speaks_chinese_as_the_build_translates_its_english(name):
    checker, table = CHECKERS[name], catalogue("zh")
    for what, fn in _planted(checker):
        with speaking("en"):
            english = checker.verify(fn).message
        with speaking("zh"):
            chinese = checker.verify(fn).message
        assert chinese != english, (name, what)
        assert not english_left(chinese), f"{name}, {what}: English left {english_left(chinese)} in\n{chinese}"
        translated = translate(english, "verdict", table)
        assert translated is not None, f"{name}, {what}: the build cannot translate\n{english}"
        # a result's keys are the checker's words, in the printouts too: compare what is not printed
        assert _without_printouts(translated) == _without_printouts(chinese), (name, what)
        if name != "fastformer_step":
            assert translated == chinese, (name, what)


# --- the Chinese notebooks ------------------------------------------------------------------------------------


def _verdicts(text: str) -> bool:
    return re.search(r"^[✓✗○] ", text, re.M) is not None


def _texts(output) -> str:
    return (
        output.get("text", "")
        if output.get("output_type") == "stream"
        else output.get("data", {}).get("text/plain", "")
    )


@pytest.mark.parametrize("english", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_chinese_notebooks_store_their_checkers_verdicts_in_chinese(english):
    en, zh = nbformat.read(english, as_version=4), nbformat.read(ZH / english.name, as_version=4)
    table = feedback.table(ROOT)
    setup_en, setup_zh = feedback.setup_lines(ROOT)
    code = [(a, b) for a, b in zip(en.cells, zh.cells) if a.cell_type == "code"]
    assert code[0][0].source.endswith(setup_en) and code[0][1].source.endswith(setup_zh)
    for a, b in code:
        for out_en, out_zh in zip(a.get("outputs", []), b.get("outputs", [])):
            if not _verdicts(_texts(out_en)):
                continue
            text_en, text_zh = _texts(out_en), _texts(out_zh)
            assert text_zh == feedback.localized_text(text_en, table), a.source[:200]
            assert text_zh != text_en and not english_left(text_zh), text_zh


def test_a_stored_output_that_the_catalogue_cannot_read_fails_the_build():
    table = feedback.table(ROOT)
    assert feedback.localized_text("x = 1\n", table) == "x = 1\n"
    known = "✓ unshuffle: all 3 cases pass."
    assert (
        feedback.localized_text(f"round trip: True\n{known}\n", table)
        == "round trip: True\n✓ unshuffle：全部 3 个用例通过。\n"
    )
    with pytest.raises(ValueError, match="cannot translate"):
        feedback.localized_text("✓ unshuffle: every case passes, more or less.", table)


@pytest.mark.slow
def test_a_mistake_planted_in_a_chinese_notebook_is_explained_in_chinese(tmp_path):
    """The learner's view: chapter 4's Chinese notebook run as it is (its setup cell, its imports), with a wrong
    answer typed into the exercise "undo a shuffle" where the stub was."""
    from nbclient import NotebookClient

    nb = nbformat.read(ZH / "04_self_attention.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    attempt = next(c for c in code if "check_unshuffle(unshuffle)" in c.source and "@title" not in c.source)
    stub = re.compile(r"^(\s*)\.\.\.(?:\s*#.*)?$", re.M)
    assert stub.search(attempt.source), attempt.source
    attempt.source = stub.sub(r"\1return outputs[:, perm]  # the shuffle applied again", attempt.source)
    for cell in (code[0], code[1], attempt):
        cell.outputs = []
    nb.cells = [code[0], code[1], attempt]
    assert code[0].source.endswith('setup(language="zh")')
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    (shown,) = [_texts(o) for o in attempt.outputs if _verdicts(_texts(o))]
    mistake = next(m for m in CHECKERS["unshuffle"].mistakes if m.name == "shuffled again")
    table = catalogue("zh")
    assert shown.startswith("✗ unshuffle，用例“" + table["case"]["3 tokens of width 3, perm = [2, 0, 1]"] + "”：\n")
    assert shown.endswith(
        f"\n  这是错误“{table['mistake'][mistake.name]}”：{table['explanation'][mistake.explanation]}"
    ), shown
    assert "结果在索引 (0, 0, 0) 处不同" in shown and not english_left(shown), shown
