#!/usr/bin/env bash
# Fetches the charting library the HTML report inlines (uPlot, MIT) from the npm registry into
# .deps/ (ignored by git): one pinned version, its tarball checked against a pinned sha512 before
# anything is unpacked. CMake reads the files from there at configure time (docs/report.md).
# Fast and silent when already present. Usage: fetch-uplot.sh [DEST_DIR]
set -euo pipefail
version=1.6.32
integrity="sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.deps/uplot-$version}"
if [ -f "$dest/uPlot.iife.min.js" ] && [ -f "$dest/uPlot.min.css" ]; then exit 0; fi
command -v npm >/dev/null || { echo "fetch-uplot: npm is missing (apt-get install npm)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "fetch-uplot: fetching uplot@$version from the npm registry" >&2
(cd "$work" && npm pack --silent "uplot@$version" >/dev/null)
tarball="$work/uplot-$version.tgz"
actual="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$actual" != "$integrity" ]; then
  echo "fetch-uplot: uplot-$version.tgz has $actual, expected $integrity; refusing it" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/dist/uPlot.iife.min.js package/dist/uPlot.min.css package/LICENSE
mkdir -p "$dest"
cp "$work/package/dist/uPlot.iife.min.js" "$work/package/dist/uPlot.min.css" "$dest/"
cp "$work/package/LICENSE" "$dest/LICENSE"
