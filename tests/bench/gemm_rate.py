#!/usr/bin/python3
"""This machine's own float32 GEMM rate, the denominator of model FLOPs utilization (MFU).

    /usr/bin/python3 tests/bench/gemm_rate.py --threads 1 [--shape 1024x1024x1024 ...]

Times torch.mm (Debian's libtorch, which calls the same libblas.so.3 sgemm_ as faultline-train
with train.cpu_kernels = "aten") or, with --gemm onednn, oneDNN's dnnl_sgemm (what the trainer's
fused CPU kernels call) for each shape M×K×N at the given thread count; reports the best of --repeats timings, in
GFLOP/s (2·M·K·N flops per product): `gflops` over wall time, and `cpu_gflops` over the process's
CPU time (all threads; at one thread it ignores time spent descheduled on a busy machine).
Prints one JSON object on stdout.
"""
import argparse
import ctypes
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_gpt import blas_info  # noqa: E402  (sets OpenBLAS's threads as faultline-train does)


def parse_shape(text):
    m, k, n = (int(v) for v in text.lower().split("x"))
    return m, k, n


def onednn_mm():
    """out = a·b through oneDNN's row-major sgemm (libdnnl.so.2, as faultline-train links)."""
    sgemm = ctypes.CDLL("libdnnl.so.2").dnnl_sgemm
    dim = ctypes.c_int64
    sgemm.argtypes = [ctypes.c_char, ctypes.c_char, dim, dim, dim, ctypes.c_float, ctypes.c_void_p,
                      dim, ctypes.c_void_p, dim, ctypes.c_float, ctypes.c_void_p, dim]

    def mm(a, b, out):
        (m, k), n = a.shape, b.shape[1]
        if sgemm(b"N", b"N", m, n, k, 1.0, a.data_ptr(), k, b.data_ptr(), n, 0.0, out.data_ptr(), n):
            raise RuntimeError("dnnl_sgemm failed")
    return mm


def rate(m, k, n, repeats, min_seconds, mm):
    a, b = torch.randn(m, k), torch.randn(k, n)
    out = torch.empty(m, n)
    flops = 2.0 * m * k * n
    mm(a, b, out=out)  # warm up: page in, let the BLAS set up its buffers
    inner = 1
    while True:  # enough products per timing that a timing lasts min_seconds
        t0 = time.perf_counter()
        for _ in range(inner):
            mm(a, b, out=out)
        if time.perf_counter() - t0 >= min_seconds or inner >= 1 << 16:
            break
        inner *= 2
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(inner):
            mm(a, b, out=out)
        best = min(best, (time.perf_counter() - t0) / inner)
        best_cpu = min(best_cpu, (time.process_time() - c0) / inner)
    return flops / best / 1e9, flops / best_cpu / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shape", action="append", default=[], metavar="MxKxN")
    parser.add_argument("--gemm", choices=["torch", "onednn"], default="torch",
                        help="torch.mm (the BLAS) or oneDNN's dnnl_sgemm")
    parser.add_argument("--repeats", type=int, default=5, help="timings per shape; the best counts")
    parser.add_argument("--min-seconds", type=float, default=0.05, help="least length of a timing")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    runtime = blas_info(args.threads)
    shapes = [parse_shape(s) for s in (args.shape or ["1024x1024x1024"])]
    mm = onednn_mm() if args.gemm == "onednn" else torch.mm
    results = []
    for m, k, n in shapes:
        gflops, cpu_gflops = rate(m, k, n, args.repeats, args.min_seconds, mm)
        results.append({"shape": f"{m}x{k}x{n}", "gflops": gflops, "cpu_gflops": cpu_gflops})
    print(json.dumps({"threads": torch.get_num_threads(), "gemm": args.gemm, "results": results,
                      **runtime}))


if __name__ == "__main__":
    main()
