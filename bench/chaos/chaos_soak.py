#!/usr/bin/env python3
"""Chaos soak: a sweep of short real runs on 4 workers while a driver (bench/chaos/fault_driver.py),
each every 20-40 s per kind (seeded), kill -9s a random worker's process group (restarted 0-2 s
later), kill -9s and restarts the scheduler (every replica), and crash-restarts PostgreSQL
(pg_ctl stop -m immediate, down 2-5 s); with --replicas N (N >= 2) the scheduler is N replicas
on the one database and a fourth kind kill -9s one replica, sometimes the upkeep leader
(restarted 2.5-5 s later). A `parity watch` of the sweep, given every address, runs throughout.
Afterwards every run is trained again by parity-train directly from the same spec file,
undisturbed, and the soak checks, exiting 1 when any check fails:

  - every run SUCCEEDED, exactly once (one SUCCEEDED event per run);
  - each run's stored metric steps are exactly the steps the undisturbed run logs (contiguous, none
    missing, none extra) with bit-identical train and validation BPC at each, and its final
    validation BPC equals the undisturbed run's bit for bit;
  - no kill lost more than one checkpoint interval of a run (bench/chaos/checks.py kill_losses);
  - every fault was survived (the sweep progressed again within 90 s);
  - every attempt a run was charged was spent by a lease of a worker the driver killed;
  - after each leader kill a new upkeep term was held and the reaper passed again;
  - the watcher exited 0 at the sweep's end.

It prints the figures: runs, faults injected by kind and survived, retries, steps lost per kill
against the checkpoint interval, leader takeovers, wall times and load average.
See bench/chaos/README.md. Standard library only; reuses tests/faults/parity_stack.py.
"""
import argparse
import hashlib
import json
import os
import random
import re
import shutil
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "faults"))
sys.path.insert(0, HERE)
from parity_stack import (Postgres, Process, Stack, compare_with_reference, log,  # noqa: E402
                          read_reference, sh, stored_points, sweep_yaml, train_reference)
from fault_driver import KINDS, Driver  # noqa: E402
from replicas import ReplicaStack  # noqa: E402
import checks  # noqa: E402
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binaries(build):
    """The build's binaries; waits up to a minute for one that a rebuild is replacing."""
    paths = {"scheduler": "server/parity-scheduler", "worker": "worker/parity-worker",
             "engine": "kernels/parity-train", "cli": "cli/parity"}
    out = {}
    for name, relative in paths.items():
        path = os.path.join(os.path.abspath(build), relative)
        for _ in range(60):
            if os.access(path, os.X_OK):
                break
            time.sleep(1)
        else:
            raise SystemExit(f"chaos_soak: {path} missing (build it: ninja -C {build})")
        out[name] = path
    return out


def reference_key(stack, spec_file, root):
    """What an undisturbed run's output depends on: the spec (as canonical JSON: proto JSON maps
    such as the labels come in any order; the scratch directory, which names the corpus file,
    taken out), the corpus and the engine binary, hashed."""
    digest = hashlib.sha256()
    with open(spec_file) as f:
        spec = json.dumps(json.load(f), sort_keys=True, separators=(",", ":"))
    digest.update(spec.replace(root, "<scratch>").encode())
    for path in (os.path.join(root, "corpus", "kjv.txt"), stack.bin["engine"]):
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def run_references(stack, runs, parallel, root, cache=None):
    """Trains every run's spec undisturbed, `parallel` at a time; returns run_id -> directory.
    With `cache`, a reference trained before for the same key (reference_key) is taken from it
    instead, and each new one is stored there."""
    dirs = {r["run_id"]: os.path.join(root, "reference", r["run_id"]) for r in runs}
    keys = {}
    if cache:
        for r in runs:
            keys[r["run_id"]] = reference_key(stack, stack.run_spec_file(r["run_id"]), root)
            cached = os.path.join(cache, keys[r["run_id"]])
            if os.path.exists(os.path.join(cached, "metrics.jsonl")):
                dirs[r["run_id"]] = cached
        runs = [r for r in runs if not dirs[r["run_id"]].startswith(cache)]
        log(f"reference cache {cache}: {len(dirs) - len(runs)} reused, {len(runs)} to train")
    queue = list(runs)
    active = []
    failed = []
    while queue or active:
        while queue and len(active) < parallel:
            r = queue.pop(0)
            active.append((r, train_reference(stack.bin["engine"],
                                              stack.run_spec_file(r["run_id"]),
                                              dirs[r["run_id"]])))
        time.sleep(0.2)
        for item in list(active):
            if item[1].poll() is not None:
                active.remove(item)
                if item[1].returncode != 0:
                    failed.append(item[0]["name"])
    if failed:
        raise RuntimeError(f"reference parity-train failed for {failed}")
    for r in runs if cache else []:
        read_reference(dirs[r["run_id"]])  # only a finished reference is kept
        shutil.copytree(dirs[r["run_id"]], os.path.join(cache, keys[r["run_id"]]),
                        ignore=shutil.ignore_patterns("ckpt"), dirs_exist_ok=True)
    return dirs


def parse_args():
    parser = argparse.ArgumentParser(description="Parity chaos soak (see the module docstring)")
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--runs", type=int, default=64, help="runs in the sweep (multiple of 4)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--replicas", type=int, default=1,
                        help="scheduler replicas on the one PostgreSQL; 2 or more adds the "
                        "replica_kill fault")
    parser.add_argument("--leader-ttl", default="2s", help="the replicas' --leader-ttl")
    parser.add_argument("--kinds", nargs="+", choices=KINDS,
                        help="fault kinds (default: all; replica_kill only with --replicas >= 2)")
    parser.add_argument("--compute", default="3e10", help="compute budget of each run (FLOPs)")
    parser.add_argument("--checkpoint-every", type=int, default=200, help="steps")
    parser.add_argument("--fault-interval", type=float, nargs=2, default=(20.0, 40.0),
                        metavar=("MIN", "MAX"), help="seconds between faults of one kind")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sweep-timeout", type=float, default=420.0)
    parser.add_argument("--parallel-references", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--reference-cache", metavar="DIR",
                        help="reuse undisturbed references trained before for the same spec, "
                        "corpus and engine binary (and keep new ones there)")
    args = parser.parse_args()
    if args.runs % 4:
        raise SystemExit("--runs must be a multiple of 4 (4 activation rates x seeds)")
    if args.replicas < 1:
        raise SystemExit("--replicas must be at least 1")
    if args.kinds is None:
        args.kinds = [k for k in KINDS if k != "replica_kill" or args.replicas > 1]
    if "replica_kill" in args.kinds and args.replicas < 2:
        raise SystemExit("--kinds replica_kill needs --replicas 2 or more")
    if not re.fullmatch(r"\d+(\.\d+)?s", args.leader_ttl):
        raise SystemExit("--leader-ttl must be seconds, e.g. 2s")
    return args


def make_stack(args, root, binaries, pg):
    # Heartbeats every 200 ms: a checkpoint counts once a heartbeat has recorded it, so the
    # interval between two is what a kill can add to the checkpoint interval it loses.
    timings = {"lease_ttl": "3s", "heartbeat": "200ms", "reap": "500ms"}
    if args.replicas == 1:
        return Stack(root, binaries, pg, "127.0.0.1", free_port(), **timings)
    return ReplicaStack(root, binaries, pg, "127.0.0.1",
                        [free_port() for _ in range(args.replicas)], leader_ttl=args.leader_ttl,
                        **timings)


def wait_for_datasets(stack, workers, timeout=30):
    """Waits until every worker has registered the corpus it holds, so that the sweep is pinned
    to its digest (an unpinned spec hashes differently and misses the reference cache)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = stack.pg.query("SELECT count(*) FROM workers WHERE datasets <> '[]'::jsonb")
        if int(rows[0][0]) >= workers:
            return
        time.sleep(0.2)
    log(f"warning: not every worker registered its dataset within {timeout} s; the sweep may "
        "be unpinned (its references then miss the cache)")


def start_watcher(stack, sweep):
    return Process("watcher", [stack.bin["cli"], "watch", sweep, "--scheduler", stack.target,
                               "--token-file", stack.token_file], stack.log_path("watcher"),
                   cwd=stack.root)


def check_runs(pg, sweep, runs):
    """Every run SUCCEEDED, with exactly one SUCCEEDED event."""
    failures = []
    succeeded_events = dict(pg.query(
        f"SELECT run_id, count(*) FROM events WHERE sweep_id = '{sweep}' AND to_state = "
        "'SUCCEEDED' GROUP BY run_id"))
    for r in runs:
        if r["state"] != "SUCCEEDED":
            failures.append(f"{r['name']}: {r['state']} ({r['failure_class']}: "
                            f"{r['failure_message']}), expected SUCCEEDED")
        elif succeeded_events.get(r["run_id"]) != "1":
            failures.append(f"{r['name']}: {succeeded_events.get(r['run_id'])} SUCCEEDED "
                            "events, expected exactly 1")
    return failures


def check_curves(pg, runs, ref_dirs):
    """(failures, identical): curves and final BPC against the undisturbed runs."""
    failures, identical = [], 0
    for r in runs:
        if r["run_id"] not in ref_dirs:
            continue
        problems = compare_with_reference(pg, r, ref_dirs[r["run_id"]])
        failures += [f"{r['name']}: {p}" for p in problems]
        identical += not problems
    return failures, identical


def print_figures(args, stack, sweep, runs, ref_dirs, driver, found):
    pg = stack.pg
    losses, shadow_losses = found["losses"], found["shadow_losses"]
    retry_rows = pg.query(
        f"SELECT count(*) FILTER (WHERE from_state IS NOT NULL AND to_state = 'PENDING'), "
        f"count(*) FILTER (WHERE reason = 'lease expired'), "
        f"count(*) FILTER (WHERE reason = 'lease expired during an outage') FROM events "
        f"WHERE sweep_id = '{sweep}'")[0]
    attempts = [int(r["attempt"]) for r in runs]
    by_kind = {k: [f for f in driver.faults if f["kind"] == k] for k in args.kinds}
    survived = [f for f in driver.faults if f.get("recovered_s") is not None]
    recov = [f["recovered_s"] for f in survived]
    total_points = sum(len(stored_points(pg, r["run_id"])) for r in runs)
    steps = [read_reference(ref_dirs[r["run_id"]])[1]["steps"] for r in runs
             if r["run_id"] in ref_dirs]
    print("\n==== chaos soak figures", flush=True)
    print(f"scheduler: {args.replicas} replica(s); seed {args.seed}; faults of each kind every "
          f"{args.fault_interval[0]:g}-{args.fault_interval[1]:g} s")
    print(f"runs: {len(runs)} ({sum(r['state'] == 'SUCCEEDED' for r in runs)} SUCCEEDED, "
          f"{found['identical']} bit-identical to the undisturbed run: curve and final val BPC); "
          f"{min(steps, default=0)}-{max(steps, default=0)} steps each, {total_points} "
          "stored points")
    print(f"faults injected: {len(driver.faults)} = "
          + ", ".join(f"{len(v)} {k.replace('_', ' ')}s" for k, v in by_kind.items())
          + f"; survived: {len(survived)} (sweep progressed again within "
          f"{max(recov, default=0):.1f} s at most, {sum(recov) / max(1, len(recov)):.1f} s "
          "mean)")
    print(f"worker kills hitting a training run: {len(losses) + len(shadow_losses)}; steps "
          f"lost per kill: max {max(losses, default=0)}, mean "
          f"{sum(losses) / max(1, len(losses)):.0f} over the {len(losses)} outside an "
          f"outage's shadow (checkpoint interval {args.checkpoint_every} steps; lost = "
          f"furthest known step - resume step); {len(shadow_losses)} in an outage's shadow "
          f"(within {checks.OUTAGE_SHADOW_S:g} s of a scheduler or PostgreSQL restart): max "
          f"{max(shadow_losses, default=0)}, mean "
          f"{sum(shadow_losses) / max(1, len(shadow_losses)):.0f}")
    print(f"retries: {sum(a - 1 for a in attempts)} extra attempts over "
          f"{sum(a > 1 for a in attempts)} runs; requeue events {retry_rows[0]}, "
          f"lease-expired events {retry_rows[1]} (an attempt spent each), outage requeues "
          f"{retry_rows[2]} (leases lapsed during an outage or its grace: no attempt spent)")
    print(f"requeues at a cost: {found['charged']}, each of a lease held by a killed worker "
          f"({len(driver.killed_leases)} such leases); requeued free: {len(found['free'])} "
          f"({sum(found['free'])} of them a killed worker's lease)")
    if args.replicas > 1:
        checks.print_replica_figures(driver, found["led"], stack)
    print(f"watcher (`parity watch`, every address): found no scheduler answering "
          f"{checks.watcher_retries(stack)} times ('scheduler unavailable, retrying'; a broken "
          "stream reopened at once is not counted)")
    # A resume that found the recorded checkpoint gone (pruned by an engine that trained on
    # after its lease lapsed) starts over: shown here, beside the per-kill losses above.
    over = [line for line in checks.worker_log_lines(stack) if "is missing" in line]
    print(f"resumes whose recorded checkpoint was gone (worker log 'is missing'): {len(over)}")


def soak(args, root, binaries, pg, wall):
    """Runs the sweep under faults and checks it; returns the failures."""
    stack = make_stack(args, root, binaries, pg)
    driver = None
    try:
        stack.start_scheduler()
        for i in range(args.workers):
            stack.start_worker(i)
        wait_for_datasets(stack, args.workers)
        sweep = stack.submit(
            sweep_yaml("chaos-soak", ["0.15", "0.25", "0.4", "0.6"], args.compute,
                       list(range(args.runs // 4)), log_every=5, eval_every=100,
                       checkpoint_every=args.checkpoint_every), "chaos-soak")
        watcher = start_watcher(stack, sweep)
        log(f"scratch {root}; {args.runs} runs on {args.workers} workers, {args.replicas} "
            f"scheduler replica(s); faults {', '.join(args.kinds)}, each every "
            f"{args.fault_interval[0]:g}-{args.fault_interval[1]:g} s (seed {args.seed})")
        t_sweep = time.monotonic()
        driver = Driver(stack, sweep, args.workers, random.Random(args.seed),
                        args.fault_interval, args.kinds)
        driver.start()
        ended = stack.wait_sweep_ended(sweep, args.sweep_timeout)
        driver.stop()
        wall["sweep"] = time.monotonic() - t_sweep
        wall["load"] = os.getloadavg()
        failures = [f"the fault driver failed: {driver.error!r}"] if driver.error else []
        if not ended:
            failures.append(f"the sweep did not end within {args.sweep_timeout:g} s")
        failures += checks.watcher_end(watcher, stack)
        runs = stack.runs(sweep)
        log(f"sweep {stack.sweep_state(sweep)} after {wall['sweep']:.0f} s (load average "
            f"{wall['load'][0]:.1f}); training the {len(runs)} references undisturbed, "
            f"{args.parallel_references} at a time")
        stack.stop_all()  # the references get the CPUs to themselves
        failures += check_runs(pg, sweep, runs)
        t_ref = time.monotonic()
        ref_dirs = run_references(stack, [r for r in runs if r["state"] == "SUCCEEDED"],
                                  args.parallel_references, root, args.reference_cache)
        wall["references"] = time.monotonic() - t_ref
        found = {}
        failed, found["identical"] = check_curves(pg, runs, ref_dirs)
        failures += failed
        failed, found["losses"], found["shadow_losses"] = checks.kill_losses(
            stack, driver, args.checkpoint_every)
        failures += failed
        failed, found["charged"], found["free"] = checks.charged_requeues(pg, sweep, driver)
        failures += failed
        failed, found["led"] = checks.takeovers(driver, float(args.leader_ttl[:-1]))
        failures += failed
        failures += [f"{f['kind']} ({f['detail']}): the sweep made no progress within 90 s "
                     "after it" for f in driver.faults if f.get("recovered_s") is None]
        print_figures(args, stack, sweep, runs, ref_dirs, driver, found)
        return failures
    finally:
        if driver and driver.alive():
            driver.stop()
        stack.stop_all()


def main():
    args = parse_args()
    t_start = time.monotonic()
    binaries = find_binaries(args.build)
    root = tempfile.mkdtemp(prefix="parity-chaos-")
    os.chmod(root, 0o755)
    pg = Postgres(os.path.join(root, "pg"), "127.0.0.1", free_port())
    pg.init()
    pg.start()
    pg.createdb("parity")
    wall = {}
    try:
        failures = soak(args, root, binaries, pg, wall)
    except Exception as e:
        import traceback
        traceback.print_exc()
        failures = [f"{type(e).__name__}: {e}"]
    finally:
        pg.stop("immediate")
    if "sweep" in wall:
        load = wall["load"]
        print(f"wall: sweep under faults {wall['sweep']:.0f} s, undisturbed references "
              f"{wall.get('references', 0):.0f} s, total {time.monotonic() - t_start:.0f} s; "
              f"load average at the sweep's end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
              f"(1 / 5 / 15 min, {os.cpu_count()} CPUs)", flush=True)
    if not args.keep and not failures:
        sh(["rm", "-rf", root], check=False)
    if failures:
        print(f"\nFAIL ({len(failures)}), scratch kept in {root}:\n  " +
              "\n  ".join(failures[:50]), flush=True)
        return 1
    print("\nPASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
