"""The book's own machinery, apart from the chapter modules a learner imports.

- :mod:`attnbook.book.config`   ``_config.yml`` and what is derived from it: the repository, Colab links, the setup cell
- :mod:`attnbook.book.execute`  re-running notebooks in place (``python -m attnbook.book.execute``, ``make execute``)
- :mod:`attnbook.book.sphinx`   the Sphinx extension: exercise numbers per chapter, the edition switch, the style sheet
- :mod:`attnbook.book.glossary` the glossary's (English, Chinese) terms
- :mod:`attnbook.book.edition`  the Chinese edition from the gettext catalogues (``python -m attnbook.book.edition``)
- :mod:`attnbook.book.claims`   the figures the prose reports, found in the outputs that print them
- :mod:`attnbook.book.solutions` the solution cells, kept for the checkers (``python -m attnbook.book.solutions``)
- the Chinese edition's parts: :mod:`~attnbook.book.catalogues` (what the catalogues share),
  :mod:`~attnbook.book.code_words` (comments and docstrings), :mod:`~attnbook.book.edition_diagrams`,
  :mod:`~attnbook.book.feedback` (what the checkers print), and for the site :mod:`~attnbook.book.interface`,
  :mod:`~attnbook.book.exercise_titles`, :mod:`~attnbook.book.search_words`, :mod:`~attnbook.book.anchors`

The modules import each other in that order only (config, glossary; then the others), never in a circle;
``tests/test_layout.py`` keeps the whole library free of import circles.
"""
