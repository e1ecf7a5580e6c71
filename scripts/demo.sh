#!/usr/bin/env bash
# `make demo`: the golden-rule smoke gate on the bundled default recipe (it passes), then on a
# broken variant with a NaN planted in layer 1's attention at step 30 (it is caught); then
# `faultline isolate` localizes that fault, and `faultline repro` replays the finding.
set -uo pipefail
build=${1:-build}
work=$(mktemp -d "${TMPDIR:-/tmp}/faultline-demo.XXXXXX")
faultline=("$build/src/cli/faultline")
common=(--db "$work/faultline.db" --work-dir "$work/runs" --trainer "$build/src/trainer/faultline-train")

"${faultline[@]}" --version "${common[@]}"
echo
echo "== faultline smoke -c tiny: the installed recipe recipes/train/tiny.toml (store: $work/faultline.db)"
"${faultline[@]}" smoke -c tiny "${common[@]}"
echo "exit code $? (0: the gate passed)"
echo
echo "== the same recipe with fault.nan_step=30, fault.nan_layer=blocks.1.attn"
"${faultline[@]}" smoke -c tiny --set fault.nan_step=30 \
  --set fault.nan_layer=blocks.1.attn "${common[@]}"
status=$?
echo "exit code $status (1: the gate caught a failure)"
echo
echo "== faultline isolate on the broken variant: where does it break?"
"${faultline[@]}" isolate -c tiny --set fault.nan_step=30 \
  --set fault.nan_layer=blocks.1.attn "${common[@]}"
isolated=$?
echo "exit code $isolated (0: localized)"
echo
echo "== faultline repro F1: the finding replays bit for bit"
"${faultline[@]}" repro F1 "${common[@]}"
reproduced=$?
echo
"${faultline[@]}" runs --db "$work/faultline.db"
[ "$status" -eq 1 ] && [ "$isolated" -eq 0 ] && [ "$reproduced" -eq 0 ]
