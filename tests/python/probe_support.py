"""What the tests of probes/python/faultline_probe.py share: examples/pytorch/train.py run as real
processes with real torch, the way faultline runs a user's trainer (the FAULTLINE_* environment
in, metrics JSONL, checkpoints and exit codes out), and checks of what they write.
"""
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBES = os.path.join(ROOT, "probes", "python")
TRAIN = os.path.join(ROOT, "examples", "pytorch", "train.py")
LOG_ONLY = os.path.join(ROOT, "examples", "pytorch", "train_log_only.py")
sys.path.insert(0, PROBES)

import faultline_probe as fp  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover - the whole file needs torch
    torch = None

TORCH_MAJOR = int(torch.__version__.split(".")[0]) if torch else 0
QUIET = ["--log-every", "0"]
N_SAMPLES = 1023  # train.py's default synthetic corpus: 32768 tokens, block 32
STEP_FIELDS = ("step", "loss", "grad_norm", "lr", "step_ms", "data_ms", "comm_ms", "tokens",
               "mem_bytes")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(**extra):
    """This process's environment without any faultline or torchrun variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FAULTLINE_") and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                                          "MASTER_ADDR", "MASTER_PORT")}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=PROBES)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def read_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def run_script(tmp, code, returncode):
    """Runs `code` with the helper as a script faultline started would be; its records."""
    path = os.path.join(tmp, "m.jsonl")
    result = subprocess.run([sys.executable, "-c", code], text=True, capture_output=True,
                            env=base_env(FAULTLINE_METRICS=path, FAULTLINE_OUT=tmp), timeout=60)
    if result.returncode != returncode:
        raise AssertionError(f"exit {result.returncode}, not {returncode}: {result.stderr}")
    return read_records(path), result.stderr


def signs(start, count):
    """s_i = +1 if the low bit of splitmix64(i) is set, else -1, for i in [start, start + count),
    from the helper's in-place bits."""
    x = torch.empty(count, dtype=torch.int64)
    return fp._sign_bits(start, x, torch.empty_like(x)).to(torch.float32) * 2 - 1


def run_in(tmp, case, **environ):
    """A Run in this process, as faultline would start it: metrics and output in `tmp`."""
    return fp.Run(config={"case": case}, seed=1, threads=1,
                  environ={"FAULTLINE_METRICS": os.path.join(tmp, "m.jsonl"), "FAULTLINE_OUT": tmp,
                           **environ})


# The start of a script that trains a one-layer model with the helper.
SCRIPT_START = ("import os, signal, time, torch, faultline_probe as fp\n"
                "run = fp.Run(config={'case': 'script'}, seed=1, threads=1)\n"
                "model = torch.nn.Linear(4, 1)\n"
                "run.start(model, torch.optim.SGD(model.parameters(), lr=0.1))\n")


class Trial:
    """One launch of a script on `ranks` ranks, as faultline's local launcher does it."""

    def __init__(self, directory, args, ranks=1, script=TRAIN, **env):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        port = free_port()
        self.procs = []
        for rank in range(ranks):
            rank_env = base_env(RANK=rank, WORLD_SIZE=ranks, LOCAL_RANK=rank,
                                MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                                FAULTLINE_METRICS=self.metrics(rank), FAULTLINE_OUT=directory,
                                **env)
            with open(os.path.join(directory, f"stderr.{rank}"), "w") as err:
                self.procs.append(subprocess.Popen([sys.executable, script] + list(args),
                                                   env=rank_env, stdout=subprocess.PIPE,
                                                   stderr=err, text=True))

    def metrics(self, rank=0):
        return os.path.join(self.dir, f"metrics.rank{rank}.jsonl")

    def wait(self, timeout=60):
        self.codes, self.stdout = [], []
        for proc in self.procs:
            out, _ = proc.communicate(timeout=timeout)
            self.codes.append(proc.returncode)
            self.stdout.append(out)
        return self

    def codes_ended_well(self):
        """Each rank's exit code, a SIGABRT after its end event read as the code its status
        means ("ok" 0, "nonfinite" 3, ...). torch 1.13 over Gloo now and then aborts a DDP
        process as it exits ("terminate called without an active exception": a Gloo worker
        thread frees a tensor during interpreter exit), after everything these tests check was
        written; faultline reads it the same way, as a teardown_crash warning. The helper's
        barrier at the end makes it rare (docs/external-trainers.md)."""
        meaning = {"ok": 0, "nonfinite": fp.EXIT_NONFINITE, "data_anomaly": fp.EXIT_DATA,
                   "oom": fp.EXIT_OOM}
        codes = []
        for rank, code in enumerate(self.codes):
            ends = self.records(rank, type_="event", name="end") if code == -signal.SIGABRT else []
            if ends and ends[-1].get("status") in meaning:
                sys.stderr.write(f"note: rank {rank} aborted after its end event (torch's exit)\n")
                code = meaning[ends[-1]["status"]]
            codes.append(code)
        return codes

    def records(self, rank=0, type_=None, name=None):
        records = read_records(self.metrics(rank))
        return [r for r in records if (type_ is None or r["type"] == type_)
                and (name is None or r.get("name") == name)]

    def stderr(self, rank=0):
        with open(os.path.join(self.dir, f"stderr.{rank}")) as f:
            return f.read()

    def kill(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def run(directory, args, ranks=1, **env):
    return Trial(directory, args, ranks, **env).wait()


def assert_same_steps(test, a, b, fields, ranks=(0, 1)):
    """Every step record of `b` equals `a`'s in `fields`, rank by rank (two Trials)."""
    for rank in ranks:
        mine, theirs = by_step(a.records(rank), "step"), by_step(b.records(rank), "step")
        test.assertEqual(sorted(theirs), sorted(mine), rank)
        for k in theirs:
            for field in fields:
                test.assertEqual(theirs[k][field], mine[k][field], (rank, k, field))


def by_step(records, type_, what=None):
    return {r["step"]: r for r in records if r["type"] == type_ and r.get("what") == what}


def sketch_distance(a, b):
    """|sketch(a) - sketch(b)| / |sketch(b)|, 0 when the hashes are equal (docs/ranks.md)."""
    if a["hash"] == b["hash"]:
        return 0.0
    diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(a["sketch"], b["sketch"])))
    return diff / math.sqrt(sum(y * y for y in b["sketch"]))


class ProtocolChecks:
    def assert_protocol(self, records, rank=0):
        """Every record follows docs/metrics-protocol.md."""
        self.assertTrue(records, "no records")
        last_t = 0.0
        for r in records:
            self.assertEqual(r["v"], 1, r)
            self.assertEqual(r["rank"], rank, r)
            self.assertIsInstance(r["t"], (int, float), r)
            self.assertGreaterEqual(r["t"], last_t, r)
            last_t = r["t"]
            self.assertIn(r["type"], ("step", "anomaly", "fingerprint", "event"), r)
            if r["type"] == "step":
                for field in STEP_FIELDS + ("cpu_ms", "mem_total_bytes", "collectives"):
                    self.assertIn(field, r)
            elif r["type"] == "fingerprint":
                self.assertIn(r["what"], ("params", "grads"))
                self.assertRegex(r["hash"], r"^[0-9a-f]{16}$")
                self.assertEqual(len(r["sketch"]), 16)
            elif r["type"] == "anomaly":
                self.assertIn(r["phase"], fp.PHASES)
                for field in ("step", "kind", "where", "detail"):
                    self.assertIn(field, r)
            else:
                self.assertIn("name", r)
        self.assertEqual(records[0].get("name"), "start")


class TrialCase(unittest.TestCase, ProtocolChecks):
    """Tests of real runs, each in a temporary folder of its own (self.tmp)."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()
