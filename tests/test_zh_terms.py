"""The Chinese edition says each concept one way: the term of the table below, the glossary deciding.

A native Chinese technical editor found the edition using two words for one concept (注意力汇聚 in one
chapter, 注意力池化 in another; 配方 and 训练方案; a bare "epoch" beside 轮...). :data:`TERMS` names, for
each such concept, the one Chinese term and the spellings refused for it. The test reads every translation
(``msgstr``) of every catalogue under ``locales/`` (``zh/`` is generated from them) and names the file and
the passage where a refused spelling stands. The patterns are narrow, so that a word's other meanings pass:
内存 is a computer's memory (RAM), not the encoder's output; 假设我们有 is "suppose"; 句子对应 is
"the sentence corresponds". Code (spans and fenced blocks), formulas, link targets and URLs are not
prose and are not read (``--epochs`` stays a flag), and an English gloss in parentheses after the term,
轮（epoch）, is the book's rule for a first use, not a second spelling.

Where a concept has a row in ``book/glossary.md``, the glossary's Chinese (in the English page's table and
in its translation) must be the table's term.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from attnbook.book import edition
from notebook_index import ROOT

CATALOGUES = ROOT / "locales" / edition.LANGUAGE / "LC_MESSAGES"


@dataclass(frozen=True)
class Refused:
    """A spelling refused for a concept: a pattern of the Chinese prose, and, if given, of the English passage
    that must match too (the concept is meant only where the English says it)."""

    pattern: str
    english: str | None = None

    def found(self, english: str, chinese_prose: str) -> list[str]:
        if self.english is not None and not re.search(self.english, english):
            return []
        return [m.group(0) for m in re.finditer(self.pattern, chinese_prose)]


@dataclass(frozen=True)
class Term:
    concept: str
    chinese: str
    refused: tuple[Refused, ...] = ()
    #: The row of book/glossary.md (its English) whose Chinese must be :attr:`chinese`.
    glossary: str | None = None
    #: Legitimate uses that the refused patterns must let pass (other meanings, glosses, code), and spellings
    #: they must catch: the table's own check of its patterns.
    allowed: tuple[str, ...] = field(default=(), compare=False)
    caught: tuple[str, ...] = field(default=(), compare=False)


def _r(*patterns: str, english: str | None = None) -> tuple[Refused, ...]:
    return tuple(Refused(p, english) for p in patterns)


#: A gloss is a parenthesis: an English word right after （ or ( and before ） or ) is not a spelling.
_NOT_GLOSSED = r"(?<![（(A-Za-z_./-])"
_NOT_GLOSSED_AFTER = r"(?![A-Za-z_./-]|[）)])"

TERMS = (
    Term(
        "attention pooling (chapter 3; Fastformer's pooling, chapter 9)",
        "注意力汇聚",
        _r("池化"),
        allowed=("作者的注意力汇聚（attention pooling，把序列汇聚为一个向量）",),
        caught=("这就是注意力池化", "第二次池化"),
    ),
    Term(
        "additive attention pooling",
        "加性注意力汇聚",
        _r("加性(?:注意力)?池化"),
        glossary="additive attention pooling",
        caught=("通过加性池化实现线性时间的注意力",),
    ),
    Term(
        "one-hot",
        "独热",
        _r(rf"(?i){_NOT_GLOSSED}one[- ]hot{_NOT_GLOSSED_AFTER}"),
        allowed=("用该词元的独热（one-hot）向量", "$\\text{onehot}(y)$", "`F.one_hot`"),
        caught=("用该词元的 one-hot 向量乘以这个矩阵", "以软化的 one-hot 目标"),
    ),
    Term(
        "epoch",
        "轮",
        _r(rf"(?i){_NOT_GLOSSED}epochs?{_NOT_GLOSSED_AFTER}"),
        allowed=("同样的训练轮数（epoch）", "`--epochs E`", "```python\ntrain(epochs=EPOCHS)\n```"),
        caught=("每个 epoch 结束后", "最佳 epoch 达到 1.324", "按分钟数、epoch 数或步数"),
    ),
    Term(
        "recipe (of training)",
        "训练方案",
        _r("配方"),
        allowed=("`config.json` 会记下这些（在 `recipe` 之下）",),
        caught=("## 论文的配方与我们的配方",),
    ),
    Term(
        "Summary (the heading of a chapter's last section)",
        "小结",
        _r(r"\A(?!#{1,6} 小结\s*\Z)", english=r"\A#{1,6}\s+Summary\s*\Z"),
    ),
    Term(
        "summary (of a sentence or a sequence)",
        "摘要",
        _r("(?:全局|一个|一份)概括", "(?:每个头的|这个)汇总"),
        allowed=(
            "GRU 用它的最后一个状态概括一个句子",
            "几百个数的状态必须概括整个前缀",
            "库中的 `corpus_bleu` 汇总同样的计数",
        ),
        caught=("一个全局概括就足够了", "对整段文本的一个概括", "这个汇总是每个头一个矩阵"),
    ),
    Term(
        "attention score",
        "评分",
        _r("(?:注意力|点积|加性|双线性|高斯|查询[–-]键)(?:分数|得分)", "(?:分数|得分)函数"),
        allowed=("BLEU 分数", "两个束搜索分数之比", "查询–键评分的 softmax"),
        caught=("注意力分数", "缩放点积分数", "分数函数"),
    ),
    Term(
        "memory (the encoder's output that cross-attention reads)",
        "记忆",
        _r("编码器的?内存", r"内存\**（memory）", "向内存提问", "来自同一个内存"),
        allowed=("缓存的代价是内存", "峰值内存", "编码器的记忆"),
        caught=("键和值来自编码器的内存", "称为**内存**（memory）"),
    ),
    Term(
        "notebook",
        "笔记本",
        _r(r"(?i)(?<![A-Za-z_./-])notebooks?(?![A-Za-z_./-]|\s*7)"),
        allowed=(
            "同一个服务器也提供 Notebook 7 界面",
            "`bench_notebooks.py`",
            "[第 3 章](../notebooks/03_attention.ipynb)",
        ),
        caught=("解答会在 notebook 顶部设置",),
    ),
    Term(
        "translator (the model that translates)",
        "翻译器",
        _r("翻译模型"),
        caught=("第 8 章会测量预热对一个翻译模型的作用",),
    ),
    Term(
        "sentence pair",
        "句对",
        _r("句子对(?![应齐])"),
        allowed=("英语→法语句对", "每个句子对应一行"),
        caught=("下面是第二个句子对的三个掩码",),
    ),
    Term(
        "hypothesis (a candidate translation, in BLEU and in decoding)",
        "候选译文",
        (Refused("假设译文"), Refused("假设(?!我们|你)", english=r"(?i)\bhypothes[ie]s\b")),
        allowed=("假设我们有一些对 $(k_i, v_i)$",),
        caught=("统计假设译文中出现在参考译文里的 n-gram 个数",),
    ),
    Term(
        "weight tying (the output layer shares the embedding's matrix)",
        "权重共享",
        (Refused("权重绑定"), Refused("绑定", english=r"(?i)\b(?:un)?(?:tied|tying|ties)\b")),
        glossary="weight tying",
        caught=("权重绑定",),
    ),
    Term("softmax", "softmax", glossary="softmax"),
    Term("logit", "logit", glossary="logit"),
)


# --- reading the translations ----------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})(.*)$")


def prose(text: str) -> str:
    """The words of a passage: without its fenced code, code spans, formulas, roles, link targets and URLs."""
    kept, fences = [], []  # fences: the open fences, (character, length, is code)
    for line in text.split("\n"):
        found = _FENCE.match(line)
        if found:
            mark, info = found.group(1), found.group(2).strip()
            if fences and mark[0] == fences[-1][0] and len(mark) >= fences[-1][1] and not info:
                fences.pop()
            else:
                fences.append((mark[0], len(mark), not info.startswith("{") and mark[0] != ":"))
            kept.append("")
            continue
        kept.append("" if any(code for _, _, code in fences) else line)
    return edition._prose_only("\n".join(kept))


def translations(base: Path = CATALOGUES) -> dict[str, list[tuple[str, str]]]:
    """(English passage, Chinese passage) of every translated entry, by catalogue (relative to ``base``)."""
    out = {}
    for path in sorted(base.rglob("*.po")):
        po = edition.load_catalogue(path)
        out[str(path.relative_to(base))] = [(e.msgid, e.msgstr) for e in po if e.msgstr and not e.obsolete]
    return out


def term_spelling_problems(catalogues: dict[str, list[tuple[str, str]]]) -> list[str]:
    """Every refused spelling in the translations, named by catalogue, passage and concept."""
    problems = []
    for name, entries in catalogues.items():
        for english, chinese in entries:
            text = prose(chinese)
            for term in TERMS:
                for refused in term.refused:
                    for spelling in refused.found(english, text):
                        problems.append(
                            f"{name} {english[:50]!r}: {term.concept} is {term.chinese!r}, not {spelling!r}"
                        )
    return problems


def glossary_cells(table: str) -> dict[str, str]:
    """English -> Chinese, the first two cells of each row of a glossary table."""
    cells = {}
    for line in table.splitlines():
        row = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and len(row) >= 2:
            cells[row[0]] = row[1]
    return cells


def glossary_problems(english_page: str, chinese_page: str) -> list[str]:
    """The table's terms that the glossary (``book/glossary.md``, and its translation) spells otherwise."""
    problems = []
    for page, table in (("book/glossary.md", english_page), ("book/glossary.po (msgstr)", chinese_page)):
        cells = glossary_cells(table)
        for term in TERMS:
            if term.glossary is not None and cells.get(term.glossary) != term.chinese:
                problems.append(f"{page}: {term.glossary!r} is {cells.get(term.glossary)!r}, not {term.chinese!r}")
    return problems


def _glossary_translation() -> str:
    po = edition.load_catalogue(CATALOGUES / "book" / "glossary.po")
    return "\n".join(e.msgstr for e in po if e.msgid.lstrip().startswith("| English |"))


# --- the tests -------------------------------------------------------------------------------------------------


def test_each_concept_is_spelled_one_way_in_every_catalogue():
    catalogues = translations()
    assert sum(map(len, catalogues.values())) > 700, "are the catalogues all there?"
    problems = term_spelling_problems(catalogues)
    assert not problems, f"{len(problems)} refused spelling(s) (the table in tests/test_zh_terms.py):\n" + "\n".join(
        problems
    )


def test_each_term_of_the_table_is_used():
    text = "\n".join(prose(chinese) for entries in translations().values() for _, chinese in entries)
    unused = [term.chinese for term in TERMS if term.chinese not in text]
    assert not unused, f"terms of the table that no translation uses: {unused}"


def test_the_glossary_gives_the_tables_terms():
    english_page = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    assert not glossary_problems(english_page, _glossary_translation())
    pairs = dict(edition.glossary_terms(ROOT))
    for term in TERMS:
        if term.glossary is not None:
            assert pairs.get(term.glossary) == term.chinese, (term.glossary, pairs.get(term.glossary))


def test_the_refused_patterns_catch_the_other_spellings_and_let_other_meanings_pass():
    for term in TERMS:
        for text in term.caught:
            found = [s for r in term.refused for s in r.found("", prose(text))]
            assert found, f"{term.concept}: {text!r} should be refused"
        for text in term.allowed:
            found = [s for r in term.refused for s in r.found("", prose(text))]
            assert not found, f"{term.concept}: {text!r} is a legitimate use, refused as {found}"
    summary = next(t for t in TERMS if t.chinese == "小结")
    assert term_spelling_problems({"x.po": [("## Summary", "## 摘要")]})
    assert not term_spelling_problems({"x.po": [("## Summary", "## 小结")]})
    assert not [s for r in summary.refused for s in r.found("## Padding must not leak into the summary", "### 摘要")]
    hypothesis = [("count the hypothesis n-grams", "统计假设的 n-gram"), ("Suppose we have pairs", "假设我们有")]
    assert term_spelling_problems({"x.po": hypothesis}) == [
        "x.po 'count the hypothesis n-grams': hypothesis (a candidate translation, in BLEU and in decoding) "
        "is '候选译文', not '假设'"
    ]
    tied = [("the tied output layer", "绑定的输出层"), ("Python bindings", "Python 绑定")]
    assert len(term_spelling_problems({"x.po": tied})) == 1
