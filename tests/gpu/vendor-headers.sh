#!/usr/bin/env bash
# Copies the header-only libraries faultline-train needs (fmt in header-only mode, nlohmann-json,
# toml++, CLI11) from this machine's /usr/include into third_party/gpu-include (git-ignored, about
# 3 MB), so a GPU machine without those packages can build the trainer (tests/gpu/standalone).
# Carry third_party/gpu-include with the working tree to that machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=$root/third_party/gpu-include
mkdir -p "$dest"
for dir in fmt nlohmann toml++ CLI; do
  if [[ -d /usr/include/$dir ]]; then
    rm -rf "${dest:?}/$dir"
    cp -r "/usr/include/$dir" "$dest/$dir"
  else
    echo "vendor-headers: /usr/include/$dir missing (install scripts/install-deps.sh's packages)" >&2
    exit 1
  fi
done
du -sh "$dest"
