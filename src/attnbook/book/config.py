"""The book's configuration: where it lives, and everything derived from ``_config.yml``.

The repository URL and branch live in one place, ``_config.yml``. Everything
that points at the repository is derived from there: the Colab badge at the
top of each notebook, the setup cell that installs the library in Colab, the
launch buttons of the built book, and the address of the published book
(GitHub Pages, which the README links).
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "D2L_REQUIREMENT",
    "SETUP_TAG",
    "book_root",
    "book_config",
    "repository",
    "colab_url",
    "badge_markdown",
    "pages_url",
    "setup_cell_source",
]

#: d2l is installed without its dependencies (its hard pins break on Python 3.12+ and in Colab).
D2L_REQUIREMENT = "d2l==1.0.3"
#: The tag that hides the setup cell in the book.
SETUP_TAG = "remove-cell"
COLAB = "https://colab.research.google.com"
BADGE_IMAGE = f"{COLAB}/assets/colab-badge.svg"


def book_root(start: Path | None = None) -> Path:
    """The folder holding ``_config.yml``: searched upwards from ``start`` (default: here)."""
    candidates = [Path(start or Path.cwd()).resolve()]
    candidates.append(Path(__file__).resolve().parents[3])  # src/attnbook/book/config.py -> the repository
    for first in candidates:
        for folder in (first, *first.parents):
            if (folder / "_config.yml").is_file():
                return folder
    raise FileNotFoundError("no _config.yml found here or above: run this from inside the course repository")


def book_config(root: Path | None = None) -> dict:
    """``_config.yml`` as a dict."""
    import yaml

    path = (root or book_root()) / "_config.yml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def repository(root: Path | None = None) -> tuple[str, str]:
    """``(url, branch)`` of the repository, from ``_config.yml``."""
    repo = book_config(root).get("repository") or {}
    url, branch = repo.get("url"), repo.get("branch")
    if not url or not branch:
        raise ValueError("_config.yml must set repository.url and repository.branch")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
        raise ValueError(f"repository.url must look like https://github.com/OWNER/NAME, got {url!r}")
    return url, branch


def colab_url(notebook: str | Path, root: Path | None = None, folder: str = "notebooks") -> str:
    """The Colab address of ``<folder>/<name>.ipynb`` on the configured repository and branch.

    ``folder`` is ``notebooks`` for the English edition, ``zh/notebooks`` for the Chinese one.
    """
    url, branch = repository(root)
    name = Path(notebook).name
    return f"{COLAB}/github/{url.removeprefix('https://github.com/')}/blob/{branch}/{folder}/{name}"


def pages_url(root: Path | None = None) -> str:
    """The address of the published book: the GitHub Pages site of the configured repository.

    ``https://github.com/OWNER/NAME`` publishes at ``https://owner.github.io/NAME/`` (host names are
    lower case), and a repository named ``OWNER.github.io`` at the root of that host.
    """
    url, _ = repository(root)
    owner, name = url.removeprefix("https://github.com/").split("/")
    host = f"{owner.lower()}.github.io"
    return f"https://{host}/" if name.lower() == host else f"https://{host}/{name}/"


def badge_markdown(notebook: str | Path, root: Path | None = None, folder: str = "notebooks") -> str:
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(notebook, root, folder)})"


def setup_cell_source(root: Path | None = None, language: str | None = None) -> str:
    """The first code cell of every notebook (hidden in the book).

    ``language`` is the Chinese edition's ``"zh"``: its notebooks call ``setup(language="zh")``, so that the
    checkers of the exercises speak Chinese (:mod:`attnbook.language`); the English ones call ``setup()``.
    """
    url, branch = repository(root)
    call = "setup()" if language is None else f'setup(language="{language}")'
    return (
        "# Setup, hidden in the book. In Colab: install the course library and d2l.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet "attnbook @ git+{url}@{branch}"\n'
        f'    %pip install --quiet --no-deps "{D2L_REQUIREMENT}"\n'
        "\n"
        "from attnbook.notebook import setup\n"
        "\n"
        f"{call}"
    )
