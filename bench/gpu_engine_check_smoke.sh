#!/usr/bin/env bash
# The wiring of bench/gpu_engine_check.py on a machine without a GPU: every part and the report,
# as gpu_check.sh's stage 4 runs them, with a CPU run (one thread against all) where the CUDA run
# would be (PARITY_ENGINE_CHECK_PEER=cpu) and fewer steps and a quarter of the batch
# (PARITY_ENGINE_CHECK_SMOKE=1): fp32 dense step by step within REL_TOL; fp32 MoE reporting where
# its routing first differs (or that it never did), compared tightly only before it, final losses
# bounded; bf16 against the bf16 emulation (both sides the emulation here); bf16 against fp32 in
# windows; two bf16 runs bit-identical and a stopped-and-resumed one byte-identical; both
# throughput runs; then the report's JSON and summary, and that a failed or missing part fails it.
#   bench/gpu_engine_check_smoke.sh PARITY_TRAIN
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
. bench/gpu_smoke_bundle.sh
cpu_smoke_bundle "$1" "$tmp" 20000  # 1.4 MB: micro-moe's unique tokens fit its training split
out="$tmp/out"
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
  '^bf16 vs CPU emulation micro-dense: PASS' '^bf16 vs fp32 dense 40 steps: PASS' \
  '^bf16 vs fp32 moe 40 steps: PASS' '^bf16 determinism micro-moe 12 steps, two runs: PASS' \
  '^bf16 resume (stopped at 6, resumed): PASS' '^  engine bf16: [0-9]* tok/s' \
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
for kind in ("dense", "moe"):
    c = e["bf16_vs_fp32"][kind]
    assert c["pass"] and len(c["window_rel_diff"]) == 2, c
    assert c["fp32"]["precision"] == "fp32" and c["bf16"]["precision"] == "bf16", c
rep_ = e["bf16_repeat"]
assert rep_["determinism"]["checkpoints_identical"] and rep_["determinism"]["checkpoint_bytes"] > 0
assert rep_["resume"]["checkpoint_identical"] and rep_["stopped"]["exit"] == 3, rep_
tp = e["throughput"]
assert tp["fp32"]["tokens_per_second"] > 0 and tp["bf16"]["mfu"] > 0, tp
assert rep["throughput"] == tp, "gpu_study_cost.py reads the throughput at the top level"
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
echo "PASS: every engine part and the report, wired on the CPU"
