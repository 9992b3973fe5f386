#!/usr/bin/env python3
"""Runs deploy/slurm/parity-gang-workers.sbatch for real, under a stand-in for Slurm.

No cluster here, so `srun` is a small script on PATH that starts the step's command once per
"node" (SLURM_JOB_NUM_NODES of them, each with its own SLURMD_NODENAME, each in a process group
of its own: the node's share of the step) and, like srun, SIGKILLs them all when it gets a
SIGTERM itself ("forcing job termination"); the worker is a stand-in too (PARITY_WORKER_BIN)
that records its argv and environment and, on SIGTERM, exits with status 3. What is checked, on
the real script:
  - every node's worker starts once, with the flags the script promises: --scheduler,
    --checkpoint-dir, --threads = SLURM_CPUS_PER_TASK, --rendezvous-host = the IPv4 address of
    PARITY_RENDEZVOUS_INTERFACE (here lo, so 127.0.0.1), the slurm_job/slurm_node/gang_pool labels;
  - NCCL_SOCKET_IFNAME is set to exactly that interface (=lo) when unset, and a value the job
    set (and NCCL_IB_HCA) reaches the worker untouched, so the ranks it starts inherit them;
  - the token is on no command line; each node's worker has a --work-dir of its own;
  - SIGTERM to the batch shell (a job's cancellation reaches it) is passed to no one: no worker
    is stopped, srun keeps running;
  - SIGTERM to every process of the step (what --signal=TERM@120 and `scancel --signal=TERM`
    send) stops every worker gracefully, the script waits for them and exits with the workers'
    status; the Prometheus file_sd targets it wrote (one per node) are gone afterwards;
  - an interface with no IPv4 address stops each node's task with a message naming
    PARITY_RENDEZVOUS_INTERFACE, before any worker starts; PARITY_RENDEZVOUS_HOST on a
    multi-node job without an interface is refused at once.
Exit status 0 when all holds; 1 with one line per problem.

  check_slurm_gang.py --root SOURCE_DIR
"""
import argparse
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time

NODES = 3

FAKE_SRUN = r"""#!/usr/bin/env bash
# Stand-in for srun inside an allocation: options are dropped, the command runs once per node, in
# a process group of its own (setsid: the node's processes of the step), whose ids go to
# $FAKE_STEP_GROUPS for the test to signal as Slurm would. Like srun, a SIGTERM to srun itself
# SIGKILLs every task ("forcing job termination").
while [ $# -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done
pids=()
for i in $(seq 0 $((SLURM_JOB_NUM_NODES - 1))); do
  SLURMD_NODENAME="node$i" SLURM_NODEID="$i" setsid "$@" &
  pids+=($!)
done
printf '%s\n' "${pids[@]}" >"$FAKE_STEP_GROUPS"
trap 'echo "srun: forcing job termination" >&2; for p in "${pids[@]}"; do kill -KILL -- "-$p"; done' TERM
status=0
for p in "${pids[@]}"; do
  while kill -0 "$p" 2>/dev/null; do wait "$p" || true; done
  wait "$p" || status=$?
done
exit "$status"
"""

FAKE_WORKER = r"""#!/usr/bin/env python3
import json, os, signal, sys, time
out = os.environ["FAKE_WORKER_OUT"]
node = os.environ.get("SLURMD_NODENAME", "?")
with open(os.path.join(out, node + ".json.tmp"), "w") as f:
    json.dump({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items()
                                              if k.startswith(("NCCL_", "PARITY_"))}}, f)
os.rename(os.path.join(out, node + ".json.tmp"), os.path.join(out, node + ".json"))
def term(*_):
    # Slurm signals every process of the step and the node's shell passes it on too: the real
    # worker takes the first and keeps the rest blocked, so a second must not matter here either.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open(os.path.join(out, node + ".terminated"), "w").close()
    os._exit(3)
signal.signal(signal.SIGTERM, term)
while True:
    time.sleep(0.1)
"""


def write_exec(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def flag(argv, name):
    return [argv[i + 1] for i, w in enumerate(argv[:-1]) if w == name]


def base_env(tmp):
    bin_dir = os.path.join(tmp, "bin")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "NCCL_", "PARITY_"))}
    env.update({
        "PATH": bin_dir + os.pathsep + env.get("PATH", "/usr/bin:/bin"),
        "SLURM_JOB_ID": "4242", "SLURM_JOB_NUM_NODES": str(NODES), "SLURM_CPUS_PER_TASK": "32",
        "PARITY_SCHEDULER": "scheduler.example:50051",
        "PARITY_CHECKPOINT_DIR": os.path.join(tmp, "ckpt"),
        "PARITY_TOKEN_FILE": os.path.join(tmp, "token"),
        "PARITY_WORKER_BIN": os.path.join(bin_dir, "fake-worker"),
        "FAKE_WORKER_OUT": os.path.join(tmp, "out"),
        "FAKE_STEP_GROUPS": os.path.join(tmp, "step-groups"),
    })
    return env


def wait_for(predicate, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def check_run(script, tmp, problems):
    env = base_env(tmp)
    sd_dir = os.path.join(tmp, "sd")
    os.makedirs(sd_dir)
    env.update({"PARITY_RENDEZVOUS_INTERFACE": "lo", "NCCL_IB_HCA": "mlx5_0,mlx5_1",
                "PARITY_WORKER_METRICS_LISTEN": "0.0.0.0:9465", "PARITY_PROMETHEUS_SD_DIR": sd_dir})
    out = env["FAKE_WORKER_OUT"]
    # Its own session, so the test can be sure nothing it started outlives it.
    proc = subprocess.Popen(["bash", script], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        started = wait_for(lambda: len([f for f in os.listdir(out) if f.endswith(".json")]) == NODES, 20)
        if not started:
            problems.append(f"not every node's worker started within 20 s: {sorted(os.listdir(out))}")
            return
        work_dirs = []
        sd_files = sorted(os.listdir(sd_dir))
        want_sd = sorted(f"4242_node{i}.json" for i in range(NODES))
        if sd_files != want_sd:
            problems.append(f"file_sd targets {sd_files}, expected {want_sd}")
        for i in range(NODES):
            with open(os.path.join(out, f"node{i}.json"), encoding="utf-8") as f:
                seen = json.load(f)
            argv, wenv, where = seen["argv"], seen["env"], f"node{i}"
            for name, want in (("--scheduler", ["scheduler.example:50051"]),
                               ("--checkpoint-dir", [env["PARITY_CHECKPOINT_DIR"]]),
                               ("--threads", ["32"]), ("--rendezvous-host", ["127.0.0.1"])):
                if flag(argv, name) != want:
                    problems.append(f"{where}: {name} {flag(argv, name)}, expected {want}")
            labels = sorted(flag(argv, "--label"))
            want_labels = sorted(["slurm_job=4242", f"slurm_node=node{i}", "gang_pool=slurm-4242"])
            if labels != want_labels:
                problems.append(f"{where}: labels {labels}, expected {want_labels}")
            if wenv.get("NCCL_SOCKET_IFNAME") != "=lo":
                problems.append(f"{where}: NCCL_SOCKET_IFNAME={wenv.get('NCCL_SOCKET_IFNAME')!r}, expected '=lo'")
            if wenv.get("NCCL_IB_HCA") != "mlx5_0,mlx5_1":
                problems.append(f"{where}: NCCL_IB_HCA did not reach the worker: {wenv.get('NCCL_IB_HCA')!r}")
            if any("token" in w.lower() and w.startswith("--") for w in argv):
                problems.append(f"{where}: a token flag on the worker's command line: {argv}")
            work_dirs.append(flag(argv, "--work-dir"))
        if len({tuple(w) for w in work_dirs}) != NODES or any(len(w) != 1 for w in work_dirs):
            problems.append(f"the workers' --work-dir {work_dirs}: expected one of its own each")
        # A signal to the batch shell alone is passed to no one (through srun it would kill).
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(1.0)
        if proc.poll() is not None or any(f.endswith(".terminated") for f in os.listdir(out)):
            problems.append("SIGTERM to the batch shell stopped workers or the script: through "
                            "srun, that is a SIGKILL of every task")
            return
        # What Slurm sends at the time limit (--signal=TERM@120) and `scancel --signal=TERM`
        # sends: SIGTERM to every process of the step.
        with open(env["FAKE_STEP_GROUPS"], encoding="utf-8") as f:
            for group in f.read().split():
                os.killpg(int(group), signal.SIGTERM)
        try:
            status = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            problems.append("the script did not end within 20 s of SIGTERM to the step")
            return
        terminated = sorted(f for f in os.listdir(out) if f.endswith(".terminated"))
        if len(terminated) != NODES:
            problems.append(f"SIGTERM to the step stopped {terminated} gracefully, not every "
                            "node's worker")
        if status != 3:
            problems.append(f"exit status {status} after SIGTERM, expected the workers' 3; the "
                            f"script said:\n{proc.stdout.read()}")
        if os.listdir(sd_dir):
            problems.append(f"file_sd targets left behind: {os.listdir(sd_dir)}")
    finally:
        # The whole session: a script that failed to pass SIGTERM on leaves srun and workers.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        proc.stdout.close()


def check_refusals(script, tmp, problems):
    env = base_env(tmp)
    env["PARITY_RENDEZVOUS_INTERFACE"] = "parity-no-such-if0"
    done = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=30)
    if done.returncode == 0 or "PARITY_RENDEZVOUS_INTERFACE=parity-no-such-if0" not in done.stderr:
        problems.append(f"an interface without an address was not refused by name: rc "
                        f"{done.returncode}, stderr {done.stderr.strip()!r}")
    if os.listdir(env["FAKE_WORKER_OUT"]):
        problems.append("a worker started although its interface had no address")
    env = base_env(tmp)
    env["PARITY_RENDEZVOUS_HOST"] = "10.0.0.1"
    done = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=30)
    if done.returncode == 0 or "PARITY_RENDEZVOUS_INTERFACE" not in done.stderr:
        problems.append(f"one PARITY_RENDEZVOUS_HOST for {NODES} nodes was not refused: rc "
                        f"{done.returncode}, stderr {done.stderr.strip()!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    args = parser.parse_args()
    script = os.path.join(os.path.abspath(args.root), "deploy", "slurm", "parity-gang-workers.sbatch")
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "bin"))
        os.makedirs(os.path.join(tmp, "out"))
        write_exec(os.path.join(tmp, "bin", "srun"), FAKE_SRUN)
        write_exec(os.path.join(tmp, "bin", "fake-worker"), FAKE_WORKER)
        check_run(script, tmp, problems)
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "bin"))
        os.makedirs(os.path.join(tmp, "out"))
        write_exec(os.path.join(tmp, "bin", "srun"), FAKE_SRUN)
        write_exec(os.path.join(tmp, "bin", "fake-worker"), FAKE_WORKER)
        check_refusals(script, tmp, problems)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"ok: {NODES} nodes' workers started with their rendezvous address, stopped by SIGTERM")
    return 0


if __name__ == "__main__":
    sys.exit(main())
