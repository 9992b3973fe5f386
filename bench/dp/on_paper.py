#!/usr/bin/env python3
"""Data-parallel scaling of the 2B study over 8-64 H200s, on paper (bench/RESULTS.md, "Data-parallel
scaling of the 2B study on 8-64 H200s (on paper)"). Reads the study's plan and prints the tables.

    build/cli/parity plan examples/full_study_2b.yaml --format json > plan.json
    bench/dp/on_paper.py plan.json [--cap-mib 64]

Model (every figure an assumption the section states, with its source):
  step compute  batch tokens x M / (W x MFU x 989e12)   MFU 0.40 dense, 0.25 MoE (the project's
                targets for the bf16 engine; no CUDA step time has been measured yet)
  gradient      4 bytes x every parameter (fp32 flat gradient, all experts), in collectives of at
                most --cap-mib MiB (the engine's 64 MiB) plus one for the step's statistics
  all-reduce    ring: 2(W-1)/W x bytes / busbw (nccl-tests' bus bandwidth) + NCCL's ring/Simple
                latency model per collective (8.4 us + 3.4 us per NVLink step + 14 us per network
                step; 2(W-1) steps, 2 x nodes of them on the network)
  busbw         W <= 8: 370 GB/s (NVLink 4 through NVSwitch); W > 8: 330 GB/s (8 NDR rails per
                node) or, conservatively, 42 GB/s (every rank's share through its own NIC)
  overlap       none now (the CUDA path sums after the backward); with a communication stream,
                hidden behind the last micro-batch's backward (2/3 of its compute), at least one
                collective exposed
  batch         rounded to the nearest multiple of W sequences (the engine needs W to divide the
                step's micro-batches), micro-batch the largest <= planned that divides a rank's share
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
WORLD_SIZES = (8, 16, 32, 64)
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


def split(run, world):
    """(planned sequences, sequences used, micro-batch) of a step on `world` ranks."""
    training = run["training"]
    micro = training.get("micro_batch_sequences", 1)
    seqs = int(training["batch_tokens"]) // training["sequence_length"]
    if world == 1:
        return seqs, seqs, micro
    used = max(world, round(seqs / world) * world)
    share = used // world
    return seqs, used, max(m for m in range(1, micro + 1) if share % m == 0)


def step(run, world, network="rails", overlap=False, cap=64 * 2**20):
    training, acc = run["training"], run["accounting"]
    seqs, used, micro = split(run, world)
    tokens = used * training["sequence_length"]
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
    micro_per_rank = used / world / micro
    if overlap and world > 1:
        window = (2 / 3) * compute / micro_per_rank
        exposed = max(comm - window, comm / collectives)
    time = compute + exposed
    return {"seqs": seqs, "used": used, "micro": micro, "per_rank": micro_per_rank,
            "compute": compute, "wire": wire, "latency": latency, "comm": comm, "time": time,
            "tokens_per_s": tokens / time, "efficiency": compute / time}


def days(run, result):
    return int(run["accounting"]["tokens"]) / result["tokens_per_s"] / 86400


def gpu_hours(plan, world, **kw):
    return sum(int(r["accounting"]["tokens"]) / step(r, world, **kw)["tokens_per_s"] * world / 3600
               for r in plan)


def run_table(plan, cap):
    print("| run | W | batch seqs | micro-batches a rank | compute s/step | all-reduce ms (bytes + "
          "latency) | efficiency now / overlapped | tokens/s | × 1 GPU | run days | 42 GB/s NICs: "
          "all-reduce ms, efficiency now / overlapped |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in RUNS:
        run = next(r for r in plan if r["name"] == name)
        one = step(run, 1)
        print(f"| {name} | 1 | {one['seqs']} | {one['per_rank']:.0f} × {one['micro']} | "
              f"{one['compute']:.2f} | — | 100 % | {one['tokens_per_s']:,.0f} | 1.00 | "
              f"{days(run, one):.1f} | — |")
        for world in WORLD_SIZES:
            r = step(run, world, cap=cap)
            o = step(run, world, overlap=True, cap=cap)
            c = step(run, world, network="nic", cap=cap)
            co = step(run, world, network="nic", overlap=True, cap=cap)
            change = f" ({100 * (r['used'] / r['seqs'] - 1):+.1f} %)" if r["used"] != r["seqs"] else ""
            slow = "same" if world <= GPUS_PER_NODE else \
                f"{1e3 * c['comm']:.0f}: {100 * c['efficiency']:.1f} / {100 * co['efficiency']:.1f} %"
            print(f"| | {world} | {r['used']}{change} | {r['per_rank']:.0f} × {r['micro']} | "
                  f"{r['compute']:.3f} | {1e3 * r['wire']:.1f} + {1e3 * r['latency']:.1f} = "
                  f"{1e3 * r['comm']:.1f} | {100 * r['efficiency']:.1f} / "
                  f"{100 * o['efficiency']:.1f} % | {r['tokens_per_s']:,.0f} | "
                  f"{r['tokens_per_s'] / one['tokens_per_s']:.2f} | {days(run, r):.2f} | {slow} |")


def study_table(plan, cap):
    flops = sum(r["accounting"]["flops_per_token"] * int(r["accounting"]["tokens"]) for r in plan)
    base = gpu_hours(plan, 1)
    kinds = {"dense": [r for r in plan if r["model"]["architecture"] == "ARCHITECTURE_DENSE"],
             "MoE": [r for r in plan if r["model"]["architecture"] != "ARCHITECTURE_DENSE"]}
    print(f"\n{len(plan)} runs ({len(kinds['dense'])} dense, {len(kinds['MoE'])} MoE), "
          f"Σ D·M = {flops:.3e} FLOPs = {flops / PEAK / 3600:,.0f} H200-hours at 100 % MFU, "
          f"{base:,.0f} at the MFU targets on one GPU a run.\n")
    print("| W a run | efficiency now, median (min): dense / MoE | study H200-hours now | with "
          "overlap | 42 GB/s NICs, now | longest run | makespan on 64 / 512 H200s | runs whose "
          "batch splits as planned |")
    print("|---|---|---|---|---|---|---|---|")
    for world in (1,) + WORLD_SIZES:
        now = gpu_hours(plan, world, cap=cap) if world > 1 else base
        longest = max(days(r, step(r, world, cap=cap)) for r in plan)
        spans = " / ".join(f"{max(now / fleet / 24, longest):.0f} d" for fleet in (64, 512))
        if world == 1:
            print(f"| 1 | — | {base:,.0f} | — | — | {longest:.1f} d | {spans} | all |")
            continue

        def eff(group):
            e = sorted(step(r, world, cap=cap)["efficiency"] for r in group)
            return f"{100 * e[len(e) // 2]:.1f} ({100 * e[0]:.1f})"
        over = gpu_hours(plan, world, overlap=True, cap=cap)
        nic = gpu_hours(plan, world, network="nic", cap=cap)
        even = sum(1 for r in plan if split(r, 1)[0] % (world * split(r, 1)[2]) == 0)
        print(f"| {world} | {eff(kinds['dense'])} / {eff(kinds['MoE'])} % | {now:,.0f} "
              f"({100 * (now / base - 1):+.1f} %) | {over:,.0f} ({100 * (over / base - 1):+.1f} %) | "
              f"{nic:,.0f} ({100 * (nic / base - 1):+.1f} %) | {longest:.1f} d | {spans} | "
              f"{even} of {len(plan)} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", help="parity plan ... --format json output")
    parser.add_argument("--cap-mib", type=int, default=64, help="largest collective (MiB)")
    args = parser.parse_args()
    with open(args.plan, encoding="utf-8") as f:
        plan = json.load(f)
    cap = args.cap_mib * 2**20
    latency = ", ".join(f"W {w}: {1e6 * ring_latency(w):.0f} µs" for w in WORLD_SIZES)
    print(f"NCCL ring/Simple latency per collective: {latency}\n")
    run_table(plan, cap)
    study_table(plan, cap)
    return 0


if __name__ == "__main__":
    sys.exit(main())
