"""Chapter 7's diagrams: the encoder–decoder Transformer, and one encoder and one decoder layer.

Both are drawn as in the paper (post-LN: "Add & Norm" after each sublayer),
bottom to top, with the tensor shapes each arrow carries: ``B`` sentences,
``S`` source and ``T`` target positions, ``d`` = ``d_model``, ``h`` heads,
``V`` target vocabulary.
"""

from __future__ import annotations

from . import Diagram

__all__ = ["transformer_diagram", "layers_diagram"]


def _residual(d: Diagram, x_box: float, y_from: float, to: str, side: str = "left", offset: float = 1.45) -> None:
    """A residual connection: from the stream below a sublayer, around it, into its Add & Norm."""
    x = x_box - offset if side == "left" else x_box + offset
    d.ax.plot([x_box, x, x], [y_from, y_from, d.boxes[to].y], color="#666666", lw=1.0)
    d.arrow((x, d.boxes[to].y), to, end_side=side)


def _attention_box(d: Diagram, name: str, x: float, y: float, label: str, w: float) -> None:
    """An attention sublayer of the layers' diagram: a tall box, its label (what it attends to) in small print."""
    d.box(name, x, y, label, w=w, h=0.8, role="attention", fontsize=8)


def _stack(d: Diagram, prefix: str, x: float, y0: float, decoder: bool) -> float:
    """The boxes of one layer, from ``y0`` up, with residual connections; returns the top of the last box."""
    gap = 0.3
    names = ["self", "norm1"]
    labels = ["masked multi-head\nself-attention" if decoder else "multi-head\nself-attention", "Add & Norm"]
    roles = ["attention", "norm"]
    if decoder:
        names += ["cross", "norm2"]
        labels += ["multi-head\ncross-attention", "Add & Norm"]
        roles += ["attention", "norm"]
    names += ["ffn", "norm3" if decoder else "norm2"]
    labels += ["feed-forward\nmax(0, xW\u2081+b\u2081)W\u2082+b\u2082", "Add & Norm"]
    roles += ["ffn", "norm"]
    top = y0
    for name, label, role in zip(names, labels, roles):
        h = 0.52 if role != "norm" else 0.32
        d.box(f"{prefix}{name}", x, top + h / 2, label, w=2.3, h=h, role=role, fontsize=8)
        top += h + gap
    for a, b in zip(names, names[1:]):
        d.arrow(f"{prefix}{a}", f"{prefix}{b}")
    side = "right" if decoder else "left"
    sublayers = [n for n in names if not n.startswith("norm")]
    norms = [n for n in names if n.startswith("norm")]
    for sub, norm in zip(sublayers, norms):  # from the stream just below each sublayer, around it
        _residual(d, x, d.boxes[prefix + sub].y - d.boxes[prefix + sub].h / 2 - 0.12, prefix + norm, side=side)
    return top - gap


def transformer_diagram(language: str | None = None):
    """The encoder–decoder Transformer of Vaswani et al. (2017), with the shapes on the arrows.

    Drawn in ``language`` (English by default; see :mod:`attnbook.diagrams`).
    """
    d = Diagram(10.0, 11.0, scale=0.72, title="The Transformer (post-LN, as in the paper)", language=language)
    ex, dx = 2.7, 7.3
    # inputs
    d.box("src", ex, 0.75, "source tokens", w=2.3, h=0.4, role="input")
    d.box(
        "tgt",
        dx,
        0.75,
        "target tokens, shifted right\n(<bos> y\u2081 \u2026 y\u209c\u208b\u2081)",
        w=2.6,
        h=0.5,
        role="input",
    )
    d.box("src_emb", ex, 1.6, "embedding \u00d7 \u221ad", w=2.3, h=0.4, role="embed")
    d.box("tgt_emb", dx, 1.6, "embedding \u00d7 \u221ad", w=2.3, h=0.4, role="embed")
    d.box("src_pos", ex, 2.45, "+ positions, dropout", w=2.3, h=0.4, role="embed")
    d.box("tgt_pos", dx, 2.45, "+ positions, dropout", w=2.3, h=0.4, role="embed")
    d.arrow("src", "src_emb", shape="(B, S)")
    d.arrow("tgt", "tgt_emb", shape="(B, T)")
    d.arrow("src_emb", "src_pos", shape="(B, S, d)")
    d.arrow("tgt_emb", "tgt_pos", shape="(B, T, d)")
    # the stacks
    enc_top = _stack(d, "e_", ex, 3.45, decoder=False)
    dec_top = _stack(d, "d_", dx, 3.45, decoder=True)
    d.arrow("src_pos", "e_self", shape="(B, S, d)")
    d.arrow("tgt_pos", "d_self", shape="(B, T, d)")
    d.region(ex - 1.8, 3.22, ex + 1.3, enc_top + 0.45, "encoder layer \u00d7 N")
    d.region(dx - 1.8, 3.22, dx + 1.75, dec_top + 0.45, "decoder layer \u00d7 N")
    # the memory: keys and values of every cross-attention
    d.box("memory", ex, enc_top + 1.4, "memory", w=1.6, h=0.38, role="plain")
    d.arrow("e_norm2", "memory", shape="(B, S, d)")
    d.arrow("memory", "d_cross", start_side="right", end_side="left", curve=-0.2)
    d.note(ex, enc_top + 2.1, "keys and values of the cross-attention\nin every decoder layer: (B, S, d)", fontsize=7.5)
    # output
    d.box("linear", dx, dec_top + 1.4, "linear (tied to the\ntarget embedding)", w=2.3, h=0.5, role="output")
    d.box("softmax", dx, dec_top + 2.3, "softmax: next-token\nprobabilities", w=2.3, h=0.5, role="output")
    d.arrow("d_norm3", "linear", shape="(B, T, d)")
    d.arrow("linear", "softmax", shape="(B, T, V)")
    d.note(
        5.0,
        0.2,
        "pre-LN (norm_first=True): LayerNorm before each sublayer, and one more at the top of each stack",
        fontsize=7.5,
    )
    return d.output()


def layers_diagram(language: str | None = None):
    """One encoder layer and one decoder layer, every arrow labelled with its shape and the masks named.

    Drawn in ``language`` (English by default; see :mod:`attnbook.diagrams`).
    """
    d = Diagram(10.6, 8.4, scale=0.8, title="An encoder layer and a decoder layer", language=language)
    ex, dx = 2.6, 7.6
    w = 2.9
    # encoder layer
    d.box("e_in", ex, 0.55, "x: source stream", w=w, h=0.38, role="input")
    _attention_box(
        d, "e_att", ex, 1.7, "self-attention, h heads\nQ, K, V = xW_q, xW_k, xW_v\nmask: source padding", w=w
    )
    d.box("e_n1", ex, 2.75, "Add & Norm", w=w, h=0.34, role="norm")
    d.box("e_w1", ex, 3.7, "W\u2081, b\u2081, ReLU", w=w, h=0.4, role="ffn")
    d.box("e_w2", ex, 4.75, "W\u2082, b\u2082", w=w, h=0.4, role="ffn")
    d.box("e_n2", ex, 5.7, "Add & Norm", w=w, h=0.34, role="norm")
    d.box("e_out", ex, 6.75, "to the next layer\n(the last: the memory)", w=w, h=0.5, role="plain", fontsize=8)
    d.arrow("e_in", "e_att", shape="(B, S, d)")
    d.arrow("e_att", "e_n1", shape="(B, S, d)")
    d.arrow("e_n1", "e_w1", shape="(B, S, d)")
    d.arrow("e_w1", "e_w2", shape="(B, S, d_ff)")
    d.arrow("e_w2", "e_n2", shape="(B, S, d)")
    d.arrow("e_n2", "e_out", shape="(B, S, d)")
    _residual(d, ex, 1.0, "e_n1", offset=1.75)
    _residual(d, ex, 3.2, "e_n2", offset=1.75)
    d.note(ex - 0.1, 2.25, "weights (B, h, S, S)", fontsize=7.5, ha="right")
    # decoder layer
    d.box("d_in", dx, 0.55, "y: target stream", w=w, h=0.38, role="input")
    _attention_box(d, "d_att", dx, 1.55, "masked self-attention\nQ, K, V from y\nmask: causal + target padding", w=w)
    d.box("d_n1", dx, 2.5, "Add & Norm", w=w, h=0.34, role="norm")
    _attention_box(
        d, "d_cross", dx, 3.55, "cross-attention\nQ from the decoder, K, V from memory\nmask: source padding", w=w + 0.3
    )
    d.box("d_n2", dx, 4.55, "Add & Norm", w=w, h=0.34, role="norm")
    d.box("d_ffn", dx, 5.45, "FFN: W\u2081, ReLU, W\u2082", w=w, h=0.4, role="ffn")
    d.box("d_n3", dx, 6.3, "Add & Norm", w=w, h=0.34, role="norm")
    d.box("d_out", dx, 7.3, "to the next layer\n(the last: the output layer)", w=w, h=0.5, role="plain", fontsize=8)
    d.box("mem", 4.85, 3.55, "memory", w=1.0, h=0.38, role="plain", fontsize=8)
    d.arrow("d_in", "d_att", shape="(B, T, d)")
    d.arrow("d_att", "d_n1", shape="(B, T, d)")
    d.arrow("d_n1", "d_cross", shape="queries (B, T, d)")
    d.arrow("mem", "d_cross")
    d.note(4.85, 3.95, "(B, S, d)", fontsize=8)
    d.arrow("d_cross", "d_n2", shape="(B, T, d)")
    d.arrow("d_n2", "d_ffn", shape="(B, T, d)")
    d.arrow("d_ffn", "d_n3", shape="(B, T, d)")
    d.arrow("d_n3", "d_out", shape="(B, T, d)")
    _residual(d, dx, 1.0, "d_n1", side="right", offset=1.85)
    _residual(d, dx, 2.85, "d_n2", side="right", offset=1.85)
    _residual(d, dx, 4.8, "d_n3", side="right", offset=1.85)
    d.note(dx - 0.05, 2.05, "weights (B, h, T, T)", fontsize=7.5, ha="right")
    d.note(dx - 0.05, 4.1, "weights (B, h, T, S)", fontsize=7.5, ha="right")
    d.note(
        5.3,
        0.12,
        "Add & Norm: LayerNorm(x + Dropout(sublayer(x))), the residual drawn on the side; d = d_model",
        fontsize=7.5,
    )
    return d.output()
