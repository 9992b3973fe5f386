"""gpu_engine_check.py's part study_throughput (issue #26): the engine in bf16 on CUDA at the 2B
study's shapes, beside which bench/gpu_torch_peer.py measures PyTorch at the same shapes.

The runs are the peer's (gpu_torch_peer.pick_runs over the bundle's plan of
examples/full_study_2b.yaml): the dense 1C baseline and the MoE run nearest r_a 20%. Each is the
plan's own RunSpec entry (parity-train's input) with only what a measurement needs changed: the
bundle's corpus under unique reuse (the accounting, whose D̂ would override it, left out), one GPU,
bf16, one micro-batch of the plan's micro_batch_sequences a step, STEPS steps logged every step
(two to warm up, two timed, the last profiled op by op), evaluation only at the end over one
window, no checkpoint but the final one (which parity-train always writes: to a tmpfs when one has
room, then deleted). Measured per run: tokens/s, counted model FLOPs/token, MFU against 989
TFLOP/s, peak device memory against the estimate, the last step's time split, and the targets
(MFU >= 40% dense, >= 25% MoE; peak memory within 15% of the estimate) met or not.

Depth. parity-train draws a model's initial weights on the host (~40 ns of CPU time a parameter
measured on the development machine, spread over the cores), uploads them and writes 12 bytes a
parameter at the end: at the plan's depth (2.1e9 parameters each) that host work may overrun a
run's cap. A run
therefore keeps every per-layer shape of the plan (d_model, heads, head_dim, FFN, experts, top_k,
S, micro-batch) and takes the largest number of layers whose host work and steps fit its cap
(fit_layers; the MoE run's estimate uses the dense run's measured host seconds a parameter). At
fewer layers than planned the report says so, and gives the full-depth equivalent at constant MFU
(tokens/s scaled by the counted FLOPs/token at the run's depth over the plan's M): an
extrapolation. PARITY_STUDY_FULL_DEPTH=1 runs the plan's depth whatever the estimate.

Micro-batch. The peer's (gpu_torch_peer.MICRO_BATCH, 8 sequences) by default, so that the ratios
against PyTorch compare the same shapes. The plan's own per-GPU micro_batch_sequences (15 for the
dense baseline, whose 43 sequences a rank are cut 15 + 14 + 14; 25 for the MoE run, at this commit)
is how the study would train today: PARITY_STUDY_MICRO_BATCH=plan runs that, or a number runs that
many.

A timeout or a failed run is a result ("none: timed out after N s"), never a crash of the part.
PARITY_ENGINE_CHECK_SMOKE=1 (the CPU wiring check) takes gpu_torch_peer.smoke_shapes' tiny shapes
of the same structure.
"""
import copy
import json
import os
import re
import shutil
import tempfile

from gpu_engine_runs import BF16, PEAK_BF16, device_under_test, remaining, speed_run
from gpu_torch_peer import MICRO_BATCH as PEER_MICRO_BATCH
from gpu_torch_peer import pick_runs, shapes, smoke_shapes  # (imports no torch)

STEPS = 5
CAP_SECONDS = {"dense": 35, "moe": 35}
TARGET_MFU = {"dense": 0.40, "moe": 0.25}
MEMORY_TOLERANCE = 0.15  # |peak / estimate - 1|
DEFAULT_MICRO_BATCH = 8  # where the plan leaves micro_batch_sequences unset
# Sizing a run's depth to its cap: the seconds a parity-train process spends whatever the model
# (start, CUDA context, corpus), its host work a parameter before the first step and after the
# last (the weights drawn by Box-Muller: 40 ns of CPU time a value on the 2-core development Xeon,
# 2026-12-03, now spread over every core (Transformer::InitParams), then their upload and the
# final checkpoint's 12 bytes), the MFU its steps are assumed to reach at worst, and the share of
# the cap the estimate may fill. The dense run's measured host seconds size the MoE run.
FIXED_SECONDS = 5.0
HOST_NS_PER_PARAM = 40.0 / min(os.cpu_count() or 1, 16) + 10.0
SIZING_MFU = 0.10
FIT_SHARE = 0.75
SMOKE = os.environ.get("PARITY_ENGINE_CHECK_SMOKE") == "1"


def camel(snake):
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), snake)


def spelled(obj, snake):
    """The key `snake` in the spelling `obj` already uses (protobuf's JSON parser takes either,
    not both in one object): its own if present, else the one its other keys use."""
    if snake in obj or camel(snake) in obj:
        return snake if snake in obj else camel(snake)
    camel_keys = any(k != k.lower() for k in obj)
    return camel(snake) if camel_keys else snake


def put(obj, **fields):
    for snake, value in fields.items():
        obj[spelled(obj, snake)] = value


def param_count(cfg, layers):
    """Parameters of the model `cfg` (gpu_torch_peer.shapes' keys) at `layers` layers: what the
    host draws and checkpoints (embedding and untied head counted, norms left out)."""
    d, dh = cfg["d_model"], cfg["head_dim"]
    attention = d * (cfg["heads"] + 2 * cfg["kv_heads"]) * dh + cfg["heads"] * dh * d
    dense_ffn = 3 * d * cfg["ffn"]
    n_dense = min(cfg.get("dense_layers", layers), layers)
    moe_ffn = 0
    if "experts" in cfg:
        moe_ffn = d * cfg["experts"] + 3 * d * (cfg["experts"] * cfg["expert_ffn"]
                                                + cfg["shared_ffn"])
    return (2 * cfg["vocab"] * d + layers * attention + n_dense * dense_ffn
            + (layers - n_dense) * moe_ffn)


def estimated_seconds(cfg, layers, ns_per_param):
    params = param_count(cfg, layers)
    flops_per_token = cfg["flops_per_token"] * params / param_count(cfg, cfg["layers"])
    tokens = cfg["micro_batch"] * cfg["seq"]
    steps = (STEPS + 1) * tokens * flops_per_token / (SIZING_MFU * PEAK_BF16)  # profiled: 2x
    return FIXED_SECONDS + params * ns_per_param * 1e-9 + steps


def fit_layers(cfg, budget, ns_per_param):
    """The largest depth <= the plan's whose estimated seconds fill at most FIT_SHARE of
    `budget` (an MoE keeps its dense layers and one MoE layer at least)."""
    least = min(cfg["layers"], cfg.get("dense_layers", 0) + 1)
    for layers in range(cfg["layers"], least, -1):
        if estimated_seconds(cfg, layers, ns_per_param) <= FIT_SHARE * budget:
            return layers
    return least


def study_spec(run, cfg, corpus, layers, name):
    """The plan's RunSpec entry at `cfg`'s shape and `layers` layers, set up for a measurement."""
    spec = copy.deepcopy(run)
    spec.pop("accounting", None)  # its D̂ (unique_tokens) would override the data below
    spec["name"] = name
    spec["resources"] = {"gpus": 1}
    spec["data"] = {"corpus": corpus, "validation_fraction": 0.01, "reuse": "REUSE_MODE_UNIQUE"}
    model = spec["model"]
    put(model, d_model=cfg["d_model"], num_layers=layers, num_heads=cfg["heads"],
        num_kv_heads=cfg["kv_heads"], head_dim=cfg["head_dim"], ffn_hidden=cfg["ffn"])
    if "experts" in cfg:
        moe = model["moe"]
        put(moe, num_experts=cfg["experts"], top_k=cfg["top_k"], expert_hidden=cfg["expert_ffn"])
        if cfg["shared_ffn"] or spelled(moe, "shared_expert_hidden") in moe:
            put(moe, shared_expert_hidden=cfg["shared_ffn"])
    put(spec["training"], steps=STEPS, log_every_steps=1, eval_every_steps=100 * STEPS,
        eval_tokens=cfg["seq"], checkpoint_every_steps=0, checkpoint_every_seconds=0,
        precision=BF16, sequence_length=cfg["seq"], micro_batch_sequences=cfg["micro_batch"],
        batch_tokens=cfg["micro_batch"] * cfg["seq"])
    return spec


def checkpoint_dir(out, params):
    """A fresh directory for the final checkpoint: on /dev/shm when it has room for it (no disk
    write, no fsync wait), else under OUT."""
    need = 13 * params + (1 << 30)
    for base in ("/dev/shm", out):
        try:
            st = os.statvfs(base)
        except OSError:
            continue
        if st.f_bavail * st.f_frsize >= need or base == out:
            return tempfile.mkdtemp(prefix="parity-study-ckpt-", dir=base)
    return tempfile.mkdtemp(prefix="parity-study-ckpt-", dir=out)


def targets(kind, rec):
    """The issue's targets this run can be held to on its own (the ratios to PyTorch are
    gpu_study_cost.py's, after the peer): met, not met, or None when not measured."""
    mfu, ratio = rec.get("mfu"), rec.get("memory_ratio")
    return {"mfu": {"target": TARGET_MFU[kind], "value": mfu,
                    "met": None if mfu is None else mfu >= TARGET_MFU[kind]},
            "memory": {"tolerance": MEMORY_TOLERANCE, "ratio": ratio,
                       "met": None if ratio is None else abs(ratio - 1) <= MEMORY_TOLERANCE}}


def plan_shape(cfg):
    keys = ("d_model", "layers", "heads", "kv_heads", "head_dim", "ffn", "seq", "micro_batch",
            "experts", "top_k", "expert_ffn", "shared_ffn", "dense_layers", "params",
            "flops_per_token", "activation_rate")
    return {k: cfg[k] for k in keys if k in cfg}


def study_run(bundle, out, kind, run, corpus, budget, ns_per_param):
    """One kind's run at its shape, depth fitted to `budget`; its record with the targets."""
    asked = os.environ.get("PARITY_STUDY_MICRO_BATCH") or str(PEER_MICRO_BATCH)
    micro = int(run["training"].get("micro_batch_sequences") or
                run["training"].get("microBatchSequences") or
                DEFAULT_MICRO_BATCH) if asked == "plan" else int(asked)
    cfg = shapes(run, micro)
    if SMOKE:
        cfg = smoke_shapes(cfg)
    full = os.environ.get("PARITY_STUDY_FULL_DEPTH") == "1"
    layers = cfg["layers"] if full else fit_layers(cfg, budget, ns_per_param)
    name = f"study-{run['name']}" + ("" if layers == cfg["layers"] else f"-l{layers}")
    spec = study_spec(run, cfg, corpus, layers, name)
    params = param_count(cfg, layers)
    ckpt = checkpoint_dir(out, params)
    try:
        rec = speed_run(bundle, out, spec, *device_under_test(), budget, ckpt=ckpt)
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)  # 12 bytes a parameter
    rec.update(run=run["name"], plan_shape=plan_shape(cfg), layers=layers, params=params,
               checkpoint_on=os.path.dirname(ckpt), budget_seconds=round(budget),
               host_ns_per_param_assumed=round(ns_per_param, 1),
               planned_gpu_memory_bytes=run.get("resources", {}).get("gpu_memory_bytes"))
    if layers < cfg["layers"]:
        rec["depth_note"] = (f"{layers} of the plan's {cfg['layers']} layers: the host work at "
                             f"full depth (~{ns_per_param:.0f} ns a parameter) would overrun its "
                             f"{budget:.0f} s")
        if rec.get("tokens_per_second") and rec.get("flops_per_token"):
            rec["full_depth_tokens_per_second"] = (rec["tokens_per_second"] * rec["flops_per_token"]
                                                   / cfg["flops_per_token"])
    elif rec.get("tokens_per_second"):
        rec["full_depth_tokens_per_second"] = rec["tokens_per_second"]
    if "host_setup_seconds" in rec and "after_last_step_seconds" in rec:
        # The process's fixed seconds included: an overestimate, on the safe side.
        rec["host_ns_per_param_measured"] = round(
            (rec["host_setup_seconds"] + rec["after_last_step_seconds"]) / params * 1e9, 1)
    rec["targets"] = targets(kind, rec)
    return rec


def next_ns_per_param(rec, assumed):
    """The host seconds a parameter to size the next run with: the run's measurement; after a
    timeout, more than it could have been (its whole time, half again: it did not finish)."""
    if rec.get("host_ns_per_param_measured"):
        return rec["host_ns_per_param_measured"]
    if rec.get("exit") == "timeout" and rec.get("params"):
        return max(assumed, 1.5 * rec["seconds"] / rec["params"] * 1e9)
    return assumed


def study_throughput(bundle, out, corpus, deadline):
    """The dense run, then the MoE run (its depth sized with the dense run's measured host work),
    each within its cap and what the part's deadline leaves."""
    res = {"name": "study_throughput", "steps": STEPS, "peak_flops": PEAK_BF16,
           "note": "bf16 at the 2B study's shapes, one micro-batch a step" if not SMOKE else
           "smoke: tiny shapes of the 2B study's structure on the CPU"}
    path = os.path.join(bundle, "plan_full_study_2b.json")
    try:
        with open(path) as f:
            runs = pick_runs(json.load(f))
    except (OSError, ValueError, KeyError, TypeError) as e:
        res.update({"error": f"no plan of the 2B study ({path}): {e}", "pass": False})
        return res
    ns_per_param = float(os.environ.get("PARITY_STUDY_HOST_NS", HOST_NS_PER_PARAM))
    for kind in ("dense", "moe"):
        # The dense run leaves the MoE run its cap, or half of what is left when that is less.
        after = min(CAP_SECONDS["moe"] + 3, remaining(deadline) / 2) if kind == "dense" else 2
        budget = min(CAP_SECONDS[kind], remaining(deadline) - after)
        if budget < 10:
            res[kind] = {"run": runs[kind]["name"], "error": "no time left"}
            continue
        res[kind] = study_run(bundle, out, kind, runs[kind], corpus, budget, ns_per_param)
        ns_per_param = next_ns_per_param(res[kind], ns_per_param)
    # Measurements, not checks: the part passes when both runs finished.
    res["pass"] = all(res[k].get("exit") == 0 for k in ("dense", "moe"))
    return res
