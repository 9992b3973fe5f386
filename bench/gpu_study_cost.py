#!/usr/bin/env python3
"""What the whole 2B study would cost on H200s at the speeds bench/gpu_check.sh measured, and the
merge of the PyTorch peer's figures into gpu_check.json / gpu_check.txt.

H200-hours of the study = Σ over the planned runs of D / (tokens/s), D the run's planned tokens
(accounting.tokens), tokens/s the rate measured for its kind of model on one GPU (dense runs at
the dense baseline's rate, MoE runs at the rate of the MoE run nearest r_a 20%). It is an
extrapolation: the MoE runs at other activation rates, and the 2C dense baselines, have other
FLOPs per token; so the same sum is also given at constant MFU per kind (each run's rate scaled
by M_measured / M_run), which is the better guess for those. GPU-hours assume the runs' data
parallelism scales linearly (their `resources.gpus` do not change the total).

The engine's own figures, two kinds. Its fp32 and bf16 throughput from gpu_engine_check.py's
throughput part (a d512 L8 S1024 dense model: micro scale, NOT the 2B shapes) are reported as they
are and judged against nothing. Its bf16 figures at the 2B shapes, from the study_throughput part
(the same two runs of the plan, possibly at fewer layers: then its full-depth equivalent at
constant MFU), are set against the peer's and the issue's targets: tokens/s >= 1.0x PyTorch
torch.compile (dense), >= 1.5x PyTorch eager (MoE); MFU >= 40% dense, >= 25% MoE; peak memory
within 15% of the estimate; and the study's H200-hours at the engine's speeds.

  gpu_study_cost.py PLAN.json PEER.json OUT_DIR     (merges into OUT_DIR/gpu_check.{json,txt})
"""
import json
import os
import sys

PEAK_BF16 = 989e12
TARGET_MFU = {"dense": 0.40, "moe": 0.25}


def kind_of(run):
    return "moe" if run.get("role") == "RUN_ROLE_MOE" else "dense"


def study_hours(plan, rates, flops_per_token):
    """{'measured_rate': hours, 'constant_mfu': hours}, or None if a kind has no rate."""
    if not all(rates.get(k) for k in ("dense", "moe")):
        return None
    direct = scaled = 0.0
    for run in plan:
        k, a = kind_of(run), run["accounting"]
        tokens = float(a["tokens"])
        direct += tokens / rates[k]
        scaled += tokens / (rates[k] * flops_per_token[k] / float(a["flops_per_token"]))
    return {"measured_rate": round(direct / 3600, 1), "constant_mfu": round(scaled / 3600, 1)}


def cost(plan, peer):
    runs = peer.get("runs", {})
    models = peer.get("models", {})
    m = {k: models[k]["flops_per_token"] for k in ("dense", "moe") if k in models}
    counts = {"dense": 0, "moe": 0}
    tokens = {"dense": 0.0, "moe": 0.0}
    for run in plan:
        counts[kind_of(run)] += 1
        tokens[kind_of(run)] += float(run["accounting"]["tokens"])
    flops = sum(float(r["accounting"]["tokens"]) * float(r["accounting"]["flops_per_token"])
                for r in plan)
    out = {"runs": len(plan), "runs_by_kind": counts, "tokens_by_kind": tokens,
           "flops": flops, "h200_hours_at_peak": round(flops / PEAK_BF16 / 3600, 1),
           "extrapolation": "dense runs at the dense 1C baseline's measured rate, MoE runs at the "
                            "r_a~20% run's; 'constant_mfu' rescales each run by its FLOPs/token",
           "pytorch": {}}
    for mode in ("eager", "compile"):
        rates = {k: runs.get(f"{k}_{mode}", {}).get("tokens_per_second") for k in ("dense", "moe")}
        out["pytorch"][mode] = {"tokens_per_second": rates,
                                "h200_hours": study_hours(plan, rates, m)}
    return out


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def summary_lines(peer, study, engine_throughput, engine_study):
    lines = []
    gemm = (peer.get("gemm") or {}).get("shapes", {})
    if gemm:
        lines.append("bf16 GEMM ceiling (TFLOP/s): " + ", ".join(
            f"{k} {v.get('tflops', v.get('skipped'))}" for k, v in gemm.items()))
    elif peer.get("gemm"):
        lines.append(f"bf16 GEMM ceiling: {peer['gemm']}")
    for key, r in peer.get("runs", {}).items():
        if "tokens_per_second" in r:
            mem = r.get("peak_memory_bytes")
            kind = key.split("_")[0]
            static = peer.get("static_bytes", {}).get(kind)
            lines.append(
                f"pytorch {key}: {r['tokens_per_second']:.0f} tok/s, MFU {100 * r['mfu']:.1f}% "
                f"(M {peer['models'][kind]['flops_per_token']:.3g}), step {r['step_seconds']} s "
                f"({r['accumulation']}x{r['micro_batch']}x{r['sequence_length']} tokens)"
                + (f", compile {r['compile_seconds']} s" if "compile_seconds" in r else "")
                + (f", peak memory {mem / 2**30:.1f} GiB (static fp32+AdamW "
                   f"{static / 2**30:.1f} GiB)" if mem and static else ""))
        else:
            lines.append(f"pytorch {key}: {r.get('skipped') or r.get('error')}"
                         + (f" | {' '.join(r['stderr'].split())[-300:]}"
                            if r.get("stderr") else ""))
    lines.append(f"2B study: {study['flops']:.3g} FLOPs planned, {study['h200_hours_at_peak']:.0f} "
                 "H200-hours at 100% of 989 TFLOP/s")
    for mode, c in study["pytorch"].items():
        lines.append(f"2B study ({study['runs']} runs) at PyTorch {mode} speeds: "
                     + (f"{c['h200_hours']['measured_rate']:.0f} H200-hours "
                        f"({c['h200_hours']['constant_mfu']:.0f} at constant MFU per kind; "
                        "extrapolated)" if c["h200_hours"] else "not computed (a rate is missing)"))
    lines += engine_lines(engine_throughput)
    lines += study_lines(peer, engine_study, study["engine_bf16"]["comparison"],
                         study["engine_bf16"]["h200_hours"])
    lines.append(attention_line(peer, engine_study))
    return lines


def attention_line(peer, part):
    """The engine's attention at the dense 2B shape (its profiled step's attention bucket:
    forward + backward of every layer's attention and RoPE, the device synchronised around each
    op) in causal FLOPs executed per second, beside PyTorch's fused SDPA at the same shape."""
    sdpa = (peer.get("gemm") or {}).get("sdpa") or {}
    e = (part or {}).get("dense") or {}
    split, shape = e.get("time_split") or {}, e.get("plan_shape") or {}
    seconds, layers = split.get("attention_seconds"), e.get("layers")
    engine = None
    if seconds and layers and all(k in shape for k in ("micro_batch", "heads", "seq", "head_dim")):
        flops = layers * 3.5 * 2 * shape["micro_batch"] * shape["heads"] * shape["seq"] ** 2 * \
            shape["head_dim"]
        engine = flops / seconds / 1e12
    torch = sdpa.get("tflops")
    text = "attention at the dense 2B shape (causal FLOPs executed, forward + backward): engine "
    text += f"{engine:.1f} TFLOP/s (profiled step, RoPE included)" if engine else "not measured"
    text += f"; PyTorch SDPA {torch:.1f} TFLOP/s" if torch else \
        f"; PyTorch SDPA {sdpa.get('error') or 'not measured'}"
    if engine and torch:
        text += f" (engine {engine / torch:.2f}x: cuDNN's fused SDPA is the next step if far below)"
    return text


ENGINE_SHAPE = "dense d512 L8 S1024 (micro scale), not the 2B shapes"  # the throughput part's
# Engine bf16 tokens/s at the 2B shapes over the PyTorch peer's, the targets.
SPEED_TARGETS = {"dense": ("compile", 1.0), "moe": ("eager", 1.5)}


def engine_figure(tp):
    """One precision's engine throughput as the summary states it, or why there is none."""
    tp = tp or {}
    if tp.get("tokens_per_second"):
        mfu = f", MFU {100 * tp['mfu']:.1f}% of 989 TFLOP/s" if tp.get("mfu") else ""
        return f"{tp['tokens_per_second']:.0f} tok/s{mfu}"
    return f"none ({tp.get('error') or 'exit ' + str(tp.get('exit', '-'))})"


def engine_lines(throughput):
    """The engine's fp32 and bf16 figures at the micro shape, beside the peer's: not judged."""
    throughput = throughput or {}
    shape = throughput.get("note") or ENGINE_SHAPE
    return [f"engine {label} ({shape}): {engine_figure(throughput.get(label))}"
            for label in ("fp32", "bf16")] + [
        "  (micro scale: not judged against the targets; the 2B-shape figures below are)"]


def study_comparison(peer, part):
    """{kind: figures}: the engine's bf16 at the 2B shape (full-depth equivalent if it ran
    shallower) over the peer's mode the target names, met or not; None where not measured."""
    out = {}
    for kind, (mode, target) in SPEED_TARGETS.items():
        e = (part or {}).get(kind) or {}
        p = peer.get("runs", {}).get(f"{kind}_{mode}", {})
        engine, torch = e.get("full_depth_tokens_per_second"), p.get("tokens_per_second")
        ratio = engine / torch if engine and torch else None
        out[kind] = {"engine_tokens_per_second": engine, "layers": e.get("layers"),
                     "planned_layers": (e.get("plan_shape") or {}).get("layers"),
                     "engine_micro_batch": (e.get("plan_shape") or {}).get("micro_batch"),
                     "pytorch_mode": mode, "pytorch_tokens_per_second": torch,
                     "pytorch_micro_batch": p.get("micro_batch"), "ratio": ratio,
                     "target": target, "met": None if ratio is None else ratio >= target,
                     "mfu": e.get("mfu"), "targets": e.get("targets")}
    return out


def engine_study(plan, peer, part):
    """The engine at the 2B shapes against the peer, and the study's H200-hours at its speeds
    (the plan's M per kind: its full-depth equivalents are at the plan's depth)."""
    comparison = study_comparison(peer, part)
    rates = {k: c["engine_tokens_per_second"] for k, c in comparison.items()}
    m = {k: (((part or {}).get(k) or {}).get("plan_shape") or {}).get("flops_per_token")
         for k in comparison}
    hours = study_hours(plan, rates, m) if plan and all(m.values()) else None
    return {"comparison": comparison, "h200_hours": hours}


def why_not(e, p):
    if not (e or {}).get("tokens_per_second"):
        return f"engine none ({(e or {}).get('error') or 'exit ' + str((e or {}).get('exit'))})"
    return f"PyTorch none ({p.get('skipped') or p.get('error') or 'not run'})"


def study_lines(peer, part, comparison, hours):
    """The engine at the 2B shapes beside the peer, or why it is not there."""
    if not part or "dense" not in part:
        why = (part or {}).get("skipped") or (part or {}).get("error") or \
            "absent from gpu_check.json"
        return [f"engine at the 2B shapes: not measured (study_throughput: {why}); the targets "
                "are not judged"]
    lines = []
    word = {True: "met", False: "NOT met", None: "not judged"}
    for kind, c in comparison.items():
        e, p = part.get(kind) or {}, peer.get("runs", {}).get(f"{kind}_{c['pytorch_mode']}", {})
        depth = (f" at {c['layers']} of {c['planned_layers']} layers, full-depth equivalent"
                 if c["layers"] and c["layers"] != c["planned_layers"] else "")
        mfu = (e.get("targets") or {}).get("mfu") or {}
        mem = (e.get("targets") or {}).get("memory") or {}
        speed = (f"{c['ratio']:.2f}x PyTorch {c['pytorch_mode']} "
                 f"({c['pytorch_tokens_per_second']:.0f} tok/s, micro-batch "
                 f"{c['pytorch_micro_batch']}, its optimizer step amortised over the plan's "
                 f"accumulation; the engine's micro-batch {c['engine_micro_batch']}, one "
                 f"optimizer step each)" if c["ratio"] is not None else why_not(e, p))
        lines.append(
            f"engine bf16 {kind} at the 2B shape ({e.get('run')}){depth}: "
            + (f"{c['engine_tokens_per_second']:.0f} tok/s, MFU {100 * c['mfu']:.1f}%"
               if c["engine_tokens_per_second"] and c["mfu"] else "none")
            + f"; {speed}: target >= {c['target']}x {word[c['met']]}; MFU >= "
            f"{100 * TARGET_MFU[kind]:.0f}% {word[mfu.get('met')]}; peak memory within 15% of "
            f"the estimate {word[mem.get('met')]}"
            + (f" (ratio {mem['ratio']:.3f})" if mem.get("ratio") else ""))
    lines.append("2B study at the engine's bf16 speeds: "
                 + (f"{hours['measured_rate']:.0f} H200-hours ({hours['constant_mfu']:.0f} at "
                    "constant MFU per kind; extrapolated)" if hours else
                    "not computed (a rate is missing)"))
    return lines


def main():
    plan_path, peer_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    plan, peer = load(plan_path), load(peer_path)
    report = load(os.path.join(out, "gpu_check.json")) or {}
    part = (report.get("engine") or {}).get("study_throughput")
    if not isinstance(plan, list) or peer is None:
        report["torch_peer"] = {"error": f"missing input: plan {plan_path} "
                                         f"{'ok' if isinstance(plan, list) else 'unreadable'}, "
                                         f"peer {peer_path} {'ok' if peer else 'unreadable'}"}
        engine = engine_study(plan if isinstance(plan, list) else [], {}, part)
        report["engine_study"] = engine
        lines = [f"pytorch peer: {report['torch_peer']['error']}"] + study_lines(
            {}, part, engine["comparison"], engine["h200_hours"])
    else:
        study = cost(plan, peer)
        study["engine_bf16"] = engine_study(plan, peer, part)
        report["torch_peer"] = peer
        report["study_cost"] = study
        tp = report.get("throughput") or {}
        report["engine_bf16"] = dict(tp.get("bf16") or {"error": "no bf16 throughput run"},
                                     measured_at=ENGINE_SHAPE)
        lines = summary_lines(peer, study, report.get("throughput"), part)
    stages_path = os.path.join(out, "stages.txt")  # the stages run after the engine check too
    if os.path.exists(stages_path):
        with open(stages_path) as f:
            report["stages"] = dict(line.strip().partition("=")[::2] for line in f if "=" in line)
        lines.append(f"stages: {report['stages']}")
    with open(os.path.join(out, "gpu_check.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(out, "gpu_check.txt"), "a") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
