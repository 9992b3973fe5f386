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

The engine's own figures: its fp32 and bf16 throughput from gpu_engine_check.py's throughput part
(a d512 L8 S1024 dense model: micro scale, NOT the 2B shapes) are reported as they are, tokens/s
and MFU against 989 TFLOP/s from the counted model FLOPs; since they are not at the 2B shapes, no
engine study cost and no verdict on the targets is computed from them.

  gpu_study_cost.py PLAN.json PEER.json OUT_DIR     (merges into OUT_DIR/gpu_check.{json,txt})
"""
import json
import os
import sys

PEAK_BF16 = 989e12


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


def summary_lines(peer, study, engine_throughput):
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
    return lines


ENGINE_SHAPE = "dense d512 L8 S1024 (micro scale), not the 2B shapes"  # the throughput part's


def engine_figure(tp):
    """One precision's engine throughput as the summary states it, or why there is none."""
    tp = tp or {}
    if tp.get("tokens_per_second"):
        mfu = f", MFU {100 * tp['mfu']:.1f}% of 989 TFLOP/s" if tp.get("mfu") else ""
        return f"{tp['tokens_per_second']:.0f} tok/s{mfu}"
    return f"none ({tp.get('error') or 'exit ' + str(tp.get('exit', '-'))})"


def engine_lines(throughput):
    """The engine's fp32 and bf16 figures beside the peer's: at the micro shape, so the targets
    (MFU >= 40% dense, >= 25% MoE; >= 1.0x PyTorch compile dense, >= 1.5x eager MoE) are not
    judged from them."""
    throughput = throughput or {}
    shape = throughput.get("note") or ENGINE_SHAPE
    return [f"engine {label} ({shape}): {engine_figure(throughput.get(label))}"
            for label in ("fp32", "bf16")] + [
        "engine vs the targets (MFU >= 40% dense, >= 25% MoE; >= 1.0x PyTorch compile dense, "
        ">= 1.5x PyTorch eager MoE): not judged, the engine was not run at the 2B shapes"]


def main():
    plan_path, peer_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    plan, peer = load(plan_path), load(peer_path)
    report = load(os.path.join(out, "gpu_check.json")) or {}
    if not isinstance(plan, list) or peer is None:
        report["torch_peer"] = {"error": f"missing input: plan {plan_path} "
                                         f"{'ok' if isinstance(plan, list) else 'unreadable'}, "
                                         f"peer {peer_path} {'ok' if peer else 'unreadable'}"}
        lines = [f"pytorch peer: {report['torch_peer']['error']}"]
    else:
        study = cost(plan, peer)
        report["torch_peer"] = peer
        report["study_cost"] = study
        tp = report.get("throughput") or {}
        report["engine_bf16"] = dict(tp.get("bf16") or {"error": "no bf16 throughput run"},
                                     measured_at=ENGINE_SHAPE)
        lines = summary_lines(peer, study, report.get("throughput"))
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
