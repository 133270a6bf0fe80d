# Two commands a user types on a fresh machine: `make demo` and `make test`.
# Both create .venv (if missing), install the pinned dependencies and the project into it,
# and install Debian's wordnet-base (WordNet 3.0) when /usr/share/wordnet is missing.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DATA   ?= data
RAW    := $(DATA)/raw/omniglot_glyphs
OUT    := $(DATA)/converted
SEED   ?= 0

.PHONY: demo test lint venv system-deps clean-data bench

venv: $(STAMP)

$(STAMP): requirements.lock setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	@touch $(STAMP)

system-deps:
	@if [ ! -f /usr/share/wordnet/data.noun ]; then \
	  echo "Installing Debian package wordnet-base (WordNet 3.0) ..."; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq wordnet-base; \
	fi

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: venv system-deps
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q tests

demo: venv system-deps
	$(BIN)/python -m beam_pipelines.glyph_dataset --output $(RAW) --seed $(SEED)
	$(BIN)/python -m beam_pipelines.convert --source omniglot --input $(RAW) \
	    --output $(OUT)/omniglot --overwrite --direct_num_workers 2
	$(BIN)/python -m beam_pipelines.verify $(OUT)/omniglot

bench: venv
	$(BIN)/python benchmarks/convert.py

clean-data:
	rm -rf $(DATA)
