"""Tests of probes/python/faultline_probe.py on two ranks (Gloo), as real processes: the
script's own process group, one rank accumulating as two, the helper's allreduce against DDP,
ZeRO-1, loss scaling, a DataLoader's shares, the replica mode.

    /usr/bin/python3 -m unittest discover -s tests/python
"""
import os
import sys
import unittest

from probe_support import (assert_same_steps, by_step, fp, N_SAMPLES, QUIET, run, sketch_distance,
    torch, TRAIN, Trial, TrialCase)


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


if __name__ == "__main__":
    unittest.main()
