#!/usr/bin/env bash
# Re-check the training defaults on the inner dev split alone (its own calibration half
# and measurement half; the calibration share is never looked at), for the model of every
# hop count: the anchor term (--anchor 1 vs 0) and CPR's extra negatives (TreeG's wrong
# candidates and random walks vs PUCT pairs alone). Each variant is a model of its own; its
# inner-dev report goes to OUT/metaqa-mixed-innerdev-<variant>. The default model's report
# is the one `make results` writes (OUT/metaqa-mixed-innerdev).
#
#   bash experiments/recheck_defaults.sh [OUT]
set -euo pipefail
OUT=${1:-docs/results}
CPR=${CPR:-.venv/bin/cpr}
started=$(date +%s)
for variant in "anchor0:--anchor 0" \
  "puct-pairs-only:--no-retrieval-negatives --no-random-negatives"; do
  name=${variant%%:*}
  args=${variant#*:}
  echo "== $name ($args), +$(( $(date +%s) - started )) s"
  # shellcheck disable=SC2086  # the variant's flags are words
  model=$($CPR train metaqa $args | sed -n 's/^model \(rcv-[0-9a-f]*\) saved.*/\1/p')
  $CPR eval metaqa --model "$model" --split inner-dev --methods cpr --no-hop-level \
    --out "$OUT/metaqa-mixed-innerdev-$name"
done
echo "== done in $(( $(date +%s) - started )) s"
