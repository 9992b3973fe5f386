#!/usr/bin/env bash
# bench/dp/on_paper.sh against the planner it reads: it runs on the example study, prints a row
# per gang size for each tabled run and for the study, and each row's micro-batches are a rank's
# share cut as core/micro_batches.h cuts it (they sum to the batch over W, differ by at most one),
# and at W = 8 (the example as written) the largest is the micro-batch `parity plan` records.
#
#   bench/dp/on_paper_test.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
plan=$(mktemp /tmp/parity_on_paper_test.XXXXXX)
trap 'rm -f "$plan"' EXIT
out=$(bash "$root/bench/dp/on_paper.sh" "$1")
"$1/cli/parity" plan "$root/examples/full_study_2b.yaml" --format json >"$plan" 2>/dev/null
python3 - "$out" "$plan" <<'PY'
import json, re, sys
lines = sys.argv[1].splitlines()
with open(sys.argv[2], encoding="utf-8") as f:
    planned = {r["name"]: r["training"]["micro_batch_sequences"] for r in json.load(f)}
failures = []
runs = [l for l in lines if re.match(r"\| (dense|moe)-\S* \| 1 \||\|  \| \d+ \|", l)]
name = None
if len(runs) != 10:
    failures.append(f"expected 10 per-run rows (2 runs x W = 1, 8, 16, 32, 64), got {len(runs)}")
for row in runs:
    cells = [c.strip() for c in row.strip("|").split("|")]
    name = cells[0] or name
    world, seqs = int(cells[1]), int(cells[2].split()[0])
    sizes = [int(s) for n, s in re.findall(r"(\d+) × (\d+)", cells[3])
             for _ in range(int(n))]
    if sum(sizes) * world != seqs or max(sizes) - min(sizes) > 1:
        failures.append(f"W {world}: micro-batches '{cells[3]}' are not an even cut of "
                        f"{seqs} sequences over {world} ranks")
    if world == 8 and max(sizes) != planned[name]:
        failures.append(f"{name} at W 8: largest micro-batch {max(sizes)}, but parity plan "
                        f"records {planned[name]}")
study = [l for l in lines if re.match(r"\| (1|8|16|32|64) \|", l)]
if [int(l.split("|")[1]) for l in study] != [1, 8, 16, 32, 64]:
    failures.append(f"expected study rows for W = 1, 8, 16, 32, 64, got {len(study)} rows")
for f in failures:
    print("FAIL:", f)
print("\n".join(lines[:4]) if failures else "on_paper.sh: 10 run rows and 5 study rows, cuts even")
sys.exit(1 if failures else 0)
PY
