"""BLEU: how many of a translation's n-grams appear in the reference, with a penalty for brevity.

BLEU (Papineni et al., 2002) scores a whole test set at once:

1. for each order ``n = 1 .. 4``, count the hypothesis n-grams that also occur
   in the reference, each *clipped* to the number of times the reference has
   it, and divide the corpus total of matches by the corpus total of
   hypothesis n-grams: the modified precision ``p_n``;
2. take the geometric mean of ``p_1 .. p_4``;
3. multiply by the brevity penalty ``BP = exp(1 - r / c)`` when the corpus of
   hypotheses (length ``c``) is shorter than the references (length ``r``),
   and ``1`` otherwise: precision alone would reward saying very little.

:func:`corpus_bleu` is that computation written to be read; on pre-tokenized
text it equals ``sacrebleu.corpus_bleu(..., tokenize="none")``, the reference
implementation whose numbers the book reports (:func:`sacrebleu_bleu`).
:func:`d2l_bleu` is the sentence-level variant used by *Dive into Deep
Learning*, shown beside it to explain why its numbers differ.
:func:`bleu_tokenizer` chooses sacreBLEU's tokenizer for a target language,
so that real text in any language is scored the standard way, and
:func:`text_scores` gives the scores of detokenized translations that the
command line reports: BLEU (mixed case and lower case), chrF and the
brevity penalty, with sacreBLEU's signatures.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ngrams",
    "clipped_matches",
    "brevity_penalty",
    "BleuStats",
    "bleu_stats",
    "corpus_bleu",
    "sacrebleu_bleu",
    "bleu_tokenizer",
    "TextScores",
    "text_scores",
    "d2l_bleu",
    "BucketScore",
    "bleu_by_length",
]

Tokens = str | Sequence[str]


def ngrams(tokens: Sequence[str], n: int) -> Counter:
    """How many times each n-gram (a tuple of ``n`` tokens) occurs in ``tokens``."""
    if n < 1:
        raise ValueError(f"n-gram order must be >= 1, got {n}")
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def clipped_matches(hypothesis: Sequence[str], references: Sequence[Sequence[str]], n: int) -> tuple[int, int]:
    """``(matches, total)`` for order ``n``: hypothesis n-grams found in a reference, clipped.

    An n-gram counts at most as many times as it occurs in the reference that
    has it most often, so repeating a correct word does not pay.
    """
    hyp = ngrams(hypothesis, n)
    best: Counter = Counter()
    for reference in references:
        best |= ngrams(reference, n)  # the union of Counters keeps the maximum count
    matches = sum(min(count, best[gram]) for gram, count in hyp.items())
    return matches, sum(hyp.values())


def brevity_penalty(hyp_len: int, ref_len: int) -> float:
    """``exp(1 - ref_len / hyp_len)`` when the hypotheses are shorter, else 1 (0 for an empty hypothesis)."""
    if hyp_len < 0 or ref_len < 0:
        raise ValueError(f"lengths must be >= 0, got hyp_len={hyp_len}, ref_len={ref_len}")
    if hyp_len >= ref_len:
        return 1.0
    if hyp_len == 0:
        return 0.0
    return math.exp(1.0 - ref_len / hyp_len)


def _closest_length(hyp_len: int, ref_lens: list[int]) -> int:
    """The reference length closest to the hypothesis length; the shorter one on a tie."""
    return min(ref_lens, key=lambda r: (abs(r - hyp_len), r))


@dataclass
class BleuStats:
    """The counts BLEU is computed from, summed over a corpus."""

    matches: list[int]
    totals: list[int]
    hyp_len: int
    ref_len: int

    @property
    def precisions(self) -> list[float]:
        """The modified precisions ``p_n = matches_n / totals_n`` (0 when there is no n-gram)."""
        return [m / t if t else 0.0 for m, t in zip(self.matches, self.totals)]

    def score(self, smooth: str = "exp") -> float:
        """BLEU in ``[0, 100]`` from these counts.

        ``smooth="exp"`` (sacreBLEU's default, the NIST method): the k-th order
        with no match at all gets precision ``1 / (2**k * total)`` instead of 0.
        ``smooth="none"``: any order without a match makes BLEU 0.
        """
        if smooth not in ("exp", "none"):
            raise ValueError(f"smooth must be 'exp' or 'none', got {smooth!r}")
        if not any(self.matches) or not all(self.totals):
            return 0.0  # nothing matched, or some order has no n-gram at all (a corpus of very short sentences)
        log_sum, halvings = 0.0, 1
        for matches, total in zip(self.matches, self.totals):
            if matches == 0:
                if smooth == "none":
                    return 0.0
                halvings *= 2
                log_sum += math.log(100.0 / (halvings * total))
            else:
                log_sum += math.log(100.0 * matches / total)
        return brevity_penalty(self.hyp_len, self.ref_len) * math.exp(log_sum / len(self.matches))


def _as_tokens(sentence: Tokens, where: str) -> list[str]:
    if isinstance(sentence, str):
        return sentence.split()
    if not isinstance(sentence, (list, tuple)):
        raise TypeError(f"{where} must be a string or a list of tokens, got {type(sentence).__name__}")
    for token in sentence:
        if not isinstance(token, str) or not token or token.split() != [token]:
            raise ValueError(f"{where} has the token {token!r}: tokens must be non-empty strings without spaces")
    return list(sentence)


def _references_of(reference, tokenized: bool, where: str) -> list[list[str]]:
    """One hypothesis's references, as a list of token lists: a single reference, or several."""
    if isinstance(reference, str):
        if tokenized:
            raise TypeError(f"{where}: the hypotheses are token lists, so the references must be token lists too")
        return [_as_tokens(reference, where)]
    if not isinstance(reference, (list, tuple)):
        raise TypeError(f"{where} must be a string, a list of tokens, or a list of several references")
    if tokenized and (not reference or isinstance(reference[0], str)):
        return [_as_tokens(reference, where)]  # one tokenized reference (possibly empty)
    if not reference:
        raise ValueError(f"{where} is an empty list: give at least one reference")
    return [_as_tokens(r, f"{where}, reference {k}") for k, r in enumerate(reference)]


def bleu_stats(hypotheses: Sequence[Tokens], references: Sequence, max_order: int = 4) -> BleuStats:
    """Sum the clipped n-gram matches, n-gram totals and lengths over a corpus.

    ``hypotheses`` are strings (split on whitespace) or lists of tokens.
    ``references[i]`` is the reference of ``hypotheses[i]``, of the same kind,
    or a list of several references for it.
    """
    if isinstance(hypotheses, str) or not isinstance(hypotheses, Sequence):
        raise TypeError("hypotheses must be a list of sentences (strings or token lists)")
    if len(hypotheses) == 0:
        raise ValueError("BLEU needs at least one hypothesis; got an empty corpus")
    if len(references) != len(hypotheses):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references: "
            "give one reference (or list of them) per hypothesis"
        )
    if max_order < 1:
        raise ValueError(f"max_order must be >= 1, got {max_order}")
    tokenized = not isinstance(hypotheses[0], str)
    matches, totals = [0] * max_order, [0] * max_order
    hyp_len = ref_len = 0
    for i, (hypothesis, reference) in enumerate(zip(hypotheses, references)):
        if isinstance(hypothesis, str) == tokenized:
            raise TypeError(f"hypothesis {i}: do not mix strings and token lists")
        hyp = _as_tokens(hypothesis, f"hypothesis {i}")
        refs = _references_of(reference, tokenized, f"reference {i}")
        for n in range(1, max_order + 1):
            m, t = clipped_matches(hyp, refs, n)
            matches[n - 1] += m
            totals[n - 1] += t
        hyp_len += len(hyp)
        ref_len += _closest_length(len(hyp), [len(r) for r in refs])
    return BleuStats(matches, totals, hyp_len, ref_len)


def corpus_bleu(hypotheses: Sequence[Tokens], references: Sequence, smooth: str = "exp", max_order: int = 4) -> float:
    """Corpus-level BLEU in ``[0, 100]``, equal to sacreBLEU's with ``tokenize="none"``.

    >>> corpus_bleu(["le chat dort ."], ["le chat dort ."])
    100.0
    """
    return bleu_stats(hypotheses, references, max_order).score(smooth)


def sacrebleu_bleu(hypotheses: Sequence[Tokens], references: Sequence[Tokens], smooth: str = "exp") -> float:
    """The reference number: sacreBLEU's corpus BLEU on pre-tokenized text (one reference each)."""
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    hyps = [h if isinstance(h, str) else " ".join(h) for h in hypotheses]
    refs = [r if isinstance(r, str) else " ".join(r) for r in references]
    return sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", smooth_method=smooth, force=True).score


def bleu_tokenizer(lang: str) -> str:
    """sacreBLEU's tokenizer for text in the language ``lang`` (an ISO code such as ``"fr"``).

    ``zh`` for Chinese; ``char`` for Japanese and the other languages written
    without spaces (``ja-mecab`` needs MeCab and its dictionary, which are
    not installed, and would score words rather than characters), ``13a``
    (sacreBLEU's default) for the rest.
    """
    if lang in ("zh", "yue"):
        return "zh"
    if lang in ("ja", "th", "lo", "km", "my"):
        return "char"
    return "13a"


@dataclass
class TextScores:
    """sacreBLEU's scores of detokenized translations against one reference each.

    ``bleu`` (mixed case), ``bleu_lowercase`` and ``chrf`` are on sacreBLEU's
    0-100 scale; ``brevity_penalty`` is BLEU's, from the lengths
    ``hypothesis_length`` and ``reference_length`` in BLEU's tokens;
    ``signatures`` say how each was computed.
    """

    bleu: float
    bleu_lowercase: float
    chrf: float
    brevity_penalty: float
    hypothesis_length: int
    reference_length: int
    signatures: dict[str, str]

    @property
    def length_ratio(self) -> float:
        return self.hypothesis_length / max(1, self.reference_length)


def text_scores(hypotheses: Sequence[str], references: Sequence[str], lang: str) -> TextScores:
    """BLEU, BLEU in lower case, chrF and the brevity penalty of text in ``lang`` (:func:`bleu_tokenizer`)."""
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    tokenize = bleu_tokenizer(lang)
    bleu = sacrebleu.metrics.BLEU(tokenize=tokenize)
    lower = sacrebleu.metrics.BLEU(tokenize=tokenize, lowercase=True)
    chrf = sacrebleu.metrics.CHRF()
    refs = [list(references)]
    b, bl, c = (
        bleu.corpus_score(list(hypotheses), refs),
        lower.corpus_score(list(hypotheses), refs),
        chrf.corpus_score(list(hypotheses), refs),
    )
    signatures = {
        "BLEU": str(bleu.get_signature()),
        "BLEU, lowercase": str(lower.get_signature()),
        "chrF": str(chrf.get_signature()),
    }
    return TextScores(b.score, bl.score, c.score, b.bp, b.sys_len, b.ref_len, signatures)


def d2l_bleu(hypothesis: Tokens, reference: Tokens, k: int = 2) -> float:
    """Sentence-level BLEU as *Dive into Deep Learning* computes it, in ``[0, 1]``.

    It differs from corpus BLEU in four ways: it scores one sentence, not
    pooled corpus counts; it uses orders ``1 .. min(k, len(hypothesis))``;
    it weighs ``p_n`` by ``1 / 2**n`` instead of taking a plain geometric mean
    (so long n-grams count for less); and it has no smoothing. Strings are
    split on single spaces, as d2l does.
    """
    hyp = hypothesis.split(" ") if isinstance(hypothesis, str) else list(hypothesis)
    ref = reference.split(" ") if isinstance(reference, str) else list(reference)
    if not hyp:
        return 0.0
    score = math.exp(min(0.0, 1.0 - len(ref) / len(hyp)))
    for n in range(1, min(k, len(hyp)) + 1):
        matches, total = clipped_matches(hyp, [ref], n)
        score *= (matches / total) ** (0.5**n)
    return score


# --- Chapters 2 and 3: BLEU per length bucket -----------------------------------------


@dataclass(frozen=True)
class BucketScore:
    """Corpus BLEU of the ``count`` test sentences whose length is in ``low .. high``."""

    low: int
    high: int
    count: int
    bleu: float

    @property
    def label(self) -> str:
        return f"{self.low}–{self.high}"


def bleu_by_length(
    hypotheses: Sequence[Tokens], references: Sequence[Tokens], lengths: Sequence[int], edges: Sequence[int]
) -> list[BucketScore]:
    """sacreBLEU corpus BLEU within each length bucket, to see how quality falls with length.

    ``lengths[i]`` is the length that sorts sentence ``i`` into a bucket
    (usually its source length); ``edges`` are the buckets' inclusive upper
    bounds, increasing: ``[8, 16, 25]`` gives the buckets 1–8, 9–16 and 17–25.
    An empty bucket scores NaN.
    """
    if not len(hypotheses) == len(references) == len(lengths):
        raise ValueError(
            f"got {len(hypotheses)} hypotheses, {len(references)} "
            f"references and {len(lengths)} lengths; they must match"
        )
    edges = list(edges)
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])) or edges[0] < 1:
        raise ValueError(f"edges must be increasing positive upper bounds, got {edges}")
    if lengths and max(lengths) > edges[-1]:
        raise ValueError(f"a sentence of length {max(lengths)} is longer than the last edge {edges[-1]}")
    scores, low = [], 1
    for high in edges:
        members = [i for i, n in enumerate(lengths) if low <= n <= high]
        bleu = (
            sacrebleu_bleu([hypotheses[i] for i in members], [references[i] for i in members]) if members else math.nan
        )
        scores.append(BucketScore(low, high, len(members), bleu))
        low = high + 1
    return scores
