"""A Parity stack made of real processes, for the fault tests (tests/faults) and the chaos soak
(bench/chaos): a private PostgreSQL cluster, parity-scheduler, parity-worker daemons training with
parity-train, each started in its own process group and, optionally, inside a network namespace
(`ip netns exec NS ...`), plus the checks the two share: a run's stored curve against the one the
engine logs when it trains the same spec undisturbed, bit for bit.

Standard library only; PostgreSQL is queried with the psql CLI over its unix socket (which the
network namespaces do not isolate, so the observer is never cut off by a fault under test).
"""
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import time

LOG_T0 = time.monotonic()


def log(message):
    print(f"[{time.monotonic() - LOG_T0:7.1f}s] {message}", flush=True)


class CheckFailed(Exception):
    """A property the test or soak exists to check did not hold."""


def sh(argv, check=True, timeout=120, **kwargs):
    """Runs argv, returning CompletedProcess with text output; raises on failure when `check`."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and result.returncode != 0:
        raise RuntimeError(f"`{shlex.join(argv)}` failed ({result.returncode}): "
                           f"{result.stdout}{result.stderr}")
    return result


def netns_prefix(namespace):
    return ["ip", "netns", "exec", namespace] if namespace else []


def pg_bin_dir():
    env = os.environ.get("PARITY_PG_BIN")
    if env:
        return env
    for version in (17, 16, 15):
        candidate = f"/usr/lib/postgresql/{version}/bin"
        if os.path.exists(os.path.join(candidate, "pg_ctl")):
            return candidate
    return "/usr/lib/postgresql/15/bin"


def synthetic_corpus(size):
    """The corpus of tests/e2e/local_stack.cc (SyntheticCorpus), byte for byte: words from a
    small vocabulary picked by xorshift64, so runs need no downloaded data."""
    words = ["and", "the", "of", "that", "he", "unto", "in", "shall", "for", "lord", "his",
             "they", "be", "is", "him", "not", "them", "it", "with", "all", "thou", "thy", "was",
             "god", "which", "my", "me", "said", "but", "ye"]
    mask = (1 << 64) - 1
    x = 88172645463325252
    parts = []
    total = 0
    while total < size:
        x ^= (x << 13) & mask
        x ^= x >> 7
        x ^= (x << 17) & mask
        word = words[x % 30]
        sep = ".\n" if (x >> 20) % 11 == 0 else " "
        parts.append(word)
        parts.append(sep)
        total += len(word) + len(sep)
    return "".join(parts)


class Process:
    """One daemon in its own process group (so that kill -9 takes its children along), output
    appended to `log_path` (a restart keeps the earlier lines)."""

    def __init__(self, name, argv, log_path, env=None, namespace=None, cwd=None):
        self.name = name
        self.log_path = log_path
        full_env = dict(os.environ)
        full_env.update(env or {})
        with open(log_path, "ab") as out:
            out.write(f"==== {time.strftime('%H:%M:%S')} start: {shlex.join(argv)}\n".encode())
            out.flush()
            self.popen = subprocess.Popen(netns_prefix(namespace) + argv, stdout=out,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=full_env, cwd=cwd, start_new_session=True)

    @property
    def pid(self):
        return self.popen.pid

    def alive(self):
        return self.popen.poll() is None

    def kill_group(self, sig=signal.SIGKILL):
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, timeout=15):
        """SIGTERM to the group, SIGKILL after `timeout`; returns the exit code."""
        if self.alive():
            self.kill_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill_group(signal.SIGKILL)
        self.kill_group(signal.SIGKILL)  # anything the leader left behind in its group
        return self.popen.wait(10)

    def kill9(self):
        self.kill_group(signal.SIGKILL)
        return self.popen.wait(10)


class Postgres:
    """A private cluster in `root`, listening on `host:port` (TCP, inside `namespace` when given)
    and on a unix socket in root/sock (what psql here uses). Synchronous commit stays on, so a
    crash (stop -m immediate) loses nothing the scheduler was told is committed; fsync is off,
    which only matters if the machine itself goes down."""

    def __init__(self, root, host, port, namespace=None):
        self.bin = pg_bin_dir()
        self.root = root
        self.data = os.path.join(root, "data")
        self.sock = os.path.join(root, "sock")
        self.host = host
        self.port = port
        self.namespace = namespace
        self.as_postgres = os.geteuid() == 0
        os.makedirs(self.sock, exist_ok=True)
        if self.as_postgres:
            user = pwd.getpwnam("postgres")
            for path in (root, self.sock):
                os.chown(path, user.pw_uid, user.pw_gid)

    def _as_user(self, argv):
        return (["runuser", "-u", "postgres", "--"] if self.as_postgres else []) + argv

    def init(self):
        sh(self._as_user([f"{self.bin}/initdb", "-D", self.data, "-A", "trust", "-U", "postgres",
                          "-E", "UTF8", "--no-sync"]))
        # initdb trusts only 127.0.0.1 over TCP; the scheduler may come from any loopback-range
        # address (its own namespace's).
        with open(os.path.join(self.data, "pg_hba.conf"), "a") as hba:
            hba.write("host all all 127.0.0.0/8 trust\n")

    def start(self):
        options = (f"-k {self.sock} -p {self.port} -c listen_addresses={self.host} -c fsync=off "
                   "-c full_page_writes=off -c max_connections=200")
        sh(netns_prefix(self.namespace) + self._as_user(
            [f"{self.bin}/pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "postgres.log"),
             "-w", "-t", "60", "-o", options, "start"]))

    def stop(self, mode="fast"):
        sh(self._as_user([f"{self.bin}/pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60",
                          "stop"]), check=False)

    def createdb(self, name):
        sh([f"{self.bin}/createdb", "-h", self.sock, "-p", str(self.port), "-U", "postgres", name])

    def url(self, name):
        """What the scheduler connects with: TCP, so that a network fault between them is real."""
        return f"host={self.host} port={self.port} user=postgres dbname={name}"

    def query(self, sql, db="parity", retries=30):
        """Rows as lists of text fields (psql -tAX, tab-separated; NULL as ''). Retries while the
        server is down (the soak restarts it)."""
        for attempt in range(retries):
            result = subprocess.run(
                [f"{self.bin}/psql", f"host={self.sock} port={self.port} user=postgres dbname={db}",
                 "-tAX", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                capture_output=True, text=True, timeout=60)
            if result.returncode == 0:
                return [line.split("\t") for line in result.stdout.splitlines() if line != ""]
            # The server down, starting, recovering or shutting down (the soak crashes it).
            transient = ("connection to server" in result.stderr
                         or "could not connect" in result.stderr
                         or "terminating connection" in result.stderr
                         or "server closed the connection" in result.stderr)
            if not transient or attempt == retries - 1:
                raise RuntimeError(f"psql failed: {sql}\n{result.stderr}")
            time.sleep(0.5)
        raise AssertionError("unreachable")


def sweep_yaml(name, moe_rates, compute, seeds, log_every=5, eval_every=25,
               checkpoint_every=25, baselines=False):
    """The micro example cut down (the shape tests/e2e uses): tiny all-MoE models at the given
    activation rates, one compute budget, unique data, one CPU thread per run."""
    moe = "".join(f"    - {{target_activation_rate: {r}}}\n" for r in moe_rates)
    seed_list = ", ".join(str(s) for s in seeds)
    text = f"""name: {name}
moe:
  d_model: 64
  num_layers: 2
  num_heads: 4
  moe:
    layout: all-moe
    total_ffn_ratio: 16
    granularity: 4
    router:
      balance: aux_loss
dense:
  d_model: 128
  num_layers: 2
  num_heads: 8
  ffn_hidden: 384
training:
  rule: explicit
  learning_rate: 3e-3
  batch_tokens: 64
  sequence_length: 64
  schedule: cosine
  log_every_steps: {log_every}
  eval_every_steps: {eval_every}
  eval_tokens: 2048
  checkpoint_every_steps: {checkpoint_every}
  threads: 1
data:
  corpus: kjv
  validation_fraction: 0.01
grid:
  moe:
{moe}  compute:
    - {{name: C1, compute_flops: {compute}}}
  data:
    - {{name: unique, reuse: unique}}
  seeds: [{seed_list}]
resources:
  cpu_threads: 1
"""
    if baselines:
        text += ("baselines:\n  - {name: dense-1C, compute_multiple: 1}\n")
    return text


class Stack:
    """PostgreSQL + scheduler + workers. Namespaces (or None for the host's) and addresses are the
    caller's: `pg_ns`, `sched_ns`, `worker_ns(i)`; `sched_host` is the scheduler's address as the
    workers reach it."""

    def __init__(self, root, binaries, pg, sched_host, sched_port, sched_ns=None,
                 worker_ns=lambda i: None, lease_ttl="3s", heartbeat="500ms", reap="500ms",
                 worker_extra=None):
        self.root = root
        self.bin = binaries
        self.pg = pg
        self.sched_host = sched_host
        self.sched_port = sched_port
        self.sched_ns = sched_ns
        self.worker_ns = worker_ns
        self.lease_ttl, self.heartbeat, self.reap = lease_ttl, heartbeat, reap
        self.worker_extra = worker_extra or []
        self.scheduler = None
        self.workers = {}
        os.makedirs(os.path.join(root, "corpus"), exist_ok=True)
        os.makedirs(os.path.join(root, "checkpoints"), exist_ok=True)
        os.makedirs(os.path.join(root, "logs"), exist_ok=True)
        with open(os.path.join(root, "corpus", "kjv.txt"), "w") as corpus:
            corpus.write(synthetic_corpus(2 << 20))
        # The admin token: the scheduler stores it at its first start (--bootstrap-token-file);
        # the workers and the CLI send it.
        self.token_file = os.path.join(root, "admin.token")
        with open(os.path.join(root, "admin.token"), "w") as token:
            token.write("parity_faults-admin-" + os.urandom(16).hex() + "\n")
        # Only its owner may read it: the scheduler refuses a bootstrap file others could read.
        os.chmod(self.token_file, 0o600)

    @property
    def target(self):
        return f"{self.sched_host}:{self.sched_port}"

    def log_path(self, name):
        return os.path.join(self.root, "logs", name + ".log")

    def start_scheduler(self, timeout=60):
        self.scheduler = self.launch_scheduler("scheduler", self.target, {}, timeout)

    def launch_scheduler(self, name, address, extra_env, timeout=60):
        """A parity-scheduler process listening on `address`, logging to logs/NAME.log, once the
        worker's probe reaches it (RuntimeError with its log's tail when it does not)."""
        process = Process(name, [self.bin["scheduler"], "serve"], self.log_path(name),
                          namespace=self.sched_ns, env={
                              "PARITY_LISTEN": address,
                              "PARITY_DATABASE_URL": self.pg.url("parity"),
                              "PARITY_LEASE_TTL": self.lease_ttl,
                              "PARITY_HEARTBEAT_INTERVAL": self.heartbeat,
                              "PARITY_REAP_INTERVAL": self.reap,
                              "PARITY_METRICS_LISTEN": "127.0.0.1:0",
                              "PARITY_HTTP_LISTEN": "127.0.0.1:0",
                              "PARITY_BOOTSTRAP_TOKEN_FILE": self.token_file,
                              **extra_env,
                          })
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            probe = subprocess.run(netns_prefix(self.sched_ns) + [
                self.bin["worker"], "--probe", "--scheduler", address],
                capture_output=True, timeout=30)
            if probe.returncode == 0:
                return process
            if not process.alive():
                break
            time.sleep(0.2)
        process.kill9()
        raise RuntimeError(f"{name} not healthy; log:\n{self.tail(name)}")

    def kill_scheduler(self):
        if self.scheduler:
            self.scheduler.kill9()
        self.scheduler = None

    def stop_scheduler(self):
        if self.scheduler:
            self.scheduler.stop()
        self.scheduler = None

    def start_worker(self, index):
        work = os.path.join(self.root, f"work-{index}")
        argv = [self.bin["worker"], "--scheduler", self.target,
                "--checkpoint-dir", os.path.join(self.root, "checkpoints"),
                "--work-dir", work, "--corpus-dir", os.path.join(self.root, "corpus"),
                "--train-binary", self.bin["engine"], "--threads", "1", "--max-runs", "1",
                "--lease-wait", "2", "--kill-grace", "5", "--no-gpus",
                "--label", f"faults={index}", "--token-file", self.token_file] + self.worker_extra
        self.workers[index] = Process(f"worker-{index}", argv, self.log_path(f"worker-{index}"),
                                      namespace=self.worker_ns(index), cwd=self.root)

    def worker_id(self, index, timeout=30):
        """The id the scheduler gave worker `index` (saved in its work dir)."""
        path = os.path.join(self.root, f"work-{index}", "worker-id")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(path):
                text = open(path).read().strip()
                if text:
                    return text
            time.sleep(0.1)
        raise RuntimeError(f"worker-{index} did not register; log:\n"
                           f"{self.tail(f'worker-{index}')}")

    def kill_worker(self, index):
        self.workers.pop(index).kill9()

    def stop_all(self):
        for worker in list(self.workers.values()):
            worker.stop(timeout=10)
        self.workers.clear()
        self.stop_scheduler()

    def tail(self, name, chars=4000):
        try:
            with open(self.log_path(name), errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return "<no log>"

    def submit(self, yaml_text, name):
        path = os.path.join(self.root, f"{name}.yaml")
        with open(path, "w") as f:
            f.write(yaml_text)
        for attempt in range(20):
            result = subprocess.run(netns_prefix(self.sched_ns) + [
                self.bin["cli"], "submit", "--scheduler", self.target, "--owner", "faults",
                "--token-file", self.token_file,
                "--idempotency-key", name, path], capture_output=True, text=True, timeout=60)
            if result.returncode == 0:
                break
            if attempt == 19:
                raise RuntimeError(f"submit failed: {result.stdout}{result.stderr}")
            time.sleep(1)
        rows = self.pg.query(f"SELECT sweep_id FROM sweeps WHERE name = '{name}'")
        if len(rows) != 1:
            raise RuntimeError(f"sweep {name} not found after submit: {rows}")
        return rows[0][0]

    def sweep_state(self, sweep):
        return self.pg.query(f"SELECT state FROM sweeps WHERE sweep_id = '{sweep}'")[0][0]

    def wait_sweep_ended(self, sweep, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sweep_state(sweep) != "ACTIVE":
                return True
            time.sleep(0.5)
        return False

    def runs(self, sweep):
        """Each run of the sweep as a dict of its row's main columns."""
        cols = ["run_id", "name", "state", "attempt", "lease_epoch", "lease_owner",
                "checkpoint_step", "checkpoint_uri", "latest_step", "final_val_bpc",
                "summary_steps", "failure_class", "failure_message"]
        rows = self.pg.query(f"SELECT {', '.join(cols)} FROM runs WHERE sweep_id = '{sweep}' "
                             "ORDER BY ordinal")
        return [dict(zip(cols, row)) for row in rows]

    def run_spec_file(self, run_id):
        """The spec a worker trained `run_id` from (the engine's --run file, corpus resolved)."""
        for entry in sorted(os.listdir(self.root)):
            directory = os.path.join(self.root, entry, run_id)
            if entry.startswith("work-") and os.path.isdir(directory):
                for name in sorted(os.listdir(directory)):
                    if re.fullmatch(r"run-attempt\d+\.json", name):
                        return os.path.join(directory, name)
        raise RuntimeError(f"no run-attempt*.json for run {run_id} in any work dir")


def train_reference(engine, spec_file, out_dir, nice=0):
    """Starts parity-train on `spec_file` undisturbed, as the worker starts it (one thread, fresh
    directory), metrics to out_dir/metrics.jsonl. Returns the Popen; see read_reference."""
    os.makedirs(out_dir, exist_ok=True)
    shutil.copy(spec_file, os.path.join(out_dir, "run.json"))
    argv = [engine, "--run", os.path.join(out_dir, "run.json"), "--out",
            os.path.join(out_dir, "ckpt"), "--threads", "1", "--metrics",
            os.path.join(out_dir, "metrics.jsonl")]
    if nice:
        argv = ["nice", "-n", str(nice)] + argv
    log_file = open(os.path.join(out_dir, "engine.log"), "wb")
    return subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT)


def read_reference(out_dir):
    """(points by step: (train_bpc, val_bpc or None), summary dict) of a finished reference."""
    points, summary = {}, None
    metrics = os.path.join(out_dir, "metrics.jsonl")
    if not os.path.exists(metrics):
        try:
            with open(os.path.join(out_dir, "engine.log"), errors="replace") as f:
                tail = f.read()[-3000:]
        except OSError as e:
            tail = f"<no engine.log: {e}>"
        raise RuntimeError(f"reference in {out_dir} wrote no metrics.jsonl; its engine.log ends:\n"
                           f"{tail}\n(files: {sorted(os.listdir(out_dir))})")
    with open(metrics) as f:
        for line in f:
            record = json.loads(line)
            if record.get("event") == "metrics":
                points[int(record["step"])] = (record["train_bpc"], record.get("val_bpc"))
            elif record.get("event") == "summary":
                summary = record
    if summary is None:
        raise RuntimeError(f"reference in {out_dir} has no summary (did the engine fail?)")
    return points, summary


def stored_points(pg, run_id):
    """The run's stored curve: step -> (train_bpc, val_bpc or None, lease_epoch)."""
    rows = pg.query("SELECT step, train_bpc, coalesce(val_bpc::text, ''), lease_epoch FROM metrics "
                    f"WHERE run_id = '{run_id}' ORDER BY step")
    return {int(s): (float(t), float(v) if v != "" else None, int(e)) for s, t, v, e in rows}


def compare_with_reference(pg, run, reference_dir):
    """Problems (empty when none) between a SUCCEEDED run's stored curve and final BPC and those
    of the same spec trained undisturbed: the same steps (so none missing, none twice: the key
    is (run, step)), each with bit-identical train and validation BPC, the same final BPC."""
    problems = []
    ref_points, ref_summary = read_reference(reference_dir)
    stored = stored_points(pg, run["run_id"])
    missing = sorted(set(ref_points) - set(stored))
    extra = sorted(set(stored) - set(ref_points))
    if missing:
        problems.append(f"{len(missing)} logged steps missing from the stored curve "
                        f"(first {missing[:8]})")
    if extra:
        problems.append(f"{len(extra)} stored steps the undisturbed run never logs "
                        f"(first {extra[:8]})")
    differing = [s for s in sorted(set(ref_points) & set(stored))
                 if (stored[s][0], stored[s][1]) != tuple(ref_points[s])]
    if differing:
        s = differing[0]
        problems.append(f"{len(differing)} steps differ from the undisturbed run, first step {s}: "
                        f"stored {stored[s][:2]!r} vs undisturbed {tuple(ref_points[s])!r}")
    final = float(run["final_val_bpc"]) if run["final_val_bpc"] else None
    if final != ref_summary["final_val_bpc"]:
        problems.append(f"final validation BPC {final!r} differs from the undisturbed run's "
                        f"{ref_summary['final_val_bpc']!r}")
    return problems
