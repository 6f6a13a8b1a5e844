#!/usr/bin/env bash
# LibriSpeech end to end: (download) -> import every split present -> vocabulary -> validation -> shards ->
# statistics -> the LM -> train (en.flags) -> alpha/beta tuned on dev-clean -> dev-clean, dev-other, test-clean and
# test-other evaluated greedy and with the LM, per speaker -> export -> one results table.
#
#   examples/librispeech/run.sh /data/librispeech              # holds LibriSpeech/ and, beside it, the LM files
#   examples/librispeech/run.sh --download /data/librispeech   # fetches them there first (openslr 12 and 11)
#
# Each stage skips when its output exists, so a re-run resumes (training resumes from its checkpoint).
# Overrides (environment):
#   SUBSET       960 (train-clean-100 + train-clean-360 + train-other-500), 460 (the first two) or 100
#   LM           official: LM_ARPA, one of openslr's ARPA models, lower-cased and made binary;
#                build: an LM_ORDER-gram built with ds2-build-lm from librispeech-lm-norm.txt.gz
#   LM_ARPA      4-gram.arpa.gz (or 3-gram.pruned.1e-7.arpa.gz, 3-gram.pruned.3e-7.arpa.gz, 3-gram.arpa.gz)
#   LM_ORDER     4, LM_PRUNE 0,0,1,1 (lmplz --prune; empty: none), LM_MEMORY 20% (lmplz/build_binary -S)
#   DATA         data/librispeech (manifests, vocabulary, shards, statistics, LM)
#   RUN          runs/librispeech (checkpoints, model, TensorBoard, tuning, reports, export, results)
#   TRAIN_FLAGS  more ds2-train flags, after en.flags (e.g. "--epochs=30 --batch_frames=32000")
#   BEAM         500 (evaluation and export), TUNE_BEAM 100, GRID (ds2-tune's grid flags)
#   NUM_SHARDS   128 per training split, WORKERS 4 (import threads), BIN .venv/bin
#   MIRROR       https://www.openslr.org (--download; or https://openslr.elda.org, https://us.openslr.org)
#   CHECKSUMS    a JSON table {file: {md5, sha256}} replacing the published checksums of those files (--download)
#   STOP_AFTER   stop after this stage (e.g. 1: only download; 5: data and LM, no training)
# See README.md next to this file for the corpus, the disk, the time each stage takes and what to expect.
set -euo pipefail
usage="usage: $0 [--download] DIR   (DIR holds LibriSpeech/ and the LM files; --download fetches them there)"
DOWNLOAD=0
if [ "${1:-}" = --download ]; then DOWNLOAD=1; shift; fi
[ $# -eq 1 ] || { echo "$usage" >&2; exit 2; }
CORPUS=$1
SUBSET=${SUBSET:-960}
LM=${LM:-official}
LM_ARPA=${LM_ARPA:-4-gram.arpa.gz}
LM_ORDER=${LM_ORDER:-4}
LM_PRUNE=${LM_PRUNE-0,0,1,1}
LM_MEMORY=${LM_MEMORY:-20%}
DATA=${DATA:-data/librispeech}
RUN=${RUN:-runs/librispeech}
TRAIN_FLAGS=${TRAIN_FLAGS:-}
BEAM=${BEAM:-500}
TUNE_BEAM=${TUNE_BEAM:-100}
# 6 x 6 points on 32 batches of 16 random dev-clean utterances; narrow it around the best and tune again.
GRID=${GRID:---alpha_from 0 --alpha_to 2.5 --num_alphas 6 --beta_from 0 --beta_to 5 --num_betas 6 --num_batches 32}
NUM_SHARDS=${NUM_SHARDS:-128}
WORKERS=${WORKERS:-4}
BIN=${BIN:-.venv/bin}
MIRROR=${MIRROR:-https://www.openslr.org}
CHECKSUMS=${CHECKSUMS:-}
STOP_AFTER=${STOP_AFTER:-10}
N=10
stage() { printf '\n==> [%s/%s] %s\n' "$1" "$N" "$2"; }
done_after() { if [ "$1" -ge "$STOP_AFTER" ]; then echo "stopped after stage $1 (STOP_AFTER=$STOP_AFTER)"; exit 0; fi; }
die() { echo "$0: error: $*" >&2; exit 1; }
join() { local IFS=,; echo "$*"; }

case $SUBSET in
  100) TRAIN=(train-clean-100) ;;
  460) TRAIN=(train-clean-100 train-clean-360) ;;
  960) TRAIN=(train-clean-100 train-clean-360 train-other-500) ;;
  *) die "SUBSET must be 100, 460 or 960 (hours of training audio), got '$SUBSET'" ;;
esac
EVAL=(dev-clean dev-other test-clean test-other)
case $LM in
  official) LM_FILE=$LM_ARPA; LM_OUT=$DATA/lm/${LM_ARPA%.arpa.gz} ;;
  build) LM_FILE=librispeech-lm-norm.txt.gz; LM_OUT=$DATA/lm/lm-norm-${LM_ORDER}gram ;;
  *) die "LM must be official (openslr's ARPA model LM_ARPA) or build (ds2-build-lm on librispeech-lm-norm.txt.gz), got '$LM'" ;;
esac
# The model validation judges CTC fit for: the last --model of TRAIN_FLAGS, else en.flags'.
MODEL=$(printf '%s\n' "--model=$(sed -n 's/^--model=//p' examples/librispeech/en.flags)" $TRAIN_FLAGS \
  | sed -n 's/^--model=//p' | tail -n 1)

if [ $DOWNLOAD = 1 ]; then
  stage 1 "download ${TRAIN[*]} ${EVAL[*]} and $LM_FILE into $CORPUS from $MIRROR (checksums checked, resumable)"
  "$BIN/ds2-prepare" download librispeech --out "$CORPUS" --splits "$(join "${TRAIN[@]}" "${EVAL[@]}")" \
    --lm_files "$LM_FILE" --mirror "$MIRROR" ${CHECKSUMS:+--checksums "$CHECKSUMS"}
else
  stage 1 "the corpus in $CORPUS (no download)"
  [ -d "$CORPUS/LibriSpeech" ] || die "$CORPUS/LibriSpeech is not there: unpack openslr's tarballs in $CORPUS (or run $0 --download $CORPUS)"
fi
done_after 1

stage 2 "import every split present (FLAC used in place; skipped lines listed in $DATA/<split>.report.json)"
present=()
for s in "${TRAIN[@]}" "${EVAL[@]}"; do
  if [ -d "$CORPUS/LibriSpeech/$s" ]; then present+=("$s"); else echo "$s: not in $CORPUS/LibriSpeech, skipped"; fi
done
for s in "${present[@]}"; do
  if [ ! -e "$DATA/$s.jsonl" ]; then
    "$BIN/ds2-prepare" librispeech --corpus_dir "$CORPUS" --out "$DATA" --num_workers "$WORKERS"
    break
  fi
done
for s in "${TRAIN[@]}" dev-clean; do
  [ -e "$DATA/$s.jsonl" ] || die "SUBSET=$SUBSET trains on ${TRAIN[*]} and tunes on dev-clean, but $s is not in $CORPUS/LibriSpeech: unpack it there (or run $0 --download $CORPUS), or choose a smaller SUBSET"
done
done_after 2

stage 3 "character vocabulary from ${TRAIN[*]}, validation"
manifests=()
for s in "${TRAIN[@]}"; do manifests+=("$DATA/$s.jsonl"); done
[ -s "$DATA/vocab.txt" ] || "$BIN/ds2-build-vocab" --manifest_paths "$(join "${manifests[@]}")" --out "$DATA/vocab.txt"
# Training's lines: text within the vocabulary, CTC fit at the model's stride. Headers only (--nodecode): make-shards
# decodes every file next and skips, and lists, any it can't. dev and test are scored whole (their .jsonl).
for s in "${TRAIN[@]}" dev-clean; do
  [ -s "$DATA/$s.clean.jsonl" ] || "$BIN/ds2-prepare" validate "$DATA/$s.jsonl" --vocab "$DATA/vocab.txt" \
    --model "$MODEL" --nodecode --write_clean "$DATA/$s.clean.jsonl"
done
done_after 3

stage 4 "shards (int16 PCM) and feature statistics"
shards=()
for s in "${TRAIN[@]}" dev-clean; do
  [ -s "$DATA/shards/$s/index.json" ] || "$BIN/ds2-make-shards" --manifest "$DATA/$s.clean.jsonl" \
    --vocab "$DATA/vocab.txt" --out "$DATA/shards/$s" --num_shards "$([ $s = dev-clean ] && echo 4 || echo "$NUM_SHARDS")"
  [ $s = dev-clean ] || shards+=("$DATA/shards/$s")
done
clean=()
for s in "${TRAIN[@]}"; do clean+=("$DATA/$s.clean.jsonl"); done
[ -s "$DATA/mean_std.npz" ] || "$BIN/ds2-compute-stats" --manifest_paths "$(join "${clean[@]}")" --out "$DATA/mean_std.npz"
done_after 4

if [ $LM = official ]; then
  stage 5 "the LM: $LM_ARPA (openslr 11), lower-cased, binary ($LM_OUT.bin)"
  if [ ! -s "$LM_OUT.bin" ]; then
    [ -s "$CORPUS/$LM_ARPA" ] || die "$CORPUS/$LM_ARPA is missing: download it from $MIRROR/resources/11/ (or run $0 --download $CORPUS)"
    "$BIN/ds2-build-lm" --arpa "$CORPUS/$LM_ARPA" --lowercase --out "$LM_OUT" --nokeep_arpa --memory "$LM_MEMORY"
  fi
else
  stage 5 "the LM: a $LM_ORDER-gram of librispeech-lm-norm.txt.gz ($LM_OUT.bin)"
  if [ ! -s "$LM_OUT.bin" ]; then
    [ -s "$CORPUS/$LM_FILE" ] || die "$CORPUS/$LM_FILE is missing: download it from $MIRROR/resources/11/ (or run $0 --download $CORPUS)"
    # The text is normalized already, in capitals: lower-cased only (normalizing its 40 M lines again takes hours).
    "$BIN/ds2-build-lm" --text_paths "$CORPUS/$LM_FILE" --nonormalize --lowercase --order "$LM_ORDER" \
      ${LM_PRUNE:+--prune "$LM_PRUNE"} --out "$LM_OUT" --nokeep_arpa --memory "$LM_MEMORY"
  fi
fi
done_after 5

stage 6 "train on ${TRAIN[*]} (en.flags; TensorBoard: tensorboard --logdir $RUN/tensorboard)"
# shellcheck disable=SC2086  # TRAIN_FLAGS is a list of flags
"$BIN/ds2-train" --flagfile=examples/librispeech/en.flags --workdir="$RUN" --train_shards="$(join "${shards[@]}")" \
  --dev_shards="$DATA/shards/dev-clean" --vocab="$DATA/vocab.txt" --mean_std="$DATA/mean_std.npz" $TRAIN_FLAGS
done_after 6

stage 7 "tune alpha and beta on dev-clean (beam $TUNE_BEAM)"
# shellcheck disable=SC2086  # GRID is a list of flags
[ -s "$RUN/tune.json" ] || "$BIN/ds2-tune" --model_dir "$RUN/model" --manifest "$DATA/dev-clean.jsonl" \
  --lm "$LM_OUT.bin" --beam_size "$TUNE_BEAM" $GRID --out_json "$RUN/tune.json" --out_png "$RUN/tune.png"
best() { "$BIN/python" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$RUN/tune.json" "$1"; }
done_after 7

stage 8 "evaluate ${EVAL[*]}, greedy and with the LM (beam $BEAM), per speaker"
for s in "${EVAL[@]}"; do
  if [ ! -e "$DATA/$s.jsonl" ]; then echo "$s: not in the corpus, not evaluated"; continue; fi
  [ -s "$RUN/eval/${s}_greedy.json" ] || "$BIN/ds2-eval" --model_dir "$RUN/model" --manifest "$DATA/$s.jsonl" \
    --group_by speaker --report "$RUN/eval/${s}_greedy.json"
  [ -s "$RUN/eval/${s}_lm.json" ] || "$BIN/ds2-eval" --model_dir "$RUN/model" --manifest "$DATA/$s.jsonl" \
    --decoder beam --lm "$LM_OUT.bin" --beam_size "$BEAM" --alpha "$(best best_alpha)" --beta "$(best best_beta)" \
    --group_by speaker --report "$RUN/eval/${s}_lm.json"
done
done_after 8

stage 9 "export for TF Serving, with the LM and the tuned alpha and beta ($RUN/export/ds2)"
ls "$RUN"/export/ds2/*/saved_model.pb > /dev/null 2>&1 || "$BIN/ds2-export" --model_dir "$RUN/model" \
  --export_dir "$RUN/export" --lm "$LM_OUT.bin" --beam_size "$BEAM" --alpha "$(best best_alpha)" \
  --beta "$(best best_beta)"
done_after 9

stage 10 "results"
"$BIN/python" examples/librispeech/results.py --run "$RUN" --lm "$LM_OUT.bin"
