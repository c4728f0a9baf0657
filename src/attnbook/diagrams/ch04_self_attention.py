"""Chapter 4's diagram: queries, keys and values from one sequence."""

from __future__ import annotations

from attnbook.diagrams import Diagram

__all__ = ["queries_keys_values"]


def queries_keys_values(language: str | None = None):
    """Self-attention: one sequence ``X`` gives the queries, the keys and the values.

    Three projections of the same tokens; every query meets every key in a
    ``(T, T)`` grid of scores per sentence; the softmax of each row mixes the
    value rows into one output row per token.

    Drawn in ``language`` (English by default; see :mod:`attnbook.diagrams`).
    """
    d = Diagram(10.0, 7.5, scale=0.66, language=language)
    xq, xk, xv = 2.2, 5.0, 7.8
    box_h = 0.55
    d.box("x", xk, 0.55, "token vectors $X$", w=3.0, role="input")
    d.box("wq", xq, 1.95, "$W_q$", w=1.5, role="plain")
    d.box("wk", xk, 1.95, "$W_k$", w=1.5, role="plain")
    d.box("wv", xv, 1.95, "$W_v$", w=1.5, role="plain")
    d.arrow("x", "wq", via=[(xq, 0.55)])
    d.arrow("x", "wk", shape="(B, T, d)", label_side="right")
    d.arrow("x", "wv", via=[(xv, 0.55)])
    d.box("scores", 3.6, 3.55, "scores $QK^\\top / \\sqrt{d_k}$", w=4.2, role="attention")
    d.arrow("wq", (xq, 3.55 - box_h / 2), shape="$Q$ (B, T, $d_k$)", label_side="left")
    d.arrow("wk", (xk, 3.55 - box_h / 2), shape="$K$ (B, T, $d_k$)", label_side="right")
    d.box("softmax", 3.6, 4.85, "softmax of each row", w=4.2, role="attention")
    d.arrow("scores", "softmax", shape="(B, T, T)", label_side="right")
    d.box("mix", 7.0, 6.1, "weights $\\times\\ V$", w=2.6, role="attention")
    d.arrow("softmax", "mix", shape="weights (B, T, T)", label_side="above", via=[(3.6, 6.1)])
    d.arrow("wv", (xv, 6.1 - box_h / 2), shape="$V$ (B, T, $d_v$)", label_side="right")
    d.box("out", 7.0, 7.15, "one output row per token", w=3.6, h=0.5, role="output")
    d.arrow("mix", "out", shape="(B, T, $d_v$)", label_side="left")
    return d.output()
