#!/usr/bin/python3
"""The driver behind tests/bench/trainer_throughput (see docs/benchmarks.md).

Runs, in turn and interleaved, faultline-train and the same model and step in plain PyTorch
(tests/bench/python_gpt.py) on the same recipe and shard data; reports tokens/s (median of the
repeats), the ratio C++/Python, model FLOPs utilization against this machine's own measured GEMM
rate, the step-time overhead of the trainer's probe levels, and tokens/s of faultline-train with
each OpenBLAS kernel against the one it runs by default. Builds nothing.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from recipe_config import load_config  # noqa: E402
ROOT = os.path.dirname(os.path.dirname(HERE))
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"
DEFAULT_STEPS = {"tiny": 30, "small": 10}
# OPENBLAS_CORETYPE values compared against the environment as the user has it (docs/trainer.md,
# "BLAS kernel"); OpenBLAS substitutes the best it can run for one the CPU lacks.
KERNEL_CANDIDATES = ["Prescott", "Haswell", "Zen", "SkylakeX", "SapphireRapids", "Cooperlake"]


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


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd, env, what):
    """Runs one program to completion; returns its stdout and the CPU seconds it used."""
    before = children_cpu_s()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        fail(f"{what} exited with {proc.returncode}:\n  {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return proc.stdout, children_cpu_s() - before


def process_cpu_s(pid):
    """CPU seconds used so far by every thread of process `pid` (nanosecond schedstat when the
    kernel has it, else clock ticks from stat); None once it is gone."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (FileNotFoundError, ProcessLookupError):
        return None


def run_watched(cmd, env, what, metrics, first, last):
    """Runs faultline-train and watches its metrics file: reads the process's CPU time when the
    record of step `first` appears and when that of step `last` does. Returns the CPU seconds
    between them (None if a reading was missed) and the CPU seconds of the whole run."""
    before = children_cpu_s()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    cpu_at, buffer, handle = {}, "", None
    marks = {f'"step":{first},', f'"step":{last},'}
    while proc.poll() is None and len(cpu_at) < 2:
        time.sleep(0.005)
        if handle is None:
            try:
                handle = open(metrics)
            except FileNotFoundError:
                continue
        buffer += handle.read()
        lines = buffer.split("\n")
        buffer = lines.pop()
        for line in lines:
            if '"type":"step"' in line:
                for mark in marks:
                    if mark in line and mark not in cpu_at:
                        cpu_at[mark] = process_cpu_s(proc.pid)
    _, stderr = proc.communicate()
    if handle:
        handle.close()
    if proc.returncode != 0:
        fail(f"{what} exited with {proc.returncode}:\n  {' '.join(cmd)}\n{stderr[-2000:]}")
    a, b = cpu_at.get(f'"step":{first},'), cpu_at.get(f'"step":{last},')
    return (b - a if a is not None and b is not None else None), children_cpu_s() - before


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
                f"train.threads={self.args.threads}", "train.log_every=0", *self.args.overrides,
                *extra]

    def trainer_kernel(self):
        """The kernel faultline-train runs with the caller's environment, from its --version."""
        text = run([self.train_bin, "--version"], clean_env(), "faultline-train --version")[0]
        blas = next((l for l in text.splitlines() if l.startswith("blas ")), "")
        kernel = blas.split("; kernel ", 1)[1].split(",", 1)[0] if "; kernel " in blas else ""
        return kernel, blas

    def run_cpp(self, recipe, sets, env_extra=None):
        self.runs += 1
        out = os.path.join(self.work, f"run-{self.runs:03d}")
        cmd = [self.train_bin, "-c", recipe, "--out", out]
        for s in sets:
            cmd += ["--set", s]
        metrics = os.path.join(out, "metrics.rank0.jsonl")
        last = int(next((v.split("=", 1)[1] for v in reversed(sets) if v.startswith("train.steps=")), 0))
        timed_cpu_s, cpu_s = run_watched(cmd, clean_env(**(env_extra or {})), "faultline-train",
                                         metrics, 2, last)
        start, end, steps = read_metrics(metrics)
        shutil.rmtree(out, ignore_errors=True)
        timed = [s["step_ms"] for s in steps if s["step"] > 2]
        # step_ms stops before the step's tail (zeroing the grads, the params fingerprint, writing
        # the record), so the trainer's own tokens/s leaves that work out. The record timestamps
        # `t` bound whole loop iterations: t(step N) - t(step 2) is steps 3..N, everything in.
        by_step = {s["step"]: s for s in steps}
        last = max(by_step)
        wall_s = by_step[last]["t"] - by_step[2]["t"]
        wall_tokens = sum(by_step[k]["tokens"] for k in range(3, last + 1))
        intervals = [1000 * (by_step[k]["t"] - by_step[k - 1]["t"]) for k in range(3, last + 1)]
        return {"tokens_per_s": wall_tokens / wall_s if wall_s > 0 else 0.0,
                "trainer_tokens_per_s": end["tokens_per_s"], "timed_tokens": wall_tokens,
                "cpu_tokens_per_s": wall_tokens / timed_cpu_s if timed_cpu_s else float("nan"),
                "cpu_ms": 1000 * timed_cpu_s / (last - 2) if timed_cpu_s else float("nan"),
                "cpu_s": cpu_s, "step_ms": timed, "wall_ms": intervals, "start": start,
                "losses": [s["loss"] for s in steps],
                "first_loss": steps[0]["loss"] if steps else None,
                "last_loss": steps[-1]["loss"] if steps else None}

    def run_python(self, recipe, sets, tunables, kernel):
        """`kernel`: the OPENBLAS_CORETYPE faultline-train runs with, so both use the same BLAS."""
        cmd = [self.args.python, os.path.join(HERE, "python_gpt.py"), "-c", recipe]
        for s in sets:
            cmd += ["--set", s]
        extra = {"OPENBLAS_CORETYPE": kernel} if kernel else {}
        if tunables:
            extra["GLIBC_TUNABLES"] = MALLOC_TUNABLES
        env = clean_env(**extra)
        text, cpu_s = run(cmd, env, "python_gpt.py")
        result = json.loads(text.strip().splitlines()[-1])
        result["cpu_s"] = cpu_s
        return result

    def gemm_rates(self, shapes, gemm="torch"):
        """(wall, CPU-time) GFLOP/s per shape, best of 5 timings, in the order of `shapes`;
        gemm: "torch" (torch.mm, the BLAS) or "onednn" (what the trainer's fused kernels call)."""
        cmd = [self.args.python, os.path.join(HERE, "gemm_rate.py"), "--threads", str(self.args.threads),
               "--gemm", gemm]
        for m, k, n in shapes:
            cmd += ["--shape", f"{m}x{k}x{n}"]
        result = json.loads(run(cmd, clean_env(), "gemm_rate.py")[0].strip().splitlines()[-1])
        return [(r["gflops"], r["cpu_gflops"]) for r in result["results"]]


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


def noise(values):
    """Run-to-run spread, in % of the median: (max - min) / median."""
    return 100.0 * (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0


def throughput(bench, name, steps, repeats):
    recipe = bench.recipe_path(name)
    cfg = load_config(recipe, bench.overrides("", steps))
    mc, tc = cfg["model"], cfg["train"]
    n_layer, n_embd, block, vocab = mc["n_layer"], mc["n_embd"], mc["block_size"], mc["vocab_size"]
    rows = tc["batch_size"] // tc["grad_accum"] * block  # rows of a micro-batch's activations
    data = bench.data_dir(vocab)  # the shards' vocabulary is the model's
    sets = bench.overrides(data, steps)
    kernel, _ = bench.trainer_kernel()
    programs = {"C++": lambda sets: bench.run_cpp(recipe, sets),
                "C++ aten": lambda sets: bench.run_cpp(recipe, sets + ["train.cpu_kernels=aten"]),
                "Python": lambda sets: bench.run_python(recipe, sets, False, kernel),
                "Python+malloc": lambda sets: bench.run_python(recipe, sets, True, kernel)}
    runs = {label: [] for label in programs}
    # GEMM rate: a square 1024³ product, and the model's own linear-layer shapes (forward),
    # measured before and after the runs; the better of the two counts (a busy machine only
    # ever makes it look slower).
    shapes = [(1024, 1024, 1024), (rows, n_embd, 3 * n_embd), (rows, n_embd, n_embd),
              (rows, n_embd, 4 * n_embd), (rows, 4 * n_embd, n_embd), (rows, n_embd, vocab)]
    log(f"[{name}] GEMM rate at {bench.args.threads} thread(s)")
    rates = bench.gemm_rates(shapes)
    onednn_rates = bench.gemm_rates(shapes, "onednn")
    labels = list(programs)
    for r in range(repeats):
        # Rotate the order each repeat so no program always runs right after the same one.
        shift = r % len(labels)
        for label in labels[shift:] + labels[:shift]:
            log(f"[{name}] repeat {r + 1}/{repeats}: {label}")
            runs[label].append(programs[label](sets))
    log(f"[{name}] GEMM rate again")

    def best_of_both(before, gemm):  # (wall, CPU-time) lists, each shape's best before and after
        both = [(max(a[0], b[0]), max(a[1], b[1]))
                for a, b in zip(before, bench.gemm_rates(shapes, gemm))]
        return [r[0] for r in both], [r[1] for r in both]

    rates, cpu_rates = best_of_both(rates, "torch")
    onednn_rates, onednn_cpu_rates = best_of_both(onednn_rates, "onednn")
    weights = [3, 1, 4, 4, vocab / (n_layer * n_embd)]  # per-token flops of each shape, ÷ n_layer·d²

    def model_shape_rate(per_shape):  # FLOP-weighted harmonic mean over the model's shapes
        return sum(weights) / sum(w / r for w, r in zip(weights, per_shape[1:]))

    def per_shape_text(per_shape):  # "1024x192x576 105, ..." over the model's shapes
        return ", ".join(f"{m}x{k}x{n} {r:.0f}" for (m, k, n), r in zip(shapes[1:], per_shape[1:]))

    square, model_rate = rates[0], model_shape_rate(rates)
    cpu_square, cpu_model_rate = cpu_rates[0], model_shape_rate(cpu_rates)
    cpp, py = runs["C++"], runs["Python"]
    start = cpp[0]["start"]
    params = start["parameters"]
    flops_per_token = 6 * params + 12 * n_layer * block * n_embd

    wall = {label: [x["tokens_per_s"] for x in rs] for label, rs in runs.items()}
    cpu = {label: [x["cpu_tokens_per_s"] for x in rs] for label, rs in runs.items()}
    w = {label: statistics.median(v) for label, v in wall.items()}
    c = {label: statistics.median(v) for label, v in cpu.items()}
    print(f"== {name} ({os.path.relpath(recipe, ROOT)}): {params:,} parameters, "
          f"{n_layer} layers × {n_embd} wide, context {block}, batch {tc['batch_size']} "
          f"(grad_accum {tc['grad_accum']}), {steps} steps (timed: 3..{steps}), "
          f"{repeats} repeat(s), median")
    print(f"BLAS: {start['blas']} (kernel {start.get('blas_kernel') or '?'}; "
          f"{start.get('blas_config') or 'no OpenBLAS config'})")
    print(f"kernel: faultline-train {start.get('blas_kernel') or '?'} "
          f"({start.get('blas_kernel_source') or '?'}), Python {py[0].get('blas_kernel') or '?'} "
          f"(OPENBLAS_CORETYPE={kernel or 'unset'}: the trainer's kernel)")
    print(f"threads: faultline-train {start['threads']} (BLAS {start.get('blas_threads')}), "
          f"Python {py[0]['threads']} (BLAS {py[0].get('blas_threads')}, {py[0]['blas']}); "
          f"torch {start.get('torch_version')} / {py[0]['torch_version']}")
    print(f"{'':24s} {'tokens/s':>9s}  {'(min..max)':>13s}   {'CPU-time tokens/s':>17s}  {'(min..max)':>13s}")
    names = {"C++": "C++ faultline-train", "C++ aten": "C++, cpu_kernels=aten",
             "Python": "Python (python_gpt.py)",
             "Python+malloc": "Python + trainer malloc"}
    for label in programs:
        print(f"{names[label]:24s} {w[label]:9.0f}  {min(wall[label]):6.0f}..{max(wall[label]):<6.0f}   "
              f"{c[label]:17.0f}  {min(cpu[label]):6.0f}..{max(cpu[label]):<6.0f}")
    print(f"(faultline-train's own end-event tokens/s, which leaves each step's tail out: "
          f"{statistics.median(x['trainer_tokens_per_s'] for x in cpp):.0f})")
    ratio = w["C++"] / w["Python"]
    print(f"ratio: {ratio:.2f}")
    print(f"ratio in CPU time: {c['C++'] / c['Python']:.2f}")
    print(f"with train.cpu_kernels = aten (LibTorch's ops and the BLAS's GEMM, as Python): "
          f"{w['C++ aten'] / w['Python']:.2f} (CPU time: {c['C++ aten'] / c['Python']:.2f}); "
          f"the trainer's fused kernels (gemm: {start.get('gemm') or 'none'}) are worth "
          f"{w['C++'] / w['C++ aten']:.2f}x")
    print(f"against Python with the trainer's malloc settings (GLIBC_TUNABLES={MALLOC_TUNABLES}): "
          f"{w['C++'] / w['Python+malloc']:.2f} (CPU time: {c['C++'] / c['Python+malloc']:.2f})")
    target = {"tiny": 1.3, "small": 1.1}.get(name)
    run_noise = max(noise(wall["C++"]), noise(wall["Python"]))
    if target:
        print(f"target: ratio >= {target} -> {'met' if ratio >= target else 'NOT met'}"
              + (" (one repeat: no estimate of the run-to-run spread" if repeats < 2 else
                 f" (run-to-run spread of wall tokens/s up to {run_noise:.0f} %")
              + ("; the machine was busy: trust the CPU-time figures more, or rerun when it is quiet"
                 if run_noise > 10 else "") + ")")
    if py[0]["parameters"] != params:
        print(f"WARNING: Python model has {py[0]['parameters']:,} parameters, C++ {params:,}")
    print(f"loss, first -> last step: C++ {cpp[0]['first_loss']:.4f} -> {cpp[0]['last_loss']:.4f}, "
          f"Python {py[0]['first_loss']:.4f} -> {py[0]['last_loss']:.4f} (same init and batches)")
    print(f"model FLOPs/token = 6·N + 12·n_layer·block_size·n_embd = 6·{params} + 12·{n_layer}·{block}·{n_embd}"
          f" = {flops_per_token / 1e6:.2f} MFLOP")
    print(f"GEMM rate (float32 torch.mm, best of 2×5, {bench.args.threads} thread(s)): "
          f"1024³ {square:.1f} GFLOP/s; model shapes {model_rate:.1f} GFLOP/s ("
          + per_shape_text(rates) + ")")
    print(f"GEMM rate in CPU time: 1024³ {cpu_square:.1f} GFLOP/s; model shapes {cpu_model_rate:.1f} GFLOP/s")
    onednn_square, onednn_model = onednn_rates[0], model_shape_rate(onednn_rates)
    print(f"oneDNN dnnl_sgemm rate (the fused kernels' GEMM): 1024³ {onednn_square:.1f} GFLOP/s; "
          f"model shapes {onednn_model:.1f} GFLOP/s ("
          + per_shape_text(onednn_rates) + f"); in CPU time {onednn_cpu_rates[0]:.1f} / {model_shape_rate(onednn_cpu_rates):.1f}")
    print(f"MFU C++ against the GEMM it calls (oneDNN, model shapes): "
          f"{100 * w['C++'] * flops_per_token / 1e9 / onednn_model:.1f} %")
    for label in programs:
        achieved, achieved_cpu = w[label] * flops_per_token / 1e9, c[label] * flops_per_token / 1e9
        print(f"MFU {label:14s} {achieved:6.1f} GFLOP/s = {100 * achieved / square:5.1f} % of 1024³ GEMM, "
              f"{100 * achieved / model_rate:5.1f} % of model-shape GEMM"
              f"   (in CPU time: {100 * achieved_cpu / cpu_square:5.1f} %, "
              f"{100 * achieved_cpu / cpu_model_rate:5.1f} %)")
    print(flush=True)


def kernel_comparison(bench, name, steps, repeats):
    """faultline-train with the environment as the user has it against each forced kernel."""
    recipe = bench.recipe_path(name)
    data = bench.data_dir(load_config(recipe, bench.args.overrides)["model"]["vocab_size"])
    sets = bench.overrides(data, steps)
    user = os.environ.get("OPENBLAS_CORETYPE")
    variants = [("as the user has it", {})] + [(k, {"OPENBLAS_CORETYPE": k}) for k in KERNEL_CANDIDATES]
    runs = {label: [] for label, _ in variants}
    for r in range(repeats):
        for label, extra in variants[r % len(variants):] + variants[:r % len(variants)]:
            log(f"[kernels/{name}] repeat {r + 1}/{repeats}: {label}")
            runs[label].append(bench.run_cpp(recipe, sets, extra))
    wall = {label: statistics.median(x["tokens_per_s"] for x in rs) for label, rs in runs.items()}
    cpu = {label: statistics.median(x["cpu_tokens_per_s"] for x in rs) for label, rs in runs.items()}
    best_wall, best_cpu = max(wall.values()), max(cpu.values())
    reference = runs["as the user has it"][0]["losses"]
    print(f"== BLAS kernels on {name}: faultline-train, steps 3..{steps}, {repeats} interleaved "
          f"repeat(s), median; OPENBLAS_CORETYPE as the user has it: {user or '(unset)'}")
    print(f"{'OPENBLAS_CORETYPE':20s} {'runs as (source)':22s} {'tokens/s':>9s} {'vs best':>8s}  "
          f"{'CPU tokens/s':>12s} {'vs best':>8s}  {'(min..max)':>13s}  max |loss - default|: "
          f"steps 1..5, all")
    for label, _ in variants:
        start = runs[label][0]["start"]
        ran = f"{start.get('blas_kernel') or '?'} ({start.get('blas_kernel_source') or '?'})"
        losses = runs[label][0]["losses"]
        diffs = [abs(a - b) for a, b in zip(losses, reference)]
        spread = [x["tokens_per_s"] for x in runs[label]]
        print(f"{label:20s} {ran:22s} {wall[label]:9.0f} {wall[label] / best_wall:8.3f}  "
              f"{cpu[label]:12.0f} {cpu[label] / best_cpu:8.3f}  {min(spread):6.0f}..{max(spread):<6.0f}  "
              f"{max(diffs[:5]):.1e}, {max(diffs):.1e}")
    ratio = wall["as the user has it"] / best_wall
    ratio_cpu = cpu["as the user has it"] / best_cpu
    print(f"target: the default within 10 % of the best -> {'met' if ratio >= 0.9 else 'NOT met'} "
          f"(wall {ratio:.3f}, CPU time {ratio_cpu:.3f})")
    print(flush=True)


def probe_overhead(bench, name, steps, repeats):
    recipe = bench.recipe_path(name)
    data = bench.data_dir(load_config(recipe, bench.args.overrides)["model"]["vocab_size"])
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
    # Median step_ms of every timed step (3..N) of every repeat: robust against the noise of a
    # shared machine. step_ms leaves each step's tail out and the median skips the steps that
    # write fingerprints, so the mean wall time per step (from the record timestamps, tail and
    # fingerprints included) and the CPU time per step are shown too: they are what the probes
    # cost a run.
    med = {label: statistics.median(ms for x in runs for ms in x["step_ms"]) for label, runs in samples.items()}
    per_run = {label: [statistics.median(x["step_ms"]) for x in runs] for label, runs in samples.items()}
    mean_wall = {label: statistics.median(statistics.fmean(x["wall_ms"]) for x in runs)
                 for label, runs in samples.items()}
    cpu_ms = {label: statistics.median(x["cpu_ms"] for x in runs) for label, runs in samples.items()}
    print(f"== probe overhead on {name}: faultline-train, steps 3..{steps}, {repeats} interleaved "
          f"repeat(s); relative to probe.level = off")
    print(f"{'variant':34s} {'median step_ms':>14s} {'vs off':>8s}  {'mean wall ms/step':>17s} {'vs off':>8s}"
          f"  {'CPU ms/step':>11s} {'vs off':>8s}  per-run median step_ms")
    for label, _ in variants:
        cells = []
        for table in (med, mean_wall, cpu_ms):
            cells.append("" if label == "off" else f"{pct(table[label], table['off']):+7.1f}%")
        print(f"probe.level = {label:21s} {med[label]:14.2f} {cells[0]:>8s}  {mean_wall[label]:17.2f} "
              f"{cells[1]:>8s}  {cpu_ms[label]:11.2f} {cells[2]:>8s}  "
              f"{min(per_run[label]):.1f}..{max(per_run[label]):.1f}")
    figures = [pct(t["cheap (default)"], t["off"]) for t in (med, mean_wall, cpu_ms)]
    off_noise = noise(per_run["off"])
    # A control: "off, no fingerprints" does strictly less work than "off", so where it measures
    # 2 % or more slower, the noise alone is as large as the target.
    control = [pct(t["off, no fingerprints"], t["off"]) for t in (med, mean_wall, cpu_ms)]
    if repeats < 2 or off_noise > 5.0:  # no noise estimate, or more noise than 2 % can resolve
        verdict = "inconclusive"
    elif min(figures) >= 2.0 and max(control) >= 2.0:
        verdict = "inconclusive (the control, off without fingerprints, was as much slower)"
    elif max(figures) < 2.0 and min(figures) > -2.0:  # below -2 %: noise larger than the target
        verdict = "met"
    elif min(figures) >= 2.0:
        verdict = "NOT met"
    else:
        verdict = "inconclusive"
    print(f"run-to-run spread of the per-run median step_ms (off): {off_noise:.1f} %")
    print(f"target: always-on probes (cheap vs off) under 2 % -> {verdict} ("
          f"{figures[0]:+.1f} % median step_ms, {figures[1]:+.1f} % mean wall, {figures[2]:+.1f} % CPU)")
    print(flush=True)


def main():
    parser = argparse.ArgumentParser(
        prog="tests/bench/trainer_throughput",
        description="tokens/s of faultline-train vs the same model in Python PyTorch, MFU, probe overhead")
    parser.add_argument("build_dir", nargs="?", default=os.path.join(ROOT, "build"),
                        help="CMake build directory holding src/trainer/faultline-train (default: build)")
    parser.add_argument("--recipe", choices=["tiny", "small", "both", "none"], default="both")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"steps per run (default: {DEFAULT_STEPS}); tokens/s counts steps 3..N")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs per program; median")
    parser.add_argument("--threads", type=int, default=1, help="train.threads for both programs")
    parser.add_argument("--kernel-recipe", choices=["tiny", "small", "none"], default="tiny",
                        help="recipe of the BLAS-kernel comparison (none: skip it)")
    parser.add_argument("--probe-recipe", choices=["tiny", "small", "none"], default="tiny",
                        help="recipe of the probe-overhead runs (none: skip them)")
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        metavar="section.key=value",
                        help="extra override for every run of both programs (repeatable)")
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
        blas_env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS_"))
        print(f"OpenBLAS environment, passed to both programs: {blas_env or '(none)'}"
              + ("  <- OPENBLAS_CORETYPE overrides the kernel OpenBLAS would pick for this CPU"
                 if "OPENBLAS_CORETYPE" in os.environ else ""))
        print()
        _, blas = bench.trainer_kernel()
        print(f"faultline-train --version: {blas}")
        print()
        if args.kernel_recipe != "none":
            kernel_comparison(bench, args.kernel_recipe,
                              args.steps or DEFAULT_STEPS[args.kernel_recipe], args.repeats)
        names = {"both": ["tiny", "small"], "none": []}.get(args.recipe, [args.recipe])
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
