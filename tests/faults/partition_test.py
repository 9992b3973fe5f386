#!/usr/bin/env python3
"""Network faults between real processes: PostgreSQL, the scheduler and two workers each in a
network namespace of their own, joined through a bridge in a fifth ("hub") namespace, all on
loopback-range addresses (127.88.0.0/24; route_localnet=1 in every namespace, without which the
kernel drops 127/8 packets that arrive on or leave by any device but lo).

1. Partition. Worker 1 trains the sweep's only run; its link to the hub goes down (a real cut:
   the veth loses carrier, every packet either way is dropped) for longer than the lease TTL, then
   comes back. Expected: the lease expires and the run moves to worker 2, which resumes from the
   last recorded checkpoint; worker 1 stops its engine once the scheduler tells it the lease is
   gone; none of the points it buffered during the cut and sends after the heal is stored (the
   metrics table keeps each point's lease_epoch); the run's curve and final validation BPC are
   bit-identical to the same spec trained by parity-train directly, undisturbed.
2. Latency and loss. 200 ms per packet in each direction and 5% of packets dropped at random on
   worker 2's link, while a 6-run sweep trains on both workers. Expected: every run SUCCEEDED at
   attempt 1, no lease expired and no run went back to PENDING (no spurious retries).

The impaired link: `tc qdisc ... netem delay 200ms loss 5%` on both ends of worker 2's veth when
the kernel has sch_netem; otherwise (this project's machine: "Specified qdisc kind is unknown")
worker 2 is joined to the hub by two TAP devices and tests/faults/lossy_link.py, a user-space link
that holds each Ethernet frame 200 ms and drops 5% at random: real packets delayed and lost, the
kernels' TCP sees the same RTT and retransmissions. Which one ran is printed ("impaired link:
netem" or "impaired link: user-space"); PARITY_FAULTS_LINK=netem|userspace forces one. In
phase 1 the user-space link passes frames through undelayed.

Needs root and `ip netns` (iproute2); otherwise exits 77, which ctest reports as skipped.
Namespaces are named parity-f<pid>-*, deleted on exit (and those of a test process that is gone,
e.g. killed by a ctest timeout, at the next start).

    partition_test.py --scheduler BIN --worker BIN --engine BIN --cli BIN [--keep]
"""
import argparse
import atexit
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_stack import (CheckFailed, Postgres, Stack, compare_with_reference,  # noqa: E402
                          log, sh, stored_points, sweep_yaml, train_reference)

SKIP = 77
SUBNET = "127.88.0"
ADDRESSES = {"pg": f"{SUBNET}.2", "sched": f"{SUBNET}.3", "w1": f"{SUBNET}.11",
             "w2": f"{SUBNET}.12"}
SCHED_PORT = 50051
PG_PORT = 5432
# Short timings so that the test is quick; heartbeats 8 per TTL, so one late heartbeat under
# 200 ms latency and 5% loss cannot let a lease lapse (production: 60 s TTL, 15 s heartbeat).
LEASE_TTL_S = 8
HEARTBEAT = "1s"


def skip(message):
    print(f"SKIP: {message}", flush=True)
    sys.exit(SKIP)


class Topology:
    """The namespaces and links of one test run; delete() removes them all (idempotent)."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.namespaces = []
        self.link_program = None
        self.impaired = None  # "netem" or "user-space"

    def ns(self, role):
        return f"{self.prefix}-{role}"

    def add_namespace(self, role):
        name = self.ns(role)
        sh(["ip", "netns", "add", name])
        self.namespaces.append(name)
        # lo keeps only 127.0.0.1/32: with the usual 127.0.0.1/8 every 127.x address would be
        # routed to lo here and nothing would reach the other namespaces.
        self.ip(role, "link set lo up")
        self.ip(role, "addr del 127.0.0.1/8 dev lo")
        self.ip(role, "addr add 127.0.0.1/32 dev lo")
        sh(["ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1",
            "net.ipv4.conf.default.route_localnet=1"])

    def ip(self, role, command):
        return sh(["ip", "-n", self.ns(role)] + command.split())

    def configure_end(self, role, device):
        name = self.ns(role)
        sh(["ip", "netns", "exec", name, "sysctl", "-qw",
            f"net.ipv4.conf.{device}.route_localnet=1"])
        self.ip(role, f"addr add {ADDRESSES[role]}/24 dev {device}")
        self.ip(role, f"link set {device} up")

    def build(self, link_mode):
        self.add_namespace("hub")
        self.ip("hub", "link add br0 type bridge")
        self.ip("hub", "link set br0 up")
        for role in ("pg", "sched", "w1", "w2"):
            self.add_namespace(role)
        for role in ("pg", "sched", "w1") + (("w2",) if link_mode == "netem" else ()):
            # The hub end is named after the member; the member's end is eth0.
            sh(["ip", "-n", self.ns("hub"), "link", "add", role, "type", "veth", "peer", "name",
                "eth0", "netns", self.ns(role)])
            self.ip("hub", f"link set {role} master br0 up")
            self.configure_end(role, "eth0")
        if link_mode == "userspace":
            here = os.path.dirname(os.path.abspath(__file__))
            self.link_program = subprocess.Popen(
                [sys.executable, os.path.join(here, "lossy_link.py"), "--a",
                 f"{self.ns('w2')}:eth0", "--b", f"{self.ns('hub')}:w2", "--seed", "20261201"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            if self.link_program.stdout.readline().strip() != "ready":
                raise RuntimeError("lossy_link.py did not start")
            self.ip("hub", "link set w2 master br0 up")
            self.configure_end("w2", "eth0")

    def link_command(self, line):
        self.link_program.stdin.write(line + "\n")
        self.link_program.stdin.flush()
        return self.link_program.stdout.readline().strip()

    def impair(self, delay_ms, loss):
        if self.link_program:
            answer = self.link_command(f"set {delay_ms} {loss}")
            if not answer.startswith("ok"):
                raise RuntimeError(f"lossy_link.py: {answer}")
            self.impaired = "user-space"
        else:
            for role, device in (("hub", "w2"), ("w2", "eth0")):
                self.ip(role, f"qdisc add dev {device} root netem delay {delay_ms}ms "
                              f"loss {loss * 100:g}%")
            self.impaired = "netem"

    def impairment_stats(self):
        """Frames (user-space link) or packets (netem) sent and dropped so far, per direction."""
        if self.link_program:
            stats = json.loads(self.link_command("stats"))
            return {d: (v["read"], v["dropped"]) for d, v in stats.items()}
        out = {}
        if not self.impaired:
            return out  # the netem qdiscs, and so their counters, start with impair()
        for role, device in (("hub", "w2"), ("w2", "eth0")):
            text = self.ip(role, f"-s qdisc show dev {device}").stdout
            m = re.search(r"Sent \d+ bytes (\d+) pkt \(dropped (\d+)", text)
            out[f"{role}:{device} egress"] = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        return out

    def impairment_counts(self, since):
        """What impairment_stats() added since `since`, as text: sent, dropped, drop rate."""
        parts = []
        for direction, (sent, dropped) in self.impairment_stats().items():
            sent -= since.get(direction, (0, 0))[0]
            dropped -= since.get(direction, (0, 0))[1]
            parts.append(f"{direction}: {dropped} of {sent} dropped "
                         f"({100.0 * dropped / max(1, sent):.1f}%)")
        return "; ".join(parts)

    def pids(self, role):
        result = sh(["ip", "netns", "pids", self.ns(role)], check=False)
        return [int(p) for p in result.stdout.split()]

    def delete(self):
        if self.link_program and self.link_program.poll() is None:
            self.link_program.terminate()
            try:
                self.link_program.wait(5)
            except subprocess.TimeoutExpired:
                self.link_program.kill()
        for name in reversed(self.namespaces):
            delete_namespace(name)
        self.namespaces = []


def delete_namespace(name):
    # Only processes this test started run in its namespaces; none may outlive it.
    for pid in sh(["ip", "netns", "pids", name], check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    sh(["ip", "netns", "del", name], check=False)


def delete_stale_namespaces():
    """Namespaces of earlier runs of this test whose process is gone (SIGKILLed by a timeout)."""
    listing = sh(["ip", "netns", "list"], check=False).stdout
    for line in listing.splitlines():
        match = re.match(r"(parity-f(\d+)-\w+)", line)
        if match and not os.path.exists(f"/proc/{match.group(2)}"):
            delete_namespace(match.group(1))


def netem_available():
    """Whether `tc qdisc add ... netem` works here, tried on a scratch veth pair."""
    probe = f"parity-f{os.getpid()}-probe"
    try:
        sh(["ip", "netns", "add", probe])
        sh(["ip", "-n", probe, "link", "add", "d0", "type", "veth", "peer", "name", "d1"])
        result = sh(["ip", "-n", probe, "qdisc", "add", "dev", "d0", "root", "netem", "delay",
                     "1ms"], check=False)
        return result.returncode == 0
    finally:
        sh(["ip", "netns", "del", probe], check=False)


def engine_pids(topology, role):
    pids = []
    for pid in topology.pids(role):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if os.path.basename(argv0) == b"parity-train":
            pids.append(pid)
    return pids


def wait_for(predicate, timeout, what, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise CheckFailed(f"timed out after {timeout:.0f} s waiting for {what}")


def connect_times_ms(topology, role, host, port, count=5):
    """TCP connect times from `role`'s namespace to host:port: one SYN/SYN-ACK round trip each."""
    code = ("import socket,sys,time\n"
            "for _ in range(int(sys.argv[3])):\n"
            "    t=time.monotonic(); s=socket.create_connection((sys.argv[1],int(sys.argv[2])),10)\n"
            "    print(round((time.monotonic()-t)*1000)); s.close()\n")
    out = sh(["ip", "netns", "exec", topology.ns(role), sys.executable, "-c", code, host,
              str(port), str(count)]).stdout
    return [int(x) for x in out.split()]


def main():
    parser = argparse.ArgumentParser()
    for name in ("scheduler", "worker", "engine", "cli"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    binaries = {name: os.path.abspath(getattr(args, name))
                for name in ("scheduler", "worker", "engine", "cli")}

    if os.geteuid() != 0:
        skip("needs root to create network namespaces (ip netns add)")
    for name, path in binaries.items():
        if not os.access(path, os.X_OK):
            raise SystemExit(f"FAIL: {name} binary {path} is not executable (build it first)")
    delete_stale_namespaces()
    probe = subprocess.run(["ip", "netns", "add", f"parity-f{os.getpid()}-try"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        skip(f"`ip netns add` failed: {probe.stderr.strip() or probe.returncode}")
    sh(["ip", "netns", "del", f"parity-f{os.getpid()}-try"])

    forced = os.environ.get("PARITY_FAULTS_LINK", "")
    link_mode = forced or ("netem" if netem_available() else "userspace")
    if link_mode not in ("netem", "userspace"):
        raise SystemExit(f"FAIL: PARITY_FAULTS_LINK={forced}: expected netem or userspace")
    log(f"impaired link: {'netem' if link_mode == 'netem' else 'user-space'} "
        f"({'forced by PARITY_FAULTS_LINK' if forced else 'kernel sch_netem ' + ('present' if link_mode == 'netem' else 'missing')})")

    topology = Topology(f"parity-f{os.getpid()}")
    atexit.register(topology.delete)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    root = tempfile.mkdtemp(prefix="parity-faults-")
    os.chmod(root, 0o755)
    stack = None
    failures = []
    try:
        topology.build(link_mode)
        pg = Postgres(os.path.join(root, "pg"), ADDRESSES["pg"], PG_PORT,
                      namespace=topology.ns("pg"))
        pg.init()
        pg.start()
        pg.createdb("parity")
        stack = Stack(root, binaries, pg, ADDRESSES["sched"], SCHED_PORT,
                      sched_ns=topology.ns("sched"),
                      worker_ns=lambda i: topology.ns(f"w{i}"), lease_ttl=f"{LEASE_TTL_S}s",
                      heartbeat=HEARTBEAT, reap="500ms")
        stack.start_scheduler()
        log(f"scratch {root}; namespaces {topology.prefix}-{{hub,pg,sched,w1,w2}}; "
            f"scheduler {stack.target}, PostgreSQL {ADDRESSES['pg']}:{PG_PORT}")
        failures += partition_phase(stack, topology)
        failures += latency_phase(stack, topology)
    except CheckFailed as e:
        failures.append(str(e))
    except Exception as e:  # a broken set-up fails the test with its cause, never skips it
        traceback.print_exc()
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        if failures and stack:
            for name in ("scheduler", "worker-1", "worker-2"):
                print(f"---- {name}.log (tail)\n{stack.tail(name)}", flush=True)
        if stack:
            stack.stop_all()
        if stack:
            stack.pg.stop("immediate")
        topology.delete()
        if not args.keep and not failures:
            sh(["rm", "-rf", root], check=False)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures), flush=True)
        return 1
    print("PASS", flush=True)
    return 0


def partition_phase(stack, topology):
    """Phase 1; returns the failed expectations (empty when all held)."""
    failures = []
    pg = stack.pg
    stack.start_worker(1)
    w1 = stack.worker_id(1)
    sweep = stack.submit(sweep_yaml("faults-partition", ["0.25"], "3e11", [0]),
                         "faults-partition")
    run = wait_for(lambda: next((r for r in stack.runs(sweep) if r["state"] == "RUNNING"
                                 and r["lease_owner"] == w1), None), 120,
                   "worker 1 to train the run")
    run_id = run["run_id"]
    # Worker 2 comes up only now, so that worker 1 is the one that holds the run.
    stack.start_worker(2)
    w2 = stack.worker_id(2)
    wait_for(lambda: (lambda r: r["checkpoint_step"] and int(r["latest_step"]) >= 100)(
        stack.runs(sweep)[0]), 120, "a recorded checkpoint and step 100 on worker 1")

    topology.ip("hub", "link set w1 down")
    cut_at = time.monotonic()
    # Whatever was on the wire before the cut has landed within a second; after it nothing can.
    time.sleep(2)
    before = stack.runs(sweep)[0]
    epoch1 = int(before["lease_epoch"])
    checkpoint_at_cut = int(before["checkpoint_step"])
    epoch1_steps_at_cut = {s for s, p in stored_points(pg, run_id).items() if p[2] == epoch1}
    log(f"cut worker 1 off at step {before['latest_step']} (lease epoch {epoch1}, recorded "
        f"checkpoint step {checkpoint_at_cut}, {len(epoch1_steps_at_cut)} points stored)")

    # Worker 1's engine trains on while cut off, into its lease's directory; worker 2's first
    # recorded checkpoint prunes that directory (checkpoint retention), so watch it now.
    epoch1_dir = os.path.join(stack.root, "checkpoints", run_id, f"epoch-{epoch1}")
    newest_cut_off = [0]

    def sample_cut_off():
        try:
            names = os.listdir(epoch1_dir)
        except FileNotFoundError:
            return
        steps = [int(m.group(1)) for m in (re.match(r"step-(\d+)\.ckpt", n) for n in names) if m]
        newest_cut_off[0] = max([newest_cut_off[0]] + steps)

    def moved():
        sample_cut_off()
        r = stack.runs(sweep)[0]
        return r if (r["lease_owner"] == w2 and r["state"] == "RUNNING"
                     and int(r["latest_step"]) > checkpoint_at_cut) else None
    after_move = wait_for(moved, 60 + LEASE_TTL_S, "the run to move to worker 2 and train there")
    # The lease can lapse a little under a TTL after the cut (the last heartbeat went out before
    # it); the cut itself is held for longer than a TTL, as the scenario says.
    while time.monotonic() < cut_at + LEASE_TTL_S + 2:
        sample_cut_off()
        time.sleep(0.2)
    engines_in_w1 = engine_pids(topology, "w1")
    if not engines_in_w1:
        raise CheckFailed("worker 1's engine ended during the cut; the run is too short for the "
                          "check that worker 1 stops it after the heal")
    topology.ip("hub", "link set w1 up")
    healed_at = time.monotonic()
    cut_for = healed_at - cut_at
    log(f"healed after {cut_for:.1f} s (TTL {LEASE_TTL_S} s); worker 2 holds the run at attempt "
        f"{after_move['attempt']}, lease epoch {after_move['lease_epoch']}")
    if cut_for <= LEASE_TTL_S:
        failures.append(f"the cut lasted {cut_for:.1f} s, expected longer than the TTL")

    wait_for(lambda: not engine_pids(topology, "w1"), 45,
             "worker 1 to stop its engine after the heal")
    stopped_in = time.monotonic() - healed_at
    log(f"worker 1 stopped its engine {stopped_in:.1f} s after the heal")
    if "lease lost" not in stack.tail("worker-1", 200000):
        failures.append("worker 1's log does not say it lost the lease (expected 'lease lost')")

    # The undisturbed reference: the same spec file, trained by parity-train directly.
    reference_dir = os.path.join(stack.root, "reference-partition")
    reference = train_reference(stack.bin["engine"], stack.run_spec_file(run_id), reference_dir)
    if not stack.wait_sweep_ended(sweep, 240):
        raise CheckFailed("the partition sweep did not finish within 240 s")
    final = stack.runs(sweep)[0]
    if final["state"] != "SUCCEEDED":
        failures.append(f"run ended {final['state']} ({final['failure_message']}), expected "
                        "SUCCEEDED")
    if int(final["attempt"]) != 2 or final["lease_owner"] not in (w2, ""):
        failures.append(f"run ended at attempt {final['attempt']}, expected 2 (moved once)")
    events = pg.query("SELECT from_state, to_state, attempt, lease_epoch, "
                      "coalesce(worker_id::text, ''), reason FROM events "
                      f"WHERE run_id = '{run_id}' ORDER BY event_id")
    expired = [e for e in events if e[5] == "lease expired"]
    if len(expired) != 1 or expired[0][4] != w1 or expired[0][1] != "PENDING":
        failures.append(f"expected one 'lease expired' event of worker 1 back to PENDING, got "
                        f"{expired}")
    releases = [e for e in events if e[1] == "LEASED" and e[2] == "2"]
    if len(releases) != 1 or releases[0][4] != w2:
        failures.append(f"expected attempt 2 leased to worker 2, got {releases}")

    points = stored_points(pg, run_id)
    epoch1_after = {s for s, p in points.items() if p[2] == epoch1}
    late = sorted(epoch1_after - epoch1_steps_at_cut)
    if late:
        failures.append(f"{len(late)} points of worker 1's lease were stored after the cut "
                        f"(steps {late[:8]}...); expected none")
    epoch2 = int(final["lease_epoch"])
    epoch2_steps = sorted(s for s, p in points.items() if p[2] == epoch2)
    log_every = 5
    if not epoch2_steps or not (checkpoint_at_cut < epoch2_steps[0]
                                <= checkpoint_at_cut + log_every):
        failures.append(f"worker 2's first point is step {epoch2_steps[:1]}, expected the first "
                        f"logged step after the recorded checkpoint {checkpoint_at_cut}")
    # Worker 1 trained on during the cut: the points it sent after the heal existed.
    newest = newest_cut_off[0]
    log(f"worker 1's engine reached checkpoint step {newest} cut off; stored for its lease: "
        f"steps up to {max(epoch1_steps_at_cut, default=0)} at the cut, "
        f"{max(epoch1_after, default=0)} at the end")
    if newest <= max(epoch1_steps_at_cut, default=0):
        failures.append("worker 1's engine made no progress while cut off, so the check that "
                        "nothing it sent afterwards is stored proved nothing")

    if reference.wait(300) != 0:
        raise CheckFailed(f"the reference parity-train failed; see {reference_dir}/engine.log")
    problems = compare_with_reference(pg, final, reference_dir)
    failures += [f"partition run: {p}" for p in problems]
    # The recorded URI is relative to the checkpoint store (core/checkpoint_uri.h).
    with open(os.path.join(stack.root, "checkpoints", final["checkpoint_uri"]), "rb") as a, open(
            os.path.join(reference_dir, "ckpt", os.path.basename(final["checkpoint_uri"])),
            "rb") as b:
        if a.read() != b.read():
            failures.append("the final checkpoint differs from the undisturbed run's")
    if not problems:
        log(f"partition run: {len(points)} points, final validation BPC {final['final_val_bpc']} "
            "= the undisturbed run's, bit for bit (curve and final checkpoint too)")
    return failures


def latency_phase(stack, topology):
    """Phase 2; returns the failed expectations."""
    failures = []
    pg = stack.pg
    w2 = stack.worker_id(2)
    before = connect_times_ms(topology, "w2", ADDRESSES["sched"], SCHED_PORT, 3)
    stats_before = topology.impairment_stats()
    topology.impair(200, 0.05)
    after = connect_times_ms(topology, "w2", ADDRESSES["sched"], SCHED_PORT, 5)
    log(f"impaired link: {topology.impaired}, 200 ms each way and 5% loss on worker 2's link; "
        f"TCP connect from worker 2 to the scheduler {before} ms before, {after} ms after")
    if min(after) < 380:
        failures.append(f"connects over the impaired link took {after} ms, expected each at least "
                        "400 ms (200 ms each way)")
    sweep = stack.submit(sweep_yaml("faults-latency", ["0.25", "0.4", "0.6"], "3e10", [0, 1]),
                         "faults-latency")
    if not stack.wait_sweep_ended(sweep, 240):
        raise CheckFailed("the latency sweep did not finish within 240 s")
    runs = stack.runs(sweep)
    log(f"impaired link stats: {topology.impairment_counts(stats_before)}")
    for r in runs:
        if r["state"] != "SUCCEEDED" or r["attempt"] != "1":
            failures.append(f"{r['name']}: {r['state']} at attempt {r['attempt']} "
                            f"({r['failure_message']}), expected SUCCEEDED at attempt 1")
    retries = pg.query("SELECT r.name, e.from_state, e.to_state, e.reason FROM events e JOIN runs "
                       f"r USING (run_id) WHERE e.sweep_id = '{sweep}' AND e.from_state IS NOT "
                       "NULL AND (e.to_state = 'PENDING' OR e.reason = 'lease expired')")
    if retries:
        failures.append(f"spurious retries under latency and loss: {retries}")
    on_w2 = pg.query(f"SELECT count(*) FROM events WHERE sweep_id = '{sweep}' AND "
                     f"to_state = 'SUCCEEDED' AND run_id IN (SELECT run_id FROM events WHERE "
                     f"sweep_id = '{sweep}' AND to_state = 'LEASED' AND worker_id = '{w2}')")[0][0]
    if int(on_w2) == 0:
        failures.append("worker 2 (the impaired link) trained none of the runs, so latency and "
                        "loss were not exercised")
    for r in runs:
        points = stored_points(pg, r["run_id"])
        steps = sorted(points)
        holes = [(a, b) for a, b in zip([0] + steps, steps) if b - a > 5]
        if r["state"] == "SUCCEEDED" and (holes or not steps or steps[-1] !=
                                          int(r["summary_steps"])):
            failures.append(f"{r['name']}: curve has holes {holes[:4]} or does not reach step "
                            f"{r['summary_steps']}")
    log(f"latency sweep: {len(runs)} runs SUCCEEDED at attempt 1 ({on_w2} on worker 2), "
        f"{len(retries)} requeues")
    return failures


if __name__ == "__main__":
    sys.exit(main())
