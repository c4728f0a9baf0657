"""Translation as language modelling, measured against the encoder–decoder (chapter 10; not a timed test).

Chapter 8 trains an encoder–decoder Transformer on its 4,000 generated pairs for four epochs. This script
trains, on the same pairs, batches and recipe (the paper's Adam and warm-up, label smoothing 0.1), a
decoder-only model of about the same number of parameters that reads each pair as one sequence,
``<bos> source <sep> target <eos>``, with the loss on the target alone
(:func:`attnbook.decoder_only.translation_loss`) — twice: with a prefix-LM mask (the source read as a whole,
:func:`~attnbook.decoder_only.prefix_mask`) and with the plain causal mask. It retrains chapter 8's
encoder–decoder with the same seeds, and gives the three models' test BLEU (greedy, sacreBLEU on the
tokens), their validation loss on the target tokens, parameter counts and training times, with the machine.
One thread, float64, as the chapters; about three minutes on two cores (two models at a time).

    PYTHONPATH=src .venv/bin/python tests/benchmarks/translation_as_lm.py --record book/results/translation_as_lm.json

``--epochs`` and ``--pairs`` change the budget (chapter 8's: 4 and 4,000).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

#: Chapter 8's default settings (notebooks/08_training_a_translator.ipynb, FULL_RUN off).
MAX_LEN, D_MODEL, HEADS, LAYERS, BATCH, WARMUP, FACTOR = 25, 64, 4, 2, 32, 100, 0.5
SMOOTHING = 0.1


def _corpus(pairs: int):
    from attnbook.data import load_corpus

    return load_corpus(n_pairs=pairs, seed=0, max_len=MAX_LEN)


def shared_ids(corpus):
    """One id space for both languages: the source's ids, the target's words after them, one new ``<sep>``.

    The four reserved tokens (``<pad> <bos> <eos> <unk>``, ids 0–3) are shared; the returned function maps a
    target id into the shared space.
    """
    offset = len(corpus.src_vocab) - 4
    sep_id = len(corpus.src_vocab) + len(corpus.tgt_vocab) - 4
    return (lambda t: t if t < 4 else t + offset), (lambda t: t if t < 4 else t - offset), sep_id, sep_id + 1


def decoder_only_config(corpus, target_parameters: int):
    """The decoder-only model as deep as the encoder–decoder (its two stacks' layers), of width 64 and 4 heads, with
    the feed-forward width that brings it nearest to ``target_parameters``; rotary positions, fixed as the
    encoder–decoder's sinusoids are (learned positions would have to be learned in 400 steps)."""
    from attnbook.decoder_only import DecoderOnlyConfig, parameter_count

    vocab = shared_ids(corpus)[3]
    configs = [
        DecoderOnlyConfig(
            vocab_size=vocab,
            d_model=D_MODEL,
            num_heads=HEADS,
            num_layers=2 * LAYERS,
            d_ff=d_ff,
            max_len=128,
            dropout=0.0,
            activation="relu",
            positions="rotary",
        )  # fmt: skip
        for d_ff in range(32, 2049, 16)
    ]
    return min(configs, key=lambda c: abs(parameter_count(c) - target_parameters))


def train_encoder_decoder(pairs: int, epochs: int) -> dict:
    from attnbook.decode import translate
    from attnbook.metrics import sacrebleu_bleu
    from attnbook.notebook import setup
    from attnbook.train import evaluate, paper_optimizer, train
    from attnbook.transformer import Transformer, TransformerConfig

    setup()
    torch.set_default_dtype(torch.float64)
    corpus = _corpus(pairs)
    config = TransformerConfig(
        len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=D_MODEL, num_heads=HEADS, num_layers=LAYERS,
        d_ff=4 * D_MODEL, dropout=0.0, max_len=MAX_LEN + 60,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Transformer(config)
    optimizer, scheduler = paper_optimizer(model, warmup=WARMUP, factor=FACTOR)
    started = time.perf_counter()
    history = train(
        model, corpus.batches("train", batch_size=BATCH, seed=0), corpus.batches("valid", batch_size=256),
        epochs=epochs, optimizer=optimizer, scheduler=scheduler, label_smoothing=SMOOTHING, plot=False,
        verbose=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    sources, references = corpus.tokens("test")
    hypotheses = translate(model, sources, corpus.src_vocab, corpus.tgt_vocab)
    return {
        "model": "encoder–decoder (chapter 8)",
        "parameters": sum(p.numel() for p in model.parameters()),
        "layers": f"{LAYERS} + {LAYERS}",
        "d_ff": 4 * D_MODEL,
        "valid_loss": evaluate(model, corpus.batches("valid", batch_size=256)),
        "history_valid_loss": history.final_valid_loss,
        "test_bleu": sacrebleu_bleu(hypotheses, references),
        "train_seconds": seconds,
        "example": " ".join(hypotheses[0]),
    }


def train_decoder_only(pairs: int, epochs: int, prefix: bool, target_parameters: int) -> dict:
    import torch.nn.functional as F

    from attnbook.decoder_only import DecoderOnlyTransformer, pair_sequences, target_prediction_mask, translate_greedy
    from attnbook.metrics import sacrebleu_bleu
    from attnbook.notebook import setup
    from attnbook.train import paper_optimizer

    setup()
    torch.set_default_dtype(torch.float64)
    corpus = _corpus(pairs)
    to_shared, from_shared, sep_id, _ = shared_ids(corpus)
    config = decoder_only_config(corpus, target_parameters)
    torch.manual_seed(0)
    model = DecoderOnlyTransformer(config)
    optimizer, scheduler = paper_optimizer(model, warmup=WARMUP, factor=FACTOR)
    ends = {"bos_id": 1, "eos_id": 2, "sep_id": sep_id}

    def sequences(batch):
        sources = [[t for t in row.tolist() if t != 0] for row in batch.src]
        targets = [[to_shared(t) for t in row.tolist() if t not in (0, 1, 2)] for row in batch.tgt_out]
        return pair_sequences(sources, targets, pad_id=0, **ends)

    def loss_of(tokens, lengths, smoothing):
        logits = model(tokens, prefix_lengths=lengths if prefix else None)
        mask = target_prediction_mask(tokens, sep_id, 0).flatten()
        flat = logits[:, :-1].flatten(0, 1)[mask]
        return F.cross_entropy(flat, tokens[:, 1:].flatten()[mask], label_smoothing=smoothing)

    train_batches = corpus.batches("train", batch_size=BATCH, seed=0)
    started = time.perf_counter()
    for epoch in range(epochs):
        model.train()
        sampler = getattr(train_batches, "batch_sampler", train_batches)
        if hasattr(sampler, "set_epoch"):  # the same batches, in the same order, as train() gives chapter 8's model
            sampler.set_epoch(epoch)
        for batch in train_batches:
            tokens, lengths = sequences(batch)
            loss = loss_of(tokens, lengths, SMOOTHING)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
    seconds = time.perf_counter() - started
    model.eval()
    with torch.no_grad():
        total = count = 0
        for batch in corpus.batches("valid", batch_size=256):
            tokens, lengths = sequences(batch)
            n = int(target_prediction_mask(tokens, sep_id, 0).sum())
            total += float(loss_of(tokens, lengths, 0.0)) * n
            count += n
    sources, references = corpus.tokens("test")
    ids = translate_greedy(model, [corpus.src_vocab.encode(s) for s in sources], prefix=prefix, **ends)
    hypotheses = [corpus.tgt_vocab.decode([from_shared(t) for t in row], strip_special=True) for row in ids]
    return {
        "model": f"decoder only, {'prefix-LM' if prefix else 'causal'} mask",
        "parameters": sum(p.numel() for p in model.parameters()),
        "layers": str(config.num_layers),
        "d_ff": config.d_ff,
        "valid_loss": total / count,
        "test_bleu": sacrebleu_bleu(hypotheses, references),
        "train_seconds": seconds,
        "example": " ".join(hypotheses[0]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, help="write the results as JSON here")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--pairs", type=int, default=4000)
    args = parser.parse_args(argv)
    from machine import describe

    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=2) as pool:
        encoder_decoder = pool.submit(train_encoder_decoder, args.pairs, args.epochs).result()
        target = encoder_decoder["parameters"]
        runs = [pool.submit(train_decoder_only, args.pairs, args.epochs, prefix, target) for prefix in (True, False)]
        results = [encoder_decoder] + [run.result() for run in runs]
    print(f"{'model':<32}{'parameters':>11}{'layers':>8}{'valid loss':>11}{'test BLEU':>10}{'seconds':>9}")
    for r in results:
        print(
            f"{r['model']:<32}{r['parameters']:>11,}{r['layers']:>8}{r['valid_loss']:>11.3f}"
            f"{r['test_bleu']:>10.1f}{r['train_seconds']:>9.1f}"
        )
    record = {
        "what": "chapter 8's pairs, recipe and epochs: the encoder–decoder against a decoder-only model of about "
        "as many parameters reading source <sep> target as one sequence, with a prefix-LM or a causal mask; "
        "greedy decoding, test BLEU by sacreBLEU on the tokens; float64, one thread per model",
        "pairs": args.pairs,
        "epochs": args.epochs,
        "runs": results,
        "seconds": round(time.perf_counter() - started, 1),
        "machine": describe(),
    }
    if args.record:
        args.record.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"written: {args.record}")
    return 0 if all(math.isfinite(r["valid_loss"]) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
