"""Style: ruff finds nothing in the library and the tests, and the formatted files stay formatted.

The rules are in pyproject.toml ([tool.ruff]). The whole of src/ and tests/ is
formatted (the library modules whose code the chapters show were formatted last,
with the chapters executed again).
"""

from __future__ import annotations

import subprocess
import sys

from notebook_index import ROOT

#: What `ruff format` keeps formatted, and where lines stay within the configured length.
FORMATTED = ["src", "tests"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    try:
        import ruff  # noqa: F401
    except ImportError:
        raise AssertionError("ruff is not installed in this environment (requirements.txt: ruff)") from None
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_finds_nothing_in_src_and_tests():
    result = _ruff("check", "--no-cache", "--output-format", "concise", "src", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_formatted_files_stay_formatted_and_within_the_line_length():
    result = _ruff("format", "--no-cache", "--check", "--diff", *FORMATTED)
    assert result.returncode == 0, result.stdout + result.stderr
    result = _ruff("check", "--no-cache", "--output-format", "concise", "--extend-select", "E501", *FORMATTED)
    assert result.returncode == 0, result.stdout + result.stderr
