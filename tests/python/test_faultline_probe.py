"""Tests of probes/python/faultline_probe.py, mostly through examples/pytorch/train.py run as
real processes with real torch, the way faultline runs a user's trainer: the FAULTLINE_*
environment in, metrics JSONL, checkpoints and exit codes out.

    /usr/bin/python3 -m unittest discover -s tests/python

Needs Debian's python3 with python3-torch. Takes about a minute on two cores.
"""
import faulthandler
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import unittest.mock

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


class NoisySamples:
    """Random augmentation: numbers drawn from the global generators. At module level, so that
    DataLoader workers started by forkserver (Python 3.14's default) can unpickle it."""

    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.tensor([float(i), torch.rand(()).item(), random.random()])


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


# ------------------------------------------------------------------------------------------------

class TrialCase(unittest.TestCase, ProtocolChecks):
    """Tests of real runs, each in a temporary folder of its own (self.tmp)."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()


class HelperUnits(unittest.TestCase):
    """In-process: the definitions faultline relies on."""

    def test_global_batch_is_the_bundled_trainers_sampler(self):
        # docs/metrics-protocol.md: micro.toml (seed 7, 1022 samples, batch 8), step 12's batch.
        self.assertEqual(fp.global_batch(7, 12, 1022, 8), [815, 361, 620, 38, 671, 160, 501, 131])
        epoch = sum((fp.global_batch(3, k, 100, 10) for k in range(1, 11)), [])
        self.assertEqual(sorted(epoch), list(range(100)), "each epoch visits every sample once")
        self.assertEqual(fp.rank_share(list(range(8)), 1, 2), [4, 5, 6, 7])

    @unittest.skipIf(torch is None, "needs torch")
    def test_a_fingerprint_read_in_pieces_is_the_one_of_the_whole_buffer(self):
        # The helper never concatenates a model to fingerprint it: pieces of a few elements here
        # straddle the sketch's chunks and the tensors' ends, and give the whole buffer's hash,
        # norm and sketch (up to the order of their sums); gathered (FSDP2) the same.
        def of_the_buffer(tensors):
            dtypes = {t.dtype for t in tensors}
            flat = torch.cat([t.reshape(-1) if len(dtypes) == 1 else t.reshape(-1).float()
                              for t in tensors])
            values = flat.double()
            n = values.numel()
            chunk = -(-n // fp.SKETCH_SIZE)
            signed = values * signs(0, n).double()
            sketch = [signed[k * chunk:(k + 1) * chunk].sum().item() for k in range(16)]
            return fp.fingerprint_hash(flat), values.norm().item(), sketch

        torch.manual_seed(3)
        for piece in (7, 1 << 20):
            with unittest.mock.patch.object(fp, "_FINGERPRINT_PIECE", piece):
                for tensors in ([torch.randn(7, 5), torch.randn(3), torch.randn(100)],
                                [torch.randn(1)], [torch.randn(5), torch.randn(3).double()],
                                [torch.randn(40).bfloat16(), torch.randn(9).bfloat16()]):
                    want_hash, want_norm, want_sketch = of_the_buffer(tensors)
                    for got in (fp.fingerprint(tensors), fp.fingerprint(tensors, lambda t: t)):
                        self.assertEqual(got["hash"], want_hash)
                        self.assertAlmostEqual(got["norm"], want_norm, places=9)
                        for a, b in zip(got["sketch"], want_sketch):
                            self.assertAlmostEqual(a, b, places=9)

    @unittest.skipIf(torch is None, "needs torch")
    def test_an_unknown_fsdp_checkpoint_form_is_refused_naming_the_forms(self):
        with self.assertRaises(ValueError) as caught:
            fp.Run(fsdp_checkpoint="full")
        self.assertEqual(str(caught.exception), "fp.Run(fsdp_checkpoint='full'): expected one "
                         "of sharded, whole")

    @unittest.skipIf(torch is None, "needs torch")
    def test_sketch_signs_and_fingerprint_definition(self):
        mask = (1 << 64) - 1

        def splitmix64(x):
            x = (x + 0x9E3779B97F4A7C15) & mask
            x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
            x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
            return x ^ (x >> 31)

        n = 5000
        defined = [1.0 if splitmix64(i) & 1 else -1.0 for i in range(n)]
        self.assertEqual(signs(0, n).tolist(), defined)
        far = 2**62 + 12345  # the int64 arithmetic wraps as the uint64 one
        self.assertEqual(signs(far, 100).tolist(),
                         [1.0 if splitmix64(i) & 1 else -1.0 for i in range(far, far + 100)])
        values = [torch.linspace(-1, 1, 3000), torch.arange(2000, dtype=torch.float32)]
        got = fp.fingerprint(values)
        flat = torch.cat(values).tolist()
        chunk = -(-n // 16)
        want = [sum(defined[i] * flat[i] for i in range(k * chunk, min(n, (k + 1) * chunk)))
                for k in range(16)]
        for a, b in zip(got["sketch"], want):
            self.assertAlmostEqual(a, b, delta=1e-6 * max(1.0, abs(b)))
        self.assertAlmostEqual(got["norm"], math.sqrt(sum(x * x for x in flat)), places=1)
        self.assertEqual(got["hash"], fp.fingerprint_hash(values))

    def test_settings_read_the_environment_contract(self):
        s = fp.Settings({"RANK": "1", "WORLD_SIZE": "2", "FAULTLINE_STOP_AFTER": "7",
                         "FAULTLINE_PROBE": "full", "FAULTLINE_PROBE_FROM": "5",
                         "FAULTLINE_REPLAY_STEP": "3", "FAULTLINE_REPLAY_SAMPLES": "4,9",
                         "FAULTLINE_REPLAY_RANKS": "all", "FAULTLINE_ACCUMULATE": "2"})
        self.assertEqual((s.rank, s.world_size, s.local_rank, s.stop_after), (1, 2, 1, 7))
        self.assertEqual((s.replay_step, s.replay_samples, s.replay_ranks), (3, [4, 9], "all"))
        self.assertEqual((s.fingerprint_every, s.accumulate, s.checkpoint_every), (10, 2, 0))
        self.assertFalse(s.full_probes_at(4))
        self.assertTrue(s.full_probes_at(5))
        self.assertTrue(s.replays(3))
        quoted = fp.Settings({"FAULTLINE_REPLAY_STEP": "3", "FAULTLINE_REPLAY_SAMPLES": '"4,9"',
                              "FAULTLINE_CHECKPOINT_ON_HALT": "true"})
        self.assertEqual((quoted.replay_samples, quoted.checkpoint_on_halt), ([4, 9], True))
        batch_only = fp.Settings({"FAULTLINE_REPLAY_STEP": "3"})  # asks for step 3's batch event
        self.assertFalse(batch_only.replays(3))
        for bad in ({"FAULTLINE_PROBE": "loud"}, {"FAULTLINE_STOP_AFTER": "x"},
                    {"RANK": "2", "WORLD_SIZE": "2"}, {"FAULTLINE_REPLAY_SAMPLES": "3"},
                    {"FAULTLINE_ACCUMULATE": "0"}):
            with self.assertRaises(fp.UsageError, msg=str(bad)):
                fp.Settings(bad)

    def test_writer_imports_and_works_without_torch(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.jsonl")
            code = ("import sys; sys.modules['torch'] = None\n"
                    "import faultline_probe as fp\n"
                    f"w = fp.MetricsWriter({path!r}, rank=3)\n"
                    "w.start({'lr': 0.1}); w.step(1, float('nan'), float('inf'), 0.1, 2.0)\n"
                    "w.fingerprint(1, 'params', b'abc'); w.end()\n")
            result = subprocess.run([sys.executable, "-c", code], env=base_env(), text=True,
                                    capture_output=True, timeout=30)
            self.assertEqual(result.returncode, 0, result.stderr)
            records = read_records(path)
        self.assertEqual([r["type"] for r in records], ["event", "step", "fingerprint", "event"])
        self.assertEqual(records[1]["loss"], "nan")
        self.assertEqual(records[1]["grad_norm"], "inf")
        self.assertTrue(all(r["rank"] == 3 for r in records))


    @unittest.skipIf(torch is None, "needs torch")
    def test_an_exception_that_ends_the_script_ends_its_metrics_with_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            records, stderr = run_script(
                tmp, SCRIPT_START + "raise ValueError('shape mismatch in step 1')\n", 1)
        self.assertIn("Traceback", stderr)  # printed as before
        end = records[-1]
        self.assertEqual((end["name"], end["status"]), ("end", "error"))
        self.assertEqual(end["error"], "ValueError: shape mismatch in step 1")

    @unittest.skipIf(torch is None, "needs torch")
    def test_a_data_loader_is_made_after_start_and_read_one_micro_batch_after_another(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = run_in(tmp, "loader")
            dataset = [torch.full((2,), float(i)) for i in range(16)]
            with self.assertRaisesRegex(RuntimeError, r"before run\.data_loader"):
                run.data_loader(dataset, 4, 3)
            model = torch.nn.Linear(2, 1)
            run.start(model, torch.optim.SGD(model.parameters(), lr=0.1))
            with self.assertRaisesRegex(TypeError, "chooses drop_last, shuffle itself"):
                run.data_loader(dataset, 4, 3, shuffle=True, drop_last=True)
            loader = run.data_loader(dataset, 4, 3, grad_accum=2)
            run.steps(3)
            for step in (1, 2):
                with run.step(step) as s:
                    batch = run.global_batch(step, 16, 4)
                    for k, x in enumerate(s.micro_batches(loader=loader)):
                        self.assertEqual(s.micro_samples, batch[2 * k:2 * k + 2])
                        self.assertEqual(x[:, 0].tolist(), [float(i) for i in s.micro_samples])
                        s.backward(model(x).square().mean())
                        if step == 2:
                            break  # the step's second micro-batch is left in the loader
            # Step 3 would get step 2's second micro-batch: a loop that skips one is told so.
            with self.assertRaisesRegex(RuntimeError, "step 3: the data loader delivered"):
                with run.step(3) as s:
                    next(iter(s.micro_batches(loader=loader)))
            run.end()

    @unittest.skipIf(torch is None, "needs torch")
    def test_a_process_group_other_than_the_environments_is_a_usage_error(self):
        import torch.distributed as dist
        with unittest.mock.patch.dict(os.environ, USE_LIBUV="0"):  # a torch without libuv
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}",
                                    rank=0, world_size=1)
        try:
            with tempfile.TemporaryDirectory() as tmp, \
                    open(os.path.join(tmp, "stderr"), "w+") as err:
                with self.assertRaises(SystemExit) as exit_, unittest.mock.patch("sys.stderr", err):
                    run_in(tmp, "group", RANK="1", WORLD_SIZE="2")
                err.seek(0)
                self.assertIn("the script's process group is rank 0 of 1, but RANK and "
                              "WORLD_SIZE say 1 of 2", err.read())
            self.assertEqual(exit_.exception.code, 2)
        finally:
            dist.destroy_process_group()
            faulthandler.enable()  # back on this process's own stderr

    @unittest.skipIf(torch is None, "needs torch")
    def test_state_without_a_state_dict_is_a_type_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = run_in(tmp, "state")
            model = torch.nn.Linear(2, 1)
            with self.assertRaisesRegex(TypeError, "'ema' is a list, which has no state_dict"):
                run.start(model, torch.optim.SGD(model.parameters(), lr=0.1), state={"ema": []})
            run.end()

    @unittest.skipIf(torch is None, "needs torch")
    def test_a_sample_draws_the_same_random_numbers_in_any_worker_and_any_replay(self):
        def loaded(workers, steps, **environ):
            """{(step, sample): its loaded row}, and the main process's next torch.rand."""
            with tempfile.TemporaryDirectory() as tmp:
                run = run_in(tmp, "noise", **environ)
                model = torch.nn.Linear(3, 1)
                run.start(model, torch.optim.SGD(model.parameters(), lr=0.1))
                loader = run.data_loader(NoisySamples(), 4, steps, num_workers=workers)
                drawn = {}
                for step in run.steps(steps):
                    with run.step(step) as s:
                        for x in s.micro_batches(loader=loader):
                            drawn.update({(step, i): row
                                          for i, row in zip(s.micro_samples, x.tolist())})
                            s.backward(model(x).square().mean())
                after = torch.rand(()).item()
                run.end()
            return drawn, after

        in_main, after_main = loaded(0, 5)
        in_workers, after_workers = loaded(2, 5)
        self.assertEqual(in_workers, in_main)
        self.assertEqual(len({row[1] for row in in_main.values()}), 20, "a draw per step and sample")
        self.assertEqual(after_workers, after_main, "loading left the main process's RNG alone")
        a, b = fp.global_batch(1, 2, 16, 4)[1:3]
        replayed, _ = loaded(0, 2, FAULTLINE_REPLAY_STEP="2", FAULTLINE_REPLAY_SAMPLES=f"{a},{b}")
        self.assertEqual({k: v for k, v in replayed.items() if k[0] == 2},
                         {(2, a): in_main[(2, a)], (2, b): in_main[(2, b)]})

    @unittest.skipIf(torch is None, "needs torch")
    def test_a_forked_child_that_gets_sigterm_writes_nothing_to_its_parents_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            records, _ = run_script(tmp, SCRIPT_START + (
                "pid = os.fork()\n"
                "if pid == 0:\n"
                "    time.sleep(30)\n"
                "    os._exit(0)\n"
                "time.sleep(0.3)\n"
                "os.kill(pid, signal.SIGTERM)\n"
                "_, status = os.waitpid(pid, 0)\n"
                "assert os.WTERMSIG(status) == signal.SIGTERM, status\n"
                "run.end()\n"), 0)
        ends = [r for r in records if r.get("name") == "end"]
        self.assertEqual([e["status"] for e in ends], ["ok"])

    @unittest.skipIf(torch is None, "needs torch")
    def test_an_exception_after_sigterm_still_ends_the_metrics_as_terminated(self):
        # Under load the script's main thread can see the SIGTERM's aftermath (a DataLoader
        # worker killed with it) and raise before the helper's watcher thread writes the end
        # event: the end still says the scheduler's signal, not the error it caused.
        with tempfile.TemporaryDirectory() as tmp:
            records, _ = run_script(tmp, SCRIPT_START + (
                "os.kill(os.getpid(), signal.SIGTERM)\n"
                "raise RuntimeError('DataLoader worker (pid 1) is killed by signal: Terminated')\n"),
                -signal.SIGTERM)
        ends = [r for r in records if r.get("name") == "end"]
        self.assertEqual([(e["status"], e["signal"]) for e in ends], [("terminated", "SIGTERM")])
        self.assertIn("DataLoader worker", ends[0]["error"])

    @unittest.skipIf(torch is None, "needs torch")
    def test_an_op_without_a_deterministic_kernel_is_named_and_warn_runs_it(self):
        # put_(accumulate=False) has no deterministic kernel (as F.interpolate's backward on
        # CUDA has none): the helper's strict determinism stops it at its step with exit 2,
        # naming the op and the way on; determinism="warn" runs it and records that it did.
        def script(determinism):
            return ("import torch, faultline_probe as fp\n"
                    f"run = fp.Run(config={{'case': 'put'}}, seed=1, threads=1{determinism})\n"
                    "model = torch.nn.Linear(4, 1)\n"
                    "run.start(model, torch.optim.SGD(model.parameters(), lr=0.1))\n"
                    "for step in run.steps(3):\n"
                    "    with run.step(step) as s:\n"
                    "        for samples in s.micro_batches(run.global_batch(step, 8, 4)):\n"
                    "            x = torch.ones(len(samples), 4)\n"
                    "            if step == 2:\n"
                    "                x.view(-1).put_(torch.tensor([0, 0]), torch.tensor([1., 2.]))\n"
                    "            s.backward(model(x).square().mean())\n"
                    "        s.clip_grad_norm(1.0)\n"
                    "run.end()\n")
        with tempfile.TemporaryDirectory() as tmp:
            records, stderr = run_script(tmp, script(""), fp.EXIT_USAGE)
        self.assertIn("step 2: put_ has no deterministic implementation", stderr)
        self.assertIn('determinism="warn"', stderr)
        self.assertTrue(records[0]["deterministic"]["use_deterministic_algorithms"])
        self.assertFalse(records[0]["deterministic"]["warn_only"])
        self.assertEqual([r["step"] for r in records if r["type"] == "step"], [1])
        self.assertEqual((records[-1]["name"], records[-1]["status"]), ("end", "error"))
        self.assertIn("put_ does not have a deterministic implementation", records[-1]["error"])
        with tempfile.TemporaryDirectory() as tmp:
            records, stderr = run_script(tmp, script(", determinism='warn'"), 0)
        self.assertTrue(records[0]["deterministic"]["warn_only"])
        self.assertIn('determinism="warn"', " ".join(records[0]["nondeterministic"]))
        self.assertEqual([r["step"] for r in records if r["type"] == "step"], [1, 2, 3])
        self.assertIn("put_ does not have a deterministic implementation", stderr)  # warned
        with self.assertRaisesRegex(ValueError, "determinism='loose': it is one of strict, warn"):
            fp.make_deterministic(determinism="loose")

    @unittest.skipIf(torch is None, "needs torch")
    def test_out_of_memory_in_a_step_exits_5_with_its_records(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.jsonl")
            run = run_in(tmp, "oom")
            model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 1))
            run.start(model, torch.optim.SGD(model.parameters(), lr=0.1))
            with self.assertRaises(SystemExit) as exit_:
                for step in run.steps(3):
                    with run.step(step) as s:
                        for samples in s.micro_batches(run.global_batch(step, 16, 4)):
                            s.backward(model(torch.randn(len(samples), 4)).square().mean())
                        s.clip_grad_norm(1.0)
                        if step == 2:
                            raise MemoryError("simulated: cannot allocate 1 TiB")
            records = read_records(path)
        self.assertEqual(exit_.exception.code, fp.EXIT_OOM)
        self.assertEqual([r["step"] for r in records if r["type"] == "step"], [1])
        anomaly, = [r for r in records if r["type"] == "anomaly"]
        self.assertEqual((anomaly["step"], anomaly["kind"]), (2, "oom"))
        self.assertIn("1 TiB", anomaly["detail"])
        self.assertEqual((records[-1]["name"], records[-1]["status"]), ("end", "oom"))


# ------------------------------------------------------------------------------------------------

@unittest.skipIf(torch is None, "needs torch")
class OneRank(TrialCase):
    def test_checkpoints_resume_bitwise_and_stop_after(self):
        full = run(os.path.join(self.tmp, "full"), ["--steps", "10", "--grad-accum", "2"] + QUIET,
                   FAULTLINE_CHECKPOINT_EVERY=4, FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(full.codes, [0], full.stderr())
        records = full.records()
        self.assert_protocol(records)
        start = records[0]
        for field in ("config", "config_hash", "world_size", "local_rank", "host", "torch_version",
                      "python_version", "device", "threads", "deterministic", "nondeterministic"):
            self.assertIn(field, start)
        self.assertEqual(start["nondeterministic"], [])
        self.assertEqual(start["threads"], 1)
        self.assertEqual([r["step"] for r in records if r["type"] == "step"], list(range(1, 11)))
        checkpoints = full.records(type_="event", name="checkpoint")
        self.assertEqual([c["step"] for c in checkpoints], [4, 8])
        for c in checkpoints:
            self.assertTrue(os.path.isabs(c["path"]) and os.path.exists(c["path"]), c)
        end = records[-1]
        self.assertEqual((end["name"], end["status"], end["step"]), ("end", "ok", 10))
        # Order within a step: [batch], grads fingerprint, step, params fingerprint, checkpoint.
        at4 = [(r["type"], r.get("what") or r.get("name")) for r in records
               if r.get("step") == 4 and r.get("name") != "batch"]
        self.assertEqual(at4, [("fingerprint", "grads"), ("step", None),
                               ("fingerprint", "params"), ("event", "checkpoint")])
        losses = [r["loss"] for r in records if r["type"] == "step"]
        self.assertLess(losses[-1], losses[0])

        resumed = run(os.path.join(self.tmp, "resumed"),
                      ["--steps", "10", "--grad-accum", "2"] + QUIET,
                      FAULTLINE_RESUME=checkpoints[0]["path"], FAULTLINE_STOP_AFTER=7,
                      FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(resumed.codes, [0], resumed.stderr())
        again = resumed.records()
        self.assert_protocol(again)
        resume = resumed.records(type_="event", name="resume")
        self.assertEqual([(r["step"], r["path"]) for r in resume], [(4, checkpoints[0]["path"])])
        self.assertEqual(again[0]["first_step"], 5)
        steps = by_step(again, "step")
        self.assertEqual(sorted(steps), [5, 6, 7], "resumed at 5, stopped after 7")
        self.assertEqual((again[-1]["name"], again[-1]["status"], again[-1]["step"]),
                         ("end", "ok", 7))
        before = by_step(records, "step")
        for k in steps:
            for field in ("loss", "grad_norm", "lr", "param_norm"):
                self.assertEqual(steps[k][field], before[k][field], (k, field))
            for what in ("grads", "params"):
                self.assertEqual(by_step(again, "fingerprint", what)[k],
                                 {**by_step(records, "fingerprint", what)[k],
                                  "t": by_step(again, "fingerprint", what)[k]["t"]}, (k, what))

    def test_a_checkpoint_loads_with_the_weights_only_default_of_torch_2_6_and_resumes(self):
        # torch 2.6 made torch.load(weights_only=True) the default; it refuses a numpy array (as
        # numpy's RNG state is) and torch's TorchVersion, so a user inspecting a finding's
        # checkpoint, or a resume, would fail. This torch is older: the script below gives its
        # torch.load that default, as a current torch has it.
        script = os.path.join(self.tmp, "train_torch26.py")
        with open(script, "w") as f:
            f.write("import runpy, sys, numpy, torch\n"
                    "_load = torch.load\n"
                    "def load(*args, **kwargs):\n"
                    "    kwargs.setdefault('weights_only', True)\n"
                    "    return _load(*args, **kwargs)\n"
                    "torch.load = load\n"
                    f"sys.argv[0] = {TRAIN!r}\n"
                    f"runpy.run_path({TRAIN!r}, run_name='__main__')\n")
        args = ["--steps", "4"] + QUIET
        full = Trial(os.path.join(self.tmp, "full"), args, script=script,
                     FAULTLINE_CHECKPOINT_EVERY=2).wait()
        self.assertEqual(full.codes, [0], full.stderr())
        checkpoint = full.records(type_="event", name="checkpoint")[0]["path"]
        # As a user loads it to look inside (torch 1.13's weights-only reader has no floats).
        inspected = torch.load(checkpoint, weights_only=TORCH_MAJOR >= 2)
        self.assertIn("numpy", inspected["rng"][0])
        resumed = Trial(os.path.join(self.tmp, "resumed"), args, script=script,
                        FAULTLINE_RESUME=checkpoint).wait()
        self.assertEqual(resumed.codes, [0], resumed.stderr())
        self.assertEqual(by_step(resumed.records(), "step")[4]["loss"],
                         by_step(full.records(), "step")[4]["loss"])

    def test_a_checkpoint_of_a_format_this_helper_does_not_know_is_refused_naming_it(self):
        full = run(os.path.join(self.tmp, "full"), ["--steps", "2"] + QUIET,
                   FAULTLINE_CHECKPOINT_EVERY=2)
        self.assertEqual(full.codes, [0], full.stderr())
        checkpoint = full.records(type_="event", name="checkpoint")[0]["path"]
        saved = torch.load(checkpoint, weights_only=False)
        self.assertEqual(saved["version"], 1)  # without FSDP: the optimizer's own state_dict
        saved["version"] = 4
        torch.save(saved, checkpoint)
        resumed = run(os.path.join(self.tmp, "resumed"), ["--steps", "4"] + QUIET,
                      FAULTLINE_RESUME=checkpoint)
        self.assertEqual(resumed.codes, [fp.EXIT_USAGE])
        self.assertIn(f"cannot resume from {checkpoint} (FAULTLINE_RESUME): its format version "
                      "is 4; this helper reads 1, 2 and 3", resumed.stderr())

    def test_a_loss_scaler_skips_overflowing_steps_and_a_resume_keeps_its_scale(self):
        args = ["--steps", "12", "--precision", "fp16", "--overflow-step", "5",
                "--overflow-steps", "3"] + QUIET
        full = run(os.path.join(self.tmp, "full"), args, FAULTLINE_CHECKPOINT_EVERY=8,
                   FAULTLINE_PROBE="full", FAULTLINE_PROBE_FROM=5)
        self.assertEqual(full.codes, [0], full.stderr())  # an overflow is no halt
        records = full.records()
        self.assert_protocol(records)
        self.assertEqual(full.records(type_="anomaly"), [])
        steps = by_step(records, "step")
        self.assertEqual([k for k in steps if steps[k]["skipped"]], [5, 6, 7])
        self.assertEqual([steps[k]["loss_scale"] for k in range(4, 10)],
                         [65536.0, 65536.0, 32768.0, 16384.0, 8192.0, 8192.0])
        for k in (5, 6, 7):
            self.assertEqual(steps[k]["grad_norm"], "inf")
            self.assertTrue(math.isfinite(steps[k]["loss"]))
            # No update: the parameters are the previous step's.
            self.assertEqual(steps[k]["param_norm"], steps[4]["param_norm"])
        self.assertNotEqual(steps[8]["param_norm"], steps[4]["param_norm"])
        torch_has_one = hasattr(torch.amp, "GradScaler")  # for the CPU too: torch 2.3 on
        self.assertEqual(records[0]["loss_scaler"],
                         "GradScaler" if torch_has_one else "DynamicLossScaler")
        end = records[-1]
        self.assertEqual((end["status"], end["skipped_steps"]), ("ok", 3))
        # The checkpoint keeps the scale (8192 after three skips): the replay is the run's.
        checkpoint, = full.records(type_="event", name="checkpoint")
        resumed = run(os.path.join(self.tmp, "resumed"), args,
                      FAULTLINE_RESUME=checkpoint["path"])
        self.assertEqual(resumed.codes, [0], resumed.stderr())
        again = by_step(resumed.records(), "step")
        self.assertEqual(sorted(again), list(range(9, 13)))
        for k in again:
            for field in ("loss", "grad_norm", "loss_scale", "param_norm", "skipped"):
                self.assertEqual(again[k][field], steps[k][field], (k, field))

    def test_overflow_without_a_loss_scaler_still_halts(self):
        trial = run(self.tmp, ["--steps", "8", "--overflow-step", "3"] + QUIET)
        self.assertEqual(trial.codes, [3], trial.stderr())
        anomaly, = trial.records(type_="anomaly")
        self.assertEqual((anomaly["step"], anomaly["kind"]), (3, "nonfinite"))
        self.assertNotIn("skipped", by_step(trial.records(), "step")[3])

    def test_planted_nan_full_probes_name_the_module_and_save_the_last_good_state(self):
        trial = run(self.tmp, ["--steps", "8", "--nan-step", "3", "--nan-layer", "blocks.0.attn"]
                    + QUIET, FAULTLINE_PROBE="full", FAULTLINE_PROBE_FROM=3,
                    FAULTLINE_CHECKPOINT_ON_HALT=1, FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(trial.codes, [3], trial.stderr())
        records = trial.records()
        self.assert_protocol(records)
        # Fingerprinted every step, every step has its batch event; else only from PROBE_FROM.
        batches = trial.records(type_="event", name="batch")
        self.assertEqual([b["step"] for b in batches], [1, 2, 3])
        batches = batches[2:]
        self.assertEqual(batches[0]["samples"], fp.global_batch(1234, 3, N_SAMPLES, 8))
        anomaly, = trial.records(type_="anomaly")
        self.assertEqual((anomaly["step"], anomaly["kind"], anomaly["phase"], anomaly["where"],
                          anomaly["probe"]), (3, "nonfinite", "forward", "blocks.0.attn", "full"))
        self.assertEqual(anomaly["samples"], batches[0]["samples"], "every row of the batch")
        step3 = by_step(records, "step")[3]
        self.assertEqual(step3["loss"], "nan")
        self.assertGreater(step3["nonfinite"], 0)
        checkpoint, = trial.records(type_="event", name="checkpoint")
        self.assertEqual(checkpoint["step"], 2)
        self.assertTrue(os.path.exists(checkpoint["path"]))
        self.assertEqual((records[-1]["name"], records[-1]["status"], records[-1]["step"]),
                         ("end", "nonfinite", 3))
        self.assertNotIn(3, by_step(records, "fingerprint", "params"))
        saved = torch.load(checkpoint["path"])["model"]  # head.weight is wte.weight (tied)
        self.assertEqual(fp.fingerprint_hash([v for k, v in saved.items() if k != "head.weight"]),
                         by_step(records, "fingerprint", "params")[2]["hash"])
        # The halt checkpoint is the state after step 2: resuming from it replays step 3 alike.
        resumed = run(os.path.join(self.tmp, "resumed"),
                      ["--steps", "8", "--nan-step", "3", "--nan-layer", "blocks.0.attn"] + QUIET,
                      FAULTLINE_RESUME=checkpoint["path"], FAULTLINE_STOP_AFTER=3)
        self.assertEqual(resumed.codes, [3], resumed.stderr())
        anomaly, = resumed.records(type_="anomaly")
        self.assertEqual((anomaly["phase"], anomaly["where"], anomaly["probe"]),
                         ("loss", "loss", "cheap"), "cheap probes only see the loss")

    def test_a_torch_data_loader_trains_the_same_bits_resumes_and_replays(self):
        # DataLoader workers load each micro-batch the step asks for: the same bits as indexing,
        # a resume loads from its first step, and a replay loads the replayed samples only.
        args = ["--steps", "6", "--grad-accum", "2"] + QUIET
        index = Trial(os.path.join(self.tmp, "index"), args, FAULTLINE_FINGERPRINT_EVERY=1)
        loaded = Trial(os.path.join(self.tmp, "loaded"), args + ["--loader", "torch"],
                       FAULTLINE_FINGERPRINT_EVERY=1, FAULTLINE_CHECKPOINT_EVERY=3)
        index.wait()
        loaded.wait()
        self.assertEqual(loaded.codes, [0], loaded.stderr())
        self.assert_protocol(loaded.records())

        def bits(records):
            return [(r["step"], r["type"], r.get("what"), r.get("hash"), r.get("loss"),
                     r.get("grad_norm")) for r in records if r["type"] in ("step", "fingerprint")]

        self.assertEqual(bits(loaded.records()), bits(index.records()))
        self.assertTrue(all(r["data_ms"] > 0 for r in loaded.records(type_="step")))
        checkpoint = loaded.records(type_="event", name="checkpoint")[0]
        self.assertEqual(checkpoint["step"], 3)
        resumed = run(os.path.join(self.tmp, "resumed"), args + ["--loader", "torch"],
                      FAULTLINE_RESUME=checkpoint["path"], FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(resumed.codes, [0], resumed.stderr())
        self.assertEqual(bits(resumed.records()), [b for b in bits(index.records()) if b[0] > 3])

        batch = fp.global_batch(1234, 2, N_SAMPLES, 8)
        poison, other = batch[5], batch[2]
        replay = run(os.path.join(self.tmp, "replay"),
                     ["--steps", "4", "--loader", "torch", "--poison-sample", str(poison)] + QUIET,
                     FAULTLINE_PROBE="full", FAULTLINE_PROBE_FROM=2, FAULTLINE_REPLAY_STEP=2,
                     FAULTLINE_REPLAY_SAMPLES=f"{poison},{other}")
        self.assertEqual(replay.codes, [3], replay.stderr())
        anomaly, = replay.records(type_="anomaly")
        self.assertEqual((anomaly["where"], anomaly["samples"]), ("wte", [poison]))
        self.assertEqual(by_step(replay.records(), "step")[2]["tokens"], 2 * 32)

    def assert_draws_replay(self, args):
        """train.py with `args`, indexed in the main process and loaded by two DataLoader
        workers, and resumed from a checkpoint: the same bits. The indexed run's records."""
        index = Trial(os.path.join(self.tmp, "index"), args, FAULTLINE_FINGERPRINT_EVERY=1,
                      FAULTLINE_CHECKPOINT_EVERY=3)
        loaded = Trial(os.path.join(self.tmp, "loaded"), args + ["--loader", "torch"],
                       FAULTLINE_FINGERPRINT_EVERY=1)
        index.wait()
        loaded.wait()
        self.assertEqual((index.codes, loaded.codes), ([0], [0]), loaded.stderr())
        assert_same_steps(self, index, loaded, ("loss", "grad_norm"), ranks=(0,))
        checkpoint = index.records(type_="event", name="checkpoint")[0]
        resumed = run(os.path.join(self.tmp, "resumed"), args + ["--loader", "torch"],
                      FAULTLINE_RESUME=checkpoint["path"], FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(resumed.codes, [0], resumed.stderr())
        full = by_step(index.records(), "fingerprint", "params")
        self.assertEqual({k: r["hash"] for k, r in by_step(resumed.records(), "fingerprint",
                                                           "params").items()},
                         {k: r["hash"] for k, r in full.items() if k > 3})
        return index.records()

    def test_augmentation_drawn_as_samples_load_is_the_same_indexed_in_workers_and_resumed(self):
        # --token-noise draws each sample's noise under run.sample_rng: indexed in the main
        # process or loaded by two DataLoader workers, and resumed from a checkpoint, the same bits.
        self.assert_draws_replay(["--steps", "6", "--grad-accum", "2", "--token-noise", "0.2"]
                                 + QUIET)

    def test_masking_across_a_micro_batch_is_the_same_in_collate_indexed_and_resumed(self):
        # --batch-noise masks across each micro-batch: in the DataLoader's collate_fn (which
        # run.data_loader calls under the micro-batch's batch_seed) or under s.batch_rng.
        args = ["--steps", "6", "--grad-accum", "2"] + QUIET
        records = self.assert_draws_replay(args + ["--batch-noise", "0.2"])
        plain = run(os.path.join(self.tmp, "plain"), args)
        self.assertEqual(plain.codes, [0], plain.stderr())
        self.assertNotEqual(by_step(records, "step")[1]["loss"],
                            by_step(plain.records(), "step")[1]["loss"], "the noise is drawn")
        self.assertEqual(fp.batch_seed(1, 2, [5, 9]), fp.batch_seed(1, 2, [5, 9]))
        self.assertNotEqual(fp.batch_seed(1, 2, [5, 9]), fp.batch_seed(1, 2, [9, 5]))
        self.assertNotEqual(fp.batch_seed(1, 2, [5, 9]), fp.batch_seed(1, 3, [5, 9]))

    def test_state_given_to_start_is_checkpointed_and_a_checkpoint_without_it_is_refused(self):
        # --ema-teacher: a mean teacher's weights, given to run.start(state=...): resumed bitwise.
        args = ["--steps", "6", "--ema-teacher", "0.9"] + QUIET
        full = run(os.path.join(self.tmp, "full"), args, FAULTLINE_CHECKPOINT_EVERY=3,
                   FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(full.codes, [0], full.stderr())
        self.assertEqual(full.records(type_="event", name="start")[0]["state"], ["teacher"])
        path = full.records(type_="event", name="checkpoint")[0]["path"]
        resumed = run(os.path.join(self.tmp, "resumed"), args, FAULTLINE_RESUME=path,
                      FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(resumed.codes, [0], resumed.stderr())
        hashes = {k: r["hash"] for k, r in by_step(full.records(), "fingerprint", "params").items()}
        self.assertEqual({k: r["hash"] for k, r in by_step(resumed.records(), "fingerprint",
                                                           "params").items()},
                         {k: h for k, h in hashes.items() if k > 3})
        # The same checkpoint under a script that does not name the teacher: refused, not run on.
        refused = run(os.path.join(self.tmp, "refused"), ["--steps", "6"] + QUIET,
                      FAULTLINE_RESUME=path)
        self.assertEqual(refused.codes, [2])
        self.assertIn("the checkpoint's state is teacher, run.start(state=...) names none",
                      refused.stderr())

    def test_full_probes_name_the_module_under_activation_checkpointing(self):
        # The recomputed forward of a checkpointed block must save what the first one saved:
        # the probes' checks run outside autograd, so the backward pass does not break.
        trial = run(self.tmp, ["--steps", "3", "--activation-checkpointing", "1", "--nan-step", "2",
                               "--nan-layer", "blocks.1.mlp"] + QUIET, FAULTLINE_PROBE="full")
        self.assertEqual(trial.codes, [3], trial.stderr())
        anomaly, = trial.records(type_="anomaly")
        self.assertEqual((anomaly["step"], anomaly["phase"], anomaly["where"]),
                         (2, "forward", "blocks.1.mlp"))

    def test_poisoned_sample_in_a_replayed_batch(self):
        batch = fp.global_batch(1234, 2, N_SAMPLES, 8)
        poison, other = batch[5], batch[2]
        trial = run(self.tmp, ["--steps", "4", "--poison-sample", str(poison)] + QUIET,
                    FAULTLINE_PROBE="full", FAULTLINE_PROBE_FROM=2, FAULTLINE_REPLAY_STEP=2,
                    FAULTLINE_REPLAY_SAMPLES=f"{poison},{other},999999")
        self.assertEqual(trial.codes, [3], trial.stderr())
        self.assert_protocol(trial.records())
        event, = trial.records(type_="event", name="batch")
        self.assertEqual(event["samples"], [other, poison], "replayed samples, in batch order")
        self.assertEqual(by_step(trial.records(), "step")[2]["tokens"], 2 * 32)
        anomaly, = trial.records(type_="anomaly")
        self.assertEqual((anomaly["phase"], anomaly["where"], anomaly["samples"]),
                         ("forward", "wte", [poison]))

    def test_bad_token_is_a_data_anomaly(self):
        data = os.path.join(self.tmp, "bytes.bin")
        with open(data, "wb") as f:
            f.write(bytes(range(256)) * 40)
        trial = run(self.tmp, ["--steps", "3", "--data", data] + QUIET)
        self.assertEqual(trial.codes, [4], trial.stderr())
        anomaly, = trial.records(type_="anomaly")
        self.assertEqual((anomaly["kind"], anomaly["phase"], len(anomaly["samples"])),
                         ("data", "data", 1))
        self.assertEqual(trial.records()[-1]["status"], "data_anomaly")
        self.assertEqual(trial.records(type_="step"), [])

    def test_sigterm_ends_the_metrics_as_terminated_and_still_kills(self):
        # A scheduler's SIGTERM (a time limit) to the script and to its DataLoader workers: one
        # end event, the script's, and the process dies of the signal as without the helper.
        trial = Trial(self.tmp, ["--steps", "100000", "--loader", "torch", "--workers", "2"]
                      + QUIET)
        pid = trial.procs[0].pid
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.exists(trial.metrics()) and any(
                r["type"] == "step" for r in read_records(trial.metrics())[:-1])):
            time.sleep(0.1)
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            workers = [int(w) for w in f.read().split()]
        self.assertEqual(len(workers), 2, "the DataLoader's workers")
        # The script first: a worker that dies first would be a DataLoader error in it.
        trial.procs[0].send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                os.kill(worker, signal.SIGTERM)
            except ProcessLookupError:
                pass
        trial.wait()
        time.sleep(0.5)  # a worker that wrote would have written by now
        self.assertEqual(trial.codes, [-signal.SIGTERM], trial.stderr())
        ends = trial.records(type_="event", name="end")
        self.assertEqual(len(ends), 1, ends)
        self.assertEqual((ends[0]["status"], ends[0]["signal"]), ("terminated", "SIGTERM"))
        self.assertGreaterEqual(ends[0]["step"], 1)

    def test_sigusr1_dumps_the_stacks_of_a_hung_rank(self):
        trial = Trial(self.tmp, ["--steps", "5", "--hang-rank", "0", "--hang-step", "2"] + QUIET)
        try:
            deadline = time.time() + 60
            while time.time() < deadline:
                if os.path.exists(trial.metrics()) and trial.records(type_="step"):
                    break
                time.sleep(0.1)
            time.sleep(0.3)
            trial.procs[0].send_signal(signal.SIGUSR1)
            # Every thread is dumped, the helper's SIGTERM watcher first: wait for the main
            # thread's frames, not the first "File ", or the dump is read half written.
            deadline = time.time() + 10
            while " in at_step_start" not in trial.stderr() and time.time() < deadline:
                time.sleep(0.1)
            self.assertIsNone(trial.procs[0].poll(), "SIGUSR1 dumps stacks, it does not kill")
        finally:
            trial.kill()
        stacks = trial.stderr()
        self.assertIn("thread", stacks.lower())
        self.assertRegex(stacks, r'File ".*train\.py", line \d+ in at_step_start')
        self.assertEqual([r["step"] for r in trial.records(type_="step")], [1])

    def test_outside_faultline_it_trains_and_records_nothing(self):
        result = subprocess.run([sys.executable, TRAIN, "--steps", "100", "--log-every", "50"],
                                cwd=self.tmp, env=base_env(), text=True, capture_output=True,
                                timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        losses = [float(x) for x in re.findall(r"loss (\S+)", result.stdout)]
        self.assertEqual(len(losses), 3, result.stdout)  # steps 1, 50, 100
        self.assertLess(losses[-1], losses[0] - 1.5, "the synthetic language is learnt")
        self.assertEqual(os.listdir(self.tmp), [])

    def test_cheap_probes_cost_little(self):
        """Median step_ms with the always-on cheap probes against FAULTLINE_PROBE=off. Printed,
        not asserted: timing on a shared machine is noise."""
        medians = {}
        for level in ("off", "cheap", "off", "cheap"):
            trial = run(os.path.join(self.tmp, level), ["--steps", "200"] + QUIET,
                        FAULTLINE_PROBE=level)
            self.assertEqual(trial.codes, [0], trial.stderr())
            times = sorted(r["step_ms"] for r in trial.records(type_="step") if r["step"] > 2)
            medians.setdefault(level, []).append(times[len(times) // 2])
        off, cheap = min(medians["off"]), min(medians["cheap"])
        print(f"\nfaultline_probe: median step {cheap:.3f} ms cheap, {off:.3f} ms off: "
              f"ratio {cheap / off:.3f} (200 steps, best of 2)", file=sys.stderr)


# ------------------------------------------------------------------------------------------------

@unittest.skipIf(torch is None, "needs torch")
class Ranks(TrialCase):
    def test_a_process_group_the_script_made_is_used_and_left_to_it(self):
        # Most scripts call dist.init_process_group themselves, before anything else: the helper
        # uses that group (no second init) and leaves its end to the script.
        script = os.path.join(self.tmp, "own_group.py")
        with open(script, "w") as f:
            f.write("import torch, torch.distributed as dist, faultline_probe as fp\n"
                    "dist.init_process_group('gloo', init_method='env://')\n"
                    "run = fp.Run(config={'case': 'own group'}, seed=1, threads=1)\n"
                    "model = torch.nn.Linear(4, 1)\n"
                    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                    "run.start(model, optimizer)\n"
                    "for step in run.steps(3):\n"
                    "    with run.step(step) as s:\n"
                    "        for samples in s.micro_batches(list(range(8))):\n"
                    "            s.backward(model(torch.full((len(samples), 4), float(step)))"
                    ".square().mean())\n"
                    "        s.all_reduce()\n"
                    "        s.clip_grad_norm(1.0)\n"
                    "        optimizer.step()\n"
                    "run.end()\n"
                    "assert dist.is_initialized(), 'the helper ended the group'\n"
                    "dist.destroy_process_group()\n")
        # Its own init: on a torch built without libuv (Debian's), as any script, with
        # USE_LIBUV=0 (harmless elsewhere).
        trial = Trial(os.path.join(self.tmp, "run"), [], ranks=2, script=script,
                      USE_LIBUV=0).wait()
        self.assertEqual(trial.codes_ended_well(), [0, 0], trial.stderr(0) + trial.stderr(1))
        for rank in (0, 1):
            start, = trial.records(rank, type_="event", name="start")
            self.assertEqual(start["backend"], "gloo")
            self.assertEqual(sorted(by_step(trial.records(rank), "step")), [1, 2, 3])

    def test_one_rank_accumulating_replays_two_ranks(self):
        args = ["--steps", "5"] + QUIET
        two = Trial(os.path.join(self.tmp, "two"), args, ranks=2, FAULTLINE_FINGERPRINT_EVERY=1)
        one = Trial(os.path.join(self.tmp, "one"), args, ranks=1, FAULTLINE_FINGERPRINT_EVERY=1,
                    FAULTLINE_ACCUMULATE=2)
        two.wait()
        one.wait()
        self.assertEqual(two.codes_ended_well(), [0, 0], two.stderr(0) + two.stderr(1))
        self.assertEqual(one.codes, [0], one.stderr())
        for rank in (0, 1):
            records = two.records(rank)
            self.assert_protocol(records, rank)
            beats = [r for r in records if r.get("name") == "collective"]
            self.assertEqual([b["seq"] for b in beats], [1, 2, 3, 4, 5])
            self.assertEqual(by_step(records, "step")[5]["collectives"], 5)
            self.assertEqual(records[0]["world_size"], 2)
            self.assertEqual(records[0]["backend"], "gloo")
        reference = by_step(one.records(), "fingerprint", "params")
        distances = []
        for rank in (0, 1):
            params = by_step(two.records(rank), "fingerprint", "params")
            distances += [sketch_distance(params[k], reference[k]) for k in range(1, 6)]
        print(f"\nfaultline_probe: 1 rank x 2 micro-batches vs 2 ranks, params sketch distance "
              f"max {max(distances):.3g} over 5 steps", file=sys.stderr)
        self.assertLess(max(distances), 1e-5)
        self.assertEqual(by_step(two.records(0), "step")[5]["tokens"], 4 * 32)
        self.assertEqual(by_step(one.records(), "step")[5]["tokens"], 8 * 32)

    def test_the_helpers_allreduce_in_small_buckets_trains_the_same_bits_as_in_one(self):
        # The helper averages the gradients in allreduces of _ALLREDUCE_BUCKET elements (a copy of
        # every gradient at once would double their memory). Buckets of 1000 elements split
        # train.py's tensors (about 106 k elements): every record and fingerprint is unchanged,
        # under one heartbeat a step.
        wrapper = os.path.join(self.tmp, "bucketed.py")
        with open(wrapper, "w") as f:
            f.write("import os, runpy, sys, faultline_probe as fp\n"
                    "fp._ALLREDUCE_BUCKET = int(os.environ['BUCKET'])\n"
                    f"sys.argv[0] = {TRAIN!r}\n"
                    f"runpy.run_path({TRAIN!r}, run_name='__main__')\n")
        args = ["--steps", "4"] + QUIET
        trials = {bucket: Trial(os.path.join(self.tmp, str(bucket)), args, ranks=2,
                                script=wrapper, BUCKET=bucket, FAULTLINE_FINGERPRINT_EVERY=1)
                  for bucket in (1000, 1 << 24)}
        for trial in trials.values():
            trial.wait()
            self.assertEqual(trial.codes_ended_well(), [0, 0], trial.stderr(0) + trial.stderr(1))
        small, one = trials[1000], trials[1 << 24]
        for rank in (0, 1):
            self.assert_protocol(small.records(rank), rank)
            beats = small.records(rank, type_="event", name="collective")
            self.assertEqual([b["seq"] for b in beats], [1, 2, 3, 4])
            for kind in ("step", "fingerprint"):
                def comparable(trial):
                    return [{k: v for k, v in r.items()
                             if not k.endswith("_ms") and k not in ("t", "mem_bytes")}
                            for r in trial.records(rank, type_=kind)]
                self.assertEqual(comparable(small), comparable(one), kind)

    def test_a_ddp_model_trains_the_same_bits_as_the_helpers_own_allreduce(self):
        # Two ranks, two micro-batches each: DDP syncs only the last one (no_sync before it),
        # pre-divides by the world size and sums; the helper sums and divides. For two ranks
        # both are exact, so every record and fingerprint is the same.
        args = ["--steps", "6", "--grad-accum", "2"] + QUIET
        own = Trial(os.path.join(self.tmp, "own"), args, ranks=2, FAULTLINE_FINGERPRINT_EVERY=1,
                    FAULTLINE_CHECKPOINT_EVERY=3)
        ddp = Trial(os.path.join(self.tmp, "ddp"), args + ["--ddp", "1"], ranks=2,
                    FAULTLINE_FINGERPRINT_EVERY=1, FAULTLINE_CHECKPOINT_EVERY=3)
        own.wait()
        ddp.wait()
        self.assertEqual(own.codes_ended_well(), [0, 0], own.stderr(0) + own.stderr(1))
        self.assertEqual(ddp.codes_ended_well(), [0, 0], ddp.stderr(0) + ddp.stderr(1))
        for rank in (0, 1):
            records = ddp.records(rank)
            self.assert_protocol(records, rank)
            self.assertTrue(records[0]["ddp"])
            self.assertFalse(own.records(rank)[0]["ddp"])
            mine, theirs = by_step(own.records(rank), "step"), by_step(records, "step")
            for k in range(1, 7):
                for field in ("loss", "grad_norm", "param_norm", "tokens"):
                    self.assertEqual(theirs[k][field], mine[k][field], (rank, k, field))
                for what in ("grads", "params"):
                    self.assertEqual(by_step(records, "fingerprint", what)[k]["hash"],
                                     by_step(own.records(rank), "fingerprint", what)[k]["hash"])
            # Three heartbeats a step: DDP's broadcast of the buffers (the causal masks) before
            # the first forward pass, its gradient allreduce, then the loss's.
            beats = [(r["seq"], r["op"]) for r in records if r.get("name") == "collective"]
            self.assertEqual(beats[:3], [(1, "broadcast"), (2, "allreduce"), (3, "allreduce")])
        # The checkpoint holds the module inside DDP: a one-rank replay (no DDP) resumes from it.
        checkpoint = ddp.records(0, type_="event", name="checkpoint")[0]["path"]
        self.assertFalse(any(k.startswith("module.") for k in torch.load(checkpoint)["model"]))
        one = run(os.path.join(self.tmp, "one"), args + ["--ddp", "1"],
                  FAULTLINE_RESUME=checkpoint, FAULTLINE_ACCUMULATE=2)
        self.assertEqual(one.codes, [0], one.stderr())
        replayed, original = (by_step(one.records(), "step")[4]["loss"],
                              by_step(ddp.records(0), "step")[4]["loss"])
        self.assertLess(abs(replayed - original), 1e-6 * original, "up to reduction order")

    def test_a_zero_one_optimizer_is_checkpointed_whole_and_resumed_bitwise(self):
        # ZeRO-1 (ZeroRedundancyOptimizer): each rank holds the AdamW state of its share of the
        # parameters; its state_dict() on rank 0 alone raised ("not been consolidated"). The
        # helper gathers the shares on rank 0 first; both ranks resume from the whole state.
        args = ["--steps", "6", "--ddp", "1", "--zero", "1"] + QUIET
        full = run(os.path.join(self.tmp, "full"), args, 2, FAULTLINE_CHECKPOINT_EVERY=3,
                   FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(full.codes_ended_well(), [0, 0], full.stderr(0) + full.stderr(1))
        checkpoint = full.records(0, type_="event", name="checkpoint")[0]["path"]
        saved = torch.load(checkpoint, weights_only=False)["optimizer"]
        self.assertEqual(len(saved["state"]), sum(len(g["params"]) for g in saved["param_groups"]))
        resumed = run(os.path.join(self.tmp, "resumed"), args, 2, FAULTLINE_RESUME=checkpoint,
                      FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(resumed.codes_ended_well(), [0, 0],
                         resumed.stderr(0) + resumed.stderr(1))
        for rank in (0, 1):
            hashes = {k: r["hash"] for k, r in
                      by_step(full.records(rank), "fingerprint", "params").items()}
            self.assertEqual({k: r["hash"] for k, r in
                              by_step(resumed.records(rank), "fingerprint", "params").items()},
                             {k: h for k, h in hashes.items() if k > 3}, rank)

    def test_a_ddp_model_with_a_loss_scaler_skips_the_same_steps_as_the_helpers_allreduce(self):
        args = ["--steps", "8", "--precision", "fp16", "--overflow-step", "4",
                "--overflow-steps", "2"] + QUIET
        own = Trial(os.path.join(self.tmp, "own"), args, ranks=2)
        ddp = Trial(os.path.join(self.tmp, "ddp"), args + ["--ddp", "1"], ranks=2)
        own.wait()
        ddp.wait()
        self.assertEqual(ddp.codes_ended_well(), [0, 0], ddp.stderr(0) + ddp.stderr(1))
        for rank in (0, 1):
            theirs = by_step(ddp.records(rank), "step")
            self.assertEqual([k for k in theirs if theirs[k]["skipped"]], [4, 5])
        assert_same_steps(self, own, ddp, ("loss", "grad_norm", "param_norm", "loss_scale"))

    def test_two_ranks_load_their_shares_through_a_torch_data_loader(self):
        args = ["--steps", "4", "--grad-accum", "2"] + QUIET
        index = Trial(os.path.join(self.tmp, "index"), args, ranks=2)
        loaded = Trial(os.path.join(self.tmp, "loaded"), args + ["--loader", "torch"], ranks=2)
        index.wait()
        loaded.wait()
        self.assertEqual(loaded.codes_ended_well(), [0, 0], loaded.stderr(0) + loaded.stderr(1))
        assert_same_steps(self, index, loaded, ("loss", "grad_norm", "param_norm", "tokens"))
        self.assertEqual(sorted(by_step(loaded.records(1), "step")), [1, 2, 3, 4])

    def test_replica_mode_shows_the_rank_with_corrupt_gradients(self):
        share = fp.global_batch(1234, 3, N_SAMPLES, 12)[:4]  # rank 0's share of step 3
        trial = run(self.tmp, ["--steps", "6", "--batch-size", "12", "--corrupt-grad-rank", "1",
                               "--corrupt-grad-step", "3"] + QUIET, ranks=3,
                    FAULTLINE_FINGERPRINT_EVERY=1, FAULTLINE_STOP_AFTER=3,
                    FAULTLINE_REPLAY_STEP=3, FAULTLINE_REPLAY_SAMPLES=",".join(map(str, share)),
                    FAULTLINE_REPLAY_RANKS="all")
        self.assertEqual(trial.codes_ended_well(), [0, 0, 0], "".join(trial.stderr(r) for r in range(3)))
        grads = [by_step(trial.records(r), "fingerprint", "grads") for r in range(3)]
        self.assertEqual(grads[0][3]["hash"], grads[2][3]["hash"], "healthy replicas agree")
        self.assertNotEqual(grads[1][3]["hash"], grads[0][3]["hash"])
        self.assertGreater(sketch_distance(grads[1][3], grads[0][3]), 0.01)
        self.assertEqual(grads[1][2]["hash"], grads[0][2]["hash"], "step 2: averaged, all equal")
        for r in range(3):
            event, = [e for e in trial.records(r, type_="event", name="batch") if e["step"] == 3]
            self.assertEqual(event["rank_samples"], share)
            self.assertEqual(by_step(trial.records(r), "step")[3]["tokens"], 4 * 32)


class CompileUnavailable(TrialCase):
    @unittest.skipIf(torch is None or hasattr(torch, "compile"), "this torch has torch.compile")
    def test_compile_on_a_torch_without_it_is_a_usage_error_naming_the_version(self):
        trial = run(os.path.join(self.tmp, "run"), ["--compile", "aot_eager"] + QUIET)
        self.assertEqual(trial.codes, [2])
        self.assertIn("--compile aot_eager needs torch.compile (torch >= 2); this is torch "
                      + torch.__version__, trial.stderr())


# ------------------------------------------------------------------------------------------------

HAS_SET_STANCE = torch is not None and fp._set_stance() is not None  # the helper's own test


@unittest.skipUnless(HAS_SET_STANCE, "torch.compile with torch.compiler.set_stance: torch >= 2.6 "
                     "(make python-compat runs these on Debian's newest torch)")
class Compiled(TrialCase):
    """A model under torch.compile, as nanoGPT's is. The aot_eager backend traces it as inductor
    does (Dynamo, AOTAutograd) but needs no C++ compiler, and computes eager's bits."""

    COMPILE = ["--compile", "aot_eager"]

    def test_full_probes_name_the_module_inside_a_compiled_model(self):
        # Dynamo ignores hooks added after it compiled: the probes' hooks fired only on the
        # compiled root ("_orig_mod") until full-probe steps ran eagerly. Block 1: Dynamo ran
        # the code it compiled for block 0 there, without the fault's hook, until train.py
        # asked it to guard on hooks.
        args = ["--steps", "8", "--nan-step", "6", "--nan-layer", "blocks.1.mlp"] + QUIET
        for name, more in (("compiled", self.COMPILE), ("eager", [])):
            trial = run(os.path.join(self.tmp, name), args + more, FAULTLINE_PROBE="full",
                        FAULTLINE_PROBE_FROM=5)
            self.assertEqual(trial.codes, [fp.EXIT_NONFINITE], trial.stderr())
            records = trial.records()
            self.assert_protocol(records)
            start, = [r for r in records if r.get("name") == "start"]
            self.assertEqual(start["compiled"], bool(more))
            anomaly, = trial.records(type_="anomaly")
            self.assertEqual((anomaly["step"], anomaly["phase"], anomaly["where"]),
                             (6, "forward", "blocks.1.mlp"), name)
            self.assertNotIn("_orig_mod", anomaly["first_grad"])

    def test_a_compiled_runs_checkpoint_resumes_with_or_without_compile_bitwise(self):
        # Saved from the module inside torch.compile's wrapper: the keys the script's model has.
        args = ["--steps", "8"] + QUIET
        full = run(os.path.join(self.tmp, "full"), args + self.COMPILE,
                   FAULTLINE_CHECKPOINT_EVERY=4, FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(full.codes, [0], full.stderr())
        checkpoint = full.records(type_="event", name="checkpoint")[0]["path"]
        self.assertFalse([k for k in torch.load(checkpoint)["model"] if "_orig_mod" in k])
        hashes = {k: r["hash"] for k, r in by_step(full.records(), "fingerprint", "params").items()
                  if k > 4}
        for name, more in (("eager", []), ("compiled", self.COMPILE)):
            resumed = run(os.path.join(self.tmp, name), args + more, FAULTLINE_RESUME=checkpoint,
                          FAULTLINE_FINGERPRINT_EVERY=1)
            self.assertEqual(resumed.codes, [0], resumed.stderr())
            self.assertEqual({k: r["hash"] for k, r in
                              by_step(resumed.records(), "fingerprint", "params").items()},
                             hashes, name)

    def test_a_compiled_ddp_model_trains_the_same_bits_as_the_eager_one(self):
        args = ["--steps", "4", "--ddp", "1", "--grad-accum", "2"] + QUIET
        eager = Trial(os.path.join(self.tmp, "eager"), args, ranks=2,
                      FAULTLINE_FINGERPRINT_EVERY=1)
        compiled = Trial(os.path.join(self.tmp, "compiled"), args + self.COMPILE, ranks=2,
                         FAULTLINE_FINGERPRINT_EVERY=1)
        eager.wait(timeout=180)
        compiled.wait(timeout=180)
        for trial in (eager, compiled):
            self.assertEqual(trial.codes_ended_well(), [0, 0], trial.stderr(0) + trial.stderr(1))
        assert_same_steps(self, eager, compiled, ("loss", "grad_norm"))


def has_fully_shard():
    try:  # torch 1.13's FSDP does not even import on Python 3.11
        from torch.distributed.fsdp import fully_shard  # noqa: F401
        return True
    except Exception:  # noqa: BLE001
        return False


def sharded_script(lines):
    """SCRIPT_START with a 2-layer model, `lines` run on it before run.start()."""
    return SCRIPT_START.replace(
        "model = torch.nn.Linear(4, 1)\n",
        "model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))\n" + lines)


@unittest.skipUnless(torch is not None and not has_fully_shard(), "torch without fully_shard")
class FsdpUnavailable(TrialCase):
    def test_train_py_says_fsdp_needs_a_newer_torch(self):
        trial = run(os.path.join(self.tmp, "run"), ["--fsdp", "1"] + QUIET)
        self.assertEqual(trial.codes, [2])
        self.assertIn("--fsdp needs torch.distributed.fsdp.fully_shard (torch >= 2.6); this is "
                      "torch " + torch.__version__, trial.stderr())


@unittest.skipUnless(torch is not None and has_fully_shard(), "FSDP2's fully_shard: torch >= 2.6 "
                     "(make python-compat)")
class Sharded(TrialCase):
    """FSDP2 (fully_shard) on 2 ranks over Gloo: train.py --fsdp 1 shards each block, then the
    rest. The helper reads whole parameters from the shards: norms and counts in an allreduce,
    fingerprints and checkpoints gathered."""

    FSDP = ["--fsdp", "1"] + QUIET

    def test_an_fsdp_run_resumes_bitwise_on_its_ranks_and_replays_on_one(self):
        whole = run(os.path.join(self.tmp, "whole"), ["--steps", "1"] + QUIET)
        parameters = whole.records(type_="event", name="start")[0]["parameters"]
        for form in fp.FSDP_CHECKPOINTS:
            with self.subTest(form):
                self.check_resumes(form, parameters)

    def check_resumes(self, form, parameters):
        args = ["--steps", "8", "--fsdp-checkpoint", form] + self.FSDP
        full = Trial(os.path.join(self.tmp, form, "full"), args, ranks=2,
                     FAULTLINE_CHECKPOINT_EVERY=4, FAULTLINE_FINGERPRINT_EVERY=1).wait(180)
        self.assertEqual(full.codes_ended_well(), [0, 0], full.stderr(0) + full.stderr(1))
        for rank in (0, 1):
            self.assert_protocol(full.records(rank), rank)
            start = full.records(rank, type_="event", name="start")[0]
            self.assertEqual((start["fsdp"], start["parameters"]), (True, parameters))
        for what in ("params", "grads"):  # the whole tensors, the same on every rank
            prints = [{k: r["hash"] for k, r in by_step(full.records(rank), "fingerprint",
                                                         what).items()} for rank in (0, 1)]
            self.assertEqual(sorted(prints[0]), list(range(1, 9)), what)
            self.assertEqual(prints[0], prints[1], what)
        checkpoint = full.records(type_="event", name="checkpoint")[0]["path"]
        if form == "sharded":  # each rank's shards, and the rest in faultline.pt
            self.assertTrue(os.path.isdir(checkpoint), checkpoint)
            self.assertIn(".metadata", os.listdir(checkpoint))
            self.assertFalse([n for n in os.listdir(os.path.dirname(checkpoint))
                              if n.endswith(".tmp")])
            saved = torch.load(os.path.join(checkpoint, fp.CHECKPOINT_META), weights_only=False)
            self.assertEqual(saved["version"], 3)
            self.assertNotIn("model", saved)
        else:  # the whole state gathered on rank 0, keyed by name
            saved = torch.load(checkpoint, weights_only=False)
            self.assertEqual(saved["version"], 2)
            self.assertEqual(tuple(saved["model"]["blocks.0.mlp.fc.weight"].shape), (256, 64))
            self.assertIn("blocks.0.mlp.fc.weight", saved["optimizer"]["state"])

        resumed = Trial(os.path.join(self.tmp, form, "resumed"), args, ranks=2,
                        FAULTLINE_RESUME=checkpoint, FAULTLINE_FINGERPRINT_EVERY=1).wait(180)
        self.assertEqual(resumed.codes_ended_well(), [0, 0], resumed.stderr(0))
        mine = by_step(full.records(), "fingerprint", "params")
        theirs = by_step(resumed.records(), "fingerprint", "params")
        self.assertEqual(sorted(theirs), [5, 6, 7, 8])
        for k in theirs:
            self.assertEqual(theirs[k]["hash"], mine[k]["hash"], k)
        # One rank, no FSDP, accumulating the two ranks' shares: the same model, summed in
        # another order (as a DDP run's 1-rank replay is).
        one = run(os.path.join(self.tmp, form, "one"), args, FAULTLINE_RESUME=checkpoint,
                  FAULTLINE_ACCUMULATE=2, FAULTLINE_FINGERPRINT_EVERY=1)
        self.assertEqual(one.codes, [0], one.stderr())
        self.assertFalse(one.records(type_="event", name="start")[0]["fsdp"])
        self.assertNotIn("Warning", one.stderr())
        steps, ones = by_step(full.records(), "step"), by_step(one.records(), "step")
        self.assertEqual(sorted(ones), [5, 6, 7, 8])
        for k in ones:
            self.assertAlmostEqual(ones[k]["loss"], steps[k]["loss"], delta=1e-5)
        self.assertLess(sketch_distance(by_step(one.records(), "fingerprint", "params")[5],
                                        mine[5]), 1e-5)

    def test_a_nan_halts_every_rank_naming_the_module_with_the_last_good_checkpoint(self):
        args = ["--steps", "8", "--nan-step", "6", "--nan-layer", "blocks.1.mlp"] + self.FSDP
        for probe in ("cheap", "full"):
            trial = Trial(os.path.join(self.tmp, probe), args, ranks=2, FAULTLINE_PROBE=probe,
                          FAULTLINE_PROBE_FROM=5, FAULTLINE_CHECKPOINT_ON_HALT=1).wait(180)
            self.assertEqual(trial.codes_ended_well(), [fp.EXIT_NONFINITE] * 2, trial.stderr(0))
            for rank in (0, 1):
                anomaly, = trial.records(rank, type_="anomaly")
                where = "blocks.1.mlp" if probe == "full" else "loss"
                self.assertEqual((anomaly["step"], anomaly["where"]), (6, where), probe)
                if probe == "full":  # from the reduced gradients (no hook fires under FSDP2):
                    # the last parameter in the model's order, the backward pass's first
                    self.assertEqual(anomaly["first_grad"], "ln_f.bias")
            folder = trial.records(type_="event", name="checkpoint")[0]["path"]
            saved = torch.load(os.path.join(folder, fp.CHECKPOINT_META), weights_only=False)
            self.assertEqual((saved["step"], saved["version"]), (5, 3))

    @unittest.skipUnless(HAS_SET_STANCE, "torch.compiler.set_stance: torch >= 2.6")
    def test_a_compiled_fsdp_model_trains_the_eager_bits_and_its_nan_is_named(self):
        # torch.compile around the sharded model (aot_eager computes eager's bits); the full
        # probes' step runs it eagerly, so its hooks see the modules.
        args = ["--steps", "6", "--nan-step", "6", "--nan-layer", "blocks.1.mlp"] + self.FSDP
        probes = dict(FAULTLINE_PROBE="full", FAULTLINE_PROBE_FROM=5)
        eager = Trial(os.path.join(self.tmp, "eager"), args, ranks=2, **probes)
        compiled = Trial(os.path.join(self.tmp, "compiled"), args + ["--compile", "aot_eager"],
                         ranks=2, **probes)
        for trial in (eager.wait(300), compiled.wait(300)):
            self.assertEqual(trial.codes_ended_well(), [fp.EXIT_NONFINITE] * 2, trial.stderr(0))
        start = compiled.records(type_="event", name="start")[0]
        self.assertEqual((start["fsdp"], start["compiled"]), (True, True))
        assert_same_steps(self, eager, compiled, ("loss", "grad_norm"))
        for rank in (0, 1):
            anomaly, = compiled.records(rank, type_="anomaly")
            self.assertEqual((anomaly["step"], anomaly["phase"], anomaly["where"]),
                             (6, "forward", "blocks.1.mlp"))

    def test_a_replica_check_is_refused_since_no_rank_has_a_whole_gradient(self):
        samples = fp.global_batch(1234, 3, N_SAMPLES, 8)[:2]  # train.py's seed and batch
        trial = Trial(os.path.join(self.tmp, "run"), ["--steps", "4"] + self.FSDP, ranks=2,
                      FAULTLINE_REPLAY_STEP=3, FAULTLINE_REPLAY_SAMPLES=",".join(map(str, samples)),
                      FAULTLINE_REPLAY_RANKS="all").wait(180)
        self.assertEqual(trial.codes, [fp.EXIT_USAGE] * 2, trial.stderr(0))
        self.assertIn("step 3: a replica check (FAULTLINE_REPLAY_RANKS=all) compares each "
                      "rank's own whole gradient, and under FSDP2 no rank has one",
                      trial.stderr(0))
        self.assertEqual(trial.records(type_="event", name="end")[0]["status"], "error")

    def test_layouts_the_helper_cannot_handle_are_usage_errors_naming_the_part(self):
        # Before the first step, exit 2: averaged as if whole, a shard's gradient would be
        # wrong, and rank 0's checkpoint would hold its share only.
        tensor_parallel = (
            "from torch.distributed.device_mesh import init_device_mesh\n"
            "from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module\n"
            "parallelize_module(model, init_device_mesh('cpu', (2,)), {'0': ColwiseParallel()})\n")
        cases = {
            "root": (sharded_script("from torch.distributed.fsdp import fully_shard\n"
                                    "fully_shard(model[0])\n"),
                     "parameter '1.weight' is not sharded while others are (fully_shard): "
                     "call fully_shard on the root module too"),
            "tp": (sharded_script(tensor_parallel),
                   "a DTensor parameter '0.weight' outside fully_shard (tensor parallelism)"),
        }
        for name, (code, message) in cases.items():
            script = os.path.join(self.tmp, name + ".py")
            with open(script, "w") as f:
                f.write(code + "print('trained')\n")
            trial = run(os.path.join(self.tmp, name), [], ranks=2, script=script)
            self.assertEqual(trial.codes, [fp.EXIT_USAGE] * 2, trial.stderr(0))
            for rank in (0, 1):
                self.assertIn("the model's parameters are sharded across ranks: " + message,
                              trial.stderr(rank))
                self.assertNotIn("trained", trial.stdout[rank])
        scaled = run(os.path.join(self.tmp, "fp16"), ["--precision", "fp16"] + self.FSDP,
                     ranks=2)
        self.assertEqual(scaled.codes, [fp.EXIT_USAGE] * 2, scaled.stderr(0))
        self.assertIn("fp16's loss scaler under FSDP2", scaled.stderr(0))


# ------------------------------------------------------------------------------------------------

class LogOnly(unittest.TestCase):
    LINE = re.compile(r"step (\d+)/\d+ loss ([-+0-9.eEnaif]+)")

    def lines(self, *args):
        result = subprocess.run([sys.executable, LOG_ONLY] + list(args), env=base_env(),
                                text=True, capture_output=True, timeout=120)
        return result, [(int(m.group(1)), float(m.group(2)))
                        for m in map(self.LINE.match, result.stdout.splitlines()) if m]

    @unittest.skipIf(torch is None, "needs torch")
    def test_prints_a_line_per_step_and_dies_on_nan(self):
        result, lines = self.lines("--steps", "10", "--stop-after", "4")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual([s for s, _ in lines], [1, 2, 3, 4])
        result, nan_lines = self.lines("--steps", "10", "--nan-step", "3")
        self.assertEqual(result.returncode, 1)
        self.assertEqual(nan_lines[:2], lines[:2], "a prefix of the same run")
        self.assertEqual(nan_lines[-1][0], 3)
        self.assertTrue(math.isnan(nan_lines[-1][1]))


if __name__ == "__main__":
    unittest.main()
