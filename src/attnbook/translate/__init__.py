"""The command line: train a translator on real sentence pairs, score it, and use it.

::

    attnbook-translate train --pairs cmn.txt --src en --tgt zh --out runs/en-zh --minutes 10
    attnbook-translate evaluate runs/en-zh
    attnbook-translate translate runs/en-zh "Where is the station?"
    echo "I like tea." | attnbook-translate translate runs/en-zh

(``python -m attnbook.translate`` is the same program.) ``train`` reads any
Tatoeba/Anki tab-separated file (``--pairs fra-eng`` fetches d2l's
English–French file), splits it into training, validation and test pairs by
a checksum of the sentences (pairs that share a sentence stay together; the
same split on every machine, whatever the order of the lines, and the same
as chapter 1's :func:`~attnbook.data.corpus_from_pairs`), learns subword
vocabularies from the training pairs with SentencePiece (``--tokens words``:
chapter 1's words), and trains with the paper's recipe
(:mod:`~attnbook.translate.recipe`), fitted to the device and, on a CPU with a time
budget, to the passes that the speed it measures first allows
(:func:`~attnbook.translate.cmd_train.fit_to_pace`); at the end it keeps the average of snapshots of
the weights over its last steps when that lowers the validation loss, and chooses how to
decode on the validation pairs. Everything the other two commands need lands in
the run folder (:mod:`~attnbook.translate.run_folder`): the configuration,
the vocabularies and subword models (or, for words, a table of spellings
that gives them their capitals back), the chosen decoding, the checkpoint and
the weights of the best epoch, and the log.

A checkpoint is written after every epoch and every few minutes, always whole
or not at all, so an interrupted write never damages the last good one. After
every epoch whose validation loss is the lowest so far, the weights are also
written to ``best.pt``: a long run over a small file can start to learn its
training pairs by heart, and the translator is then the model of the best
epoch, not the last (early stopping, without stopping). Ctrl-C finishes the
current step, saves, and stops; ``--resume`` then continues exactly where the
run stopped (weights, optimizer, learning-rate schedule, random state and
position in the epoch).

Under ``torchrun --nproc_per_node=N`` the same ``train`` runs on N processes
with :class:`~torch.nn.parallel.DistributedDataParallel` (gloo on CPU, NCCL on
GPU): every process builds the same list of length-bucketed batches for an
epoch and takes every N-th one, gradients are averaged, and only the first
process writes files.

The package, one job a module, in the order a run needs them:

==============================================  ============================================================
:mod:`~attnbook.translate.cli`                  the parser and :func:`main`, the entry point
:mod:`~attnbook.translate.console`              lines, notes, the progress line, one-line errors
:mod:`~attnbook.translate.settings`             every setting once: default, help, rule
:mod:`~attnbook.translate.run_pairs`            the pairs file, its languages, the split
:mod:`~attnbook.translate.tokens`               subword pieces (SentencePiece) or words, and back to text
:mod:`~attnbook.translate.truecase`             the capitals that tokenizing words took away
:mod:`~attnbook.translate.model`                the model's configuration from the settings, the model
:mod:`~attnbook.translate.cluster`              the device, and the processes of ``torchrun``
:mod:`~attnbook.translate.run_folder`           the run folder, written and read back
:mod:`~attnbook.translate.budget`               the budget, its plan, and where a run stands
:mod:`~attnbook.translate.recipe`               the paper's recipe made fast: the loss, Adam, the schedule
:mod:`~attnbook.translate.train`                the training loop, top to bottom
:mod:`~attnbook.translate.decoding`             many sentences, by beam search or greedily
:mod:`~attnbook.translate.choose`               the decoding chosen on the validation pairs
:mod:`~attnbook.translate.cmd_train`            the ``train`` command
:mod:`~attnbook.translate.cmd_evaluate`         the ``evaluate`` command
:mod:`~attnbook.translate.cmd_translate`        the ``translate`` command
==============================================  ============================================================

Importing this package imports no PyTorch (see :mod:`~attnbook.translate.cli`).
"""

from .cli import main
from .console import CommandError

__all__ = ["main", "CommandError"]
