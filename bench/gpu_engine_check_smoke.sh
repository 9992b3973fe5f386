#!/usr/bin/env bash
# The wiring of bench/gpu_engine_check.py on a machine without a GPU: every part and the report,
# as gpu_check.sh's stage 4 runs them, with a CPU run (one thread against all) where the CUDA run
# would be (PARITY_ENGINE_CHECK_PEER=cpu) and fewer steps and a quarter of the batch
# (PARITY_ENGINE_CHECK_SMOKE=1): fp32 dense step by step within REL_TOL; fp32 MoE reporting where
# its routing first differs (or that it never did), compared tightly only before it, final losses
# bounded; bf16 against the bf16 emulation (both sides the emulation here); bf16 against fp32 in
# windows; two bf16 runs bit-identical and a stopped-and-resumed one byte-identical; both
# throughput runs; the 2B study's two runs (planned by the CLI, at gpu_torch_peer's tiny smoke
# shapes of their structure) and the depth fit that sizes them on the GPU; then the report's JSON
# and summary, that a failed or missing part fails it, and gpu_study_cost.py's merge of the
# engine's 2B-shape figures with a peer's (and its words when the part is absent).
#   bench/gpu_engine_check_smoke.sh PARITY_TRAIN [PARITY_CLI]   (default: build/cli/parity beside)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
. bench/gpu_smoke_bundle.sh
cpu_smoke_bundle "$1" "$tmp" 20000  # 1.4 MB: micro-moe's unique tokens fit its training split
out="$tmp/out"
# The plan the bundle carries (bench/gpu_bundle.sh): study_throughput takes its runs from it.
"${2:-$(dirname "$1")/../cli/parity}" plan examples/full_study_2b.yaml --format json \
  >"$tmp/bundle/plan_full_study_2b.json"
# What the earlier stages leave: the op test's gtest JSON (one fp32 and one bf16 test) and
# stages.txt with the worker checks passed.
cat >"$out/cuda_ops_test.json" <<'JSON'
{"tests": 2, "failures": 0, "disabled": 0, "testsuites": [
 {"name": "CudaOpsTest", "testsuite": [{"name": "Matmul", "result": "COMPLETED"}]},
 {"name": "CudaBf16OpsTest", "testsuite": [{"name": "RmsNorm", "result": "COMPLETED"}]}]}
JSON
printf 'worker_unit_test=0 1s\nlist_devices=0 1s\n' >"$out/stages.txt"
set +e
PARITY_ENGINE_CHECK_PEER=cpu PARITY_ENGINE_CHECK_SMOKE=1 python3 bench/gpu_engine_check.py \
  "$tmp/bundle" "$out" "$(($(date +%s) + 300))" | tee "$tmp/stdout.txt"
status="${PIPESTATUS[0]}"
set -e
fail() { echo "FAIL: $*"; exit 1; }
[ "$status" -eq 0 ] || fail "gpu_engine_check.py exit $status (expected 0: every part passes)"
for line in '^train fp32 micro-dense: PASS' '^train fp32 micro-moe: PASS' \
  '^bf16 vs CPU emulation micro-dense: PASS' '^  gap first over 0.0001 at step' \
  '^bf16 vs fp32 dense 40 steps: PASS' \
  '^bf16 vs fp32 moe 40 steps: PASS' '^bf16 determinism micro-moe 12 steps, two runs: PASS' \
  '^bf16 resume (stopped at 6, resumed): PASS' '^  engine bf16: [0-9]* tok/s' \
  '^study throughput (smoke: ' '^  dense dense-1C-C1-[a-z0-9-]*: d_model 64, 2 layers' \
  '^  moe moe-ra20-C1-[a-z0-9-]*: d_model 64, 2 layers, 4 heads x 16, ffn 160, E 8 top-3' \
  '^    engine bf16: [0-9]* tok/s' '^    targets: MFU >= 40%: NOT met; peak memory within 15%' \
  '^    targets: MFU >= 25%: NOT met' '^    host: [0-9.]* s before the first step' \
  '^    (no cuDNN attention line: cuDNN off or absent)' \
  '^op parity test: PASS 2 tests (1 of the bf16 table' '^overall: PASS'; do
  grep -q "$line" "$out/gpu_check.txt" || fail "gpu_check.txt has no line matching $line"
done
python3 - "$out" <<'PY' || fail "gpu_check.json"
import json, os, sys
sys.path.insert(0, "bench")
import gpu_engine_runs as r
out = sys.argv[1]
rep = json.load(open(os.path.join(out, "gpu_check.json")))
e = rep["engine"]
dense, moe = e["fp32_dense"], e["fp32_moe"]
assert dense["pass"] and dense["steps_compared"] == dense["steps"] == 20, dense
assert dense["cpu"]["precision"] == dense["cuda"]["precision"] == "fp32", dense
assert "routing_diverged_at_step" in moe and "final_rel_diff" in moe and moe["pass"], moe
if moe["routing_diverged_at_step"] is not None:
    assert moe["steps_compared"] < moe["steps"], "nothing past the divergence is compared tightly"
emu = e["bf16_emulation"]
assert emu["pass"] and emu["steps_compared"] == 20 and emu["worst_step_late"] > 10, emu
assert emu["cpu"]["precision"] == emu["cuda"]["precision"] == "bf16", emu
per = emu["per_step"]
assert all(len(per[k]) == 20 and None not in per[k] for k in per), per  # every step, both runs
assert set(emu["gap_first_over"]) == {"0.0001", "0.001", "0.01"}, emu["gap_first_over"]
for kind in ("dense", "moe"):
    c = e["bf16_vs_fp32"][kind]
    assert c["pass"] and len(c["window_rel_diff"]) == 2, c
    assert c["fp32"]["precision"] == "fp32" and c["bf16"]["precision"] == "bf16", c
rep_ = e["bf16_repeat"]
assert rep_["determinism"]["checkpoints_identical"] and rep_["determinism"]["checkpoint_bytes"] > 0
assert rep_["resume"]["checkpoint_identical"] and rep_["stopped"]["exit"] == 3, rep_
gr = e["graphs"]
assert gr["pass"] and gr["checkpoints_identical"] and gr["first_difference"] is None, gr
assert gr["eager"]["tokens_per_second"] and gr["graphs"]["tokens_per_second"], gr
tp = e["throughput"]
assert tp["fp32"]["tokens_per_second"] > 0 and tp["bf16"]["mfu"] > 0, tp
assert rep["throughput"] == tp, "gpu_study_cost.py reads the throughput at the top level"
# The 2B study's runs: the plan's entries at the smoke shapes, bf16, every step logged.
import gpu_engine_study as s
st = e["study_throughput"]
for kind in ("dense", "moe"):
    k = st[kind]
    assert k["exit"] == 0 and k["precision"] == "bf16" and k["steps"] == 5, k
    assert k["tokens_per_second"] > 0 and k["mfu"] > 0 and k["time_split"]["step_seconds"] > 0, k
    assert k["layers"] == k["plan_shape"]["layers"] == 2 and "depth_note" not in k, k
    assert k["full_depth_tokens_per_second"] == k["tokens_per_second"], k
    assert k["targets"]["mfu"]["met"] is False and k["host_setup_seconds"] >= 0, k
    assert "cudnn_attention" not in k, k  # a CPU run prints no cuDNN line
    spec = json.load(open(os.path.join(out, "runs", f"study-{k['run']}-cpu", "spec.json")))
    assert "accounting" not in spec and spec["resources"] == {"gpus": 1}, spec
    assert spec["training"]["batch_tokens"] == 2 * 64 and spec["data"]["reuse"] == \
        "REUSE_MODE_UNIQUE", spec
    def objects(o):
        if isinstance(o, dict):
            yield o
            for v in o.values():
                yield from objects(v)
    for o in objects(spec):  # the parser refuses a key in both spellings
        for key in o:
            assert s.camel(key) == key or s.camel(key) not in o, (key, o)
assert st["moe"]["plan_shape"]["experts"] == 8 and st["moe"]["plan_shape"]["top_k"] == 3, st
# The depth fit that sizes the runs on the GPU, on the plan's real shapes: the host work at the
# full 2.1e9 parameters overruns a 35 s cap, so fewer layers; none when the host work is free.
import gpu_torch_peer as peer
assert "torch" not in sys.modules, "gpu_torch_peer imported torch at module level"
runs = peer.pick_runs(json.load(open(os.path.join(os.path.dirname(out), "bundle",
                                                  "plan_full_study_2b.json"))))
for kind, run in runs.items():
    cfg = peer.shapes(run, run["training"].get("micro_batch_sequences") or 8)
    n = s.param_count(cfg, cfg["layers"])
    assert abs(n / cfg["params"] - 1) < 0.01, (kind, n, cfg["params"])  # the planner's N
    least = 1 if kind == "dense" else 2
    fit = s.fit_layers(cfg, 35, 40)
    assert least <= fit < cfg["layers"], (kind, fit)
    assert s.estimated_seconds(cfg, fit, 40) <= s.FIT_SHARE * 35 < s.estimated_seconds(
        cfg, fit + 1, 40), (kind, fit)
    assert s.fit_layers(cfg, 1e6, 0.0) == cfg["layers"] and s.fit_layers(cfg, 1, 40) == least
    assert s.fit_layers(cfg, 35, s.HOST_NS_PER_PARAM) >= fit, "more cores, no fewer layers"
    print(f"study depth fit: {kind} {fit} of {cfg['layers']} layers in 35 s at 40 ns a parameter")
# The spelling: a key set in the object's own spelling, never beside its other one.
o = {"microBatchSequences": 8, "steps": 3}
s.put(o, micro_batch_sequences=2, log_every_steps=1)
assert o == {"microBatchSequences": 2, "steps": 3, "logEverySteps": 1}, o
# fp32 MoE's routing divergence (two CPU runs of 20 small steps may never diverge): compared
# tightly before the first step whose expert loads differ, by the final bound after it.
import gpu_engine_check as g
def line(step, scale, load):
    return {"step": step, "train_bpc": (3 - 0.1 * step) * scale, "grad_norm": 1.0,
            "expert_load": load}
cpu = {s: line(s, 1, [[5, 3]]) for s in range(1, 11)}
cuda = {s: line(s, 1 + 1e-5, [[5, 3]]) if s < 6 else line(s, 1 + 5e-3, [[4, 4]])
        for s in range(1, 11)}
rec = {"precision": "fp32", "final_val_bpc": 2.0}
j = g.judge({"cpu": dict(rec), "cuda": dict(rec)}, cpu, cuda, 10)
assert j["pass"] and j["routing_diverged_at_step"] == 6 and j["steps_compared"] == 5, j
cuda[3] = line(3, 1 + 2 * g.REL_TOL, [[5, 3]])
assert not g.judge({"cpu": dict(rec), "cuda": dict(rec)}, cpu, cuda, 10)["pass"]
cuda[3], cuda[10] = line(3, 1, [[5, 3]]), line(10, 1 + 2 * g.MOE_FINAL_TOL, [[4, 4]])
assert not g.judge({"cpu": dict(rec), "cuda": dict(rec)}, cpu, cuda, 10)["pass"]
# The comparisons can fail: one changed value is a difference, timings are not.
a = [{"step": 1, "train_bpc": 2.0, "tokens_per_second": 5.0}]
assert r.first_metric_difference(a, [dict(a[0], train_bpc=2.0 + 2**-40)]) is not None
assert r.first_metric_difference(a, [dict(a[0], tokens_per_second=6.0)]) is None
print("engine parts: PASS; fp32 MoE routing first differs at step",
      moe["routing_diverged_at_step"], "; bf16 vs emulation max rel diff",
      emu["max_rel_diff_early"], emu["max_rel_diff_late"])
PY
# The report fails the check when a part failed, or did not run.
python3 - "$out/engine_bf16_repeat.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["pass"] = False
r["determinism"]["pass"] = False
json.dump(r, open(sys.argv[1], "w"))
PY
rm "$out/engine_bf16_emulation.json"
echo 'engine_bf16_emulation=skipped: 4 s left of the budget' >>"$out/stages.txt"
set +e
python3 bench/gpu_engine_check.py report "$tmp/bundle" "$out" >"$tmp/report.txt"
status=$?
set -e
[ "$status" -eq 1 ] || fail "the report passed with a failed and a missing part (exit $status)"
grep -q '^overall: FAIL' "$out/gpu_check.txt" || fail "no overall FAIL"
grep -q '^bf16_emulation: NOT RUN (skipped: 4 s left of the budget)' "$out/gpu_check.txt" ||
  fail "the part that did not run is not named NOT RUN"
grep -q '^bf16 determinism .*: FAIL' "$out/gpu_check.txt" || fail "the failed part is not FAIL"
# gpu_study_cost.py: the engine's 2B-shape figures over a peer's, the targets met or not; and, with
# the part gone, that it was not measured.
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def run(tps, mode):
    return {"tokens_per_second": tps, "mfu": 0.3, "step_seconds": 1.0, "accumulation": 4,
            "micro_batch": 8, "sequence_length": 2048, "mode": mode}
peer = {"runs": {"dense_eager": run(1e9, "eager"), "dense_compile": run(1e-9, "compile"),
                 "moe_eager": run(1e9, "eager"), "moe_compile": run(1e9, "compile")},
        "models": {"dense": {"flops_per_token": 1.4e10}, "moe": {"flops_per_token": 3.2e9}},
        "static_bytes": {},
        "gemm": {"shapes": {}, "sdpa": {"tflops": 1e-9, "seconds_forward_backward": 1.0}}}
json.dump(peer, open(os.path.join(out, "torch_peer.json"), "w"))
PY
study_cost() {
  python3 bench/gpu_study_cost.py "$tmp/bundle/plan_full_study_2b.json" "$out/torch_peer.json" \
    "$out" >"$tmp/cost.txt" || fail "gpu_study_cost.py exit $?"
}
study_cost
for line in '^engine bf16 dense at the 2B shape (dense-1C-C1-[a-z0-9-]*): [0-9]* tok/s, MFU' \
  'x PyTorch compile (0 tok/s, micro-batch 8, .*: target >= 1.0x met; MFU >= 40% NOT met' \
  '^engine bf16 moe at the 2B shape .*x PyTorch eager .*: target >= 1.5x NOT met; MFU >= 25%' \
  "^2B study at the engine's bf16 speeds: [0-9]* H200-hours" \
  '^attention at the dense 2B shape .*: engine [0-9.]* TFLOP/s (profiled step, RoPE included); PyTorch SDPA 0.0 TFLOP/s (engine [0-9.]*x'; do
  grep -q "$line" "$tmp/cost.txt" || { cat "$tmp/cost.txt"; fail "gpu_study_cost.py: no $line"; }
done
python3 - "$out/gpu_check.json" <<'PY' || fail "gpu_study_cost.py's JSON"
import json, sys
c = json.load(open(sys.argv[1]))["study_cost"]["engine_bf16"]["comparison"]
assert c["dense"]["met"] is True and c["moe"]["met"] is False and c["dense"]["ratio"] > 1, c
PY
rm "$out/engine_study_throughput.json"
python3 bench/gpu_engine_check.py report "$tmp/bundle" "$out" >/dev/null || true
study_cost
grep -q '^engine at the 2B shapes: not measured (study_throughput: not run)' "$tmp/cost.txt" ||
  { cat "$tmp/cost.txt"; fail "gpu_study_cost.py does not say the 2B-shape part is absent"; }
echo "PASS: every engine part and the report, wired on the CPU"
