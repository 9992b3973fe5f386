#!/usr/bin/env python3
"""The engine half of bench/gpu_check.sh, run on the GPU machine.

1. The same 50-step fp32 runs (micro dense and micro MoE from kernels/examples) with
   `parity-train --device cpu` and `--device cuda`. Dense: each step's train_bpc must agree within
   REL_TOL (5e-4, relative). MoE: the same, but only up to the first step whose expert loads differ (two
   correct backends' last-bit differences flip a routing decision sooner or later — two CPU runs
   that differ only in their BLAS kernels did at step 36 — and from there the curves are two
   different, equally right trainings), that step and the largest difference before it reported,
   plus a looser bound on the final losses (MOE_FINAL_TOL).
2. A larger dense run on CUDA only, for throughput (tokens/s, counted FLOP/s).
3. gpu_check.json and gpu_check.txt in OUT: these results, the op parity test's (from its gtest
   JSON), the sanitizer runs' exit codes, and the worker checks' status.

Usage: gpu_engine_check.py BUNDLE_DIR OUT_DIR DEADLINE_UNIX_SECONDS
       gpu_engine_check.py nccl BUNDLE_DIR OUT_DIR DEADLINE_UNIX_SECONDS   (gpu_check.sh's stage
       3c alone: the NCCL communicator at world size 1, into OUT_DIR/nccl_check.json; step 4
       then reads it. PARITY_NCCL_CHECK_DEVICE=cpu runs it on the CPU, expecting Gloo: a check
       of its wiring on a machine without a GPU)
"""
import json
import os
import subprocess
import sys
import time

# Per step, relative. Two CPU runs that differ only in their thread count (OpenBLAS's blocking)
# differed by up to 1.35e-4 over 50 steps of micro-dense on a 240 KB repetitive corpus (step 37;
# 4.7e-6 on a 1.2 MB one: bench/gpu_engine_check_smoke.sh, 2026-12-03), so the first draft's 1e-4
# could fail a correct GPU backend, whose summation orders differ more; 5e-4 still catches a
# wrong kernel, which moves the curve by percents.
REL_TOL = 5e-4
# After routing diverges, how far the final train and validation BPC of two correct MoE runs may
# drift apart (relative): two CPU runs that differ only in BLAS kernels end 8.2e-5 apart at step
# 49; 100× that leaves room for the GPU's other summation orders, and still catches a real bug
# (a wrong routing or gradient moves the 50-step loss by whole percents).
MOE_FINAL_TOL = 1e-2
STEPS = 50


def remaining(deadline):
    return deadline - time.time()


def spec_from(example, corpus, name, steps, **training):
    with open(example) as f:
        spec = json.load(f)
    spec["name"] = name
    spec["data"]["corpus"] = corpus
    spec["training"].update(
        steps=steps, logEverySteps=1, evalEverySteps=10 * steps, evalTokens=8192,
        checkpointEverySteps=0, **training)
    return spec


def train(bundle, out, spec, device, threads, budget, extra=(), tag=""):
    """Runs parity-train; returns (metrics lines, summary line or None, exit code, seconds)."""
    run_dir = os.path.join(out, "runs", f"{spec['name']}-{device}{tag}")
    os.makedirs(run_dir, exist_ok=True)
    spec_path = os.path.join(run_dir, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
    metrics = os.path.join(run_dir, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [os.path.join(bundle, "bin", "parity-train"), "--run", spec_path, "--out",
           os.path.join(run_dir, "ckpt"), "--metrics", metrics, "--device", device,
           "--threads", str(threads), *extra]
    start = time.time()
    with open(os.path.join(run_dir, "stderr.log"), "w") as err:
        try:
            code = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                  timeout=max(1, budget)).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    seconds = time.time() - start
    lines, summary = [], None
    if os.path.exists(metrics):
        with open(metrics) as f:
            for raw in f:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if line.get("event") == "metrics":
                    lines.append(line)
                elif line.get("event") == "summary":
                    summary = line
    return lines, summary, code, seconds


def stderr_tail(out, spec, device):
    path = os.path.join(out, "runs", f"{spec['name']}-{device}", "stderr.log")
    try:
        with open(path) as f:
            return f.read()[-600:]
    except OSError:
        return ""


def compare(bundle, out, corpus, example, name, deadline):
    spec = spec_from(example, corpus, name, STEPS)
    result = {"name": name, "steps": STEPS, "tolerance": REL_TOL, "pass": False}
    runs = {}
    # PARITY_ENGINE_CHECK_PEER=cpu compares two CPU runs (all threads against one): the wiring of
    # this comparison, MoE's routing divergence included, on a machine without a GPU.
    peer = os.environ.get("PARITY_ENGINE_CHECK_PEER", "cuda")
    for device, threads in (("cpu", os.cpu_count() or 1), (peer, 1)):
        budget = min(90, remaining(deadline) - 20)
        if budget < 10:
            result["error"] = f"no time left for the {device} run"
            return result
        tag = "-peer" if "cpu" in runs else ""  # the peer's own folder when both are CPU runs
        lines, summary, code, seconds = train(bundle, out, spec, device, threads, budget, tag=tag)
        device = "cuda" if device == peer and "cpu" in runs else device  # the peer's slot
        runs[device] = {l["step"]: l for l in lines}
        result[device] = {"exit": code, "seconds": round(seconds, 2),
                          "tokens_per_second": summary and summary.get("tokens_per_second"),
                          "final_val_bpc": summary and summary.get("final_val_bpc")}
        if code != 0:
            result[device]["stderr"] = stderr_tail(out, spec, device)
    common = [(step, cpu, runs["cuda"][step]) for step, cpu in sorted(runs.get("cpu", {}).items())
              if step in runs.get("cuda", {})]
    moe = any("expert_load" in cpu for _, cpu, _ in common)
    diverged = next((step for step, cpu, cuda in common
                     if cpu.get("expert_load") != cuda.get("expert_load")), None)
    worst, worst_step, compared = 0.0, None, 0
    for step, cpu, cuda in common:
        if diverged is not None and step >= diverged:
            break  # from here the two runs route differently: compared by the final bound only
        a, b = cpu["train_bpc"], cuda["train_bpc"]
        rel = abs(a - b) / max(abs(a), 1e-30)
        compared += 1
        if rel > worst or worst_step is None:
            worst, worst_step = rel, step
    grad = [abs(runs["cpu"][s]["grad_norm"] - runs["cuda"][s]["grad_norm"]) /
            max(abs(runs["cpu"][s]["grad_norm"]), 1e-30)
            for s in runs.get("cpu", {}) if s in runs.get("cuda", {})]
    result.update(steps_compared=compared, max_rel_diff_train_bpc=worst, worst_step=worst_step,
                  max_rel_diff_grad_norm=max(grad) if grad else None)
    if not moe:
        result["pass"] = compared == STEPS and worst <= REL_TOL
        return result
    # MoE: tight up to the first routing difference, then the final losses within MOE_FINAL_TOL.
    result["routing_diverged_at_step"] = diverged
    result["final_tolerance"] = MOE_FINAL_TOL
    finals = {}
    for key in ("train_bpc", "final_val_bpc"):
        if key == "train_bpc" and common:
            a, b = common[-1][1]["train_bpc"], common[-1][2]["train_bpc"]
        else:
            a, b = (result.get("cpu") or {}).get(key), (result.get("cuda") or {}).get(key)
        finals[key] = (abs(a - b) / max(abs(a), 1e-30)) if a is not None and b is not None else None
    result["final_rel_diff"] = finals
    tight_ok = worst <= REL_TOL and compared >= 1 and (diverged is not None or compared == STEPS)
    final_ok = all(v is not None and v <= MOE_FINAL_TOL for v in finals.values())
    result["pass"] = len(common) == STEPS and tight_ok and final_ok
    return result


NCCL_NOTE = ("NCCL ran at world size 1 only: the lent machine has one GPU and NCCL cannot put two "
             "ranks on one GPU")


def nccl_gang_of_one(bundle, out, corpus, example, deadline, device="cuda", expect="nccl"):
    """The NCCL communicator at world size 1 (one GPU here; NCCL cannot put two ranks on one):
    rank 0 hosts the rendezvous store, posts NCCL's unique id, forms a one-rank communicator and
    sums every step's gradient and statistics through it. A one-rank sum is a copy, so the curve
    and the final validation BPC must equal the plain CUDA run's (world size 1, the no-op
    communicator) bit for bit, the run must train (last train BPC below the first), and its
    summary must name the communicator that summed ("nccl"; "gloo" with --device cpu, which is
    how PARITY_NCCL_CHECK_DEVICE=cpu checks this function's wiring on a machine without a GPU)."""
    spec = spec_from(example, corpus, "nccl-gang-of-one", 20)
    result = {"name": "nccl-gang-of-one", "pass": False, "device": device, "note": NCCL_NOTE}
    runs, summaries = {}, {}
    for tag, extra in (("", ()), ("-nccl", ("--rank", "0", "--world-size", "1", "--gang-epoch",
                                            "1", "--rendezvous-listen", "127.0.0.1"))):
        budget = min(60, remaining(deadline) - 5)
        if budget < 10:
            result["skipped"] = f"no time left for the {'gang' if tag else 'plain'} run"
            return result
        lines, summary, code, seconds = train(bundle, out, spec, device, 1, budget, extra, tag)
        runs[tag] = [l["train_bpc"] for l in lines]
        summaries[tag] = summary or {}
        result["exit" + tag] = code
        result["seconds" + tag] = round(seconds, 2)
        if code != 0:
            result["stderr" + tag] = stderr_tail(out, spec, device + tag)
    plain, gang = summaries[""], summaries["-nccl"]
    result.update(steps=len(runs["-nccl"]), communicator=gang.get("communicator"),
                  world_size=gang.get("world_size"), final_val_bpc=gang.get("final_val_bpc"),
                  final_val_bpc_plain=plain.get("final_val_bpc"),
                  first_train_bpc=runs[""][0] if runs[""] else None,
                  last_train_bpc=runs[""][-1] if runs[""] else None)
    trains = len(runs[""]) == 20 and runs[""][-1] < runs[""][0]
    result["pass"] = (result["exit"] == 0 and result["exit-nccl"] == 0 and trains
                      and runs[""] == runs["-nccl"] and result["communicator"] == expect
                      and result["world_size"] == 1 and plain.get("final_val_bpc") is not None
                      and plain.get("final_val_bpc") == gang.get("final_val_bpc"))
    return result


def nccl_text(result):
    if "skipped" in result:
        return (f"nccl at world size 1: NOT RUN ({result['skipped']}); NCCL was not checked at all "
                f"(at most world size 1 could be: the lent machine has one GPU and NCCL cannot "
                f"put two ranks on one GPU)")
    verdict = "PASS" if result.get("pass") else "FAIL"
    if result.get("device", "cuda").startswith("cpu"):
        verdict += " (a wiring check with --device cpu: Gloo, not NCCL)"
    return (f"nccl at world size 1: {verdict}; {NCCL_NOTE}. communicator "
            f"{result.get('communicator')}, world size {result.get('world_size')}, final val BPC "
            f"{result.get('final_val_bpc')} (plain run {result.get('final_val_bpc_plain')}), train "
            f"BPC {result.get('first_train_bpc')} -> {result.get('last_train_bpc')}, exits "
            f"{result.get('exit')}/{result.get('exit-nccl')}"
            + (f"; {result['error']}" if "error" in result else ""))


def nccl_main(bundle, out, deadline):
    """gpu_check.sh's stage 3c: the check alone, into OUT/nccl_check.json."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    device = os.environ.get("PARITY_NCCL_CHECK_DEVICE", "cuda")
    result = nccl_gang_of_one(bundle, out, os.path.join(bundle, "data", "kjv.txt"),
                              os.path.join(repo, "kernels", "examples", "micro_dense.json"),
                              deadline, device, "nccl" if device.startswith("cuda") else "gloo")
    with open(os.path.join(out, "nccl_check.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(nccl_text(result))
    return 0 if result["pass"] or "skipped" in result else 1


def stage_status(stages, name):
    """A stage's exit status from stages.txt ("0 12s" → "0"; "skipped: …" stays as it is)."""
    value = stages.get(name, "not run")
    return value if value.startswith("skipped") else value.split(" ")[0]


def nccl_stage_result(out, stages):
    """Stage 3c's result for the report: its JSON, or why there is none (a stage that ran and
    left no result, e.g. killed at its timeout by a hung NCCL, fails the check)."""
    path = os.path.join(out, "nccl_check.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    state = stages.get("nccl_world1", "not run")
    if state.startswith("skipped") or state == "not run":
        return {"name": "nccl-gang-of-one", "pass": False, "skipped": state}
    return {"name": "nccl-gang-of-one", "pass": False, "error": f"no result (stage exit {state})"}


def throughput(bundle, out, corpus, example, deadline):
    spec = spec_from(example, corpus, "throughput-dense-d512-l8-s1024", 8,
                     batchTokens=131072, sequenceLength=1024, microBatchSequences=32,
                     warmupSteps=2)
    spec["model"].update(dModel=512, numLayers=8, numHeads=8, numKvHeads=8, ffnHidden=1408)
    budget = min(90, remaining(deadline) - 15)
    if budget < 15:
        return {"error": "no time left"}
    lines, summary, code, seconds = train(bundle, out, spec, "cuda", 1, budget)
    res = {"exit": code, "seconds": round(seconds, 2), "steps": len(lines)}
    if lines:
        last = lines[-1]
        res.update(tokens_per_second=last.get("tokens_per_second"),
                   flops_per_second=last.get("flops_per_second"),
                   flops_per_token=last.get("flops_per_token"))
    if code != 0:
        res["stderr"] = stderr_tail(out, spec, "cuda")
    return res


def op_test_summary(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"no gtest JSON: {e}"}
    res = {"tests": doc.get("tests"), "failures": doc.get("failures"),
           "disabled": doc.get("disabled"), "failed": [], "skipped": []}
    for suite in doc.get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = f"{suite['name']}.{t['name']}"
            if t.get("failures"):
                res["failed"].append({"test": name, "messages": [
                    x.get("failure", "")[:800] for x in t["failures"]]})
            if t.get("result") == "SKIPPED":
                res["skipped"].append(name)
    return res


def main():
    bundle, out, deadline = sys.argv[1], sys.argv[2], float(sys.argv[3])
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    corpus = os.path.join(bundle, "data", "kjv.txt")
    examples = os.path.join(repo, "kernels", "examples")
    report = {"gpu": open(os.path.join(out, "nvidia-smi.txt")).read().strip()
              if os.path.exists(os.path.join(out, "nvidia-smi.txt")) else None}
    report["op_test"] = op_test_summary(os.path.join(out, "cuda_ops_test.json"))
    report["training"] = [
        compare(bundle, out, corpus, os.path.join(examples, "micro_dense.json"), "micro-dense",
                deadline),
        compare(bundle, out, corpus, os.path.join(examples, "micro_moe.json"), "micro-moe",
                deadline)]
    report["throughput"] = throughput(bundle, out, corpus,
                                      os.path.join(examples, "micro_dense.json"), deadline)
    stages = {}
    stages_path = os.path.join(out, "stages.txt")
    if os.path.exists(stages_path):
        for line in open(stages_path):
            key, _, value = line.strip().partition("=")
            stages[key] = value
    report["stages"] = stages
    # Stage 3c (gpu_check.sh): NCCL at world size 1. Not run for want of time is reported, not
    # failed; run and wrong, or hung past its timeout, fails.
    report["nccl"] = nccl_stage_result(out, stages)
    op = report["op_test"]
    report["pass"] = (not op.get("error") and op.get("failures") == 0 and not op.get("skipped")
                      and all(t["pass"] for t in report["training"]) and (report["nccl"]["pass"] or "skipped" in report["nccl"])
                      and all(stage_status(stages, n) == "0"
                              for n in ("worker_unit_test", "list_devices")))
    with open(os.path.join(out, "gpu_check.json"), "w") as f:
        json.dump(report, f, indent=1)
    text = [f"GPU: {report['gpu']}",
            f"op parity test: {op.get('tests')} tests, {op.get('failures')} failed, "
            f"skipped {len(op.get('skipped', []))}" + (f" ({op['error']})" if "error" in op else "")]
    for f_ in op.get("failed", []):
        text.append(f"  FAILED {f_['test']}: " + " | ".join(" ".join(m.split())[:300] for m in f_["messages"]))
    for t in report["training"]:
        if t.get("routing_diverged_at_step") is not None or "final_rel_diff" in t:
            text.append(f"  {t['name']}: routing first differs at step "
                        f"{t.get('routing_diverged_at_step')} (compared tightly before it); final "
                        f"rel diff {t.get('final_rel_diff')} (≤ {t.get('final_tolerance')})")
        text.append(f"train {t['name']}: {'PASS' if t['pass'] else 'FAIL'} steps compared "
                    f"{t.get('steps_compared')}/{t['steps']}, max rel diff train_bpc "
                    f"{t.get('max_rel_diff_train_bpc')} (step {t.get('worst_step')}), grad_norm "
                    f"{t.get('max_rel_diff_grad_norm')}; cpu {t.get('cpu')}; cuda {t.get('cuda')}"
                    + (f"; {t['error']}" if "error" in t else ""))
    text.append(nccl_text(report["nccl"]))
    text.append(f"throughput: {report['throughput']}")
    text.append(f"stages: {stages}")
    text.append(f"overall: {'PASS' if report['pass'] else 'FAIL'}")
    with open(os.path.join(out, "gpu_check.txt"), "w") as f:
        f.write("\n".join(text) + "\n")
    print("\n".join(text))
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "nccl":
        sys.exit(nccl_main(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    sys.exit(main())
