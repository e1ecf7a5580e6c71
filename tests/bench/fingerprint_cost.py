#!/usr/bin/python3
"""What the helper's fingerprint of a model's parameters costs (docs/external-trainers.md, "The
helper's cost"): seconds per fingerprint and the memory it takes beyond the model, for a model of
--params parameters in --tensors equal tensors. Each repeat runs in a fresh process, so its peak
resident size (ru_maxrss) less the size after making the model is the fingerprint's own; the
first call and a second one (after anything cached) are timed. With --device cuda the model is on
the GPU and the extra memory is the device's (peak allocated less allocated before).

    /usr/bin/python3 tests/bench/fingerprint_cost.py [--params 100000000] [--tensors 100]
                                                     [--dtype float32|bfloat16] [--repeats 3]
                                                     [--device cpu|cuda]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "probes", "python"))


def one(params, tensors, dtype, device):
    """In a fresh process: seconds of a first and a later fingerprint, and their extra memory."""
    import torch
    import faultline_probe as fp

    torch.set_num_threads(1)
    size = params // tensors
    model = [torch.randn(size, device=device).to(getattr(torch, dtype)) for _ in range(tensors)]
    fp.fingerprint([torch.ones(4, device=device)])  # imports and first-call set-up
    cuda = device == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        allocated = torch.cuda.memory_allocated()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(2):  # the first and a later one (anything cached is then in place)
        t0 = time.perf_counter()
        fp.fingerprint(model)  # ends in a host sync (.item(), .tolist())
        times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    extra = ((torch.cuda.max_memory_allocated() - allocated) / 2**20 if cuda
             else (peak - before) / 1024)
    return {"first": times[0], "later": times[1], "extra_mib": extra,
            "model_mib": params * model[0].element_size() / 2**20}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--params", type=int, default=100_000_000)
    parser.add_argument("--tensors", type=int, default=100)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.params, args.tensors, args.dtype, args.device)))
        return
    runs = []
    for _ in range(args.repeats):
        out = subprocess.run([sys.executable, __file__, "--one", "--params", str(args.params),
                              "--tensors", str(args.tensors), "--dtype", args.dtype,
                              "--device", args.device],
                             check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out))
    extra = [r["extra_mib"] for r in runs]
    print(f"fingerprint of {args.params:,} {args.dtype} parameters in {args.tensors} tensors "
          f"({runs[0]['model_mib']:.0f} MiB) on {args.device}, {args.repeats} fresh processes, "
          "1 thread:")
    for call in ("first", "later"):
        seconds = [r[call] for r in runs]
        print(f"  {call} call  median {statistics.median(seconds):.2f} s "
              f"(min {min(seconds):.2f}, max {max(seconds):.2f})")
    print(f"  extra {args.device} memory  median {statistics.median(extra):.0f} MiB "
          f"(min {min(extra):.0f}, max {max(extra):.0f})")


if __name__ == "__main__":
    main()
