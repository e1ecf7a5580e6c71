#!/usr/bin/python3
"""How much memory the helper's own gradient allreduce (s.all_reduce(), probes/python/README.md)
takes beyond the gradients: the growth of rank 0's peak resident size (ru_maxrss) across the
first step's allreduce, 2 ranks over Gloo, for one 49 M-element gradient and for 48 of 1 M, with
the helper's bucket size and with one bucket as large as every gradient together.

    /usr/bin/python3 tests/bench/allreduce_memory.py
"""
import os
import resource
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBES = os.path.join(ROOT, "probes", "python")
MODELS = {"one 49 M gradient": lambda nn: nn.Linear(7000, 7000, bias=False),
          "48 gradients of 1 M": lambda nn: nn.Sequential(
              *[nn.Linear(1000, 1000, bias=False) for _ in range(48)])}


def rank_main(model, bucket):
    import torch
    sys.path.insert(0, PROBES)
    import faultline_probe as fp
    if bucket:
        fp._ALLREDUCE_BUCKET = bucket
    run = fp.Run(config={"case": "allreduce_memory"}, seed=1, threads=1)
    net = MODELS[model](torch.nn)
    width = next(net.parameters()).shape[1]
    run.start(net, torch.optim.SGD(net.parameters(), lr=0.1))
    with run.step(1) as s:
        for samples in s.micro_batches(run.global_batch(1, 8, 4)):
            s.backward(net(torch.ones(len(samples), width)).square().mean())
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        s.all_reduce()
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        s.clip_grad_norm(0)
    run.end()
    if run.rank == 0:
        print((after - before) / 1024)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--rank":
        rank_main(sys.argv[2], int(sys.argv[3]))
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    print("growth of rank 0's peak resident size across the allreduce (MiB), 2 ranks, Gloo:")
    for model in MODELS:
        for bucket, label in ((0, "helper's buckets"), (1 << 40, "one bucket")):
            with tempfile.TemporaryDirectory() as tmp:
                env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
                procs = [subprocess.Popen(
                    [sys.executable, __file__, "--rank", model, str(bucket)],
                    stdout=subprocess.PIPE, text=True,
                    env=dict(env, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                             MASTER_PORT=str(port), FAULTLINE_OUT=tmp,
                             FAULTLINE_METRICS=os.path.join(tmp, f"m{rank}.jsonl"),
                             FAULTLINE_FINGERPRINT_EVERY="0")) for rank in range(2)]
                out = [p.communicate()[0] for p in procs]
                if any(p.returncode for p in procs):
                    sys.exit(f"allreduce_memory: a rank failed ({model}, {label})")
            print(f"  {model:22} {label:17} {float(out[0]):6.0f}")


if __name__ == "__main__":
    main()
