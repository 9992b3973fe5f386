"""parity-train runs for bench/gpu_engine_check.py and bench/gpu_engine_bf16.py: a spec from an
example with an explicit precision, one run under a timeout with its metrics read back, and the
comparisons of two runs' metrics and checkpoints.

Every spec built here names its precision (`training.precision`): unset means bf16 on CUDA and
fp32 on the CPU, so a comparison that leaves it unset compares two different arithmetics.
"""
import json
import os
import subprocess
import time

FP32, BF16 = "PRECISION_FP32", "PRECISION_BF16"

# Metric fields that measure time, not arithmetic: left out of a bit-for-bit comparison.
TIMING_FIELDS = frozenset({
    "tokens_per_second", "flops_per_second", "time", "train_seconds", "wall_seconds",
    "wall_time", "data_wait_seconds", "peak_memory_bytes", "checkpoint", "comm_seconds",
    "peak_device_memory_bytes"})  # a measurement of the allocator, not of the arithmetic


def remaining(deadline):
    return deadline - time.time()


def spec_from(example, corpus, name, steps, precision, **training):
    """The example's spec renamed, on `corpus`, for `steps` steps logged every step, in
    `precision` (FP32 or BF16; never left unset), with `training` overriding the rest."""
    with open(example) as f:
        spec = json.load(f)
    spec["name"] = name
    spec["data"]["corpus"] = corpus
    settings = dict(steps=steps, logEverySteps=1, evalEverySteps=10 * steps, evalTokens=8192,
                    checkpointEverySteps=0, precision=precision)
    if os.environ.get("PARITY_ENGINE_CHECK_SMOKE") == "1":
        # The CPU wiring check (bench/gpu_engine_check_smoke.sh): a quarter of the batch, so
        # that every part runs in about a minute on two cores.
        settings.update(batchTokens=1024, microBatchSequences=8, evalTokens=2048)
    settings.update(training)
    spec["training"].update(settings)
    return spec


def run_dir_of(out, spec, device, tag=""):
    return os.path.join(out, "runs", f"{spec['name']}-{device}{tag}")


def train(bundle, out, spec, device, threads, budget, extra=(), tag="", ckpt=None):
    """Runs parity-train; returns (metrics lines, summary line or None, exit code, seconds).
    `ckpt`: the checkpoint directory (default: the run's own; a resume passes the stopped run's)."""
    run_dir = run_dir_of(out, spec, device, tag)
    os.makedirs(run_dir, exist_ok=True)
    spec_path = os.path.join(run_dir, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
    metrics = os.path.join(run_dir, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [os.path.join(bundle, "bin", "parity-train"), "--run", spec_path, "--out",
           ckpt or os.path.join(run_dir, "ckpt"), "--metrics", metrics, "--device", device,
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


def stderr_tail(out, spec, device, tag=""):
    try:
        with open(os.path.join(run_dir_of(out, spec, device, tag), "stderr.log")) as f:
            return f.read()[-600:]
    except OSError:
        return ""


def run_record(out, spec, device, tag, summary, code, seconds):
    """What the report keeps of one run: exit, seconds, speed, final BPC, the precision it ran
    in (from its summary: the proof the spec's precision took), stderr's tail if it failed."""
    rec = {"exit": code, "seconds": round(seconds, 2),
           "tokens_per_second": summary and summary.get("tokens_per_second"),
           "final_val_bpc": summary and summary.get("final_val_bpc"),
           "precision": summary and summary.get("precision")}
    if code != 0:
        rec["stderr"] = stderr_tail(out, spec, device, tag)
    return rec


def against_cpu(bundle, out, spec, deadline, result):
    """`spec` on the device under test, then on the CPU with all its threads (the reference):
    {"cpu": {step: line}, "cuda": {step: line}} with each run's record put in `result`, or None
    with result["error"] when the deadline leaves a run under 10 s. The device first: on CUDA a
    micro run takes seconds (capped at 30, so a hang is cut short) and its failure is the news;
    the CPU run, the slow one, then has all that is left. PARITY_ENGINE_CHECK_PEER=cpu puts a
    one-thread CPU run in the CUDA run's place (the wiring check without a GPU)."""
    peer = os.environ.get("PARITY_ENGINE_CHECK_PEER", "cuda")
    runs = {}
    for slot, device, threads, tag, cap, after in (
            ("cuda", peer, 1, "-peer" if peer == "cpu" else "", 30 if peer != "cpu" else 90, 15),
            ("cpu", "cpu", os.cpu_count() or 1, "", 120, 3)):
        budget = min(cap, remaining(deadline) - after)
        if budget < 10:
            result["error"] = f"no time left for the {slot} run"
            return None
        lines, summary, code, seconds = train(bundle, out, spec, device, threads, budget, tag=tag)
        runs[slot] = {l["step"]: l for l in lines}
        result[slot] = run_record(out, spec, device, tag, summary, code, seconds)
        if code != 0 and not lines:
            result["error"] = f"the {slot} run failed (exit {code}): nothing to compare"
            return None
    return runs


def rel(a, b):
    return abs(a - b) / max(abs(a), 1e-30)


def without_timing(line):
    return {k: v for k, v in line.items() if k not in TIMING_FIELDS}


def first_metric_difference(a_lines, b_lines):
    """None when the two runs logged the same steps with every non-timing value equal (bit for
    bit: Python compares the parsed doubles exactly), else where and what first differs."""
    if len(a_lines) != len(b_lines):
        return f"{len(a_lines)} metric lines against {len(b_lines)}"
    for a, b in zip(a_lines, b_lines):
        a, b = without_timing(a), without_timing(b)
        if a != b:
            keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            return (f"step {a.get('step')}: " + ", ".join(
                f"{k} {a.get(k)!r} != {b.get(k)!r}" for k in keys)[:400])
    return None


def checkpoint_bytes(summary):
    """The final checkpoint's bytes (the summary names its path), or None."""
    path = (summary or {}).get("checkpoint")
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def read_stages(out):
    stages = {}
    path = os.path.join(out, "stages.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                if key:
                    stages[key] = value
    return stages


def stage_status(stages, name):
    """A stage's exit status from stages.txt ("0 12s" → "0"; "skipped: …" stays as it is)."""
    value = stages.get(name, "not run")
    return value if value.startswith("skipped") else value.split(" ")[0]
