"""The decoding of a run, chosen on its validation pairs at the end of ``train``: ``decoding.json``.

Beam search with the paper's length penalty (α = 0.6) can end translations
earlier than the references do: it stops once ``k`` hypotheses have ended, and
short ones end first. Which α suits a model depends on the model and the
language, so it is measured rather than assumed:

1. the longest output: ``A × source tokens + B``, with ``B`` = :data:`EXTRA`
   and ``A`` just large enough for 99.9% of the validation references;
2. greedy decoding, and one beam search (``k`` = 4) that keeps all its
   finished hypotheses with their log-probabilities and lengths
   (:func:`~attnbook.translate.decoding.nbest_tokens`). The search does not
   depend on α, only the choice among the finished hypotheses does, so each α
   of :data:`ALPHAS` is tried by ranking them again, at no further cost;
3. each candidate's translations are detokenized and scored with sacreBLEU
   against the references; the highest BLEU wins (greedy, on a tie).

``evaluate`` and ``translate`` then decode that way unless told otherwise.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path

from torch import nn

from ..data import Pair, Vocab
from ..decode import length_penalty
from ..files import write_json
from ..metrics import text_scores
from .console import Console
from .decoding import nbest_tokens, translate_tokens
from .run_folder import DECODING_FILE
from .settings import Decoding
from .tokens import RunTokens

__all__ = ["ALPHAS", "EXTRA", "SENTENCES", "choose_decoding", "output_ratio"]

#: The length penalties tried, and the beam size.
ALPHAS, BEAM = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5, 2.0, 2.5, 3.0), 4
#: B of the longest output A × source + B, and the most validation pairs decoded to choose.
EXTRA, SENTENCES = 10, 500


def output_ratio(pairs: Sequence[Pair], extra: int = EXTRA, share: float = 0.999) -> float:
    """The least A, in tenths, such that ``share`` of the pairs have at most A × source + ``extra`` target tokens."""
    needs = sorted(max(0.0, (len(p.tgt_tok) - extra) / max(1, len(p.src_tok))) for p in pairs)
    if not needs:
        return 1.0
    return max(0.5, math.ceil(10 * needs[min(len(needs) - 1, int(share * len(needs)))]) / 10)


def choose_decoding(
    model: nn.Module,
    valid_pairs: Sequence[Pair],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    tokens: RunTokens,
    console: Console,
    batch_size: int = 64,
) -> dict:
    """Choose greedy or beam search, α and the longest output on (up to :data:`SENTENCES` of) ``valid_pairs``."""
    start = time.perf_counter()
    step = max(1, len(valid_pairs) // SENTENCES)
    sample = list(valid_pairs[::step][:SENTENCES])
    ratio = output_ratio(valid_pairs)
    sources, references = [p.src_tokens for p in sample], [p.tgt for p in sample]
    lang = tokens.tgt_lang
    greedy = Decoding(beam_size=1, max_len_a=ratio, max_len_b=EXTRA, batch_size=batch_size)
    outputs = translate_tokens(model, sources, src_vocab, tgt_vocab, greedy)
    candidates = [_candidate(1, 0.0, [tokens.text(t) for t in outputs], references, lang)]
    beam = Decoding(beam_size=BEAM, max_len_a=ratio, max_len_b=EXTRA, batch_size=batch_size)
    finished = nbest_tokens(model, sources, src_vocab, tgt_vocab, beam)
    for alpha in ALPHAS:
        best = [max(hyps, key=lambda h: h[1] / length_penalty(h[2], alpha))[0] if hyps else [] for hyps in finished]
        candidates.append(_candidate(BEAM, alpha, [tokens.text(t) for t in best], references, lang))
    chosen = max(candidates, key=lambda c: c["bleu"])  # the first of the best: greedy on a tie
    seconds = time.perf_counter() - start
    how = "greedy" if chosen["beam_size"] == 1 else f"beam {chosen['beam_size']}, α {chosen['alpha']:g}"
    console.say(
        f"decoding chosen on {len(sample):,} validation pairs: {how}, at most {ratio:g} × source + {EXTRA} tokens "
        f"(BLEU {chosen['bleu']:.1f}, brevity penalty {chosen['brevity_penalty']:.2f}; {seconds:.0f} s)"
    )
    return {
        "chosen": {"beam_size": chosen["beam_size"], "alpha": chosen["alpha"], "max_len_a": ratio, "max_len_b": EXTRA},
        "validation_pairs": len(sample),
        "candidates": candidates,
        "seconds": seconds,
    }


def _candidate(beam_size: int, alpha: float, hypotheses: list[str], references: list[str], lang: str) -> dict:
    scores = text_scores(hypotheses, references, lang)
    return {
        "beam_size": beam_size,
        "alpha": alpha,
        "bleu": scores.bleu,
        "chrf": scores.chrf,
        "brevity_penalty": scores.brevity_penalty,
        "length_ratio": scores.length_ratio,
    }


def save_decoding(folder: Path, choice: dict) -> None:
    """Write the choice into the run folder, where ``evaluate`` and ``translate`` find it."""
    write_json(folder / DECODING_FILE, choice)
