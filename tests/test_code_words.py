"""The words among the code (attnbook.book.code_words): found, told from code, replaced without touching the code."""

from __future__ import annotations

import pytest

from attnbook.book.code_words import code_problems, code_tokens, has_words, magic_lines, translate_code, words_of

CELL = '''# @title Solution (hidden: run it, or show the code to read it)
# A first comment,
# and its second line.
import torch  # noqa: F401


def f(x, dim=-1):
    """Queries (B, T, d) -> weights (B, T, T).

    Second paragraph.
    """
    y = x.softmax(dim)    # each row sums to 1
    return y              # (B, T, T)


class C:
    "One line."


if True:
    %time f(torch.zeros(2))
    !echo "# not a comment"
'''

TITLE = "# @title Solution (hidden: run it, or show the code to read it)"
CHINESE = {
    TITLE: "# @title 解答（已隐藏：直接运行，或展开代码阅读）",
    "# A first comment,\n# and its second line.": "# 第一条注释及其第二行。",
    "Queries (B, T, d) -> weights (B, T, T).\n\nSecond paragraph.": "查询 (B, T, d) -> 权重 (B, T, T)。\n\n第二段。",
    "# each row sums to 1": "# 每一行的和为 1",
    "One line.": "一行。",
}


def test_the_words_of_a_cell_are_its_comments_and_docstrings_in_order():
    found = [(w.kind, w.text) for w in words_of(CELL)]
    assert found == [
        ("comment", "# @title Solution (hidden: run it, or show the code to read it)"),
        ("comment", "# A first comment,\n# and its second line."),
        ("comment", "# noqa: F401"),
        ("docstring", "Queries (B, T, d) -> weights (B, T, T).\n\nSecond paragraph."),
        ("comment", "# each row sums to 1"),
        ("comment", "# (B, T, T)"),
        ("docstring", "One line."),
    ], "a Colab form line stands alone; a run of whole-line comments is one; the % and ! lines hold none"
    assert words_of("def broken(:\n    # a comment\n") == [], "a cell that is not Python has no words to translate"


@pytest.mark.parametrize(
    "text, words",
    [
        ("# (B, T, d)", False),
        ("# h_t = f(x_t, h_{t-1})", False),
        ("# noqa: E731", False),
        ("# W_q, W_k, W_v, W_o", False),
        ("# (n, PAIRS + queries)", False),
        ("GRU", False),
        ("Add & Norm", False),
        ("# ... <eos>", False),
        ("# (B, T): True at the padding", True),
        ("# sin, cos side by side", True),
        ("# Done.", True),
        ("masked softmax", True),
        ("feed-forward\nmax(0, xW₁+b₁)W₂+b₂", True),
    ],
)
def test_words_are_told_from_shapes_identifiers_and_names(text, words):
    assert has_words(text) is words


def test_a_translation_replaces_the_words_and_not_a_character_of_the_code():
    out = translate_code(CELL, lambda w: CHINESE.get(w.text, w.text))
    assert code_tokens(out) == code_tokens(CELL) and magic_lines(out) == magic_lines(CELL)
    assert out.startswith(
        "# @title 解答（已隐藏：直接运行，或展开代码阅读）\n# 第一条注释及其第二行。\nimport torch  # noqa: F401\n"
    )
    assert '    """查询 (B, T, d) -> 权重 (B, T, T)。\n\n    第二段。\n    """\n' in out, "laid out as the English"
    assert "    y = x.softmax(dim)    # 每一行的和为 1\n" in out, "a trailing comment keeps its column"
    assert '    "一行。"\n' in out and '    !echo "# not a comment"\n' in out
    english = [line for line in CELL.split("\n") if "#" not in line and '"' not in line and "paragraph" not in line]
    assert all(line in out.split("\n") for line in english), "every line without words is as it was"


@pytest.mark.parametrize(
    "english, chinese, kind, problem",
    [
        ("# each row sums to 1", "每一行的和为 1", "comment", "starts with '#'"),
        ("# each row sums to 1", "# 每一行\n# 的和为 1", "comment", "stays one line"),
        ("# (B, T): True at padding", "# 在填充处为 True", "comment", "'(B, T)': 1 in the English, 0"),
        ("# nn.Linear stores W transposed", "# 存储转置后的 W", "comment", "'nn.Linear'"),
        ("Queries -> weights.", '查询 -> 权重。"""', "docstring", "quotes"),
        ("Queries -> weights.", "查询，权重。", "docstring", "'->'"),
        ("# @title Solution", "# 解答", "comment", "'@title'"),
    ],
)
def test_a_translation_that_would_break_the_code_or_lose_a_piece_is_refused(english, chinese, kind, problem):
    problems = code_problems(english, chinese, kind)
    assert any(problem in p for p in problems), problems
    cell = f"x = 1  {english}\n" if kind == "comment" else f'def f():\n    """{english}"""\n'
    with pytest.raises(ValueError, match="cannot replace it"):
        translate_code(cell, lambda w: chinese)


def test_a_formula_in_a_label_may_be_written_in_unicode():
    assert code_problems("previous state $s_{t-1}$", "上一个状态 sₜ₋₁", "label") == []
    assert code_problems("score $a(s_{t-1}, h_j)$ (B, S)", "评分 a(sₜ₋₁, hⱼ)", "label") == [
        "'(B, S)': 1 in the English, 0 in the translation"
    ]
