"""Chapter 10's model and the ``transformers`` package's GPT-2 with the same weights (the tests and a benchmark).

:func:`gpt2_twins` builds a ``GPT2LMHeadModel`` with random weights (nothing
downloaded), nudges every weight so that none is left at its initial zero or
one, and copies them into a :class:`~attnbook.decoder_only.DecoderOnlyTransformer`
of the same shape with :func:`~attnbook.decoder_only.load_gpt2_state_dict`.
``tests/test_decoder_only.py`` holds the two equal; ``tests/benchmarks/bench_decoder_only.py``
times their generation.
"""

from __future__ import annotations

import torch

from attnbook.decoder_only import DecoderOnlyConfig, DecoderOnlyTransformer, load_gpt2_state_dict


def gpt2_twins(
    vocab_size: int,
    d_model: int,
    num_heads: int,
    num_layers: int,
    max_len: int,
    *,
    dtype: torch.dtype = torch.float64,
    seed: int = 0,
    nudge: float = 0.05,
):
    """``(ours, theirs)``, both in ``dtype`` and in eval mode, computing the same function.

    GPT-2 starts with zero biases and unit LayerNorms; ``nudge`` times a
    standard normal is added to every weight so that each one counts. Dropout is
    off in both; the FFN is ``4 * d_model`` wide, as in GPT-2.
    """
    import transformers

    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        vocab_size=vocab_size, n_positions=max_len, n_embd=d_model, n_layer=num_layers, n_head=num_heads,
        n_inner=None, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    theirs = transformers.GPT2LMHeadModel(config).to(dtype).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(nudge * torch.randn_like(p))
    ours = DecoderOnlyTransformer(
        DecoderOnlyConfig(vocab_size, d_model=d_model, num_heads=num_heads, num_layers=num_layers,
                          d_ff=4 * d_model, max_len=max_len)
    ).to(dtype)  # fmt: skip
    load_gpt2_state_dict(ours, theirs.state_dict())
    return ours.eval(), theirs
