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
# 4. the release table: the test split's FINAL half, every hop count, once;
# 5. the same KB without the 1-hop test answers' head start (`metaqa-matched`,
#    loaders/metaqa_matched.py): 1-hop and every hop count on the test split's working half;
# 6. questions as people type them: `metaqa-plain` (MetaQA without its [brackets], linked
#    from the text) and the real WebQSP questions of ../shared/data/webqsp_names (split
#    70/10/20 by a hash of the id; a third of train held out for calibration).
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
# (-a: when stderr is a file, tee must append to it, not truncate it)
declare -A MODEL
MODEL[mixed]=$($CPR train metaqa | tee -a /dev/stderr | model_of)
for h in 1 2 3; do MODEL[$h]=$($CPR train metaqa --hops "$h" | tee -a /dev/stderr | model_of); done

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
say "the matched KB (metaqa-matched): 1-hop and every hop count"
rm -rf "$OUT/metaqa-matched-1hop" "$OUT/metaqa-matched-mixed"
$CPR ingest metaqa-matched
MATCHED_MIXED=$($CPR train metaqa-matched | tee -a /dev/stderr | model_of)
MATCHED_1=$($CPR train metaqa-matched --hops 1 | tee -a /dev/stderr | model_of)
$CPR eval metaqa-matched --hops 1 --model "$MATCHED_1" --methods cpr --no-hop-level \
  --max-questions "$SAMPLE" --out "$OUT/metaqa-matched-1hop"
$CPR eval metaqa-matched --model "$MATCHED_MIXED" --methods cpr --no-hop-level \
  --max-questions "$MIXED_SAMPLE" --out "$OUT/metaqa-matched-mixed"

say "plain questions: metaqa-plain, text linking"
rm -rf "$OUT/metaqa-plain-mixed" "$OUT"/webqsp-names-*
$CPR ingest metaqa-plain
PLAIN=$($CPR train metaqa-plain | tee -a /dev/stderr | model_of)
$CPR eval metaqa-plain --model "$PLAIN" --methods cpr,abl2 --no-hop-level --linking text \
  --max-questions "$MIXED_SAMPLE" --out "$OUT/metaqa-plain-mixed"
WQ=${WEBQSP_NAMES:-../shared/data/webqsp_names}
if [ -f "$WQ/questions.jsonl" ]; then
  say "plain questions: webqsp-names"
  $CPR ingest webqsp-names --triples "$WQ/triples.tsv" --questions "$WQ/questions.jsonl" \
    --hash-split 70,10,20
  WQM=$($CPR train webqsp-names --cal-share 0.3 | tee -a /dev/stderr | model_of)
  for half in test final; do  # 175 test questions: both halves of the hash, reported apart
    $CPR eval webqsp-names --model "$WQM" --methods cpr,abl2 --no-hop-level --linking text \
      --split "$half" --out "$OUT/webqsp-names-$half"
  done
fi

say "calibrate the every-hop model, so that \`cpr ask\` answers with it"
$CPR calibrate metaqa --model "${MODEL[mixed]}"
say "done in $(( $(date +%s) - started )) s"
