#!/usr/bin/env bash
# `make results`: every table under docs/results with the defaults as they ship.
#
#   bash bench/results.sh [OUT]          (OUT default docs/results)
#
# What runs, in order (each report names its model ids, commit and command in its notes):
# 1. the models: one for every hop count (the default) and one per hop count, all CPR with
#    the shipped settings; `cpr eval` trains Abl.2 on each model's exact question shares;
# 2. inner dev (where defaults are compared): training questions the models never saw,
#    halved into calibration and measurement; the calibration share is not used;
# 3. the test split's WORKING half (seeded samples where a whole split would not fit the
#    hour), where variants are reported, never chosen;
# 4. the release table: the test split's FINAL half, every hop count, once.
set -euo pipefail
OUT=${1:-docs/results}
CPR=${CPR:-.venv/bin/cpr}
SAMPLE=${RESULTS_SAMPLE:-3000}     # questions per fixed-hop test report (seeded)
MIXED_SAMPLE=${RESULTS_MIXED_SAMPLE:-6000}
started=$(date +%s)
say() { echo "== $(date -u +%H:%M:%S) (+$(( $(date +%s) - started )) s) $*"; }

for d in 1hop 2hop 3hop mixed; do rm -rf "$OUT/metaqa-$d" "$OUT/metaqa-$d-innerdev"; done
rm -rf "$OUT/metaqa-mixed-final"
mkdir -p "$OUT"
say "ingest"
$CPR ingest metaqa
say "models"
model_of() { sed -n 's/^model \(rcv-[0-9a-f]*\) saved.*/\1/p'; }
declare -A MODEL
MODEL[mixed]=$($CPR train metaqa | tee /dev/stderr | model_of)
for h in 1 2 3; do MODEL[$h]=$($CPR train metaqa --hops "$h" | tee /dev/stderr | model_of); done

say "inner dev"
for h in 1 2 3; do
  $CPR eval metaqa --hops "$h" --model "${MODEL[$h]}" --split inner-dev --methods cpr,abl2 \
    --no-hop-level --out "$OUT/metaqa-${h}hop-innerdev"
done
$CPR eval metaqa --model "${MODEL[mixed]}" --split inner-dev --methods cpr,abl2 --no-hop-level \
  --out "$OUT/metaqa-mixed-innerdev"

say "test, working half"
for h in 1 2 3; do
  $CPR eval metaqa --hops "$h" --model "${MODEL[$h]}" --methods cpr,abl1,abl2 \
    --max-questions "$SAMPLE" --hop-level-questions 500 --out "$OUT/metaqa-${h}hop"
done
$CPR eval metaqa --model "${MODEL[mixed]}" --methods cpr,abl2 --max-questions "$MIXED_SAMPLE" \
  --hop-level-questions 500 --out "$OUT/metaqa-mixed"

say "release table: the test split's final half"
$CPR eval metaqa --model "${MODEL[mixed]}" --split final --methods cpr,abl2 --no-hop-level \
  --out "$OUT/metaqa-mixed-final"
say "calibrate the every-hop model, so that \`cpr ask\` answers with it"
$CPR calibrate metaqa --model "${MODEL[mixed]}"
say "done in $(( $(date +%s) - started )) s"
