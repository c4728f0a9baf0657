"""The environment the course is tested with: d2l without its pins, and the one d2l version."""

from __future__ import annotations

import re

from attnbook.book.config import D2L_REQUIREMENT
from notebook_index import ROOT


def test_d2l_torch_imports_in_our_environment():
    from d2l import torch as d2l

    # the pieces later chapters compare against are there
    for name in ("AdditiveAttention", "DotProductAttention", "MultiHeadAttention", "masked_softmax", "bleu"):
        assert hasattr(d2l, name), name


def test_one_d2l_version_everywhere():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^D2L\s*:=\s*{re.escape(D2L_REQUIREMENT)}\s*$", makefile, re.M), (
        f"the Makefile must install {D2L_REQUIREMENT}, the version the Colab setup cell installs"
    )


def test_torch_pinned_to_the_tested_release():
    import torch

    pins = dict(
        line.split("==")
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert torch.__version__.split("+")[0] == pins["torch"]


def test_importing_the_package_is_light():
    import subprocess
    import sys

    code = (
        "import sys, attnbook; "
        "heavy = [m for m in ('torch', 'd2l', 'torchvision', 'pandas', 'matplotlib') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"`import attnbook` pulled in {out}"
