#!/usr/bin/env bash
# The GPU checks of faultline, for a machine with an NVIDIA GPU, python3 with a CUDA PyTorch (its
# LibTorch inside), cmake, ninja and the CUDA toolkit: builds the GPU parts, runs the device tests,
# the trainer's device tests, the NCCL check, the CUPTI probe on a small PyTorch script (a planted
# data stall must show as GPU idle time), the probe's overhead and the bf16 benchmark (Python
# PyTorch, then faultline-train on CUDA in bf16, as a tokens/s ratio), a planted NaN through
# isolate (its first run's stored gpu records in show and report), fp16 with torch's GradScaler,
# a helper run resumed bitwise from its own checkpoint, full probes inside a torch.compile'd
# model, and what the helper's fingerprint costs; prints a summary.
#
#   bash tests/gpu/run.sh [all|build|check]   # results and logs in $FAULTLINE_GPU_OUT
#                                             # (default build-gpu/out)
#
# Two phases, each with its own time budget, so that a device session can run them as two calls
# (the build stays in build-gpu/ between them): `build` (configure and one parallel build of every
# target; $FAULTLINE_GPU_BUILD_S, default 420 s) and `check` (everything else, in under 5 minutes;
# $FAULTLINE_GPU_CHECK_S, default 330 s). `all` (the default) runs both.
#
# What it builds depends on what the machine has (docs/gpu.md):
# - the full project (faultline, faultline-train, every test) when CMake finds all of Debian's
#   packages (fmt, CLI11, nlohmann-json, toml++, SQLite, Boost, GoogleTest, yaml-cpp);
# - else tests/gpu/standalone: libfaultline_cupti.so and faultline-nccl-check always, the device
#   tests with GoogleTest, faultline-train with the header-only libraries (installed, or copied
#   into third_party/gpu-include by tests/gpu/vendor-headers.sh and carried along). `faultline`
#   itself (SQLite, Boost.Process) is then not built and the planted-NaN `isolate` is skipped.
# Each step has a time limit; a failing step is reported and the script goes on.
set -uo pipefail

phase=${1:-all}
case $phase in
  all | build | check) ;;
  *)
    echo "usage: bash tests/gpu/run.sh [all|build|check]" >&2
    exit 2
    ;;
esac
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FAULTLINE_GPU_BUILD:-$root/build-gpu}
out=${FAULTLINE_GPU_OUT:-$build/out}
mkdir -p "$out"
started=$SECONDS
budget=${FAULTLINE_GPU_BUILD_S:-420}
[[ $phase == check ]] && budget=${FAULTLINE_GPU_CHECK_S:-330}
failures=0
# A build (or all) starts a new summary; a check starts from the last build's, so a check run
# again replaces the earlier check's lines.
if [[ $phase == check && -e $out/build-summary.txt ]]; then
  cp "$out/build-summary.txt" "$out/summary.txt"
else
  : >"$out/summary.txt"
fi

say() { printf '== %s\n' "$*"; }
record() {  # record STATUS TEXT
  printf '%-5s %s\n' "$1" "$2" >>"$out/summary.txt"
  [[ $1 == FAIL ]] && failures=$((failures + 1))
  say "$1 $2"
}
# run_step NAME LIMIT_S COMMAND...: runs with a time limit (capped by what is left of the phase's
# budget), output to $out/NAME.log.
run_step() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - (SECONDS - started)))
  if ((left < 15)); then
    record SKIP "$name: out of time"
    return 99
  fi
  ((limit > left)) && limit=$left
  say "$name (limit ${limit}s)"
  timeout --kill-after=5 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 5 "$out/$name.log" | sed 's/^/   | /'
  return $rc
}
finish() {  # finish PHASE: prints the summary so far and exits, 1 when a step failed
  echo
  echo "faultline GPU $1: $(date -u +%FT%TZ), $((SECONDS - started)) s, torch $torch_version (CUDA $torch_cuda)"
  cat "$out/summary.txt"
  exit $((failures > 0))
}
json_field() {  # json_field FILE KEY: a field of the last JSON line of FILE
  python3 - "$1" "$2" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
print(json.loads(lines[-1]).get(sys.argv[2], "") if lines else "")
PY
}

# ---- 0. the machine
say "machine"
nvidia-smi -L 2>&1 | head -8 | tee "$out/gpus.txt"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
torch_info=$(python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.utils.cmake_prefix_path)' 2>&1)
echo "torch: $torch_info"
read -r torch_version torch_cuda torch_gpu torch_prefix <<<"$torch_info"
nvcc_path=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
cuda_root=${CUDAToolkit_ROOT:-$( [[ -n $nvcc_path ]] && dirname "$(dirname "$nvcc_path")")}
echo "cuda toolkit: ${cuda_root:-none}; cmake: $(cmake --version | head -1); ninja: $(ninja --version 2>&1)"
if [[ $torch_gpu != True && $phase != check ]]; then
  record FAIL "PyTorch sees no CUDA GPU ($torch_info): nothing on the GPU can run"
fi
# NCCL: the toolkit's, else the one PyTorch's wheel ships (nvidia-nccl-cu13).
nccl_home=${NCCL_HOME:-}
if [[ -z $nccl_home && ! -e ${cuda_root:-/nonexistent}/include/nccl.h ]]; then
  nccl_home=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
  [[ -n $nccl_home && ! -e $nccl_home/lib/libnccl.so && -e $nccl_home/lib/libnccl.so.2 ]] &&
    mkdir -p "$build/nccl-lib" && ln -sf "$nccl_home/lib/libnccl.so.2" "$build/nccl-lib/libnccl.so" &&
    export NCCL_HOME_LIB=$build/nccl-lib
fi
echo "nccl: ${nccl_home:-from the toolkit}"

# ---- 1. build (phase `build`): the layout and paths go to $build/layout.env for `check`
layout_file=$build/layout.env
if [[ $phase != check ]]; then
  cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DFAULTLINE_CUDA=ON
    "-DTorch_DIR=$torch_prefix/Torch")
  [[ -n $cuda_root ]] && cmake_args+=("-DCUDAToolkit_ROOT=$cuda_root")
  [[ -n $nccl_home ]] && cmake_args+=("-DFAULTLINE_NCCL_INCLUDE=$nccl_home/include"
    "-DFAULTLINE_NCCL_LIBRARY=${NCCL_HOME_LIB:-$nccl_home/lib}/libnccl.so")
  command -v ccache >/dev/null && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  layout=none
  if run_step configure-full 90 cmake -S "$root" -B "$build/full" "${cmake_args[@]}"; then
    layout=full
    build_dir=$build/full
    bin=$build/full/src/cli
    train_bin=$build/full/src/trainer/faultline-train
    test_bin=$build/full/tests/gpu/test_gpu_device
    targets=(faultline faultline-train faultline-nccl-check faultline_cupti test_gpu_device
      test_device test_checkpoint)
  elif run_step configure-gpu-only 60 cmake -S "$root/tests/gpu/standalone" -B "$build/gpu" "${cmake_args[@]}"; then
    layout=gpu-only
    build_dir=$build/gpu
    bin=$build/gpu/src/cli
    train_bin=$build/gpu/trainer/faultline-train
    test_bin=$build/gpu/tests-gpu/test_gpu_device
    targets=(faultline-nccl-check faultline_cupti)
    grep -q 'GoogleTest' "$out/configure-gpu-only.log" || targets+=(test_gpu_device)
    grep -q 'faultline-train not built' "$out/configure-gpu-only.log" || targets+=(faultline-train)
  fi
  if [[ $layout == none ]]; then
    record FAIL "configure: neither the full project nor tests/gpu/standalone (see $out/configure-*.log)"
    rm -f "$layout_file"
  else
    grep -h 'faultline.*LibTorch\|faultline-train:' "$out"/configure-*.log | sed 's/^-- //' |
      while read -r line; do record INFO "configure: $line"; done
    record INFO "build layout: $layout (targets: ${targets[*]})"
    # One build of every target, going on past errors (-k 0) so each target that can be built
    # is. Each target's file is removed first (a relink), so it exists afterwards only if built.
    target_file() {
      case $1 in
        faultline | faultline-nccl-check) echo "$bin/$1" ;;
        faultline_cupti) echo "$bin/libfaultline_cupti.so" ;;
        faultline-train) echo "$train_bin" ;;
        test_gpu_device) echo "$test_bin" ;;
        *) echo "$build_dir/tests/unit/trainer/$1" ;;
      esac
    }
    for target in "${targets[@]}"; do rm -f "$(target_file "$target")"; done
    run_step build 600 cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}" -- -k 0
    grep -E 'error:|undefined reference' "$out/build.log" | head -20 | sed 's/^/   ! /'
    for target in "${targets[@]}"; do
      if [[ -e $(target_file "$target") ]]; then
        record PASS "build $target"
      else
        record FAIL "build $target (see $out/build.log)"
      fi
    done
    declare -p layout build_dir bin train_bin test_bin >"$layout_file"
  fi
  cp "$out/summary.txt" "$out/build-summary.txt"
  [[ $phase == build ]] && finish build
  # `all`: the checks get their own budget from here.
  started=$SECONDS
  budget=${FAULTLINE_GPU_CHECK_S:-330}
fi
if [[ -e $layout_file ]]; then
  # shellcheck disable=SC1090 # written by the build phase above
  source "$layout_file"
else
  layout=none
  record FAIL "check: no build (run the build phase first: bash tests/gpu/run.sh build)"
fi
bin=${bin:-/nonexistent}
cupti_lib=$bin/libfaultline_cupti.so

# ---- 2. device tests
if [[ -x ${test_bin:-/nonexistent} ]]; then
  if run_step gpu-tests 60 "$test_bin"; then
    record PASS "device tests ($(grep -c '\[       OK \]' "$out/gpu-tests.log") ok, $(grep -c '\[  SKIPPED \]' "$out/gpu-tests.log") skipped)"
  else
    record FAIL "device tests (see $out/gpu-tests.log)"
  fi
else
  record SKIP "device tests: test_gpu_device not built (no GoogleTest?)"
fi

# The trainer's device tests (CUDA memory figures, bf16 autocast, checkpoints across devices).
if [[ $layout == full ]]; then
  for t in test_device test_checkpoint; do
    if run_step "trainer-$t" 60 "$build/full/tests/unit/trainer/$t"; then
      record PASS "trainer $t ($(grep -c '\[       OK \]' "$out/trainer-$t.log") ok, $(grep -c '\[  SKIPPED \]' "$out/trainer-$t.log") skipped)"
    else
      record FAIL "trainer $t (see $out/trainer-$t.log)"
    fi
  done
fi

# ---- 3. NCCL check over every visible GPU (one GPU: correctness only)
if [[ -x $bin/faultline-nccl-check ]]; then
  run_step nccl-check 60 "$bin/faultline-nccl-check" --bytes $((256 << 20)) --iters 20
  rc=$?
  status=PASS
  ((rc != 0)) && status=FAIL
  record $status "nccl check on $gpus GPU(s), exit $rc: $(grep -E '^(all ranks|one GPU|pass|slow)' "$out/nccl-check.log" | tr '\n' ' ')"
else
  record SKIP "nccl check: faultline-nccl-check not built"
fi

# ---- 4. the CUPTI probe on a PyTorch script with a planted 30 ms data stall per step, 1-rank NCCL
probe_records=$out/probe.gpu.jsonl
rm -f "$probe_records"
if [[ -e $cupti_lib ]]; then
  if run_step cupti-probe 60 env CUDA_INJECTION64_PATH="$cupti_lib" FAULTLINE_CUPTI_OUT="$probe_records" \
    FAULTLINE_CUPTI_INTERVAL_MS=10 python3 "$root/tests/gpu/bench_gpt.py" --shape small \
    --steps 40 --warmup 5 --data-sleep-ms 30 --nccl --no-matmul; then
    figures=$(python3 - "$probe_records" "$out/cupti-probe.log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
run = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")][-1]
total = lambda k: sum(r[k] for r in rows)
span = sum((r["unix_t1"] - r["unix_t0"]) * 1000 for r in rows)
idle = total("idle_ms") / span if span else 0
# A 30 ms sleep in a step of step_ms: the GPU should be idle at least about that share.
expected = 30 / run["step_ms"]
ok = rows and total("kernels") > 0 and idle >= 0.8 * expected
print(("OK" if ok else "BAD") + f" {len(rows)} records, {total('kernels')} kernels, "
      f"{total('nccl_kernels')} NCCL kernels, busy {total('busy_ms'):.0f} ms, NCCL {total('nccl_ms'):.1f} ms, "
      f"memcpy {total('memcpy_ms'):.1f} ms, idle share {idle:.2f} (planted stall {expected:.2f}), late {total('late')}")
PY
)
    [[ $figures == OK* ]] && record PASS "cupti probe: ${figures#OK }" || record FAIL "cupti probe: ${figures#BAD }"
  else
    record FAIL "cupti probe run (see $out/cupti-probe.log)"
  fi
else
  record SKIP "cupti probe: libfaultline_cupti.so not built"
fi

# ---- 5. benchmark: Python PyTorch bf16 (small and large), MFU; CUPTI overhead on vs off
for shape in small large; do
  if run_step "bench-python-$shape" 60 python3 "$root/tests/gpu/bench_gpt.py" --shape "$shape" --steps 40; then
    log=$out/bench-python-$shape.log
    record INFO "python bf16 $shape: $(json_field "$log" tokens_per_s) tokens/s, step $(json_field "$log" step_ms) ms, MFU $(json_field "$log" mfu) of $(json_field "$log" bf16_matmul_tflops) TFLOP/s measured bf16 matmul"
  else
    record FAIL "python bench $shape (see $out/bench-python-$shape.log)"
  fi
done
if [[ -e $cupti_lib ]] &&
  run_step overhead-off 45 python3 "$root/tests/gpu/bench_gpt.py" --shape large --steps 40 --no-matmul &&
  run_step overhead-on 45 env CUDA_INJECTION64_PATH="$cupti_lib" FAULTLINE_CUPTI_OUT="$out/overhead.gpu.jsonl" \
    python3 "$root/tests/gpu/bench_gpt.py" --shape large --steps 40 --no-matmul; then
  off=$(json_field "$out/overhead-off.log" step_ms)
  on=$(json_field "$out/overhead-on.log" step_ms)
  record INFO "cupti overhead (large, 100 ms intervals): step $off ms off, $on ms on: $(python3 -c "print(f'{($on / $off - 1) * 100:+.2f} %')") (target < 1 %)"
else
  record SKIP "cupti overhead: probe or bench missing"
fi
# faultline-train on the GPU, bf16, the same shapes and step count as the Python runs above, the
# cheap probes off (as Python has none): tokens/s from its end event, and the ratio to Python's.
train_shape_args() {  # the overrides that give faultline-train bench_gpt.py's shape $1
  case $1 in
    small) echo "" ;;  # recipes/train/small.toml is bench_gpt.py's "small"
    large) echo "--set model.vocab_size=32768 --set model.block_size=1024 --set model.n_layer=12 --set model.n_head=12 --set model.n_embd=768" ;;
  esac
}
if [[ -x ${train_bin:-/nonexistent} ]]; then
  for shape in small large; do
    # shellcheck disable=SC2046 # the shape's overrides are separate words
    if run_step "train-$shape-cuda" 75 "$train_bin" -c "$root/recipes/train/small.toml" \
      --out "$out/train-$shape" --set train.device=cuda --set train.precision=bf16 \
      --set train.steps=40 --set train.batch_size=16 --set probe.level=off \
      --set probe.fingerprint_every=0 --set train.log_every=0 $(train_shape_args $shape); then
      metrics=$out/train-$shape/metrics.rank0.jsonl
      ours=$(json_field "$metrics" tokens_per_s)
      theirs=$(json_field "$out/bench-python-$shape.log" tokens_per_s)
      ratio=$(python3 -c "print(f'{float(\"$ours\") / float(\"$theirs\"):.3f}' if \"$theirs\" else 'n/a')" 2>/dev/null || echo n/a)
      start=$(grep -m1 '"name":"start"' "$metrics" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("determinism"))' 2>/dev/null)
      peak=$(python3 - "$metrics" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if '"type":"step"' in l]
r = steps[-1] if steps else {}
gib = lambda key: r.get(key, 0) / 2**30
print(f"{gib('mem_bytes'):.1f} of {gib('mem_total_bytes'):.1f} GiB used, "
      f"peak allocated {gib('mem_peak_bytes'):.2f} GiB")
PY
)
      # The same model and tokens, so its MFU is Python's scaled by the ratio.
      their_mfu=$(json_field "$out/bench-python-$shape.log" mfu)
      mfu=$(python3 -c "print(f'{float(\"$their_mfu\") * float(\"$ratio\"):.4f}')" 2>/dev/null || echo n/a)
      record INFO "faultline-train bf16 $shape on cuda: $ours tokens/s vs python $theirs: ratio $ratio (target >= 1.0), MFU $mfu; memory $peak"
      record INFO "faultline-train determinism ($shape): $start"
    else
      record FAIL "faultline-train bf16 $shape on cuda (see $out/train-$shape-cuda.log)"
    fi
  done
else
  record SKIP "faultline-train vs Python ratio: faultline-train not built"
fi

# ---- 6. planted NaN through the harness (needs faultline, i.e. the full build)
if [[ -x $bin/faultline && -x ${train_bin:-/nonexistent} ]]; then
  if run_step isolate-nan 60 "$bin/faultline" --db "$out/isolate.db" --work-dir "$out/runs" \
    --trainer "$train_bin" --cupti isolate -c tiny --set fault.nan_step=12 --set fault.nan_layer=blocks.1.mlp --set train.steps=20; then
    record PASS "isolate planted NaN (trainer on cuda: train.device auto, --cupti): $(grep -m1 -i 'first bad\|nonfinite' "$out/isolate-nan.log")"
  else
    record FAIL "isolate planted NaN (see $out/isolate-nan.log)"
  fi
  # The probe's records of the search's first run are stored and joined with its steps: show's
  # gpu line and the report's GPU table (report/gpu_figures.cpp).
  "$bin/faultline" show 1 --db "$out/isolate.db" >"$out/gpu-show.log" 2>&1
  "$bin/faultline" report 1 --db "$out/isolate.db" --md - >"$out/gpu-report.md" 2>&1
  if grep -q '^  gpu: ' "$out/gpu-show.log" && grep -q 'GPU per step, medians' "$out/gpu-report.md"; then
    record PASS "stored gpu records of run 1: $(grep -m1 '^  gpu: ' "$out/gpu-show.log" | sed 's/^ *//')"
  else
    record FAIL "no gpu line in show 1 or GPU table in its report (see $out/gpu-show.log, gpu-report.md)"
  fi
else
  record SKIP "isolate planted NaN: faultline not built ($layout build)"
fi

# ---- 7. fp16 on the GPU: torch's own GradScaler through faultline_probe (train.py), with three
# planted overflowing steps that the scaler must skip (not halt on) and halve its scale for
fp16_dir=$out/fp16
rm -rf "$fp16_dir"
if run_step fp16-scaler 60 env FAULTLINE_METRICS="$fp16_dir/metrics.jsonl" FAULTLINE_OUT="$fp16_dir" \
  python3 "$root/examples/pytorch/train.py" --steps 20 --precision fp16 --overflow-step 5 \
  --overflow-steps 3 --log-every 0; then
  if figures=$(python3 - "$fp16_dir/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
start, steps = rows[0], [r for r in rows if r["type"] == "step"]
skipped = [r["step"] for r in steps if r.get("skipped")]
print(f"device {start['device']}, scaler {start['loss_scaler']}, skipped steps {skipped}, "
      f"scale {steps[0]['loss_scale']:g} -> {steps[-1]['loss_scale']:g}, "
      f"loss {steps[0]['loss']:.3f} -> {steps[-1]['loss']:.3f}")
sys.exit(0 if {5, 6, 7} <= set(skipped) and start["device"].startswith("cuda") else 1)
PY
  ); then
    record PASS "fp16 GradScaler on cuda (train.py): $figures"
  else
    record FAIL "fp16 GradScaler on cuda: $figures"
  fi
else
  record FAIL "fp16 GradScaler on cuda (see $out/fp16-scaler.log)"
fi

# ---- 8. the principal path on the GPU: train.py through faultline_probe on CUDA in bf16, with a
# DataLoader (2 workers) and random augmentation, checkpointed at step 4, then resumed from that
# checkpoint: steps 5..8 must be bitwise the run's (parameter hashes), as isolate --run needs
resume_dir=$out/resume
rm -rf "$resume_dir"
resume_args=(--steps 8 --precision bf16 --loader torch --workers 2 --token-noise 0.1 --log-every 0)
if run_step resume-full 60 env FAULTLINE_METRICS="$resume_dir/full/metrics.jsonl" \
  FAULTLINE_OUT="$resume_dir/full" FAULTLINE_CHECKPOINT_EVERY=4 FAULTLINE_FINGERPRINT_EVERY=1 \
  python3 "$root/examples/pytorch/train.py" "${resume_args[@]}" &&
  checkpoint=$(python3 -c 'import json, sys; print([r for r in map(json.loads, open(sys.argv[1])) if r.get("name") == "checkpoint"][0]["path"])' "$resume_dir/full/metrics.jsonl") &&
  run_step resume-resumed 60 env FAULTLINE_METRICS="$resume_dir/resumed/metrics.jsonl" \
    FAULTLINE_OUT="$resume_dir/resumed" FAULTLINE_RESUME="$checkpoint" FAULTLINE_FINGERPRINT_EVERY=1 \
    python3 "$root/examples/pytorch/train.py" "${resume_args[@]}"; then
  if figures=$(python3 - "$resume_dir/full/metrics.jsonl" "$resume_dir/resumed/metrics.jsonl" <<'PY'
import json, sys
def hashes(path):
    rows = [json.loads(line) for line in open(path)]
    return rows[0], {r["step"]: r["hash"] for r in rows
                     if r["type"] == "fingerprint" and r.get("what") == "params"}
start, full = hashes(sys.argv[1])
_, resumed = hashes(sys.argv[2])
same = [k for k in sorted(resumed) if resumed[k] == full.get(k)]
print(f"device {start['device']}, steps {sorted(resumed)} resumed from 4, bitwise at {same}")
sys.exit(0 if start["device"].startswith("cuda") and same == [5, 6, 7, 8] else 1)
PY
  ); then
    record PASS "resume from a checkpoint on cuda (train.py, bf16, DataLoader): $figures"
  else
    record FAIL "resume from a checkpoint on cuda: $figures"
  fi
else
  record FAIL "resume from a checkpoint on cuda (see $out/resume-full.log, $out/resume-resumed.log)"
fi

# ---- 9. torch.compile (inductor, CUDA) through faultline_probe: a NaN planted at step 6 in
# blocks.1.mlp, full probes from 5: the probes must name that module, not the compiled root
compiled_dir=$out/compiled
rm -rf "$compiled_dir"
run_step compiled 120 env FAULTLINE_METRICS="$compiled_dir/metrics.jsonl" FAULTLINE_OUT="$compiled_dir" \
  FAULTLINE_PROBE=full FAULTLINE_PROBE_FROM=5 python3 "$root/examples/pytorch/train.py" --steps 8 \
  --precision bf16 --compile inductor --nan-step 6 --nan-layer blocks.1.mlp --log-every 0
if figures=$(python3 - "$compiled_dir/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
start = rows[0]
anomalies = [r for r in rows if r["type"] == "anomaly"]
where = [(a["step"], a["where"]) for a in anomalies]
print(f"device {start['device']}, compiled {start.get('compiled')}, anomaly at {where}")
sys.exit(0 if start["device"].startswith("cuda") and start.get("compiled")
         and where == [(6, "blocks.1.mlp")] else 1)
PY
); then
  record PASS "torch.compile (inductor) on cuda, full probes name the module: $figures"
else
  record FAIL "torch.compile (inductor) on cuda: $figures (see $out/compiled.log)"
fi

# ---- 10. what the helper's fingerprint (every 10th step by default) costs on the GPU: 500 M
# float32 parameters in 100 tensors, read in pieces (the hash on the host): seconds a call and
# device memory beyond the model (docs/external-trainers.md, "The helper's cost")
if run_step fingerprint-cost 90 python3 "$root/tests/bench/fingerprint_cost.py" --device cuda \
  --params 500000000 --repeats 1; then
  record PASS "helper fingerprint on cuda: $(tail -n 3 "$out/fingerprint-cost.log" | tr -s ' ' | paste -sd ';')"
else
  record FAIL "helper fingerprint on cuda (see $out/fingerprint-cost.log)"
fi

finish checks
