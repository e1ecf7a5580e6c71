#!/usr/bin/env bash
# Runs the Python helper's suite on Debian sid's torch and Python (2.14 and 3.14 at the time of
# writing) in a chroot: users run a current torch, CI has bookworm's 1.13 on Python 3.11.
#
#   bash tests/python/current_torch.sh        (make python-compat; root, Debian's archive)
#
# The chroot is made once with debootstrap in ~/.cache/faultline/python-compat/sid (about 1.7 GB;
# delete it to take sid's newest packages); the repository is bind-mounted at its own path.
# Not part of `make test`: it depends on what sid holds that day. Exit status: the suite's.
set -euo pipefail

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
  debootstrap --variant=minbase --include=python3,python3-torch,python3-numpy \
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
chroot "$sid" sh -c "cd '$root/tests/python' && python3 -m unittest test_faultline_probe"
