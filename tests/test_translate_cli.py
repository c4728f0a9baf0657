"""The command line, end to end: train, evaluate and translate on small pairs files, every bad input, resume, Ctrl-C.

Most runs call ``main([...])`` in this process (a tiny model trains in a
second); ``python -m attnbook.translate`` runs in a subprocess where a real
process is the point (Ctrl-C, a terminal's progress line).
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import pty
import random
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch

import attnbook.data.anki
import attnbook.translate as cli
from attnbook.data import BucketBatchSampler, Pair, generate_pairs, split_by_checksum
from attnbook.metrics import bleu_tokenizer
from attnbook.train import read_checkpoint, save_checkpoint
from attnbook.translate.run_pairs import held_out_fraction, split_run_pairs
from attnbook.translate.train import AVERAGE_SPAN
from notebook_index import ROOT

TINY = [
    "--d-model",
    "16",
    "--num-heads",
    "2",
    "--num-layers",
    "1",
    "--d-ff",
    "32",
    "--batch-tokens",
    "160",
    "--warmup",
    "20",
    "--min-freq",
    "1",
]
ERROR = "attnbook-translate: error:"


def write_anki(path: Path, rows) -> Path:
    """Rows (first column, second column) as a manythings.org Anki file, with the attribution column."""
    path.write_text(
        "".join(
            f"{a}\t{b}\tCC-BY 2.0 (France) Attribution: tatoeba.org #{i} (x) & #{i + 1} (y)\n"
            for i, (a, b) in enumerate(rows)
        ),
        encoding="utf-8",
    )
    return path


def en_fr_rows(n: int = 240):
    return [(p.src, p.tgt) for p in generate_pairs(n, seed=3, max_len=10, alignments=False)]


# A small English–Chinese–Japanese phrase book of our own: subject, verb, object.
_SUBJECTS = [
    ("I", "我", "私", 1),
    ("You", "你", "あなた", 2),
    ("He", "他", "彼", 3),
    ("She", "她", "彼女", 3),
    ("We", "我们", "私たち", 1),
    ("They", "他们", "彼ら", 1),
]
_VERBS = [
    ("like", "喜欢", "が好きです"),
    ("see", "看见", "を見ます"),
    ("want", "要", "が欲しいです"),
    ("buy", "买", "を買います"),
    ("read", "读", "を読みます"),
]
_OBJECTS = [
    ("the cat", "猫", "猫"),
    ("the dog", "狗", "犬"),
    ("tea", "茶", "お茶"),
    ("the book", "书", "本"),
    ("rice", "米饭", "ご飯"),
    ("the car", "汽车", "車"),
    ("water", "水", "水"),
    ("the flower", "花", "花"),
]


def cjk_rows(lang: str):
    rows = []
    for en_s, zh_s, ja_s, person in _SUBJECTS:
        for en_v, zh_v, ja_v in _VERBS:
            for en_o, zh_o, ja_o in _OBJECTS:
                verb = en_v + ("s" if person == 3 else "")
                other = f"{zh_s}{zh_v}{zh_o}。" if lang == "zh" else f"{ja_s}は{ja_o}{ja_v}。"
                rows.append((f"{en_s} {verb} {en_o}.", other))
    random.Random(0).shuffle(rows)
    return rows


def run(argv, capsys, stdin: str | None = None, monkeypatch=None):
    """``main(argv)`` in this process: (exit status, stdout, stderr)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def assert_clean_error(status, err, *needles):
    assert status == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(ERROR), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


@pytest.fixture(scope="module")
def en_fr_run(tmp_path_factory):
    """One tiny English→French run shared by the tests that only read it."""
    folder = tmp_path_factory.mktemp("en-fr")
    pairs = write_anki(folder / "fra.txt", en_fr_rows())
    status = cli.main(
        [
            "train",
            "--pairs",
            str(pairs),
            "--src",
            "en",
            "--tgt",
            "fr",
            "--out",
            str(folder / "run"),
            "--epochs",
            "2",
            *TINY,
        ]
    )
    assert status == 0
    return folder / "run"


# --- train, evaluate, translate ---------------------------------------------------------------


def test_train_writes_a_complete_run_folder(en_fr_run):
    names = {p.name for p in en_fr_run.iterdir()}
    assert names == {
        "config.json",
        "checkpoint.pt",
        "best.pt",
        "log.jsonl",
        "subwords.model",
        "decoding.json",
        "vocab.src.json",
        "vocab.tgt.json",
    }
    config = json.loads((en_fr_run / "config.json").read_text())
    assert config["tokens"] == {
        "kind": "subwords",
        "shared": True,
        "files": ["subwords.model"],
    }  # English and French share a script
    assert (config["src_lang"], config["tgt_lang"], config["arch"], config["reverse"]) == (
        "en",
        "fr",
        "transformer",
        False,
    )
    assert config["model"]["d_model"] == 16 and config["settings"]["label_smoothing"] == 0.1
    assert sum(config["split_sizes"].values()) == 240 and config["split_sizes"]["test"] > 0
    payload = read_checkpoint(en_fr_run / "checkpoint.pt")  # weights_only=True inside
    state = payload["extra"]["train_state"]
    assert state["position"]["epoch"] == 2 and state["position"]["step_in_epoch"] == 0 and state["world"] == 1
    assert (
        state["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.98)
        and state["optimizer"]["param_groups"][0]["eps"] == 1e-9
        and state["optimizer"]["param_groups"][0]["fused"]  # one kernel for every parameter: faster on a CPU
    )
    torch.load(en_fr_run / "checkpoint.pt", weights_only=True)
    events = [json.loads(line) for line in (en_fr_run / "log.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("epoch") == 2
    epochs = [e for e in events if e["event"] == "epoch"]
    assert all(e["valid_loss"] is not None and e["tokens_per_second"] > 0 for e in epochs)
    (used,) = [e for e in events if e["event"] == "utilisation"]  # the model's arithmetic over the device's peak
    assert used["flops_per_token"] > 0 and used["peak_flops"] > 0
    # not a duration: the share is the record's own arithmetic on the speed it recorded
    assert used["share"] == pytest.approx(used["flops_per_token"] * used["tokens_per_second"] / used["peak_flops"])
    best = read_checkpoint(en_fr_run / "best.pt")["extra"]  # weights_only=True inside
    lowest = min(epochs, key=lambda e: e["valid_loss"])
    assert [e["epoch"] for e in events if e["event"] == "best"][-1] == lowest["epoch"]
    (average,) = [e for e in events if e["event"] == "average"]  # the last snapshots of the weights, averaged
    final, steps = state["position"]["step"], average["steps"]
    every = max(1, round(final * AVERAGE_SPAN / 4))  # 5 snapshots (--average), the final weights the last
    assert average["every"] == every and [e["every"] for e in events if e["event"] == "snapshots"] == [every]
    assert final > 5 * every and len(steps) == 5 and steps[-1] == final and 0 < final - steps[-2] <= every
    assert [b - a for a, b in zip(steps, steps[1:-1])] == [every] * 3
    assert average["best_valid_loss"] == lowest["valid_loss"]
    assert average["kept"] == (average["valid_loss"] < lowest["valid_loss"]) and "train_state" not in best
    kept = (2, average["valid_loss"]) if average["kept"] else (lowest["epoch"], lowest["valid_loss"])
    assert (best["epoch"], best["valid_loss"]) == kept and (best.get("averaged") == steps) == average["kept"]


def test_the_weights_of_the_best_epoch_translate_and_a_damaged_best_file_is_not_the_end(en_fr_run, tmp_path, capsys):
    import shutil

    status, reference, err = run(["translate", en_fr_run, "The cat sleeps."], capsys)
    assert status == 0, err
    copy = tmp_path / "copy"
    shutil.copytree(en_fr_run, copy)
    (copy / "checkpoint.pt").write_bytes(b"the last checkpoint is not what translates")
    status, out, err = run(["translate", copy, "The cat sleeps."], capsys)
    assert (status, out) == (0, reference), err  # best.pt was used
    shutil.copy(en_fr_run / "checkpoint.pt", copy / "checkpoint.pt")
    (copy / "best.pt").write_bytes(b"damaged")
    status, out, err = run(["translate", copy, "The cat sleeps."], capsys)
    assert status == 0 and out.strip(), err
    assert "best.pt cannot be used" in err and "the last checkpoint is used instead" in err and "Traceback" not in err


def test_evaluate_prints_a_table_of_sacrebleu_scores(en_fr_run, capsys):
    status, out, err = run(["evaluate", en_fr_run, "--beam", "1", "--limit", "10"], capsys)
    assert status == 0, err
    assert "test split of fra.txt: 10 sentences, greedy" in out
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines()[2:5]}
    assert set(rows) == {"BLEU", "BLEU, lowercase", "chrF"}
    assert "tok:13a" in rows["BLEU"] and "case:lc" in rows["BLEU, lowercase"] and "nc:6" in rows["chrF"]


def test_evaluate_scores_every_pair_of_a_test_file_with_the_brevity_penalty(en_fr_run, tmp_path, capsys):
    test = write_anki(tmp_path / "mine.txt", en_fr_rows(30)[:7])
    report = tmp_path / "scores.json"
    status, out, err = run(["evaluate", en_fr_run, "--test", test, "--show", "2", "--json", report], capsys)
    assert status == 0, err
    assert "every pair of mine.txt: 7 sentences" in out
    assert any(line.startswith("brevity penalty") and "references" in line for line in out.splitlines())
    assert out.count("\n→ ") == 2 and out.count("\n= ") == 2  # two examples beside their references
    scores = json.loads(report.read_text())
    assert scores["sentences"] == 7 and set(scores["scores"]) >= {"bleu", "chrf", "brevity_penalty", "signatures"}
    bad = tmp_path / "bad.txt"
    bad.write_text("The cat sleeps.\tLe chat dort.\n\nonly one column\n", encoding="utf-8")
    assert_clean_error(
        *run(["evaluate", en_fr_run, "--test", bad], capsys)[::2], "--test", "line 3 is not 'sentence<TAB>translation"
    )
    assert_clean_error(*run(["evaluate", en_fr_run, "--test", tmp_path / "none.txt"], capsys)[::2], "no pairs file at")


def test_no_test_split_trains_on_the_test_pairs_and_keeps_the_validation_pairs(en_fr_run, tmp_path, capsys):
    # --no-test-split: for test pairs in a file of their own; the file's test split joins the training pairs
    from attnbook.translate.console import Console
    from attnbook.translate.run_folder import read_config
    from attnbook.translate.run_pairs import reread_run_pairs

    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows())
    argv = ["train", "--pairs", pairs, "--src", "en", "--tgt", "fr", "--out", tmp_path / "all", "--steps", 2, *TINY]
    status, out, err = run([*argv, "--no-test-split"], capsys)
    assert status == 0 and "validation, no test pairs (--no-test-split);" in out, err
    mine, theirs = read_config(tmp_path / "all"), read_config(en_fr_run)  # the same pairs, with and without
    split, usual = mine["split_sizes"], theirs["split_sizes"]
    assert mine["settings"]["test_split"] is False and theirs["settings"]["test_split"] is True
    assert split == {"train": usual["train"] + usual["test"], "valid": usual["valid"], "test": 0}
    console = Console(active=False)
    ours, _ = reread_run_pairs(mine, console)
    usual_splits, _ = reread_run_pairs(theirs, console, str(pairs))
    assert ours.valid == usual_splits.valid and set(ours.train) == set(usual_splits.train) | set(usual_splits.test)
    assert_clean_error(*run(["evaluate", tmp_path / "all"], capsys)[::2], "--no-test-split", "--test FILE")
    test = write_anki(tmp_path / "mine.txt", en_fr_rows(30)[:5])
    status, out, err = run(["evaluate", tmp_path / "all", "--test", test], capsys)
    assert status == 0 and "every pair of mine.txt: 5 sentences" in out, err
    # a resumed run keeps the split it was trained with
    assert run(["train", "--out", tmp_path / "all", "--resume", "--steps", 3], capsys)[0] == 0
    assert read_config(tmp_path / "all")["settings"]["test_split"] is False


def test_the_decoding_chosen_on_the_validation_pairs_is_used_unless_told_otherwise(en_fr_run, capsys):
    choice = json.loads((en_fr_run / "decoding.json").read_text())
    chosen = choice["chosen"]
    assert {c["alpha"] for c in choice["candidates"] if c["beam_size"] == 4} == {
        0.0,
        0.2,
        0.4,
        0.6,
        0.8,
        1.0,
        1.2,
        1.5,
        2.0,
        2.5,
        3.0,
    }
    assert all(0 <= c["brevity_penalty"] <= 1 for c in choice["candidates"])
    status, out, err = run(["evaluate", en_fr_run, "--limit", "3"], capsys)
    how = "greedy" if chosen["beam_size"] == 1 else f"beam 4, α {chosen['alpha']:g}"
    assert status == 0 and f"{how}, at most {chosen['max_len_a']:g} × source + {chosen['max_len_b']} tokens" in out, err
    status, out, err = run(
        ["evaluate", en_fr_run, "--limit", "3", "--beam", "2", "--alpha", "1.5", "--max-len-b", "7"], capsys
    )
    assert status == 0 and "beam 2, α 1.5, at most" in out and "+ 7 tokens" in out, err


def test_translate_arguments_and_standard_input(en_fr_run, capsys, monkeypatch):
    status, out, err = run(["translate", en_fr_run, "--beam", "1", "The cat sleeps.", "I see a dog."], capsys)
    assert status == 0, err
    assert len(out.splitlines()) == 2
    status, piped, err = run(
        ["translate", en_fr_run, "--beam", "1"],
        capsys,
        stdin="The cat sleeps.\n\nI see a dog.\n",
        monkeypatch=monkeypatch,
    )
    assert status == 0, err
    assert piped.splitlines() == [
        out.splitlines()[0],
        "",
        out.splitlines()[1],
    ]  # blank lines kept, the same translations


def test_a_person_typing_gets_an_answer_per_line_and_a_bad_line_is_not_the_end(en_fr_run, capsys, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Terminal("The cat sleeps.\n" + "word " * 300 + "\nI see a dog.\n"))
    status = cli.main(["translate", str(en_fr_run), "--beam", "1"])
    out, err = capsys.readouterr()
    assert status == 2 and len(out.splitlines()) == 2
    assert "line 2 has" in err and "tokens; this model reads at most 256" in err and "Traceback" not in err


def test_subwords_never_read_a_word_as_unk(en_fr_run, capsys):
    status, out, err = run(["translate", en_fr_run, "--beam", "1", "The zyxwv sleeps in Zürich, 龘."], capsys)
    assert status == 0 and len(out.splitlines()) == 1, err
    assert "<unk>" not in err and "<unk>" not in out


def test_words_chinese_is_one_token_per_character_and_unknown_words_are_named(tmp_path, capsys):
    pairs = write_anki(tmp_path / "cmn.txt", cjk_rows("zh"))
    status, out, err = run(
        [
            "train",
            "--pairs",
            pairs,
            "--src",
            "eng",
            "--tgt",
            "cmn",
            "--out",
            tmp_path / "run",
            "--epochs",
            "1",
            "--tokens",
            "words",
            *TINY,
        ],
        capsys,
    )
    assert status == 0, err
    assert {p.name for p in (tmp_path / "run").iterdir()} >= {"truecase.json", "decoding.json"}
    tokens = json.loads((tmp_path / "run" / "vocab.tgt.json").read_text())["tokens"][4:]
    assert "猫" in tokens and "我" in tokens and all(len(t) == 1 for t in tokens)  # 我们, 喜欢, 米饭 are split
    status, out, err = run(["evaluate", tmp_path / "run", "--beam", "1"], capsys)
    assert status == 0 and "tok:zh" in out, err
    status, out, err = run(["translate", tmp_path / "run", "--beam", "1", "The zyxwv sleeps."], capsys)
    assert status == 0 and len(out.splitlines()) == 1
    assert "note: argument 1: not in the en vocabulary, read as <unk>: 'zyxwv'" in err


def test_japanese_into_english_with_reverse_from_the_zip_as_published(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ATTNBOOK_DATA", str(tmp_path / "cache"))
    text = write_anki(tmp_path / "jpn.txt", cjk_rows("ja"))
    pairs = tmp_path / "jpn-eng.zip"
    with zipfile.ZipFile(pairs, "w") as zf:  # as manythings.org publishes it: the pairs and an _about.txt
        zf.write(text, "jpn.txt")
        zf.writestr("_about.txt", "About these pairs.")
    text.unlink()
    status, out, err = run(
        [
            "train",
            "--pairs",
            pairs,
            "--src",
            "ja",
            "--tgt",
            "en",
            "--reverse",
            "--out",
            tmp_path / "run",
            "--epochs",
            "1",
            *TINY,
        ],
        capsys,
    )
    assert status == 0, err
    assert {"subwords.src.model", "subwords.tgt.model"} <= {p.name for p in (tmp_path / "run").iterdir()}  # two scripts
    pieces = [
        t
        for t in json.loads((tmp_path / "run" / "vocab.src.json").read_text())["tokens"][4:]
        if not t.startswith("<0x")
    ]
    assert any("猫" in t for t in pieces) and not any(
        t.startswith("\u2581") and len(t) > 1 for t in pieces
    )  # no spaces
    assert json.loads((tmp_path / "run" / "config.json").read_text())["pairs"]["path"] == str(pairs)
    status, out, err = run(["translate", tmp_path / "run", "--beam", "1", "私は猫が好きです。"], capsys)
    assert status == 0 and len(out.splitlines()) == 1, err
    status, out, err = run(["evaluate", tmp_path / "run", "--beam", "1", "--limit", "5"], capsys)
    assert status == 0 and "test split of jpn-eng.zip" in out and "tok:13a" in out, err  # English output
    assert bleu_tokenizer("ja") == "char" and bleu_tokenizer("zh") == "zh" and bleu_tokenizer("de") == "13a"


def test_columns_in_the_wrong_order_are_caught(tmp_path, capsys):
    zh = write_anki(tmp_path / "cmn.txt", cjk_rows("zh"))
    status, out, err = run(
        ["train", "--pairs", zh, "--src", "zh", "--tgt", "en", "--out", tmp_path / "a", "--epochs", "1", *TINY], capsys
    )
    assert_clean_error(status, err, "column 1 of the pairs file holds no Chinese characters", "--reverse")
    fr = write_anki(tmp_path / "fra.txt", en_fr_rows())
    status, out, err = run(
        ["train", "--pairs", fr, "--src", "fr", "--tgt", "en", "--out", tmp_path / "b", "--epochs", "1", *TINY], capsys
    )
    assert_clean_error(status, err, "column 1 of the pairs file looks like English", "--reverse")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


# --- the split and the batches ------------------------------------------------------------------


def test_the_split_depends_on_the_sentence_not_the_order_of_the_lines():
    rows = en_fr_rows()
    pairs = [Pair(a, b) for a, b in rows]
    shuffled = pairs[::-1]
    a, b = split_run_pairs(pairs, 0.1), split_run_pairs(shuffled, 0.1)
    assert all({p.src for p in a[k]} == {p.src for p in b[k]} for k in range(3))

    def split_of(sentence, held_out):
        splits = split_run_pairs([Pair(sentence, "Va !")], held_out)
        return next(k for k in range(3) if splits[k])

    assert split_of("Go.", 0.1) == split_of("  go. ", 0.1)  # case and spaces do not matter
    # every translation of one source sentence lands in one split
    assert len({split_of(s, 0.3) for s in ["Go.", "go.", "GO."]}) == 1
    translations = split_run_pairs([Pair("Go.", f"Translation {i}.") for i in range(20)] + pairs, 0.3)
    assert sum(any(p.src == "Go." for p in split) for split in translations) == 1
    assert (
        held_out_fraction(500) == 0.1 and held_out_fraction(200_000) == 0.02 and 0.02 < held_out_fraction(40_000) < 0.1
    )
    assert split_run_pairs(pairs, 0.1) == split_by_checksum(pairs, (0.8, 0.1, 0.1))  # chapter 1's split, the same


def token_batches(lengths, batch_tokens, *, seed=0, epoch=0):
    return BucketBatchSampler(lengths, batch_tokens=batch_tokens, seed=seed).batches(epoch)


def test_token_batches_cover_every_pair_once_within_the_budget():
    rng = random.Random(0)
    lengths = [(rng.randint(1, 30), rng.randint(1, 30)) for _ in range(500)] + [(90, 5)]
    batches = token_batches(lengths, 100, seed=1, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        cost = len(b) * max(max(lengths[i][0], lengths[i][1] + 1) for i in b)
        assert cost <= 100 or len(b) == 1
    assert batches == token_batches(lengths, 100, seed=1, epoch=0)
    assert batches != token_batches(lengths, 100, seed=1, epoch=1)
    padding = sum(len(b) * max(lengths[i][0] for i in b) - sum(lengths[i][0] for i in b) for b in batches)
    unsorted = [list(range(k, min(k + 4, 501))) for k in range(0, 501, 4)]
    padding_unsorted = sum(len(b) * max(lengths[i][0] for i in b) - sum(lengths[i][0] for i in b) for b in unsorted)
    assert padding < padding_unsorted / 3  # bucketing by length wastes little on padding
    with pytest.raises(ValueError, match="batch_tokens must be a positive integer"):
        token_batches(lengths, 0)


# --- d2l's fra-eng, from a local server ------------------------------------------------------------


class _Server:
    def __init__(self, body: bytes):
        server = self
        self.body = body

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/fra-eng.zip"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_pairs_fra_eng_downloads_checks_and_caches(tmp_path, capsys, monkeypatch):
    text = "".join(f"{a}\t{b}\n" for a, b in en_fr_rows()).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("fra-eng/fra.txt", text)
    server = _Server(buffer.getvalue())
    try:
        monkeypatch.setenv("ATTNBOOK_DATA", str(tmp_path / "cache"))
        monkeypatch.setattr(attnbook.data.anki, "FRA_ENG_URL", server.url)
        monkeypatch.setattr(attnbook.data.anki, "FRA_ENG_SHA1", "0" * 40)
        status, out, err = run(
            ["train", "--pairs", "fra-eng", "--out", tmp_path / "bad", "--steps", "1", *TINY], capsys
        )
        assert_clean_error(status, err, "could not get fra-eng", "SHA-1")
        monkeypatch.setattr(attnbook.data.anki, "FRA_ENG_SHA1", hashlib.sha1(buffer.getvalue()).hexdigest())
        status, out, err = run(
            ["train", "--pairs", "fra-eng", "--reverse", "--out", tmp_path / "run", "--steps", "1", *TINY], capsys
        )
        assert status == 0, err
        config = json.loads((tmp_path / "run" / "config.json").read_text())
        assert (config["src_lang"], config["tgt_lang"], config["reverse"], config["pairs"]["path"]) == (
            "fr",
            "en",
            True,
            "fra-eng",
        )
        assert (tmp_path / "cache" / "fra-eng" / "fra.txt").read_bytes() == text
    finally:
        server.close()
    status, out, err = run(
        ["evaluate", tmp_path / "run", "--beam", "1", "--limit", "3"], capsys
    )  # from the cache: the server is gone
    assert status == 0 and "test split of fra-eng" in out, err
    monkeypatch.setattr(attnbook.data.anki, "FRA_ENG_URL", server.url)  # closed now: offline
    monkeypatch.setenv("ATTNBOOK_DATA", str(tmp_path / "empty-cache"))
    status, out, err = run(
        ["train", "--pairs", "fra-eng", "--out", tmp_path / "offline", "--steps", "1", *TINY], capsys
    )
    assert_clean_error(status, err, "could not get fra-eng", "offline")


# --- bad input: one line, exit status 2, no traceback ------------------------------------------------


def test_bad_pairs_files_and_languages(tmp_path, capsys):
    def train(*argv):
        return run(["train", "--out", tmp_path / "never", "--epochs", "1", *TINY, *argv], capsys)

    assert_clean_error(
        *train("--pairs", tmp_path / "missing.txt", "--src", "en", "--tgt", "fr")[::2], "no pairs file at"
    )
    assert_clean_error(*train("--pairs", tmp_path, "--src", "en", "--tgt", "fr")[::2], "is a folder")
    (tmp_path / "empty.txt").write_text("")
    assert_clean_error(
        *train("--pairs", tmp_path / "empty.txt", "--src", "en", "--tgt", "fr")[::2], "holds no sentence pair"
    )
    (tmp_path / "prose.txt").write_text("This is not a pairs file.\nIt is prose.\n" * 50 + "One\tline\n")
    assert_clean_error(
        *train("--pairs", tmp_path / "prose.txt", "--src", "en", "--tgt", "fr")[::2],
        "is not a tab-separated pairs file",
        "line 1",
    )
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)) * 40)
    assert_clean_error(
        *train("--pairs", tmp_path / "binary.txt", "--src", "en", "--tgt", "fr")[::2], "cannot read pairs"
    )
    good = write_anki(tmp_path / "fra.txt", en_fr_rows())
    assert_clean_error(*train("--pairs", good, "--src", "xx", "--tgt", "fr")[::2], "--src: unknown language code 'xx'")
    assert_clean_error(*train("--pairs", good, "--src", "en")[::2], "--src LANG --tgt LANG")
    assert_clean_error(
        *train("--pairs", good, "--src", "en", "--tgt", "fr", "--num-heads", "3")[::2], "not divisible by --num-heads 3"
    )
    assert_clean_error(
        *train("--pairs", good, "--src", "en", "--tgt", "fr", "--minutes", "0")[::2], "--minutes must be > 0"
    )
    assert_clean_error(
        *train("--pairs", good, "--src", "en", "--tgt", "fr", "--max-length", "1")[::2], "no training pairs left"
    )
    assert not (tmp_path / "never").exists()


def test_run_folders_that_cannot_be_used(en_fr_run, tmp_path, capsys):
    import shutil

    assert_clean_error(*run(["translate", tmp_path / "nowhere", "Hi."], capsys)[::2], "no run folder at")
    (tmp_path / "empty").mkdir()
    assert_clean_error(*run(["evaluate", tmp_path / "empty"], capsys)[::2], "holds no trained model")
    broken = tmp_path / "broken"
    shutil.copytree(en_fr_run, broken)
    (broken / "checkpoint.pt").unlink()
    assert_clean_error(*run(["translate", broken, "Hi."], capsys)[::2], "has no checkpoint yet")
    (broken / "checkpoint.pt").write_bytes(b"not a checkpoint at all")
    (broken / "best.pt").unlink()
    assert_clean_error(
        *run(["translate", broken, "Hi."], capsys)[::2], "incompatible checkpoint", "not a readable checkpoint"
    )
    other = tmp_path / "other"
    shutil.copytree(en_fr_run, other)
    config = json.loads((other / "config.json").read_text())
    config["model"]["num_layers"] = 2
    (other / "config.json").write_text(json.dumps(config))
    assert_clean_error(
        *run(["translate", other, "Hi."], capsys)[::2], "incompatible checkpoint", "num_layers: checkpoint 1, model 2"
    )
    (other / "config.json").write_text("{not json")
    assert_clean_error(*run(["evaluate", other], capsys)[::2], "is damaged")


def test_a_run_folder_without_its_subword_model_says_so(en_fr_run, tmp_path, capsys):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(en_fr_run, copy)
    (copy / "subwords.model").unlink()
    assert_clean_error(
        *run(["translate", copy, "Hi."], capsys)[::2], "trained on subwords", "subwords.model is missing"
    )
    (copy / "subwords.model").write_bytes(b"damaged")
    assert_clean_error(*run(["evaluate", copy], capsys)[::2], "subword model", "damaged")


def test_bad_decoding_options_and_sentences(en_fr_run, capsys, monkeypatch):
    for command in (["translate", en_fr_run, "Hi."], ["evaluate", en_fr_run]):
        assert_clean_error(*run([*command, "--beam", "0"], capsys)[::2], "--beam-size must be at least 1")
        assert_clean_error(*run([*command, "--alpha", "-0.5"], capsys)[::2], "--alpha must be >= 0")
    assert_clean_error(*run(["translate", en_fr_run, "Hi.", "  "], capsys)[::2], "argument 2 is empty")
    assert_clean_error(
        *run(["translate", en_fr_run, "word " * 300], capsys)[::2],
        "argument 1 has",
        "tokens; this model reads at most 256",
    )
    status, out, err = run(["translate", en_fr_run], capsys, stdin="\n \n", monkeypatch=monkeypatch)
    assert_clean_error(status, err, "standard input holds no sentence")
    status, out, err = run(
        ["translate", en_fr_run], capsys, stdin="Hi.\n" + "word " * 300 + "\n", monkeypatch=monkeypatch
    )
    assert_clean_error(status, err, "line 2 of standard input has", "at most 256")
    assert out == ""  # nothing is translated when one line cannot be


def test_model_rules_come_from_the_model_in_the_words_of_the_command_line(tmp_path, capsys):
    good = write_anki(tmp_path / "fra.txt", en_fr_rows(40))
    common = [
        "train",
        "--pairs",
        good,
        "--src",
        "en",
        "--tgt",
        "fr",
        "--out",
        tmp_path / "never",
        "--epochs",
        "1",
        *TINY,
    ]
    assert_clean_error(
        *run([*common, "--dropout", "1.5"], capsys)[::2], "--dropout must be a probability in [0, 1), got 1.5"
    )
    assert_clean_error(*run([*common, "--d-model", "15", "--num-heads", "1"], capsys)[::2], "--d-model must be even")
    assert_clean_error(
        *run([*common, "--arch", "rnn", "--num-layers", "0"], capsys)[::2], "--num-layers must be >= 1, got 0"
    )
    assert_clean_error(*run([*common, "--max-vocab", "4"], capsys)[::2], "--max-vocab must be at least 5")
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_a_runs_dropout_is_pytorchs_with_its_mask_drawn_from_uniform_numbers(arch):
    from attnbook.translate.model import UniformDropout, build_model, model_config
    from attnbook.translate.settings import RunSettings

    model = build_model(arch, model_config(RunSettings(arch=arch, dropout=0.1), 30, 40))
    assert not any(type(m) is torch.nn.Dropout for m in model.modules()), "every dropout of a run's model is swapped"
    assert any(isinstance(m, UniformDropout) and m.p == 0.1 for m in model.modules())

    drop = UniformDropout(0.2)
    x = torch.linspace(1, 2, 200_000, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(0)
    y = drop(x)
    kept = y != 0
    assert abs(kept.double().mean().item() - 0.8) < 0.005  # a binomial share: its standard deviation is 0.0009
    assert torch.allclose(y[kept], x[kept] * 1.25, rtol=1e-15)  # the kept ones scaled by 1 / (1 - p)
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad, kept * 1.25), "the gradient goes through the same mask"
    torch.manual_seed(0)
    assert torch.equal(drop(x), y), "the mask comes from PyTorch's random numbers: a seed repeats it"
    assert drop(torch.ones(4, 8, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert torch.equal(UniformDropout(1.0)(x), torch.zeros_like(x))
    assert UniformDropout(0.0)(x) is x
    drop.eval()
    assert drop(x) is x, "in evaluation it does nothing"


def test_bad_devices_are_one_line(en_fr_run, capsys):
    assert_clean_error(
        *run(["translate", en_fr_run, "--device", "tpu", "Hi."], capsys)[::2], "--device 'tpu': use auto, cpu"
    )
    if not torch.cuda.is_available():
        assert_clean_error(
            *run(["evaluate", en_fr_run, "--device", "cuda"], capsys)[::2], "--device cuda", "--device cpu"
        )


def test_a_run_split_by_an_earlier_version_is_scored_with_a_note_and_not_resumed(en_fr_run, tmp_path, capsys):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(en_fr_run, old)
    config = json.loads((old / "config.json").read_text())
    del config["split"]
    (old / "config.json").write_text(json.dumps(config))
    status, out, err = run(["evaluate", old, "--beam", "1", "--limit", "2"], capsys)
    assert status == 0 and "split by an earlier version" in err, err
    status, out, err = run(["train", "--out", old, "--resume", "--epochs", "3"], capsys)
    assert_clean_error(status, err, "split by an earlier version", "cannot be resumed exactly")


def test_a_run_folder_with_the_settings_names_of_an_earlier_version_still_resumes(en_fr_run, tmp_path, capsys):
    import shutil

    old = tmp_path / "old-names"
    shutil.copytree(en_fr_run, old)
    config = json.loads((old / "config.json").read_text())
    settings = config["settings"]
    settings["heads"], settings["layers"] = settings.pop("num_heads"), settings.pop("num_layers")
    (old / "config.json").write_text(json.dumps(config))
    status, out, err = run(["train", "--out", old, "--resume", "--epochs", "3", "--num-heads", "4"], capsys)
    assert_clean_error(status, err, "--num-heads 4 differs from the run being resumed (2)")
    status, out, err = run(["train", "--out", old, "--resume", "--epochs", "3"], capsys)
    assert status == 0, err


def test_a_run_is_never_overwritten_and_resumes_only_with_its_own_settings(en_fr_run, tmp_path, capsys):
    pairs = en_fr_run.parent / "fra.txt"
    status, out, err = run(
        ["train", "--pairs", pairs, "--src", "en", "--tgt", "fr", "--out", en_fr_run, "--epochs", "3", *TINY], capsys
    )
    assert_clean_error(status, err, "already holds a run", "--resume")
    status, out, err = run(["train", "--out", en_fr_run, "--resume", "--epochs", "3", "--d-model", "32"], capsys)
    assert_clean_error(status, err, "--d-model 32 differs from the run being resumed (16)")
    status, out, err = run(["train", "--out", en_fr_run, "--resume", "--epochs", "2"], capsys)
    assert_clean_error(status, err, "already used its budget (2 epochs)")
    status, out, err = run(["train", "--out", tmp_path / "none", "--resume"], capsys)
    assert_clean_error(status, err, "no run folder at")


# --- resuming is exact; Ctrl-C leaves a good checkpoint ---------------------------------------------


def weights(folder: Path) -> dict:
    return read_checkpoint(folder / "checkpoint.pt")["state_dict"]


def test_resume_continues_exactly(tmp_path, capsys):
    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(120))
    common = ["--pairs", str(pairs), "--src", "en", "--tgt", "fr", *TINY, "--dropout", "0.3"]
    assert cli.main(["train", *common, "--out", str(tmp_path / "straight"), "--epochs", "2"]) == 0
    assert (
        cli.main(["train", *common, "--out", str(tmp_path / "cut"), "--epochs", "2", "--steps", "3"]) == 0
    )  # stops mid-epoch
    cut = read_checkpoint(tmp_path / "cut" / "checkpoint.pt")["extra"]["train_state"]["position"]
    assert (cut["epoch"], cut["step_in_epoch"], cut["step"]) == (0, 3, 3)
    assert cli.main(["train", "--out", str(tmp_path / "cut"), "--resume", "--epochs", "2"]) == 0
    a, b = weights(tmp_path / "straight"), weights(tmp_path / "cut")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    capsys.readouterr()


def test_bpe_dropout_splits_the_sources_anew_and_resumes_exactly(tmp_path, capsys):
    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(120))
    common = ["--pairs", str(pairs), "--src", "en", "--tgt", "fr", *TINY, "--pieces", "400"]
    sampled = [*common, "--bpe-dropout", "0.3"]
    assert cli.main(["train", *sampled, "--out", str(tmp_path / "straight"), "--epochs", "2"]) == 0
    assert cli.main(["train", *sampled, "--out", str(tmp_path / "cut"), "--epochs", "2", "--steps", "3"]) == 0
    assert cli.main(["train", "--out", str(tmp_path / "cut"), "--resume", "--epochs", "2"]) == 0
    a, b = weights(tmp_path / "straight"), weights(tmp_path / "cut")
    assert all(torch.equal(a[k], b[k]) for k in a)  # the same splits after resuming
    assert cli.main(["train", *common, "--out", str(tmp_path / "usual"), "--epochs", "2"]) == 0
    usual = weights(tmp_path / "usual")
    assert not all(torch.equal(a[k], usual[k]) for k in a)  # the option changes what the model reads
    assert json.loads((tmp_path / "cut" / "config.json").read_text())["settings"]["bpe_dropout"] == 0.3
    capsys.readouterr()
    status, out, err = run(
        ["train", *common, "--out", tmp_path / "w", "--tokens", "words", "--bpe-dropout", "0.1"], capsys
    )
    assert_clean_error(status, err, "--bpe-dropout needs --tokens subwords")
    status, out, err = run(["train", *common, "--out", tmp_path / "w", "--bpe-dropout", "1"], capsys)
    assert_clean_error(status, err, "--bpe-dropout must be in [0, 1), got 1")


def dropout_of(folder: Path) -> tuple[float, list[dict]]:
    """The dropout a run's checkpoint carries on with, and the log's dropout events."""
    events = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    state = read_checkpoint(folder / "checkpoint.pt")["extra"]["train_state"]
    return state["dropout"], [e for e in events if e["event"] == "dropout"]


def test_dropout_auto_turns_on_when_the_budget_allows_many_epochs(tmp_path, capsys):
    from attnbook.translate.settings import AUTO_DROPOUT, AUTO_DROPOUT_EPOCHS, MORE_DROPOUT, MORE_DROPOUT_EPOCHS

    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(120))
    common = ["--pairs", pairs, "--src", "en", "--tgt", "fr", *TINY]
    status, out, err = run(["train", *common, "--out", tmp_path / "long", "--epochs", AUTO_DROPOUT_EPOCHS], capsys)
    assert status == 0, err
    assert f"passes over the training pairs: dropout {AUTO_DROPOUT:g} ({MORE_DROPOUT:g} from" in out
    dropout, events = dropout_of(tmp_path / "long")
    assert dropout == AUTO_DROPOUT and [e["dropout"] for e in events] == [AUTO_DROPOUT]
    assert json.loads((tmp_path / "long" / "config.json").read_text())["settings"]["dropout"] == "auto"

    # more passes, more dropout
    status, out, err = run(["train", *common, "--out", tmp_path / "many", "--epochs", MORE_DROPOUT_EPOCHS], capsys)
    assert status == 0 and f"passes over the training pairs: dropout {MORE_DROPOUT:g}\n" in out, err
    assert dropout_of(tmp_path / "many")[0] == MORE_DROPOUT

    status, out, err = run(["train", *common, "--out", tmp_path / "short", "--epochs", AUTO_DROPOUT_EPOCHS - 1], capsys)
    assert status == 0 and "dropout 0 (--dropout auto turns it on from" in out, err
    assert dropout_of(tmp_path / "short")[0] == 0.0
    # a step budget counts in epochs too; a number given on the command line is kept as it is
    steps_per_epoch = read_checkpoint(tmp_path / "long" / "checkpoint.pt")["extra"]["train_state"]["position"]["step"]
    steps_per_epoch //= AUTO_DROPOUT_EPOCHS
    status, out, err = run(["train", *common, "--out", tmp_path / "steps", "--steps", 2], capsys)
    dropout, events = dropout_of(tmp_path / "steps")
    assert status == 0 and dropout == 0.0 and events[0]["epochs_allowed"] == pytest.approx(2 / steps_per_epoch), err
    status, out, err = run(
        ["train", *common, "--out", tmp_path / "fixed", "--epochs", AUTO_DROPOUT_EPOCHS, "--dropout", "0.05"], capsys
    )
    assert status == 0 and dropout_of(tmp_path / "fixed") == (0.05, []), err
    with pytest.raises(SystemExit) as stopped:  # argparse's own error: the usage, then the complaint
        run(["train", *common, "--out", tmp_path / "bad", "--dropout", "some"], capsys)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "argument --dropout: expected auto or a number in [0, 1), got 'some'" in err
    assert not (tmp_path / "bad").exists()


def test_bfloat16_trains_in_mixed_precision_and_auto_asks_the_processor(tmp_path, capsys, monkeypatch):
    import attnbook.translate.model as run_model

    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(120))
    common = ["--pairs", pairs, "--src", "en", "--tgt", "fr", *TINY, "--epochs", 1, "--dropout", 0]

    def started(folder: Path) -> dict:
        return json.loads((folder / "log.jsonl").read_text().splitlines()[0])

    status, out, err = run(["train", *common, "--out", tmp_path / "mixed", "--dtype", "bfloat16"], capsys)
    assert status == 0 and "on 1 × cpu, bfloat16 mixed precision" in out, err
    assert started(tmp_path / "mixed")["precision"] == "bfloat16 mixed precision"
    mixed = weights(tmp_path / "mixed")
    assert all(w.dtype == torch.float32 for w in mixed.values())  # the weights stay float32...
    status, out, err = run(["train", *common, "--out", tmp_path / "plain", "--dtype", "float32"], capsys)
    assert status == 0 and started(tmp_path / "plain")["precision"] == "float32", err
    plain = weights(tmp_path / "plain")
    assert not all(torch.equal(mixed[k], plain[k]) for k in plain)  # ... and the steps differ
    status, out, err = run(["evaluate", tmp_path / "mixed", "--show", 0], capsys)
    assert status == 0 and "BLEU" in out, err
    for native, chosen in [(False, "float32"), (True, "bfloat16 mixed precision")]:
        monkeypatch.setattr(run_model, "native_bfloat16", lambda device, answer=native: answer)
        status, out, err = run(["train", *common, "--out", tmp_path / f"auto-{native}", "--dtype", "auto"], capsys)
        assert status == 0 and started(tmp_path / f"auto-{native}")["precision"] == chosen, err


def test_native_bfloat16_follows_the_processor_and_a_capped_onednn(monkeypatch):
    from attnbook.translate.model import native_bfloat16

    cpu = torch.device("cpu")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    flags = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    assert native_bfloat16(cpu) == flags
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # emulated there: many times slower than float32
    assert native_bfloat16(cpu) is False
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core_bf16")
    assert native_bfloat16(cpu) == flags
    assert native_bfloat16(torch.device("meta")) is False


def test_a_shortened_warm_up_keeps_the_peak_learning_rate(tmp_path, capsys):
    # A warm-up far longer than the budget's steps: the run shortens it after its first steps, and the rate still
    # peaks where the configured schedule would, factor / sqrt(d_model * warmup), not higher.
    from attnbook.translate.budget import PROBE_STEPS, SKIP_STEPS
    from attnbook.translate.settings import RunSettings

    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(120))
    out_dir, warmup, d_model = tmp_path / "run", 100_000, 16
    argv = ["--pairs", pairs, "--src", "en", "--tgt", "fr", *TINY]
    argv += ["--warmup", warmup, "--minutes", 0.2, "--log-every", 1]
    status, out, err = run(["train", *argv, "--out", out_dir], capsys)
    assert status == 0, err
    events = [json.loads(line) for line in (out_dir / "log.jsonl").read_text().splitlines()]
    (fitted,) = [e for e in events if e["event"] == "warmup"]
    peak = RunSettings().lr_factor / (d_model * warmup) ** 0.5
    assert fitted["was"] == warmup and fitted["warmup"] < warmup and fitted["peak_lr"] == pytest.approx(peak)
    assert f"warm-up shortened from {warmup} to {fitted['warmup']} steps (the same peak rate, {peak:.2g})" in out
    # logged after step s: the rate of step s + 1; from the change on (once the speed is measured), the new curve
    rates = {e["step"] + 1: e["lr"] for e in events if e["event"] == "step"}
    measured = SKIP_STEPS + PROBE_STEPS
    w, changed = fitted["warmup"], measured + 1  # the log of that step is written before the change
    assert max(rates) > max(w, changed) + 5, "the run should outlast its shortened warm-up"
    expected = {s: peak * min(s / w, (w / s) ** 0.5) for s in rates if s > changed}
    assert {s: rates[s] for s in expected} == pytest.approx(expected, rel=1e-6)
    assert max(rates.values()) <= peak * (1 + 1e-6)
    # the snapshots averaged at the end span the last fifth (AVERAGE_SPAN) of the steps the budget allows, as
    # estimated once the speed is measured, then again whenever it drifts
    plans = [e for e in events if e["event"] == "snapshots"]
    assert plans and plans[0]["steps_allowed"] == pytest.approx(fitted["steps_allowed"], abs=1)
    assert fitted["warmup"] >= measured
    (average,) = [e for e in events if e["event"] == "average"]
    every, steps = average["every"], average["steps"]
    assert every == plans[-1]["every"] == max(1, round(plans[-1]["steps_allowed"] * AVERAGE_SPAN / 4))
    assert steps[-1] == max(rates) - 1 and len(steps) == 5 and 0 < steps[-1] - steps[-2] <= every
    # each snapshot is taken on the spacing in force after its step (a plan logged after a step's line applies to
    # it); a busy machine may re-plan between two snapshots, so two of them are that spacing apart only when the
    # same plan took both
    spacing, in_force, last = None, {}, 0
    for event in events:
        if event["event"] == "step":
            last = event["step"]
        elif event["event"] == "snapshots":
            spacing = event["every"]
        if event["event"] in ("step", "snapshots") and spacing is not None:
            in_force[last] = spacing
    assert all(s % in_force[s] == 0 for s in steps[:-1]), (steps, in_force)
    same_plan = [(a, b) for a, b in zip(steps, steps[1:-1]) if in_force[a] == in_force[b]]
    assert all(b - a == in_force[a] for a, b in same_plan), (steps, in_force)


def test_linear_decay_ends_the_rate_with_the_budget_and_resumes_exactly(tmp_path, capsys, monkeypatch):
    from attnbook.translate.budget import Progress
    from attnbook.translate.settings import RunSettings

    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(120))
    common = ["--pairs", pairs, "--src", "en", "--tgt", "fr", *TINY, "--dropout", "0.2", "--decay", "linear"]
    common += ["--steps", 30, "--log-every", 1]
    status, _, err = run(["train", *common, "--out", tmp_path / "straight"], capsys)
    assert status == 0, err
    events = [json.loads(line) for line in (tmp_path / "straight" / "log.jsonl").read_text().splitlines()]
    # logged after step s: the rate of step s + 1, the warm-up's times the share of the 30 steps left
    rates = {e["step"]: e["lr"] for e in events if e["event"] == "step"}
    peak = RunSettings().lr_factor / (16 * 20) ** 0.5
    expected = {s: peak * min((s + 1) / 20, 1) * (1 - s / 30) for s in range(1, 31)}
    assert rates == pytest.approx(expected, rel=1e-9) and rates[30] == 0.0
    assert json.loads((tmp_path / "straight" / "config.json").read_text())["settings"]["decay"] == "linear"

    # Ctrl-C after a few steps, then --resume: the same weights as the run never stopped
    after_step = Progress.after_step

    def interrupt_after_step_7(progress, tokens, interrupted):
        return after_step(progress, tokens, interrupted or progress.step + 1 == 8)  # asked during step 8

    monkeypatch.setattr(Progress, "after_step", interrupt_after_step_7)
    status, out, err = run(["train", *common, "--out", tmp_path / "cut"], capsys)
    assert status == 130 and "interrupted: the state after step 8 is saved" in out, out + err
    monkeypatch.setattr(Progress, "after_step", after_step)
    status, _, err = run(["train", "--out", tmp_path / "cut", "--resume"], capsys)
    assert status == 0, err
    a, b = weights(tmp_path / "straight"), weights(tmp_path / "cut")
    assert all(torch.equal(a[k], b[k]) for k in a)
    # a run resumed with a larger budget takes its rate from the share of the new budget spent
    status, out, err = run(["train", "--out", tmp_path / "cut", "--resume", "--steps", 60, "--log-every", 1], capsys)
    assert status == 0, err
    log = [json.loads(line) for line in (tmp_path / "cut" / "log.jsonl").read_text().splitlines()]
    later = {e["step"]: e["lr"] for e in log if e["event"] == "step" and e["step"] > 30}
    assert later == pytest.approx({s: peak * (1 - s / 60) for s in range(31, 61)}, rel=1e-9)


def test_checkpoint_writes_are_atomic(tmp_path, monkeypatch):
    from attnbook.rnn import Seq2Seq, Seq2SeqConfig

    model = Seq2Seq(Seq2SeqConfig(8, 8, embed_size=4, hidden_size=4))
    target = tmp_path / "checkpoint.pt"
    save_checkpoint(target, model, note="first")
    good = target.read_bytes()

    def interrupted_save(obj, path, *args, **kwargs):
        Path(path).write_bytes(b"half a checkpoint")
        raise KeyboardInterrupt  # Ctrl-C in the middle of writing

    monkeypatch.setattr(torch, "save", interrupted_save)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(target, model, note="second")
    assert target.read_bytes() == good and [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_ctrl_c_saves_the_step_and_resume_equals_an_uninterrupted_run(tmp_path, capsys):
    """A real process on a terminal: progress with an ETA on stderr, then SIGINT; resuming gives the same weights."""
    pairs = write_anki(tmp_path / "fra.txt", en_fr_rows(120))
    common = ["--pairs", str(pairs), "--src", "en", "--tgt", "fr", *TINY, "--dropout", "0.2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "TERM": "xterm"}
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "attnbook.translate", "train", *common, "--out", str(tmp_path / "cut")]
        + ["--epochs", "1000", "--log-every", "1"],
        stdout=subprocess.PIPE, stderr=slave, env=env, text=True,
    )  # fmt: skip
    os.close(slave)
    terminal = []
    reader = threading.Thread(target=lambda: _drain(master, terminal), daemon=True)
    reader.start()
    log = tmp_path / "cut" / "log.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (log.exists() and log.read_text().count('"event": "step"') >= 3):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    reader.join(timeout=5)
    screen = b"".join(terminal).decode(errors="replace")
    assert process.returncode == 130, out + screen
    assert "interrupted: the state after step" in out and "continue with --resume" in out
    assert "ETA" in screen and "tok/s" in screen and "\r" in screen  # the progress line, on the terminal only
    assert "ETA" not in out
    steps = read_checkpoint(tmp_path / "cut" / "checkpoint.pt")["extra"]["train_state"]["position"]["step"]
    assert steps >= 3
    total = str(steps + 4)
    assert cli.main(["train", "--out", str(tmp_path / "cut"), "--resume", "--steps", total]) == 0
    assert cli.main(["train", *common, "--out", str(tmp_path / "straight"), "--steps", total]) == 0
    a, b = weights(tmp_path / "straight"), weights(tmp_path / "cut")
    assert all(torch.equal(a[k], b[k]) for k in a)
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert "interrupted" in events and "resume" in events
    capsys.readouterr()


def _drain(fd: int, chunks: list) -> None:
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:
            return
        if not data:
            return
        chunks.append(data)


def test_without_a_terminal_there_is_no_progress_line(en_fr_run, tmp_path, capsys):
    status, out, err = run(
        [
            "train",
            "--out",
            en_fr_run.parent / "quiet",
            "--pairs",
            en_fr_run.parent / "fra.txt",
            "--src",
            "en",
            "--tgt",
            "fr",
            "--steps",
            "2",
            *TINY,
        ],
        capsys,
    )
    assert status == 0 and "ETA" not in out + err and "\r" not in out + err


def test_the_module_and_the_console_script():
    result = subprocess.run(
        [sys.executable, "-m", "attnbook.translate", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert (
        result.returncode == 0
        and "train" in result.stdout
        and "evaluate" in result.stdout
        and "translate" in result.stdout
    )
    assert 'attnbook-translate = "attnbook.translate:main"' in (ROOT / "pyproject.toml").read_text()


def test_chapter_3_rnn_trains_and_translates_through_the_same_commands(en_fr_run, tmp_path, capsys):
    pairs = en_fr_run.parent / "fra.txt"
    status, out, err = run(
        [
            "train",
            "--pairs",
            pairs,
            "--src",
            "en",
            "--tgt",
            "fr",
            "--out",
            tmp_path / "rnn",
            "--arch",
            "rnn",
            "--steps",
            "2",
            *TINY,
        ],
        capsys,
    )
    assert status == 0 and "model: rnn" in out, err
    status, out, err = run(["translate", tmp_path / "rnn", "--beam", "1", "The cat sleeps."], capsys)
    assert status == 0 and len(out.splitlines()) == 1, err


def test_the_longest_output_fits_the_validation_references():
    from attnbook.translate.choose import output_ratio

    pairs = [Pair("a b c d", " ".join("x" * n), tokens=("a b c d".split(), ["x"] * n)) for n in range(1, 30)]
    ratio = output_ratio(pairs, extra=10, share=1.0)
    assert all(len(p.tgt_tok) <= ratio * len(p.src_tok) + 10 for p in pairs)
    assert ratio == 4.8 and output_ratio(pairs[:5], extra=10) == 0.5  # 29 = 4.75 × 4 + 10; never below 0.5


def test_the_beam_size_has_one_name_and_the_old_spellings_still_work(tmp_path):
    import argparse

    from attnbook.translate.console import Console
    from attnbook.translate.run_folder import DECODING_FILE, read_decoding
    from attnbook.translate.settings import Decoding, add_options, from_args

    parser = argparse.ArgumentParser()
    add_options(parser, Decoding)
    for spelling in ("--beam-size", "--beam"):
        assert from_args(Decoding, parser.parse_args([spelling, "3"])).beam_size == 3
    old = {"chosen": {"beam": 2, "alpha": 1.0, "max_len_a": 1.2, "max_len_b": 10}}  # a folder of an older release
    (tmp_path / DECODING_FILE).write_text(json.dumps(old), encoding="utf-8")
    assert read_decoding(tmp_path, Console())["beam_size"] == 2
    new = {"chosen": {"beam_size": 5, "alpha": 0.6}}
    (tmp_path / DECODING_FILE).write_text(json.dumps(new), encoding="utf-8")
    assert read_decoding(tmp_path, Console()) == {"beam_size": 5, "alpha": 0.6}
