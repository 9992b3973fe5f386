#!/usr/bin/env python3
"""The engine half of bench/gpu_check.sh, run on the GPU machine: training checks on the CUDA
backend, each a "part" that gpu_check.sh runs as its own stage (its deadline from the one budget,
its result in OUT/engine_<part>.json), then a report that merges them into gpu_check.json/.txt.

Parts, in gpu_check.sh's order (the most decisive first; seconds expected on an H200 with 16 CPU
cores — a CUDA process spends ~2–3 s starting, the micro models then run at hundreds of steps a
second, so the CPU peer's runs and the process starts dominate):
  fp32_dense      micro dense, 50 steps, fp32, --device cpu against --device cuda: train_bpc
                  step by step within REL_TOL (5e-4 relative)                              ~8 s
  fp32_moe        micro MoE, the same up to the first step whose expert loads differ (two correct
                  backends' last-bit differences flip a routing decision sooner or later — two CPU
                  runs that differ only in their BLAS kernels did at step 36 — and from there the
                  curves are two different, equally right trainings), that step and the largest
                  difference before it reported, plus the final losses within MOE_FINAL_TOL  ~10 s
  bf16_emulation  micro dense, 50 steps, bf16 on CUDA against the CPU's bf16 emulation
                  (gpu_engine_bf16.py: 2e-3 relative to step 20, 1e-2 after)                ~10 s
  bf16_vs_fp32    200 steps of micro dense (then MoE if time) in bf16 and fp32 on CUDA: windows
                  of 20 steps within 3% (dense) and 5% (MoE)                               ~20 s
  bf16_repeat     micro MoE bf16 twice (bit-identical metrics, byte-identical checkpoints), and
                  stopped at step 25 then resumed (ends byte-identical to the straight run)  ~12 s
  graphs          micro dense bf16, 4 micro-batches a step, 30 steps, eager against --graphs
                  (each micro-batch replayed from one recorded CUDA graph): bit-identical
                  metrics, byte-identical checkpoints, and both speeds                     ~10 s
  throughput      dense d512 L8 S1024 (not the 2B shapes), 8 steps of 131,072 tokens, fp32 and
                  bf16 on CUDA: tokens/s, counted model FLOP/s, MFU against 989 TFLOP/s, and
                  the peak device memory beside the planner's estimate where the summary line
                  carries both, and the last step's time split (parity-train --profile-step:
                  gemm, attention, MoE routing, MoE experts, optimizer, other) — measurements:
                  they do not change the verdict                                              ~25 s
  study_throughput  bf16 on CUDA at the 2B study's shapes (gpu_engine_study.py): the PyTorch
                  peer's two runs of the bundle's plan (dense 1C baseline, MoE nearest r_a 20%),
                  35 s each at most, one micro-batch a step, 5 steps: tokens/s, MFU, peak memory
                  against the estimate, the targets met or not; at fewer layers than planned
                  when the host's work on the weights would overrun the cap (said so) — a
                  measurement                                                                ~60 s
All precisions are explicit in every spec (unset is bf16 on CUDA, fp32 on the CPU).

Usage: gpu_engine_check.py part NAME BUNDLE_DIR OUT_DIR DEADLINE_UNIX_SECONDS
       gpu_engine_check.py report BUNDLE_DIR OUT_DIR       (the parts' JSON → gpu_check.json/.txt;
                                                            exit 0 only when every check passed)
       gpu_engine_check.py BUNDLE_DIR OUT_DIR DEADLINE     (every part in order, then the report)
       gpu_engine_check.py nccl BUNDLE_DIR OUT_DIR DEADLINE_UNIX_SECONDS   (gpu_check.sh's stage
       3c: the NCCL communicator at world size 1, into OUT_DIR/nccl_check.json; the report reads
       it. PARITY_NCCL_CHECK_DEVICE=cpu runs it on the CPU, expecting Gloo: a check of its wiring)
PARITY_ENGINE_CHECK_PEER=cpu puts a CPU run (one thread against all) where the CUDA run would be,
and PARITY_ENGINE_CHECK_SMOKE=1 shortens every part (fewer steps, the throughput run at the micro
shape, the study's runs at tiny shapes of their structure): the CPU wiring check,
bench/gpu_engine_check_smoke.sh.
"""
import json
import os
import sys
import time

import gpu_engine_bf16 as bf16
import gpu_engine_report as report
import gpu_engine_study as study
from gpu_engine_report import NCCL_NOTE
from gpu_engine_runs import (BF16, FP32, against_cpu, device_under_test, remaining, rel,
                             run_record, spec_from, speed_run, train)

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
PARTS = ("fp32_dense", "fp32_moe", "bf16_emulation", "bf16_vs_fp32", "bf16_repeat", "graphs",
         "throughput", "study_throughput")
SMOKE = os.environ.get("PARITY_ENGINE_CHECK_SMOKE") == "1"


def compare(bundle, out, corpus, example, name, deadline, steps=STEPS):
    """fp32 on the CPU (all threads) against the device under test, step by step."""
    spec = spec_from(example, corpus, name, steps, FP32)
    result = {"name": name, "steps": steps, "tolerance": REL_TOL, "pass": False}
    runs = against_cpu(bundle, out, spec, deadline, result)
    if runs is None:
        return result
    return judge(result, runs["cpu"], runs["cuda"], steps)


def judge(result, cpu_runs, cuda_runs, steps):
    """The verdict on two runs' metrics ({step: line}) into `result` (which holds each run's
    record under "cpu" and "cuda"): dense step by step; MoE up to the first routing difference,
    then the final losses."""
    common = [(step, cpu, cuda_runs[step]) for step, cpu in sorted(cpu_runs.items())
              if step in cuda_runs]
    moe = any("expert_load" in cpu for _, cpu, _ in common)
    diverged = next((step for step, cpu, cuda in common
                     if cpu.get("expert_load") != cuda.get("expert_load")), None)
    worst, worst_step, compared = 0.0, None, 0
    for step, cpu, cuda in common:
        if diverged is not None and step >= diverged:
            break  # from here the two runs route differently: compared by the final bound only
        d = rel(cpu["train_bpc"], cuda["train_bpc"])
        compared += 1
        if d > worst or worst_step is None:
            worst, worst_step = d, step
    grad = [rel(cpu["grad_norm"], cuda["grad_norm"]) for _, cpu, cuda in common]
    result.update(steps_compared=compared, max_rel_diff_train_bpc=worst, worst_step=worst_step,
                  max_rel_diff_grad_norm=max(grad) if grad else None)
    fp32_both = all(result[s]["precision"] == "fp32" for s in ("cpu", "cuda"))
    if not moe:
        result["pass"] = compared == steps and worst <= REL_TOL and fp32_both
        return result
    # MoE: tight up to the first routing difference, then the final losses within MOE_FINAL_TOL.
    result["routing_diverged_at_step"] = diverged
    result["final_tolerance"] = MOE_FINAL_TOL
    finals = {}
    for key in ("train_bpc", "final_val_bpc"):
        if key == "train_bpc" and common:
            a, b = common[-1][1]["train_bpc"], common[-1][2]["train_bpc"]
        else:
            a, b = result["cpu"].get(key), result["cuda"].get(key)
        finals[key] = rel(a, b) if a is not None and b is not None else None
    result["final_rel_diff"] = finals
    tight_ok = worst <= REL_TOL and compared >= 1 and (diverged is not None or compared == steps)
    final_ok = all(v is not None and v <= MOE_FINAL_TOL for v in finals.values())
    result["pass"] = len(common) == steps and tight_ok and final_ok and fp32_both
    return result


def nccl_gang_of_one(bundle, out, corpus, example, deadline, device="cuda", expect="nccl"):
    """The NCCL communicator at world size 1 (one GPU here; NCCL cannot put two ranks on one):
    rank 0 hosts the rendezvous store, posts NCCL's unique id, forms a one-rank communicator and
    sums every step's gradient and statistics through it. A one-rank sum is a copy, so the curve
    and the final validation BPC must equal the plain CUDA run's (world size 1, the no-op
    communicator) bit for bit, the run must train (last train BPC below the first), and its
    summary must name the communicator that summed ("nccl"; "gloo" with --device cpu, which is
    how PARITY_NCCL_CHECK_DEVICE=cpu checks this function's wiring on a machine without a GPU).
    In fp32: the communicator sums the fp32 gradients in either precision, and fp32 keeps this
    check apart from the bf16 kernels."""
    spec = spec_from(example, corpus, "nccl-gang-of-one", 20, FP32)
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
            result["stderr" + tag] = run_record(out, spec, device, tag, summary, code, 0)["stderr"]
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


def nccl_main(bundle, out, deadline):
    """gpu_check.sh's stage 3c: the check alone, into OUT/nccl_check.json."""
    device = os.environ.get("PARITY_NCCL_CHECK_DEVICE", "cuda")
    result = nccl_gang_of_one(bundle, out, os.path.join(bundle, "data", "kjv.txt"),
                              os.path.join(examples_dir(), "micro_dense.json"),
                              deadline, device, "nccl" if device.startswith("cuda") else "gloo")
    with open(os.path.join(out, "nccl_check.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(report.nccl_text(result))
    return 0 if result["pass"] or "skipped" in result else 1


def throughput_run(bundle, out, corpus, example, precision, deadline, cap, after):
    """One run for speed at the micro shape (gpu_engine_runs.speed_run has what it measures)."""
    label = "fp32" if precision == FP32 else "bf16"
    if SMOKE:  # the micro shape, a few steps: the wiring only
        spec = spec_from(example, corpus, f"throughput-micro-{label}", 4, precision)
    else:
        spec = spec_from(example, corpus, f"throughput-dense-d512-l8-s1024-{label}", 8, precision,
                         batchTokens=131072, sequenceLength=1024, microBatchSequences=32,
                         warmupSteps=2)
        spec["model"].update(dModel=512, numLayers=8, numHeads=8, numKvHeads=8, ffnHidden=1408)
    budget = min(cap, remaining(deadline) - after)
    if budget < 10:
        return {"error": "no time left"}
    res = speed_run(bundle, out, spec, *device_under_test(), budget)
    res["shape"] = spec["model"] | {"sequenceLength": spec["training"]["sequenceLength"],
                                    "batchTokens": spec["training"]["batchTokens"]}
    return res


def throughput(bundle, out, corpus, example, deadline):
    res = {"name": "throughput", "note": "dense d512 L8 S1024 (micro scale), not the 2B shapes"
           if not SMOKE else "smoke: the micro dense shape on the CPU"}
    # bf16 first (the mode the study trains in; ~8 s expected), leaving fp32 (~12 s) the rest.
    res["bf16"] = throughput_run(bundle, out, corpus, example, BF16, deadline, 30, 15)
    res["fp32"] = throughput_run(bundle, out, corpus, example, FP32, deadline, 60, 3)
    # Measurements, not checks: the part passes when both runs finished.
    res["pass"] = all(res[k].get("exit") == 0 for k in ("fp32", "bf16"))
    return res


def examples_dir():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(repo, "kernels", "examples")


def run_part(name, bundle, out, deadline):
    """One part into OUT/engine_<name>.json; its line of the summary on stdout; 0 if it passed."""
    corpus = os.path.join(bundle, "data", "kjv.txt")
    ex = examples_dir()
    dense, moe = os.path.join(ex, "micro_dense.json"), os.path.join(ex, "micro_moe.json")
    short = 20 if SMOKE else None  # the smoke's step counts (a minute on two cores for all parts)
    if name == "fp32_dense":
        res = compare(bundle, out, corpus, dense, "micro-dense", deadline, short or STEPS)
    elif name == "fp32_moe":
        res = compare(bundle, out, corpus, moe, "micro-moe", deadline, short or STEPS)
    elif name == "bf16_emulation":
        res = bf16.bf16_vs_emulation(bundle, out, corpus, dense, deadline,
                                     *((short, short // 2) if SMOKE else ()))
    elif name == "bf16_vs_fp32":
        res = bf16.bf16_vs_fp32(bundle, out, corpus, ex, deadline,
                                2 * short if SMOKE else bf16.CURVE_STEPS)
    elif name == "bf16_repeat":
        res = bf16.bf16_repeat(bundle, out, corpus, moe, deadline,
                               *((12, 6) if SMOKE else (bf16.REPEAT_STEPS, bf16.REPEAT_STOP)))
    elif name == "graphs":
        res = bf16.graphs(bundle, out, corpus, dense, deadline, 12 if SMOKE else bf16.GRAPH_STEPS)
    elif name == "throughput":
        res = throughput(bundle, out, corpus, dense, deadline)
    elif name == "study_throughput":
        res = study.study_throughput(bundle, out, corpus, deadline)
    else:
        print(f"gpu_engine_check.py: unknown part {name!r}; the parts: {', '.join(PARTS)}")
        return 2
    res["part"] = name
    with open(os.path.join(out, f"engine_{name}.json"), "w") as f:
        json.dump(res, f, indent=1)
    print("\n".join(report.part_text(name, res)))
    return 0 if res["pass"] else 1


def main(argv):
    if len(argv) == 4 and argv[0] == "nccl":
        return nccl_main(argv[1], argv[2], float(argv[3]))
    if len(argv) == 5 and argv[0] == "part":
        return run_part(argv[1], argv[2], argv[3], float(argv[4]))
    if len(argv) == 3 and argv[0] == "report":
        return report.write(argv[2], PARTS)
    if len(argv) == 3:
        bundle, out, deadline = argv[0], argv[1], float(argv[2])
        for name in PARTS:
            run_part(name, bundle, out, deadline)
        return report.write(out, PARTS)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
