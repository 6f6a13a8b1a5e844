# Two commands set everything up: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DATA ?= data
TINY := $(DATA)/tiny
BIN := $(VENV)/bin
TINY_HOURS ?= 1.0

.PHONY: demo test test-slow deps kenlm clean-venv bench

# Apt packages first, then the venv from the pinned lock file. Re-runs are no-ops unless
# requirements.lock or setup.cfg changed.
deps: $(STAMP)
	@tools/apt-deps.sh base

$(STAMP): requirements.lock setup.cfg pyproject.toml
	@tools/apt-deps.sh base
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	@touch $@

# The main job on the tiny synthetic corpus. For now: the data stage (later: train -> decode -> eval -> export).
demo: deps
	$(BIN)/ds2-prepare tiny --out $(TINY) --hours $(TINY_HOURS)
	$(BIN)/ds2-build-vocab --manifest_paths $(TINY)/train.jsonl --out $(TINY)/vocab.txt
	@# Bad lines (e.g. speech too fast for CTC at the model's time stride) are dropped and reported, not fatal.
	for split in train dev test; do \
		$(BIN)/ds2-prepare validate $(TINY)/$$split.jsonl --vocab $(TINY)/vocab.txt \
			--write_clean $(TINY)/$$split.clean.jsonl || exit 1; \
		$(BIN)/ds2-make-shards --manifest $(TINY)/$$split.clean.jsonl --vocab $(TINY)/vocab.txt \
			--out $(TINY)/shards/$$split --num_shards $$([ $$split = train ] && echo 8 || echo 2) || exit 1; \
	done
	$(BIN)/ds2-prepare noise --speech_manifest $(TINY)/train.clean.jsonl --out $(TINY)/noise
	$(BIN)/ds2-compute-stats --manifest_paths $(TINY)/train.clean.jsonl --feature linear --out $(TINY)/mean_std.npz

test: deps
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

test-slow: deps
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

bench: deps
	$(PY) bench/shards.py
	$(PY) bench/pipeline.py

# lmplz and build_binary from the kenlm sdist, into .venv/bin (the decoding stage needs them).
KENLM_BUILD := .kenlm-build
kenlm: deps $(VENV)/bin/lmplz
$(VENV)/bin/lmplz:
	@tools/apt-deps.sh kenlm
	rm -rf $(KENLM_BUILD) && mkdir -p $(KENLM_BUILD)
	$(PY) -m pip download -q --no-deps --no-binary=kenlm -d $(KENLM_BUILD) "kenlm==$$(grep '^kenlm==' requirements.lock | cut -d= -f3)"
	tar -xzf $(KENLM_BUILD)/kenlm-*.tar.gz -C $(KENLM_BUILD)
	cmake -S $(KENLM_BUILD)/kenlm-*/ -B $(KENLM_BUILD)/build -DCMAKE_BUILD_TYPE=Release -DKENLM_MAX_ORDER=6 > $(KENLM_BUILD)/cmake.log
	cmake --build $(KENLM_BUILD)/build -j2 --target lmplz build_binary > $(KENLM_BUILD)/build.log
	install -m 755 $(KENLM_BUILD)/build/bin/lmplz $(KENLM_BUILD)/build/bin/build_binary $(VENV)/bin/

clean-venv:
	rm -rf $(VENV)
