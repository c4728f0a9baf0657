"""The book's own machinery, apart from the chapter modules a learner imports.

- :mod:`attnbook.book.config`   ``_config.yml`` and what is derived from it: the repository, Colab links, the setup cell
- :mod:`attnbook.book.execute`  re-running notebooks in place (``python -m attnbook.book.execute``, ``make execute``)
- :mod:`attnbook.book.sphinx`   the Sphinx extension: exercise numbers per chapter, the edition switch, the style sheet
- :mod:`attnbook.book.glossary` the glossary's (English, Chinese) terms
- :mod:`attnbook.book.edition`  the Chinese edition from the gettext catalogues (``python -m attnbook.book.edition``)
- :mod:`attnbook.book.claims`   the figures the prose reports, found in the outputs that print them

The modules import each other in that order only (config, glossary; then the others), never in a circle;
``tests/test_layout.py`` keeps the whole library free of import circles.
"""
