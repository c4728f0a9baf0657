"""Chapter 5's diagram: the heads split off by a reshape, attend side by side, and merge."""

from __future__ import annotations

from attnbook.diagrams import INK, PALETTE, Diagram

__all__ = ["heads_split_and_merged"]

_HEAD_FILLS = [PALETTE["attention"], PALETTE["ffn"], PALETTE["embed"], PALETTE["rnn"]]


def heads_split_and_merged(language: str | None = None):
    """Multi-head attention: project, split the width into ``h`` heads, attend per head, merge, mix.

    Below the split, one token's ``d`` features coloured by the head that
    receives them: head ``i`` gets the ``i``-th slice of ``d / h`` features.

    Drawn in ``language`` (English by default; see :mod:`attnbook.diagrams`).
    """
    from matplotlib.patches import Rectangle

    d = Diagram(19.2, 5.6, scale=0.6, language=language)
    y = 3.2
    d.box("x", 0.75, y, "$X$", w=1.0, role="input")
    d.box("proj", 3.6, y, "$W_q, W_k, W_v$", w=2.0, role="plain")
    d.box("split", 7.85, y, "split heads", w=1.9, role="plain")
    heads = [("head 1", 4.55, _HEAD_FILLS[0]), ("head 2", 3.75, _HEAD_FILLS[1]), ("head h", 2.05, _HEAD_FILLS[3])]
    for i, (label, hy, fill) in enumerate(heads):
        d.box(f"h{i}", 11.0, hy, f"{label}: attention", w=2.3, h=0.5, fill=fill)
    d.note(11.0, 2.95, "⋮", fontsize=12)
    d.box("merge", 14.2, y, "merge heads", w=1.9, role="plain")
    d.box("wo", 16.95, y, "$W_o$", w=1.0, role="plain")
    d.box("out", 18.55, y, "output", w=1.1, role="output", fontsize=8)

    d.arrow("x", "proj", shape="(B, T, d)", label_side="above")
    d.arrow("proj", "split", shape="Q, K, V (B, T, d)", label_side="above")
    for _, hy, _ in heads:
        d.arrow((8.8, y), (9.85, hy))
        d.arrow((12.15, hy), (13.25, y))
    d.arrow("merge", "wo", shape="(B, T, d)", label_side="above")
    d.arrow("wo", "out")
    d.note(11.0, 5.25, "one attention, run on $h$ slices of the width at once", fontsize=9)
    d.note(11.0, 1.45, "Q, K, V: (B, h, T, d/h)     weights: (B, h, T, T)", fontsize=8)
    d.note(7.85, 2.45, "view (B, T, h, d/h)\ntranspose (B, h, T, d/h)", fontsize=8)
    d.note(14.2, 2.45, "transpose (B, T, h, d/h)\nreshape (B, T, d)", fontsize=8)

    # One token's d = 8 features, coloured by the head (h = 4) that receives each slice of d/h = 2.
    cell, x0, y0 = 0.42, 5.4, 0.45
    for j in range(8):
        d.ax.add_patch(Rectangle((x0 + j * cell, y0), cell, cell, facecolor=_HEAD_FILLS[j // 2], edgecolor=INK, lw=0.8))
    for i in range(4):
        label = d.say(f"head {i + 1}")
        d.ax.text(x0 + (2 * i + 1) * cell, y0 - 0.12, label, ha="center", va="top", fontsize=7, color=INK)
    d.note(x0 + 8 * cell + 0.2, y0 + cell / 2, "one token's d = 8 features: h = 4 heads get d/h = 2 each", ha="left")
    return d.output()
