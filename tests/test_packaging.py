"""The library installs as a package (Colab installs it from the repository): every module is in the wheel,
its license is declared the current way, and building it prints no warning (a Colab setup cell shows them all)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

from notebook_index import ROOT

# Warnings a build can print: Python warning classes (SetuptoolsDeprecationWarning, UserWarning, ...),
# deprecation notices, and anything about the license.
WARNING = re.compile(r"[A-Z]\w*Warning\b|deprecat|licen[cs]e.*(warn|invalid|deprecat)", re.I)


@pytest.fixture(scope="module")
def wheel_build(tmp_path_factory):
    """Build the wheel from a copy, so the checkout gets no build/ or egg-info folders; return (wheel, build log)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    build = subprocess.run(
        # verbose: pip then shows what the build backend prints, warnings included
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w", str(tmp), str(source)],
        capture_output=True,
        text=True,
    )
    log = build.stdout + build.stderr
    assert build.returncode == 0, log[-3000:]
    (wheel,) = tmp.glob("attnbook-*.whl")
    return wheel, log


@pytest.mark.slow
def test_wheel_contains_every_module(wheel_build):
    wheel, _ = wheel_build
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src" / "attnbook").rglob("*.py")}
    assert modules and modules <= names, f"missing from the wheel: {sorted(modules - names)}"


@pytest.mark.slow
def test_wheel_contains_every_table_the_library_reads(wheel_build):
    """The JSON beside the modules (the diagrams' labels in Chinese, the checkers' words): Colab has nothing else."""
    wheel, _ = wheel_build
    names = set(zipfile.ZipFile(wheel).namelist())
    tables = {p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src" / "attnbook").rglob("*.json")}
    assert "attnbook/diagrams/zh.json" in tables and tables <= names, f"missing: {sorted(tables - names)}"


@pytest.mark.slow
def test_building_the_wheel_prints_no_warning(wheel_build):
    _, log = wheel_build
    backend = log[log.find("Building wheel for attnbook") :]  # what the build printed, not pip's own preamble
    warnings = [line.strip() for line in backend.splitlines() if WARNING.search(line)]
    assert not warnings, "building the wheel warns:\n" + "\n".join(warnings)


@pytest.mark.slow
def test_wheel_declares_the_license_as_spdx(wheel_build):
    wheel, _ = wheel_build
    with zipfile.ZipFile(wheel) as archive:
        info = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(info).decode()
        licenses = [n for n in archive.namelist() if ".dist-info/licenses/" in n]
    assert "License-Expression: MIT" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()
    assert [n.rsplit("/", 1)[-1] for n in licenses] == ["LICENSE"]
    assert "MIT License" in (ROOT / "LICENSE").read_text()


def test_pyproject_needs_a_setuptools_that_reads_spdx_licenses():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT", "license as an SPDX expression, not a table"
    assert pyproject["project"]["license-files"] == ["LICENSE"]
    (setuptools,) = [r for r in pyproject["build-system"]["requires"] if r.startswith("setuptools")]
    floor = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", setuptools)
    assert floor and int(floor.group(1)) >= 77, f"{setuptools}: setuptools reads SPDX licenses from 77 on"
    requirements = (ROOT / "requirements.txt").read_text()
    assert re.search(r"^setuptools>=(7[7-9]|[89]\d|\d{3})\b", requirements, re.M), (
        "the environment builds with setuptools >= 77 too"
    )
