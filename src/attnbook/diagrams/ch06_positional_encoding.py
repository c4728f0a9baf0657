"""Chapter 6's diagram: the positional encoding added to the token embeddings."""

from __future__ import annotations

from attnbook.diagrams import Diagram

__all__ = ["positions_added_to_embeddings"]


def positions_added_to_embeddings(language: str | None = None):
    """Token vectors plus position vectors: the only place where order enters the model.

    The table has one row per position, the same for every sentence of the
    batch; the sum is what the first layer reads. A small heatmap of the
    sinusoidal table (16 positions, d = 16) stands beside its box.

    Drawn in ``language`` (English by default; see :mod:`attnbook.diagrams`).
    """
    import numpy as np

    width, height = 12.6, 6.6
    d = Diagram(width, height, scale=0.66, language=language)
    xl, xr, xm = 2.0, 6.9, 4.45
    d.box("tokens", xl, 0.55, "token ids", w=2.4, role="input")
    d.box("embed", xl, 2.0, "embedding", w=2.4, role="embed")
    d.box("positions", xr, 0.55, "positions $0, 1, \\dots, T-1$", w=3.0, role="input")
    d.box("table", xr, 2.0, "positional table", w=3.0, role="embed")
    d.box("add", xm, 3.55, "+", w=0.6, h=0.6, fontsize=14)
    d.box("dropout", xm, 4.8, "dropout", w=2.0, role="plain")
    d.box("layer", xm, 6.0, "first layer: self-attention ...", w=4.0, role="attention")
    d.arrow("tokens", "embed", shape="(B, T) integers", label_side="right")
    d.arrow("positions", "table", shape="(T,)", label_side="right")
    d.arrow("embed", "add", shape="(B, T, d)", label_side="above", via=[(xl, 3.55)])
    d.arrow("table", "add", shape="(T, d)", label_side="above", via=[(xr, 3.55)])
    d.note(xr, 3.95, "the same rows for every sentence", fontsize=8)
    d.arrow("add", "dropout", shape="(B, T, d)", label_side="right")
    d.arrow("dropout", "layer", shape="(B, T, d)", label_side="right")

    # The sinusoidal table itself: 48 positions (down) by 24 features (across).
    positions = np.arange(48)[:, None]
    omega = 10000.0 ** (-np.arange(0, 24, 2) / 24)
    angles = positions * omega
    table = np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(48, 24)
    x0, x1, y0, y1 = 9.6, 12.2, 0.4, 4.3
    inset = d.figure.add_axes((x0 / width, y0 / height, (x1 - x0) / width, (y1 - y0) / height))
    inset.imshow(table, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    inset.set_xticks([])
    inset.set_yticks([])
    inset.set_xlabel(d.say("feature →"), fontsize=8, color="#444444")
    inset.set_title(d.say("sinusoidal table\nposition ↓"), fontsize=8, color="#444444")
    d.arrow("table", (x0 - 0.05, 2.0), dashed=True)
    return d.output()
