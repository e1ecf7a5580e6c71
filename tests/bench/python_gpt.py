#!/usr/bin/python3
"""The bundled trainer's GPT and training step, written as a plain PyTorch program.

This is the Python baseline of tests/bench/trainer_throughput: the same model, loss, clipping,
optimizer and schedule as `faultline-train` (src/trainer/), in the straightforward nanoGPT style
that a PyTorch user would write. It is deliberately *not* tuned: the point of the benchmark is
to compare the C++ trainer against what people actually run.

    /usr/bin/python3 tests/bench/python_gpt.py -c recipes/train/tiny.toml \
        --set data.path=DIR --set train.steps=30

Run it with Debian's python3 (/usr/bin/python3, python3-torch), which uses the same libtorch
build, BLAS and OpenMP as faultline-train. Prints one JSON object on stdout with tokens/s over
steps 3..N (the first two steps pay one-time allocation costs, as in faultline-train).
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recipe_config import load_config  # noqa: E402

# --------------------------------------------------------------------------------------------
# Data: faultline shards (docs/data.md), samples of block_size + 1 tokens at stride block_size.

def read_shard(path, tokenizer):
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:8] != b"FLSHARD\0":
        sys.exit(f"python_gpt: {path}: not a faultline shard")
    version, name_length = struct.unpack_from("<II", blob, 8)
    if version != 1:
        sys.exit(f"python_gpt: {path}: unsupported shard format version {version}")
    name = blob[16:16 + name_length].decode()
    if name != tokenizer:
        sys.exit(f"python_gpt: {path}: tokenizer {name!r}, the config says {tokenizer!r}")
    _tok_version, _vocab, count, _checksum = struct.unpack_from("<IIQQ", blob, 16 + name_length)
    return np.frombuffer(blob, dtype="<u2", count=count, offset=40 + name_length)


class ShardData:
    def __init__(self, path, tokenizer, block_size, fraction):
        files = [os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".flshard")] \
            if os.path.isdir(path) else [path]
        if not files:
            sys.exit(f"python_gpt: no *.flshard files in {path}")
        self.block_size = block_size
        self.shards = [read_shard(f, tokenizer) for f in files]
        # (shard, first token) of every sample, in faultline's global sample order.
        self.index = [(s, j * block_size) for s, tokens in enumerate(self.shards)
                      for j in range((len(tokens) - 1) // block_size)]
        used = math.ceil(fraction * len(self.index))
        self.index = self.index[:max(1, min(used, len(self.index)))]

    def batch(self, samples):
        rows = [self.shards[s][o:o + self.block_size + 1] for s, o in (self.index[i] for i in samples)]
        data = torch.from_numpy(np.stack(rows).astype(np.int64))
        return data[:, :-1], data[:, 1:]


class FeistelSampler:
    """faultline-train's sampler (src/trainer/sampler.cpp), so both programs see the same
    batches and their loss curves can be compared; it costs microseconds per step."""
    M64 = (1 << 64) - 1

    def __init__(self, seed, num_samples, global_batch):
        self.seed, self.n, self.global_batch = seed, num_samples, global_batch
        self.bits = 0
        while (1 << self.bits) < num_samples:
            self.bits += 1
        self.bits += self.bits % 2

    @classmethod
    def mix(cls, x):
        x = (x + 0x9E3779B97F4A7C15) & cls.M64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & cls.M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & cls.M64
        return x ^ (x >> 31)

    def permute(self, index, epoch):
        half = self.bits // 2
        mask = (1 << half) - 1
        key = self.mix(self.seed ^ self.mix(epoch + 1))
        x = index
        while True:
            left, right = x >> half, x & mask
            for r in range(4):
                left, right = right, left ^ (self.mix(right ^ key ^ (r << 56)) & mask)
            x = (left << half) | right
            if x < self.n:
                return x

    def global_batch_at(self, step):
        position = (step - 1) * self.global_batch
        return [self.permute((position + j) % self.n, (position + j) // self.n)
                for j in range(self.global_batch)]


# --------------------------------------------------------------------------------------------
# The model: nanoGPT-style modules, same layout and parameter names as src/trainer/model.cpp.

class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg["n_head"]
        self.qkv = nn.Linear(cfg["n_embd"], 3 * cfg["n_embd"])
        self.proj = nn.Linear(cfg["n_embd"], cfg["n_embd"])
        T = cfg["block_size"]
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc = nn.Linear(cfg["n_embd"], 4 * cfg["n_embd"])
        self.proj = nn.Linear(4 * cfg["n_embd"], cfg["n_embd"])

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg["n_embd"])
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg["n_embd"])
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.wpe = nn.Embedding(cfg["block_size"], cfg["n_embd"])
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(cfg["n_embd"])
        self.head = None if cfg["tied_head"] else \
            nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
        self._init_weights(cfg["init_std"])

    @torch.no_grad()
    def _init_weights(self, std):
        # The same rule, in the same order, as GptImpl::initialize.
        residual_std = std / math.sqrt(2.0 * self.cfg["n_layer"])
        for name, p in self.named_parameters():
            if "ln_" in name:
                p.fill_(1.0) if name.endswith("weight") else p.zero_()
            elif name.endswith("bias"):
                p.zero_()
            elif ".proj.weight" in name:
                p.normal_(0.0, residual_std)
            else:
                p.normal_(0.0, std)

    def forward(self, idx, targets):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        logits = self.head(x) if self.head is not None else F.linear(x, self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def lr_at(sched, base_lr, step, total_steps):
    """src/trainer/schedule.cpp."""
    min_lr = base_lr * sched["min_lr_ratio"]
    warmup = sched["warmup_steps"]
    if warmup > 0 and step <= warmup:
        return base_lr * step / warmup
    if sched["kind"] == "constant":
        return base_lr
    if sched["kind"] == "cosine":
        progress = min(max((step - warmup) / max(1, total_steps - warmup), 0.0), 1.0)
        return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
    decay_steps = round(sched["decay_fraction"] * total_steps)  # wsd
    decay_start = total_steps - decay_steps
    if step <= decay_start or decay_steps == 0:
        return base_lr
    progress = min(max((step - decay_start) / decay_steps, 0.0), 1.0)
    return base_lr + (min_lr - base_lr) * progress


# --------------------------------------------------------------------------------------------
# Runtime facts, asked of the loaded BLAS the way faultline-train does (runtime_info.cpp).

def loaded_blas():
    """The loaded libblas.so.3 (where sgemm_ lives, as faultline-train reports it), else OpenBLAS."""
    with open("/proc/self/maps") as maps:
        paths = [line.split()[-1] for line in maps if line.count("/") > 0]
    for pattern in ("/libblas.so", "/libopenblas"):
        for path in paths:
            if pattern in path:
                return os.path.realpath(path)
    return None


def blas_info(threads):
    info = {"blas": loaded_blas() or "unknown", "blas_config": "", "blas_kernel": "",
            "blas_threads": None}
    if not info["blas"].startswith("/"):
        return info
    lib = ctypes.CDLL(info["blas"])  # already loaded by libtorch: the same handle
    if hasattr(lib, "openblas_set_num_threads"):
        lib.openblas_set_num_threads(ctypes.c_int(threads))  # as faultline-train does
    for key, symbol in (("blas_config", "openblas_get_config"), ("blas_kernel", "openblas_get_corename")):
        if hasattr(lib, symbol):
            fn = getattr(lib, symbol)
            fn.restype = ctypes.c_char_p
            info[key] = fn().decode()
    if hasattr(lib, "openblas_get_num_threads"):
        info["blas_threads"] = lib.openblas_get_num_threads()
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", required=True, help="trainer recipe (TOML)")
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        metavar="section.key=value", help="override a key (repeatable)")
    parser.add_argument("--sampler", choices=["faultline", "random"], default="faultline",
                        help="faultline: the trainer's batches (default); random: torch.randint")
    args = parser.parse_args()
    cfg = load_config(args.config, args.overrides)
    mcfg, ocfg, tcfg = cfg["model"], cfg["optim"], cfg["train"]
    if not cfg["data"]["path"]:
        sys.exit("python_gpt: set data.path to a shard directory (faultline data synth --out DIR)")

    threads = int(tcfg["threads"])
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(tcfg["seed"])
    runtime = blas_info(threads)

    data = ShardData(cfg["data"]["path"], cfg["data"]["tokenizer"], mcfg["block_size"],
                     cfg["data"]["fraction"])
    batch_size, accum = tcfg["batch_size"], tcfg["grad_accum"]
    if batch_size % accum:
        sys.exit("python_gpt: train.batch_size is not divisible by train.grad_accum")
    micro = batch_size // accum
    sampler = FeistelSampler(tcfg["seed"], len(data.index), batch_size)
    generator = torch.Generator().manual_seed(tcfg["seed"])

    model = GPT(mcfg)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": ocfg["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=ocfg["lr"], betas=(ocfg["beta1"], ocfg["beta2"]), eps=ocfg["eps"])

    steps = tcfg["steps"]
    last = min(tcfg["stop_after"], steps) if tcfg["stop_after"] > 0 else steps
    horizon = cfg["schedule"]["total_steps"] or steps
    log_every = tcfg.get("log_every", 0)
    # tokens/s over steps 3..N, as wall time from the end of step 2 to the end of step N: the
    # same definition the benchmark applies to faultline-train's record timestamps.
    timed_tokens, step_ms, losses, step_end, step_cpu = 0, [], [], {}, {}
    for step in range(1, last + 1):
        t0 = time.perf_counter()
        if args.sampler == "faultline":
            samples = sampler.global_batch_at(step)
        else:
            samples = torch.randint(len(data.index), (batch_size,), generator=generator).tolist()
        lr = lr_at(cfg["schedule"], ocfg["lr"], step, horizon)
        for group in optimizer.param_groups:
            group["lr"] = lr
        step_loss = 0.0
        for m in range(accum):
            x, y = data.batch(samples[m * micro:(m + 1) * micro])
            loss = model(x, y) / accum
            loss.backward()
            step_loss += loss.item()
        if ocfg["grad_clip"] > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), ocfg["grad_clip"]).item()
        else:
            grad_norm = float("nan")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step_end[step] = time.perf_counter()
        step_cpu[step] = time.process_time()  # CPU seconds of the process, all threads
        dt = step_end[step] - t0
        losses.append(step_loss)
        if step > 2:
            timed_tokens += batch_size * mcfg["block_size"]
            step_ms.append(dt * 1000)
        if log_every and (step % log_every == 0 or step == 1):
            print(f"step {step:6d}  loss {step_loss:.4f}  grad_norm {grad_norm:.3f}  lr {lr:.2e}  "
                  f"{dt * 1000:.1f} ms", file=sys.stderr)

    timed_s = step_end[last] - step_end[2] if last > 2 else 0.0
    timed_cpu_s = step_cpu[last] - step_cpu[2] if last > 2 else 0.0
    result = {
        "program": "python_gpt",
        "tokens_per_s": timed_tokens / timed_s if timed_s > 0 else 0.0,
        "cpu_tokens_per_s": timed_tokens / timed_cpu_s if timed_cpu_s > 0 else 0.0,
        "step_ms_median": statistics.median(step_ms) if step_ms else None,
        "timed_steps": len(step_ms),
        "steps": last,
        "tokens_per_step": batch_size * mcfg["block_size"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "python": sys.executable,
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
        **runtime,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
