#!/usr/bin/env python3
"""Chaos soak: a sweep of short real runs on 4 workers while a driver, each every 20-40 s (per
kind, seeded), kill -9s a random worker's process group (restarted 1-3 s later), kill -9s and
restarts the scheduler, and crash-restarts PostgreSQL (pg_ctl stop -m immediate, down 2-5 s).
Afterwards every run is trained again by parity-train directly from the same spec file,
undisturbed, and the soak checks, exiting 1 when any check fails:

  - every run SUCCEEDED, exactly once (one SUCCEEDED event per run);
  - each run's stored metric steps are exactly the steps the undisturbed run logs (contiguous, none
    missing, none extra) with bit-identical train and validation BPC at each, and its final
    validation BPC equals the undisturbed run's bit for bit;
  - no kill lost more than one checkpoint interval of a run: for each run the killed worker held,
    lost = (the furthest the killed attempt is known to have got: its stored points, its last
    heartbeat's step, its newest checkpoint file) - (the step the next attempt resumed from, read
    from the --resume-from of the engine command line in the worker's log) <= the spec's
    checkpoint_every_steps.

It prints the figures: runs, faults injected by kind and survived (the sweep made progress again
after each), retries, steps lost per kill against the checkpoint interval, wall times.
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
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "faults"))
from parity_stack import (Postgres, Stack, compare_with_reference, log, read_reference,  # noqa
                          sh, stored_points, sweep_yaml, train_reference)

KINDS = ("worker_kill", "scheduler_restart", "postgres_restart")
# How long after a scheduler or PostgreSQL restart a worker kill is in that outage's shadow: the
# scheduler's outage grace (two lease TTLs of 3 s), in which workers reconnect and record the
# checkpoints they wrote while it was away.
OUTAGE_SHADOW_S = 6.0


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


class Driver:
    """Injects the faults from its own thread until stop(); each fault is recorded."""

    def __init__(self, stack, sweep, workers, rng, interval, checkpoint_every):
        self.stack, self.sweep, self.workers, self.rng = stack, sweep, workers, rng
        self.interval = interval
        self.checkpoint_every = checkpoint_every
        self.faults = []  # dicts: kind, at, detail, recovered_s
        self.kills = []  # dicts: run_id, epoch, progress (furthest known step), worker
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.worker_ids = {}

    def start(self):
        for i in range(self.workers):
            self.worker_ids[i] = self.stack.worker_id(i)
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()

    def _loop(self):
        try:
            now = time.monotonic()
            due = {k: now + self.rng.uniform(*self.interval) for k in KINDS}
            while not self._stop.is_set():
                kind = min(due, key=due.get)
                if self._stop.wait(max(0.0, due[kind] - time.monotonic())):
                    break
                if self.stack.sweep_state(self.sweep) != "ACTIVE":
                    break
                started = time.monotonic()
                getattr(self, kind)()
                self.faults[-1]["recovered_s"] = self._recovery(started)
                due[kind] = time.monotonic() + self.rng.uniform(*self.interval)
        except Exception as e:  # reported by the main thread; the soak then fails
            self.error = e

    def _progress(self):
        row = self.stack.pg.query(
            "SELECT coalesce(sum(latest_step), 0), count(*) FILTER (WHERE state = 'SUCCEEDED') "
            f"FROM runs WHERE sweep_id = '{self.sweep}'")[0]
        return int(row[0]), int(row[1])

    def _recovery(self, started, timeout=90):
        """Seconds from the fault's start until the sweep moved on (a step or a completion), or
        None if it did not within `timeout` (the fault was not survived)."""
        first = self._progress()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self._progress()
            if now[0] > first[0] or now[1] > first[1]:
                return time.monotonic() - started
            if self.stack.sweep_state(self.sweep) != "ACTIVE":
                return time.monotonic() - started
            time.sleep(0.25)
        return None

    def worker_kill(self):
        index = self.rng.randrange(self.workers)
        wid = self.worker_ids[index]
        held = self.stack.pg.query(
            f"SELECT run_id, lease_epoch FROM runs WHERE lease_owner = '{wid}' AND state IN "
            "('LEASED', 'RUNNING')")
        self.stack.kill_worker(index)
        at = time.monotonic()
        time.sleep(1.0)  # let what the worker had already sent land; it can send nothing more
        for run_id, epoch in held:
            self.kills.append({"run_id": run_id, "epoch": int(epoch), "worker": index,
                               "progress": self._furthest(run_id, int(epoch)), "at": at})
        self.faults.append({"kind": "worker_kill", "at": at,
                            "detail": f"worker-{index} holding {len(held)} run(s)"})
        time.sleep(self.rng.uniform(0.0, 2.0))
        self.stack.start_worker(index)
        log(f"fault: kill -9 worker-{index} ({len(held)} run(s) held); restarted")

    def _furthest(self, run_id, epoch):
        """The furthest step the killed attempt is known to have reached."""
        row = self.stack.pg.query(
            f"SELECT r.latest_step, coalesce((SELECT max(step) FROM metrics WHERE run_id = "
            f"'{run_id}' AND lease_epoch = {epoch}), 0) FROM runs r WHERE r.run_id = '{run_id}'")
        best = max(int(row[0][0]), int(row[0][1])) if row else 0
        directory = os.path.join(self.stack.root, "checkpoints", run_id, f"epoch-{epoch}")
        if os.path.isdir(directory):
            for name in os.listdir(directory):
                m = re.fullmatch(r"step-(\d+)\.ckpt", name)
                if m:
                    best = max(best, int(m.group(1)))
        # latest_step is the run's, not the attempt's: it may be an earlier attempt's higher step
        # only if this attempt resumed below it, which the resume step accounts for.
        return best

    def scheduler_restart(self):
        at = time.monotonic()
        self.stack.kill_scheduler()
        down = self.rng.uniform(0.5, 2.0)
        time.sleep(down)
        self.stack.start_scheduler()
        self.faults.append({"kind": "scheduler_restart", "at": at, "ended": time.monotonic(),
                            "detail": f"kill -9, down {down:.1f} s"})
        log(f"fault: kill -9 scheduler, restarted after {down:.1f} s")

    def postgres_restart(self):
        at = time.monotonic()
        self.stack.pg.stop("immediate")
        down = self.rng.uniform(2.0, 5.0)
        time.sleep(down)
        self.stack.pg.start()
        self.faults.append({"kind": "postgres_restart", "at": at, "ended": time.monotonic(),
                            "detail": f"stop -m immediate, down {down:.1f} s"})
        log(f"fault: PostgreSQL crashed (stop -m immediate), restarted after {down:.1f} s")


def resume_steps(stack):
    """(run_id, lease epoch) -> the step the first engine of that lease resumed from (0 = from
    the start), read from the workers' logs ("starting ... --out .../RUN/epoch-E ...")."""
    found = {}
    start = re.compile(r"run ([0-9a-f-]{36}): starting .* --out \S+/epoch-(\d+) ")
    resume = re.compile(r" --resume-from \S*step-(\d+)\.ckpt")
    for line in worker_log_lines(stack):
        m = start.search(line)
        if m:
            r = resume.search(line)
            found.setdefault((m.group(1), int(m.group(2))), int(r.group(1)) if r else 0)
    return found


def worker_log_lines(stack):
    logs = os.path.join(stack.root, "logs")
    for name in sorted(os.listdir(logs)):
        if name.startswith("worker-"):
            with open(os.path.join(logs, name), errors="replace") as f:
                yield from f


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


def main():
    parser = argparse.ArgumentParser(description="Parity chaos soak (see the module docstring)")
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--runs", type=int, default=64, help="runs in the sweep (multiple of 4)")
    parser.add_argument("--workers", type=int, default=4)
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

    t_start = time.monotonic()
    binaries = find_binaries(args.build)
    rng = random.Random(args.seed)
    root = tempfile.mkdtemp(prefix="parity-chaos-")
    os.chmod(root, 0o755)
    pg = Postgres(os.path.join(root, "pg"), "127.0.0.1", free_port())
    pg.init()
    pg.start()
    pg.createdb("parity")
    # Heartbeats every 200 ms: a checkpoint counts once a heartbeat has recorded it, so the
    # interval between two is what a kill can add to the checkpoint interval it loses.
    stack = Stack(root, binaries, pg, "127.0.0.1", free_port(), lease_ttl="3s",
                  heartbeat="200ms", reap="500ms")
    failures = []
    driver = None
    try:
        stack.start_scheduler()
        for i in range(args.workers):
            stack.start_worker(i)
        seeds = list(range(args.runs // 4))
        sweep = stack.submit(
            sweep_yaml("chaos-soak", ["0.15", "0.25", "0.4", "0.6"], args.compute, seeds,
                       log_every=5, eval_every=100, checkpoint_every=args.checkpoint_every),
            "chaos-soak")
        log(f"scratch {root}; {args.runs} runs on {args.workers} workers; faults of each kind "
            f"every {args.fault_interval[0]:g}-{args.fault_interval[1]:g} s (seed {args.seed})")
        t_sweep = time.monotonic()
        driver = Driver(stack, sweep, args.workers, rng, args.fault_interval,
                        args.checkpoint_every)
        driver.start()
        ended = stack.wait_sweep_ended(sweep, args.sweep_timeout)
        driver.stop()
        sweep_s = time.monotonic() - t_sweep
        if driver.error:
            failures.append(f"the fault driver failed: {driver.error!r}")
        if not ended:
            failures.append(f"the sweep did not end within {args.sweep_timeout:g} s")
        runs = stack.runs(sweep)
        log(f"sweep {stack.sweep_state(sweep)} after {sweep_s:.0f} s; training the "
            f"{len(runs)} references undisturbed, {args.parallel_references} at a time")
        stack.stop_all()  # the references get the CPUs to themselves

        # Every run SUCCEEDED exactly once.
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

        # Curves and final BPC against the undisturbed runs.
        t_ref = time.monotonic()
        ref_dirs = run_references(stack, [r for r in runs if r["state"] == "SUCCEEDED"],
                                  args.parallel_references, root, args.reference_cache)
        reference_s = time.monotonic() - t_ref
        identical = 0
        for r in runs:
            if r["run_id"] not in ref_dirs:
                continue
            problems = compare_with_reference(pg, r, ref_dirs[r["run_id"]])
            failures += [f"{r['name']}: {p}" for p in problems]
            identical += not problems

        # Steps lost per kill. A kill in an outage's shadow (while the scheduler or PostgreSQL
        # was away, or within the grace after, OUTAGE_SHADOW_S) is not held to the interval: no
        # checkpoint can be recorded while they are away (a checkpoint counts once its points
        # are stored), so such a kill loses what the engine trained meanwhile too; its run's
        # curve is still checked above, bit for bit, for holes and extras.
        resumed = resume_steps(stack)
        losses, shadow_losses = [], []
        outages = [f for f in driver.faults if "ended" in f]
        for k in driver.kills:
            later = sorted(e for (run, e) in resumed if run == k["run_id"] and e > k["epoch"])
            if not later:
                continue  # the attempt had finished before the kill took it
            resume_step = resumed[(k["run_id"], later[0])]
            lost = k["progress"] - resume_step
            if any(f["at"] <= k["at"] <= f["ended"] + OUTAGE_SHADOW_S for f in outages):
                shadow_losses.append(lost)
                continue
            losses.append(lost)
            if lost > args.checkpoint_every:
                failures.append(f"run {k['run_id']}: the kill of worker-{k['worker']} lost "
                                f"{lost} steps (known progress {k['progress']}, resumed from "
                                f"{resume_step}), expected at most the checkpoint interval "
                                f"{args.checkpoint_every}")

        # Figures.
        retry_rows = pg.query(
            f"SELECT count(*) FILTER (WHERE from_state IS NOT NULL AND to_state = 'PENDING'), "
            f"count(*) FILTER (WHERE reason = 'lease expired'), "
            f"count(*) FILTER (WHERE reason = 'lease expired during an outage') FROM events "
            f"WHERE sweep_id = '{sweep}'")[0]
        attempts = [int(r["attempt"]) for r in runs]
        by_kind = {k: [f for f in driver.faults if f["kind"] == k] for k in KINDS}
        survived = [f for f in driver.faults if f.get("recovered_s") is not None]
        for f in driver.faults:
            if f.get("recovered_s") is None:
                failures.append(f"{f['kind']} ({f['detail']}): the sweep made no progress within "
                                "90 s after it")
        recov = [f["recovered_s"] for f in survived]
        total_points = sum(len(stored_points(pg, r["run_id"])) for r in runs)
        steps = [read_reference(ref_dirs[r["run_id"]])[1]["steps"] for r in runs
                 if r["run_id"] in ref_dirs]
        print("\n==== chaos soak figures", flush=True)
        print(f"runs: {len(runs)} ({sum(r['state'] == 'SUCCEEDED' for r in runs)} SUCCEEDED, "
              f"{identical} bit-identical to the undisturbed run: curve and final val BPC); "
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
              f"(within {OUTAGE_SHADOW_S:g} s of a scheduler or PostgreSQL restart): max "
              f"{max(shadow_losses, default=0)}, mean "
              f"{sum(shadow_losses) / max(1, len(shadow_losses)):.0f}")
        print(f"retries: {sum(a - 1 for a in attempts)} extra attempts over "
              f"{sum(a > 1 for a in attempts)} runs; requeue events {retry_rows[0]}, "
              f"lease-expired events {retry_rows[1]} (an attempt spent each), outage requeues "
              f"{retry_rows[2]} (leases lapsed during an outage or its grace: no attempt spent)")
        # A resume that found the recorded checkpoint gone (pruned by an engine that trained on
        # after its lease lapsed) starts over: shown here, beside the per-kill losses above.
        over = [l for l in worker_log_lines(stack) if "is missing" in l]
        print(f"resumes whose recorded checkpoint was gone (worker log 'is missing'): {len(over)}")
        print(f"wall: sweep under faults {sweep_s:.0f} s, undisturbed references "
              f"{reference_s:.0f} s, total {time.monotonic() - t_start:.0f} s", flush=True)
    except Exception as e:
        import traceback
        traceback.print_exc()
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        if driver and driver._thread.is_alive():
            driver.stop()
        stack.stop_all()
        pg.stop("immediate")
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
