"""Chapter 3's diagram: one step of the attention decoder."""

from __future__ import annotations

from attnbook.diagrams import Diagram

__all__ = ["attention_decoder_step"]


def attention_decoder_step(language: str | None = None):
    """Step ``t`` of the attention decoder: the previous state asks, the encoder states answer.

    The previous state ``s_{t-1}`` scores every encoder state; a masked softmax
    turns the scores into weights; the weighted sum of the encoder states is
    the context ``c_t``, which enters the GRU step beside the previous word's
    embedding, and the output layer beside the new state.

    Drawn in ``language`` (English by default; see :mod:`attnbook.diagrams`).
    """
    d = Diagram(15.2, 6.75, scale=0.66, language=language)
    d.box("memory", 8.85, 0.55, "encoder states $h_1 \\dots h_S$: keys and values", w=8.0, role="rnn")
    d.box("s_prev", 1.45, 1.95, "previous state $s_{t-1}$", w=2.5, role="rnn")
    d.box("score", 5.3, 1.95, "score $a(s_{t-1}, h_j)$", w=2.5, role="attention")
    d.box("softmax", 8.9, 1.95, "masked softmax", w=2.3, role="attention")
    d.box("sum", 12.4, 1.95, "weighted sum", w=2.3, role="attention")
    d.box("embed", 8.4, 3.35, "embedding of $y_{t-1}$", w=2.6, role="embed")
    d.box("concat", 12.4, 3.35, "$[e(y_{t-1});\\ c_t]$", w=2.3, role="plain")
    d.box("gru", 12.4, 4.75, "GRU step", w=2.3, role="rnn")
    d.box("out", 12.4, 6.15, "$W_o\\,[s_t;\\ c_t]$", w=2.3, role="output")

    d.arrow("s_prev", "score", shape="query (B, H)", label_side="above")
    d.arrow((5.3, 0.825), "score", shape="keys (B, S, H)", label_side="right")
    d.arrow((8.9, 0.825), "softmax", shape="padding (B, S)", label_side="right", dashed=True)
    d.arrow("score", "softmax", shape="(B, S)", label_side="above")
    d.arrow("softmax", "sum", shape="$\\alpha_t$ (B, S)", label_side="above")
    d.arrow((12.4, 0.825), "sum", shape="values (B, S, H)", label_side="right")
    d.arrow("sum", "concat", shape="$c_t$ (B, H)", label_side="left")
    d.arrow("embed", "concat", shape="(B, E)", label_side="above")
    d.arrow("concat", "gru", shape="(B, E+H)", label_side="left")
    d.arrow(
        "s_prev", "gru", shape="$s_{t-1}$ (B, H): the state the GRU updates", label_side="above", via=[(1.45, 4.75)]
    )
    d.arrow("gru", "out", shape="$s_t$ (B, H)", label_side="left")
    d.arrow("sum", "out", shape="$c_t$", label_side="right", via=[(14.2, 1.95), (14.2, 6.15)])
    d.arrow("out", (7.6, 6.15), shape="logits of word $t$ (B, V)", label_side="above")
    return d.output()
