#!/usr/bin/env bash
# `make demo`: trains the default recipe with the bundled trainer and prints its loss curve.
set -euo pipefail
build=${1:-build}
out=$(mktemp -d "${TMPDIR:-/tmp}/faultline-demo.XXXXXX")
echo "== faultline-train on recipes/train/tiny.toml (output in $out)"
"$build/src/trainer/faultline-train" -c recipes/train/tiny.toml --out "$out"
