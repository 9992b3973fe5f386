"""parity-train runs for bench/gpu_engine_check.py and bench/gpu_engine_bf16.py: a spec from an
example with an explicit precision, one run under a timeout with its metrics read back, and the
comparisons of two runs' metrics and checkpoints.

Every spec built here names its precision (`training.precision`): unset means bf16 on CUDA and
fp32 on the CPU, so a comparison that leaves it unset compares two different arithmetics.
"""
import datetime
import json
import os
import subprocess
import time

FP32, BF16 = "PRECISION_FP32", "PRECISION_BF16"
PEAK_BF16 = 989e12  # H200 SXM dense bf16 tensor-core peak (1,979 is with sparsity)

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


def stderr_text(out, spec, device, tag=""):
    """The run's stderr ("" when it left none)."""
    try:
        with open(os.path.join(run_dir_of(out, spec, device, tag), "stderr.log")) as f:
            return f.read()
    except OSError:
        return ""


def attention_lines(text):
    """The "cuDNN attention: ..." lines of a run's stderr `text` (kernels/cuda/cudnn_sdpa_run.cc
    prints each plan, with its engine and workspace, and each shape it declined, with the
    reason): which attention path the run took. At most 12."""
    return [line.strip() for line in text.splitlines()
            if line.startswith("cuDNN attention:")][:12]


def run_record(out, spec, device, tag, summary, code, seconds):
    """What the report keeps of one run: exit, seconds, speed, final BPC, the precision it ran
    in (from its summary: the proof the spec's precision took), the attention path's lines,
    stderr's tail if it failed."""
    rec = {"exit": code, "seconds": round(seconds, 2),
           "tokens_per_second": summary and summary.get("tokens_per_second"),
           "final_val_bpc": summary and summary.get("final_val_bpc"),
           "precision": summary and summary.get("precision")}
    text = stderr_text(out, spec, device, tag)
    attention = attention_lines(text)
    if attention:
        rec["cudnn_attention"] = attention
    if code != 0:
        rec["stderr"] = text[-600:]
    return rec


def device_under_test():
    """(device, threads) of the run under test: `cuda` with one host thread, or, with
    PARITY_ENGINE_CHECK_PEER=cpu (the wiring check without a GPU), the CPU with all of them."""
    device = os.environ.get("PARITY_ENGINE_CHECK_PEER", "cuda")
    return device, (os.cpu_count() or 1) if device == "cpu" else 1


def line_seconds(line):
    """A metrics line's wall time ("time": 2026-12-03T16:52:59.123Z) in Unix seconds, or None."""
    try:
        stamp = datetime.datetime.strptime(line["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    except (KeyError, TypeError, ValueError):
        return None
    return stamp.replace(tzinfo=datetime.timezone.utc).timestamp()


def host_seconds(lines, start, end, step_tokens, completed):
    """The process's seconds outside its steps, from the metrics lines' wall times (every step
    logged): before the first step (process start, weights drawn on the host, the corpus read,
    the first step's own time taken out) and, when it completed, after the last (the final
    evaluation and checkpoint, the summary)."""
    first, last = line_seconds(lines[0]), line_seconds(lines[-1])
    res = {}
    if first is not None and lines[0].get("tokens_per_second"):
        res["host_setup_seconds"] = round(
            max(0.0, first - start - step_tokens / lines[0]["tokens_per_second"]), 2)
    if completed and last is not None:
        res["after_last_step_seconds"] = round(max(0.0, end - last), 2)
    return res


def speed_run(bundle, out, spec, device, threads, budget, ckpt=None):
    """One run of `spec` for speed: tokens/s as the median of the steps after the first two
    (cuBLASLt plans and the allocator warm up there), counted model FLOPs/token from the metrics,
    MFU against the bf16 peak (for fp32 too: the same yardstick; fp32 has no tensor-core path),
    the peak device memory beside the planner's estimate, the last step's time split, and the
    seconds spent outside the steps. A run cut at its timeout keeps the steps it logged."""
    # The last step is timed op by op (--profile-step: the device synchronised around every timed
    # op), so it gives the time split and is left out of the speed.
    steps = spec["training"]["steps"]
    start = time.time()
    lines, summary, code, seconds = train(bundle, out, spec, device, threads, budget,
                                          extra=("--profile-step", str(steps)), ckpt=ckpt)
    res = run_record(out, spec, device, "", summary, code, seconds)
    res["steps"] = len(lines)
    if code == "timeout":
        res["error"] = f"timed out after {round(seconds)} s ({len(lines)} of {steps} steps logged)"
    if lines:
        res.update(host_seconds(lines, start, start + seconds, lines[0]["tokens"],
                                summary is not None))
    profiled = [l for l in lines if "profile" in l]
    if profiled:
        res["time_split"] = profiled[-1]["profile"]
    plain = [l for l in lines if "profile" not in l]
    timed = sorted(l["tokens_per_second"] for l in plain[2:]) or [
        l["tokens_per_second"] for l in plain[-1:]]
    # The device's high-water mark beside the planner's estimate for this config, where the
    # summary carries them: the aim is within 15%.
    peak, est = (summary or {}).get("peak_device_memory_bytes"), (summary or {}).get(
        "estimated_device_memory_bytes")
    if peak and est:
        res.update(peak_device_memory_bytes=peak, estimated_device_memory_bytes=est,
                   memory_ratio=peak / est)
    if timed:
        tps, m = timed[len(timed) // 2], lines[-1].get("flops_per_token")
        res.update(tokens_per_second=tps, flops_per_token=m,
                   model_flops_per_second=tps * m if m else None,
                   mfu=tps * m / PEAK_BF16 if m else None)
    return res


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
