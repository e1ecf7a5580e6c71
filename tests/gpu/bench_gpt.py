#!/usr/bin/env python3
"""GPU benchmark half of tests/gpu/run.sh: the bundled GPT's shape (recipes/train/small.toml, or a
larger one) trained in Python PyTorch, bf16 autocast, AdamW, grad clip 1.0: tokens/s and MFU
against the measured bf16 matmul rate of this GPU. Prints one JSON line.

With --data-sleep-ms it sleeps in the data phase of each step (a planted data stall, for the CUPTI
probe's check); with --nccl it all-reduces the gradients through a 1-rank NCCL process group.
"""
import argparse
import json
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, block, layers, heads, d):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as tied_head = true

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


SHAPES = {  # vocab, block, layers, heads, width, batch
    "small": (256, 128, 6, 6, 384, 16),
    "large": (32768, 1024, 12, 12, 768, 16),  # GPT-2 small-like: fills an H200 better
}


def matmul_tflops(device, n=8192, reps=20):
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    return 2 * n ** 3 * reps / (time.perf_counter() - start) / 1e12


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=SHAPES, default="small")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch", type=int, default=0, help="0: the shape's")
    parser.add_argument("--data-sleep-ms", type=float, default=0)
    parser.add_argument("--nccl", action="store_true")
    parser.add_argument("--no-matmul", action="store_true")
    args = parser.parse_args()

    device = torch.device("cuda")
    torch.manual_seed(1)
    vocab, block, layers, heads, d, batch = SHAPES[args.shape]
    batch = args.batch or batch
    model = Gpt(vocab, block, layers, heads, d).to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, fused=True)
    if args.nccl:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1)
    data = torch.randint(0, vocab, (64, batch, block + 1))
    step_ms = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        if args.data_sleep_ms:
            time.sleep(args.data_sleep_ms / 1000)
        tokens = data[step % 64].to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        if args.nccl:
            for p in model.parameters():
                dist.all_reduce(p.grad)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            step_ms.append((time.perf_counter() - start) * 1000)
    tokens_per_step = batch * block
    mean_ms = sum(step_ms) / len(step_ms)
    tokens_per_s = tokens_per_step / (mean_ms / 1000)
    # 6N per token for the weights plus attention's 12 * layers * block * width (PaLM's appendix B)
    flops_per_token = 6 * params + 12 * layers * block * d
    result = {"shape": args.shape, "params": params, "batch": batch, "block": block,
              "step_ms": round(mean_ms, 3), "tokens_per_s": round(tokens_per_s, 1),
              "loss": round(loss.item(), 4), "finite": math.isfinite(loss.item())}
    if not args.no_matmul:
        peak = matmul_tflops(device)
        result["bf16_matmul_tflops"] = round(peak, 1)
        result["mfu"] = round(flops_per_token * tokens_per_s / (peak * 1e12), 4)
    if args.nccl:
        torch.distributed.destroy_process_group()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
