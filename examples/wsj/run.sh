#!/usr/bin/env bash
# WSJ end to end: import (Kaldi's splits) -> vocabulary -> validation -> shards -> stats -> word n-gram LM (WSJ's
# own LM text, or the training transcripts) -> train on SI-284 -> alpha/beta tuned on dev93 -> dev93 and eval92
# evaluated greedy and with the LM -> export -> one results table.
#
#   examples/wsj/run.sh /data/wsj          # the folder holding the WSJ0 and WSJ1 disc folders (11-1.1/ ... 13-34.1/)
#
# Each stage skips when its output exists (tuning, evaluation and export: an output newer than the model), so a
# re-run resumes (training from its checkpoint) and a finished run re-run changes nothing.
# Overrides (environment): DATA (data/wsj), RUN (runs/wsj), BIN (.venv/bin), TRAIN_FLAGS (more ds2-train flags, after
# wsj.flags), MODEL (the model validation checks CTC fit for; default wsj.flags' --model), EVAL_SETS ("test_dev93
# test_eval92"; add test_eval93, or the 5k sets), LM_ORDER (4), LM_FLAGS (more ds2-build-lm flags: "--prune 0,0,1"),
# BEAM (500), GRID (ds2-tune's grid flags), NUM_SHARDS (32). See README.md next to this file.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 WSJ_DIR (the folder holding the WSJ0/WSJ1 disc folders 11-1.1/ ... 13-34.1/)" >&2; exit 2; }
CORPUS=$1
DATA=${DATA:-data/wsj}
RUN=${RUN:-runs/wsj}
BIN=${BIN:-.venv/bin}
TRAIN_FLAGS=${TRAIN_FLAGS:-}
MODEL=${MODEL:-$(sed -n 's/^--model=//p' examples/wsj/wsj.flags)}
EVAL_SETS=${EVAL_SETS:-test_dev93 test_eval92}
LM_ORDER=${LM_ORDER:-4}
LM_FLAGS=${LM_FLAGS---prune 0,0,1}
BEAM=${BEAM:-500}
GRID=${GRID:---alpha_from 0 --alpha_to 3 --num_alphas 7 --beta_from 0 --beta_to 5 --num_betas 6 --num_batches 8}
NUM_SHARDS=${NUM_SHARDS:-32}
TRAIN=train_si284
DEV=test_dev93
LM=$DATA/lm/words$LM_ORDER.bin
stage() { printf '\n==> %s\n' "$*"; }
fail() { echo "$0: $*" >&2; exit 1; }
# An output of the model (tuning, a report, an export) made after the model's last save.
fresh() { [ -s "$1" ] && [ "$1" -nt "$RUN/model/model.keras" ]; }

stage "[1/8] import WSJ from $CORPUS (Kaldi's splits: $TRAIN, $EVAL_SETS)"
[ -s "$DATA/$TRAIN.jsonl" ] || "$BIN/ds2-prepare" wsj --corpus_dir "$CORPUS" --out "$DATA"
for s in $TRAIN $DEV $EVAL_SETS; do
  [ -s "$DATA/$s.jsonl" ] || fail "$DATA/$s.jsonl is missing or empty: $CORPUS lacks its index files or audio" \
    "(what was skipped and why: $DATA/$s.report.json; the splits and the discs they need: ds2-prepare wsj --help)"
done

stage "[2/8] character vocabulary, validation of what training reads ($TRAIN, and $DEV for its dev scores)"
[ -s "$DATA/vocab.txt" ] || "$BIN/ds2-build-vocab" --manifest_paths "$DATA/$TRAIN.jsonl" --out "$DATA/vocab.txt"
# Tuning and evaluation read the whole sets, as imported: a standard test set is scored whole.
for s in $TRAIN $DEV; do
  [ -s "$DATA/$s.clean.jsonl" ] || "$BIN/ds2-prepare" validate "$DATA/$s.jsonl" --vocab "$DATA/vocab.txt" \
    --model "$MODEL" --write_clean "$DATA/$s.clean.jsonl"
done

stage "[3/8] shards and feature statistics"
[ -s "$DATA/shards/$TRAIN/index.json" ] || "$BIN/ds2-make-shards" --manifest "$DATA/$TRAIN.clean.jsonl" \
  --vocab "$DATA/vocab.txt" --out "$DATA/shards/$TRAIN" --num_shards "$NUM_SHARDS"
[ -s "$DATA/shards/$DEV/index.json" ] || "$BIN/ds2-make-shards" --manifest "$DATA/$DEV.clean.jsonl" \
  --vocab "$DATA/vocab.txt" --out "$DATA/shards/$DEV" --num_shards 4
[ -s "$DATA/mean_std.npz" ] || "$BIN/ds2-compute-stats" --manifest_paths "$DATA/$TRAIN.clean.jsonl" \
  --out "$DATA/mean_std.npz"

stage "[4/8] word $LM_ORDER-gram LM"
if [ ! -s "$LM" ]; then
  if [ -n "$(find -L "$CORPUS" -ipath '*/wsj1/doc/lng_modl/lm_train/np_data/*' -type f -print -quit)" ]; then
    echo "from WSJ1's LM training text (13-32.1/wsj1/doc/lng_modl/lm_train/np_data)"
    "$BIN/ds2-prepare" wsj-lm --corpus_dir "$CORPUS" --out "$DATA/lm_text.txt"
  else
    echo "from the $TRAIN transcripts ($CORPUS has no 13-32.1/wsj1/doc/lng_modl/lm_train/np_data)"
    "$BIN/python" -c 'import json, sys; [print(json.loads(l)["text"]) for l in open(sys.argv[1], encoding="utf-8")]' \
      "$DATA/$TRAIN.clean.jsonl" > "$DATA/lm_text.txt"
  fi
  # shellcheck disable=SC2086  # LM_FLAGS is a list of flags
  "$BIN/ds2-build-lm" --text_paths "$DATA/lm_text.txt" --nonormalize --out "${LM%.bin}" --order "$LM_ORDER" $LM_FLAGS
fi

stage "[5/8] train on $TRAIN (TensorBoard: tensorboard --logdir $RUN/tensorboard)"
# shellcheck disable=SC2086  # TRAIN_FLAGS is a list of flags
"$BIN/ds2-train" --flagfile=examples/wsj/wsj.flags --workdir="$RUN" --train_shards="$DATA/shards/$TRAIN" \
  --dev_shards="$DATA/shards/$DEV" --vocab="$DATA/vocab.txt" --mean_std="$DATA/mean_std.npz" $TRAIN_FLAGS

stage "[6/8] tune alpha and beta on $DEV by WER"
# shellcheck disable=SC2086
fresh "$RUN/tune.json" || "$BIN/ds2-tune" --model_dir "$RUN/model" --manifest "$DATA/$DEV.jsonl" --lm "$LM" \
  --beam_size "$BEAM" $GRID --out_json "$RUN/tune.json" --out_png "$RUN/tune.png"
best() { "$BIN/python" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$RUN/tune.json" "$1"; }

stage "[7/8] evaluate $EVAL_SETS, greedy and with the LM"
for s in $EVAL_SETS; do
  fresh "$RUN/${s}_greedy.json" || "$BIN/ds2-eval" --model_dir "$RUN/model" --manifest "$DATA/$s.jsonl" \
    --group_by speaker --report "$RUN/${s}_greedy.json"
  fresh "$RUN/${s}_lm.json" || "$BIN/ds2-eval" --model_dir "$RUN/model" --manifest "$DATA/$s.jsonl" \
    --decoder beam --lm "$LM" --beam_size "$BEAM" --alpha "$(best best_alpha)" --beta "$(best best_beta)" \
    --group_by speaker --report "$RUN/${s}_lm.json"
done

stage "[8/8] export (TF Serving, with the LM and the tuned alpha/beta), results"
latest=  # the newest version's SavedModel, if any
[ ! -d "$RUN/export/ds2" ] || latest=$(find "$RUN/export/ds2" -mindepth 2 -maxdepth 2 -name saved_model.pb | sort -V | tail -n 1)
[ -n "$latest" ] && fresh "$latest" || "$BIN/ds2-export" --model_dir "$RUN/model" --export_dir "$RUN/export" \
  --lm "$LM" --beam_size "$BEAM" --alpha "$(best best_alpha)" --beta "$(best best_beta)"
reports=()
for s in $EVAL_SETS; do reports+=("$RUN/${s}_greedy.json" "$RUN/${s}_lm.json"); done
"$BIN/python" examples/results_table.py "${reports[@]}" --out "$RUN/results.md"
