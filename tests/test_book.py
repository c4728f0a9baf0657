"""The book: its configuration, and a strict build with zero warnings and working Colab links."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attnbook.book import colab_url, pages_url, repository
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
    assert "attnbook.book" in config["sphinx"]["extra_extensions"], (
        "exercises are numbered per chapter by attnbook.book"
    )
    assert config["html"]["use_repository_button"] and config["html"]["use_issues_button"]
    assert config["bibtex_bibfiles"] == ["book/references.bib"]


def test_toc_files_exist():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    for name in files:
        assert (ROOT / f"{name}.md").exists() or (ROOT / f"{name}.ipynb").exists(), name


@pytest.mark.slow
def test_strict_book_build_has_no_warnings_and_colab_links(tmp_path):
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    assert jb, "jupyter-book is not installed in this environment"
    build = subprocess.run(
        [
            jb,
            "build",
            str(ROOT),
            "--warningiserror",
            "--nitpick",
            "--keep-going",
            "--all",
            "--path-output",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    log = build.stdout + build.stderr
    warnings = [line for line in log.splitlines() if re.search(r"WARNING|ERROR", line)]
    assert build.returncode == 0 and not warnings, "\n".join(warnings) or log[-3000:]
    html = tmp_path / "_build" / "html"
    for nb in NOTEBOOKS:
        page = (html / "notebooks" / f"{nb.stem}.html").read_text()
        assert f'href="{colab_url(nb.name)}"' in page, f"{nb.stem}.html lacks its Colab link"
        assert "attnbook @ git+" not in page, f"{nb.stem}.html shows the setup cell"
        chapter = int(nb.stem.split("_")[0])
        titles = re.findall(
            r'<p class="admonition-title">\s*<span class="caption-number">Exercise ([\d.]+) </span>', page
        )
        expected = [f"{chapter}.{k}" for k in range(1, len(titles) + 1)]
        assert titles and titles == expected, f"{nb.stem}.html numbers its exercises {titles}, not {expected}"


def test_exercises_are_numbered_within_their_chapter():
    from types import SimpleNamespace

    from attnbook.book import chapter_number, number_exercises_by_chapter

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
