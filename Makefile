# Attention, Step by Step: two commands do everything (see README.md).
#   make book   creates the environment if missing, builds both editions of the book (English, and the
#               Chinese one in _build/html/zh/, generated from the notebooks and locales/), prints where the HTML is
#   make test   creates the environment if missing, runs every test (library, exercise
#               checkers, notebook hygiene, strict nbval over every notebook, strict book build)
#   make test-gpu  the tests marked gpu alone (tests/test_gpu.py): the command line, torchrun with NCCL and
#               the models on a CUDA GPU; each is skipped, saying why, where PyTorch sees none
# Other targets: make book-zh (the Chinese edition alone), make env, make lab (JupyterLab on localhost, in notebooks/),
# make execute (re-run every notebook in place), make portability (rerun the long
# training notebooks whole on another CPU's kernel path, ~14 minutes), make bench (the benchmarks in
# tests/benchmarks, kept out of the timed tests, then one summary table), make clean.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
D2L    := d2l==1.0.3

# Tests and notebooks always use this checkout's library, deterministically.
export PYTHONPATH := $(CURDIR)/src
export PYTHONHASHSEED := 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: env book book-zh test test-gpu portability lab execute bench clean

env: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	# d2l without its hard pins (they do not install on Python 3.12+ or in Colab);
	# requirements.txt provides what d2l.torch imports.
	$(PY) -m pip install --quiet --no-deps $(D2L)
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

JB_STRICT := --warningiserror --nitpick --keep-going

book: env
	$(VENV)/bin/jupyter-book build . $(JB_STRICT)
	$(MAKE) --no-print-directory book-zh
	@echo "The book is at $(CURDIR)/_build/html/index.html (中文版: $(CURDIR)/_build/html/zh/index.html)"

# The Chinese edition: zh/ written from the English notebooks and the catalogues of locales/ (it fails on a
# passage without a translation), built strict, and put beside the English book as its zh/ folder.
book-zh: env
	$(PY) -m attnbook.book.edition build
	$(VENV)/bin/jupyter-book build zh $(JB_STRICT) --path-output _build/zh
	rm -rf _build/html/zh && mkdir -p _build/html && cp -r _build/zh/_build/html _build/html/zh

test: env
	$(PY) -m pytest

test-gpu: env
	$(PY) -m pytest -m gpu -n 0 tests/test_gpu.py

# The chapters that train for minutes, rerun whole on the kernel path of another CPU
# (tests/test_portability.py, the long_rerun mark): after a change to how a chapter trains.
portability: env
	$(PY) -m pytest -m long_rerun tests/test_portability.py

# JupyterLab (and Notebook 7, at /tree) for this machine only; open the address it prints.
# tests/test_jupyter.py starts the server with LAB_OPTIONS. Jupyter refuses to run as
# root unless told to, and containers often run as root.
LAB_OPTIONS := --notebook-dir=notebooks --ip=127.0.0.1
lab: env
	$(VENV)/bin/jupyter lab $(LAB_OPTIONS) $(if $(filter 0,$(shell id -u)),--allow-root)

execute: env
	$(PY) -m attnbook.book.execute notebooks/*.ipynb

# Every tests/benchmarks/bench_*.py, even after one misses a target; then one summary table.
# Exits non-zero only after the summary, if a target was missed or a script failed.
bench: env
	$(PY) tests/benchmarks/run_all.py

clean:
	rm -rf _build .pytest_cache
