"""The book: its configuration, and a strict build with zero warnings and working Colab links."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attnbook.book.config import colab_url, pages_url, repository
from notebook_index import NOTEBOOKS, ROOT


def test_repository_is_configured_once():
    url, branch = repository()
    assert branch == "main"
    for path in [ROOT / "README.md", *ROOT.glob("book/*.md")]:
        assert "colab.research.google.com/github" not in path.read_text(), f"{path.name} hard-codes a Colab URL"
    assert colab_url("notebooks/00_tensors.ipynb").endswith(
        f"{url.removeprefix('https://github.com/')}/blob/main/notebooks/00_tensors.ipynb"
    )


def test_readme_links_the_published_book_of_the_configured_repository():
    readme = (ROOT / "README.md").read_text()
    url, _ = repository()
    published = pages_url()
    assert f"]({published})" in readme, f"the README should link the published book, {published}"
    mentioned = re.findall(r"(?:https://)?[\w.-]+\.github\.io\b(?:/[\w.-]*)*/?", readme)
    for address in mentioned:
        assert address.removeprefix("https://").rstrip("/") == published.removeprefix("https://").rstrip("/"), (
            f"README names {address}, but _config.yml's repository publishes at {published}"
        )
    for link in re.findall(r"https://github\.com/[^\s)\]]+", readme):
        assert link == url or link.startswith(url + "/"), (
            f"README links {link}, not the repository of _config.yml ({url})"
        )
    for workflow in ("test", "book"):
        badge = f"{url}/actions/workflows/{workflow}.yml/badge.svg"
        assert badge in readme, f"the README shows the status of {workflow}.yml: {badge}"
        assert (ROOT / ".github" / "workflows" / f"{workflow}.yml").is_file()


def test_pages_url_follows_github_pages_rules(tmp_path):
    def with_repository(url):
        (tmp_path / "_config.yml").write_text(yaml.safe_dump({"repository": {"url": url, "branch": "main"}}))
        return pages_url(tmp_path)

    assert with_repository("https://github.com/Some-Org/My.Course") == "https://some-org.github.io/My.Course/"
    assert with_repository("https://github.com/Some-Org/some-org.github.io") == "https://some-org.github.io/"
    with pytest.raises(ValueError, match="repository.url"):
        with_repository("https://gitlab.com/someone/course")


def test_config_has_what_the_book_needs():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert "sphinx_exercise" in config["sphinx"]["extra_extensions"]
    assert "attnbook.book.sphinx" in config["sphinx"]["extra_extensions"], (
        "exercises are numbered per chapter by attnbook.book.sphinx"
    )
    assert config["html"]["use_repository_button"] and config["html"]["use_issues_button"]
    assert config["bibtex_bibfiles"] == ["book/references.bib"]


def test_toc_files_exist():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    for name in files:
        assert (ROOT / f"{name}.md").exists() or (ROOT / f"{name}.ipynb").exists(), name


def _build(folder: Path, output: Path) -> subprocess.Popen:
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    assert jb, "jupyter-book is not installed in this environment"
    command = [jb, "build", str(folder), "--warningiserror", "--nitpick", "--keep-going", "--all"]
    return subprocess.Popen(
        [*command, "--path-output", str(output)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    """Both editions built strict, side by side, the Chinese one in the English one's zh/ as `make book` does."""
    out = tmp_path_factory.mktemp("books")
    builds = {"en": _build(ROOT, out / "en"), "zh": _build(ROOT / "zh", out / "zh")}
    logs = {name: build.communicate()[0] for name, build in builds.items()}
    codes = {name: build.returncode for name, build in builds.items()}
    html = out / "en" / "_build" / "html"
    if (out / "zh" / "_build" / "html").is_dir():
        shutil.copytree(out / "zh" / "_build" / "html", html / "zh")
    return html, logs, codes


@pytest.mark.slow
@pytest.mark.parametrize("edition", ["en", "zh"])
def test_strict_book_build_has_no_warnings(books, edition):
    _, logs, codes = books
    warnings = [line for line in logs[edition].splitlines() if re.search(r"WARNING|ERROR|CRITICAL", line)]
    assert codes[edition] == 0 and not warnings, "\n".join(warnings) or logs[edition][-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("edition", ["", "zh"])
def test_every_chapter_has_its_colab_link_and_numbered_exercises(books, edition):
    html = books[0] / edition
    for nb in NOTEBOOKS:
        page = (html / "notebooks" / f"{nb.stem}.html").read_text()
        link = colab_url(nb.name, folder=f"{edition}/notebooks" if edition else "notebooks")
        assert f'href="{link}"' in page, f"{edition or 'en'}: {nb.stem}.html lacks its Colab link {link}"
        assert "attnbook @ git+" not in page, f"{nb.stem}.html shows the setup cell"
        chapter = int(nb.stem.split("_")[0])
        titles = re.findall(
            r'<p class="admonition-title">\s*<span class="caption-number">[^<]*?([\d.]+) ?</span>', page
        )
        expected = [f"{chapter}.{k}" for k in range(1, len(titles) + 1)]
        assert titles and titles == expected, f"{nb.stem}.html numbers its exercises {titles}, not {expected}"


@pytest.mark.slow
def test_every_page_links_the_same_page_of_the_other_edition(books):
    html = books[0]
    pages = [
        p for p in html.rglob("*.html") if "_static" not in p.parts and p.name not in ("search.html", "genindex.html")
    ]
    switched = 0
    for page in pages:
        found = re.search(r'<p class="edition-switch"><a href="([^"]+)"', page.read_text())
        if page.name == "index.html" and found is None:
            continue  # the redirect to the first page
        assert found, f"{page.relative_to(html)} has no link to the other edition"
        target = (page.parent / found.group(1)).resolve()
        assert target.is_file(), f"{page.relative_to(html)} links {found.group(1)}, which the other edition lacks"
        switched += 1
    assert switched >= 2 * (len(NOTEBOOKS) + 10)


@pytest.mark.slow
def test_both_editions_serve_mathjax_themselves_and_search_chinese_words(books):
    html = books[0]
    for page in (html / "notebooks" / "03_attention.html", html / "zh" / "notebooks" / "03_attention.html"):
        scripts = re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', page.read_text())
        assert scripts and all("://" not in s for s in scripts), f"{page}: MathJax from {scripts}, not from the build"
        assert all((page.parent / s).is_file() for s in scripts)
    index = (html / "zh" / "searchindex.js").read_text(encoding="utf-8")
    for word in ("注意力", "自注意力", "多头注意力", "位置编码", "束搜索", "标签平滑", "掩码"):
        assert json.dumps(word) in index or f'"{word}"' in index, f"the Chinese search index has no entry for {word}"


#: Interface strings of the theme and the extensions, as the English edition shows them: none may reach a
#: reader of the Chinese edition (the translations: locales/zh_CN/LC_MESSAGES/interface/, attnbook.book.interface).
ENGLISH_INTERFACE = (
    "Search this book...",
    "Click to show",
    "Click to hide",
    "Print to PDF",
    "Fullscreen mode",
    "Download this page",
    "Download source file",
    "Source repositories",
    ">Repository<",
    ">Open issue<",
    "Launch interactive content",
    "Launch on",
    "Color mode",
    "System Settings",
    "Toggle primary sidebar",
    "Toggle secondary sidebar",
    "Link to this heading",
    "© Copyright",
    "The Attention, Step by Step authors",
    "Solution to",
)
#: What the Chinese edition must not say instead: the theme's Taiwanese "print" (列印), "作者：" before the
#: author, and sphinx-exercise's English word order in a title ("解答 练习 0.1 (…)", "练习 0.1  (…)").
NOT_CHINESE = ("列印", "作者：")
ENGLISH_ORDER = re.compile(r"解答\s*练习|练习 [\d.]+\s+\(")


def _pages(html: Path) -> list[Path]:
    return [p for p in html.rglob("*.html") if "_static" not in p.parts]


def _text(page: Path) -> str:
    """A page's text as a reader sees it: no scripts, styles or tags, entities decoded."""
    from html import unescape

    text = re.sub(r"<(script|style)\b.*?</\1>", "", page.read_text(encoding="utf-8"), flags=re.S)
    return unescape(re.sub(r"<[^>]+>", "", text))


@pytest.mark.slow
def test_the_chinese_site_speaks_chinese(books):
    html = books[0]
    english = (html / "notebooks" / "00_tensors.html").read_text(encoding="utf-8")
    missing = [s for s in ENGLISH_INTERFACE if s not in english]
    assert not missing, f"the English edition no longer shows {missing}: the list must follow the theme"
    pages = _pages(html / "zh")
    assert len(pages) > 20
    for page in pages:
        where = f"zh/{page.relative_to(html / 'zh')}"
        shown = [s for s in ENGLISH_INTERFACE if s in page.read_text(encoding="utf-8")]
        assert not shown, f"{where} shows the interface in English: {shown}"
        text = _text(page)
        wrong = [s for s in NOT_CHINESE if s in text] + ENGLISH_ORDER.findall(text)
        assert not wrong, f"{where} reads {wrong}"
    chapter = html / "zh" / "notebooks" / "00_tensors.html"
    text = _text(chapter)
    assert "练习 0.1（永不溢出的 log-softmax）" in text, "an exercise's title: its number, its own title in （）"
    assert "练习 0.1 的解答" in text, "a solution's title: 练习 0.1 的解答"
    assert "打印为 PDF" in chapter.read_text(encoding="utf-8")
    assert "《一步一步学注意力》作者团队" in text


def _index_terms(html: Path) -> tuple[dict, list[str]]:
    index = (html / "searchindex.js").read_text(encoding="utf-8")
    data = json.loads(index[index.index("(") + 1 : index.rindex(")")])
    terms: dict[str, set[str]] = {}
    for table in ("terms", "titleterms"):
        for word, pages in data[table].items():
            pages = [pages] if isinstance(pages, int) else pages
            terms.setdefault(word, set()).update(data["docnames"][i] for i in pages)
    return terms, data["docnames"]


@pytest.mark.slow
def test_the_chinese_search_finds_the_books_terms(books):
    terms, _ = _index_terms(books[0] / "zh")
    expected = {
        "困惑度": "notebooks/10_the_decoder_alone",
        "注意力汇聚": "notebooks/03_attention",
        "检查函数": "notebooks/00_tensors",
        "位置编码": "notebooks/06_positional_encoding",
    }
    for word, page in expected.items():
        assert page in terms.get(word, set()), (
            f"a search for {word} does not find {page}: {sorted(terms.get(word, []))}"
        )


def _section_anchors(page: Path) -> list[str]:
    """The anchors of a page's sections that have a heading, in order."""
    return re.findall(r'<section[^>]*\bid="([^"]+)"[^>]*>\s*<h[1-6]', page.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_chinese_sections_have_the_english_sections_anchors(books):
    html = books[0]
    pages = [p for p in _pages(html / "zh") if p.name not in ("search.html", "genindex.html", "index.html")]
    compared = 0
    for page in pages:
        relative = page.relative_to(html / "zh")
        anchors = _section_anchors(page)
        drawn = [a for a in anchors if re.fullmatch(r"id\d+", a)]
        assert not drawn, f"zh/{relative} has numbered section anchors {drawn}, which move when a heading is added"
        assert anchors == _section_anchors(html / relative), f"zh/{relative}'s section anchors are not the English ones"
        compared += len(anchors)
    assert compared > 150, f"only {compared} section anchors compared"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
#: Chromium without a network: every host name fails, so that a page can only use what the build holds.
OFFLINE = ["--host-resolver-rules=MAP * ~NOTFOUND", "--disable-background-networking", "--no-first-run"]


def _chromium(*arguments: str, user_data: Path) -> str:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={user_data}", *OFFLINE]
    done = subprocess.run([*command, *arguments], capture_output=True, text=True, timeout=120)
    return done.stdout


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (.ci/run installs Debian's)")
@pytest.mark.parametrize("edition", ["", "zh"])
def test_formulas_render_offline_in_a_browser(books, edition, tmp_path):
    page = books[0] / edition / "notebooks" / "03_attention.html"
    dom = _chromium("--virtual-time-budget=20000", "--dump-dom", page.as_uri(), user_data=tmp_path / "profile")
    assert dom.count("<mjx-container") > 20, "MathJax did not typeset the chapter's formulas without a network"
    assert "$$" not in re.sub(r"<script.*?</script>", "", dom, flags=re.S)


def test_exercises_are_numbered_within_their_chapter():
    from types import SimpleNamespace

    from attnbook.book.sphinx import chapter_number, number_exercises_by_chapter

    assert chapter_number("notebooks/04_self_attention") == 4
    assert chapter_number("notebooks/10_beyond") == 10
    assert chapter_number("book/glossary") is None
    env = SimpleNamespace(
        toc_fignumbers={
            "notebooks/03_attention": {"exercise": {"a": (12,), "b": (11,)}, "figure": {"f": (3,)}},
            "notebooks/04_self_attention": {"exercise": {"c": (18,), "d": (19,), "e": (20,)}},
            "book/glossary": {"exercise": {"g": (21,)}},
        }
    )
    changed = number_exercises_by_chapter(None, env)
    assert env.toc_fignumbers["notebooks/03_attention"] == {
        "exercise": {"b": (3, 1), "a": (3, 2)},
        "figure": {"f": (3,)},
    }
    assert env.toc_fignumbers["notebooks/04_self_attention"]["exercise"] == {"c": (4, 1), "d": (4, 2), "e": (4, 3)}
    assert env.toc_fignumbers["book/glossary"]["exercise"] == {"g": (21,)}, (
        "a page that is not a chapter keeps its number"
    )
    assert sorted(changed) == ["notebooks/03_attention", "notebooks/04_self_attention"]
    assert number_exercises_by_chapter(None, env) == [], "numbering twice changes nothing"
