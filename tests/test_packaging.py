"""The library installs as a package (Colab installs it from the repository): every module is in the wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT


@pytest.mark.slow
def test_wheel_contains_every_module(tmp_path):
    source = tmp_path / "source"  # build from a copy, so the checkout gets no build/ or egg-info folders
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("attnbook-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src" / "attnbook").rglob("*.py")}
    assert modules and modules <= names, f"missing from the wheel: {sorted(modules - names)}"
