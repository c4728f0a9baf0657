"""Chapter 1, sequence-to-sequence data: the corpus, tokens, vocabularies and batches.

- :mod:`attnbook.data.text`     tokenize / detokenize, the :class:`Vocab` and its reserved tokens
- :mod:`attnbook.data.lexicon`  the words of the generated corpus and what they go with
- :mod:`attnbook.data.pairs`    :class:`Pair`, :class:`Corpus`, and the splits: :func:`split_by_checksum`
- :mod:`attnbook.data.grammar`  a sentence as a tree, realized in English and in French: :func:`realize`
- :mod:`attnbook.data.corpus`   random sentences of that grammar, :func:`generate_pairs` and :func:`load_corpus`
- :mod:`attnbook.data.anki`     real Tatoeba pairs: :func:`read_anki_pairs`, :func:`download_fra_eng`
- :mod:`attnbook.data.subwords` subword vocabularies for real text, learned with SentencePiece: :class:`Subwords`
- :mod:`attnbook.data.scripts`  is a column in the language it is said to be in: :func:`check_columns`
- :mod:`attnbook.data.batches`  padded batches with masks for teacher forcing: :func:`make_batches`

Every name below is importable from ``attnbook.data`` directly.
"""

from .anki import (
    FRA_ENG_SHA1,
    FRA_ENG_URL,
    AnkiPairs,
    ChecksumError,
    DownloadError,
    corpus_from_pairs,
    default_cache_dir,
    download,
    download_fra_eng,
    extract_zip,
    pairs_file,
    read_anki_pairs,
    sha1_of,
)
from .batches import Batch, BucketBatchSampler, PairDataset, collate, make_batches
from .corpus import generate_pairs, load_corpus
from .pairs import Corpus, Pair, Splits, alignment_matrix, split_by_checksum, split_by_index
from .scripts import SCRIPT_OF, check_columns
from .subwords import Subwords
from .text import BOS, EOS, LANGUAGES, PAD, SPECIALS, UNK, Vocab, detokenize, language, tokenize

__all__ = [
    "PAD", "BOS", "EOS", "UNK", "SPECIALS", "LANGUAGES", "language", "tokenize", "detokenize", "Vocab",
    "Pair", "Corpus", "Splits", "split_by_checksum", "split_by_index", "alignment_matrix",
    "generate_pairs", "load_corpus",
    "Batch", "PairDataset", "BucketBatchSampler", "collate", "make_batches",
    "AnkiPairs", "ChecksumError", "DownloadError", "read_anki_pairs", "pairs_file", "corpus_from_pairs",
    "SCRIPT_OF", "check_columns", "Subwords",
    "FRA_ENG_URL", "FRA_ENG_SHA1", "default_cache_dir", "sha1_of", "download", "extract_zip", "download_fra_eng",
]  # fmt: skip
