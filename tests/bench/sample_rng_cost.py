#!/usr/bin/python3
"""What loading a sample under the helper's per-sample RNG costs (probes/python/README.md,
"Random augmentation, replayed"): microseconds per sample of the seeding alone, as a DataLoader
worker does it (seed only), and as the main process does it (save, seed, restore), with numpy
loaded as torch loads it. Repeated; the median and the spread are printed.

    /usr/bin/python3 tests/bench/sample_rng_cost.py [--samples 20000] [--repeats 5]
"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "probes", "python"))

import faultline_probe as fp  # noqa: E402


def per_sample_us(samples, enter):
    t0 = time.perf_counter()
    for i in range(samples):
        enter(fp.sample_seed(1234, 7, i))
    return (time.perf_counter() - t0) / samples * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    def restored(seed):
        with fp._seeded_host_rng(seed):
            pass

    modes = {"worker (seed only)": fp._seed_host_rng, "main process (save, seed, restore)": restored}
    times = {name: [] for name in modes}
    for _ in range(args.repeats):  # interleaved, so a busy moment hits both
        for name, enter in modes.items():
            times[name].append(per_sample_us(args.samples, enter))
    for name, values in times.items():
        print(f"{name:36s} {statistics.median(values):6.1f} us a sample "
              f"({min(values):.1f}..{max(values):.1f}, {args.repeats} x {args.samples})")


if __name__ == "__main__":
    main()
