"""The diagram toolkit: boxes, anchors, arrows, clear errors; every chapter's diagrams draw."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from matplotlib.figure import Figure

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
    with pytest.raises(ValueError, match="unknown label_side"):
        d.arrow("a", (3, 3), shape="(B, T)", label_side="top")


def test_routed_arrow_labels_its_longest_segment():
    d = Diagram(6, 4)
    d.box("a", 1, 0.5, "a")
    d.box("b", 5, 3.5, "b", fill="#ffeedd")
    d.arrow("a", "b", shape="(B, S)", label_side="above", start_side="top", end_side="left", via=[(1, 3.5)])
    (label,) = [t for t in d.ax.texts if t.get_text() == "(B, S)"]
    x, y = label.get_position()
    assert y > 3.5 and 1 < x < 5, "the label sits above the long horizontal segment"
    assert d.ax.patches[1].get_facecolor()[:3] == pytest.approx((1.0, 0xEE / 255, 0xDD / 255))


CHAPTER_MODULES = [m.name for m in pkgutil.iter_modules(diagrams.__path__)]


@pytest.mark.parametrize("module", CHAPTER_MODULES)
def test_every_chapter_diagram_draws(module):
    mod = importlib.import_module(f"attnbook.diagrams.{module}")
    functions = [getattr(mod, name) for name in mod.__all__]
    assert functions, f"{module} exports no diagram"
    for fn in functions:
        if inspect.isfunction(fn):
            figure = fn()
            assert isinstance(figure, Figure) and figure.axes, f"{module}.{fn.__name__} drew nothing"
            _assert_texts_inside_and_apart(figure, f"{module}.{fn.__name__}")


def _assert_texts_inside_and_apart(figure, name):
    """Every label lies on the card, and no two labels overlap (a clipped or colliding label is unreadable)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(figure).get_renderer()
    card = figure.bbox
    boxes = []
    for ax in figure.axes:
        for text in ax.texts:
            if not text.get_text().strip():
                continue
            box = text.get_window_extent(renderer)
            assert (
                card.x0 - 1 <= box.x0 and box.x1 <= card.x1 + 1 and card.y0 - 1 <= box.y0 and box.y1 <= card.y1 + 1
            ), f"{name}: the label {text.get_text()!r} runs off the card"
            boxes.append((text.get_text(), box.padded(-1)))
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            assert not box_a.overlaps(box_b), f"{name}: the labels {a!r} and {b!r} overlap"


def test_the_layout_check_catches_clipped_and_colliding_labels():
    d = Diagram(4, 3)
    d.box("a", 2, 1.5, "a label that is far too long for this card, and longer, and longer still")
    with pytest.raises(AssertionError, match="runs off the card"):
        _assert_texts_inside_and_apart(d.figure, "planted")
    d = Diagram(4, 3)
    d.box("a", 2, 1.0, "embedding")
    d.note(2.1, 1.05, "a note on top")
    with pytest.raises(AssertionError, match="overlap"):
        _assert_texts_inside_and_apart(d.figure, "planted")
