#!/usr/bin/env python3
"""Data-parallel scaling of the 2B study over 8-64 H200s, on paper (bench/RESULTS.md, "Data-parallel
scaling of the 2B study on 8-64 H200s (on paper)"). Reads the study planned once per gang size and
prints the tables; bench/dp/on_paper.sh makes the plans (one per W in 1, 8, 16, 32, 64).

    bench/dp/on_paper.sh [BUILD_DIR] [--cap-mib 64]
    bench/dp/on_paper.py [--cap-mib 64] plan1.json plan8.json ...   (W = resources.ranks, else 1)

Model (every figure an assumption the section states, with its source):
  batch         the planner's, per W: the Step Law's batch rounded to a multiple of W sequences,
                each rank's share cut into the fewest micro-batches under the memory-fitting cap,
                as even as can be (core/micro_batches.h)
  step compute  batch tokens x M / (W x MFU x 989e12)   MFU 0.40 dense, 0.25 MoE (the project's
                targets for the bf16 engine; no CUDA step time has been measured yet)
  gradient      4 bytes x every parameter (fp32 flat gradient, all experts), in collectives of at
                most --cap-mib MiB (the engine's 64 MiB) plus one for the step's statistics
  all-reduce    ring: 2(W-1)/W x bytes / busbw (nccl-tests' bus bandwidth) + NCCL's ring/Simple
                latency model per collective (8.4 us + 3.4 us per NVLink step + 14 us per network
                step; 2(W-1) steps, 2 x nodes of them on the network)
  busbw         W <= 8: 370 GB/s (NVLink 4 through NVSwitch); W > 8: 330 GB/s (8 NDR rails per
                node) or, conservatively, 42 GB/s (every rank's share through its own NIC)
  overlap       "now": the gradient summed after the backward; "overlapped": a communication
                stream summing each bucket as the last micro-batch's backward (2/3 of that
                micro-batch's compute; the last is the smallest) finishes its layers, at least one
                collective exposed
"""
import argparse
import json
import math
import sys

PEAK = 989e12
MFU = {"ARCHITECTURE_DENSE": 0.40, "ARCHITECTURE_MOE": 0.25}
BUSBW = {"nvlink": 370e9, "rails": 330e9, "nic": 42e9}
BASE_LAT, NVLINK_LAT, NET_LAT = 8.4e-6, 3.4e-6, 14.0e-6
GPUS_PER_NODE = 8
RUNS = ("dense-1C-C1-unique-s0", "moe-ra20-C1-unique-s0")


def gradient_bytes(run):
    acc, model = run["accounting"], run["model"]
    norms = (2 * model["num_layers"] + 1) * model["d_model"]
    return 4 * (int(acc["params"]) + int(acc["vocab_params"]) + norms)


def ring_latency(world):
    nodes = max(1, world // GPUS_PER_NODE)
    steps = 2 * (world - 1)
    net_steps = 2 * nodes if nodes > 1 else 0
    return BASE_LAT + (steps - net_steps) * NVLINK_LAT + net_steps * NET_LAT


def world_of(run):
    return int((run.get("resources") or {}).get("ranks") or 1)


def micro_batches(run):
    """The sizes of a rank's micro-batches (core/micro_batches.h: the fewest under the cap,
    larger first, differing by at most one)."""
    training = run["training"]
    share = int(training["batch_tokens"]) // training["sequence_length"] // world_of(run)
    cap = min(int(training.get("micro_batch_sequences") or share), share)
    count = -(-share // cap)
    return [share // count + (1 if i < share % count else 0) for i in range(count)]


def describe(sizes):
    groups = [(sizes.count(size), size) for size in sorted(set(sizes), reverse=True)]
    return " + ".join(f"{n} × {size}" for n, size in groups)


def step(run, network="rails", overlap=False, cap=64 * 2**20):
    training, acc = run["training"], run["accounting"]
    world = world_of(run)
    sizes = micro_batches(run)
    tokens = int(training["batch_tokens"])
    compute = tokens * acc["flops_per_token"] / (world * MFU[run["model"]["architecture"]] * PEAK)
    size = gradient_bytes(run)
    wire = latency = 0.0
    collectives = 0
    if world > 1:
        busbw = BUSBW["nvlink"] if world <= GPUS_PER_NODE else BUSBW[network]
        collectives = math.ceil(size / cap) + 1
        wire = 2 * (world - 1) / world * size / busbw
        latency = collectives * ring_latency(world)
    comm = wire + latency
    exposed = comm
    if overlap and world > 1:
        window = (2 / 3) * compute * sizes[-1] / sum(sizes)
        exposed = max(comm - window, comm / collectives)
    time = compute + exposed
    return {"seqs": tokens // training["sequence_length"], "sizes": sizes, "compute": compute,
            "wire": wire, "latency": latency, "comm": comm, "time": time,
            "tokens_per_s": tokens / time, "efficiency": compute / time}


def days(run, result):
    return int(run["accounting"]["tokens"]) / result["tokens_per_s"] / 86400


def gpu_hours(plan, **kw):
    return sum(int(r["accounting"]["tokens"]) / step(r, **kw)["tokens_per_s"] * world_of(r) / 3600
               for r in plan)


def run_table(plans, cap):
    print("| run | W | batch seqs | micro-batches a rank | compute s/step | all-reduce ms (bytes + "
          "latency) | efficiency now / overlapped | tokens/s | × 1 GPU | run days | 42 GB/s NICs: "
          "all-reduce ms, efficiency now / overlapped |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in RUNS:
        runs = {world: next(r for r in plan if r["name"] == name) for world, plan in plans.items()}
        one = step(runs[1])
        for world, run in runs.items():
            r = step(run, cap=cap)
            o = step(run, overlap=True, cap=cap)
            c = step(run, network="nic", cap=cap)
            co = step(run, network="nic", overlap=True, cap=cap)
            change = f" ({100 * (r['seqs'] / one['seqs'] - 1):+.1f} %)" if r["seqs"] != one["seqs"] \
                else ""
            if world == 1:
                comm, eff, slow = "—", "100 %", "—"
            else:
                comm = f"{1e3 * r['wire']:.1f} + {1e3 * r['latency']:.1f} = {1e3 * r['comm']:.1f}"
                eff = f"{100 * r['efficiency']:.1f} / {100 * o['efficiency']:.1f} %"
                slow = "same (one node)" if world <= GPUS_PER_NODE else \
                    f"{1e3 * c['comm']:.0f}: {100 * c['efficiency']:.1f} / " \
                    f"{100 * co['efficiency']:.1f} %"
            print(f"| {name if world == 1 else ''} | {world} | {r['seqs']}{change} | "
                  f"{describe(r['sizes'])} | {r['compute']:.3f} | {comm} | {eff} | "
                  f"{r['tokens_per_s']:,.0f} | {r['tokens_per_s'] / one['tokens_per_s']:.2f} | "
                  f"{days(run, r):.2f} | {slow} |")


def study_table(plans, cap):
    plan = plans[1]
    flops = sum(r["accounting"]["flops_per_token"] * int(r["accounting"]["tokens"]) for r in plan)
    base = gpu_hours(plan)
    print(f"\n{len(plan)} runs, Σ D·M = {flops:.3e} FLOPs = {flops / PEAK / 3600:,.0f} H200-hours "
          f"at 100 % MFU, {base:,.0f} at the MFU targets on one GPU a run.\n")
    print("| W a run | efficiency now, median (min): dense / MoE | study H200-hours now | with "
          "overlap | 42 GB/s NICs, now | longest run | makespan on 64 / 512 H200s | batch vs "
          "one GPU, median (largest) change | smallest micro-batch (median) |")
    print("|---|---|---|---|---|---|---|---|---|")
    singles = {r["name"]: step(r)["seqs"] for r in plan}
    for world, runs in plans.items():
        now = gpu_hours(runs, cap=cap)
        longest = max(days(r, step(r, cap=cap)) for r in runs)
        spans = " / ".join(f"{max(now / fleet / 24, longest):.0f} d" for fleet in (64, 512))
        smallest = sorted(min(micro_batches(r)) for r in runs)
        micro = f"{smallest[0]} ({smallest[len(smallest) // 2]})"
        if world == 1:
            print(f"| 1 | — | {base:,.0f} | — | — | {longest:.1f} d | {spans} | — | {micro} |")
            continue

        def eff(kind):
            e = sorted(step(r, cap=cap)["efficiency"] for r in runs
                       if (r["model"]["architecture"] == "ARCHITECTURE_DENSE") == (kind == "dense"))
            return f"{100 * e[len(e) // 2]:.1f} ({100 * e[0]:.1f})"
        over = gpu_hours(runs, overlap=True, cap=cap)
        nic = gpu_hours(runs, network="nic", cap=cap)
        changes = sorted(abs(step(r)["seqs"] / singles[r["name"]] - 1) for r in runs)
        print(f"| {world} | {eff('dense')} / {eff('MoE')} % | {now:,.0f} "
              f"({100 * (now / base - 1):+.1f} %) | {over:,.0f} ({100 * (over / base - 1):+.1f} %) | "
              f"{nic:,.0f} ({100 * (nic / base - 1):+.1f} %) | {longest:.1f} d | {spans} | "
              f"{100 * changes[len(changes) // 2]:.1f} ({100 * changes[-1]:.1f}) % | {micro} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", nargs="+", help="parity plan ... --format json outputs, one per W")
    parser.add_argument("--cap-mib", type=int, default=64, help="largest collective (MiB)")
    args = parser.parse_args()
    plans = {}
    for path in args.plans:
        with open(path, encoding="utf-8") as f:
            plan = json.load(f)
        worlds = {world_of(r) for r in plan}
        if len(worlds) != 1:
            sys.exit(f"on_paper.py: {path}: runs of several gang sizes {sorted(worlds)}; give one "
                     "plan per W")
        plans[worlds.pop()] = plan
    if 1 not in plans:
        sys.exit("on_paper.py: no plan with one GPU a run (W = 1), the baseline; see on_paper.sh")
    plans = dict(sorted(plans.items()))
    cap = args.cap_mib * 2**20
    latency = ", ".join(f"W {w}: {1e6 * ring_latency(w):.0f} µs" for w in plans if w > 1)
    print(f"NCCL ring/Simple latency per collective: {latency}\n")
    run_table(plans, cap)
    study_table(plans, cap)
    return 0


if __name__ == "__main__":
    sys.exit(main())
