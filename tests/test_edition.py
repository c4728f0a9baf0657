"""The Chinese edition: generated from the English notebooks and the catalogues, and nothing drifts.

- every passage of the English book has a translation that is neither missing nor fuzzy, keeps the
  original's structure (code, formulas, roles, links, directives, figures, heading level) and its terms;
- ``zh/`` is exactly what ``python -m attnbook.book.edition build`` writes from them: no file edited by hand;
- the two editions' notebooks hold the same code cells, outputs and metadata, cell for cell;
- a change to the English text is caught: the passage loses its translation, or keeps it as fuzzy.
"""

from __future__ import annotations

import json
import re
import shutil

import nbformat
import pytest

from attnbook.book import edition, feedback
from attnbook.book.sphinx import edition_link
from notebook_index import NOTEBOOKS, ROOT


def test_every_passage_is_translated_faithfully_and_in_step():
    problems = edition.check(ROOT)
    passages = sum(len(d.passages(ROOT)) for d in edition.documents(ROOT))
    assert passages > 700, f"only {passages} passages: is the English book all there?"
    listed = [p for found in problems.values() for p in found]
    assert not listed, (
        f"{len(listed)} of {passages} passages need a translator (python -m attnbook.book.edition check):\n"
        + "\n".join(listed[:40])
    )


def test_the_chinese_book_is_what_the_build_writes():
    expected = edition.edition_files(ROOT)
    folder = ROOT / edition.EDITION
    for relative, text in expected.items():
        path = folder / relative
        assert path.is_file(), f"zh/{relative} is missing: python -m attnbook.book.edition build"
        assert path.read_text(encoding="utf-8") == text, (
            f"zh/{relative} is not what the English text and the catalogues give: "
            "never edit zh/ by hand; python -m attnbook.book.edition build"
        )
    present = {
        p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and "_build" not in p.relative_to(folder).parts
    }
    assert present == set(expected), f"zh/ holds files the build does not write: {sorted(present - set(expected))}"


@pytest.mark.parametrize("english", NOTEBOOKS, ids=lambda p: p.stem)
def test_both_editions_hold_the_same_code_outputs_and_metadata(english):
    chinese = ROOT / edition.EDITION / "notebooks" / english.name
    en, zh = nbformat.read(english, as_version=4), nbformat.read(chinese, as_version=4)
    assert len(en.cells) == len(zh.cells)
    messages = feedback.table(ROOT)  # the checkers' verdicts, in Chinese in the Chinese notebooks
    for index, (a, b) in enumerate(zip(en.cells, zh.cells, strict=True)):
        assert a.cell_type == b.cell_type and a.metadata == b.metadata, f"cell {index}"
        if a.cell_type == "code":
            a = feedback.localized_code_cell(a, ROOT, messages)  # and the setup line: setup(language="zh")
            assert a.source == b.source and a.outputs == b.outputs, f"cell {index}'s code or outputs differ"
            assert a.execution_count == b.execution_count
        else:
            assert edition.split_blocks(a.source)[1] == edition.split_blocks(b.source)[1], (
                f"cell {index}: the translation changed the cell's layout of blocks"
            )
    assert {k: v for k, v in zh.metadata.items() if k != "language"} == en.metadata


@pytest.mark.parametrize(
    "text",
    [
        "",
        "one line",
        "\n\nA paragraph.\n\nAnother one.\n",
        "# Title\n\ntext\n\n\n\n```python\nx = 1\n\ny = 2\n```\n\nafter",
        "````{exercise} A title\n:label: ex-a\n\nStatement.\n\n```python\ncode\n```\n````\n\nNext.",
        ":::{note}\nA\n\nB\n:::\n",
    ],
)
def test_blocks_rebuild_the_text_exactly_and_keep_fences_whole(text):
    blocks, seps = edition.split_blocks(text)
    assert edition.join_blocks(blocks, seps) == text
    for block in blocks:
        assert block.count("```") % 2 == 0 and block.count(":::") % 2 == 0, block


def test_code_formulas_labels_comments_and_the_badge_are_not_translated():
    assert not edition.translatable("```python\nprint('a sentence')\n```")
    assert not edition.translatable("$$\na = b\n$$")
    assert not edition.translatable("(sec-attention)=")
    assert not edition.translatable('% claims: "2,000" pairs held out')
    assert not edition.translatable("[![Open In Colab](https://x/badge.svg)](https://colab/x.ipynb)")
    assert not edition.translatable("````{solution-start} ex-a\n:class: dropdown\n````")
    assert edition.translatable("````{exercise} A title\n:label: ex-a\n\nDo it.\n````")
    assert edition.translatable("The `Encoder` reads $x$.")


@pytest.mark.parametrize(
    "chinese, lost",
    [
        ("`Encoder` 读取 $x_i$，见 {cite:t}`bahdanau2015neural`，共 57.2%。", None),
        ("Encoder 读取 $x_i$，见 {cite:t}`bahdanau2015neural`，共 57.2%。", "code '`Encoder`'"),
        ("`Encoder` 读取 $x$，见 {cite:t}`bahdanau2015neural`，共 57.2%。", "math '$x_i$'"),
        ("`Encoder` 读取 $x_i$，见 Bahdanau 等人，共 57.2%。", "role"),
        ("`Encoder` 读取 $x_i$，见 {cite:t}`bahdanau2015neural`，共 57.3%。", "figure '57.2'"),
        ("`Encoder` 读取 $x_i$，见 {cite:t}`bahdanau2015neural`，共 57.2%，第 3 章。", "figure '3'"),
    ],
)
def test_a_translation_keeps_the_structure_of_its_passage(chinese, lost):
    english = "The `Encoder` reads $x_i$, as in {cite:t}`bahdanau2015neural`: 57.2% in all."
    problems = edition.structure_problems(english, chinese)
    if lost is None:
        assert problems == []
    else:
        assert any(p.startswith(lost) for p in problems), problems


def test_a_number_of_millions_may_be_written_in_ten_thousands():
    english = "The paper's base model has 65 million parameters, 4.5 million pairs."
    assert edition.structure_problems(english, "论文的基础模型有 6500 万个参数，450 万个句对。") == []
    assert edition.structure_problems(english, "论文的基础模型有 65 M 个参数，4.5 百万个句对。")
    assert edition.structure_problems(english, "论文的基础模型有 650 万个参数，450 万个句对。")


def test_directive_lines_links_and_headings_are_kept():
    english = "## Masks\n\nSee [chapter 5](../notebooks/05_multihead_attention.ipynb)."
    assert (
        edition.structure_problems(english, "## 掩码\n\n见[第 5 章](../notebooks/05_multihead_attention.ipynb)。") == []
    )
    assert any("heading" in p for p in edition.structure_problems(english, "### 掩码\n\n见[第 5 章](x.ipynb)。"))
    assert any("link" in p for p in edition.structure_problems(english, "## 掩码\n\n见[第 5 章](x.ipynb)。"))
    exercise = "````{exercise} Masks\n:label: ex-mask\n\nBuild it.\n````"
    assert edition.structure_problems(exercise, "````{exercise} 掩码\n:label: ex-mask\n\n构建它。\n````") == []
    assert any("ex-mask" in p for p in edition.structure_problems(exercise, "````{exercise} 掩码\n\n构建它。\n````"))


def test_terms_follow_the_glossary_and_are_introduced_with_the_english():
    terms = edition.glossary_terms(ROOT)
    assert ("self-attention", "自注意力") in terms and ("beam search", "束搜索") in terms
    english = "Beam search keeps the best few translations."
    assert edition.term_problems(english, "束搜索保留最好的几个译文。", terms) == []
    assert edition.term_problems(english, "柱搜索保留最好的几个译文。", terms) == [
        "term 'beam search' is not rendered as '束搜索'"
    ]
    assert edition.term_problems(english, "柱搜索保留最好的几个译文。", terms, "term-exempt: beam search") == []
    first = [("# Beam search", "# 束搜索"), (english, "束搜索（beam search）保留最好的几个译文。")]
    assert edition.first_use_problems(first, [("beam search", "束搜索")]) == []
    bare = [(english, "束搜索保留最好的几个译文。"), (english, "束搜索（beam search）。")]
    assert edition.first_use_problems(bare, [("beam search", "束搜索")])


def _small_book(tmp_path):
    """A book of one notebook and the glossary, with its catalogue translated."""
    (tmp_path / "_config.yml").write_text(
        "title: A book\nrepository:\n  url: https://github.com/o/r\n  branch: main\nbibtex_bibfiles: []\n"
    )
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/glossary\nparts:\n  - caption: Part\n    chapters:\n      - file: notebooks/01_x\n"
    )
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "book" / "glossary.md", tmp_path / "book" / "glossary.md")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 1 · Masks\n\nA padding mask hides 3 positions."),
        nbformat.v4.new_code_cell("print(3)", outputs=[nbformat.v4.new_output("stream", text="3\n")]),
        nbformat.v4.new_markdown_cell("The output says 3."),
    ]
    (tmp_path / "notebooks").mkdir()
    nbformat.write(nb, tmp_path / "notebooks" / "01_x.ipynb")
    edition.update(tmp_path)
    translations = {
        "# 1 · Masks": "# 1 · 掩码",
        "A padding mask hides 3 positions.": "填充（padding）掩码（mask）遮住 3 个位置。",
        "The output says 3.": "输出是 3。",
        "A book": "一本书",
        "Part": "部分",
    }
    for document in edition.documents(tmp_path):
        items = edition.export(tmp_path, document.source)
        for item in items:
            item["zh"] = translations.get(item["en"], "（译文）" if document.source.endswith("glossary.md") else "")
        edition.import_translations(tmp_path, document.source, items)
    return tmp_path


def test_a_changed_english_passage_is_caught_until_it_is_translated_again(tmp_path):
    book = _small_book(tmp_path)
    problems = edition.check(book)
    assert "notebooks/01_x.ipynb" not in problems, problems
    edition.build(book)
    assert "输出是 3。" in (book / "zh" / "notebooks" / "01_x.ipynb").read_text(encoding="utf-8")

    path = book / "notebooks" / "01_x.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].source = "The output says 3, as expected."
    nbformat.write(nb, path)
    assert any("no translation" in p for p in edition.check(book)["notebooks/01_x.ipynb"])
    with pytest.raises(KeyError, match="no translation"):
        edition.build(book)

    counts = edition.update(book)["notebooks/01_x.ipynb"]
    assert counts["fuzzy"] == 1 and counts["kept"] == 2
    catalogue = edition.Document("notebooks/01_x.ipynb").catalogue(book).read_text(encoding="utf-8")
    assert '#| msgid "The output says 3."' in catalogue and "#, fuzzy" in catalogue
    assert any("fuzzy" in p for p in edition.check(book)["notebooks/01_x.ipynb"])

    items = edition.export(book, "notebooks/01_x.ipynb")
    revised = [dict(item, zh="输出是 3，与预期一致。") for item in items if item["fuzzy"]]
    assert edition.import_translations(book, "notebooks/01_x.ipynb", revised) == []
    assert "notebooks/01_x.ipynb" not in edition.check(book)
    with pytest.raises(KeyError, match="not a passage"):
        edition.import_translations(book, "notebooks/01_x.ipynb", [{"en": "The output says 3.", "zh": "旧"}])


def test_a_translation_that_drops_a_figure_is_refused_by_the_check(tmp_path):
    book = _small_book(tmp_path)
    items = edition.export(book, "notebooks/01_x.ipynb")
    broken = [dict(item, zh="输出。") for item in items if item["en"] == "The output says 3."]
    problems = edition.import_translations(book, "notebooks/01_x.ipynb", broken)
    assert problems and "figure '3'" in problems[0]
    assert any("figure '3'" in p for p in edition.check(book)["notebooks/01_x.ipynb"])


def test_the_chinese_notebooks_open_in_colab_from_their_own_folder():
    for english in NOTEBOOKS:
        text = (ROOT / edition.EDITION / "notebooks" / english.name).read_text(encoding="utf-8")
        first = json.loads(text)["cells"][0]["source"]
        assert f"/blob/main/zh/notebooks/{english.name})" in "".join(first), english.name


def test_each_page_links_the_same_page_of_the_other_edition():
    assert edition_link("notebooks/03_attention", "") == ("../zh/notebooks/03_attention.html", "中文")
    assert edition_link("notebooks/03_attention", "zh") == ("../../notebooks/03_attention.html", "English")
    assert edition_link("index", "") == ("zh/index.html", "中文")
    assert edition_link("index", "zh") == ("../index.html", "English")
    with pytest.raises(ValueError, match="unknown edition"):
        edition_link("index", "fr")


def _both_editions():
    """Every passage of the English book, and its translation."""
    for document in edition.documents(ROOT):
        for item in edition.export(ROOT, document.source):
            yield document.source, item["en"], item["zh"]


def test_the_source_notes_slips_are_not_reintroduced():
    """The slips that ../shared/seeds/README.md lists, as far as a pattern can see them, in both editions."""
    eps = re.compile(r"(\\epsilon|ε|eps)\s*=\s*(10\^\{-9\}|1e-9|10⁻⁹)")
    sigma_plus_eps = re.compile(r"\(\s*\\sigma\s*\+\s*\\epsilon\s*\)|σ\s*\+\s*ε")
    correct_norm = re.compile(r"\\sqrt\{\s*\\sigma\^2\s*\+\s*\\epsilon\s*\}|√\(σ²\s*\+\s*ε\)")
    squared_cost = re.compile(r"O\(\s*N\s*(\\cdot|·)\s*d\s*\)\s*(\^\s*2|²)")
    for source, english, chinese in _both_editions():
        for text in (english, chinese):
            if eps.search(text):
                assert "Adam" in text, f"{source}: ε = 1e-9 is Adam's, said without Adam: {text[:80]!r}"
            if sigma_plus_eps.search(text):  # only beside the right one, or as what other texts write
                assert correct_norm.search(text) or re.search(r"Some texts|source notes|有些文献|源笔记", text), (
                    f"{source}: LayerNorm divides by √(σ² + ε): {text[:80]!r}"
                )
            if squared_cost.search(text):  # only as what the notes write
                assert re.search(r"source notes|源笔记", text), (
                    f"{source}: Fastformer's cost is not O(N·d)²: {text[:80]!r}"
                )
