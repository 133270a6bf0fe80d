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

.PHONY: demo demo-data demo-episodes demo-splits demo-learners test test-fast docs lint venv system-deps \
        clean-data bench bench-sampler bench-episodes bench-feed splits-published

venv: $(STAMP)

$(STAMP): requirements.lock setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.lock
	@# setuptools warns of editable installs in a box of 10 lines on every install: one known,
	@# harmless notice (the package folders here take precedence, which is the point)
	PYTHONWARNINGS="ignore:Editable installation" \
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

# Every test: the fast ones and those marked slow (a plain `pytest`, or `make test-fast`, runs
# only the fast ones: a few minutes).
test: venv system-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) docs
	$(BIN)/python -m pytest -q -m "slow or not slow" tests

# The documentation site in data/site: the command reference generated from the parsers, then
# mkdocs in strict mode (a broken link or a page missing from the navigation fails).
docs: venv
	$(BIN)/python docs/cli_reference.py --output docs/cli.md
	$(BIN)/mkdocs build --strict --quiet

test-fast: venv system-deps
	$(BIN)/python -m pytest -q tests

RUNS   := $(DATA)/runs
PLOTS  := $(DATA)/plots
EMB    := $(DATA)/embeddings/omniglot_cnn4.npz
# Demo sizes: a few minutes of CPU training; raise them for real experiments. The multiclass
# network needs more steps (batches of 64) before fine-tuning beats its initialisation.
TRAIN_STEPS ?= 100
PRETRAIN_STEPS ?= 400
EVAL_EPISODES ?= 50
FT_EPISODES ?= 20
# The demo's numbers must not depend on the CPU, yet every numeric library picks its kernels
# when it starts: torch (oneDNN convolutions, ATen's vector kernels, MKL), numpy (its SIMD
# dispatch: X86_V3 = AVX2, X86_V4 and AVX512_* on AVX-512 machines, where float64 sin/cos/exp/log
# use SVML and differ in the last bit), OpenBLAS (numpy's and scipy's: a kernel per CPU
# generation), and the thread counts, which change the order of sums. DEMO_ENV pins each one
# for every demo command: torch's paths to AVX2, numpy to its x86-64 baseline (no dispatch),
# OpenBLAS to its Haswell kernels, DEMO_THREADS threads. Two machines are emulated in
# tests/project/test_demo_reproducible.py; `python -m benchmarks.demo_digests` (the demo's last step)
# prints a digest per stage, so two machines that disagree show where they part (issue 30).
# `make demo DEMO_ENV=` runs unpinned.
DEMO_THREADS ?= 1
ifeq ($(shell uname -m),x86_64)
DEMO_ENV ?= ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 \
            NPY_DISABLE_CPU_FEATURES=X86_V3,X86_V4,AVX512_ICL,AVX512_SPR \
            OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=$(DEMO_THREADS) \
            OMP_NUM_THREADS=$(DEMO_THREADS) MKL_NUM_THREADS=$(DEMO_THREADS)
else
DEMO_ENV ?= OMP_NUM_THREADS=$(DEMO_THREADS) OPENBLAS_NUM_THREADS=$(DEMO_THREADS)
endif
DEMO_PY = $(DEMO_ENV) $(BIN)/python

demo: venv system-deps demo-data demo-episodes demo-splits demo-learners
	@echo
	@echo "Demo finished. Converted dataset: $(OUT)/omniglot; split files: $(DATA)/splits/omniglot;"
	@echo "runs: $(RUNS); pictures: $(PLOTS) (episode grid, PCA of class embeddings per R, hardness)."

demo-data: venv
	@echo "== demo 1/4: the embedded glyph dataset, converted with Beam and verified"
	$(DEMO_PY) -m beam_pipelines.glyph_dataset --output $(RAW) --seed $(SEED)
	$(DEMO_PY) -m beam_pipelines.convert --source omniglot --input $(RAW) \
	    --output $(OUT)/omniglot --overwrite --direct_num_workers 2
	$(DEMO_PY) -m beam_pipelines.verify --dataset $(OUT)/omniglot

demo-episodes: venv
	@echo "== demo 2/4: episodes (a picture of two, statistics of 1,000)"
	@mkdir -p $(PLOTS)
	$(DEMO_PY) -m episodes.read --dataset $(OUT)/omniglot --split test --seed $(SEED) \
	    --episodes 2 --save-grid $(PLOTS)/episode_grid.png
	$(DEMO_PY) -m episodes.read --dataset $(OUT)/omniglot --split test --seed $(SEED) --stats 1000

demo-splits: venv
	@echo "== demo 3/4: class embeddings, ATG splits at four divergences, their PCA pictures"
	$(DEMO_PY) -m splits.embed --dataset $(OUT)/omniglot --pretrain cnn4 --image-size 28 \
	    --pretrain-steps $(TRAIN_STEPS) --seed $(SEED) --output $(EMB) --overwrite \
	    --direct_num_workers 2
	$(DEMO_PY) -m splits make --method atg --embeddings $(EMB) --dataset $(OUT)/omniglot \
	    --divergence 0.04 0.32 0.64 0.96 --seed $(SEED) --quiet --overwrite \
	    --output $(DATA)/splits/omniglot
	@for f in $(DATA)/splits/omniglot/*.json; do \
	  $(DEMO_PY) -m splits.analyze summary --split-file $$f --embeddings $(EMB) || exit 1; \
	  $(DEMO_PY) -m splits.analyze pca --embeddings $(EMB) --split-file $$f \
	      --output $(PLOTS)/pca_$$(basename $$f .json).png || exit 1; \
	done

demo-learners: venv
	@echo "== demo 4/4: ProtoNet and multiclass pre-training, 8 evaluations, rank tables, hardness"
	$(DEMO_PY) -m learners.train --method protonet --backbone cnn4 --dataset $(OUT)/omniglot \
	    --image-size 28 --ways 5 --shots 5 --query 15 --steps $(TRAIN_STEPS) --checkpoint-every 50 \
	    --validation-episodes 20 --seed $(SEED) --output $(RUNS)/protonet
	$(DEMO_PY) -m learners.train --method multiclass --backbone cnn4 --dataset $(OUT)/omniglot \
	    --image-size 28 --steps $(PRETRAIN_STEPS) --batch-size 64 --checkpoint-every 100 \
	    --validation-episodes 20 --seed $(SEED) --output $(RUNS)/multiclass
	@rm -rf $(RUNS)/eval
	@for S in 1 5; do \
	  $(DEMO_PY) -m learners.evaluate --run $(RUNS)/protonet --split test --episodes $(EVAL_EPISODES) \
	      --ways 5 --shots $$S --query 15 --hardness-model $(RUNS)/multiclass \
	      --label "ProtoNet $$S-shot" --output $(RUNS)/eval/protonet_$${S}shot || exit 1; \
	  for I in support_init finetune transductive; do \
	    $(DEMO_PY) -m learners.evaluate --run $(RUNS)/multiclass --inference $$I --split test \
	        --episodes $(FT_EPISODES) --ways 5 --shots $$S --query 15 --hardness-model $(RUNS)/multiclass \
	        --label "$$I $$S-shot" --output $(RUNS)/eval/$${I}_$${S}shot || exit 1; \
	  done; \
	done
	@echo '5-way 1-shot test episodes:'
	$(DEMO_PY) -m learners.report ranks $(RUNS)/eval/*_1shot
	@echo '5-way 5-shot test episodes:'
	$(DEMO_PY) -m learners.report ranks $(RUNS)/eval/*_5shot
	$(DEMO_PY) -m learners.report hardness $(RUNS)/eval/* --output $(PLOTS)/hardness.png
	@echo '== a digest per stage (compare two machines line by line; README, "Reproducing the demo"):'
	@$(DEMO_PY) -m benchmarks.demo_digests --data $(DATA) --output $(DATA)/demo-digests.txt

bench: venv
	$(BIN)/python benchmarks/convert.py
	$(BIN)/python -m benchmarks.sampler
	$(BIN)/python benchmarks/episodes.py
	$(BIN)/python -m benchmarks.train_feed

bench-sampler: venv
	$(BIN)/python -m benchmarks.sampler

bench-episodes: venv
	$(BIN)/python benchmarks/episodes.py

bench-feed: venv
	$(BIN)/python -m benchmarks.train_feed

# Regenerate the committed published split files from the paper text and reference data.
splits-published: venv
	$(BIN)/python -m splits.published_tables --paper ../shared/papers/atg-arnold-sha.txt
	$(BIN)/python -m splits.published_meta_dataset --reference ../shared/reference-data/meta-dataset

clean-data:
	rm -rf $(DATA)
