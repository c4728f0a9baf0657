"""The Chinese edition: generated from the English notebooks and the catalogues, and nothing drifts.

- every passage of the English book has a translation that is neither missing nor fuzzy, keeps the
  original's structure (code, formulas, roles, links, directives, figures, heading level) and its terms;
- ``zh/`` is exactly what ``python -m attnbook.book.edition build`` writes from them: no file edited by hand;
- the two editions' notebooks hold the same code cells, outputs and metadata, cell for cell: the same code token
  for token (only comments and docstrings are translated, and a call says ``language="zh"``: the setup line and
  a diagram's), the same outputs (the checkers' verdicts and the diagrams aside, in Chinese);
- no comment or docstring of a Chinese notebook is left in English, and its diagrams are drawn in Chinese, while
  the English notebooks show the figures they always did;
- a change to the English text is caught: the passage loses its translation, or keeps it as fuzzy.
"""

from __future__ import annotations

import base64
import difflib
import io
import json
import re
import shutil

import nbformat
import pytest

from attnbook.book import code_words, edition, edition_diagrams, feedback
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
        assert _as_read(path.read_text(encoding="utf-8")) == _as_read(text), (
            f"zh/{relative} is not what the English text and the catalogues give: "
            "never edit zh/ by hand; python -m attnbook.book.edition build"
        )
    present = {
        p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and "_build" not in p.relative_to(folder).parts
    }
    assert present == set(expected), f"zh/ holds files the build does not write: {sorted(present - set(expected))}"


def _as_read(text: str) -> str:
    """A file of the Chinese book as its reader reads it: a notebook's SVG diagrams by their texts and places (a
    release of matplotlib that writes the same figure in other bytes changes nothing a reader sees)."""
    if not text.startswith("{"):
        return text
    nb = json.loads(text)
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            svg = output.get("data", {}).get("image/svg+xml")
            if svg is not None:
                output["data"]["image/svg+xml"] = edition_diagrams.svg_signature("".join(svg))
    return json.dumps(nb, ensure_ascii=False, indent=1)


def test_the_librarys_table_of_diagram_labels_is_what_the_build_writes():
    expected = edition.library_files(ROOT)
    assert [p.name for p in expected] == ["zh.json"]
    for relative, text in expected.items():
        path = ROOT / relative
        assert path.is_file() and path.read_text(encoding="utf-8") == text, (
            f"{relative} is not what locales/zh_CN/LC_MESSAGES/diagrams.po gives: python -m attnbook.book.edition build"
        )


#: The one difference of code between the editions: a call to these says ``language="zh"`` (the setup line, and
#: a diagram: :mod:`attnbook.book.edition_diagrams`).
LANGUAGE_ARGUMENT = [("NAME", "language"), ("OP", "="), ("STRING", f'"{edition.LIBRARY_LANGUAGE}"')]


def code_differences(english: str, chinese: str, calls: set[str]) -> list[str]:
    """What the Chinese cell runs differently from the English one, token for token (comments, docstrings and blank
    lines aside, IPython's ``%`` and ``!`` lines whole): [] but for ``language="zh"`` added to a call of ``calls``."""
    a, b = code_words.code_tokens(english), code_words.code_tokens(chinese)
    found = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        added = b[j1:j2]
        if op == "insert" and added in (LANGUAGE_ARGUMENT, [("OP", ","), *LANGUAGE_ARGUMENT]) and b[j2] == ("OP", ")"):
            depth, k = 0, j1 - 1  # the name called: before the "(" that this ")" closes
            while k > 0 and not (b[k] == ("OP", "(") and depth == 0):
                depth += {("OP", ")"): 1, ("OP", "("): -1}.get(b[k], 0)
                k -= 1
            if b[k - 1][0] == "NAME" and b[k - 1][1] in calls:
                continue
        found.append(f"{op}: {a[i1:i2]} -> {added}")
    return found


def test_the_code_comparison_sees_any_change_of_code_and_none_of_words():
    english = '"""A docstring."""\nx = f(1)  # one\ny = g(x)\ns = "a string"\n%time h()\n'
    translated = '"""文档字符串。"""\nx = f(1)  # 一\n\n\ny = g(x)\ns = "a string"\n%time h()\n'
    assert code_differences(english, translated, set()) == []
    assert code_differences(english, english.replace("a string", "一个字符串"), set()), "a string is code"
    assert code_differences(english, english.replace("f(1)", "f(2)"), set())
    assert code_differences(english, english.replace("%time h()", "%time  h()"), set())
    assert code_differences(english, english.replace("g(x)", 'g(x, language="zh")'), {"g"}) == []
    assert code_differences(english, english.replace("g(x)", 'g(x, language="zh")'), {"f"})
    assert code_differences(english, english.replace("g(x)", 'g(x, language="en")'), {"g"})


@pytest.mark.parametrize("english", NOTEBOOKS, ids=lambda p: p.stem)
def test_both_editions_hold_the_same_code_outputs_and_metadata(english):
    chinese = ROOT / edition.EDITION / "notebooks" / english.name
    en, zh = nbformat.read(english, as_version=4), nbformat.read(chinese, as_version=4)
    assert len(en.cells) == len(zh.cells)
    messages = feedback.table(ROOT)  # the checkers' verdicts, in Chinese in the Chinese notebooks
    diagrams = edition_diagrams.diagram_names([c.source for c in en.cells if c.cell_type == "code"])
    for index, (a, b) in enumerate(zip(en.cells, zh.cells, strict=True)):
        assert a.cell_type == b.cell_type and a.metadata == b.metadata, f"cell {index}"
        if a.cell_type == "code":
            differences = code_differences(a.source, b.source, {"setup", *diagrams})
            assert not differences, f"cell {index}'s code differs: {differences}"
            a = feedback.localized_code_cell(a, ROOT, messages)
            if edition_diagrams.calls_a_diagram(a.source, diagrams):  # its figure is drawn in Chinese (below)
                kinds = [[o.output_type, sorted(o.get("data", {}))] for o in b.outputs]
                assert kinds == [["execute_result", ["image/svg+xml", "text/plain"]]], f"cell {index}: {kinds}"
            else:
                assert a.outputs == b.outputs, f"cell {index}'s outputs differ"
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


# --- the code cells' words, and the diagrams ---------------------------------------------------------------------

_CHINESE = re.compile(r"[\u4e00-\u9fff]")


def _kept_in_english(source: str) -> set[str]:
    """The passages of a document whose catalogue entry says why they stay in English (``english-kept: ...``)."""
    po = edition.load_catalogue(edition.document_of(ROOT, source).catalogue(ROOT))
    return {e.msgid for e in po if edition.ENGLISH_KEPT in (e.tcomment or "")}


@pytest.mark.parametrize("english", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_comment_or_docstring_of_a_chinese_notebook_is_left_in_english(english):
    zh = nbformat.read(ROOT / edition.EDITION / "notebooks" / english.name, as_version=4)
    kept = _kept_in_english(f"notebooks/{english.name}")
    translated, left = 0, []
    for index, cell in enumerate(c for c in zh.cells if c.cell_type == "code"):
        assert code_words.code_tokens(cell.source)[:1] != [("SOURCE", cell.source)], f"code cell {index}: not Python"
        for words in code_words.words_of(cell.source):
            if _CHINESE.search(words.text):
                translated += 1
            elif code_words.has_words(words.text) and words.text not in kept:
                left.append(f"code cell {index}: {words.text[:70]!r}")
    assert not left, "comments and docstrings left in English (translate them in the catalogue):\n" + "\n".join(left)
    assert translated >= 10, f"only {translated} comments and docstrings in Chinese"


def _diagram_cells(path):
    nb = nbformat.read(path, as_version=4)
    names = edition_diagrams.diagram_names([c.source for c in nb.cells if c.cell_type == "code"])
    return [
        (i, c, names)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and edition_diagrams.calls_a_diagram(c.source, names)
    ]


DIAGRAM_NOTEBOOKS = [p for p in NOTEBOOKS if _diagram_cells(p)]


def test_the_chapters_that_draw_diagrams_are_found():
    assert [p.name[:2] for p in DIAGRAM_NOTEBOOKS] == ["02", "03", "04", "05", "06", "07"]
    assert sum(len(_diagram_cells(p)) for p in DIAGRAM_NOTEBOOKS) == 7


@pytest.mark.parametrize("english", DIAGRAM_NOTEBOOKS, ids=lambda p: p.stem)
def test_the_chinese_notebooks_draw_their_diagrams_in_chinese(english):
    kept = {line for text in _kept_in_english(edition_diagrams.SOURCE) for line in text.split("\n")}
    for index, cell, _ in _diagram_cells(ROOT / edition.EDITION / "notebooks" / english.name):
        assert f'(language="{edition.LIBRARY_LANGUAGE}")' in cell.source, f"cell {index} asks for Chinese"
        (output,) = cell.outputs
        assert set(output.data) == {"image/svg+xml", "text/plain"}, f"cell {index}: SVG, not a PNG of tofu"
        texts = edition_diagrams.svg_texts(output.data["image/svg+xml"])
        assert sum(bool(_CHINESE.search(t)) for t in texts) >= 5, f"cell {index} draws little Chinese: {texts}"
        english_labels = [t for t in texts if code_words.has_words(t) and not _CHINESE.search(t) and t not in kept]
        assert not english_labels, f"cell {index} draws English labels: {english_labels}"


def _png_pixels(png: bytes):
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.int16)


@pytest.mark.parametrize("english", DIAGRAM_NOTEBOOKS, ids=lambda p: p.stem)
def test_the_english_notebooks_show_the_figures_they_always_did(english):
    """The English diagram cells are untouched, and their stored PNG is what the library draws in English, with
    the notebook's figure settings, as the inline backend renders it."""
    import importlib

    import matplotlib as mpl
    from IPython.core.pylabtools import print_figure

    from attnbook.notebook import _figure_defaults

    for index, cell, names in _diagram_cells(english):
        assert "language" not in cell.source, f"cell {index}: the English notebook asks for no language"
        (output,) = cell.outputs
        assert set(output.data) == {"image/png", "text/plain"}, f"cell {index}"
        module, name = names[cell.source.strip().rsplit("\n", 1)[-1].split("(")[0]]
        with mpl.rc_context():
            _figure_defaults()
            figure = getattr(importlib.import_module(module), name)()
            drawn = _png_pixels(print_figure(figure, "png", bbox_inches="tight"))
        stored = _png_pixels(base64.b64decode(output.data["image/png"]))
        assert output.data["text/plain"] == repr(figure)
        assert drawn.shape == stored.shape, f"cell {index}: the figure's size changed"
        moved = (abs(drawn - stored).max(axis=-1) > 64).mean()
        assert moved < 0.002, f"cell {index}: {moved:.2%} of the pixels changed"


@pytest.mark.slow
def test_a_kernel_shows_the_diagram_the_chinese_notebook_stores():
    """What the build stores is what running the cell shows, in Jupyter or Colab: a kernel runs the setup and a
    diagram cell of a Chinese notebook."""
    from nbclient import NotebookClient

    path = ROOT / edition.EDITION / "notebooks" / "04_self_attention.ipynb"
    ((_, cell, _),) = _diagram_cells(path)
    run = nbformat.v4.new_notebook()
    run.cells = [
        nbformat.v4.new_code_cell("from attnbook.notebook import setup\nsetup();"),
        nbformat.v4.new_code_cell(cell.source),
    ]
    NotebookClient(run, timeout=120).execute()
    (shown,) = run.cells[1].outputs
    assert shown.data == cell.outputs[0].data and shown.metadata == cell.outputs[0].metadata


def test_a_diagram_call_asks_for_the_language_whatever_its_layout():
    names = edition_diagrams.diagram_names(["from attnbook.diagrams.ch07_transformer import layers_diagram as draw"])
    assert names == {"draw": ("attnbook.diagrams.ch07_transformer", "layers_diagram")}
    ask = edition_diagrams.ask_for_language
    assert ask("draw()", names, "zh") == 'draw(language="zh")'
    assert ask("x = 1\ndraw(\n    1,\n)", names, "zh") == 'x = 1\ndraw(\n    1,\nlanguage="zh")'
    assert ask('draw(language="en")', names, "zh") == 'draw(language="en")', "a language said is kept"
    assert ask("other()", names, "zh") == "other()"


def _book_with_code(tmp_path, comment: str):
    """A book of one notebook whose one code cell has a comment and a docstring, translated."""
    book = _small_book(tmp_path)
    path = book / "notebooks" / "01_x.ipynb"
    nb = nbformat.read(path, as_version=4)
    (cell,) = [c for c in nb.cells if c.source == "print(3)"]
    cell.source = f'def f():\n    """Return the padding."""\n    return 3  {comment}\n\n\nprint(f())'
    nbformat.write(nb, path)
    edition.update(book)
    chinese = {"# three tokens": "# 三个词元", "Return the padding.": "返回填充。"}
    items = [dict(i, zh=chinese[i["en"]]) for i in edition.export(book, "notebooks/01_x.ipynb") if i["en"] in chinese]
    assert [i["kind"] for i in items] == ["a docstring in code", "a comment in code"][: len(items)]
    assert edition.import_translations(book, "notebooks/01_x.ipynb", items) == []
    return book


def test_a_changed_english_comment_is_caught_until_it_is_translated_again(tmp_path):
    book = _book_with_code(tmp_path, "# three tokens")
    assert "notebooks/01_x.ipynb" not in edition.check(book)
    edition.build(book)
    cells = json.loads((book / "zh" / "notebooks" / "01_x.ipynb").read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells]
    assert 'def f():\n    """返回填充。"""\n    return 3  # 三个词元\n\n\nprint(f())' in sources

    path = book / "notebooks" / "01_x.ipynb"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.source = cell.source.replace("# three tokens", "# three real tokens")
    nbformat.write(nb, path)
    assert any("no translation" in p for p in edition.check(book)["notebooks/01_x.ipynb"])
    with pytest.raises(KeyError, match="no translation of '# three real tokens'"):
        edition.build(book)
    assert edition.update(book)["notebooks/01_x.ipynb"]["fuzzy"] == 1
    assert any("fuzzy" in p for p in edition.check(book)["notebooks/01_x.ipynb"])
    item = next(i for i in edition.export(book, "notebooks/01_x.ipynb") if i["fuzzy"])
    assert item["zh"] == "# 三个词元" and item["kind"] == "a comment in code"
    broken = edition.import_translations(book, "notebooks/01_x.ipynb", [dict(item, zh="三个真实词元")])
    assert any("starts with '#'" in p for p in broken), broken
    english = edition.import_translations(book, "notebooks/01_x.ipynb", [dict(item, zh="# three real tokens")])
    assert any("left in English" in p for p in english), english
    assert edition.import_translations(book, "notebooks/01_x.ipynb", [dict(item, zh="# 三个真实词元")]) == []
    assert "notebooks/01_x.ipynb" not in edition.check(book)
