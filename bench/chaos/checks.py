"""What the chaos soak checks once the sweep has ended, beside the curves (bench/chaos/
chaos_soak.py): steps lost per worker kill, that every attempt a run was charged is a killed
worker's, that the upkeep went on after each leader kill, and the watcher's end. Each returns
(failures, figures) or prints; see bench/chaos/README.md for the rules and why.
"""
import collections
import os
import re

# How long after a scheduler or PostgreSQL restart a worker kill is in that outage's shadow: the
# scheduler's outage grace (two lease TTLs of 3 s), in which workers reconnect and record the
# checkpoints they wrote while it was away.
OUTAGE_SHADOW_S = 6.0


def worker_log_lines(stack):
    logs = os.path.join(stack.root, "logs")
    for name in sorted(os.listdir(logs)):
        if name.startswith("worker-"):
            with open(os.path.join(logs, name), errors="replace") as f:
                yield from f


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


def kill_losses(stack, driver, checkpoint_every):
    """(failures, losses, shadow_losses): steps lost per worker kill of a training run. A kill in
    an outage's shadow (while the scheduler or PostgreSQL was away, or within OUTAGE_SHADOW_S
    after) is not held to the interval: no checkpoint can be recorded while they are away (a
    checkpoint counts once its points are stored), so such a kill loses what the engine trained
    meanwhile too; its run's curve is still checked bit for bit. A replica kill is no outage:
    the other replicas record checkpoints meanwhile."""
    resumed = resume_steps(stack)
    failures, losses, shadow_losses = [], [], []
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
        if lost > checkpoint_every:
            failures.append(f"run {k['run_id']}: the kill of worker-{k['worker']} lost {lost} "
                            f"steps (known progress {k['progress']}, resumed from {resume_step}), "
                            f"expected at most the checkpoint interval {checkpoint_every}")
    return failures, losses, shadow_losses


def charged_requeues(pg, sweep, driver):
    """(failures, charged, free: for each free requeue whether a killed worker held it). Every
    lease that went back to the queue at a cost (an attempt spent: any requeue but "lease expired
    during an outage") must have been held by a worker the driver killed. Anything else was
    charged for what the service did: a replica kill, a failover, a restart."""
    rows = pg.query(
        "SELECT run_id, lease_epoch, reason, from_state, coalesce(worker_id::text, ''), "
        "to_char(created_at, 'HH24:MI:SS.MS') FROM events WHERE "
        f"sweep_id = '{sweep}' AND from_state IS NOT NULL AND to_state IN ('PENDING', 'FAILED') "
        "ORDER BY event_id")
    failures, charged, free = [], 0, []
    for run_id, epoch, reason, from_state, worker, when in rows:
        if reason == "lease expired during an outage":
            free.append((run_id, int(epoch)) in driver.killed_leases)
            continue
        charged += 1
        if (run_id, int(epoch)) not in driver.killed_leases:
            failures.append(f"run {run_id}: lease epoch {epoch} ({from_state}, worker {worker}) "
                            f"requeued at a cost at {when} ('{reason}') though its worker was not "
                            "killed: the service charged the run for its own fault")
    return failures, charged, free


def takeovers(driver, leader_ttl_s):
    """(failures, leader kills): after each kill of the leading replica a new term must be held
    and the reaper must pass again, within the leader TTL plus the soak's slack (a loaded
    machine, the 0.1 s polling)."""
    failures = []
    led = [f for f in driver.faults if f["kind"] == "replica_kill" and f.get("led")]
    bound = leader_ttl_s + 10.0
    for f in led:
        if f.get("taken_by") is None or f["taken_s"] > bound:
            failures.append(f"leader kill ({f['detail']}): no new upkeep term within {bound:g} s")
        if f.get("reaped_s") is None or f["reaped_s"] > bound:
            failures.append(f"leader kill ({f['detail']}): the reaper did not pass again within "
                            f"{bound:g} s")
    return failures, led


def watcher_end(watcher, stack, timeout=60):
    """Failures of the `parity watch` process given every address: it must exit 0 (the sweep
    SUCCEEDED) once the sweep has ended, having carried on through every fault."""
    try:
        code = watcher.popen.wait(timeout)
    except Exception:  # still running: it missed the end
        watcher.stop()
        return [f"the watcher did not exit within {timeout} s of the sweep's end; log ends:\n"
                f"{stack.tail('watcher', 1500)}"]
    if code != 0:
        return [f"the watcher exited {code}; log ends:\n{stack.tail('watcher', 1500)}"]
    return []


def watcher_retries(stack):
    try:
        with open(stack.log_path("watcher"), errors="replace") as f:
            return sum("retrying" in line for line in f)
    except OSError:
        return 0


def leadership_events(stack):
    """(terms gained, [why of each loss by a replica that lived on]) from the replicas' logs
    (server/leadership/elector.cc: event=leadership_gained / leadership_lost)."""
    gained, lost = 0, []
    logs = os.path.join(stack.root, "logs")
    for name in sorted(os.listdir(logs)):
        if name.startswith("scheduler"):
            with open(os.path.join(logs, name), errors="replace") as f:
                for line in f:
                    gained += "event=leadership_gained" in line
                    m = re.search(r"event=leadership_lost .*why=\"([^\"]*)\"", line)
                    if m:
                        lost.append(m.group(1))
    return gained, lost


def print_replica_figures(driver, led, stack):
    kills = [f for f in driver.faults if f["kind"] == "replica_kill"]
    by_survivor = [f for f in led if f.get("by_survivor")]
    taken = [f["taken_s"] for f in led if f.get("taken_s") is not None]
    reaped = [f["reaped_s"] for f in led if f.get("reaped_s") is not None]
    print(f"replica kills: {len(kills)} ({len(led)} of the leader); leader kills taken over by "
          f"the surviving replica: {len(by_survivor)}, by the restarted one: "
          f"{len(led) - len(by_survivor)}; takeover (new term elected after the kill) "
          + _spread(taken) + "; reaper's first pass after the kill " + _spread(reaped)
          + f"; upkeep terms in all: {stack.terms()} (counted after the stack stopped: the "
          "leader's resignation at shutdown hands one more term to the replica stopped after it)")
    gained, lost = leadership_events(stack)
    # Grouped by the reason's head: the error text after ':' varies.
    whys = collections.Counter(why.split(":")[0] for why in lost)
    print(f"leadership in the replicas' logs: gained {gained} times, lost by a replica that "
          f"lived on {len(lost)} times" + "".join(f"; {n} x {why}" for why, n in whys.items())
          + " (a killed leader logs nothing)")
    for f in led:
        print(f"  leader kill: {f['detail']}")


def _spread(values):
    if not values:
        return "none"
    return (f"min {min(values):.1f} s, mean {sum(values) / len(values):.1f} s, max "
            f"{max(values):.1f} s")
