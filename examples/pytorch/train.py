#!/usr/bin/python3
"""A small GPT trainer in plain PyTorch, instrumented for faultline with faultline_probe.

Read it top to bottom: data, model, optimizer and schedule, planted faults, the training loop.
It runs alone (one process, or several under torchrun) and under faultline, which passes what
it wants in FAULTLINE_* variables that faultline_probe reads (probes/python/README.md).

    /usr/bin/python3 examples/pytorch/train.py --steps 100
    RANK=0 WORLD_SIZE=2 ... & RANK=1 WORLD_SIZE=2 ... &   # data parallel over Gloo, or torchrun

Exit codes: 0 done, 2 bad usage, 3 halted on NaN/Inf, 4 bad data, 5 out of memory.
"""
import argparse
import atexit
from contextlib import nullcontext
import copy
import json
import math
import os
import signal
import sys
import time

import torch
import torch.utils.checkpoint
import torch.nn as nn
from torch.nn import functional as F

try:
    import faultline_probe as fp
except ImportError:  # run from a checkout: the helper lives in probes/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "..", "probes", "python"))
    import faultline_probe as fp


# ----------------------------------------------------------------------------------------------
# Data: a corpus of token ids, cut into samples of block_size + 1 tokens at stride block_size.
# Sample i is tokens[i*T : i*T + T + 1], so a sample index names the same text on every rank.

def synthetic_tokens(vocab_size, n_tokens, seed, branching=4, uniform=0.02):
    """A random bigram language: after token a, one of `branching` fixed successors of a with
    Zipf weights 1, 1/2, 1/3, ..., or (2 % of the time) any token. A model learns it quickly."""
    g = torch.Generator().manual_seed(seed)
    successors = torch.randint(vocab_size, (vocab_size, branching), generator=g).tolist()
    weights = torch.tensor([1.0 / (i + 1) for i in range(branching)])
    choice = torch.multinomial(weights, n_tokens, replacement=True, generator=g).tolist()
    anywhere = (torch.rand(n_tokens, generator=g) < uniform).tolist()
    random_token = torch.randint(vocab_size, (n_tokens,), generator=g).tolist()
    tokens, current = [], random_token[0]
    for t in range(n_tokens):
        current = random_token[t] if anywhere[t] else successors[current][choice[t]]
        tokens.append(current)
    return torch.tensor(tokens, dtype=torch.long)


class Corpus:
    def __init__(self, tokens, block_size, sample_delay_ms=0.0, token_noise=0.0, vocab_size=0):
        self.tokens, self.block_size = tokens, block_size
        self.delay_s = sample_delay_ms / 1000  # --sample-delay-ms: a slow data source
        self.token_noise, self.vocab_size = token_noise, vocab_size
        self.n_samples = (len(tokens) - 1) // block_size
        if self.n_samples < 1:
            sys.exit(f"train.py: the corpus has {len(tokens)} tokens, fewer than one sample")
        self.offsets = torch.arange(block_size + 1)

    def get(self, samples, sample_rng=lambda sample: nullcontext()):
        """Inputs and next-token targets of these samples, (len(samples), block_size) each.
        --token-noise draws each sample's noise under sample_rng(sample)."""
        if self.delay_s:
            time.sleep(self.delay_s * len(samples))
        rows = self.tokens[torch.tensor(samples)[:, None] * self.block_size + self.offsets]
        x, y = rows[:, :-1], rows[:, 1:]
        if self.token_noise:
            x = x.clone()
            for row, sample in enumerate(samples):
                with sample_rng(sample):
                    self.add_noise(x[row], self.token_noise)
        return x, y

    def add_noise(self, x, fraction):
        """`fraction` of the inputs `x` become random tokens, drawn from torch's global generator
        as a dataset's random crop would be: one sample's (--token-noise, as it loads) or a whole
        micro-batch's (--batch-noise: masking across it, as BERT's collator masks 15 %)."""
        noisy = torch.rand(x.shape) < fraction
        x[noisy] = torch.randint(self.vocab_size, (int(noisy.sum()),))

    # A map-style dataset too, for --loader torch: a DataLoader's default collate stacks these
    # into get()'s tensors, bit for bit.
    def __len__(self):
        return self.n_samples

    def __getitem__(self, sample):  # run.data_loader() loads it under run.sample_rng
        x, y = self.get([sample])
        return x[0], y[0]


class NoisyCollate:
    """--batch-noise with --loader torch: the default collate, then masking across the batch
    (run.data_loader() calls it under the micro-batch's run seed, in any worker)."""

    def __init__(self, data, fraction):
        self.data, self.fraction = data, fraction

    def __call__(self, items):
        from torch.utils.data.dataloader import default_collate
        x, y = default_collate(items)
        self.data.add_noise(x, self.fraction)
        return x, y


def micro_batches(s, batch, args, data, loader):
    """(sample indices, inputs, targets) of each micro-batch of the step: loaded ahead by a torch
    DataLoader's workers (--loader torch), or indexed here, timed as data loading."""
    if loader is not None:
        for x, y in s.micro_batches(loader=loader):
            yield s.micro_samples, x, y
        return
    for samples in s.micro_batches(batch, args.grad_accum):
        with s.data():
            x, y = data.get(samples, s.sample_rng)
            if args.batch_noise:
                x = x.clone()
                with s.batch_rng(samples):
                    data.add_noise(x, args.batch_noise)
        yield samples, x, y


def load_corpus(args):
    if args.data:
        with open(args.data, "rb") as f:  # raw bytes: token ids 0..255
            tokens = torch.tensor(list(f.read()), dtype=torch.long)
    else:
        tokens = synthetic_tokens(args.vocab_size, args.data_tokens, args.data_seed)
    return Corpus(tokens, args.block_size, args.sample_delay_ms, args.token_noise,
                  args.vocab_size)


# ----------------------------------------------------------------------------------------------
# The model: GPT-2 style, pre-LayerNorm blocks, tied input/output embedding.
# Modules: wte, wpe, blocks.N.{ln_1, attn, ln_2, mlp}, blocks.N, ln_f, head.

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        # Float, as nanoGPT's: DistributedDataParallel broadcasts buffers, and Gloo has no bool.
        mask = torch.ones(block_size, block_size).tril()
        self.register_buffer("causal", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        # (B, T, 3C) -> three (B, heads, T, head_size) tensors
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        scores = scores.masked_fill(self.causal[:T, :T] == 0, float("-inf"))
        y = scores.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, recompute=False):
        super().__init__()
        self.recompute = recompute  # --activation-checkpointing
        if n_embd % n_head:
            raise ValueError(f"n_embd {n_embd} is not divisible by n_head {n_head}")
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, block_size) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.head.weight = self.wte.weight  # tied
        # N(0, 0.02) weights, zero biases; residual projections scaled by 1/sqrt(2 * n_layer).
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def logits(self, idx):
        positions = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(positions)
        for block in self.blocks:
            if self.recompute and torch.is_grad_enabled():
                # Activations of the block are not kept: its forward runs again in the backward
                # pass (its forward hooks fire twice), trading compute for memory.
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.ln_f(x))

    def forward(self, idx, targets, teacher_logits=None, distill=0.0):
        """Cross-entropy, plus distill x the squared distance to a teacher's logits if given."""
        logits = self.logits(idx)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        if teacher_logits is not None:
            loss = loss + distill * F.mse_loss(logits, teacher_logits)
        return loss


class MeanTeacher:
    """--ema-teacher: an exponential moving average of the model's weights whose predictions the
    loss also matches (mean teacher, self-distillation). Its weights are state outside the model
    and the optimizer: given to run.start(state=...), checkpoints hold it and a replay from one
    is bitwise; left out (--ema-unsaved), a resumed run's teacher starts over."""

    def __init__(self, model, decay):
        self.model, self.decay = copy.deepcopy(model).requires_grad_(False), decay

    @torch.no_grad()
    def logits(self, idx):
        return self.model.logits(idx)

    @torch.no_grad()
    def update(self, model):
        for mine, theirs in zip(self.model.parameters(), model.parameters()):
            mine.mul_(self.decay).add_(theirs.detach(), alpha=1 - self.decay)

    def state_dict(self):
        return self.model.state_dict()

    def load_state_dict(self, state):
        self.model.load_state_dict(state)


# ----------------------------------------------------------------------------------------------
# Optimizer and schedule.

def fully_shard_of_torch():
    """FSDP2's fully_shard, or None where torch has none (public since 2.6)."""
    try:
        from torch.distributed.fsdp import fully_shard
    except Exception:  # noqa: BLE001 - torch 1.13's FSDP does not even import on Python 3.11
        return None
    return fully_shard


def make_optimizer(model, args):
    """AdamW; weight decay on matrices (embeddings included), none on biases and LayerNorms."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    if getattr(args, "zero", 0) and torch.distributed.is_available() and \
            torch.distributed.is_initialized():
        # ZeRO-1: each rank keeps the AdamW state of its share of the parameters.
        from torch.distributed.optim import ZeroRedundancyOptimizer
        return ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, lr=args.lr,
                                       betas=(0.9, 0.95), eps=1e-8)
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8)


def lr_at(step, args):
    """Linear warm-up to --lr, then cosine decay to --lr/10 at --steps (1-based steps)."""
    spike = args.lr_spike_factor if step == getattr(args, "lr_spike_step", 0) else 1.0
    if step <= args.warmup:
        return spike * args.lr * step / max(1, args.warmup)
    progress = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    min_lr = args.lr * 0.1
    return spike * (min_lr + 0.5 * (args.lr - min_lr) * (1 + math.cos(math.pi * progress)))


class DynamicLossScaler:
    """GradScaler's algorithm for a torch that has none for the CPU (before 2.3): the loss is
    multiplied by the scale; a step whose gradients are then non-finite is skipped and the scale
    halved; 2000 good steps in a row double it."""

    def __init__(self, init_scale=2.0**16, growth_interval=2000):
        self._scale, self._growth_interval = init_scale, growth_interval
        self._good, self._found_inf = 0, False

    def is_enabled(self):
        return True

    def get_scale(self):
        return self._scale

    def scale(self, loss):
        return loss * self._scale

    def unscale_(self, optimizer):
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        with torch.no_grad():
            for grad in grads:
                grad.mul_(1.0 / self._scale)
            self._found_inf = not all(bool(torch.isfinite(grad).all()) for grad in grads)

    def step(self, optimizer):
        if not self._found_inf:
            optimizer.step()

    def update(self):
        self._good = 0 if self._found_inf else self._good + 1
        if self._found_inf:
            self._scale *= 0.5
        elif self._good == self._growth_interval:
            self._scale, self._good = self._scale * 2.0, 0
        self._found_inf = False

    def state_dict(self):
        return {"scale": self._scale, "good": self._good}

    def load_state_dict(self, state):
        self._scale, self._good = state["scale"], state["good"]


def make_scaler(args, device):
    """fp16's dynamic loss scaler: torch's GradScaler where it serves this device, else ours."""
    if args.precision != "fp16":
        return None
    if hasattr(torch.amp, "GradScaler"):  # torch 2.3 on: one for every device
        return torch.amp.GradScaler(device.type)
    if device.type == "cuda":
        return torch.cuda.amp.GradScaler()
    return DynamicLossScaler()


# ----------------------------------------------------------------------------------------------
# Planted faults: each the simplest mechanism with a real failure's signature.

def eager(hook):
    """A fault's hook that torch.compile (--compile) runs as it is, outside its graphs: traced,
    its test of the step number would compile the model again at every step."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(hook) if disable is not None else hook


class Faults:
    def __init__(self, args, rank, model):
        self.args, self.rank = args, rank
        self.step, self.samples = 0, []
        modules = dict(model.named_modules())
        if args.nan_step and args.nan_layer not in modules:
            names = ", ".join(n for n in modules if n)
            sys.exit(f"train.py: error: --nan-layer '{args.nan_layer}' is not a module; "
                     f"modules: {names}")
        if args.nan_step:
            modules[args.nan_layer].register_forward_hook(eager(self.nan_output))
        if args.poison_sample >= 0:
            modules["wte"].register_forward_hook(eager(self.poison_rows))
        if args.overflow_step:
            model.wte.weight.register_hook(eager(self.overflow))
        if args.slow_rank == rank:
            model.register_forward_pre_hook(eager(self.slow_forward))

    def nan_output(self, module, inputs, output):  # --nan-step/--nan-layer: NaN activations
        return output + float("nan") if self.step == self.args.nan_step else output

    def slow_forward(self, module, inputs):  # --slow-rank/--slow-ms: a slower device
        """Burns --slow-ms of this thread's CPU time in each forward pass, as a rank on a slow
        or throttled device computes longer than its peers (CPU time, so a busy machine that
        deschedules it does not shorten the work)."""
        until = time.thread_time() + self.args.slow_ms / 1000
        while time.thread_time() < until:
            sum(range(1000))

    def overflow(self, grad):  # --overflow-step/-steps: gradients too big for the loss scale
        first = self.args.overflow_step
        if first <= self.step < first + self.args.overflow_steps:
            return grad * float("inf")
        return grad

    def poison_rows(self, module, inputs, output):  # --poison-sample: one bad sample's embedding
        rows = [r for r, i in enumerate(self.samples) if i == self.args.poison_sample]
        if not rows:
            return output
        output = output.clone()
        output[rows] = float("nan")
        return output

    def after_update(self, step, model):
        """--corrupt-update-*: at that step only, this rank scales the first 1/8 of its parameter
        elements by 1.01 after the optimizer step: the same gradient, another update, as silent
        corruption in a rank's optimizer would make it."""
        if self.rank != self.args.corrupt_update_rank or step != self.args.corrupt_update_step:
            return
        left = sum(p.numel() for p in model.parameters()) // 8
        with torch.no_grad():
            for p in model.parameters():
                if left <= 0:
                    break
                flat = p.view(-1)
                flat[:left].mul_(1.01)
                left -= flat.numel()

    def in_step(self, step):
        """--nondeterministic-op-step: a scatter with a repeated index (put_ without
        accumulate), an op that has no deterministic kernel: which write wins is undefined."""
        if step == self.args.nondeterministic_op_step:
            torch.zeros(4).put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))

    def at_step_start(self, step):
        self.step = step
        a = self.args
        if a.crash_rank == self.rank and a.crash_step == step:  # a dying rank
            os.kill(os.getpid(), signal.SIGSEGV)
        if a.hang_rank == self.rank and a.hang_step == step:  # a rank that never comes back
            while True:
                time.sleep(1)

    def after_end(self):
        """--abort-after-end-rank: the run ended (its end event is written: trained, or halted),
        and this rank dies of SIGABRT as it shuts down, as a torch process does now and then
        when a Gloo worker thread frees a tensor during interpreter exit. An atexit handler, so
        that a halt's SystemExit gets here too."""
        if self.rank == self.args.abort_after_end_rank:
            os.abort()

    def on_local_grads(self, step, model):
        """--corrupt-grad-*: from that step on, this rank negates the first 1/8 of its local
        gradient elements before the allreduce. Finite, plausible in size, and wrong."""
        if self.rank != self.args.corrupt_grad_rank or step < self.args.corrupt_grad_step:
            return
        left = sum(p.numel() for p in model.parameters()) // 8
        with torch.no_grad():
            for p in model.parameters():
                if left <= 0 or p.grad is None:
                    break
                flat = p.grad.view(-1)
                flat[:left].neg_()
                left -= flat.numel()


# ----------------------------------------------------------------------------------------------
# Training.

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = p.add_argument
    add("--steps", type=int, default=100, help="length of the run (the LR schedule's horizon)")
    add("--batch-size", type=int, default=8, help="global batch, in samples")
    add("--grad-accum", type=int, default=1, help="micro-batches per rank and step")
    add("--lr", type=float, default=1e-2)
    add("--warmup", type=int, default=10, help="warm-up steps")
    add("--weight-decay", type=float, default=0.1)
    add("--grad-clip", type=float, default=1.0, help="max gradient norm; 0 disables clipping")
    add("--seed", type=int, default=1234, help="initialization and batch order")
    add("--threads", type=int, default=1, help="torch intra-op threads")
    add("--ddp", type=int, choices=(0, 1), default=0, help="1: wrap the model in "
        "DistributedDataParallel with several ranks (its allreduce, not the helper's)")
    add("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
        help="bf16: autocast; fp16: autocast (CUDA; torch's CPU autocast has no fp16, so there "
        "fp32 math) with a dynamic loss scaler")
    add("--n-layer", type=int, default=2)
    add("--n-head", type=int, default=2)
    add("--n-embd", type=int, default=64)
    add("--block-size", type=int, default=32)
    add("--vocab-size", type=int, default=64)
    add("--compile", default="", help="torch.compile the model with this backend (inductor, "
        "aot_eager, ...; torch >= 2), before DDP wraps it as nanoGPT does, after FSDP shards it; "
        "empty: eager")
    add("--activation-checkpointing", type=int, default=0, help="1: each block's activations are "
        "recomputed in the backward pass (torch.utils.checkpoint)")
    add("--data", default="", help="a file of raw bytes as tokens (needs --vocab-size 256)")
    add("--loader", choices=("index", "torch"), default="index", help="torch: a DataLoader with "
        "--workers worker processes loads the micro-batches (run.data_loader)")
    add("--workers", type=int, default=2, help="the DataLoader's num_workers (--loader torch)")
    add("--fsdp", type=int, choices=(0, 1), default=0, help="1: FSDP2 with several ranks: "
        "fully_shard shards each block's parameters, then the rest (torch >= 2.6)")
    add("--fsdp-checkpoint", choices=fp.FSDP_CHECKPOINTS, default="sharded", help="with --fsdp: "
        "sharded, a folder of each rank's shards (torch.distributed.checkpoint); whole, one file "
        "gathered on rank 0 (fp.Run(fsdp_checkpoint=...))")
    add("--zero", type=int, default=0, help="1: ZeRO-1 (torch's ZeroRedundancyOptimizer: each "
        "rank holds the optimizer state of its share of the parameters) when there are ranks")
    add("--ema-teacher", type=float, default=0.0, help="mean teacher: an EMA of the weights with "
        "this decay, whose logits the loss also matches (0: none; run.start(state=...))")
    add("--distill", type=float, default=0.5, help="weight of the teacher's term (--ema-teacher)")
    add("--determinism", choices=fp.DETERMINISM, default="strict", help="strict: an op with no "
        "deterministic kernel stops the run (exit 2, naming it); warn: it runs, with a warning, "
        "and replays may differ (fp.Run(determinism=...))")
    add("--nondeterministic-op-step", type=int, default=0, help="fault: at this step the script "
        "calls an op with no deterministic kernel (put_ with a repeated index)")
    add("--ema-unsaved", type=int, default=0, help="fault: the teacher is not given to "
        "run.start(state=...), so checkpoints lack it and a resumed run's teacher starts over")
    add("--token-noise", type=float, default=0.0, help="augmentation: this fraction of input "
        "tokens is replaced by random ones as each sample loads (run.sample_rng)")
    add("--batch-noise", type=float, default=0.0, help="masking across each micro-batch: this "
        "fraction of its input tokens is replaced by random ones, in the DataLoader's collate_fn "
        "(--loader torch) or under s.batch_rng")
    add("--data-seed", type=int, default=1, help="seed of the synthetic language")
    add("--data-tokens", type=int, default=32768, help="tokens of the synthetic corpus")
    add("--log-every", type=int, default=10, help="progress lines on stdout (rank 0); 0: none")
    add("--nan-step", type=int, default=0, help="fault: at this step ...")
    add("--nan-layer", default="", help="... this module's output turns NaN")
    add("--poison-sample", type=int, default=-1, help="fault: this sample's embedding is NaN")
    add("--sample-delay-ms", type=float, default=0.0, help="fault: each sample takes this long "
        "to load (a slow data source)")
    add("--overflow-step", type=int, default=0, help="fault: from this step the gradients are "
        "infinite (an fp16 overflow) ...")
    add("--overflow-steps", type=int, default=1, help="... for this many steps")
    add("--lr-spike-step", type=int, default=0, help="fault: at this step the LR is ...")
    add("--lr-spike-factor", type=float, default=1.0, help="... multiplied by this")
    add("--corrupt-grad-rank", type=int, default=-1, help="fault: this rank's local gradient ...")
    add("--corrupt-grad-step", type=int, default=0, help="... is sign-flipped from this step on")
    add("--corrupt-update-rank", type=int, default=-1, help="fault: this rank's parameters ...")
    add("--corrupt-update-step", type=int, default=0, help="... are off by 1%% after this "
        "step's update")
    add("--slow-rank", type=int, default=-1, help="fault: this rank burns ...")
    add("--slow-ms", type=float, default=0.0, help="... this many ms of CPU in each forward pass")
    add("--abort-after-end-rank", type=int, default=-1, help="fault: this rank dies of SIGABRT "
        "after training ended (its end event written), as it shuts down")
    add("--hang-rank", type=int, default=-1, help="fault: this rank sleeps forever ...")
    add("--hang-step", type=int, default=0, help="... at the start of this step")
    add("--crash-rank", type=int, default=-1, help="fault: this rank dies of SIGSEGV ...")
    add("--crash-step", type=int, default=0, help="... at the start of this step")
    add("--config", default="", help="a JSON object of these options (names with _); flags win")
    known, _ = p.parse_known_args(argv)
    if known.config:
        with open(known.config) as f:
            options = json.load(f)
        unknown = sorted(set(options) - set(vars(known)))
        if unknown:
            p.error(f"--config {known.config}: unknown option(s) {', '.join(unknown)}")
        p.set_defaults(**options)
    args = p.parse_args(argv)
    for name in ("steps", "batch_size", "grad_accum", "threads", "n_layer", "n_head", "n_embd",
                 "block_size", "vocab_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if bool(args.nan_step) != bool(args.nan_layer):
        p.error("--nan-step and --nan-layer go together")
    if args.n_embd % args.n_head:
        p.error(f"--n-embd {args.n_embd} is not divisible by --n-head {args.n_head}")
    if args.fsdp and (args.ddp or args.zero or args.ema_teacher):
        p.error("--fsdp goes with none of --ddp, --zero and --ema-teacher here")
    if args.fsdp and not fully_shard_of_torch():
        p.error(f"--fsdp needs torch.distributed.fsdp.fully_shard (torch >= 2.6); this is torch "
                f"{torch.__version__}")
    if args.compile and not hasattr(torch, "compile"):
        p.error(f"--compile {args.compile} needs torch.compile (torch >= 2); this is torch "
                f"{torch.__version__}")
    return args


def main(argv=None):
    args = parse_args(argv)
    run = fp.Run(config=vars(args), seed=args.seed, threads=args.threads,
                 determinism=args.determinism,
                 fsdp_checkpoint=args.fsdp_checkpoint)  # seeds: build after
    data = load_corpus(args)
    model = GPT(args.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd,
                recompute=bool(args.activation_checkpointing))
    model.to(run.device)
    if args.fsdp and run.world_size > 1:  # before the optimizer: it swaps in sharded parameters
        fully_shard = fully_shard_of_torch()
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)  # the embeddings, the tied head and the last LayerNorm
    optimizer = make_optimizer(model, args)
    # LambdaLR's factor i is the factor of step i + 1.
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                  lambda i: lr_at(i + 1, args) / args.lr)
    # Copied before the faults' hooks go on the model: the teacher has none of them.
    teacher = MeanTeacher(model, args.ema_teacher) if args.ema_teacher else None
    faults = Faults(args, run.rank, model)  # before run.start(): its hooks run before the probes
    atexit.register(faults.after_end)
    if args.compile:  # after the faults' hooks, as a script's own hooks would be
        # Dynamo does not guard on module hooks by default: the code it compiled for block 0's
        # forward (no hook) would run for block 1 too, skipping a fault's hook there.
        torch._dynamo.config.skip_nnmodule_hook_guards = False
        model = torch.compile(model, backend=args.compile)
    if args.ddp and run.world_size > 1:  # the helper sees through it (faultline_probe README)
        model = torch.nn.parallel.DistributedDataParallel(model)
    scaler = make_scaler(args, run.device)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    if autocast_dtype == torch.float16 and run.device.type != "cuda":
        autocast_dtype = None
    state = {"teacher": teacher} if teacher is not None and not args.ema_unsaved else {}
    run.start(model, optimizer, scheduler, scaler=scaler, state=state, samples=data.n_samples)
    if run.rank == 0:
        n_params = sum(p.numel() for p in model.parameters())
        print(f"train.py: {n_params} parameters, {data.n_samples} samples, {run.world_size} "
              f"rank(s) on {run.device}, steps {run.first_step}..{args.steps}", flush=True)

    loader = None
    if args.loader == "torch":
        collate = NoisyCollate(data, args.batch_noise) if args.batch_noise else None
        loader = run.data_loader(data, args.batch_size, args.steps, args.grad_accum,
                                 num_workers=args.workers, collate_fn=collate)
    for step in run.steps(args.steps):
        faults.at_step_start(step)
        batch = run.global_batch(step, data.n_samples, args.batch_size)
        with run.step(step) as s:
            faults.in_step(step)
            for samples, x, y in micro_batches(s, batch, args, data, loader):
                bad = (x >= args.vocab_size).any(1).nonzero().flatten().tolist()
                if bad:  # a token the embedding cannot look up: report the sample, exit 4
                    s.data_anomaly(samples[bad[0]], f"token id {int(x[bad[0]].max())} is "
                                   f"not below --vocab-size {args.vocab_size}", where=args.data)
                x, y = x.to(run.device), y.to(run.device)
                faults.samples = samples
                with (torch.autocast(run.device.type, dtype=autocast_dtype) if autocast_dtype
                      else nullcontext()):
                    if teacher is None:
                        loss = model(x, y)
                    else:
                        loss = model(x, y, teacher.logits(x), args.distill)
                s.backward(loss, tokens=x.numel())
            faults.on_local_grads(step, model)
            s.all_reduce()
            s.clip_grad_norm(args.grad_clip)
            if scaler is not None:  # skips the update when the gradients overflowed
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            if teacher is not None:
                teacher.update(run.module)
            faults.after_update(step, model)
        if run.rank == 0 and args.log_every and (step % args.log_every == 0 or step == 1):
            print(f"step {step:5d}/{args.steps}  loss {s.loss:.4f}  grad_norm {s.grad_norm:.3f}  "
                  f"lr {s.lr:.2e}", flush=True)
    run.end()


if __name__ == "__main__":
    main()
