"""Tests of probes/python/faultline_probe.py's parts, in process or in a short script: the
definitions faultline relies on (the sampler, fingerprints, the environment contract, the
protocol writer), data loading, signals, a nondeterministic op, out of memory.

    /usr/bin/python3 -m unittest discover -s tests/python
"""
import faulthandler
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import unittest
import unittest.mock

from probe_support import (base_env, fp, free_port, read_records, run, run_in, run_script,
    SCRIPT_START, signs, torch)


class NoisySamples:
    """Random augmentation: numbers drawn from the global generators. At module level, so that
    DataLoader workers started by forkserver (Python 3.14's default) can unpickle it."""

    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.tensor([float(i), torch.rand(()).item(), random.random()])


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


if __name__ == "__main__":
    unittest.main()
