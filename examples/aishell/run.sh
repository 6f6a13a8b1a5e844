#!/usr/bin/env bash
# Aishell-1 end to end: import -> character vocabulary -> validation -> shards -> stats -> character 5-gram LM
# -> train -> alpha/beta tuned on dev by CER -> test evaluated by CER, greedy and with the LM.
#
#   examples/aishell/run.sh /data/aishell          # the folder holding data_aishell/ (wav/ unpacked)
#
# Each stage skips when its output exists, so a re-run resumes (training resumes from its checkpoint).
# Overrides (environment): DATA (data/aishell), RUN (runs/aishell), TRAIN_FLAGS (more ds2-train flags, after
# zh.flags), LM_ORDER (5), BEAM (200, DS2 §7.3's Mandarin beam), GRID (ds2-tune's grid flags), NUM_SHARDS (64).
# See README.md next to this file for the corpus, the time it takes and what to expect.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 AISHELL_DIR (the folder holding data_aishell/)" >&2; exit 2; }
CORPUS=$1
DATA=${DATA:-data/aishell}
RUN=${RUN:-runs/aishell}
TRAIN_FLAGS=${TRAIN_FLAGS:-}
LM_ORDER=${LM_ORDER:-5}
BEAM=${BEAM:-200}
GRID=${GRID:---alpha_from 0 --alpha_to 2 --num_alphas 9 --beta_from 0 --beta_to 3 --num_betas 7 --num_batches 8}
NUM_SHARDS=${NUM_SHARDS:-64}
BIN=${BIN:-.venv/bin}
MODEL=$(sed -n 's/^--model=//p' examples/aishell/zh.flags)
stage() { printf '\n==> %s\n' "$*"; }

stage "[1/7] import Aishell-1 from $CORPUS"
[ -s "$DATA/test.jsonl" ] || "$BIN/ds2-prepare" aishell --corpus_dir "$CORPUS" --out "$DATA"

stage "[2/7] character vocabulary (<unk> for characters training lacks), validation"
[ -s "$DATA/vocab.txt" ] || "$BIN/ds2-build-vocab" --manifest_paths "$DATA/train.jsonl" --out "$DATA/vocab.txt"
for s in train dev test; do
  [ -s "$DATA/$s.clean.jsonl" ] || "$BIN/ds2-prepare" validate "$DATA/$s.jsonl" --vocab "$DATA/vocab.txt" \
    --model "$MODEL" --write_clean "$DATA/$s.clean.jsonl"
done

stage "[3/7] shards and feature statistics"
for s in train dev test; do
  [ -s "$DATA/shards/$s/index.json" ] || "$BIN/ds2-make-shards" --manifest "$DATA/$s.clean.jsonl" \
    --vocab "$DATA/vocab.txt" --out "$DATA/shards/$s" --num_shards "$([ $s = train ] && echo "$NUM_SHARDS" || echo 4)"
done
# The spectrogram and a 32-bin pitch-gram for the tones (zh.flags builds the model for 161 + 32 dims).
[ -s "$DATA/mean_std.npz" ] || "$BIN/ds2-compute-stats" --manifest_paths "$DATA/train.clean.jsonl" --pitch_bins 32 \
  --out "$DATA/mean_std.npz"

stage "[4/7] character $LM_ORDER-gram LM from the training transcripts"
if [ ! -s "$DATA/lm/char$LM_ORDER.bin" ]; then
  "$BIN/python" -c 'import json, sys; [print(json.loads(l)["text"]) for l in open(sys.argv[1], encoding="utf-8")]' \
    "$DATA/train.clean.jsonl" > "$DATA/lm_text.txt"
  "$BIN/ds2-build-lm" --text_paths "$DATA/lm_text.txt" --out "$DATA/lm/char$LM_ORDER" --order "$LM_ORDER" --token char
fi

stage "[5/7] train (TensorBoard: tensorboard --logdir $RUN/tensorboard)"
# shellcheck disable=SC2086  # TRAIN_FLAGS is a list of flags
"$BIN/ds2-train" --flagfile=examples/aishell/zh.flags --workdir="$RUN" --train_shards="$DATA/shards/train" \
  --dev_shards="$DATA/shards/dev" --vocab="$DATA/vocab.txt" --mean_std="$DATA/mean_std.npz" $TRAIN_FLAGS

stage "[6/7] tune alpha and the per-character beta on dev by CER"
# shellcheck disable=SC2086
[ -s "$RUN/tune.json" ] || "$BIN/ds2-tune" --model_dir "$RUN/model" --manifest "$DATA/dev.clean.jsonl" \
  --lm "$DATA/lm/char$LM_ORDER.bin" --beam_size "$BEAM" $GRID --out_json "$RUN/tune.json" --out_png "$RUN/tune.png"
best() { "$BIN/python" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$RUN/tune.json" "$1"; }

stage "[7/7] evaluate test (CER), greedy and with the LM"
"$BIN/ds2-eval" --model_dir "$RUN/model" --manifest "$DATA/test.clean.jsonl" --report "$RUN/test_greedy.json"
"$BIN/ds2-eval" --model_dir "$RUN/model" --manifest "$DATA/test.clean.jsonl" --decoder beam \
  --lm "$DATA/lm/char$LM_ORDER.bin" --beam_size "$BEAM" --alpha "$(best best_alpha)" --beta "$(best best_beta)" \
  --group_by speaker --report "$RUN/test_lm.json"
