# `make demo LANG=zh`: the main job in Mandarin, included by the Makefile. The same stages as the English
# demo on the tiny Mandarin corpus (fortunes-zh sentences read by espeak-ng's Mandarin voice):
# corpus -> character vocabulary with <unk>, validation, shards, noise, stats -> train -> character 3-gram LM
# (ds2-build-lm --token char) -> alpha and the per-character beta tuned on dev by CER -> dev and test
# evaluated greedy and with the LM (CER first) -> export, served over gRPC, three test files transcribed
# -> a summary table, results/zh/$(DEMO_SIZE)/demo.json and results/demo_zh.json (`test.cer_lm`,
# `test.cer_greedy`). The knobs are the English demo's (DEMO_SIZE, TINY_HOURS, DEMO_EPOCHS,
# DEMO_TRAIN_FLAGS, DEMO_BEAM), with Mandarin defaults where they differ, ZH_COMMON_CHARS, ZH_PITCH_BINS and
# ZH_POETRY (1: classical Chinese text from the chinese-poetry collection in the LM, downloaded into DOWNLOADS);
# the recipe is examples/tiny_zh/tiny_zh.flags. What limits its accuracy: examples/tiny_zh/RESULTS.md.

# `LANG=zh` on the command line would reach every tool as the locale; they get a UTF-8 one instead.
override LANG := C.UTF-8
export LANG

# Mandarin defaults (a knob given on the command line wins).
ifeq ($(DEMO_SIZE),full)
ZH_EPOCHS := $(if $(filter command line,$(origin DEMO_EPOCHS)),$(DEMO_EPOCHS),20)
ZH_BEAM := $(if $(filter command line,$(origin DEMO_BEAM)),$(DEMO_BEAM),100)
ZH_HOURS := $(if $(filter command line,$(origin TINY_HOURS)),$(TINY_HOURS),1.5)
# beta up to 6: the best dev CER can sit past beta 3 (at 5 with the stride-4 model).
ZH_GRID := --alpha_from 0 --alpha_to 1.5 --num_alphas 7 --beta_from 0 --beta_to 6 --num_betas 13
ZH_MODEL := examples/tiny_zh/model.json
ZH_POETRY ?= 1
else
ZH_EPOCHS := $(DEMO_EPOCHS)
ZH_BEAM := $(DEMO_BEAM)
ZH_HOURS := $(TINY_HOURS)
ZH_GRID := $(DEMO_GRID)
ZH_MODEL := tiny
ZH_POETRY ?= 0
endif
# Training speakers (variant x rate x pitch; the English default doesn't apply): TINY_SPEAKERS on the command line.
ZH_SPEAKERS := $(if $(filter command line,$(origin TINY_SPEAKERS)),$(TINY_SPEAKERS),40)
# Sentences of fortunes-zh's 800 most frequent characters (0: all of them): examples/tiny_zh/RESULTS.md#ceiling.
ZH_COMMON_CHARS ?= 800
# Pitch-gram dims after the 161 spectrogram bins, so the model can hear tones (0: none;
# examples/tiny_zh/RESULTS.md#pitch).
ZH_PITCH_BINS ?= 32
ZH_FEATURE_DIM := $(shell echo $$((161 + $(ZH_PITCH_BINS))))
ZH := $(DATA)/zh/tiny$(DEMO_SUFFIX)
ZH_RUN := runs/zh/tiny$(DEMO_SUFFIX)
ZH_RES := results/zh/$(DEMO_SIZE)
ZH_LM := $(ZH)/lm/char3
ZH_EXPORT := $(ZH_RUN)/export
ZH_JSON = $$($(PY) -c "import json; print(json.load(open('$(ZH_RES)/tune.json'))['$(1)'])")

.PHONY: demo demo-zh-data demo-zh-summary
demo: deps demo-zh-summary

ZH_DATA := $(foreach s,$(SPLITS),$(ZH)/shards/$(s)/index.json) $(ZH)/mean_std.npz $(ZH)/augmentation.json
demo-zh-data: $(ZH_DATA)

$(ZH)/train.jsonl: | deps
	$(STAGE) "[1/8] tiny Mandarin corpus: $(ZH_HOURS) h of fortunes-zh read by espeak-ng's Mandarin voice"
	$(BIN)/ds2-prepare tiny --language zh --out $(ZH) --hours $(ZH_HOURS) --train_speakers $(ZH_SPEAKERS) \
		--common_chars $(ZH_COMMON_CHARS)

# Characters, with <unk> for those training never had (test text always has some).
$(ZH)/vocab.txt: $(ZH)/train.jsonl
	$(STAGE) "[2/8] character vocabulary, validation, shards, noise and statistics"
	$(BIN)/ds2-build-vocab --manifest_paths $< --out $@

$(ZH)/%.clean.jsonl: $(ZH)/vocab.txt
	$(BIN)/ds2-prepare validate $(ZH)/$*.jsonl --vocab $< --model $(ZH_MODEL) --write_clean $@

$(ZH)/shards/%/index.json: $(ZH)/%.clean.jsonl
	$(BIN)/ds2-make-shards --manifest $< --vocab $(ZH)/vocab.txt --out $(ZH)/shards/$* \
		--num_shards $(if $(filter train,$*),8,2)

$(ZH)/noise/rir.jsonl: $(ZH)/train.clean.jsonl
	$(BIN)/ds2-prepare noise --speech_manifest $< --out $(ZH)/noise

$(ZH)/mean_std.npz: $(ZH)/train.clean.jsonl
	$(BIN)/ds2-compute-stats --manifest_paths $< --feature linear --pitch_bins $(ZH_PITCH_BINS) --out $@

$(ZH)/augmentation.json: examples/tiny_zh/augmentation.json $(ZH)/noise/rir.jsonl
	sed 's#data/zh/tiny/noise/#$(ZH)/noise/#g' $< > $@.tmp && mv $@.tmp $@

# On the data files, not the phony demo-zh-data: a finished demo then re-runs nothing.
$(ZH_RUN)/.trained-$(ZH_EPOCHS): $(ZH_DATA)
	$(STAGE) "[3/8] train ($(ZH_EPOCHS) epochs; TensorBoard: tensorboard --logdir $(ZH_RUN)/tensorboard)"
	$(BIN)/ds2-train --flagfile=examples/tiny_zh/tiny_zh.flags --model=$(ZH_MODEL) --workdir=$(ZH_RUN) --train_shards=$(ZH)/shards/train \
		--dev_shards=$(ZH)/shards/dev --vocab=$(ZH)/vocab.txt --mean_std=$(ZH)/mean_std.npz \
		--augmentation=$(ZH)/augmentation.json --epochs=$(ZH_EPOCHS) \
		--model_overrides='{"feature_dim": $(ZH_FEATURE_DIM)}' $(DEMO_TRAIN_FLAGS)
	touch $@

# Classical Chinese text for the LM (ZH_POETRY=1, the full demo's default): the chinese-poetry collection (npm,
# 85 MB, downloaded once into DOWNLOADS), less every poem holding a dev/test sentence or sharing 7 characters with
# one. fortunes-zh is half Tang and Song poetry, and its own 200 k characters leave the LM weak at homophones
# (examples/tiny_zh/RESULTS.md#poetry).
ZH_POETRY_TXT := $(if $(filter 1,$(ZH_POETRY)),$(ZH)/poetry.txt)
ZH_LM_FLAGS := $(if $(ZH_POETRY_TXT),--text_paths $(ZH)/lm_text.txt$(,)$(ZH_POETRY_TXT) --text_weights 10$(,)1,--text_paths $(ZH)/lm_text.txt)
DOWNLOADS ?= data/downloads

$(ZH)/poetry.txt: $(ZH)/train.jsonl
	$(STAGE) "[4/8] classical Chinese LM text: chinese-poetry, less every poem near a dev/test sentence"
	$(BIN)/ds2-prepare poetry --out $@ --held_out $(ZH)/dev.jsonl,$(ZH)/test.jsonl --cache_dir $(DOWNLOADS)

# Characters space-separated: each one an LM token, so beta is a bonus per character. fortunes-zh's text counts
# 10 times against the poetry's 100-fold more, so its modern sayings keep their weight.
$(ZH_LM).bin: $(ZH)/train.jsonl $(ZH_POETRY_TXT) | $(VENV)/bin/lmplz
	$(STAGE) "[4/8] character 3-gram LM from fortunes-zh text$(if $(filter 1,$(ZH_POETRY)), and the poetry,) without any dev/test sentence"
	$(BIN)/ds2-build-lm $(ZH_LM_FLAGS) --out $(ZH_LM) --order 3 --token char --nokeep_arpa

$(ZH_RES)/tune.json: $(ZH_RUN)/.trained-$(ZH_EPOCHS) $(ZH_LM).bin
	$(STAGE) "[5/8] tune alpha and the per-character beta on dev by CER (beam search with the LM)"
	$(BIN)/ds2-tune --model_dir $(ZH_RUN)/model --manifest $(ZH)/dev.clean.jsonl --lm $(ZH_LM).bin $(ZH_GRID) \
		--beam_size $(ZH_BEAM) --out_json $@ --out_png $(ZH_RES)/tune.png

$(ZH_RES)/%_greedy.json: $(ZH_RUN)/.trained-$(ZH_EPOCHS)
	$(STAGE) "[6/8] evaluate $* greedy"
	$(BIN)/ds2-eval --model_dir $(ZH_RUN)/model --manifest $(ZH)/$*.clean.jsonl --group_by speaker --report $@

$(ZH_RES)/%_lm.json: $(ZH_RES)/tune.json
	$(STAGE) "[6/8] evaluate $* with the LM (alpha, beta from $<)"
	$(BIN)/ds2-eval --model_dir $(ZH_RUN)/model --manifest $(ZH)/$*.clean.jsonl --decoder beam --lm $(ZH_LM).bin \
		--beam_size $(ZH_BEAM) --alpha $(call ZH_JSON,best_alpha) --beta $(call ZH_JSON,best_beta) \
		--group_by speaker --report $@

$(ZH_RES)/serving.json: $(ZH_RES)/test_lm.json
	$(STAGE) "[7/8] export, serve over gRPC on a free loopback port, transcribe 3 test files with ds2-client"
	$(BIN)/ds2-export --model_dir $(ZH_RUN)/model --export_dir $(ZH_EXPORT) --lm $(ZH_LM).bin --beam_size $(ZH_BEAM) \
		--alpha $(call ZH_JSON,best_alpha) --beta $(call ZH_JSON,best_beta)
	rm -f $(ZH_RES)/serve.port
	$(BIN)/ds2-serve --model_base_path $(ZH_EXPORT)/ds2 --port 0 --port_file $(ZH_RES)/serve.port > $(ZH_RES)/serve.log 2>&1 & \
	pid=$$!; trap 'kill -TERM $$pid 2>/dev/null; wait $$pid' EXIT; \
	until [ -s $(ZH_RES)/serve.port ]; do kill -0 $$pid 2>/dev/null || { cat $(ZH_RES)/serve.log; exit 1; }; sleep 0.2; done; \
	$(BIN)/ds2-client --server 127.0.0.1:$$(cat $(ZH_RES)/serve.port) --manifest $(ZH)/test.clean.jsonl --num_samples 3 \
		--nbest 3 --json $@.tmp && mv $@.tmp $@

demo-zh-summary: $(foreach s,dev test,$(ZH_RES)/$(s)_greedy.json $(ZH_RES)/$(s)_lm.json) $(ZH_RES)/serving.json
	$(STAGE) "[8/8] summary"
	$(PY) tools/demo_report.py --run $(ZH_RUN) --results $(ZH_RES) --data $(ZH) --size $(DEMO_SIZE)
	cp $(ZH_RES)/demo.json results/demo_zh.json
