"""Several parity-scheduler replicas on the soak's one PostgreSQL (issue #25), for
bench/chaos/chaos_soak.py --replicas N: a Stack (tests/faults/parity_stack.py) whose scheduler is
N processes, each on its own port with its own --replica-id, and whose workers, CLI and watcher
are given every address (`a:p,b:p`: the clients balance over them and skip a dead one,
clients/cpp/scheduler_target.h). Also what the soak reads of the upkeep leadership: the
`leader_leases` row and the reaper's last pass (`reaper_liveness`), both in the database's clock.

Each start of a replica gets a new id (`replica-I.G`, G counting its starts), as the default
`hostname:pid` would: a restarted process is a new candidate, never the holder of its dead
predecessor's term (leader_lease_acquire renews a live term for the same id).
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "faults"))
from parity_stack import Stack  # noqa: E402


class ReplicaStack(Stack):
    """A Stack with `len(ports)` scheduler replicas. start_scheduler/kill_scheduler/
    stop_scheduler act on all of them (the whole service: the old `scheduler_restart` fault);
    start_replica/kill_replica on one."""

    def __init__(self, root, binaries, pg, host, ports, leader_ttl="2s", **kwargs):
        super().__init__(root, binaries, pg, host, ports[0], **kwargs)
        self.ports = list(ports)
        self.leader_ttl = leader_ttl
        self.replicas = {}  # index -> Process
        self.starts = {i: 0 for i in range(len(ports))}
        self.ids = {}  # replica id -> index, every id ever started
        self.current_id = {}  # index -> the id of its latest start

    @property
    def target(self):
        return ",".join(self.address(i) for i in range(len(self.ports)))

    def address(self, index):
        return f"{self.sched_host}:{self.ports[index]}"

    def log_name(self, index):
        return "scheduler" if index == 0 else f"scheduler-{index}"

    def start_replica(self, index, timeout=60):
        self.starts[index] += 1
        replica_id = f"replica-{index}.{self.starts[index]}"
        self.ids[replica_id] = index
        self.current_id[index] = replica_id
        self.replicas[index] = self.launch_scheduler(
            self.log_name(index), self.address(index),
            {"PARITY_REPLICA_ID": replica_id, "PARITY_LEADER_TTL": self.leader_ttl}, timeout)
        return replica_id

    def kill_replica(self, index):
        replica = self.replicas.pop(index, None)
        if replica:
            replica.kill9()

    def start_scheduler(self, timeout=60):
        # One after the other: the first to start leads (term 1), as in replicas_e2e_test.
        for index in range(len(self.ports)):
            self.start_replica(index, timeout)

    def kill_scheduler(self):
        for index in list(self.replicas):
            self.kill_replica(index)

    def stop_scheduler(self):
        for index in list(self.replicas):
            self.replicas.pop(index).stop()

    def leader(self):
        """(replica id, epoch, elected_at as epoch seconds) of the live upkeep term, or None while
        nobody holds it (expired, or never taken)."""
        rows = self.pg.query(
            "SELECT leader_id, epoch, extract(epoch FROM elected_at) FROM leader_leases "
            "WHERE name = 'upkeep' AND expires_at > now()")
        return (rows[0][0], int(rows[0][1]), float(rows[0][2])) if rows else None

    def last_reaper_pass(self):
        """The database time (epoch seconds) of the last reaper pass any leader recorded."""
        rows = self.pg.query("SELECT extract(epoch FROM last_pass_at) FROM reaper_liveness")
        return float(rows[0][0]) if rows else 0.0

    def db_now(self):
        return float(self.pg.query("SELECT extract(epoch FROM clock_timestamp())")[0][0])

    def terms(self):
        """The current term's epoch (the number of terms there have been)."""
        rows = self.pg.query("SELECT epoch FROM leader_leases WHERE name = 'upkeep'")
        return int(rows[0][0]) if rows else 0


def watch_takeover(stack, killed_id, killed_at_db, timeout=30.0):
    """After the leader `killed_id` was killed at `killed_at_db` (database clock): waits until a
    new term is held and the reaper has recorded a pass after the kill. Returns a dict: taken_by
    (replica id or None), taken_s (the new term's elected_at - the kill), reaped_s (the first
    reaper pass seen after the kill - the kill; polled every 0.1 s, so up to 0.1 s late)."""
    out = {"taken_by": None, "taken_s": None, "reaped_s": None}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (out["taken_by"] is None or out["reaped_s"] is None):
        if out["taken_by"] is None:
            now = stack.leader()
            if now and now[0] != killed_id:
                out["taken_by"], out["taken_s"] = now[0], now[2] - killed_at_db
        if out["reaped_s"] is None:
            last = stack.last_reaper_pass()
            if last > killed_at_db:
                out["reaped_s"] = last - killed_at_db
        time.sleep(0.1)
    return out
