#!/usr/bin/python3
"""Training-curve parity: the engine (build/kernels/parity-train) against a plain-PyTorch
implementation of the same micro models, trained side by side on the same data.

    /usr/bin/python3 bench/engine/curve_parity.py                     # both models, seeds 1 and 2
    /usr/bin/python3 bench/engine/curve_parity.py --models dense --seeds 1 --steps 100
    /usr/bin/python3 bench/engine/curve_parity.py --init torch --ref-data random   # independent
    /usr/bin/python3 bench/engine/curve_parity.py --isolate            # step-by-step diagnostics
    /usr/bin/python3 bench/engine/curve_parity.py --from-json F        # reprint a --json F run

Models (kernels/README.md vocabulary): dense d_model 64, 2 layers, 2 heads, SwiGLU 176, RoPE, MHA,
untied embeddings; MoE 1dense+SE with E 8, K 2, D_e 32 (shared expert K·D_e = 64, aux 0.01,
z 0.001, raw gates). AdamW (0.9, 0.95, eps 1e-8, decay 0.1 on matrices), clip 1.0, lr 3e-3 with 3
warmup steps then cosine to 0.1×, 16 sequences of 128 bytes per step, 300 steps, KJV with the last
5 % held out, validation on its first --eval-tokens bytes. Minutes per model and seed here.

What is shared between the two sides, and how (engine_compat.py re-implements it from the
engine's sources, so the PyTorch side can read exactly the engine's windows in its order):
- data: --ref-data seeded (default) gives torch the engine's unique windows (a seeded sample of
  the whole training split) in its SplitMix64 Fisher–Yates epoch order; prefix, the first D̂
  windows, which the engine used before its fix (run it against such a build with --engine);
  random, torch's own windows at uniform random offsets of the whole split;
- initial weights: --init engine (default) reproduces InitParams bit for bit (SplitMix64 +
  Box–Muller), so both start from the same weights; --init torch draws the same scheme with
  torch's generator (independent initial weights, same distribution); --init plain draws
  N(0, 0.02) everywhere (no 1/√(2L) on the residual outputs);
- schedule: schedule.h's warmup (step+1)/W and cosine, set on the optimizer every step.
Everything else — forward, backward (autograd), AdamW (torch.optim), clipping, evaluation — is
PyTorch's own (torch_reference.py). The engine runs with --threads 1, torch with
torch.set_num_threads(1). Gaps are engine / torch − 1: per run, and on the curves averaged over
the seeds (with independent initial weights single runs differ by a few % from init noise alone).

--isolate checks the pieces one at a time on the first seed: the loss on step 1's batch from the
same weights, the gradient per tensor (the engine's recovered from the AdamW first moments of
consecutive checkpoints: g = (m_k − β₁·m_{k−1}) / ((1 − β₁)·clip)) and the AdamW update, at step 1
and at step --isolate-step from the engine's own state; the learning rate at every step; and the
validation BPC of the engine's final weights evaluated by torch.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engine_compat as ec  # noqa: E402
from torch_reference import Model  # noqa: E402

LN2 = math.log(2.0)
BASE = dict(d_model=64, layers=2, heads=2, d_ffn=176, seq=128)
MODELS = {
    "dense": dict(BASE, arch="dense"),
    "moe": dict(BASE, arch="moe", experts=8, top_k=2, d_expert=32, d_shared=64, aux_weight=0.01,
                z_weight=0.001),
}


def run_spec(name, m, a, seed, steps):
    model = {"architecture": "ARCHITECTURE_DENSE", "dModel": m["d_model"],
             "numLayers": m["layers"], "numHeads": m["heads"], "numKvHeads": m["heads"],
             "ffnHidden": m["d_ffn"], "tieEmbeddings": False}
    if m["arch"] == "moe":
        model["architecture"] = "ARCHITECTURE_MOE"
        model["moe"] = {"layout": "MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT",
                        "numExperts": m["experts"], "topK": m["top_k"],
                        "expertHidden": m["d_expert"], "sharedExpertHidden": m["d_shared"],
                        "router": {"balance": "BALANCE_METHOD_AUX_LOSS",
                                   "auxLossCoef": m["aux_weight"], "zLossCoef": m["z_weight"]}}
    training = {"learningRate": a.lr, "batchTokens": a.batch * m["seq"],
                "sequenceLength": m["seq"], "microBatchSequences": a.batch,
                "schedule": "LR_SCHEDULE_COSINE", "warmupSteps": a.warmup,
                "minLrRatio": a.min_lr_ratio, "adamBeta1": 0.9, "adamBeta2": 0.95,
                "adamEpsilon": 1e-8, "weightDecay": a.weight_decay, "gradClip": a.clip,
                "seed": seed, "steps": steps, "logEverySteps": 1,
                "evalEverySteps": a.eval_every, "evalTokens": a.eval_tokens}
    return {"name": name, "model": model, "training": training,
            "data": {"corpus": os.path.abspath(a.corpus), "validationFraction": a.val_fraction,
                     "reuse": "REUSE_MODE_UNIQUE"}}


def run_engine(name, m, a, seed, workdir, max_steps=None, resume=False):
    """Runs parity-train; returns ({step: metrics line}, summary line, checkpoint dir). With
    `resume` it continues from the directory's LATEST checkpoint and appends to its metrics."""
    spec_path = os.path.join(workdir, name + ".json")
    out_dir = os.path.join(workdir, name + "-ckpt")
    metrics_path = os.path.join(workdir, name + ".jsonl")
    with open(spec_path, "w") as f:
        json.dump(run_spec(name, m, a, seed, a.steps), f)
    if not resume:
        if os.path.exists(metrics_path):
            os.remove(metrics_path)
        subprocess.run(["rm", "-rf", out_dir], check=True)
    cmd = [a.engine, "--run", spec_path, "--out", out_dir, "--threads", "1",
           "--metrics", metrics_path] + (["--resume"] if resume else [])
    if max_steps:
        cmd += ["--max-steps", str(max_steps)]
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode
    if rc not in (0, 3):
        raise SystemExit(f"{' '.join(cmd)}: exit {rc}")
    lines = [json.loads(line) for line in open(metrics_path)]
    metrics = {j["step"]: j for j in lines if j["event"] == "metrics"}
    summary = [j for j in lines if j["event"] == "summary"][-1]
    return metrics, summary, out_dir


def latest_checkpoint(out_dir):
    with open(os.path.join(out_dir, "LATEST")) as f:
        return os.path.join(out_dir, f.read().strip())


def make_torch(m, a, seed):
    torch.manual_seed(seed)
    model = Model(m)
    if a.init == "engine":
        model.load_engine(ec.engine_init(m, seed))
    else:
        model.init_like_engine(torch.Generator().manual_seed(seed), scaled=a.init == "torch")
    return model


def evaluate(model, val):
    xs, ys = val
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(xs), 16):
            x, y = torch.from_numpy(xs[i:i + 16]), torch.from_numpy(ys[i:i + 16])
            total += model(x, y)[0].item() * len(x)
    model.train()
    return total / len(xs) / LN2


def train_torch(m, a, seed, corpus, val):
    """Returns {step: dict(train_bpc, grad_norm[, val_bpc])} with engine step numbering (1-based
    after the update; train_bpc is that step's batch before it)."""
    model = make_torch(m, a, seed)
    opt = model.optimizer(a.lr, (0.9, 0.95), 1e-8, a.weight_decay)
    params = [p for p in model.parameters()]
    curve, cursor = {}, 0
    sampler = np.random.default_rng(seed)
    for step in range(a.steps):
        if a.ref_data == "random":
            x, y = corpus.random_training(sampler, a.batch)
        else:
            x, y = corpus.training(cursor, a.batch)
        cursor += a.batch
        lr = ec.learning_rate(step, a.steps, a.lr, a.warmup, a.min_lr_ratio * a.lr)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        ce, extra, _ = model(torch.from_numpy(x), torch.from_numpy(y))
        (ce + extra).backward()
        norm = torch.nn.utils.clip_grad_norm_(params, a.clip).item()
        opt.step()
        point = {"train_bpc": ce.item() / LN2, "grad_norm": norm, "learning_rate": lr}
        done = step + 1
        if done % a.eval_every == 0 or done == a.steps:
            point["val_bpc"] = evaluate(model, val)
        curve[done] = point
    return curve, model


def rel(a, b):
    return (a - b) / b


def smooth(curve, key, step, width):
    vals = [curve[s][key] for s in range(max(1, step - width + 1), step + 1) if s in curve]
    return sum(vals) / len(vals)


def compare(name, eng, ref, a):
    """Prints both curves at the eval steps and returns the figures for the summary."""
    eval_steps = sorted(s for s in ref if "val_bpc" in ref[s])
    print(f"\n{name}: engine vs torch (train BPC = mean of the {a.smooth} steps ending there)")
    print(f"{'step':>5} {'train eng':>9} {'train ref':>9} {'gap':>7} {'val eng':>8} "
          f"{'val ref':>8} {'gap':>7} {'|g| eng':>8} {'|g| ref':>8}")
    val_gaps, train_gaps = [], []
    for s in eval_steps:
        te, tr = smooth(eng, "train_bpc", s, a.smooth), smooth(ref, "train_bpc", s, a.smooth)
        ve, vr = eng[s]["val_bpc"], ref[s]["val_bpc"]
        val_gaps.append(rel(ve, vr))
        train_gaps.append(rel(te, tr))
        print(f"{s:5d} {te:9.4f} {tr:9.4f} {100 * rel(te, tr):+6.2f}% {ve:8.4f} {vr:8.4f} "
              f"{100 * rel(ve, vr):+6.2f}% {eng[s]['grad_norm']:8.3f} {ref[s]['grad_norm']:8.3f}")
    final = eval_steps[-1]
    return {"final_val_engine": eng[final]["val_bpc"], "final_val_torch": ref[final]["val_bpc"],
            "final_val_gap": val_gaps[-1], "max_val_gap": max(val_gaps, key=abs),
            "max_train_gap": max(train_gaps, key=abs), "step1_train_engine": eng[1]["train_bpc"],
            "step1_train_torch": ref[1]["train_bpc"]}


def curves(a, workdir):
    results = {}
    for name in a.models:
        m = MODELS[name]
        for seed in a.seeds:
            corpus = ec.Corpus(a.corpus, m["seq"], seed, a.val_fraction,
                               a.steps * a.batch * m["seq"], a.ref_data)
            val = corpus.validation(a.eval_tokens // m["seq"])
            t0 = time.time()
            eng, summary, _ = run_engine(f"{name}-s{seed}", m, a, seed, workdir)
            t1 = time.time()
            ref, _ = train_torch(m, a, seed, corpus, val)
            t2 = time.time()
            key = f"{name} seed {seed}"
            results[key] = compare(key, eng, ref, a)
            results[key]["seconds"] = {"engine": round(t1 - t0, 1), "torch": round(t2 - t1, 1)}
            results[key]["curves"] = {"engine": eng, "torch": ref}
    return results


def mean_curve(curves):
    """Step-wise mean of several {step: point} curves (keys as ints)."""
    steps = set.intersection(*(set(c) for c in curves))
    def numeric(point):
        return {k for k, v in point.items() if isinstance(v, (int, float))}
    return {s: {k: sum(c[s][k] for c in curves) / len(curves)
                for k in set.intersection(*(numeric(c[s]) for c in curves))}
            for s in sorted(steps)}


def summarize(results, a):
    """Per-run rows, then per-model rows on the curves averaged over seeds; the targets."""
    means = {}
    for name in a.models:
        runs = [r["curves"] for k, r in results.items() if k.startswith(name + " seed")]
        if len(runs) > 1:
            key = f"{name} seed mean"
            means[key] = compare(key, mean_curve([r["engine"] for r in runs]),
                                 mean_curve([r["torch"] for r in runs]), a)
    print("\nsummary (relative gap = engine / torch − 1; train = mean of "
          f"{a.smooth} steps)")
    print(f"{'run':<16} {'val eng':>8} {'val ref':>8} {'final gap':>9} {'max val gap':>11} "
          f"{'max train gap':>13}")
    verdict = {}
    for group, rows in (("every run", results), ("seed means", means)):
        for key, r in rows.items():
            print(f"{key:<16} {r['final_val_engine']:8.4f} {r['final_val_torch']:8.4f} "
                  f"{100 * r['final_val_gap']:+8.3f}% {100 * r['max_val_gap']:+10.3f}% "
                  f"{100 * r['max_train_gap']:+12.3f}%")
        if rows:
            verdict[group] = all(abs(r["final_val_gap"]) <= 0.02 and
                                 abs(r["max_val_gap"]) <= 0.03 and
                                 abs(r["max_train_gap"]) <= 0.03 for r in rows.values())
    for group, ok in verdict.items():
        print(f"targets (final val within 2 %, whole curve within 3 %), {group}:",
              "met" if ok else "NOT met")
    return verdict.get("every run", False)


def set_adam_state(model, opt, moments, step):
    """Puts the engine's AdamW moments (or zeros) into torch's optimizer state."""
    for name, params in model.engine_map().items():
        flat_m, flat_v = (np.zeros(sum(p.numel() for p in params), np.float32), ) * 2
        if moments is not None:
            flat_m, flat_v = moments[name][1].reshape(-1), moments[name][2].reshape(-1)
        pos = 0
        for p in params:
            n = p.numel()
            opt.state[p] = {"step": torch.tensor(float(step)),
                            "exp_avg": torch.from_numpy(flat_m[pos:pos + n].copy()).view_as(p),
                            "exp_avg_sq": torch.from_numpy(flat_v[pos:pos + n].copy()).view_as(p)}
            pos += n


def check_step(m, a, corpus, before, after, step, eng_norm):
    """One optimizer step (0-based `step`) from the engine's state `before` (a checkpoint's
    {name: (params, m, v)}, or {name: (init,)} at step 0): torch's loss and gradient on the
    engine's batch against the engine's gradient, recovered from the first moments as
    (m_after − β₁·m_before)/((1 − β₁)·clip), and torch's AdamW update against the engine's."""
    model = Model(m)
    model.load_engine({k: v[0] for k, v in before.items()})
    x, y = corpus.training(step * a.batch, a.batch)
    ce, extra, _ = model(torch.from_numpy(x), torch.from_numpy(y))
    (ce + extra).backward()
    norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in model.parameters()))
    grads = model.engine_view("grad")
    opt = model.optimizer(1.0, (0.9, 0.95), 1e-8, a.weight_decay)
    set_adam_state(model, opt, before if step > 0 else None, step)
    for g in opt.param_groups:
        g["lr"] = ec.learning_rate(step, a.steps, a.lr, a.warmup, a.min_lr_ratio * a.lr)
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), a.clip)
    opt.step()
    new = model.engine_view("data")
    clip = min(1.0, a.clip / eng_norm)
    print(f"step {step + 1}: torch loss {ce.item() / LN2:.7f} BPC, grad norm engine {eng_norm:.6f} "
          f"torch {norm:.6f}")
    print(f"  {'tensor':<20} {'|g|':>10} {'grad rel err':>12} {'update rel err':>14}")
    worst = (0.0, 0.0)
    for name, _, _ in ec.engine_tensors(m):
        m0 = before[name][1] if step > 0 else 0.0
        g_eng = (after[name][1].astype(np.float64) - 0.9 * np.float64(m0)) / ((1 - 0.9) * clip)
        g_ref = grads[name].astype(np.float64)
        p0 = before[name][0].reshape(-1).astype(np.float64)
        d_eng = after[name][0].reshape(-1).astype(np.float64) - p0
        d_ref = new[name].astype(np.float64) - p0
        ge = np.linalg.norm(g_eng.reshape(-1) - g_ref) / max(np.linalg.norm(g_ref), 1e-30)
        ue = np.linalg.norm(d_eng - d_ref) / max(np.linalg.norm(d_ref), 1e-30)
        worst = (max(worst[0], ge), max(worst[1], ue))
        print(f"  {name:<20} {np.linalg.norm(g_ref):10.3e} {ge:12.2e} {ue:14.2e}")
    print(f"  worst: gradient {worst[0]:.1e}, update {worst[1]:.1e}")
    return ce.item() / LN2


def isolate(a, workdir):
    """Step 1 from the initial weights, step K from the engine's own step-(K−1) state, the
    schedule and the evaluation, engine against torch, one model at a time."""
    seed = a.seeds[0]
    for name in a.models:
        m = MODELS[name]
        corpus = ec.Corpus(a.corpus, m["seq"], seed, a.val_fraction,
                           a.steps * a.batch * m["seq"], a.ref_data)
        print(f"\n== {name}, seed {seed}")
        eng, _, out_dir = run_engine(f"iso-{name}", m, a, seed, workdir, max_steps=1)
        _, after = ec.read_checkpoint(latest_checkpoint(out_dir), m)
        init = {k: (v,) for k, v in ec.engine_init(m, seed).items()}
        loss = check_step(m, a, corpus, init, after, 0, eng[1]["grad_norm"])
        print(f"  step-1 batch BPC: engine {eng[1]['train_bpc']:.7f}, torch {loss:.7f}")
        k = a.isolate_step
        eng, _, out_dir = run_engine(f"iso-{name}-k", m, a, seed, workdir, max_steps=k - 1)
        _, before = ec.read_checkpoint(latest_checkpoint(out_dir), m)
        eng, _, out_dir = run_engine(f"iso-{name}-k", m, a, seed, workdir, max_steps=1,
                                     resume=True)
        _, after = ec.read_checkpoint(latest_checkpoint(out_dir), m)
        loss = check_step(m, a, corpus, before, after, k - 1, eng[k]["grad_norm"])
        print(f"  step-{k} batch BPC: engine {eng[k]['train_bpc']:.7f}, torch {loss:.7f}")
        full, _, full_dir = run_engine(f"iso-{name}-full", m, a, seed, workdir)
        lr_err = max(abs(full[s]["learning_rate"] - ec.learning_rate(
            s - 1, a.steps, a.lr, a.warmup, a.min_lr_ratio * a.lr)) for s in full)
        print(f"learning rate: largest |engine − schedule formula| over {len(full)} steps "
              f"{lr_err:.1e}")
        _, ck = ec.read_checkpoint(latest_checkpoint(full_dir), m)
        model = Model(m)
        model.load_engine({k: v[0] for k, v in ck.items()})
        val = corpus.validation(a.eval_tokens // m["seq"])
        print(f"evaluation of the engine's final weights: engine {full[a.steps]['val_bpc']:.6f} "
              f"BPC, torch {evaluate(model, val):.6f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--engine", default="build/kernels/parity-train")
    p.add_argument("--corpus", default="data/kjv.txt")
    p.add_argument("--models", default="dense,moe", type=lambda s: s.split(","))
    p.add_argument("--seeds", default="1,2", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16, help="sequences per step")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--val-fraction", type=float, default=0.05)
    p.add_argument("--eval-every", type=int, default=25)
    p.add_argument("--eval-tokens", type=int, default=65536)
    p.add_argument("--smooth", type=int, default=10, help="train-BPC averaging window (steps)")
    p.add_argument("--init", choices=["engine", "torch", "plain"], default="engine",
                   help="torch's initial weights: the engine's own (engine), the engine's scheme "
                   "drawn by torch (torch), or N(0, 0.02) everywhere, unscaled (plain)")
    p.add_argument("--ref-data", choices=["seeded", "prefix", "random"], default="seeded",
                   help="torch's training windows: the engine's seeded unique subset of the whole "
                   "split and its epoch order (seeded; the engine's choice), the first D̂ windows "
                   "in the engine's order (prefix; the engine's choice before the fix), or its "
                   "own uniform random offsets over the whole split (random)")
    p.add_argument("--isolate", action="store_true")
    p.add_argument("--isolate-step", type=int, default=100, help="the trained-state step checked")
    p.add_argument("--json", help="write the figures and both curves here")
    p.add_argument("--from-json", help="print the summary of an earlier --json, train nothing")
    p.add_argument("--workdir", help="engine specs, metrics and checkpoints (default: a temp dir)")
    a = p.parse_args()
    torch.set_num_threads(1)
    workdir = a.workdir or tempfile.mkdtemp(prefix="curve-parity-")
    os.makedirs(workdir, exist_ok=True)
    if a.isolate:
        isolate(a, workdir)
        return 0
    if a.from_json:
        with open(a.from_json) as f:
            results = json.load(f)["results"]
        for r in results.values():
            for side in ("engine", "torch"):
                r["curves"][side] = {int(k): v for k, v in r["curves"][side].items()}
        summarize(results, a)
        return 0
    results = curves(a, workdir)
    ok = summarize(results, a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "results": results}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
