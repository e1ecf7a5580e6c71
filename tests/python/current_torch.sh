#!/usr/bin/env bash
# Runs the Python helper's suite on Debian sid's torch and Python (2.14 and 3.14 at the time of
# writing) in a chroot: users run a current torch, CI has bookworm's 1.13 on Python 3.11.
#
#   bash tests/python/current_torch.sh              (make python-compat; root, Debian's archive)
#   bash tests/python/current_torch.sh e2e [FILTER]  the ExternalTrainer e2e tests (a GoogleTest
#                                                   filter, default all) of build/ in the chroot
#   bash tests/python/current_torch.sh torchrun     build/'s faultline with sid's own torchrun
#                                                   (ranks_from = "torchrun"): a run, a hang, a
#                                                   crash, and no rank left running
#
# The chroot is made once with debootstrap in ~/.cache/faultline/python-compat/sid (about 1.7 GB;
# delete it to take sid's newest packages); the repository is bind-mounted at its own path.
# `e2e` runs this machine's build (bookworm's binaries) there: the libraries sid lacks are copied
# into the chroot's /opt/bookworm-libs, and faultline-train (LibTorch 1.13) gets its own set.
# Not part of `make test`: it depends on what sid holds that day. Exit status: the suite's.
set -euo pipefail
mode=${1:-suite}
filter=${2:-ExternalTrainer.*}

root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${FAULTLINE_CACHE:-$HOME/.cache/faultline}/python-compat
sid=$cache/sid
archive=http://deb.debian.org/debian

if [ "$(id -u)" != 0 ]; then
  echo "current_torch.sh: needs root (debootstrap, chroot and bind mounts); run it with sudo" >&2
  exit 2
fi
if ! command -v debootstrap > /dev/null; then
  apt-get install -y -qq debootstrap > /dev/null
fi
if [ ! -x "$sid/usr/bin/python3" ] || ! [ -e "$sid/.complete" ]; then
  rm -rf "$sid"
  mkdir -p "$cache"
  echo "== debootstrap sid with python3-torch into $sid (a few minutes)"
  debootstrap --variant=minbase --include=python3,python3-torch,python3-numpy,git \
    sid "$sid" "$archive" > "$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
  touch "$sid/.complete"
fi

mounted=()
rooted_in_chroot() {  # pids of processes whose root is the chroot (a test's leftover child)
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2> /dev/null)" = "$sid" ] && echo "${p#/proc/}"
  done
  return 0
}
unmount() {
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ -z "$(rooted_in_chroot)" ] && break
    sleep 1
  done
  for pid in $(rooted_in_chroot); do kill -9 "$pid" 2> /dev/null || true; done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2> /dev/null || umount -l "${mounted[i]}" || true
  done
}
trap unmount EXIT
bind() {  # bind <source> <target inside the chroot>
  mkdir -p "$sid$2"
  mount --bind "$1" "$sid$2"
  mounted+=("$sid$2")
}
mkdir -p "$sid/proc"
mount -t proc proc "$sid/proc"
mounted+=("$sid/proc")
bind /dev /dev
bind /dev/shm /dev/shm # DataLoader workers hand batches over in shared memory
bind "$root" "$root"

chroot "$sid" python3 -c 'import sys, torch
print(f"== torch {torch.__version__} on Python {sys.version.split()[0]} (Debian sid)")'
if [ "$mode" = suite ]; then
  chroot "$sid" sh -c "cd '$root/tests/python' && python3 -m unittest discover -s ."
  exit
fi
case "$mode" in e2e | torchrun) ;; *)
  echo "current_torch.sh: unknown mode '$mode'; suite, e2e or torchrun" >&2
  exit 2
  ;;
esac

# Bookworm's shared libraries that sid lacks (by soname; never the C library or libstdc++, whose
# sid versions serve older binaries): one set for faultline and the tests, and one that only
# faultline-train sees, since LibTorch 1.13's (libonnx, libgloo, ...) would break sid's torch.
build=$root/build
cli=$build/src/cli/faultline
train=$build/src/trainer/faultline-train
tests=()  # the ExternalTrainer binaries, not CTest's files beside them
if [ "$mode" = e2e ]; then
  for binary in "$build"/tests/e2e/test_external_*; do
    case "$binary" in *.cmake) ;; *) tests+=("$binary") ;; esac
  done
fi
[ "$mode" = torchrun ] || [ ${#tests[@]} -gt 0 ] ||
  { echo "current_torch.sh: no test_external_* in $build/tests/e2e" >&2; exit 2; }
for binary in "$cli" "$train" ${tests[@]+"${tests[@]}"}; do
  [ -x "$binary" ] || { echo "current_torch.sh: $binary is not built; run make build" >&2; exit 2; }
done
libs=$sid/opt/bookworm-libs
rm -rf "$libs" && mkdir -p "$libs/all" "$libs/train"
copy_missing() {  # copy_missing <folder> <binary>...: what sid lacks of their libraries
  local folder=$1
  shift
  ldd "$@" | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    name=$(basename "$lib")
    case "$name" in libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | libresolv.so.* | \
      librt.so.* | libstdc++.so.* | libgcc_s.so.*) continue ;; esac
    [ -e "$libs/all/$name" ] && continue
    [ "$folder" = "$libs/all" ] && [ -e "$sid/usr/lib/x86_64-linux-gnu/$name" ] && continue
    cp -L "$lib" "$folder/"
  done
}
copy_missing "$libs/all" "$cli" ${tests[@]+"${tests[@]}"}
copy_missing "$libs/train" "$train"
printf '#!/bin/sh\nLD_LIBRARY_PATH=/opt/bookworm-libs/train:/opt/bookworm-libs/all exec %s "$@"\n' \
  "$train" > "$sid/opt/faultline-train"
chmod +x "$sid/opt/faultline-train"
if [ "$mode" = torchrun ]; then
  # examples/pytorch/train.toml started by torchrun, one per node (here one), in a folder of
  # build/ (the chroot sees the repository only).
  work=$build/torchrun-check
  rm -rf "$work" && mkdir -p "$work"
  sed -e 's|^command = \["/usr/bin/python3", "train.py",|command = ["torchrun", "--nnodes", "{nnodes}", "--nproc_per_node", "{nproc_per_node}", "--node_rank", "{node_rank}", "--master_addr", "{master_addr}", "--master_port", "{master_port}", "train.py",|' \
    -e "s|^\[trainer\]\$|[trainer]\nranks_from = \"torchrun\"\nworkdir = \"$root/examples/pytorch\"|" \
    "$root/examples/pytorch/train.toml" > "$work/torchrun.toml"
  in_chroot() {
    chroot "$sid" sh -c "cd '$work' && LD_LIBRARY_PATH=/opt/bookworm-libs/all \
      PYTHONPATH='$root/tests/python/torchrun_site' $cli $* --json 2> /dev/null"
  }
  check() {  # check <what> <python expression on the run's JSON, d> <faultline arguments>
    local what=$1 test=$2
    shift 2
    local out
    out=$(in_chroot "$@" || true)
    if python3 -c "import json, sys; d = json.loads(sys.argv[1]); sys.exit(0 if $test else 1)" \
      "$out"; then
      echo "ok    $what"
    else
      echo "FAIL  $what: ${out:0:2000}"
      status=1
    fi
  }
  status=0
  runs="train -c torchrun.toml --ranks 2 --set train.steps=10"
  check "a healthy run of 2 ranks" 'd["verdict"] == "pass" and d["steps"] == 10' "$runs"
  check "rank 1's hang, named with its stack" \
    '[(f["kind"], f["step"], f["rank"]) for f in d["failures"]] == [("hang", 5, 1)] and "in at_step_start" in d["failures"][0]["detail"]' \
    "$runs --step-timeout 5 --set fault.hang_rank=1 --set fault.hang_step=5"
  check "a NaN both ranks halt on: nonfinite, not a crash of their launcher (exit 1)" \
    '[f["kind"] for f in d["failures"] if f.get("severity") != "warning"] == ["nonfinite"]' \
    "$runs --set fault.nan_step=5 --set fault.nan_layer=blocks.0.attn"
  check "rank 1's SIGSEGV, named" \
    '[(f["kind"], f["step"], f["rank"]) for f in d["failures"] if f.get("severity") != "warning"] == [("crash", 5, 1)]' \
    "$runs --set fault.crash_rank=1 --set fault.crash_step=5"
  sleep 1
  left=$({ grep -l "$work" /proc/[0-9]*/environ 2> /dev/null || true; } | wc -l)
  if [ "$left" = 0 ]; then echo "ok    no rank left running"; else echo "FAIL  $left processes left running"; status=1; fi
  exit $status
fi
status=0
for binary in "${tests[@]}"; do
  chroot "$sid" sh -c "cd '$build/tests/e2e' && LD_LIBRARY_PATH=/opt/bookworm-libs/all \
    FAULTLINE_TRAIN=/opt/faultline-train ./$(basename "$binary") --gtest_filter='$filter'" ||
    status=1
done
exit $status
