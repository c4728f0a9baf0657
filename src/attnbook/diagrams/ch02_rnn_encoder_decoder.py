"""Chapter 2's diagram: the RNN encoder-decoder, unrolled over time, with one fixed context."""

from __future__ import annotations

from attnbook.diagrams import Diagram

__all__ = ["rnn_encoder_decoder"]


def rnn_encoder_decoder(language: str | None = None):
    """The encoder reads the source into one vector ``c``; the decoder writes from ``c`` alone.

    Unrolled over three source and four target steps, as under teacher forcing
    (the decoder reads the reference shifted right); shapes are per step, for a
    batch of ``B`` sentences.

    Drawn in ``language`` (English by default; see :mod:`attnbook.diagrams`).
    """
    d = Diagram(15.3, 6.1, scale=0.72, language=language)
    enc_x = [1.55, 3.35, 5.15]
    dec_x = [9.35, 11.05, 12.75, 14.45]
    gru_y, emb_y, tok_y, out_y, word_y = 3.0, 1.75, 0.6, 4.3, 5.4
    cell = dict(w=1.2, h=0.55, role="rnn")

    d.region(0.2, 0.15, 6.05, 3.75, "encoder")
    for i, (x, word) in enumerate(zip(enc_x, ["the", "cat", "sleeps"])):
        d.box(f"x{i}", x, tok_y, word, w=1.2, h=0.42, role="input")
        d.box(f"e{i}", x, emb_y, "embed", w=1.2, h=0.42, role="embed")
        d.box(f"h{i}", x, gru_y, "GRU", **cell)
        d.arrow(f"x{i}", f"e{i}", shape="(B,)" if i == 0 else None)
        d.arrow(f"e{i}", f"h{i}", shape="(B, E)" if i == 0 else None)
        if i:
            d.arrow(f"h{i - 1}", f"h{i}", shape=f"h{i}", label_side="above")
    d.arrow((0.3, gru_y), "h0", shape="0", label_side="above")

    d.box("c", 7.05, gru_y, "c = h3", w=1.0, h=0.55, role="output", fontsize=10)
    d.arrow("h2", "c")

    d.region(8.6, 0.15, 15.2, 5.95, "decoder")
    for t, (x, prev, word) in enumerate(zip(dec_x, ["<bos>", "le", "chat", "dort"], ["le", "chat", "dort", "<eos>"])):
        d.box(f"y{t}", x, tok_y, prev, w=1.2, h=0.42, role="input")
        d.box(f"f{t}", x, emb_y, "[embed; c]", w=1.2, h=0.42, role="embed")
        d.box(f"s{t}", x, gru_y, "GRU", **cell)
        d.box(f"o{t}", x, out_y, "W_o [s; c]", w=1.2, h=0.42, role="output", fontsize=8)
        d.box(f"w{t}", x, word_y, word, w=1.2, h=0.4, role="plain")
        d.arrow(f"y{t}", f"f{t}")
        d.arrow(f"f{t}", f"s{t}", shape="(B, E+H)" if t == 0 else None)
        d.arrow(f"s{t}", f"o{t}", shape="(B, H)" if t == 0 else None)
        d.arrow(f"o{t}", f"w{t}", shape="(B, V)" if t == 0 else None)
        if t:
            d.arrow(f"s{t - 1}", f"s{t}")
    d.arrow("c", "s0", shape="(B, H)", label_side="above")
    d.note(3.6, 5.2, "Everything the decoder learns about the source", fontsize=9)
    d.note(3.6, 4.8, "is one vector c of width H, whatever the length.", fontsize=9)
    d.note(3.6, 4.25, "c starts the decoder (s0 = c) and enters every step", fontsize=8)
    d.note(3.6, 3.95, "twice: beside the embedding and in the output layer.", fontsize=8)
    return d.output()
