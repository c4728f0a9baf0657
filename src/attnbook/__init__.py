"""attnbook: the library of the course *Attention, Step by Step*.

Each module holds one idea of the book, named after it:

- ``attnbook.data``        chapter 1: the corpus, tokens, vocabulary, batches
- ``attnbook.metrics``     chapter 1: BLEU
- ``attnbook.masks``       chapters 1, 3, 5: padding and causal masks
- ``attnbook.checks``      the argument checks every module uses, and the choice of device
- ``attnbook.files``       files written whole or not at all: vocabularies, subword models, checkpoints, JSON
- ``attnbook.rnn``         chapter 2: the GRU encoder-decoder
- ``attnbook.train``       chapters 2 and 8: the training loop
- ``attnbook.decode``      chapters 2 and 8: greedy decoding, beam search
- ``attnbook.attention``   chapters 3 to 5: scoring, masked softmax, multi-head attention
- ``attnbook.positional``  chapter 6: positional encodings
- ``attnbook.transformer`` chapter 7: the encoder-decoder Transformer, with a key-value cache for decoding
- ``attnbook.translate``   chapter 8: the command line ``attnbook-translate`` (train, evaluate, translate; torchrun),
                           a package with one module per job
- ``attnbook.fastformer``  chapter 9: Fastformer's additive attention, its layer and encoder, a softmax baseline
- ``attnbook.decoder_only`` chapter 10: a GPT-style decoder-only language model, sampling, rotary positions,
                           grouped-query attention, GPT-2's weights
- ``attnbook.exercises``   the checkers for every chapter's exercises
- ``attnbook.notebook``    notebook conventions: setup, showing source, strict warnings under the tests
- ``attnbook.diagrams``    the schematic diagrams of chapters 2 to 6, drawn by code
- ``attnbook.book``        the book's machinery: Colab links, executing notebooks, exercise numbers

Importing the package imports nothing heavy; import the module you need.
"""

__version__ = "0.1.0"
