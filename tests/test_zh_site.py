"""The Chinese edition's site: its interface in Chinese, its search knowing the book's words, its anchors stable.

The built books are read in ``tests/test_book.py`` (one strict build of both editions serves every test
there); these tests hold the pieces without a full build: the interface catalogues, the patterns of the
exercise titles, the search's word list, and the section anchors on a two-page book built here.
"""

from __future__ import annotations

import gettext
import re
import subprocess
import sys
import textwrap

import polib
import pytest
from docutils import nodes

from attnbook.book import edition, interface
from attnbook.book.anchors import heading_anchor, headings, section_anchors, source_headings
from attnbook.book.exercise_titles import EXERCISE_PATTERN, SOLUTION_PATTERN, compose
from attnbook.book.search_words import edition_translations, heading_terms, reviewed_words, search_words
from notebook_index import NOTEBOOKS, ROOT

#: Interface strings a reader of the Chinese edition sees, and their Chinese (a few checked here by name).
SEEN = {
    ("booktheme", "Print to PDF"): "打印为 PDF",
    ("booktheme", "Search this book..."): "搜索本书……",
    ("booktheme", "Open issue"): "提交议题",
    ("togglebutton", "Click to show"): "点击展开",
    ("togglebutton", "Click to hide"): "点击收起",
    ("sphinx", "Link to this heading"): "指向本标题的链接",
    ("sphinx", "Color mode"): "颜色模式",
    ("attnbook", EXERCISE_PATTERN): "%(exercise)s（%(title)s）",
    ("attnbook", SOLUTION_PATTERN): "%(exercise)s 的解答",
}

#: Characters of Traditional Chinese (and 列印, Taiwan's "print"): the edition writes for mainland readers.
TRADITIONAL = re.compile(
    r"列印|[這個們為與頁載檔尋設顯隱開關閉說點擊選單網無時間歷結屬標題項內連儲體啟動換鍵輸級錄覽處碼據圖]"
)


def interface_entries() -> list[tuple[str, polib.POEntry]]:
    return [
        (domain, entry)
        for domain, path in interface.catalogues(ROOT, edition.LANGUAGE).items()
        for entry in polib.pofile(str(path))
    ]


def test_the_interface_catalogues_translate_what_a_reader_sees_in_simplified_chinese(tmp_path):
    entries = interface_entries()
    assert len(entries) >= 20, f"only {len(entries)} interface strings translated"
    for domain, entry in entries:
        where = f"{domain}.po {entry.msgid!r}"
        assert entry.msgstr and "fuzzy" not in entry.flags, f"{where} is not translated"
        words = re.sub(r"%\(\w+\)s|PDF", "", entry.msgstr)
        assert entry.msgstr != entry.msgid and not re.search(r"[A-Za-z]{2,}", words), f"{where} is English"
        assert not TRADITIONAL.search(entry.msgstr), f"{where} is not Simplified Chinese: {entry.msgstr!r}"
        assert re.findall(r"%\(\w+\)s", entry.msgid) == re.findall(r"%\(\w+\)s", entry.msgstr), (
            f"{where} changes the placeholders"
        )
    compiled = interface.compile_catalogues(ROOT, edition.LANGUAGE, tmp_path)
    assert set(compiled) == {"attnbook", "booktheme", "sphinx", "togglebutton"}
    for (domain, english), chinese in SEEN.items():
        with compiled[domain].open("rb") as file:
            assert gettext.GNUTranslations(file).gettext(english) == chinese
    assert interface.catalogues(ROOT, "en") == {}, "the English edition has no interface catalogue: it is unchanged"


def _catalogue(strings: dict[str, str], path) -> gettext.GNUTranslations:
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for english, chinese in strings.items():
        po.append(polib.POEntry(msgid=english, msgstr=chinese))
    po.save_as_mofile(str(path))
    with open(path, "rb") as file:
        return gettext.GNUTranslations(file)


def test_the_editions_catalogue_comes_before_the_themes(tmp_path):
    from sphinx import locale

    domain = "attnbook-test-domain"
    theirs = _catalogue({"Print to PDF": "列印成 PDF", "Fullscreen mode": "全屏模式"}, tmp_path / "theirs.mo")
    locale.translators["general", domain] = theirs
    try:
        interface.put_first(domain, _catalogue({"Print to PDF": "打印为 PDF"}, tmp_path / "ours.mo"))
        translate = locale.get_translation(domain)
        assert translate("Print to PDF") == "打印为 PDF", "the edition's Chinese wins over the theme's"
        assert translate("Fullscreen mode") == "全屏模式", "what the edition does not translate, the theme still does"
    finally:
        del locale.translators["general", domain]


def test_configured_interface_strings_are_translated():
    from types import SimpleNamespace

    config = SimpleNamespace(
        html_theme_options={"search_bar_text": "Search this book...", "other": 1},
        togglebutton_hint="Click to show",
        togglebutton_hint_hide="Click to hide",
    )
    table = {"Search this book...": "搜索本书……", "Click to show": "点击展开", "Click to hide": "点击收起"}
    changed = interface.translate_configured(config, lambda domain, text: table.get(text, text))
    assert changed == ["html_theme_options.search_bar_text", "togglebutton_hint", "togglebutton_hint_hide"]
    assert config.html_theme_options == {"search_bar_text": "搜索本书……", "other": 1}
    assert config.togglebutton_hint == "点击展开" and config.togglebutton_hint_hide == "点击收起"


def test_exercise_titles_follow_the_patterns_word_order():
    number = [nodes.inline("", "", classes=["caption-number"])]
    title = [nodes.Text("永不溢出的 log-softmax")]
    composed = compose("%(exercise)s（%(title)s）", {"exercise": number, "title": title})
    assert [type(n).__name__ for n in composed] == ["inline", "Text", "Text", "Text"]
    assert "".join(n.astext() for n in composed) == "（永不溢出的 log-softmax）"
    link = nodes.reference("", "练习 0.1")
    assert "".join(n.astext() for n in compose("%(exercise)s 的解答", {"exercise": [link]})) == "练习 0.1 的解答"
    assert "".join(n.astext() for n in compose(SOLUTION_PATTERN, {"exercise": [link]})) == "Solution to 练习 0.1"


def test_the_search_learns_the_books_words_beyond_the_glossary():
    words = search_words(ROOT)
    for word in ("困惑度", "注意力汇聚", "检查函数", "位置编码", "自注意力"):
        assert word in words, f"the Chinese search does not learn {word}"
    assert len(words) > 100, f"only {len(words)} words"
    assert all(not re.search(r"\s", w) for w in words), "a word of jieba's dictionary has no space"
    translations = "\n".join(edition_translations(ROOT))
    for word in reviewed_words(ROOT):
        assert word in translations, f"locales/zh_CN/search_words.txt lists {word}, which the edition never uses"


def test_heading_terms_are_the_terms_a_heading_names_and_the_text_repeats():
    passages = ["## 语言建模与困惑度", "## 它管用吗？长句子的情感", "困惑度，困惑度，困惑度；语言建模。", "它管用吗"]
    assert heading_terms(passages) == ["困惑度"], "语言建模 is used once, 它管用吗 is no term"
    assert heading_terms(passages, uses=1) == ["困惑度", "语言建模"]


def test_the_english_headings_give_the_english_editions_anchors():
    assert heading_anchor("8 · Training a translator") == "training-a-translator"
    assert (
        heading_anchor("Experiment: why attention divides by $\\sqrt{d}$")
        == "experiment-why-attention-divides-by-sqrt-d"
    )
    assert heading_anchor("The paper's recipe beside ours") == "the-paper-s-recipe-beside-ours"
    assert heading_anchor("Bench `bench_data.py` *twice*") == "bench-bench-data-py-twice"
    assert headings("# A\n\ntext\n\n```python\n# not a heading\n```\n\n## B ##\n") == ["A", "B"]
    before = section_anchors(["Title", "Alpha", "Beta", "Summary"])
    after = section_anchors(["Title", "New section", "Alpha", "Beta", "Summary"])
    assert before == ["title", "alpha", "beta", "summary"]
    assert [a for a in after if a != "new-section"] == before, "adding a heading moves no other anchor"
    assert section_anchors(["Summary", "Summary"]) == ["summary", "summary-2"]


@pytest.mark.parametrize("english", NOTEBOOKS[:3], ids=lambda p: p.stem)
def test_both_editions_have_the_same_headings(english):
    chinese = ROOT / edition.EDITION / "notebooks" / english.name
    assert len(source_headings(english)) == len(source_headings(chinese)) > 3


def _build_anchors(book, out) -> dict[str, str]:
    """Build the little book's Chinese edition; {section anchor: heading text} of its page."""
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", str(book / "zh"), str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    page = (out / "page.html").read_text(encoding="utf-8")
    found = re.findall(r'<section id="([^"]+)">\s*<h\d>([^<]+)<a class="headerlink"', page)
    return {anchor: heading for anchor, heading in found}


def test_a_sections_anchor_stays_when_a_heading_is_added_before_it(tmp_path):
    book = tmp_path / "book"
    (book / "zh").mkdir(parents=True)
    (book / "_toc.yml").write_text("root: page\n", encoding="utf-8")
    (book / "zh" / "conf.py").write_text(
        textwrap.dedent(
            """
            extensions = ["myst_parser", "attnbook.book.sphinx"]
            root_doc = "page"
            language = "zh_CN"
            attnbook_edition = "zh"
            html_theme = "basic"
            """
        ),
        encoding="utf-8",
    )

    def write(inserted: bool) -> None:
        english = ["# A little book", "## Attention pooling: a lookup", "## Masks", "## Summary"]
        chinese = ["# 一本小书", "## 注意力汇聚：一种查找", "## 掩码", "## 小结"]
        if inserted:
            english.insert(1, "## Scores that can be learned")
            chinese.insert(1, "## 可学习的评分")
        (book / "page.md").write_text("\n\nText.\n\n".join(english) + "\n", encoding="utf-8")
        (book / "zh" / "page.md").write_text("\n\n文字。\n\n".join(chinese) + "\n", encoding="utf-8")

    write(inserted=False)
    before = _build_anchors(book, tmp_path / "before")
    assert before == {
        "a-little-book": "一本小书",
        "attention-pooling-a-lookup": "注意力汇聚：一种查找",
        "masks": "掩码",
        "summary": "小结",
    }
    write(inserted=True)
    after = _build_anchors(book, tmp_path / "after")
    assert after == {**before, "scores-that-can-be-learned": "可学习的评分"}
