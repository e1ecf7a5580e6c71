#!/usr/bin/env bash
# Installs the Debian packages faultline builds and runs with, and the npm package the HTML report
# inlines; fast and silent when all are present.
set -euo pipefail
packages=(
  build-essential cmake ninja-build git
  libtorch-dev libgloo-dev libopenblas0-openmp libdnnl-dev
  libcli11-dev libfmt-dev libboost1.81-dev libtomlplusplus-dev nlohmann-json3-dev
  libsqlite3-dev libgtest-dev libyaml-cpp-dev
  python3-torch
  chromium
  slurmctld slurmd slurm-client munge
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm only fetches uPlot; any npm will do (a Node.js distribution's own npm is not a dpkg package).
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The report's charting library, from the npm registry (pinned, checked; docs/report.md).
bash "$(dirname "${BASH_SOURCE[0]}")/fetch-uplot.sh"
