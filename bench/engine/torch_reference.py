"""The plain-PyTorch reference model of curve_parity.py: the engine's micro architecture written
the ordinary way (nn.Linear, autograd, torch.optim.AdamW), sharing nothing with the engine but its
definition: pre-norm RMSNorm (eps 1e-5, learned weight), fused QKV with half-split RoPE (θ 10⁴),
causal softmax attention scaled by 1/√Dh, SwiGLU silu(W1x)·W3x → W2, final RMSNorm, untied head;
MoE layers route with softmax → top-K probabilities as raw gates, a Switch-style balance loss
λ·E·Σ f_i·P_i, a router z-loss λ_z·mean(logsumexp²), dropless experts and a shared expert.
"""
import math

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


def rope_tables(seq, head_dim, theta=10000.0):
    half = head_dim // 2
    freqs = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / head_dim)
    ang = torch.arange(seq, dtype=torch.float64)[:, None] * freqs[None, :]
    return ang.cos().float(), ang.sin().float()


def rope(x, cos, sin):
    """x [B,H,S,Dh]: rotate pairs (j, j + Dh/2) by pos·θ^(−2j/Dh)."""
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        cos, sin = rope_tables(seq, d // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1),
                             persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = rope(q, self.cos[:s], self.sin[:s]), rope(k, self.cos[:s], self.sin[:s])
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        probs = scores.masked_fill(self.mask[:s, :s], float("-inf")).softmax(-1)
        return self.out((probs @ v).transpose(1, 2).reshape(b, s, d))


class SwiGLU(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w13 = nn.Linear(d, 2 * hidden, bias=False)  # rows: [gate (silu) | up]
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        a, b = self.w13(x).chunk(2, dim=-1)
        return self.w2(F.silu(a) * b)


class MoE(nn.Module):
    def __init__(self, d, experts, top_k, d_expert, d_shared, aux_weight, z_weight):
        super().__init__()
        self.top_k, self.aux_weight, self.z_weight = top_k, aux_weight, z_weight
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(d, d_expert) for _ in range(experts))
        self.shared = SwiGLU(d, d_shared) if d_shared > 0 else None

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        tokens, n_exp = x.shape[0], len(self.experts)
        logits = self.router(x)
        probs = logits.softmax(-1)
        gate, idx = probs.topk(self.top_k, dim=-1)
        load = torch.bincount(idx.flatten(), minlength=n_exp)
        f = load.float() / (tokens * self.top_k)
        aux = self.aux_weight * n_exp * (f * probs.mean(0)).sum()
        z = self.z_weight * torch.logsumexp(logits, -1).pow(2).mean()
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel():
                out.index_add_(0, tok, expert(x[tok]) * gate[tok, slot, None])
        if self.shared is not None:
            out = out + self.shared(x)
        return out.view(shape), aux + z, load


class Block(nn.Module):
    def __init__(self, m, moe):
        super().__init__()
        d = m["d_model"]
        self.attn_norm, self.ffn_norm = RMSNorm(d), RMSNorm(d)
        self.attn = Attention(d, m["heads"], m["seq"])
        self.ffn = (MoE(d, m["experts"], m["top_k"], m["d_expert"], m["d_shared"],
                        m["aux_weight"], m["z_weight"]) if moe else SwiGLU(d, m["d_ffn"]))

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        if isinstance(self.ffn, MoE):
            y, extra, load = self.ffn(self.ffn_norm(x))
            return x + y, extra, load
        return x + self.ffn(self.ffn_norm(x)), x.new_zeros(()), None


class Model(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m
        self.wte = nn.Embedding(256, m["d_model"])
        self.blocks = nn.ModuleList(
            Block(m, m["arch"] == "moe" and i > 0) for i in range(m["layers"]))
        self.final_norm = RMSNorm(m["d_model"])
        self.head = nn.Linear(m["d_model"], 256, bias=False)

    def forward(self, tokens, targets):
        """Returns (mean cross-entropy in nats, Σ aux + z over MoE layers, expert loads)."""
        x = self.wte(tokens)
        extra, loads = x.new_zeros(()), []
        for block in self.blocks:
            x, e, load = block(x)
            extra = extra + e
            if load is not None:
                loads.append(load)
        logits = self.head(self.final_norm(x))
        ce = F.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))
        return ce, extra, loads

    def engine_map(self):
        """Engine tensor name → the torch parameters whose flattened concatenation it is."""
        out = {"wte": [self.wte.weight]}
        for i, b in enumerate(self.blocks):
            p = f"layer{i}."
            out[p + "attn_norm"] = [b.attn_norm.weight]
            out[p + "w_qkv"] = [b.attn.qkv.weight]
            out[p + "w_o"] = [b.attn.out.weight]
            out[p + "ffn_norm"] = [b.ffn_norm.weight]
            if isinstance(b.ffn, MoE):
                out[p + "router"] = [b.ffn.router.weight]
                out[p + "experts.w13"] = [e.w13.weight for e in b.ffn.experts]
                out[p + "experts.w2"] = [e.w2.weight for e in b.ffn.experts]
                if b.ffn.shared is not None:
                    out[p + "shared.w13"] = [b.ffn.shared.w13.weight]
                    out[p + "shared.w2"] = [b.ffn.shared.w2.weight]
            else:
                out[p + "w13"] = [b.ffn.w13.weight]
                out[p + "w2"] = [b.ffn.w2.weight]
        out["final_norm"] = [self.final_norm.weight]
        out["head"] = [self.head.weight]
        return out

    def load_engine(self, tensors):
        """Copies {engine name: array} (engine_compat.engine_init or a checkpoint) in."""
        with torch.no_grad():
            for name, params in self.engine_map().items():
                flat = torch.from_numpy(tensors[name].reshape(-1).copy())
                pos = 0
                for p in params:
                    p.copy_(flat[pos:pos + p.numel()].view_as(p))
                    pos += p.numel()

    def engine_view(self, attr="data"):
        """{engine name: flat numpy array} of parameters (attr 'data') or gradients ('grad')."""
        return {name: torch.cat([getattr(p, attr).reshape(-1) for p in ps]).numpy()
                for name, ps in self.engine_map().items()}

    def init_like_engine(self, generator, std=0.02, scaled=True):
        """The engine's scheme with torch's own random numbers: N(0, std), residual outputs
        (attention out, FFN/expert/shared w2) × 1/√(2L) unless not `scaled`, norm weights 1."""
        scale = 1.0 / math.sqrt(2.0 * self.m["layers"]) if scaled else 1.0
        with torch.no_grad():
            for name, params in self.engine_map().items():
                for p in params:
                    if p.dim() == 1:
                        p.fill_(1.0)
                    else:
                        s = std * (scale if name.endswith("w_o") or name.endswith("w2") else 1.0)
                        p.normal_(0.0, s, generator=generator)

    def optimizer(self, lr, betas, eps, weight_decay):
        """AdamW with decay on matrices (embedding and head included), none on norm weights."""
        decay = [p for p in self.parameters() if p.dim() > 1]
        rest = [p for p in self.parameters() if p.dim() <= 1]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": rest, "weight_decay": 0.0}],
                                 lr=lr, betas=betas, eps=eps)
