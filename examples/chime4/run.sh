#!/usr/bin/env bash
# CHiME-4 evaluation of an English model on one channel (as the DS2 paper scores CHiME): import -> alpha/beta tuned
# on dt05_real (with an LM) -> dt05 and et05, real and simulated, evaluated greedy (and with the LM) per environment
# (BUS, CAF, PED, STR) -> one results table.
#
#   examples/chime4/run.sh /data/CHiME4 runs/wsj/model             # the CHiME-4 archive unpacked; a model bundle
#   LM=data/wsj/lm/words4.bin examples/chime4/run.sh /data/CHiME4 runs/wsj/model   # and with an LM
#
# Each stage skips when its output exists and is newer than the model, so a finished run re-run changes nothing.
# Overrides (environment): DATA (data/chime4), RUN (runs/chime4), BIN (.venv/bin), LM (a KenLM model, e.g. the WSJ
# recipe's; unset: greedy only), DEV (dt05_real, where alpha/beta are tuned), EVAL_SETS ("dt05_real dt05_simu
# et05_real et05_simu"), BEAM (500), GRID (ds2-tune's grid flags). See README.md next to this file.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 CHIME4_DIR MODEL_DIR (the unpacked CHiME-4 archive; a ds2-train model bundle)" >&2
                  exit 2; }
CORPUS=$1
MODEL_DIR=$2
DATA=${DATA:-data/chime4}
RUN=${RUN:-runs/chime4}
BIN=${BIN:-.venv/bin}
LM=${LM:-}
DEV=${DEV:-dt05_real}
EVAL_SETS=${EVAL_SETS:-dt05_real dt05_simu et05_real et05_simu}
BEAM=${BEAM:-500}
GRID=${GRID:---alpha_from 0 --alpha_to 3 --num_alphas 7 --beta_from 0 --beta_to 5 --num_betas 6 --num_batches 8}
stage() { printf '\n==> %s\n' "$*"; }
fail() { echo "$0: $*" >&2; exit 1; }
# An output of the model (tuning, a report) made after the model's last save.
fresh() { [ -s "$1" ] && [ "$1" -nt "$MODEL_DIR/model.keras" ]; }
[ -s "$MODEL_DIR/model.keras" ] || fail "$MODEL_DIR is not a model bundle (no model.keras): pass a ds2-train" \
  "workdir's model/ folder, e.g. runs/wsj/model from examples/wsj/run.sh"
[ -z "$LM" ] || [ -s "$LM" ] || fail "LM=$LM does not exist: build one with ds2-build-lm (examples/wsj/run.sh makes" \
  "data/wsj/lm/words4.bin), or leave LM unset for greedy decoding only"

stage "[1/4] import CHiME-4 from $CORPUS (the 1-channel track)"
for s in $EVAL_SETS $DEV; do
  [ -s "$DATA/$s.jsonl" ] && continue
  "$BIN/ds2-prepare" chime4 --corpus_dir "$CORPUS" --out "$DATA"
  break
done
for s in $EVAL_SETS $DEV; do
  [ -s "$DATA/$s.jsonl" ] || fail "$DATA/$s.jsonl is missing or empty: $CORPUS lacks its annotations or audio" \
    "(what was skipped and why: $DATA/$s.report.json)"
done

decoders=(greedy)
if [ -n "$LM" ]; then
  decoders+=(lm)
  stage "[2/4] tune alpha and beta on $DEV by WER"
  # shellcheck disable=SC2086  # GRID is a list of flags
  fresh "$RUN/tune.json" || "$BIN/ds2-tune" --model_dir "$MODEL_DIR" --manifest "$DATA/$DEV.jsonl" --lm "$LM" \
    --beam_size "$BEAM" $GRID --out_json "$RUN/tune.json" --out_png "$RUN/tune.png"
else
  stage "[2/4] no LM (set LM= to tune alpha/beta on $DEV and decode with it)"
fi
best() { "$BIN/python" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$RUN/tune.json" "$1"; }

stage "[3/4] evaluate $EVAL_SETS per environment, ${decoders[*]}"
for s in $EVAL_SETS; do
  fresh "$RUN/${s}_greedy.json" || "$BIN/ds2-eval" --model_dir "$MODEL_DIR" --manifest "$DATA/$s.jsonl" \
    --group_by environment --report "$RUN/${s}_greedy.json"
  [ -z "$LM" ] || fresh "$RUN/${s}_lm.json" || "$BIN/ds2-eval" --model_dir "$MODEL_DIR" --manifest "$DATA/$s.jsonl" \
    --decoder beam --lm "$LM" --beam_size "$BEAM" --alpha "$(best best_alpha)" --beta "$(best best_beta)" \
    --group_by environment --report "$RUN/${s}_lm.json"
done

stage "[4/4] results per environment"
reports=()
for s in $EVAL_SETS; do for d in "${decoders[@]}"; do reports+=("$RUN/${s}_$d.json"); done; done
"$BIN/python" examples/results_table.py "${reports[@]}" --group_by environment --out "$RUN/results.md"
