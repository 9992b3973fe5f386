"""The chaos soak's fault driver (bench/chaos/chaos_soak.py): from its own thread it injects each
kind of fault at seeded random intervals, one fault at a time, and records each with how long the
sweep took to progress again after it.

Kinds: worker_kill (kill -9 of a worker's process group, restarted 0-2 s later),
scheduler_restart (kill -9 of the whole scheduler, every replica, restarted 0.5-2 s later),
postgres_restart (pg_ctl stop -m immediate, down 2-5 s), and with several replicas replica_kill
(kill -9 of one replica chosen at random, restarted 2.5-5 s later; when it led the upkeep, the
driver watches the other take the leadership and the reaper pass again).
"""
import os
import re
import threading
import time

from parity_stack import log
from replicas import watch_takeover

KINDS = ("worker_kill", "scheduler_restart", "postgres_restart", "replica_kill")


class Driver:
    """Injects the faults of `kinds` from its own thread until stop(); each fault is recorded."""

    def __init__(self, stack, sweep, workers, rng, interval, kinds, replica_down=(2.5, 5.0)):
        self.stack, self.sweep, self.workers, self.rng = stack, sweep, workers, rng
        self.interval = interval
        self.kinds = kinds
        self.replica_down = replica_down
        self.faults = []  # dicts: kind, at, detail, recovered_s; outages also `ended`
        self.kills = []  # dicts: run_id, epoch, progress (furthest known step), worker, at
        self.killed_leases = set()  # (run_id, lease epoch) held by a worker when it was killed
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

    def alive(self):
        return self._thread.is_alive()

    def _loop(self):
        try:
            now = time.monotonic()
            due = {k: now + self.rng.uniform(*self.interval) for k in self.kinds}
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

    def _held(self, wid):
        return {(run_id, int(epoch)) for run_id, epoch in self.stack.pg.query(
            f"SELECT run_id, lease_epoch FROM runs WHERE lease_owner = '{wid}' AND state IN "
            "('LEASED', 'RUNNING')")}

    def worker_kill(self):
        index = self.rng.randrange(self.workers)
        wid = self.worker_ids[index]
        held = self._held(wid)
        self.stack.kill_worker(index)
        at = time.monotonic()
        time.sleep(1.0)  # let what the worker had already sent land; it can send nothing more
        # Leases granted between the query and the kill are the dead worker's too.
        held |= self._held(wid)
        self.killed_leases |= held
        for run_id, epoch in sorted(held):
            self.kills.append({"run_id": run_id, "epoch": epoch, "worker": index,
                               "progress": self._furthest(run_id, epoch), "at": at})
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
        what = "scheduler" if len(getattr(self.stack, "ports", [0])) == 1 else "every replica"
        self.faults.append({"kind": "scheduler_restart", "at": at, "ended": time.monotonic(),
                            "detail": f"kill -9 of {what}, down {down:.1f} s"})
        log(f"fault: kill -9 {what}, restarted after {down:.1f} s")

    def postgres_restart(self):
        at = time.monotonic()
        self.stack.pg.stop("immediate")
        down = self.rng.uniform(2.0, 5.0)
        time.sleep(down)
        self.stack.pg.start()
        self.faults.append({"kind": "postgres_restart", "at": at, "ended": time.monotonic(),
                            "detail": f"stop -m immediate, down {down:.1f} s"})
        log(f"fault: PostgreSQL crashed (stop -m immediate), restarted after {down:.1f} s")

    def replica_kill(self):
        """kill -9 of one replica, restarted after a short down time. Not an outage (the others
        serve every call), so no `ended`: kills near it are held to the loss bound. When it led,
        the takeover is watched: who took the term, when, and the reaper's first pass after."""
        index = self.rng.randrange(len(self.stack.ports))
        leader = self.stack.leader()
        leader_index = self.stack.ids.get(leader[0]) if leader else None
        killed_id = self.stack.current_id[index]
        at = time.monotonic()
        self.stack.kill_replica(index)
        killed_db = self.stack.db_now()
        down = self.rng.uniform(*self.replica_down)
        fault = {"kind": "replica_kill", "at": at, "replica": index, "led": leader_index == index,
                 "leader_before": leader[0] if leader else None}
        if fault["led"]:
            # Watched while the replica is down (the survivor should take over then) and after.
            takeover = {}
            watcher = threading.Thread(target=lambda: takeover.update(
                watch_takeover(self.stack, killed_id, killed_db)))
            watcher.start()
            time.sleep(down)
            fault["restarted_id"] = self.stack.start_replica(index)
            watcher.join()
            fault.update(takeover)
            fault["by_survivor"] = (takeover["taken_by"] is not None and
                                    self.stack.ids.get(takeover["taken_by"]) != index)
            fault["detail"] = (f"replica-{index} ({killed_id}, the leader) down {down:.1f} s; "
                               f"term taken by {takeover['taken_by']} after "
                               f"{_fmt(takeover['taken_s'])} s, reaper passed again after "
                               f"{_fmt(takeover['reaped_s'])} s")
        else:
            time.sleep(down)
            fault["restarted_id"] = self.stack.start_replica(index)
            fault["detail"] = (f"replica-{index} ({killed_id}; leader {fault['leader_before']}) "
                               f"down {down:.1f} s")
        self.faults.append(fault)
        log(f"fault: kill -9 {fault['detail']}; restarted as {fault['restarted_id']}")


def _fmt(seconds):
    return "never" if seconds is None else f"{seconds:.1f}"
