"""Style: ruff finds nothing in the library and the tests, and the formatted files stay formatted.

The rules are in pyproject.toml ([tool.ruff]). Formatting came in with the
modules listed in FORMATTED; the rest of the tree joins the list when it is
formatted in one commit of its own (a tree-wide reformat in the middle of other
work would collide with every change under way).
"""

from __future__ import annotations

import subprocess
import sys

from notebook_index import ROOT

#: What `ruff format` keeps formatted, and where lines stay within the configured length.
FORMATTED = [
    "src/attnbook/translate",
    "src/attnbook/data/pairs.py",
    "src/attnbook/data/scripts.py",
    "src/attnbook/data/subwords.py",
    "tests/test_data_subwords.py",
    "src/attnbook/checks.py",
    "src/attnbook/diagrams",
    "src/attnbook/data/anki.py",
    "src/attnbook/data/corpus.py",
    "src/attnbook/data/lexicon.py",
    "src/attnbook/exercises/__init__.py",
    "src/attnbook/exercises/ch00_tensors.py",
    "src/attnbook/exercises/ch01_data.py",
    "src/attnbook/exercises/ch02_rnn_encoder_decoder.py",
    "src/attnbook/exercises/ch03_attention.py",
    "src/attnbook/exercises/ch04_self_attention.py",
    "src/attnbook/exercises/ch05_multihead_attention.py",
    "src/attnbook/exercises/ch06_positional_encoding.py",
    "src/attnbook/exercises/ch07_transformer.py",
    "src/attnbook/exercises/ch08_training_a_translator.py",
    "tests/test_style.py",
    "tests/benchmarks/_report.py",
    "tests/benchmarks/bench_data.py",
    "tests/benchmarks/bench_multihead.py",
    "tests/benchmarks/bench_notebooks.py",
    "tests/benchmarks/bench_rnn.py",
    "tests/benchmarks/bench_transformer.py",
    "tests/benchmarks/page.py",
    "tests/benchmarks/probe_kernel_paths.py",
    "tests/benchmarks/run_all.py",
    "tests/benchmarks/seed_spread.py",
    "tests/benchmarks/translate_dropout.py",
    "tests/claims.py",
    "tests/notebook_index.py",
    "tests/test_beam.py",
    "tests/test_book.py",
    "tests/test_claims.py",
    "tests/test_data_anki.py",
    "tests/test_data_batches.py",
    "tests/test_data_corpus.py",
    "tests/test_data_text.py",
    "tests/test_decode.py",
    "tests/test_diagrams.py",
    "tests/test_environment.py",
    "tests/test_exercises.py",
    "tests/test_exercises_ch07_ch08.py",
    "tests/test_jupyter.py",
    "tests/test_metrics.py",
    "tests/test_metrics_by_length.py",
    "tests/test_multihead.py",
    "tests/test_notebook_helpers.py",
    "tests/test_notebook_hygiene.py",
    "tests/test_packaging.py",
    "tests/test_portability.py",
    "tests/test_rnn.py",
    "tests/test_self_attention.py",
    "tests/test_strict_warnings.py",
    "tests/test_train.py",
    "tests/test_transformer.py",
    "tests/toy_seq2seq.py",
]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    try:
        import ruff  # noqa: F401
    except ImportError:
        raise AssertionError("ruff is not installed in this environment (requirements.txt: ruff)") from None
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_finds_nothing_in_src_and_tests():
    result = _ruff("check", "--no-cache", "--output-format", "concise", "src", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_formatted_files_stay_formatted_and_within_the_line_length():
    result = _ruff("format", "--no-cache", "--check", "--diff", *FORMATTED)
    assert result.returncode == 0, result.stdout + result.stderr
    result = _ruff("check", "--no-cache", "--output-format", "concise", "--extend-select", "E501", *FORMATTED)
    assert result.returncode == 0, result.stdout + result.stderr
