#!/usr/bin/python3
"""What `faultline import` costs on a big job: wall time, records/s and peak memory
(docs/isolate.md), and with --report what `faultline report` of the imported run costs
(docs/report.md). With --gpu-interval-ms, each rank also has the CUPTI probe's file beside its
metrics (`gpu` records of that interval over the whole run, docs/gpu.md), imported, stored and
joined with the steps by the report.

Writes a job's metrics files as the Python helper writes them (a start event, then per step a
collective heartbeat and a step record, then an end event), `--ranks` files of `--steps` steps,
and imports them into a fresh store, timed. Peak memory is the import process's maximum resident
set size (wait4 of each child). The files are synthetic so that any size can be made in
seconds; their lines have the helper's fields and lengths.

    /usr/bin/python3 tests/bench/import_scale.py --faultline build/src/cli/faultline \\
        [--ranks 8] [--steps 100000] [--dir /tmp/import-scale] [--report] [--gpu-interval-ms 1]
"""
import argparse
import json
import os
import shutil
import subprocess
import time


UNIX_START = 1.7e9
STEP_S = 0.01  # the synthetic job's step period


def write_gpu(folder, rank, steps, interval_ms):
    """The probe's records over the run: 60 % compute, 10 % NCCL, 30 % idle in every interval."""
    length = interval_ms / 1000
    count = int(round((steps + 1) * STEP_S / length))
    ms = interval_ms
    with open(os.path.join(folder, f"metrics.rank{rank}.jsonl.gpu.jsonl"), "w") as f:
        for i in range(count):
            t0 = UNIX_START + i * length
            f.write(f'{{"v":1,"type":"gpu","rank":{rank},"t":{i * length:.6f},"device":{rank},'
                    f'"unix_t0":{t0:.6f},"unix_t1":{t0 + length:.6f},"busy_ms":{0.7 * ms:.4f},'
                    f'"compute_ms":{0.6 * ms:.4f},"nccl_ms":{0.1 * ms:.4f},"overlap_ms":0,'
                    f'"memcpy_ms":{0.01 * ms:.4f},"idle_ms":{0.3 * ms:.4f},'
                    f'"max_gap_ms":{0.1 * ms:.4f},"kernels":57,"nccl_kernels":2,"memcpys":1}}\n')
    return count


def write_job(folder, ranks, steps, gpu_interval_ms=0):
    """Returns how many gpu records it wrote."""
    gpu_records = 0
    for rank in range(ranks):
        if gpu_interval_ms > 0:
            gpu_records += write_gpu(folder, rank, steps, gpu_interval_ms)
        start = {"v": 1, "rank": rank, "t": 0.0, "type": "event", "name": "start",
                 "unix_time": UNIX_START,
                 "config": {"steps": steps, "lr": 0.01, "seed": 1234}, "world_size": ranks,
                 "trainer": "python", "helper": "faultline_probe",
                 "command": ["train.py", "--steps", str(steps)]}
        end = {"v": 1, "rank": rank, "t": steps * 0.01 + 0.01, "type": "event", "name": "end",
               "status": "ok", "step": steps}
        with open(os.path.join(folder, f"metrics.rank{rank}.jsonl"), "w") as f:
            f.write(json.dumps(start, separators=(",", ":")) + "\n")
            for s in range(1, steps + 1):
                t = s * STEP_S
                f.write(f'{{"v":1,"rank":{rank},"t":{t:.6f},"type":"event","name":"collective",'
                        f'"op":"allreduce","step":{s},"seq":{s}}}\n')
                f.write(f'{{"v":1,"rank":{rank},"t":{t + 0.005:.6f},"type":"step","step":{s},'
                        f'"loss":{4.0 - s * 1e-5 + rank * 1e-4:.9f},"grad_norm":1.4875530004501343,'
                        f'"lr":0.001,"step_ms":17.067,"data_ms":0.425,"comm_ms":8.159,'
                        f'"cpu_ms":{6.5 + (s * 7 + rank * 3) % 11 * 0.01:.3f},"tokens":128,'
                        f'"collectives":{s},"mem_bytes":255275008,"mem_total_bytes":25276194816,'
                        f'"nonfinite":0,"param_norm":18.696067810058594}}\n')
            f.write(json.dumps(end, separators=(",", ":")) + "\n")
    return gpu_records


def run_measured(argv):
    """Runs argv; returns its output (stdout and stderr), exit code, wall seconds and its own peak
    RSS in MiB."""
    begin = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - begin
    return output, os.waitstatus_to_exitcode(status), wall, usage.ru_maxrss / 1024


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--faultline", required=True, help="the faultline binary")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--dir", default="/tmp/import-scale", help="scratch folder (emptied)")
    p.add_argument("--report", action="store_true", help="then time `report RUN --html`")
    p.add_argument("--gpu-interval-ms", type=float, default=0,
                   help="also the CUPTI probe's gpu records, one per this many ms (0: none)")
    args = p.parse_args()

    shutil.rmtree(args.dir, ignore_errors=True)
    job = os.path.join(args.dir, "job")
    os.makedirs(job)
    gpu_records = write_job(job, args.ranks, args.steps, args.gpu_interval_ms)
    size = sum(os.path.getsize(os.path.join(job, n)) for n in os.listdir(job))
    db = os.path.join(args.dir, "faultline.db")
    output, code, wall, peak_mib = run_measured([args.faultline, "--db", db, "-q", "import", job])
    if code != 0:
        raise SystemExit(f"import failed ({code}): {output}")
    records = args.ranks * (2 * args.steps + 2) + gpu_records
    print(f"{args.ranks} ranks x {args.steps} steps: {records} records ({gpu_records} gpu), "
          f"{size / 2**20:.0f} MiB of metrics")
    print(f"import: {wall:.1f} s, {records / wall / 1000:.0f}k records/s, peak RSS "
          f"{peak_mib:.0f} MiB, store {os.path.getsize(db) / 2**20:.0f} MiB")
    print(output.strip().splitlines()[0])
    if args.report:
        page = os.path.join(args.dir, "run.html")
        output, code, wall, peak_mib = run_measured(
            [args.faultline, "--db", db, "-q", "report", "1", "--html", page])
        if code != 0:
            raise SystemExit(f"report failed ({code}): {output}")
        print(f"report: {wall:.1f} s, peak RSS {peak_mib:.0f} MiB, page "
              f"{os.path.getsize(page) / 2**20:.1f} MiB")
    shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
