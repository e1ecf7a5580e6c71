#!/usr/bin/env bash
# Installs the Debian packages faultline builds and runs with; fast and silent when all are present.
set -euo pipefail
packages=(
  build-essential cmake ninja-build git
  libtorch-dev libgloo-dev libopenblas0-openmp
  libcli11-dev libfmt-dev libboost1.81-dev libtomlplusplus-dev nlohmann-json3-dev
  libsqlite3-dev libgtest-dev libyaml-cpp-dev
  python3-torch
  slurmctld slurmd slurm-client munge
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
