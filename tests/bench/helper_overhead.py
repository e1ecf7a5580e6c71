#!/usr/bin/python3
"""What faultline_probe.py adds to a step of examples/pytorch/train.py (docs/external-trainers.md).

Per-step wall time of four ways to run the same model, each measured as the difference between
a long and a short run (so interpreter start-up, torch import and the first steps cancel out),
interleaved and repeated; reported as medians and as ratios with their spread over the repeats:

  plain    train_log_only.py: the same model and optimizer in a loop without the helper
  outside  train.py outside faultline: the helper, recording nothing
  off      train.py recording, FAULTLINE_PROBE=off (no finiteness check)
  cheap    train.py recording with the always-on check (what faultline runs)

    /usr/bin/python3 tests/bench/helper_overhead.py [--repeats 5] [--steps 300]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples", "pytorch")
PROBES = os.path.join(ROOT, "probes", "python")


def run_seconds(mode, steps, tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    env["PYTHONPATH"] = PROBES
    script = "train_log_only.py" if mode == "plain" else "train.py"
    argv = [sys.executable, os.path.join(EXAMPLES, script), "--steps", str(steps)]
    if mode != "plain":
        argv += ["--log-every", "0"]
    if mode in ("off", "cheap"):
        env["FAULTLINE_METRICS"] = os.path.join(tmp, f"{mode}-{steps}.jsonl")
        env["FAULTLINE_OUT"] = tmp
        env["FAULTLINE_PROBE"] = mode
        if os.path.exists(env["FAULTLINE_METRICS"]):
            os.remove(env["FAULTLINE_METRICS"])
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    modes = ("plain", "outside", "off", "cheap")
    short = 20
    per_step = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for mode in modes:
                long_s = run_seconds(mode, short + args.steps, tmp)
                short_s = run_seconds(mode, short, tmp)
                per_step[mode].append((long_s - short_s) / args.steps * 1000)
    print(f"helper_overhead: {args.steps} steps of examples/pytorch/train.py's model, "
          f"{args.repeats} interleaved repeats; ms per step (median, min..max)")
    for mode in modes:
        values = per_step[mode]
        print(f"  {mode:8s} {statistics.median(values):7.3f}  "
              f"({min(values):.3f}..{max(values):.3f})")
    for a, b in (("cheap", "off"), ("cheap", "plain"), ("outside", "plain")):
        ratios = [x / y for x, y in zip(per_step[a], per_step[b])]
        print(f"  {a}/{b}: {statistics.median(ratios):.3f} "
              f"(repeats {min(ratios):.3f}..{max(ratios):.3f})")


if __name__ == "__main__":
    main()
