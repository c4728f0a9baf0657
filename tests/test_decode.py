"""Greedy decoding and turning indices back into text."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from attnbook.decode import cut_at_eos, greedy_decode, ids_to_text, ids_to_tokens, translate
from attnbook.rnn import Seq2Seq, Seq2SeqConfig
from attnbook.train import train
from toy_seq2seq import BOS, EOS, PAD, UNK, ToyVocab, batches_of, make_batch, one_thread, reversal_pairs  # noqa: F401 (fixture)


@dataclass
class _Scripted:
    step_no: int = 0


class ScriptedModel(torch.nn.Module):
    """Emits a fixed script of tokens per sentence, whatever it is fed; records what it was fed."""

    def __init__(self, script: list[list[int]], vocab_size: int = 10):
        super().__init__()
        self.script, self.vocab_size, self.fed = script, vocab_size, []

    def start(self, src, src_padding_mask):
        return _Scripted()

    def step(self, tokens, state):
        self.fed.append(tokens.tolist())
        logits = torch.zeros(len(self.script), self.vocab_size)
        for b, row in enumerate(self.script):
            logits[b, row[min(state.step_no, len(row) - 1)]] = 1.0
        return logits, _Scripted(state.step_no + 1)


def test_stops_at_eos_pads_after_it_and_counts_lengths():
    model = ScriptedModel([[5, 6, EOS, 7, 7], [4, EOS, 9, 9, 9], [8, 8, 8, 8, 8]])
    out = greedy_decode(model, torch.zeros(3, 2, dtype=torch.long), max_len=4)
    assert out.tokens.tolist() == [[5, 6, EOS, PAD], [4, EOS, PAD, PAD], [8, 8, 8, 8]]
    assert out.lengths.tolist() == [3, 2, 4]
    assert model.fed[0] == [BOS, BOS, BOS], "decoding starts from <bos>"
    assert model.fed[1] == [5, 4, 8], "each step is fed the previous step's choice"
    assert out.attention is None


def test_stops_early_when_every_sentence_is_finished():
    model = ScriptedModel([[EOS], [4, EOS]])
    out = greedy_decode(model, torch.zeros(2, 3, dtype=torch.long), max_len=50)
    assert out.tokens.shape == (2, 2) and len(model.fed) == 2


def test_max_len_one_and_bad_max_len():
    model = ScriptedModel([[5, EOS]])
    out = greedy_decode(model, torch.zeros(1, 2, dtype=torch.long), max_len=1)
    assert out.tokens.tolist() == [[5]] and out.lengths.tolist() == [1]
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="max_len must be an int >= 1"):
            greedy_decode(model, torch.zeros(1, 2, dtype=torch.long), max_len=bad)
    with pytest.raises(ValueError, match=r"src must have shape \(B, S\)"):
        greedy_decode(model, torch.zeros(2, dtype=torch.long), max_len=3)


class _Rambler(torch.nn.Module):
    """Writes token 5 for ever: every sentence runs to its limit."""

    def start(self, src, src_padding_mask=None):
        return None

    def step(self, tokens, state):
        return torch.nn.functional.one_hot(torch.full_like(tokens, 5), 8).double(), state


def test_by_default_each_sentence_may_have_its_sources_length_plus_50():
    src = torch.ones(2, 4, dtype=torch.long)
    mask = torch.tensor([[False] * 4, [False, False, True, True]])
    out = greedy_decode(_Rambler(), src, mask)
    assert out.lengths.tolist() == [54, 52]  # output_limit: the paper's source + 50, each sentence its own
    assert (out.tokens[1, 52:] == 0).all() and (out.tokens[1, :52] == 5).all() and (out.tokens[0] == 5).all()


@pytest.mark.parametrize("attention", [False, True], ids=["plain", "attention"])
def test_batched_decoding_equals_decoding_each_sentence_alone(attention):
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(12, 12, embed_size=8, hidden_size=16, attention=attention)).train()
    sources = [[4, 5, 6, 7, 8, 9], [9, 4], [5, 6, 11]]
    batch = make_batch(sources, [[4]] * 3)
    out = greedy_decode(model, batch.src, batch.src_padding_mask, max_len=7)
    assert model.training, "the model's mode is restored"
    for b, x in enumerate(sources):
        alone = greedy_decode(model, torch.tensor([x]), max_len=7)
        n = int(alone.lengths[0])
        assert out.tokens[b, :n].tolist() == alone.tokens[0, :n].tolist()
        assert int(out.lengths[b]) == n
        if attention:
            assert torch.allclose(out.attention[b, :n, : len(x)], alone.attention[0, :n], atol=1e-5)
            assert torch.all(out.attention[b, :, len(x) :] == 0)
    if attention:
        assert out.attention.shape == (3, out.tokens.shape[1], 6)


@pytest.mark.slow
def test_a_trained_model_reverses_its_inputs():
    pairs = reversal_pairs(448, vocab_size=10, max_len=6)
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(10, 10, embed_size=16, hidden_size=32, attention=True))
    train(model, batches_of(pairs[:384], 32), epochs=12, lr=1e-2, plot=False, verbose=False)
    test = make_batch([x for x, _ in pairs[384:]], [y for _, y in pairs[384:]])
    out = greedy_decode(model, test.src, test.src_padding_mask, max_len=10)
    right = sum(cut_at_eos(row) == y for row, (_, y) in zip(out.tokens, pairs[384:]))
    assert right >= 0.7 * len(pairs[384:]), f"only {right} of 64 reversed exactly"


def test_ids_back_to_tokens_and_text():
    vocab = ToyVocab(["le", "chat", "dort", "."])  # ids 4..7
    ids = torch.tensor([[4, 5, 6, 7, EOS, PAD], [5, UNK, EOS, 6, 6, 6], [4, 4, 4, 4, 4, 4]])  # <unk> is kept
    assert ids_to_tokens(ids, vocab) == [["le", "chat", "dort", "."], ["chat", "<unk>"], ["le"] * 6]
    assert ids_to_text(ids[:1], vocab) == ["le chat dort ."]
    assert ids_to_text(ids[:1], vocab, lang="fr") == ["Le chat dort."]
    assert cut_at_eos([4, EOS, 5]) == [4] and cut_at_eos(torch.tensor([4, 5])) == [4, 5]
    with pytest.raises(IndexError, match="index 8 is outside the vocabulary of size 8"):
        ids_to_tokens(torch.tensor([[4, 8]]), vocab)
    with pytest.raises(ValueError, match=r"shape \(B, L\)"):
        ids_to_tokens(torch.tensor([4, 5]), vocab)


def _corpus_model(attention=True):
    from attnbook.data import load_corpus

    corpus = load_corpus(n_pairs=200, seed=0, max_len=12)
    torch.manual_seed(0)
    config = Seq2SeqConfig(
        len(corpus.src_vocab), len(corpus.tgt_vocab), embed_size=8, hidden_size=16, attention=attention
    )
    return corpus, Seq2Seq(config).eval()


def test_translate_equals_greedy_decoding_and_ignores_the_batch_size():
    corpus, model = _corpus_model()
    sources = [p.src_tokens for p in corpus.test]
    one_batch = translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, max_len=6)
    small_batches = translate(model, sources, corpus.src_vocab, corpus.tgt_vocab, max_len=6, batch_size=3)
    assert one_batch == small_batches and len(one_batch) == len(sources)
    first = torch.tensor([corpus.src_vocab.encode(sources[0])])
    alone = greedy_decode(model, first, max_len=6)
    assert one_batch[0] == ids_to_tokens(alone.tokens, corpus.tgt_vocab)[0]
    assert all(len(t) <= 6 for t in one_batch)
    unknown = translate(model, [["zzz", "qqq"]], corpus.src_vocab, corpus.tgt_vocab, max_len=3)  # <unk> ids, no crash
    assert len(unknown) == 1


def test_translate_errors():
    corpus, model = _corpus_model(attention=False)
    with pytest.raises(TypeError, match="tokenized sentences"):
        translate(model, ["the cat ."], corpus.src_vocab, corpus.tgt_vocab)
    with pytest.raises(ValueError, match="empty sentence"):
        translate(model, [[]], corpus.src_vocab, corpus.tgt_vocab)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        translate(model, [["the"]], corpus.src_vocab, corpus.tgt_vocab, batch_size=0)
    with pytest.raises(ValueError, match="max_len must be an int >= 1"):
        translate(model, [["the"]], corpus.src_vocab, corpus.tgt_vocab, max_len=-1)
