"""Tests of probes/python/faultline_probe.py with torch.compile and FSDP2 (torch >= 2.6; they
skip on older torch, and make python-compat runs them on Debian's newest).

    /usr/bin/python3 -m unittest discover -s tests/python
"""
import os
import unittest

from probe_support import (assert_same_steps, by_step, fp, N_SAMPLES, QUIET, run, SCRIPT_START,
    sketch_distance, torch, Trial, TrialCase)


class CompileUnavailable(TrialCase):
    @unittest.skipIf(torch is None or hasattr(torch, "compile"), "this torch has torch.compile")
    def test_compile_on_a_torch_without_it_is_a_usage_error_naming_the_version(self):
        trial = run(os.path.join(self.tmp, "run"), ["--compile", "aot_eager"] + QUIET)
        self.assertEqual(trial.codes, [2])
        self.assertIn("--compile aot_eager needs torch.compile (torch >= 2); this is torch "
                      + torch.__version__, trial.stderr())


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


if __name__ == "__main__":
    unittest.main()
