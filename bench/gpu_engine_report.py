"""The report of bench/gpu_engine_check.py: the op parity test's gtest JSON (its fp32 and bf16
tests apart), the engine parts' OUT/engine_<part>.json, stage 3c's nccl_check.json and stages.txt
merged into OUT/gpu_check.json, and the one-screen summary OUT/gpu_check.txt: each check's
PASS/FAIL, its numbers and the tolerance it was held to. A part that did not run is NOT RUN, with
the stage's reason, and the check is then not a pass (nothing was verified)."""
import json
import os

from gpu_engine_runs import read_stages, stage_status

# The parts whose failure (or absence) fails the check; throughput and study_throughput are
# measurements.
CORRECTNESS = ("fp32_dense", "fp32_moe", "bf16_emulation", "bf16_vs_fp32", "bf16_repeat",
               "graphs")


def is_bf16_test(suite, test):
    return "bf16" in suite.lower() or "bf16" in test.lower()


def op_test_summary(path):
    """kernels_cuda_ops_test's gtest JSON: failures and skips, and the bf16 table's tests
    (suites named *Bf16*, cuda_bf16_ops_test.cc) counted apart from the fp32 ones."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"no gtest JSON: {e}"}
    res = {"tests": doc.get("tests"), "failures": doc.get("failures"),
           "disabled": doc.get("disabled"), "failed": [], "skipped": [],
           "bf16": {"tests": 0, "failed": 0, "skipped": 0}}
    for suite in doc.get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = f"{suite['name']}.{t['name']}"
            bf16 = is_bf16_test(suite["name"], t["name"])
            res["bf16"]["tests"] += bf16
            if t.get("failures"):
                res["bf16"]["failed"] += bf16
                res["failed"].append({"test": name, "messages": [
                    x.get("failure", "")[:800] for x in t["failures"]]})
            if t.get("result") == "SKIPPED":
                res["bf16"]["skipped"] += bf16
                res["skipped"].append(name)
    return res


def op_test_pass(op):
    return (not op.get("error") and op.get("failures") == 0 and not op.get("skipped")
            and op["bf16"]["tests"] > 0)


def stage_result(out, stages, stage, path, name):
    """A stage's JSON result, or why there is none (ran and left nothing — killed at its
    timeout — is an error; skipped or never reached says so)."""
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    state = stages.get(stage, "not run")
    if state.startswith("skipped") or state == "not run":
        return {"name": name, "pass": False, "skipped": state}
    return {"name": name, "pass": False, "error": f"no result (stage exit {state})"}


NCCL_NOTE = ("NCCL ran at world size 1 only: the lent machine has one GPU and NCCL cannot put two "
             "ranks on one GPU")


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


def verdict(res):
    return "PASS" if res.get("pass") else "FAIL"


def g(x):
    return f"{x:.3g}" if isinstance(x, (int, float)) else str(x)


def runs_text(res, slots):
    """Each run's exit and seconds; a failed run's stderr tail on its own line."""
    parts, errors = [], []
    for s in slots:
        rec = res.get(s)
        if not isinstance(rec, dict) or "exit" not in rec:
            continue
        parts.append(f"{s} exit {rec['exit']} {rec.get('seconds')} s")
        if rec["exit"] not in (0, 3) and rec.get("stderr"):
            errors.append(f"    {s}: " + " ".join(rec["stderr"].split())[-240:])
    return ("; " + ", ".join(parts) if parts else ""), errors


def speed_lines(label, t, indent="  "):
    """One speed run's lines (gpu_engine_runs.speed_run's record): tokens/s, counted model
    FLOP/s, MFU, peak device memory beside the estimate, and the profiled step's time split; or
    none, and why (a timeout says after how many seconds)."""
    if not t.get("tokens_per_second"):
        why = t.get("error") or f"exit {t.get('exit')}"
        return [f"{indent}{label}: none ({why}"
                + (f": {' '.join(t['stderr'].split())[-240:]}" if t.get("stderr") else "") + ")"]
    lines = [f"{indent}{label}: {t['tokens_per_second']:.0f} tok/s, "
             f"{(t.get('model_flops_per_second') or 0) / 1e12:.2f} TFLOP/s (counted model "
             f"FLOPs, {g(t.get('flops_per_token'))}/token), MFU {100 * (t.get('mfu') or 0):.2f}% "
             f"of 989 TFLOP/s; {t.get('steps')} steps"
             + (f"; peak device memory {t['peak_device_memory_bytes'] / 2**30:.2f} GiB, the "
                f"planner's estimate {t['estimated_device_memory_bytes'] / 2**30:.2f} GiB (ratio "
                f"{t['memory_ratio']:.3f}, aim within 0.85-1.15)" if t.get("memory_ratio") else
                "; no peak device memory / estimate in the summary")
             + (f"; {t['error']}" if t.get("error") else "")]
    split = t.get("time_split")
    if split and split.get("step_seconds"):
        total = split["step_seconds"]
        parts = ", ".join(f"{k[:-len('_seconds')]} {100 * v / total:.0f}%"
                          for k, v in split.items() if k != "step_seconds" and v > 0)
        lines.append(f"{indent}  time split of one step ({total * 1e3:.1f} ms, synchronised per "
                     f"op): {parts}")
    return lines


def met(target):
    return {True: "met", False: "NOT met", None: "not measured"}[target.get("met")]


def study_lines(kind, t):
    """study_throughput's lines for one kind: the plan's shape and the depth run, the speed
    lines, the targets, and the host seconds outside the steps."""
    s = t.get("plan_shape") or {}
    if not s:
        return [f"  {kind} {t.get('run')}: none ({t.get('error')})"]
    moe = (f", E {s['experts']} top-{s['top_k']} D_e {s['expert_ffn']} shared {s['shared_ffn']}"
           if "experts" in s else "")
    lines = [f"  {kind} {t.get('run')}: d_model {s['d_model']}, {s['layers']} layers, "
             f"{s['heads']} heads x {s['head_dim']}, ffn {s['ffn']}{moe}, seq {s['seq']}, "
             f"micro-batch {s['micro_batch']}; M {g(s.get('flops_per_token'))} planned"]
    if t.get("depth_note"):
        full = t.get("full_depth_tokens_per_second")
        lines.append(f"    ran {t['depth_note']}" + (
            f"; full-depth equivalent at constant MFU {full:.0f} tok/s (an extrapolation)"
            if full else ""))
    lines += speed_lines("engine bf16", t, "    ")
    attention = t.get("cudnn_attention") or ["(no cuDNN attention line: cuDNN off or absent)"]
    lines += [f"    {line}" for line in attention]
    tg = t.get("targets") or {}
    if tg:
        mfu, mem = tg["mfu"], tg["memory"]
        lines.append(f"    targets: MFU >= {100 * mfu['target']:.0f}%: {met(mfu)}; peak memory "
                     f"within {100 * mem['tolerance']:.0f}% of the estimate: {met(mem)}")
    if "host_setup_seconds" in t:
        lines.append(f"    host: {t['host_setup_seconds']} s before the first step, "
                     f"{t.get('after_last_step_seconds', '?')} s after the last (final checkpoint "
                     f"on {t.get('checkpoint_on')}); {g(t.get('params'))} parameters, "
                     f"{t.get('host_ns_per_param_measured', '?')} ns a parameter measured "
                     f"({t.get('host_ns_per_param_assumed')} assumed)")
    return lines


def part_text(name, res):
    """The part's lines of the summary."""
    if "skipped" in res:
        return [f"{name}: NOT RUN ({res['skipped']})"]
    if "error" in res and not any(k in res for k in ("steps_compared", "determinism", "dense")):
        # Stopped before its verdict: for want of time (NOT RUN), or a run failed (FAIL).
        word = "NOT RUN" if res["error"].startswith("no time left") else "FAIL"
        runs, errors = runs_text(res, ("cuda", "cpu", "a", "b", "stopped", "resumed"))
        return [f"{name}: {word} ({res['error']}){runs}"] + errors
    if name in ("fp32_dense", "fp32_moe"):
        runs, errors = runs_text(res, ("cpu", "cuda"))
        lines = [f"train fp32 {res['name']}: {verdict(res)} {res.get('steps_compared')}/"
                 f"{res['steps']} steps, max rel diff train_bpc "
                 f"{g(res.get('max_rel_diff_train_bpc'))} (step {res.get('worst_step')}) <= "
                 f"{g(res['tolerance'])}, grad_norm "
                 f"{g(res.get('max_rel_diff_grad_norm'))}" + runs]
        if "final_rel_diff" in res:
            f = res["final_rel_diff"]
            at = res.get("routing_diverged_at_step")
            lines.append((f"  routing first differs at step {at} (compared tightly before it)"
                          if at is not None else "  routing never differed (compared tightly "
                          "throughout)") + "; final rel diff train "
                         f"{g(f.get('train_bpc'))}, val {g(f.get('final_val_bpc'))} "
                         f"<= {g(res.get('final_tolerance'))}")
        return lines + errors
    if name == "bf16_emulation":
        runs, errors = runs_text(res, ("cpu", "cuda"))
        tol = list(res["tolerance"].items())
        return [f"bf16 vs CPU emulation micro-dense: {verdict(res)} {res.get('steps_compared')}/"
                f"{res['steps']} steps, max rel diff train_bpc {g(res.get('max_rel_diff_early'))} "
                f"(step {res.get('worst_step_early')}) <= {g(tol[0][1])} in {tol[0][0]}, "
                f"{g(res.get('max_rel_diff_late'))} (step {res.get('worst_step_late')}) <= "
                f"{g(tol[1][1])} in {tol[1][0]}; identical: {res.get('identical')}" + runs,
                "  gap first over " + ", ".join(
                    f"{k} at step {v}" for k, v in (res.get("gap_first_over") or {}).items())
                + " (chaos crosses them steps apart; a wrong kernel at step 1)"] + errors
    if name == "bf16_vs_fp32":
        lines = []
        for kind in ("dense", "moe"):
            c = res.get(kind, {})
            if "skipped" in c or not c:
                lines.append(f"bf16 vs fp32 {kind}: not run ({c.get('skipped', 'no result')})")
                continue
            runs, errors = runs_text(c, ("fp32", "bf16"))
            gaps = c.get("window_rel_diff") or []
            t = c["tolerance"]
            lines.append(
                f"bf16 vs fp32 {kind} {c['steps']} steps: {verdict(c)} window-mean gaps "
                f"(every {c['window']} steps) max {g(max(gaps) if gaps else None)} <= "
                f"{g(t['every_window'])}, last window {g(gaps[-1] if gaps else None)}; its bpc "
                f"fp32 {(c.get('window_means_fp32') or [None])[-1]}, bf16 "
                f"{(c.get('window_means_bf16') or [None])[-1]}" + runs
                + (f"; {c['error']}" if "error" in c else ""))
            lines += errors
        return lines
    if name == "bf16_repeat":
        runs, errors = runs_text(res, ("a", "b", "stopped", "resumed"))
        d, r = res.get("determinism", {}), res.get("resume", {})
        return [f"bf16 determinism micro-moe {res['steps']} steps, two runs: {verdict(d)} "
                f"metrics bit-identical: {d.get('first_difference') is None}, checkpoints "
                f"byte-identical: {d.get('checkpoints_identical')} ({d.get('checkpoint_bytes')} B)"
                + (f"; first difference {d['first_difference']}" if d.get("first_difference")
                   else ""),
                f"bf16 resume (stopped at {res['stopped_at']}, resumed): {verdict(r)} checkpoint "
                f"identical to the straight run's: {r.get('checkpoint_identical')}, stopped run "
                f"exit {r.get('stopped_exit')} (3 expected)"
                + (f"; first difference {r['first_difference']}" if r.get("first_difference")
                   else "") + runs + (f"; {res['error']}" if "error" in res else "")] + errors
    if name == "graphs":
        runs, errors = runs_text(res, ("eager", "graphs"))
        eager, replayed = res.get("eager", {}), res.get("graphs", {})
        speed = (f"; tok/s eager {eager['tokens_per_second']:.0f}, replayed "
                 f"{replayed['tokens_per_second']:.0f} (x{res['speedup']:.2f})"
                 if res.get("speedup") else "")
        return [f"graph replay micro-dense bf16 {res['steps']} steps, eager vs --graphs: "
                f"{verdict(res)} metrics bit-identical: {res.get('first_difference') is None}, "
                f"checkpoints byte-identical: {res.get('checkpoints_identical')}"
                + (f"; first difference {res['first_difference']}"
                   if res.get("first_difference") else "") + speed + runs
                + (f"; {res['error']}" if "error" in res else "")] + errors
    if name == "throughput":
        lines = [f"throughput ({res.get('note')}):"]
        for label in ("fp32", "bf16"):
            lines += speed_lines(f"engine {label}", res.get(label, {}))
        return lines
    if name == "study_throughput":
        lines = [f"study throughput ({res.get('note')}; a measurement, not a check):"]
        for kind in ("dense", "moe"):
            lines += study_lines(kind, res.get(kind) or {})
        return lines
    return [f"{name}: {verdict(res)} {res}"]


def write(out, parts):
    """gpu_check.json and gpu_check.txt from everything the stages left in OUT; 0 on a pass."""
    stages = read_stages(out)
    nvsmi = os.path.join(out, "nvidia-smi.txt")
    rep = {"gpu": open(nvsmi).read().strip() if os.path.exists(nvsmi) else None,
           "op_test": op_test_summary(os.path.join(out, "cuda_ops_test.json")),
           "engine": {p: stage_result(out, stages, f"engine_{p}",
                                      os.path.join(out, f"engine_{p}.json"), p) for p in parts},
           "stages": stages}
    # Stage 3c: NCCL at world size 1. Not run for want of time is reported, not failed; run and
    # wrong, or hung past its timeout, fails.
    rep["nccl"] = stage_result(out, stages, "nccl_world1", os.path.join(out, "nccl_check.json"),
                               "nccl-gang-of-one")
    rep["throughput"] = rep["engine"].get("throughput", {})  # gpu_study_cost.py reads it here
    op = rep["op_test"]
    rep["pass"] = (op_test_pass(op)
                   and all(rep["engine"][p].get("pass") for p in CORRECTNESS if p in parts)
                   and (rep["nccl"].get("pass") or "skipped" in rep["nccl"])
                   and all(stage_status(stages, n) == "0"
                           for n in ("worker_unit_test", "list_devices")))
    with open(os.path.join(out, "gpu_check.json"), "w") as f:
        json.dump(rep, f, indent=1)
    b = op.get("bf16", {})
    text = [f"GPU: {rep['gpu']}",
            f"op parity test: {verdict({'pass': op_test_pass(op)})} {op.get('tests')} tests "
            f"({b.get('tests')} of the bf16 table, {b.get('failed')} of them failed), "
            f"{op.get('failures')} failed, skipped {len(op.get('skipped', []))}"
            + (f" ({op['error']})" if "error" in op else "")
            + ("; no bf16 op tests in the binary (built before the CUDA bf16 kernels?)"
               if "error" not in op and not b.get("tests") else "")]
    for f_ in op.get("failed", []):
        text.append(f"  FAILED {f_['test']}: "
                    + " | ".join(" ".join(m.split())[:300] for m in f_["messages"]))
    for p in parts:
        text += part_text(p, rep["engine"][p])
    text.append(nccl_text(rep["nccl"]))
    text.append("stages: " + ", ".join(f"{k}={v}" for k, v in stages.items()))
    text.append(f"overall: {'PASS' if rep['pass'] else 'FAIL'}")
    with open(os.path.join(out, "gpu_check.txt"), "w") as f:
        f.write("\n".join(text) + "\n")
    print("\n".join(text))
    return 0 if rep["pass"] else 1
