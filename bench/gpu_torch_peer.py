#!/usr/bin/env python3
"""The PyTorch peer of the engine's GPU throughput, run by bench/gpu_check.sh on the GPU machine.

Two models from the plan of examples/full_study_2b.yaml (`parity plan ... --format json`): the
dense 1C baseline and the MoE run nearest r_a = 20%, written the idiomatic PyTorch 2.x way: bf16
autocast over fp32 weights, RMSNorm, RoPE, F.scaled_dot_product_attention(is_causal=True),
SwiGLU, an untied head over the 256-byte vocabulary; the MoE is `1dense+SE` (first layer dense,
then a softmax router with top-K, K·D_e shared expert, aux and z losses) with dropless experts
computed by sorting the token slots by expert and looping over the experts with index_select /
index_add_; fused AdamW with gradient clipping. Each model runs eager and under torch.compile
(regional: each transformer block compiled, the expert loop left eager because its per-expert
token counts are data-dependent), each in its own process with a timeout, so a slow compile or
an out-of-memory costs only its own figure.

Measured per (model, mode), after warmup: the median forward+backward time of a micro-batch
and the time of an optimizer step (clip + fused AdamW), combined into tokens/s of a plan step
(the plan's batch over its GPUs: `accum` micro-batches, then one optimizer step);
MFU = tokens/s · M / 989e12
with M the plan's flops_per_token (6N plus attention over the full S×S window, the papers'
accounting, although a causal kernel executes about half of it), peak memory
(torch.cuda.max_memory_allocated), compile time (first step minus a timed step). Also the bf16
GEMM ceiling at the models' main matmul shapes.

  gpu_torch_peer.py --plan PLAN.json --out OUT.json [--budget 180] [--micro-batch 8]
  gpu_torch_peer.py --plan PLAN.json --out OUT.json --smoke     (CPU, tiny shapes, float32)
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

PEAK_BF16 = 989e12  # H100/H200 SXM dense bf16 peak, FLOP/s
TARGET_RA = 0.20
MICRO_BATCH = 8  # sequences per micro-batch (the engine's study part runs the same by default)
# Relative weights of the stages in the time budget (time left over flows to later stages).
STAGES = (("gemm", None, 0.6), ("dense", "eager", 1.5), ("moe", "eager", 2.0),
          ("dense", "compile", 4.5), ("moe", "compile", 5.0))


def pick_runs(plan):
    """The dense 1C baseline and the MoE run whose activation rate is nearest 20%."""
    dense = [r for r in plan if r.get("role") == "RUN_ROLE_DENSE_BASELINE"
             and r.get("compute_multiple", 1) == 1]
    moe = [r for r in plan if r.get("role") == "RUN_ROLE_MOE"]
    if not dense or not moe:
        raise ValueError("plan: needs a RUN_ROLE_DENSE_BASELINE with compute_multiple 1 and a "
                         "RUN_ROLE_MOE run")
    moe.sort(key=lambda r: abs(r["accounting"]["activation_rate"] - TARGET_RA))
    return {"dense": dense[0], "moe": moe[0]}


def shapes(run, micro_batch):
    m, a, t = run["model"], run["accounting"], run["training"]
    s = int(t["sequence_length"])
    cfg = {"run": run["name"], "d_model": m["d_model"], "layers": m["num_layers"],
           "heads": m["num_heads"], "kv_heads": m.get("num_kv_heads", m["num_heads"]),
           "head_dim": m["head_dim"], "ffn": m["ffn_hidden"], "vocab": m["vocab_size"],
           "seq": s, "norm_eps": m.get("norm_eps", 1e-5), "rope_theta": m.get("rope_theta", 1e4),
           "flops_per_token": a["flops_per_token"], "params": int(a["params"]),
           "activation_rate": a.get("activation_rate", 1.0), "micro_batch": micro_batch,
           "batch_tokens": int(t["batch_tokens"]),
           "gpus": run.get("resources", {}).get("gpus", 1)}
    # Per-GPU gradient accumulation as the plan's batch would run on its GPUs.
    cfg["accum"] = max(1, round(cfg["batch_tokens"] / cfg["gpus"] / (micro_batch * s)))
    moe = m.get("moe")
    if moe:
        r = moe.get("router", {})
        cfg.update(experts=moe["num_experts"], top_k=moe["top_k"], expert_ffn=moe["expert_hidden"],
                   shared_ffn=moe.get("shared_expert_hidden", 0),
                   dense_layers=int(a.get("dense_layers", 1)),
                   aux_coef=r.get("aux_loss_coef", 0.0), z_coef=r.get("z_loss_coef", 0.0))
    return cfg


def smoke_shapes(cfg):
    """Tiny shapes of the same structure (CPU check of the code paths, not a measurement)."""
    small = dict(cfg, d_model=64, layers=2, heads=4, kv_heads=4, head_dim=16, ffn=160, seq=64,
                 micro_batch=2, accum=2)
    if "experts" in cfg:
        small.update(experts=min(cfg["experts"], 8), top_k=min(cfg["top_k"], 3), expert_ffn=32,
                     shared_ffn=32 * min(cfg["top_k"], 3) if cfg["shared_ffn"] else 0)
    return small


# ---- the model (imports torch lazily: the parent process only orchestrates) -------------------

def build_model(cfg, torch):
    nn, F = torch.nn, torch.nn.functional
    disable = getattr(getattr(torch, "compiler", None), "disable", lambda f: f)

    def rms_norm(d):
        if hasattr(nn, "RMSNorm"):
            return nn.RMSNorm(d, eps=cfg["norm_eps"])

        class RMSNorm(nn.Module):  # torch < 2.4
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(d))

            def forward(self, x):
                xf = x.float()
                return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + cfg["norm_eps"])
                        ).type_as(x) * self.weight
        return RMSNorm()

    def attention(q, k, v):
        if hasattr(F, "scaled_dot_product_attention"):
            gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
        s = q.shape[-2]  # torch 1.x (the CPU smoke check only)
        w = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        return w.masked_fill(mask, float("-inf")).softmax(-1) @ v

    class SwiGLU(nn.Module):
        def __init__(self, d, f):
            super().__init__()
            self.w1 = nn.Linear(d, f, bias=False)
            self.w3 = nn.Linear(d, f, bias=False)
            self.w2 = nn.Linear(f, d, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            d, h, kv, dh = cfg["d_model"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
            self.h, self.kv, self.dh = h, kv, dh
            self.qkv = nn.Linear(d, (h + 2 * kv) * dh, bias=False)
            self.out = nn.Linear(h * dh, d, bias=False)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).split([self.h * self.dh, self.kv * self.dh,
                                         self.kv * self.dh], dim=-1)
            q = q.view(b, s, self.h, self.dh).transpose(1, 2)
            k = k.view(b, s, self.kv, self.dh).transpose(1, 2)
            v = v.view(b, s, self.kv, self.dh).transpose(1, 2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            y = attention(q, k, v).transpose(1, 2).reshape(b, s, self.h * self.dh)
            return self.out(y)

    def rope(x, cos, sin):
        x1, x2 = x.chunk(2, dim=-1)
        return (x * cos + torch.cat((-x2, x1), dim=-1) * sin).type_as(x)

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            d, e = cfg["d_model"], cfg["experts"]
            self.e, self.k = e, cfg["top_k"]
            self.router = nn.Linear(d, e, bias=False)
            self.experts = nn.ModuleList(SwiGLU(d, cfg["expert_ffn"]) for _ in range(e))
            self.shared = SwiGLU(d, cfg["shared_ffn"]) if cfg["shared_ffn"] else None

        def forward(self, x):
            b, s, d = x.shape
            x = x.reshape(b * s, d)
            logits = self.router(x).float()
            probs = logits.softmax(-1)
            gate, idx = probs.topk(self.k, dim=-1)
            # Switch-style load balance over the K choices, and the router z-loss.
            flat = idx.reshape(-1)  # (scatter_add: F.one_hot checks its range with a sync)
            load = probs.new_zeros(self.e).scatter_add_(0, flat, probs.new_ones(flat.numel()))
            load = load / flat.numel()
            aux = cfg["aux_coef"] * self.e * (load * probs.mean(0)).sum() + \
                cfg["z_coef"] * logits.logsumexp(-1).pow(2).mean()
            y = self.dispatch(x, gate, idx)
            if self.shared is not None:
                y = y + self.shared(x)
            return y.view(b, s, d), aux

        @disable
        def dispatch(self, x, gate, idx):
            # Dropless: sort the token slots by expert, run each expert on its tokens.
            flat = idx.reshape(-1)
            order = flat.argsort()
            counts = torch.bincount(flat, minlength=self.e).tolist()
            token = order // self.k
            weight = gate.reshape(-1)[order]
            out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
            start = 0
            for e, n in enumerate(counts):
                if n:
                    tok = token[start:start + n]
                    y = self.experts[e](x.index_select(0, tok)) * weight[start:start + n, None]
                    out.index_add_(0, tok, y.float())
                    start += n
            return out.type_as(x)

    class Block(nn.Module):
        def __init__(self, moe):
            super().__init__()
            self.norm1, self.norm2 = rms_norm(cfg["d_model"]), rms_norm(cfg["d_model"])
            self.attn = Attention()
            self.ffn = MoE() if moe else SwiGLU(cfg["d_model"], cfg["ffn"])

        def forward(self, x, cos, sin):
            x = x + self.attn(self.norm1(x), cos, sin)
            y = self.ffn(self.norm2(x))
            if isinstance(y, tuple):
                return x + y[0], y[1]
            return x + y, torch.zeros((), device=x.device)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg["d_model"]
            first_moe = cfg.get("dense_layers", cfg["layers"])
            self.embed = nn.Embedding(cfg["vocab"], d)
            self.blocks = nn.ModuleList(Block(i >= first_moe) for i in range(cfg["layers"]))
            self.norm = rms_norm(d)
            self.head = nn.Linear(d, cfg["vocab"], bias=False)
            dh = cfg["head_dim"]
            inv = 1.0 / cfg["rope_theta"] ** (torch.arange(0, dh, 2).float() / dh)
            ang = torch.outer(torch.arange(cfg["seq"]).float(), inv)
            ang = torch.cat((ang, ang), dim=-1)
            self.register_buffer("cos", ang.cos(), persistent=False)
            self.register_buffer("sin", ang.sin(), persistent=False)
            for p in self.parameters():
                if p.dim() > 1:
                    torch.nn.init.normal_(p, std=0.02)

        def forward(self, tokens, targets):
            x = self.embed(tokens)
            aux = 0.0
            for block in self.blocks:
                x, a = block(x, self.cos, self.sin)
                aux = aux + a
            logits = self.head(self.norm(x))
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                                   targets.reshape(-1)) + aux

    return Model()


# ---- measurements (child processes) -----------------------------------------------------------

def measure_model(cfg, mode, smoke, deadline, steps, warmup):
    """Times micro-batches (forward + backward) and optimizer steps (clip + fused AdamW) apart;
    a step of the plan is `accum` micro-batches and one optimizer step."""
    import contextlib
    import torch
    dev = "cpu" if smoke else "cuda"
    torch.manual_seed(0)
    res = {"torch": torch.__version__, "mode": mode, "run": cfg["run"], "device": dev}
    if mode == "compile" and not hasattr(torch, "compile"):
        res["skipped"] = f"torch.compile unavailable (torch {torch.__version__})"
        return res
    t0 = time.time()
    # Parameters made on the device (torch.device is a context manager from 2.0).
    where = torch.device(dev) if hasattr(torch.device(dev), "__enter__") else \
        contextlib.nullcontext()
    with where:
        model = build_model(cfg, torch).to(dev)
    if mode == "compile":
        # Regional compilation: each block compiled; identical blocks share one graph (modules'
        # parameters are graph inputs). A higher recompile limit guards against a version that
        # specialises per layer silently falling back to eager after 8.
        import torch._dynamo
        for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit"):
            if hasattr(torch._dynamo.config, name):
                setattr(torch._dynamo.config, name, max(256, getattr(torch._dynamo.config, name)))
        for block in model.blocks:
            block.compile()
    opt_args = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opt = torch.optim.AdamW(model.parameters(), fused=True, **opt_args) if dev == "cuda" \
        else torch.optim.AdamW(model.parameters(), **opt_args)
    b, s, accum = cfg["micro_batch"], cfg["seq"], cfg["accum"]
    data = torch.randint(0, cfg["vocab"], (b, s + 1), device=dev)
    amp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if dev == "cuda" else \
        contextlib.nullcontext
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    res["setup_seconds"] = round(time.time() - t0, 2)

    def micro_batch():
        with amp():
            loss = model(data[:, :-1], data[:, 1:])
        (loss / accum).backward()
        return loss

    def optimizer_step():
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    def timed(fn):
        t = time.time()
        out = fn()
        sync()
        return time.time() - t, out

    firsts = [timed(micro_batch)[0] for _ in range(max(1, warmup))]
    opt_first, _ = timed(optimizer_step)  # allocates the optimizer state
    mbs = []
    while len(mbs) < steps and (not mbs or time.time() + 1.5 * mbs[-1] < deadline):
        t, loss = timed(micro_batch)
        mbs.append(t)
    opts = [timed(optimizer_step)[0] for _ in range(2)]
    mb_s, opt_s = sorted(mbs)[len(mbs) // 2], min(opts)  # median micro-batch
    step_s = accum * mb_s + opt_s
    tps = accum * b * s / step_s
    res.update(micro_batch=b, sequence_length=s, accumulation=accum, timed_micro_batches=len(mbs),
               micro_batch_seconds=[round(t, 4) for t in mbs],
               optimizer_seconds=[round(t, 4) for t in opts],
               warmup_seconds=[round(t, 3) for t in firsts] + [round(opt_first, 3)],
               step_seconds=round(step_s, 4), tokens_per_second=round(tps, 1),
               micro_batch_tokens_per_second=round(b * s / mb_s, 1),
               mfu=round(tps * cfg["flops_per_token"] / PEAK_BF16, 4), loss=float(loss),
               params_counted=sum(p.numel() for p in model.parameters()))
    if mode == "compile":
        res["compile_seconds"] = round(firsts[0] - mb_s, 2)
        try:
            from torch._dynamo.utils import counters
            res["dynamo"] = {"unique_graphs": counters["stats"].get("unique_graphs"),
                             "graph_breaks": sum(counters["graph_break"].values())}
        except Exception as e:  # diagnostics only; their layout changes between versions
            res["dynamo"] = {"error": repr(e)}
    if dev == "cuda":
        res["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
        res["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        res["gpu"] = torch.cuda.get_device_name()
    return res


def gemm_shapes(cfg, tokens):
    d, f = cfg["d_model"], cfg["ffn"]
    qkv = (cfg["heads"] + 2 * cfg["kv_heads"]) * cfg["head_dim"]
    out = {"qkv": (tokens, d, qkv), "attn_out": (tokens, cfg["heads"] * cfg["head_dim"], d),
           "ffn_up": (tokens, d, f), "ffn_down": (tokens, f, d)}
    if "experts" in cfg:
        per_expert = max(1, tokens * cfg["top_k"] // cfg["experts"])
        out.update(expert_up=(per_expert, d, cfg["expert_ffn"]),
                   expert_down=(per_expert, cfg["expert_ffn"], d))
        if cfg["shared_ffn"]:
            out["shared_up"] = (tokens, d, cfg["shared_ffn"])
    return out


def measure_gemm(cfgs, smoke, deadline):
    import torch
    dev, dtype = ("cpu", torch.float32) if smoke else ("cuda", torch.bfloat16)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    res = {"dtype": str(dtype).replace("torch.", ""), "shapes": {}}
    todo = [("square_8192" if not smoke else "square_256", (8192, 8192, 8192) if not smoke
             else (256, 256, 256))]
    for kind, cfg in cfgs.items():
        for name, mkn in gemm_shapes(cfg, cfg["micro_batch"] * cfg["seq"]).items():
            todo.append((f"{kind}.{name}", mkn))
    for name, (m, k, n) in todo:
        if time.time() > deadline:
            res["shapes"][name] = {"m_k_n": [m, k, n], "skipped": "out of time"}
            continue
        a = torch.randn(m, k, device=dev, dtype=dtype)
        w = torch.randn(k, n, device=dev, dtype=dtype)
        for _ in range(3):
            torch.matmul(a, w)
        sync()
        reps, t0 = 0, time.time()
        while reps < 5 or (time.time() - t0 < 0.3 and reps < 200):
            torch.matmul(a, w)
            reps += 1
            if reps % 5 == 0:
                sync()
        sync()
        sec = (time.time() - t0) / reps
        tflops = float(f"{2 * m * k * n / sec / 1e12:.4g}")
        res["shapes"][name] = {"m_k_n": [m, k, n], "tflops": tflops}
    if "dense" in cfgs and time.time() < deadline:
        try:
            res["sdpa"] = measure_sdpa(cfgs["dense"], smoke, deadline)
        except Exception as e:  # a measurement: say why it is missing, keep the GEMMs
            res["sdpa"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    return res


def attention_flops(b, h, s, dh):
    """Causal attention's executed FLOPs, forward + backward: the forward's two S×S products over
    half the window (2·2·B·H·S²·Dh/2), the backward's five at the same size (2.5x the forward)."""
    return 3.5 * 2 * b * h * s * s * dh


def measure_sdpa(cfg, smoke, deadline):
    """PyTorch's fused causal attention (scaled_dot_product_attention: flash or cuDNN, whichever
    PyTorch picks) forward + backward at the dense model's attention shape and micro-batch: the
    peer for the engine's tensor-core attention (gpu_study_cost.py sets them side by side)."""
    import torch
    import torch.nn.functional as F
    dev, dtype = ("cpu", torch.float32) if smoke else ("cuda", torch.bfloat16)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    b, h, kv, s, dh = (cfg["micro_batch"], cfg["heads"], cfg["kv_heads"], cfg["seq"],
                       cfg["head_dim"])
    q = torch.randn(b, h, s, dh, device=dev, dtype=dtype, requires_grad=True)
    k = torch.randn(b, kv, s, dh, device=dev, dtype=dtype, requires_grad=True)
    v = torch.randn(b, kv, s, dh, device=dev, dtype=dtype, requires_grad=True)
    gqa = {"enable_gqa": True} if kv != h else {}

    def once():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
        out.backward(torch.ones_like(out))

    for _ in range(2):
        once()
    sync()
    reps, t0 = 0, time.time()
    while reps < 3 or (time.time() - t0 < 0.5 and reps < 50 and time.time() < deadline):
        once()
        reps += 1
    sync()
    sec = (time.time() - t0) / reps
    return {"shape": {"batch": b, "heads": h, "kv_heads": kv, "seq": s, "head_dim": dh},
            "seconds_forward_backward": float(f"{sec:.4g}"),
            "tflops": float(f"{attention_flops(b, h, s, dh) / sec / 1e12:.4g}")}


def child(args):
    cfg = json.loads(args.cfg) if args.cfg else None
    if args.one == "gemm":
        res = measure_gemm(cfg, args.smoke, args.deadline)
    else:
        res = measure_model(cfg, args.one.split(":")[1], args.smoke, args.deadline, args.steps,
                            args.warmup)
    with open(args.result, "w") as f:
        json.dump(res, f)


# ---- orchestration (parent) -------------------------------------------------------------------

def run_stage(args, kind, mode, cfg, seconds, workdir):
    result = os.path.join(workdir, f"peer_{kind}_{mode or 'x'}.json")
    if os.path.exists(result):
        os.remove(result)
    cmd = [sys.executable, os.path.abspath(__file__), "--one",
           "gemm" if kind == "gemm" else f"{kind}:{mode}", "--cfg", json.dumps(cfg), "--result",
           result, "--deadline", str(time.time() + seconds - 3), "--steps", str(args.steps),
           "--warmup", str(args.warmup)] + (["--smoke"] if args.smoke else [])
    start = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds)
        code, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        code, err = "timeout", (e.stderr or b"").decode(errors="replace") if isinstance(
            e.stderr, bytes) else (e.stderr or "")
    res = {}
    if code == 0 and os.path.exists(result):
        with open(result) as f:
            res = json.load(f)
    else:
        res = {"error": f"exit {code} after {time.time() - start:.0f} s (limit {seconds:.0f} s)",
               "stderr": err[-1500:]}
    res["wall_seconds"] = round(time.time() - start, 1)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan", help="`parity plan examples/full_study_2b.yaml --format json` output")
    ap.add_argument("--out", help="where the JSON report goes")
    ap.add_argument("--budget", type=float, default=210.0, help="seconds for everything")
    ap.add_argument("--micro-batch", type=int, default=MICRO_BATCH,
                    help="sequences per micro-batch")
    ap.add_argument("--steps", type=int, default=4, help="timed micro-batches")
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed micro-batches (the first compiles)")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny shapes, float32")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--cfg", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return child(args)
    if not args.plan or not args.out:
        ap.error("--plan and --out are required")
    deadline = time.time() + args.budget
    with open(args.plan) as f:
        runs = pick_runs(json.load(f))
    cfgs = {k: shapes(r, args.micro_batch) for k, r in runs.items()}
    if args.smoke:
        cfgs = {k: smoke_shapes(c) for k, c in cfgs.items()}
    report = {"smoke": args.smoke, "budget_seconds": args.budget, "peak_flops": PEAK_BF16,
              "models": cfgs, "gemm": None, "runs": {},
              # fp32 weights, gradients and Adam's two moments; the planner has no memory
              # estimate yet, so this static floor is what the measured peak is set against.
              "static_bytes": {k: 16 * c["params"] for k, c in cfgs.items()}}
    workdir = os.path.dirname(os.path.abspath(args.out))
    for i, (kind, mode, _) in enumerate(STAGES):
        left = deadline - time.time()
        weight_left = sum(w for _, _, w in STAGES[i:])
        seconds = min(left, max(20.0, left * STAGES[i][2] / weight_left))
        if seconds < 10:
            res = {"skipped": f"out of time ({left:.0f} s left of the budget)"}
        else:
            res = run_stage(args, kind, mode, cfgs if kind == "gemm" else cfgs[kind], seconds,
                            workdir)
        if kind == "gemm":
            report["gemm"] = res
        else:
            report["runs"][f"{kind}_{mode}"] = res
        print(f"peer {kind} {mode or ''}: " + json.dumps(
            {k: v for k, v in res.items() if k not in ("step_seconds", "shapes", "stderr")}),
            flush=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    failed = [k for k, r in report["runs"].items() if "error" in r]
    return 1 if failed or "error" in (report["gemm"] or {}) else 0


if __name__ == "__main__":
    sys.exit(main())
