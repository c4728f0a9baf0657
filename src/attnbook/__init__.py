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
- ``attnbook.book``        the book's own machinery, apart from the chapters: configuration, executing notebooks,
                            the Sphinx extension, the Chinese edition, the claims test's reader

Importing the package imports nothing heavy; import the module you need.

Names: one per concept, PyTorch's where PyTorch has one. ``tests/test_layout.py`` holds every public
signature of the library (inherited methods included) to this table: the name is used, the spellings in the
last column are not. An exercise may ask for another library's convention on purpose (chapter 3's
``valid_lens``, d2l's lengths in place of a mask), and a notebook's own variables are its own.

==================  ====================================================================  ===================
name                meaning                                                               not
==================  ====================================================================  ===================
need_weights        also return the attention weights (``nn.MultiheadAttention``)         return_attention
key_padding_mask    ``(B, S)``, True at the keys attention must ignore (PyTorch's)        attention_mask
is_causal           each position attends to itself and earlier ones (PyTorch's SDPA)     causal
scheduler           the learning-rate scheduler object (``torch.optim.lr_scheduler``)     schedule
max_len             the most tokens a sequence may have (decoding, positions, corpus)     max_length
max_new_tokens      the most tokens generation appends to a prompt (``transformers``)     max_tokens
beam_size           hypotheses kept per sentence; 1 is greedy decoding                    num_beams
checkpoint_minutes  the time between two periodic checkpoints of a run                    save_minutes
==================  ====================================================================  ===================

Greedy decoding is ``beam_size=1`` everywhere (never ``None``), and every translation's length is
bounded by one rule, :func:`attnbook.decode.output_limit`. The mask of a whole model's side keeps the
side's name (``src_padding_mask``, ``tgt_padding_mask``, ``memory_padding_mask``, PyTorch's
``src_key_padding_mask`` and kin): a batch carries them from chapter 1, before attention has keys.
The command line's settings keep the names of their flags, which recorded runs carry
(``--max-length`` is ``RunSettings.max_length``).
"""

__version__ = "0.1.0"
