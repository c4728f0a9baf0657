"""Beam search: by hand on a scripted model, against greedy decoding, against exhaustive search, batch by batch."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pytest
import torch

from attnbook.decode import (
    BeamDecoded,
    Uncached,
    beam_search,
    beam_search_sentence,
    greedy_decode,
    length_penalty,
    translate,
)
from attnbook.rnn import DecoderState, Seq2Seq, Seq2SeqConfig
from attnbook.transformer import Transformer, TransformerConfig
from toy_seq2seq import BOS, EOS, PAD, make_batch, one_thread  # noqa: F401 (fixture)

A, B_, C = 4, 5, 6  # the words of the scripted model's vocabulary (ids 0..3 are <pad> <bos> <eos> <unk>)


# --- a model whose next-token probabilities are a table of prefixes --------------------


@dataclass
class _TableState:
    prefixes: list[tuple[int, ...]]

    def select(self, index):
        return _TableState([self.prefixes[i] for i in index.tolist()])


class TableModel(torch.nn.Module):
    """p(next | prefix) read from a table; prefixes not in it get ``default``. Records every token it is fed."""

    def __init__(self, table: dict, default: dict, vocab_size: int = 7):
        super().__init__()
        self.table, self.default, self.vocab_size, self.fed = table, default, vocab_size, []

    def start(self, src, src_padding_mask=None):
        return _TableState([() for _ in range(src.shape[0])])

    def step(self, tokens, state):
        self.fed.extend(tokens.tolist())
        prefixes = [p if t == BOS else p + (t,) for p, t in zip(state.prefixes, tokens.tolist())]
        logits = torch.full((len(prefixes), self.vocab_size), float("-inf"), dtype=torch.float64)
        for row, prefix in enumerate(prefixes):
            for token, prob in self.table.get(prefix, self.default).items():
                logits[row, token] = math.log(prob)
        return logits, _TableState(prefixes)


# Greedy takes "a" (0.5), then "a" (0.36), then <eos> (0.5): p = 0.09. "b <eos>" has p = 0.4 * 0.9 = 0.36.
TABLE = {
    (): {A: 0.5, B_: 0.4, EOS: 0.1},
    (A,): {A: 0.36, B_: 0.34, C: 0.30},
    (B_,): {EOS: 0.9, C: 0.1},
    (A, A): {EOS: 0.5, C: 0.5 - 1e-3, A: 1e-3},
    (A, B_): {EOS: 0.9, C: 0.1},
}
UNIFORM = {EOS: 0.25, A: 0.25, B_: 0.25, C: 0.25}
SRC = torch.tensor([[4, 5, 6]])


def test_length_penalty():
    assert length_penalty(1, 0.6) == 1.0  # ((5 + 1) / 6) ** alpha
    assert length_penalty(7, 0.6) == pytest.approx(2**0.6)
    assert length_penalty(30, 0.0) == 1.0
    assert torch.allclose(length_penalty(torch.tensor([1.0, 7.0]), 1.0), torch.tensor([1.0, 2.0]))


def test_beam_search_by_hand_beats_greedy():
    model = TableModel(TABLE, UNIFORM)
    greedy = greedy_decode(model, SRC, max_len=5)
    assert greedy.tokens.tolist() == [[A, A, EOS]]
    out = beam_search(TableModel(TABLE, UNIFORM), SRC, beam_size=2, alpha=0.6, max_len=5, n_best=2)
    assert isinstance(out, BeamDecoded)
    assert out.tokens.tolist() == [[B_, EOS]] and out.lengths.tolist() == [2]
    assert out.log_probs.item() == pytest.approx(math.log(0.36))
    assert out.scores.item() == pytest.approx(math.log(0.36) / (7 / 6) ** 0.6)
    # step 2 finished "b <eos>"; step 3 the live "a a" and "a b" both end: only one fits (2 finished = the beam size)
    second = out.nbest[0][1]
    assert second.tokens == [A, B_, EOS] and second.log_prob == pytest.approx(math.log(0.5 * 0.34 * 0.9))
    assert second.score == pytest.approx(math.log(0.153) / (8 / 6) ** 0.6)


def test_finished_hypotheses_are_never_extended():
    model = TableModel(TABLE, UNIFORM)
    beam_search(model, SRC, beam_size=3, alpha=0.6, max_len=6)
    assert EOS not in model.fed, "a hypothesis that wrote <eos> is frozen: nothing is scored after it"


def test_an_eos_outside_the_first_k_candidates_does_not_finish():
    """Step 1 ranks a, b, <eos>: with k = 2, <eos> is third and "<eos>" alone never becomes a hypothesis."""
    out = beam_search(TableModel(TABLE, UNIFORM), SRC, beam_size=2, alpha=0.0, max_len=5, n_best=2)
    assert [h.tokens for h in out.nbest[0]] == [[B_, EOS], [A, B_, EOS]]
    wide = beam_search(TableModel(TABLE, UNIFORM), SRC, beam_size=3, alpha=0.0, max_len=5, n_best=3)
    assert [EOS] in [h.tokens for h in wide.nbest[0]]


def test_the_length_penalty_can_change_the_winner():
    table = {(): {EOS: 0.3, A: 0.7}, (A,): {A: 0.5, EOS: 0.5}, (A, A): {EOS: 0.9, C: 0.1}}
    # "<eos>": log 0.3 = -1.204; "a <eos>": log 0.35 = -1.050; "a a <eos>": log 0.315 = -1.155
    plain = beam_search(TableModel(table, UNIFORM), SRC, beam_size=3, alpha=0.0, max_len=4, n_best=3)
    assert [h.tokens for h in plain.nbest[0]] == [[A, EOS], [A, A, EOS], [EOS]]
    assert plain.scores.item() == pytest.approx(math.log(0.35))
    # alpha = 2: -1.050 / (7/6)^2 = -0.771 < -1.155 / (8/6)^2 = -0.650
    long = beam_search(TableModel(table, UNIFORM), SRC, beam_size=3, alpha=2.0, max_len=4)
    assert long.tokens.tolist() == [[A, A, EOS]] and long.scores.item() == pytest.approx(math.log(0.315) / (8 / 6) ** 2)


def test_default_max_len_is_the_source_length_plus_50():
    never_ends = TableModel({}, {A: 0.6, B_: 0.4 - 1e-6, EOS: 1e-6})
    batch = make_batch([[4, 5, 6], [7], [4, 4, 4, 4, 4, 4, 4]], [[4]] * 3)
    out = beam_search(never_ends, batch.src, batch.src_padding_mask, beam_size=2)
    assert out.lengths.tolist() == [53, 51, 57]
    assert out.tokens.shape == (3, 57) and out.tokens[1, 51:].eq(PAD).all() and out.tokens[0, :53].eq(A).all()

    class Capped(TableModel):
        @dataclass
        class config:  # noqa: N801 (a config's attributes, read like an instance's)
            max_len = 20

    capped = Capped({}, {A: 0.6, B_: 0.4 - 1e-6, EOS: 1e-6})
    assert beam_search(capped, batch.src, batch.src_padding_mask, beam_size=2).lengths.tolist() == [20, 20, 20]
    assert beam_search(never_ends, batch.src, batch.src_padding_mask, beam_size=2, max_len=4).lengths.tolist() == [
        4,
        4,
        4,
    ]


def test_bad_input_is_a_clear_error():
    model = TableModel(TABLE, UNIFORM)
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="beam_size must be an int >= 1"):
            beam_search(model, SRC, beam_size=bad)
    for bad in (-0.1, float("nan"), float("inf"), "0.6"):
        with pytest.raises(ValueError, match="alpha .* must be a finite number >= 0"):
            beam_search(model, SRC, alpha=bad)
    batch = make_batch([[4, 5], [6]], [[4], [4]])
    empty = batch.src_padding_mask.clone()
    empty[1] = True
    with pytest.raises(ValueError, match=r"empty source sentence \(rows \[1\]"):
        beam_search(model, batch.src, empty)
    with pytest.raises(ValueError, match="empty source sentence"):
        beam_search(model, torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"src must have shape \(B, S\)"):
        beam_search(model, torch.tensor([4, 5]))
    with pytest.raises(ValueError, match="n_best must be an int from 1 to beam_size = 4"):
        beam_search(model, SRC, n_best=5)
    with pytest.raises(ValueError, match="max_len must be an int >= 1"):
        beam_search(model, SRC, max_len=0)

    class NoSelect(TableModel):
        def start(self, src, src_padding_mask=None):
            return object()

    with pytest.raises(TypeError, match="select"):
        beam_search(NoSelect(TABLE, UNIFORM), SRC)


# --- real models: the RNNs of chapters 2 and 3 --------------------------------------------


def _rnn(attention: bool, tgt_vocab: int = 12, sharpen: float = 3.0) -> Seq2Seq:
    torch.manual_seed(0)
    model = Seq2Seq(
        Seq2SeqConfig(12, tgt_vocab, embed_size=8, hidden_size=16, num_layers=2, attention=attention)
    ).double()
    with torch.no_grad():
        model.decoder.output.weight.mul_(sharpen)  # peakier distributions than an untrained model's
    return model.eval()


def _transformer(tgt_vocab: int = 12, sharpen: float = 3.0, norm_first: bool = False) -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(
        12, tgt_vocab, d_model=16, num_heads=4, num_layers=2, d_ff=32, dropout=0.1, norm_first=norm_first, max_len=64
    )
    model = Transformer(config).double()
    with torch.no_grad():
        model.tgt_embedding.weight.mul_(sharpen)  # tied to the output layer: peakier distributions
    return model.eval()


MODELS = {
    "rnn-plain": lambda **kw: _rnn(False, **kw),
    "rnn-attention": lambda **kw: _rnn(True, **kw),
    "transformer": lambda **kw: _transformer(**kw),
    "transformer-pre-ln": lambda **kw: _transformer(norm_first=True, **kw),
}


class _WithoutCache(torch.nn.Module):
    """The Transformer decoding through its own uncached state: the decoder runs over the whole prefix each step."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config

    def start(self, src, src_padding_mask=None):
        return self.model.start(src, src_padding_mask, cache=False)

    def step(self, tokens, state):
        return self.model.step(tokens, state)


SOURCES = [[4, 5, 6, 7, 8, 9], [9, 4], [5, 6, 11], [7, 7, 8, 10, 11], [4]]


def test_the_rnn_state_selects_rows():
    model = _rnn(True)
    batch = make_batch(SOURCES[:3], [[4]] * 3)
    state = model.start(batch.src, batch.src_padding_mask)
    picked = state.select(torch.tensor([2, 0, 2]))
    assert isinstance(picked, DecoderState) and picked.hidden.shape == (2, 3, 16)
    assert torch.equal(picked.hidden[:, 1], state.hidden[:, 0]) and torch.equal(picked.memory[0], state.memory[2])
    assert torch.equal(picked.memory_padding_mask[2], state.memory_padding_mask[2]) and torch.equal(
        picked.projected_keys[1], state.projected_keys[0]
    )
    logits, _ = model.step(torch.full((3,), BOS), picked)
    alone, _ = model.step(torch.full((3,), BOS), state)
    assert torch.allclose(logits, alone[[2, 0, 2]])
    with pytest.raises(TypeError, match="1-D tensor of integer row indices"):
        state.select(torch.tensor([True, False, True]))
    with pytest.raises(IndexError, match=r"row indices must be in \[0, 3\)"):
        state.select(torch.tensor([0, 3]))


@pytest.mark.parametrize("name", MODELS)
def test_beam_size_one_is_greedy_decoding(name):
    model = MODELS[name]()
    batch = make_batch(SOURCES, [[4]] * len(SOURCES))
    greedy = greedy_decode(model, batch.src, batch.src_padding_mask, max_len=9)
    beam = beam_search(model, batch.src, batch.src_padding_mask, beam_size=1, alpha=0.6, max_len=9)
    width = beam.tokens.shape[1]
    assert torch.equal(beam.tokens, greedy.tokens[:, :width]) and torch.all(greedy.tokens[:, width:] == PAD)
    assert torch.equal(beam.lengths, greedy.lengths)


def _exhaustive(model, src: list[int], max_len: int, alpha: float, vocab_size: int):
    """Every possible translation up to max_len tokens, scored by teacher forcing:
    [(score, log p, tokens)], best first.
    """
    words = [t for t in range(vocab_size) if t not in (PAD, BOS)]
    non_eos = [t for t in words if t != EOS]
    candidates = [list(p) + [EOS] for n in range(max_len) for p in itertools.product(non_eos, repeat=n)]
    candidates += [
        list(p) + [t] for p in itertools.product(non_eos, repeat=max_len - 1) for t in non_eos
    ]  # cut at max_len
    width = max(len(c) for c in candidates)
    tgt_in = torch.tensor([[BOS] + c[:-1] + [PAD] * (width - len(c)) for c in candidates])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(torch.tensor([src] * len(candidates)), None, tgt_in), dim=-1)
    scored = []
    for i, c in enumerate(candidates):
        lp = float(sum(log_probs[i, t, tok] for t, tok in enumerate(c)))
        scored.append((lp / length_penalty(len(c), alpha), lp, c))
    return sorted(scored, key=lambda x: -x[0])


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
@pytest.mark.parametrize("name", MODELS)
def test_a_beam_that_keeps_every_prefix_finds_the_exhaustive_best(name, alpha):
    vocab_size, max_len = 6, 4  # words: <eos> <unk> 4 5; 121 possible translations, at most 108 candidates a step
    model = MODELS[name](tgt_vocab=vocab_size)
    for src in ([4, 5, 6], [7, 8]):
        best = _exhaustive(model, src, max_len, alpha, vocab_size)
        out = beam_search(model, torch.tensor([src]), beam_size=128, alpha=alpha, max_len=max_len, n_best=10)
        assert out.tokens[0, : out.lengths[0]].tolist() == best[0][2]
        assert out.scores[0].item() == pytest.approx(best[0][0], rel=1e-9)
        assert [h.tokens for h in out.nbest[0]] == [c for _, _, c in best[:10]]
        assert [h.log_prob for h in out.nbest[0]] == pytest.approx([lp for _, lp, _ in best[:10]], rel=1e-9)
        small = beam_search(model, torch.tensor([src]), beam_size=2, alpha=alpha, max_len=max_len)
        assert small.scores[0] <= out.scores[0] + 1e-12, "a narrower beam can only do worse"


@pytest.mark.parametrize("name", MODELS)
def test_a_sentence_decodes_the_same_whatever_shares_its_batch(name):
    model = MODELS[name]()
    batch = make_batch(SOURCES, [[4]] * len(SOURCES))
    together = beam_search(model, batch.src, batch.src_padding_mask, beam_size=3, max_len=8, n_best=3)
    order = [3, 0, 4, 2, 1]
    shuffled = make_batch([SOURCES[i] for i in order], [[4]] * len(SOURCES))
    other = beam_search(model, shuffled.src, shuffled.src_padding_mask, beam_size=3, max_len=8, n_best=3)
    for j, i in enumerate(order):
        alone = beam_search(model, torch.tensor([SOURCES[i]]), beam_size=3, max_len=8, n_best=3)
        for result, row in ((together, i), (other, j)):
            n = int(alone.lengths[0])
            assert result.tokens[row, :n].tolist() == alone.tokens[0, :n].tolist() and int(result.lengths[row]) == n
            assert result.scores[row].item() == pytest.approx(alone.scores[0].item(), rel=1e-9)
            assert [h.tokens for h in result.nbest[row]] == [h.tokens for h in alone.nbest[0]]


@pytest.mark.parametrize("name", MODELS)
def test_uncached_decoding_gives_the_same_tokens(name):
    model = MODELS[name]()
    batch = make_batch(SOURCES, [[4]] * len(SOURCES))
    references = [Uncached(model)]
    if isinstance(model, Transformer):
        references.append(_WithoutCache(model))
    for decode in (
        lambda m: greedy_decode(m, batch.src, batch.src_padding_mask, max_len=12),
        lambda m: beam_search(m, batch.src, batch.src_padding_mask, beam_size=4, max_len=12, n_best=4),
    ):
        cached = decode(model)
        for reference in references:
            uncached = decode(reference)
            assert torch.equal(cached.tokens, uncached.tokens) and torch.equal(cached.lengths, uncached.lengths)
            if isinstance(cached, BeamDecoded):
                assert torch.allclose(cached.scores, uncached.scores, rtol=1e-9)
                assert [[h.tokens for h in row] for row in cached.nbest] == [
                    [h.tokens for h in row] for row in uncached.nbest
                ]


def test_float32_transformer_cached_and_uncached_beams_agree():
    model = _transformer().float()
    batch = make_batch(SOURCES, [[4]] * len(SOURCES))
    cached = beam_search(model, batch.src, batch.src_padding_mask, beam_size=4, max_len=12)
    uncached = beam_search(_WithoutCache(model), batch.src, batch.src_padding_mask, beam_size=4, max_len=12)
    assert torch.equal(cached.tokens, uncached.tokens)
    assert torch.allclose(cached.scores.float(), uncached.scores.float(), atol=1e-4)


def test_the_default_length_respects_the_positional_table():
    model = _transformer()  # max_len = 64 positions
    long_source = torch.randint(4, 12, (1, 30), generator=torch.Generator().manual_seed(1))
    out = beam_search(model, long_source, beam_size=2)  # 30 + 50 = 80 > 64: capped, no error
    assert int(out.lengths.max()) <= 64


def test_translate_with_a_beam():
    from attnbook.data import load_corpus

    corpus = load_corpus(n_pairs=200, seed=0, max_len=12)
    torch.manual_seed(0)
    model = Seq2Seq(
        Seq2SeqConfig(len(corpus.src_vocab), len(corpus.tgt_vocab), embed_size=8, hidden_size=16, attention=True)
    ).eval()
    sources = [p.src_tokens for p in corpus.test[:12]]
    one_batch = translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, beam_size=3, max_len=6)
    small = translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, beam_size=3, max_len=6, batch_size=5)
    assert one_batch == small and len(one_batch) == 12 and all(len(t) <= 6 for t in one_batch)
    greedy = translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, max_len=6)
    assert translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, beam_size=1, max_len=6) == greedy
    with pytest.raises(ValueError, match="beam_size must be an int >= 1"):
        translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, beam_size=0)
    with pytest.raises(ValueError, match="alpha"):
        translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, beam_size=2, alpha=-1.0)


# --- the one-sentence beam search that chapter 8 shows, held to the batched one ---------------------


#: Every model with the default alpha; no length normalization and a strong one with one model of each family (how
#: finished hypotheses are scored and when the search stops do not depend on the architecture).
ONE_SENTENCE_CASES = [(name, 0.6) for name in MODELS] + [
    (name, alpha) for name in ("rnn-attention", "transformer") for alpha in (0.0, 2.0)
]


@pytest.mark.parametrize("name, alpha", ONE_SENTENCE_CASES)
def test_the_one_sentence_beam_search_finds_the_batched_ones_hypotheses_and_scores(name, alpha):
    model = MODELS[name]()
    batch = make_batch(SOURCES, [[4]] * len(SOURCES))
    for beam_size in (1, 2, 4):
        batched_all = beam_search(
            model, batch.src, batch.src_padding_mask, beam_size=beam_size, alpha=alpha, max_len=7, n_best=beam_size
        )
        for row, src in enumerate(SOURCES):
            short = beam_search_sentence(model, torch.tensor(src), beam_size=beam_size, alpha=alpha, max_len=7)
            want = batched_all.nbest[row]
            assert [h.tokens for h in short] == [h.tokens for h in want]  # every finished hypothesis, best first
            assert [h.log_prob for h in short] == pytest.approx([h.log_prob for h in want], rel=1e-9)
            assert [h.score for h in short] == pytest.approx([h.score for h in want], rel=1e-9)


@pytest.mark.parametrize("name", MODELS)
def test_the_one_sentence_beam_search_has_the_batched_ones_default_length(name):
    """The default output length, the source's + 50, is the batched search's (one beam, one alpha: an untrained
    model writes to the limit, and the one-sentence search is a loop in Python)."""
    model = MODELS[name]()
    batch = make_batch(SOURCES, [[4]] * len(SOURCES))
    batched = beam_search(model, batch.src, batch.src_padding_mask, beam_size=2, alpha=0.6, n_best=1)
    longest, shortest = 0, len(SOURCES) - 1  # in a padded batch each row's limit is its own source's length + 50
    assert len(SOURCES[longest]) == max(map(len, SOURCES)) and len(SOURCES[shortest]) == min(map(len, SOURCES))
    for row in (longest, shortest):
        alone = beam_search_sentence(model, torch.tensor(SOURCES[row]), beam_size=2, alpha=0.6)
        assert alone[0].tokens == batched.nbest[row][0].tokens


def test_the_one_sentence_beam_search_on_the_scripted_model_keeps_the_better_late_hypothesis():
    found = beam_search_sentence(TableModel(TABLE, UNIFORM), SRC[0], beam_size=2, alpha=0.6, max_len=5)
    batched = beam_search(TableModel(TABLE, UNIFORM), SRC, beam_size=2, alpha=0.6, max_len=5, n_best=2).nbest[0]
    assert [h.tokens for h in found] == [h.tokens for h in batched] and found[0].tokens == [B_, EOS]
    assert [h.score for h in found] == pytest.approx([h.score for h in batched], rel=1e-12)
