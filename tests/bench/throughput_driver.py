#!/usr/bin/python3
"""The driver behind tests/bench/trainer_throughput (see docs/benchmarks.md).

Runs, in turn and interleaved, faultline-train and the same model and step in plain PyTorch
(tests/bench/python_gpt.py) on the same recipe and shard data; reports tokens/s (median of the
repeats), the ratio C++/Python, model FLOPs utilization against this machine's own measured GEMM
rate, and the step-time overhead of the trainer's probe levels. Builds nothing.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"
DEFAULT_STEPS = {"tiny": 30, "small": 10}


def fail(message):
    sys.exit(f"trainer_throughput: error: {message}")


def log(message):
    print(message, file=sys.stderr, flush=True)


def clean_env(**extra):
    """The caller's environment without what would change a run: no inherited malloc tunables,
    no harness metrics path, no thread-count variables (both programs set threads themselves)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLIBC_TUNABLES", "FAULTLINE_METRICS", "OMP_NUM_THREADS",
                        "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update(extra)
    return env


def run(cmd, env, what):
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        fail(f"{what} exited with {proc.returncode}:\n  {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return proc.stdout


def read_metrics(path):
    start, end, steps = None, None, []
    with open(path) as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("type") == "step":
                steps.append(record)
            elif record.get("type") == "event" and record.get("name") == "start":
                start = record
            elif record.get("type") == "event" and record.get("name") == "end":
                end = record
    if start is None or end is None:
        fail(f"{path}: no start or end event")
    return start, end, steps


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build_dir)
        self.train_bin = os.path.join(self.build, "src/trainer/faultline-train")
        self.cli_bin = os.path.join(self.build, "src/cli/faultline")
        for binary in (self.train_bin, self.cli_bin):
            if not os.access(binary, os.X_OK):
                fail(f"{binary} is missing; build it first (ninja -C {self.build} faultline-train "
                     "faultline, or make build)")
        if not os.access(args.python, os.X_OK):
            fail(f"{args.python} is missing; install Debian's python3-torch (scripts/install-deps.sh)")
        self.work = tempfile.mkdtemp(prefix="faultline-bench-")
        self.runs = 0

    def recipe_path(self, name):
        path = os.path.join(ROOT, "recipes/train", name + ".toml")
        if not os.path.exists(path):
            fail(f"{path} is missing")
        return path

    def data_dir(self, vocab):
        path = os.path.join(self.work, f"data-v{vocab}")
        if not os.path.isdir(path):
            run([self.cli_bin, "data", "synth", "--out", path, "--vocab", str(vocab), "--shards", "4",
                 "--tokens-per-shard", "262144", "--order", "1", "--seed", "1"], clean_env(),
                "faultline data synth")
        return path

    def overrides(self, data, steps, extra=()):
        return ["data.path=" + data, "data.tokenizer=synth-ngram", f"train.steps={steps}",
                f"train.threads={self.args.threads}", "train.log_every=0", *extra]

    def run_cpp(self, recipe, sets):
        self.runs += 1
        out = os.path.join(self.work, f"run-{self.runs:03d}")
        cmd = [self.train_bin, "-c", recipe, "--out", out]
        for s in sets:
            cmd += ["--set", s]
        run(cmd, clean_env(), "faultline-train")
        start, end, steps = read_metrics(os.path.join(out, "metrics.rank0.jsonl"))
        shutil.rmtree(out, ignore_errors=True)
        timed = [s["step_ms"] for s in steps if s["step"] > 2]
        return {"tokens_per_s": end["tokens_per_s"], "step_ms": timed, "start": start,
                "first_loss": steps[0]["loss"] if steps else None,
                "last_loss": steps[-1]["loss"] if steps else None}

    def run_python(self, recipe, sets, tunables):
        cmd = [self.args.python, os.path.join(HERE, "python_gpt.py"), "-c", recipe]
        for s in sets:
            cmd += ["--set", s]
        env = clean_env(GLIBC_TUNABLES=MALLOC_TUNABLES) if tunables else clean_env()
        text = run(cmd, env, "python_gpt.py")
        return json.loads(text.strip().splitlines()[-1])

    def gemm_rates(self, shapes):
        cmd = [self.args.python, os.path.join(HERE, "gemm_rate.py"), "--threads", str(self.args.threads)]
        for m, k, n in shapes:
            cmd += ["--shape", f"{m}x{k}x{n}"]
        return json.loads(run(cmd, clean_env(), "gemm_rate.py").strip().splitlines()[-1])


def model_of(start):
    """Model keys from the trainer's resolved config (the start event's `config`)."""
    model = {}
    for line in start["config"].splitlines():
        key, _, value = line.partition(" = ")
        section, _, name = key.partition(".")
        if section in ("model", "train"):
            model[key] = value.strip('"')
    return model


def pct(value, reference):
    return 100.0 * (value - reference) / reference


def spread(values):
    return f"min {min(values):.0f}, max {max(values):.0f}"


def throughput(bench, name, steps, repeats):
    recipe = bench.recipe_path(name)
    cpp, py, py_malloc = [], [], []
    programs = [("C++", lambda sets: cpp.append(bench.run_cpp(recipe, sets))),
                ("Python", lambda sets: py.append(bench.run_python(recipe, sets, False))),
                ("Python+malloc", lambda sets: py_malloc.append(bench.run_python(recipe, sets, True)))]
    with open(recipe, "rb") as f:  # the shards' vocabulary must be the model's
        vocab = tomllib.load(f).get("model", {}).get("vocab_size", 256)
    data = bench.data_dir(vocab)
    sets = bench.overrides(data, steps)
    for r in range(repeats):
        # Rotate the order each repeat so no program always runs right after the same one.
        order = programs[r % 3:] + programs[:r % 3]
        for label, go in order:
            log(f"[{name}] repeat {r + 1}/{repeats}: {label}")
            go(sets)
    start = cpp[0]["start"]
    m = {k: int(v) for k, v in model_of(start).items()
         if k in ("model.n_layer", "model.n_embd", "model.block_size", "model.vocab_size",
                  "train.batch_size", "train.grad_accum")}
    n_layer, n_embd, block = m["model.n_layer"], m["model.n_embd"], m["model.block_size"]
    vocab, rows = m["model.vocab_size"], m["train.batch_size"] // m["train.grad_accum"] * block
    params = start["parameters"]
    flops_per_token = 6 * params + 12 * n_layer * block * n_embd
    # GEMM rate: a square 1024³ product, and the model's own linear-layer shapes (forward).
    shapes = [(1024, 1024, 1024), (rows, n_embd, 3 * n_embd), (rows, n_embd, n_embd),
              (rows, n_embd, 4 * n_embd), (rows, 4 * n_embd, n_embd), (rows, n_embd, vocab)]
    log(f"[{name}] GEMM rate at {bench.args.threads} thread(s)")
    gemm = bench.gemm_rates(shapes)
    rates = [r["gflops"] for r in gemm["results"]]
    square = rates[0]
    weights = [3, 1, 4, 4, vocab / (n_layer * n_embd)]  # per-token flops of each shape, ÷ n_layer·d²
    model_rate = sum(weights) / sum(w / r for w, r in zip(weights, rates[1:]))

    med = lambda runs: statistics.median(x["tokens_per_s"] for x in runs)  # noqa: E731
    c, p, pm = med(cpp), med(py), med(py_malloc)
    print(f"== {name} ({os.path.relpath(recipe, ROOT)}): {params:,} parameters, "
          f"{n_layer} layers × {n_embd} wide, context {block}, batch {m['train.batch_size']} "
          f"(grad_accum {m['train.grad_accum']}), {steps} steps (timed: 3..{steps}), "
          f"{repeats} repeat(s), median")
    print(f"BLAS: {start['blas']} (kernel {start.get('blas_kernel') or '?'}; "
          f"{start.get('blas_config') or 'no OpenBLAS config'})")
    print(f"threads: faultline-train {start['threads']} (BLAS {start.get('blas_threads')}), "
          f"Python {py[0]['threads']} (BLAS {py[0].get('blas_threads')}, {py[0]['blas']}); "
          f"torch {start.get('torch_version')} / {py[0]['torch_version']}")
    print(f"C++ faultline-train      {c:10.0f} tokens/s   ({spread([x['tokens_per_s'] for x in cpp])})")
    print(f"Python (python_gpt.py)   {p:10.0f} tokens/s   ({spread([x['tokens_per_s'] for x in py])})")
    print(f"ratio: {c / p:.2f}")
    print(f"Python with the trainer's malloc settings (GLIBC_TUNABLES={MALLOC_TUNABLES}):")
    print(f"                         {pm:10.0f} tokens/s   ({spread([x['tokens_per_s'] for x in py_malloc])})"
          f"   C++/Python+malloc ratio: {c / pm:.2f}")
    target = {"tiny": 1.3, "small": 1.1}.get(name)
    if target:
        print(f"target: ratio >= {target} -> {'met' if c / p >= target else 'NOT met'}")
    if py[0]["parameters"] != params:
        print(f"WARNING: Python model has {py[0]['parameters']:,} parameters, C++ {params:,}")
    print(f"loss, first -> last step: C++ {cpp[0]['first_loss']:.4f} -> {cpp[0]['last_loss']:.4f}, "
          f"Python {py[0]['first_loss']:.4f} -> {py[0]['last_loss']:.4f} (same init and batches)")
    print(f"model FLOPs/token = 6·N + 12·n_layer·block_size·n_embd = 6·{params} + 12·{n_layer}·{block}·{n_embd}"
          f" = {flops_per_token / 1e6:.2f} MFLOP")
    print(f"GEMM rate (float32 torch.mm, best of 5, {gemm['threads']} thread(s)): "
          f"1024³ {square:.1f} GFLOP/s; model shapes {model_rate:.1f} GFLOP/s "
          f"({', '.join(r['shape'] + ' ' + format(r['gflops'], '.0f') for r in gemm['results'][1:])})")
    for label, tps in (("C++", c), ("Python", p), ("Python+malloc", pm)):
        achieved = tps * flops_per_token / 1e9
        print(f"MFU {label:14s} {achieved:6.1f} GFLOP/s = {100 * achieved / square:5.1f} % of 1024³ GEMM, "
              f"{100 * achieved / model_rate:5.1f} % of model-shape GEMM")
    print(flush=True)
    return {"name": name, "cpp": c, "python": p, "python_malloc": pm, "ratio": c / p,
            "ratio_malloc": c / pm, "gemm_square": square, "gemm_model": model_rate,
            "flops_per_token": flops_per_token}


def probe_overhead(bench, name, steps, repeats):
    recipe = bench.recipe_path(name)
    data = bench.data_dir(256)
    variants = [("off", ["probe.level=off"]),
                ("cheap (default)", ["probe.level=cheap"]),
                ("full", ["probe.level=full"]),
                ("off, no fingerprints", ["probe.level=off", "probe.fingerprint_every=0"])]
    samples = {label: [] for label, _ in variants}
    for r in range(repeats):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for label, extra in order:
            log(f"[probes/{name}] repeat {r + 1}/{repeats}: {label}")
            samples[label].append(bench.run_cpp(recipe, bench.overrides(data, steps, extra)))
    # Median of every timed step (3..N) of every repeat, and the spread of the per-run medians.
    pooled = {label: statistics.median(ms for x in runs for ms in x["step_ms"]) for label, runs in samples.items()}
    per_run = {label: [statistics.median(x["step_ms"]) for x in runs] for label, runs in samples.items()}
    off = pooled["off"]
    print(f"== probe overhead on {name}: faultline-train step_ms, median of steps 3..{steps} over "
          f"{repeats} interleaved repeat(s)")
    for label, _ in variants:
        runs = per_run[label]
        extra = "" if label == "off" else f"   {pct(pooled[label], off):+6.1f} % vs off"
        print(f"probe.level = {label:22s} {pooled[label]:8.2f} ms   (per-run medians "
              f"{min(runs):.2f}..{max(runs):.2f}){extra}")
    cheap = pct(pooled["cheap (default)"], off)
    print(f"target: always-on probes (cheap vs off) under 2 % -> {'met' if cheap < 2.0 else 'NOT met'} "
          f"({cheap:+.1f} %)")
    print(flush=True)


def main():
    parser = argparse.ArgumentParser(
        prog="tests/bench/trainer_throughput",
        description="tokens/s of faultline-train vs the same model in Python PyTorch, MFU, probe overhead")
    parser.add_argument("build_dir", nargs="?", default=os.path.join(ROOT, "build"),
                        help="CMake build directory holding src/trainer/faultline-train (default: build)")
    parser.add_argument("--recipe", choices=["tiny", "small", "both"], default="both")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"steps per run (default: {DEFAULT_STEPS}); tokens/s counts steps 3..N")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs per program; median")
    parser.add_argument("--threads", type=int, default=1, help="train.threads for both programs")
    parser.add_argument("--probe-recipe", choices=["tiny", "small", "none"], default="tiny",
                        help="recipe of the probe-overhead runs (none: skip them)")
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="Debian's python3 with python3-torch (not a pyenv/venv python)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    if args.steps is not None and args.steps < 4:
        fail("--steps must be at least 4 (steps 1 and 2 are not timed)")
    if args.repeats < 1:
        fail("--repeats must be at least 1")

    bench = Bench(args)
    began = time.time()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "unknown")
        print(f"faultline trainer throughput — {time.strftime('%Y-%m-%d %H:%M')}, {cpu}, "
              f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f}, threads {args.threads}")
        print()
        names = ["tiny", "small"] if args.recipe == "both" else [args.recipe]
        for name in names:
            throughput(bench, name, args.steps or DEFAULT_STEPS[name], args.repeats)
        if args.probe_recipe != "none":
            probe_overhead(bench, args.probe_recipe, args.steps or DEFAULT_STEPS[args.probe_recipe],
                           args.repeats)
        print(f"({time.time() - began:.0f} s in all; load average now {os.getloadavg()[0]:.2f})")
    finally:
        if args.keep:
            log(f"scratch directory kept: {bench.work}")
        else:
            shutil.rmtree(bench.work, ignore_errors=True)


if __name__ == "__main__":
    main()
