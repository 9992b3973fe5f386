#!/usr/bin/python3
"""PyTorch CPU peer of engine_bench: the same three models (same shapes, batch, threads, AdamW,
fp32), written the plain idiomatic way, timed over the same number of steps.

    /usr/bin/python3 bench/engine/torch_peer.py --model dense|moe16|moe64 --threads 2 --steps 15

Prints one JSON line with tokens_per_second and peak RSS. Data: bytes of the bible corpus in
random windows (the data path is not what is measured).
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, theta=10000.0):
    # x: [B, H, S, Dh], rotate pairs (j, j + Dh/2)
    b, h, s, d = x.shape
    half = d // 2
    freqs = theta ** (-torch.arange(half, dtype=torch.float32) * 2 / d)
    ang = torch.arange(s, dtype=torch.float32)[:, None] * freqs[None, :]
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = rope(q), rope(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(
            F, "scaled_dot_product_attention") else self._attend(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, s, d))

    @staticmethod
    def _attend(q, k, v):
        s = q.shape[-2]
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


class SwiGLU(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w13 = nn.Linear(d, 2 * hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        a, b = self.w13(x).chunk(2, dim=-1)
        return self.w2(F.silu(a) * b)


class MoE(nn.Module):
    """Dropless top-K MoE: tokens sorted by expert, one matmul pair per expert."""

    def __init__(self, d, experts, k, hidden, shared):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(d, hidden) for _ in range(experts))
        self.shared = SwiGLU(d, shared) if shared else None

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        probs = self.router(x).softmax(-1)
        gate, idx = probs.topk(self.k, dim=-1)
        p_mean = probs.mean(0)
        f = torch.bincount(idx.flatten(), minlength=probs.shape[1]).float() / idx.numel()
        aux = 0.01 * probs.shape[1] * (f * p_mean).sum()
        flat = idx.flatten()
        order = flat.argsort(stable=True)
        token = order // self.k
        counts = torch.bincount(flat, minlength=len(self.experts)).tolist()
        out = torch.zeros_like(x)
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            sel = order[start:start + n]
            t = token[start:start + n]
            y = self.experts[e](x[t]) * gate.flatten()[sel, None]
            out.index_add_(0, t, y)
            start += n
        if self.shared is not None:
            out = out + self.shared(x)
        return out.view(shape), aux


class Block(nn.Module):
    def __init__(self, d, heads, ffn, moe):
        super().__init__()
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.attn = Attention(d, heads)
        self.ffn = MoE(d, *moe) if moe else SwiGLU(d, ffn)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        if isinstance(self.ffn, MoE):
            y, aux = self.ffn(self.n2(x))
            return x + y, aux
        return x + self.ffn(self.n2(x)), x.new_zeros(())


class Model(nn.Module):
    def __init__(self, d=256, layers=4, heads=4, ffn=688, moe=None):
        super().__init__()
        self.emb = nn.Embedding(256, d)
        # 1dense+SE: layer 0 dense, the rest MoE.
        self.blocks = nn.ModuleList(Block(d, heads, ffn, moe if (moe and i > 0) else None)
                                    for i in range(layers))
        self.norm = RMSNorm(d)
        for name, p in self.named_parameters():  # N(0, 0.02) like the engine (norms stay 1)
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, targets):
        x = self.emb(tokens)
        aux = 0.0
        for b in self.blocks:
            x, a = b(x)
            aux = aux + a
        logits = self.norm(x) @ self.emb.weight.t()
        return F.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1)) + aux


MODELS = {
    "dense": dict(moe=None),
    "moe16": dict(moe=(16, 2, 128, 256)),  # E, K, D_e, D_se = K·D_e
    "moe64": dict(moe=(64, 4, 64, 256)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="dense", choices=MODELS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--corpus", default="/tmp/kjv.txt")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    data = torch.frombuffer(bytearray(open(args.corpus, "rb").read()), dtype=torch.uint8).long()
    model = Model(**MODELS[args.model])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    warm, times = 5, []
    for step in range(args.steps):
        starts = torch.randint(0, len(data) - args.seq - 1, (args.batch,))
        window = torch.stack([data[s:s + args.seq + 1] for s in starts.tolist()])
        t0 = time.perf_counter()
        loss = model(window[:, :-1], window[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step >= warm:
            times.append(time.perf_counter() - t0)
    tokens = args.batch * args.seq
    print(json.dumps({
        "peer": "pytorch " + torch.__version__,
        "model": args.model,
        "threads": args.threads,
        "tokens_per_second": tokens * len(times) / sum(times),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "final_loss_bpc": loss.item() / math.log(2),
    }))


if __name__ == "__main__":
    main()
