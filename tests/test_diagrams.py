"""The diagram toolkit: boxes, anchors, arrows, clear errors; every chapter's diagrams draw."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import attnbook.diagrams as diagrams
from attnbook.diagrams import Box, Diagram


def test_box_anchors():
    box = Box(2.0, 1.0, 2.0, 0.5)
    assert box.anchor("top") == (2.0, 1.25) and box.anchor("left") == (1.0, 1.0)
    with pytest.raises(ValueError, match="unknown side"):
        box.anchor("up")


def test_diagram_draws_boxes_and_arrows_on_a_white_card():
    d = Diagram(4, 3)
    d.box("a", 2, 0.5, "tokens", role="input")
    d.box("b", 2, 2.0, "embedding", role="embed")
    d.arrow("a", "b", shape="(B, T)")
    d.arrow((0.5, 0.5), "b")
    assert d.figure.get_facecolor()[:3] == (1.0, 1.0, 1.0)
    texts = [t.get_text() for t in d.ax.texts]
    assert {"tokens", "embedding", "(B, T)"} <= set(texts)


def test_diagram_errors_name_the_problem():
    d = Diagram(4, 3)
    d.box("a", 2, 0.5, "tokens")
    with pytest.raises(ValueError, match="already has a box named 'a'"):
        d.box("a", 2, 2, "again")
    with pytest.raises(ValueError, match="unknown role"):
        d.box("c", 2, 2, "x", role="fancy")
    with pytest.raises(KeyError, match="no box named 'z'"):
        d.arrow("a", "z")
    with pytest.raises(ValueError, match="positive size"):
        Diagram(0, 3)


CHAPTER_MODULES = [m.name for m in pkgutil.iter_modules(diagrams.__path__)]


@pytest.mark.parametrize("module", CHAPTER_MODULES)
def test_every_chapter_diagram_draws(module):
    mod = importlib.import_module(f"attnbook.diagrams.{module}")
    functions = [getattr(mod, name) for name in mod.__all__]
    assert functions, f"{module} exports no diagram"
    for fn in functions:
        if inspect.isfunction(fn):
            figure = fn()
            assert figure.axes, f"{module}.{fn.__name__} drew nothing"
