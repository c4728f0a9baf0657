"""Schematic diagrams of the book's architectures, drawn by code.

Each chapter's diagrams live in the module named after its notebook (for
example ``attnbook.diagrams.ch07_transformer``); this module holds the small
toolkit they share: a :class:`Diagram` made of labelled boxes and arrows that
carry tensor shapes. Diagrams are drawn on a white card with dark ink, so they
read the same in the book's light and dark themes, in Jupyter and in Colab. A
notebook shows one with a code cell tagged ``remove-input`` (the book shows the
figure only).

Every diagram speaks the book's languages. A chapter's function takes
``language``: in English (the default) it returns the matplotlib Figure itself,
shown as a PNG like every figure of the book; in another language (``"zh"``,
the Chinese edition's) its labels come from the table ``<language>.json`` beside
this module, and it returns an :class:`SvgFigure`, shown as SVG whose text stays
text, so that the reader's browser draws the words with its own fonts (Google
Colab has no Chinese font for matplotlib to draw with). Tensor shapes, formulas
and names are the same in every language. The table is written from the
catalogue ``locales/zh_CN/LC_MESSAGES/diagrams.po`` by
``python -m attnbook.book.edition build`` (see :mod:`attnbook.book.edition_diagrams`).
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
import struct
import warnings
import zlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

__all__ = ["Diagram", "Box", "PALETTE", "SvgFigure", "ENGLISH", "languages", "labels"]

#: Fills by role; the ink is always dark, the card always white.
PALETTE = {
    "input": "#e8e8e8",
    "embed": "#fde2c4",
    "attention": "#cfe3f7",
    "ffn": "#d6efd0",
    "norm": "#fff2b3",
    "rnn": "#e6d8f2",
    "output": "#f7d0d0",
    "plain": "#ffffff",
}
INK = "#222222"
ARROW = "#444444"
SHAPE = "#8a3b00"  # tensor shapes on arrows: a dark orange that reads on white

#: The language the diagrams are written in; every other language is a table of translations.
ENGLISH = "en"
#: Chinese, Japanese and Korean characters, and the full-width forms they are written with.
_WIDE = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def languages() -> list[str]:
    """The languages a diagram can be drawn in: English, and each language that has a table beside this module."""
    tables = sorted(f.name[: -len(".json")] for f in resources.files(__name__).iterdir() if f.name.endswith(".json"))
    return [ENGLISH, *tables]


@cache
def labels(language: str) -> dict[str, str]:
    """The translations of the diagrams' labels into ``language``: {English label: label in that language}."""
    if language == ENGLISH:
        return {}
    if language not in languages():
        raise ValueError(f"no diagrams in {language!r}: the languages are {languages()}")
    table = json.loads((resources.files(__name__) / f"{language}.json").read_text(encoding="utf-8"))
    return dict(table["labels"])


@dataclass(frozen=True)
class Box:
    """A box's position (centre ``x, y``) and size, in the diagram's units."""

    x: float
    y: float
    w: float
    h: float

    def anchor(self, side: str) -> tuple[float, float]:
        """A point on the box: ``"top"``, ``"bottom"``, ``"left"``, ``"right"`` or ``"center"``."""
        points = {
            "top": (self.x, self.y + self.h / 2),
            "bottom": (self.x, self.y - self.h / 2),
            "left": (self.x - self.w / 2, self.y),
            "right": (self.x + self.w / 2, self.y),
            "center": (self.x, self.y),
        }
        if side not in points:
            raise ValueError(f"unknown side {side!r}: use one of {sorted(points)}")
        return points[side]


class Diagram:
    """A canvas ``width`` x ``height`` units (1 unit = ``scale`` inches) for boxes and arrows.

    >>> d = Diagram(6, 4)
    >>> d.box("x", 3, 0.5, "tokens (B, T)", role="input")
    >>> d.box("e", 3, 2, "embedding", role="embed")
    >>> d.arrow("x", "e", shape="(B, T)")
    >>> figure = d.figure   # a matplotlib Figure; in a notebook, end the cell with it
    """

    def __init__(
        self, width: float, height: float, scale: float = 1.0, title: str | None = None, language: str | None = None
    ) -> None:
        from matplotlib.figure import Figure

        if width <= 0 or height <= 0:
            raise ValueError(f"a diagram needs a positive size, got {width} x {height}")
        self.language = language or ENGLISH
        self._labels = labels(self.language)
        self.width, self.height = width, height
        self.figure = Figure(figsize=(width * scale, height * scale), facecolor="white")
        self.ax = self.figure.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_aspect("equal")
        self.ax.axis("off")
        self.boxes: dict[str, Box] = {}
        if title:
            self.ax.text(
                width / 2, height - 0.15, self.say(title), ha="center", va="top", fontsize=11, weight="bold", color=INK
            )

    def say(self, text: str) -> str:
        """``text`` in the diagram's language: its translation, or itself in English or where the table has none.

        Every word a diagram draws passes through here, so that one table translates it. A translation keeps a
        formula out of a sentence in Chinese (mathtext would place each Chinese character by a Latin font's
        widths): it writes the symbols in Unicode (sₜ₋₁, QKᵀ).
        """
        said = self._labels.get(text, text)
        if said != text and "$" in said and _WIDE.search(said):
            raise ValueError(f"the {self.language} label {said!r} mixes words and a $formula$: write it in Unicode")
        return said

    def output(self):
        """What a chapter's function returns for a notebook cell to end with.

        In English, the matplotlib Figure (the notebook shows it as a PNG); in another language, an
        :class:`SvgFigure`, whose text the reader's browser draws.
        """
        return self.figure if self.language == ENGLISH else SvgFigure(self.figure)

    def box(
        self,
        name: str,
        x: float,
        y: float,
        label: str,
        *,
        w: float = 2.2,
        h: float = 0.55,
        role: str = "plain",
        fontsize: float = 9,
        fill: str | None = None,
    ) -> Box:
        """A rounded box centred at ``(x, y)``, filled by ``role`` (see :data:`PALETTE`)
        or by a light ``fill`` colour.
        """
        from matplotlib.patches import FancyBboxPatch

        if name in self.boxes:
            raise ValueError(f"the diagram already has a box named {name!r}")
        if role not in PALETTE:
            raise ValueError(f"unknown role {role!r}: use one of {sorted(PALETTE)}")
        patch = FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=fill or PALETTE[role],
            edgecolor=INK,
            linewidth=1.0,
        )
        self.ax.add_patch(patch)
        self.ax.text(x, y, self.say(label), ha="center", va="center", fontsize=fontsize, color=INK)
        self.boxes[name] = found = Box(x, y, w, h)
        return found

    def region(self, x0: float, y0: float, x1: float, y1: float, label: str | None = None) -> None:
        """A dashed frame around a group of boxes (a layer repeated N times), labelled at its top left."""
        from matplotlib.patches import FancyBboxPatch

        self.ax.add_patch(
            FancyBboxPatch(
                (x0, y0),
                x1 - x0,
                y1 - y0,
                boxstyle="round,pad=0.02,rounding_size=0.15",
                facecolor="none",
                edgecolor="#777777",
                linewidth=1.0,
                linestyle="--",
            )
        )
        if label:
            self.ax.text(
                x0 + 0.1, y1 - 0.1, self.say(label), ha="left", va="top", fontsize=9, color="#555555", style="italic"
            )

    def _point(self, ref, side: str) -> tuple[float, float]:
        if isinstance(ref, str):
            if ref not in self.boxes:
                raise KeyError(f"no box named {ref!r} in this diagram (boxes: {sorted(self.boxes)})")
            return self.boxes[ref].anchor(side)
        x, y = ref
        return float(x), float(y)

    def arrow(
        self,
        start,
        end,
        *,
        shape: str | None = None,
        start_side: str | None = None,
        end_side: str | None = None,
        label_side: str = "right",
        curve: float = 0.0,
        dashed: bool = False,
        via=(),
    ) -> None:
        """An arrow from ``start`` to ``end`` (box names or ``(x, y)`` points), with the tensor ``shape`` it carries.

        ``label_side`` puts the shape ``"right"`` or ``"left"`` of a vertical
        arrow, ``"above"`` or ``"below"`` a horizontal one. ``via`` lists points
        the arrow passes through on its way (to route it around boxes with
        straight segments); the shape then labels its longest segment.

        Between boxes the arrow leaves the side facing the target (bottom to top
        by default when the target is above).
        """
        if label_side not in _LABEL_SIDES:
            raise ValueError(f"unknown label_side {label_side!r}: use one of {sorted(_LABEL_SIDES)}")
        via = [(float(x), float(y)) for x, y in via]
        sx, sy = self._point(start, "center")
        ex, ey = self._point(end, "center")
        if start_side is None:
            start_side = _facing(sx, sy, *(via[0] if via else (ex, ey)))
        if end_side is None:
            end_side = _facing(ex, ey, *(via[-1] if via else (sx, sy)))
        points = [self._point(start, start_side), *via, self._point(end, end_side)]
        style = "--" if dashed else "-"
        for (x0, y0), (x1, y1) in zip(points[:-2], points[1:-1]):
            self.ax.plot([x0, x1], [y0, y1], color=ARROW, lw=1.2, linestyle=style, solid_capstyle="butt")
        self.ax.annotate(
            "",
            xy=points[-1],
            xytext=points[-2],
            arrowprops=dict(
                arrowstyle="-|>",
                color=ARROW,
                lw=1.2,
                shrinkA=0 if via else 1,
                shrinkB=1,
                linestyle=style,
                connectionstyle=f"arc3,rad={curve}",
            ),
        )
        if shape:
            p0, p1 = max(zip(points[:-1], points[1:]), key=lambda seg: math.dist(*seg))
            mx, my = (p0[0] + p1[0]) / 2, (p0[1] + p1[1]) / 2
            dx, dy, ha, va = _LABEL_SIDES[label_side]
            self.ax.text(mx + dx, my + dy, self.say(shape), ha=ha, va=va, fontsize=8, color=SHAPE, family="monospace")

    def note(self, x: float, y: float, text: str, *, fontsize: float = 8, ha: str = "center") -> None:
        """Free text (an explanation beside the boxes)."""
        self.ax.text(x, y, self.say(text), ha=ha, va="center", fontsize=fontsize, color="#444444")


#: Where an arrow's shape label goes: offset from the arrow's middle, and alignment.
_LABEL_SIDES = {
    "right": (0.08, 0.0, "left", "center"),
    "left": (-0.08, 0.0, "right", "center"),
    "above": (0.0, 0.06, "center", "bottom"),
    "below": (0.0, -0.06, "center", "top"),
    "center": (0.0, 0.0, "center", "center"),
}


def _facing(x0: float, y0: float, x1: float, y1: float) -> str:
    """The side of a box at ``(x0, y0)`` that faces a point ``(x1, y1)``."""
    dx, dy = x1 - x0, y1 - y0
    if abs(dy) >= abs(dx):
        return "top" if dy > 0 else "bottom"
    return "right" if dx > 0 else "left"


#: How an :class:`SvgFigure` is written: text as text (drawn by the reader's fonts), measured by the font that
#: matplotlib ships (so that the file is the same on every machine, whatever fonts it has), ids from a fixed salt.
_SVG_STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "attnbook",
    "svg.image_inline": True,
    "font.family": ["sans-serif"],
    "font.sans-serif": ["DejaVu Sans"],
    "font.monospace": ["DejaVu Sans Mono"],
}
#: No date and no program version in the file: the same figure is the same file.
_SVG_METADATA = {"Date": None, "Creator": None}
_EMBEDDED_PNG = re.compile(r"data:image/png;base64,\s*([A-Za-z0-9+/=\s]+)")


class SvgFigure:
    """A figure shown as SVG whose text stays text: the reader's browser draws the words with its own fonts.

    That is how a diagram reaches a Chinese reader everywhere: matplotlib can draw Chinese only with a Chinese
    font, which Google Colab does not have, while every browser that shows Chinese text has one. The SVG is the
    same on every machine: no date or version in it, ids from a fixed salt, and a raster inside it (a heatmap)
    kept unsampled, pixel for pixel, and stored without compression.
    """

    def __init__(self, figure) -> None:
        self.figure = figure

    def svg(self) -> str:
        """The figure as an SVG document."""
        import matplotlib as mpl
        from matplotlib.image import AxesImage

        for image in self.figure.findobj(AxesImage):
            image.set_interpolation("none")  # the raster itself, scaled by the browser
        buffer = io.StringIO()
        with mpl.rc_context(_SVG_STYLE), warnings.catch_warnings():
            # DejaVu Sans has no Chinese glyphs: it only measures where each line starts; the browser draws them.
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
            self.figure.savefig(buffer, format="svg", metadata=_SVG_METADATA)
        return _stable_images(buffer.getvalue())

    def _repr_svg_(self) -> str:
        return self.svg()

    def __repr__(self) -> str:
        return repr(self.figure)


def _stable_images(svg: str) -> str:
    """``svg`` with each embedded PNG written again by :func:`_stored_png` and named by its pixels.

    matplotlib's PNGs are compressed by whatever zlib the imaging library was built with, which differs between
    machines and releases; the pixels do not.
    """
    from PIL import Image

    def rewrite(element: str) -> str:
        found = _EMBEDDED_PNG.search(element)
        if found is None:
            return element
        with Image.open(io.BytesIO(base64.b64decode(found.group(1)))) as image:
            rgba = image.convert("RGBA")
            png = _stored_png(rgba.tobytes(), *rgba.size)
        element = element.replace(found.group(0), "data:image/png;base64,\n" + base64.b64encode(png).decode("ascii"))
        return re.sub(r'\bid="image[0-9a-f]*"', f'id="image{zlib.crc32(png):08x}"', element)

    return re.sub(r"<image\b[^>]*>", lambda m: rewrite(m.group(0)), svg)


def _stored_png(rgba: bytes, width: int, height: int) -> bytes:
    """A PNG of ``width`` x ``height`` RGBA pixels, its data in stored (uncompressed) deflate blocks: the same bytes
    on every machine."""
    rows = b"".join(b"\x00" + rgba[y * width * 4 : (y + 1) * width * 4] for y in range(height))
    blocks = [rows[i : i + 65535] for i in range(0, len(rows), 65535)] or [b""]
    deflate = b"\x78\x01" + b"".join(
        bytes([i == len(blocks) - 1]) + struct.pack("<HH", len(b), len(b) ^ 0xFFFF) + b for i, b in enumerate(blocks)
    )
    deflate += struct.pack(">I", zlib.adler32(rows))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", deflate) + chunk(b"IEND", b"")
