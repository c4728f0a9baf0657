"""Schematic diagrams of the book's architectures, drawn by code.

Each chapter's diagrams live in the module named after its notebook (for
example ``attnbook.diagrams.ch07_transformer``); this module holds the small
toolkit they share: a :class:`Diagram` made of labelled boxes and arrows that
carry tensor shapes. Diagrams are drawn on a white card with dark ink, so they
read the same in the book's light and dark themes, in Jupyter and in Colab. A
notebook shows one with a code cell tagged ``remove-input`` (the book shows the
figure only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Diagram", "Box", "PALETTE"]

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

    def __init__(self, width: float, height: float, scale: float = 1.0, title: str | None = None) -> None:
        from matplotlib.figure import Figure

        if width <= 0 or height <= 0:
            raise ValueError(f"a diagram needs a positive size, got {width} x {height}")
        self.width, self.height = width, height
        self.figure = Figure(figsize=(width * scale, height * scale), facecolor="white")
        self.ax = self.figure.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_aspect("equal")
        self.ax.axis("off")
        self.boxes: dict[str, Box] = {}
        if title:
            self.ax.text(width / 2, height - 0.15, title, ha="center", va="top", fontsize=11, weight="bold", color=INK)

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
        self.ax.text(x, y, label, ha="center", va="center", fontsize=fontsize, color=INK)
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
            self.ax.text(x0 + 0.1, y1 - 0.1, label, ha="left", va="top", fontsize=9, color="#555555", style="italic")

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
            self.ax.text(mx + dx, my + dy, shape, ha=ha, va=va, fontsize=8, color=SHAPE, family="monospace")

    def note(self, x: float, y: float, text: str, *, fontsize: float = 8, ha: str = "center") -> None:
        """Free text (an explanation beside the boxes)."""
        self.ax.text(x, y, text, ha=ha, va="center", fontsize=fontsize, color="#444444")


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
