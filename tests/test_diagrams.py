"""The diagram toolkit: boxes, anchors, arrows, clear errors; every chapter's diagrams draw, in every language.

A diagram in another language than English is SVG whose text the reader's browser draws: the tests hold every
label translated, its layout readable with Chinese characters as wide as they are, and the SVG the same on
every machine.
"""

from __future__ import annotations

import base64
import importlib
import inspect
import io
import pkgutil
import re

import pytest
from matplotlib.figure import Figure

import attnbook.diagrams as diagrams
from attnbook.book.code_words import has_words
from attnbook.book.edition_diagrams import drawn_texts, labels, svg_texts
from attnbook.diagrams import Box, Diagram, SvgFigure


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


CHAPTER_MODULES = [m.name for m in pkgutil.iter_modules(diagrams.__path__) if m.name.startswith("ch")]
OTHER_LANGUAGES = [language for language in diagrams.languages() if language != diagrams.ENGLISH]
#: A Chinese character, or a full-width sign, as wide as it is drawn: one em.
_WIDE = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef]")


def _functions(module):
    mod = importlib.import_module(f"attnbook.diagrams.{module}")
    functions = [getattr(mod, name) for name in mod.__all__]
    assert functions and all(inspect.isfunction(fn) for fn in functions), f"{module} exports no diagram"
    return functions


@pytest.mark.parametrize("module", CHAPTER_MODULES)
def test_every_chapter_diagram_draws(module):
    for fn in _functions(module):
        figure = fn()
        assert isinstance(figure, Figure) and figure.axes, f"{module}.{fn.__name__} drew nothing"
        _assert_texts_inside_and_apart(figure, f"{module}.{fn.__name__}")


@pytest.mark.parametrize("language", OTHER_LANGUAGES)
@pytest.mark.parametrize("module", CHAPTER_MODULES)
def test_every_chapter_diagram_draws_in_every_language_with_room_for_its_words(module, language):
    for fn in _functions(module):
        drawn = fn(language=language)
        assert isinstance(drawn, SvgFigure), f"{module}.{fn.__name__}: a diagram in {language} is shown as SVG"
        assert repr(drawn) == repr(fn()), "the same figure, and the same plain-text form as the English one"
        _assert_texts_inside_and_apart(drawn.figure, f"{module}.{fn.__name__} ({language})", wide=True)


@pytest.mark.parametrize("language", OTHER_LANGUAGES)
def test_every_label_with_words_has_a_translation(language):
    table = diagrams.labels(language)
    found = labels()
    assert len(found) > 50, "are the diagrams all there?"
    missing = [text for text, _ in found if text not in table]
    assert not missing, f"labels without a {language} translation (python -m attnbook.book.edition build): {missing}"
    for fn in [f for module in CHAPTER_MODULES for f in _functions(module)]:
        english = [t for t in drawn_texts(fn()) if has_words(t)]
        drawn = drawn_texts(fn(language=language).figure)
        assert not set(english) & set(drawn) - {table[t] for t in english}, (
            f"{fn.__name__} draws English labels in {language}: {sorted(set(english) & set(drawn))}"
        )


def test_a_translated_label_keeps_formulas_out_of_its_words():
    d = Diagram(4, 3, language="zh")
    d._labels = {"previous state $s_{t-1}$": "上一个状态 $s_{t-1}$", "state": "状态 sₜ₋₁"}
    with pytest.raises(ValueError, match="mixes words and a \\$formula\\$"):
        d.say("previous state $s_{t-1}$")
    assert d.say("state") == "状态 sₜ₋₁" and d.say("$W_q$") == "$W_q$" and d.say("GRU") == "GRU"
    with pytest.raises(ValueError, match="no diagrams in 'fr'"):
        Diagram(4, 3, language="fr")


def test_the_svg_keeps_its_text_as_text_and_is_the_same_on_every_machine():
    import matplotlib as mpl
    from PIL import Image

    from attnbook.diagrams.ch06_positional_encoding import positions_added_to_embeddings

    first = positions_added_to_embeddings(language="zh").svg()
    # Whatever the process sets and the machine has (a Chinese font listed first, where it is installed, would
    # measure the labels differently), the file is the same.
    settings = {"svg.fonttype": "path", "svg.hashsalt": None, "font.sans-serif": ["Noto Sans CJK SC", "Arial"]}
    with mpl.rc_context(settings):
        again = positions_added_to_embeddings(language="zh").svg()
    assert first == again, "the SVG depends on the process's settings"
    assert "位置编码表" in svg_texts(first) and "<dc:date>" not in first and "Matplotlib v" not in first
    assert "font-family: 'DejaVu Sans', sans-serif" in first, "text as text, in the reader's sans-serif fonts"
    (data,) = re.findall(r"data:image/png;base64,\s*([A-Za-z0-9+/=\s]+)", first)
    with Image.open(io.BytesIO(base64.b64decode(data))) as table:
        assert table.size == (24, 48), "the heatmap is stored pixel for pixel, 24 features by 48 positions"


def test_a_stored_png_decodes_to_its_pixels():
    from PIL import Image

    pixels = bytes(range(256)) * 3  # 192 RGBA pixels
    png = diagrams._stored_png(pixels, 16, 12)
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (16, 12) and image.mode == "RGBA" and image.tobytes() == pixels
    assert diagrams._stored_png(pixels, 16, 12) == png


def _assert_texts_inside_and_apart(figure, name, wide=False):
    """Every label lies on the card, and no two labels overlap (a clipped or colliding label is unreadable).

    ``wide``: the labels hold Chinese, which matplotlib measures with a font that has none; each wide character
    is measured as a "W" (as wide as a Chinese character, one em) to see the room the browser's font takes.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    texts = [t for ax in figure.axes for t in [*ax.texts, ax.title, ax.xaxis.label] if t.get_text().strip()]
    if wide:
        for text in texts:
            text.set_text(_WIDE.sub("W", text.get_text()))
    canvas = FigureCanvasAgg(figure)
    canvas.draw()  # places the axes' titles and labels
    renderer = canvas.get_renderer()
    card = figure.bbox
    boxes = []
    for text in texts:
        box = text.get_window_extent(renderer)
        assert card.x0 - 1 <= box.x0 and box.x1 <= card.x1 + 1 and card.y0 - 1 <= box.y0 and box.y1 <= card.y1 + 1, (
            f"{name}: the label {text.get_text()!r} runs off the card"
        )
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
