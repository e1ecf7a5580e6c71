#!/usr/bin/env bash
# `make demo`: the golden-rule smoke gate on the bundled default recipe (it passes), then on a
# broken variant with a NaN planted in layer 1's attention at step 30 (it is caught); then
# `faultline isolate` localizes that fault, and `faultline repro` replays the finding; then a
# failing run is isolated from its own checkpoints (`isolate --run`).
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
echo "== a real failing run (NaN at step 83, checkpoints every 20), isolated from its own checkpoints"
run=$("${faultline[@]}" train -c tiny --set fault.nan_step=83 --set fault.nan_layer=blocks.0.mlp \
  --set train.checkpoint_every=20 --json --quiet "${common[@]}" | grep -o '"run_id":[0-9]*' | cut -d: -f2)
"${faultline[@]}" isolate --run "$run" "${common[@]}"
from_run=$?
echo "exit code $from_run (0: localized, replaying steps 81..83 only)"
echo
"${faultline[@]}" runs --db "$work/faultline.db"
[ "$status" -eq 1 ] && [ "$isolated" -eq 0 ] && [ "$reproduced" -eq 0 ] && [ "$from_run" -eq 0 ]
