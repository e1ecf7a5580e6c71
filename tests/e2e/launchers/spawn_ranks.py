#!/usr/bin/python3
"""A launcher that starts its ranks itself, as torchrun does: one process, N children, each with
RANK, LOCAL_RANK, WORLD_SIZE (and MASTER_ADDR/MASTER_PORT passed on). Debian's torchrun (torch
1.13 on Python 3.11) crashes before it starts a worker, so the tests of ranks_from = "torchrun"
use this one. It forwards SIGTERM and SIGUSR1 and exits with the first non-zero status.

    spawn_ranks.py --nproc N -- PROGRAM ARGS...
"""
import os
import signal
import subprocess
import sys


def main():
    args = sys.argv[1:]
    if len(args) < 4 or args[0] != "--nproc" or args[2] != "--":
        sys.exit("usage: spawn_ranks.py --nproc N -- PROGRAM ARGS...")
    nproc, command = int(args[1]), args[3:]
    children = []
    for rank in range(nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc))
        children.append(subprocess.Popen(command, env=env))
    for sig in (signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, lambda number, _: [c.send_signal(number) for c in children])
    codes = [child.wait() for child in children]
    sys.exit(next((code if code > 0 else 128 - code for code in codes if code), 0))


if __name__ == "__main__":
    main()
