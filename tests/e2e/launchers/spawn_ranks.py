#!/usr/bin/python3
"""A launcher that starts its ranks itself, as torchrun does with a static rendezvous: one
process per node, `--nproc_per_node` children, each with RANK (node_rank * nproc_per_node +
LOCAL_RANK), LOCAL_RANK, WORLD_SIZE (nnodes * nproc_per_node), GROUP_RANK, and MASTER_ADDR and
MASTER_PORT (torchrun's defaults, 127.0.0.1 and 29500, unless given). Debian's torchrun (torch
1.13 on Python 3.11) crashes before it starts a worker, so the tests of ranks_from = "torchrun"
use this one. It forwards SIGTERM and SIGUSR1 and exits with the first non-zero status.
With --sessions it does what torchrun 2.x does instead: each rank in a session of its own (out
of reach of signals to the launcher's group), SIGTERM forwarded, SIGUSR1 left to its default
action, which ends the launcher and leaves its ranks behind, and exit status 1 whatever a
failed rank's was.

    spawn_ranks.py --nproc_per_node N [--nnodes M --node_rank K --master_addr A
                   --master_port P] [--sessions] -- PROGRAM ARGS...
"""
import argparse
import os
import signal
import subprocess
import sys


def main():
    if "--" not in sys.argv:
        sys.exit("usage: spawn_ranks.py --nproc_per_node N [...] -- PROGRAM ARGS...")
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser(prog="spawn_ranks.py")
    parser.add_argument("--nproc_per_node", "--nproc", type=int, required=True)
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node_rank", type=int, default=0)
    parser.add_argument("--master_addr", default=os.environ.get("MASTER_ADDR", "127.0.0.1"))
    parser.add_argument("--master_port", default=os.environ.get("MASTER_PORT", "29500"))
    parser.add_argument("--sessions", action="store_true")
    args = parser.parse_args(sys.argv[1:split])
    command = sys.argv[split + 1:]
    if not command or not 0 <= args.node_rank < args.nnodes:
        sys.exit(f"spawn_ranks.py: node_rank {args.node_rank} of {args.nnodes} nodes, "
                 f"command {command}")
    children = []
    for local in range(args.nproc_per_node):
        env = dict(os.environ, LOCAL_RANK=str(local), GROUP_RANK=str(args.node_rank),
                   RANK=str(args.node_rank * args.nproc_per_node + local),
                   WORLD_SIZE=str(args.nnodes * args.nproc_per_node),
                   LOCAL_WORLD_SIZE=str(args.nproc_per_node),
                   MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port))
        children.append(subprocess.Popen(command, env=env, start_new_session=args.sessions))
    for sig in (signal.SIGTERM,) if args.sessions else (signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, lambda number, _: [c.send_signal(number) for c in children])
    codes = [child.wait() for child in children]
    failed = next((code if code > 0 else 128 - code for code in codes if code), 0)
    sys.exit(1 if args.sessions and failed else failed)


if __name__ == "__main__":
    main()
