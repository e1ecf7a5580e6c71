#!/usr/bin/python3
"""The same GPT as train.py, trained by a plain loop that knows nothing about faultline.

It only prints one human line per step on stdout, as many real scripts do:

    step 12/100 loss 3.1416 lr 9.8e-03

and takes a few flags. It is the "your script, unchanged" case: faultline can still run it,
cut it short with --stop-after, and read the loss from these lines. Model, data, optimizer and
schedule come from train.py (same folder); the faultline helper is never used here.

Batches are drawn with replacement from one torch generator seeded by --seed, so a run with
--stop-after N is an exact prefix of the full run. On a non-finite loss the script prints that
step's line (`loss nan`), a message on stderr, and exits 1: a naive script dying on NaN.

Its checkpoints are its own, as in nanoGPT: with --ckpt-every N it saves the model, the
optimizer, the step and both RNG states to <--out>/ckpt_<step>.pt after every N-th step and
prints `saved checkpoint PATH at step N`; --resume PATH continues from one, bit for bit.
With --ckpt-name ckpt.pt every checkpoint is saved over that one file, as nanoGPT's out/ckpt.pt.

    /usr/bin/python3 examples/pytorch/train_log_only.py --steps 100
    /usr/bin/python3 examples/pytorch/train_log_only.py --steps 100 --out run --ckpt-every 50
    /usr/bin/python3 examples/pytorch/train_log_only.py --steps 100 --resume run/ckpt_000050.pt
"""
import argparse
import math
import os
import sys

import torch

import train  # the model, data, optimizer and schedule of train.py


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--warmup", type=int, default=10, help="warm-up steps")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--stop-after", type=int, default=0, help="stop after this step (0: run all)")
    p.add_argument("--nan-step", type=int, default=0, help="fault: the loss turns NaN here")
    p.add_argument("--out", default=".", help="where checkpoints go")
    p.add_argument("--ckpt-every", type=int, default=0, help="save a checkpoint every N steps")
    p.add_argument("--resume", default="", help="continue from this checkpoint")
    p.add_argument("--ckpt-name", default="", help="one file saved over (default: ckpt_<step>.pt)")
    own = p.parse_args(argv)
    if own.steps < 1 or own.batch_size < 1 or own.ckpt_every < 0:
        p.error("--steps and --batch-size must be at least 1, --ckpt-every at least 0")
    args = argparse.Namespace(**{**vars(train.parse_args([])), **vars(own)})

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    data = train.load_corpus(args)
    model = train.GPT(args.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd)
    optimizer = train.make_optimizer(model, args)
    order = torch.Generator().manual_seed(args.seed)
    last = min(args.steps, args.stop_after) if args.stop_after > 0 else args.steps
    first = 1
    if args.resume:
        state = torch.load(args.resume)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        order.set_state(state["order"])
        torch.set_rng_state(state["torch_rng"])
        first = state["step"] + 1

    for step in range(first, last + 1):
        lr = train.lr_at(step, args)
        for group in optimizer.param_groups:
            group["lr"] = lr
        samples = torch.randint(data.n_samples, (args.batch_size,), generator=order).tolist()
        x, y = data.get(samples)
        loss = model(x, y)
        if step == args.nan_step:
            loss = loss * float("nan")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        value = loss.item()
        print(f"step {step}/{args.steps} loss {value:.4f} lr {lr:.3e}", flush=True)
        if not math.isfinite(value):
            sys.exit(f"train_log_only.py: loss is {value} at step {step}")
        if args.ckpt_every and step % args.ckpt_every == 0:
            save_checkpoint(args.out, args.ckpt_name, step, model, optimizer, order)


def save_checkpoint(out, name, step, model, optimizer, order):
    os.makedirs(out, exist_ok=True)
    path = os.path.abspath(os.path.join(out, name or f"ckpt_{step:06d}.pt"))
    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "order": order.get_state(), "torch_rng": torch.get_rng_state()}
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)
    print(f"saved checkpoint {path} at step {step}", flush=True)


if __name__ == "__main__":
    main()
