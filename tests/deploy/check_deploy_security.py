#!/usr/bin/env python3
"""Checks that the shipped deployments (deploy/kubernetes, deploy/systemd, deploy/slurm) keep
Parity's security rules. Structure only: no cluster, no network, no systemd needed.

Kubernetes (every document of every *.yaml under deploy/kubernetes/):
  - every container (init containers too): runAsNonRoot, non-zero runAsUser and runAsGroup,
    seccompProfile RuntimeDefault (its own or the pod's), readOnlyRootFilesystem,
    allowPrivilegeEscalation false, capabilities drop ALL and add none, not privileged; no
    hostNetwork/hostPID/hostIPC, no hostPath volume, no service-account token mounted;
  - every container has requests and limits for cpu and memory; an extended resource
    (nvidia.com/gpu) requested equals its limit; the worker has its nvidia.com/gpu limit;
  - every image has an explicit tag other than latest (or a digest), and one image repository is
    used with one reference throughout;
  - every writable mount is an emptyDir or a PVC; every container mounts /tmp; the worker's
    checkpoint and work directories are writable mounts; a file an env var names (*_FILE,
    PARITY_TLS_*) lies in a mounted volume (and among its items);
  - secrets: PARITY_DATABASE_URL and PARITY_TOKEN only from secretKeyRef, only the scheduler
    gets the database URL; no variable named like a secret has a literal value; no database URL,
    --database-url, --token VALUE or --insecure-plaintext in command/args/env; the worker's token
    comes from a Secret through a variable the programs read (PARITY_TOKEN or PARITY_TOKEN_FILE);
    the scheduler's TLS certificate and key from the Secret parity-scheduler-tls, read-only; keys
    taken from a Secret that secrets.yaml templates exist in it;
  - every PARITY_* variable set is one that some C++ source reads (no dead configuration);
  - NetworkPolicy, evaluated: default-deny ingress; the scheduler's gRPC port admits workers and
    pods labelled parity.dev/client: "true" and nothing else; its HTTP port and the workers'
    metrics port admit Prometheus (namespace monitoring, app.kubernetes.io/name: prometheus) and
    nothing else; workers may egress to the scheduler's gRPC port, DNS, and other workers' gang
    ports, nothing else; a PostgreSQL pod, if any, admits only the scheduler;
  - gangs: the worker pod pins its ephemeral port range (sysctl net.ipv4.ip_local_port_range),
    workers admit and reach other workers of the namespace on exactly that range (its ends and
    middle in, the ports just outside it out) and nobody else does (strangers, other namespaces,
    the scheduler, Prometheus); the worker announces its pod IP as PARITY_RENDEZVOUS_HOST
    (fieldRef status.podIP: the default 0.0.0.0 is reported by a host name other pods cannot
    resolve);
  - Services select existing pods and name their ports; deploy/prometheus/prometheus-kubernetes.yml
    scrapes Service ports that exist, over https with credentials where the pod serves TLS.
systemd (deploy/systemd/*.service with their drop-ins NAME.d/*.conf, *.env.example) and the
"systemd" section of deploy/README.md:
  - no database URL, --database-url, --token VALUE or --insecure-plaintext on an Exec line or in
    Environment=; the database URL only in scheduler.env.example;
  - User= not root; NoNewPrivileges, ProtectSystem=strict, ProtectHome, PrivateTmp, an empty
    CapabilityBoundingSet; workers keep their GPUs (no PrivateDevices=true; a closed device
    policy allows nvidia devices) and can write their checkpoint and work directories;
  - the worker token via LoadCredential= and PARITY_TOKEN_FILE=%d/NAME, the scheduler's TLS key
    via LoadCredential=; the bootstrap token file in a writable directory; where an example turns
    the worker's metrics port on, its scrape secret via LoadCredential= too
    (PARITY_WORKER_METRICS_TOKEN_FILE=%d/NAME), never a file the worker's User= cannot read;
  - every secret file the units read (EnvironmentFile=, LoadCredential=) and the Prometheus
    token are installed by the README with `install -m 0600`, and nothing is copied into
    /etc/parity any other way;
  - `systemd-analyze verify` prints nothing (when systemd-analyze exists; the executables are
    replaced by /bin/true, as they are not installed here);
  - every Slurm script passes `bash -n`, puts no token on the worker's command line, and handles
    the end of its allocation: an `#SBATCH --signal=...TERM@...` and, where the worker runs in
    the batch shell, a `trap` of TERM that passes it on; a script whose workers run in an srun
    step has Slurm signal the step (no `B:`) and never passes SIGTERM to srun (which SIGKILLs
    its tasks on one); every worker gets a `--work-dir` of its own, naming the job and the task
    or node.
Exit status 0 when all holds; 1 with one line per problem otherwise.

  check_deploy_security.py --root SOURCE_DIR
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    sys.exit("check_deploy_security.py needs PyYAML: apt-get install python3-yaml (deploy/setup.sh)")

NAMESPACE = "parity"
WORKLOADS = {"Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod"}
CLIENT_LABELS = {"parity.dev/client": "true"}
PROMETHEUS = ({"kubernetes.io/metadata.name": "monitoring"}, {"app.kubernetes.io/name": "prometheus"})
KUBE_DNS = ({"kubernetes.io/metadata.name": "kube-system"}, {"k8s-app": "kube-dns"})
STRANGER = ({"kubernetes.io/metadata.name": NAMESPACE}, {"app": "something-else"})
OUTSIDER = ({"kubernetes.io/metadata.name": "default"}, {"app": "parity-worker"})
DB_URL = re.compile(r"postgres(ql)?://", re.I)
SECRET_NAME = re.compile(r"(TOKEN|PASSWORD|SECRET|DATABASE_URL|_KEY)$")
TOKEN_FLAG = re.compile(r"--token(=|\s+|$)")


def is_secret_name(name):
    """A variable that would hold a secret itself (not the path of a file holding one)."""
    return bool(SECRET_NAME.search(name)) and not name.endswith("_FILE") and \
        not name.startswith("PARITY_TLS_")


class Problems(list):
    def add(self, where, text):
        self.append(f"{where}: {text}")


# --- Kubernetes ---------------------------------------------------------------------------------

def load_manifests(directory, problems):
    docs = []
    for path in sorted(glob.glob(os.path.join(directory, "**", "*.y*ml"), recursive=True)):
        rel = os.path.relpath(path, os.path.dirname(os.path.dirname(directory)))
        try:
            with open(path, encoding="utf-8") as f:
                loaded = list(yaml.safe_load_all(f))
        except (OSError, yaml.YAMLError) as e:
            problems.add(rel, f"not readable YAML: {e}")
            continue
        for doc in loaded:
            if doc is None:
                continue
            if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion"):
                problems.add(rel, "a document without kind/apiVersion")
                continue
            meta = doc.get("metadata") or {}
            where = f"{rel}: {doc['kind']}/{meta.get('name', '?')}"
            if not meta.get("name"):
                problems.add(where, "no metadata.name")
            if doc["kind"] != "Namespace" and meta.get("namespace") != NAMESPACE:
                problems.add(where, f"namespace is not {NAMESPACE}")
            docs.append((where, doc))
    if not docs:
        problems.add(directory, "no manifests found")
    return docs


def pod_template(doc):
    """(pod metadata, pod spec) of a workload."""
    kind, spec = doc["kind"], doc.get("spec") or {}
    if kind == "Pod":
        return doc.get("metadata") or {}, spec
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = spec.get("template") or {}
    return template.get("metadata") or {}, template.get("spec") or {}


def all_containers(spec):
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            yield container


def program(container):
    words = list(container.get("command") or []) + list(container.get("args") or [])
    return os.path.basename(str(words[0])) if words else ""


def env_map(container):
    return {e.get("name"): e for e in container.get("env") or []}


def flag_value(container, flag):
    words = [str(w) for w in list(container.get("command") or []) + list(container.get("args") or [])]
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None


def setting(container, flag, env):
    value = flag_value(container, flag)
    if value is None:
        entry = env_map(container).get(env) or {}
        value = entry.get("value")
    return value


def under(path, root):
    path, root = os.path.normpath(path), os.path.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def check_security_context(where, pod_spec, container, problems):
    pod_sc = pod_spec.get("securityContext") or {}
    sc = container.get("securityContext") or {}

    def effective(key):
        return sc[key] if key in sc else pod_sc.get(key)

    if effective("runAsNonRoot") is not True:
        problems.add(where, "securityContext.runAsNonRoot is not true")
    for key in ("runAsUser", "runAsGroup"):
        value = effective(key)
        if not isinstance(value, int) or value <= 0:
            problems.add(where, f"securityContext.{key} must be a non-zero uid/gid, got {value!r}")
    if (effective("seccompProfile") or {}).get("type") != "RuntimeDefault":
        problems.add(where, "securityContext.seccompProfile.type is not RuntimeDefault")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.add(where, "securityContext.readOnlyRootFilesystem is not true")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.add(where, "securityContext.allowPrivilegeEscalation is not false")
    if sc.get("privileged"):
        problems.add(where, "privileged")
    caps = sc.get("capabilities") or {}
    if "ALL" not in (caps.get("drop") or []):
        problems.add(where, "securityContext.capabilities.drop lacks ALL")
    if caps.get("add"):
        problems.add(where, f"adds capabilities {caps['add']}")


def check_resources(where, container, problems):
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    for kind, table in (("requests", requests), ("limits", limits)):
        for resource in ("cpu", "memory"):
            if resource not in table:
                problems.add(where, f"resources.{kind}.{resource} missing")
    for resource, value in requests.items():
        if "/" in resource and str(limits.get(resource)) != str(value):
            problems.add(where, f"{resource} requested ({value}) differs from its limit")


def image_reference(where, image, problems, seen):
    if not image:
        problems.add(where, "no image")
        return
    name, digest = (image.split("@", 1) + [""])[:2]
    last = name.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    repository = name[: len(name) - len(tag) - 1] if tag else name
    if digest and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        problems.add(where, f"image {image}: malformed digest")
    if not tag and not digest:
        problems.add(where, f"image {image} has no tag: pin a version")
    if tag == "latest":
        problems.add(where, f"image {image} uses the tag latest: pin a version")
    if repository in seen and seen[repository][1] != image:
        problems.add(where, f"image {image} differs from {seen[repository][1]} in {seen[repository][0]}")
    seen.setdefault(repository, (where, image))


def check_mounts(where, pod_spec, container, problems):
    volumes = {v.get("name"): v for v in pod_spec.get("volumes") or []}
    mounts = container.get("volumeMounts") or []
    writable = []
    for mount in mounts:
        volume = volumes.get(mount.get("name"))
        if volume is None:
            problems.add(where, f"volumeMount {mount.get('name')} has no volume")
            continue
        if mount.get("readOnly"):
            continue
        if "emptyDir" in volume or "persistentVolumeClaim" in volume or "ephemeral" in volume:
            writable.append(mount.get("mountPath", ""))
        elif any(k in volume for k in ("secret", "configMap", "projected", "downwardAPI")):
            problems.add(where, f"mount {mount.get('mountPath')} of {mount.get('name')} is not readOnly")
        else:
            problems.add(where, f"writable mount {mount.get('mountPath')} is neither emptyDir nor PVC")
    if "/tmp" not in [os.path.normpath(m.get("mountPath", "")) for m in mounts]:
        problems.add(where, "no writable /tmp mount (the root file system is read-only)")
    if program(container) == "parity-worker":
        for flag, env in (("--checkpoint-dir", "PARITY_CHECKPOINT_DIR"), ("--work-dir", "PARITY_WORK_DIR")):
            value = setting(container, flag, env)
            if not value or not value.startswith("/"):
                problems.add(where, f"{flag}/{env} must be set to an absolute path (a mounted volume)")
            elif not any(under(value, m) for m in writable):
                problems.add(where, f"{flag} {value} is not on a writable emptyDir/PVC mount")
    # Files named by the environment must be in a mounted volume (and among its items).
    for name, entry in env_map(container).items():
        value = entry.get("value")
        if not isinstance(value, str) or not value.startswith("/"):
            continue
        if not (name.endswith("_FILE") or name.startswith("PARITY_TLS_")):
            continue
        mount = max((m for m in mounts if under(value, m.get("mountPath", "/nonexistent"))),
                    key=lambda m: len(m.get("mountPath", "")), default=None)
        if mount is None:
            problems.add(where, f"{name}={value} is in no mounted volume")
            continue
        volume = volumes.get(mount.get("name")) or {}
        source = volume.get("secret") or volume.get("configMap") or {}
        items = [i.get("path") for i in source.get("items") or []]
        rel = os.path.relpath(value, mount.get("mountPath"))
        if items and rel not in items:
            problems.add(where, f"{name}={value}: {mount.get('name')} projects only {items}")


def secret_sources(pod_spec, container):
    """(secret name, key) for every env var from a Secret, and mount path -> secret name."""
    env = {}
    for name, entry in env_map(container).items():
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            env[name] = (ref.get("name"), ref.get("key"))
    volumes = {v.get("name"): v for v in pod_spec.get("volumes") or []}
    mounted = {}
    for mount in container.get("volumeMounts") or []:
        secret = (volumes.get(mount.get("name")) or {}).get("secret")
        if secret:
            mounted[mount.get("mountPath")] = (secret.get("secretName"), mount.get("readOnly") is True,
                                               [i.get("key") for i in secret.get("items") or []])
    return env, mounted


def check_secrets(where, pod_spec, container, problems, secret_keys):
    words = [str(w) for w in list(container.get("command") or []) + list(container.get("args") or [])]
    line = " ".join(words)
    if "--database-url" in line or DB_URL.search(line):
        problems.add(where, "a database URL or --database-url in command/args (use the Secret's env var)")
    if TOKEN_FLAG.search(line):
        problems.add(where, "--token on the command line (use PARITY_TOKEN_FILE or a secretKeyRef)")
    if "--insecure-plaintext" in line:
        problems.add(where, "--insecure-plaintext: serve TLS instead")
    env_from_secret, mounted = secret_sources(pod_spec, container)
    for name, entry in env_map(container).items():
        value = entry.get("value")
        if value is not None and DB_URL.search(str(value)):
            problems.add(where, f"env {name} holds a database URL literal")
        if name == "PARITY_INSECURE_PLAINTEXT":
            problems.add(where, "PARITY_INSECURE_PLAINTEXT: serve TLS instead")
        if is_secret_name(name or "") and name not in env_from_secret:
            problems.add(where, f"env {name} looks secret but is not from a secretKeyRef")
    for name, (secret, key) in env_from_secret.items():
        if secret in secret_keys and key not in secret_keys[secret]:
            problems.add(where, f"env {name}: Secret {secret} (secrets.yaml) has no key {key}")
    for path, (secret, read_only, keys) in mounted.items():
        if not read_only:
            problems.add(where, f"Secret {secret} mounted at {path} without readOnly")
        for key in keys:
            if secret in secret_keys and key not in secret_keys[secret]:
                problems.add(where, f"mount {path}: Secret {secret} (secrets.yaml) has no key {key}")
    if "PARITY_DATABASE_URL" in env_map(container) and program(container) != "parity-scheduler":
        problems.add(where, "PARITY_DATABASE_URL given to something other than parity-scheduler")
    return env_from_secret, mounted


def secret_file(env, env_from_secret, mounted, file_var):
    """The Secret behind a *_FILE variable's path, or None."""
    path = (env.get(file_var) or {}).get("value")
    if not path:
        return None
    for mount_path, (secret, _, _) in mounted.items():
        if under(path, mount_path):
            return secret
    return None


def check_roles(where, container, env_from_secret, mounted, problems):
    env = env_map(container)
    prog = program(container)
    if prog == "parity-worker" or prog == "parity":
        token_secret = env_from_secret.get("PARITY_TOKEN", (None,))[0] or \
            secret_file(env, env_from_secret, mounted, "PARITY_TOKEN_FILE")
        if not token_secret:
            problems.add(where, f"{prog}: no token from a Secret (PARITY_TOKEN secretKeyRef or "
                                "PARITY_TOKEN_FILE in a mounted Secret)")
        if not (env.get("PARITY_TLS_CA") or flag_value(container, "--tls-ca")):
            problems.add(where, f"{prog}: no PARITY_TLS_CA: it would talk to the scheduler in clear")
        return token_secret
    if prog == "parity-scheduler" and "serve" in (container.get("command") or []) + (container.get("args") or []):
        for var in ("PARITY_TLS_CERT", "PARITY_TLS_KEY"):
            if secret_file(env, env_from_secret, mounted, var) != "parity-scheduler-tls":
                problems.add(where, f"{var} is not a file of the mounted Secret parity-scheduler-tls")
        if "PARITY_DATABASE_URL" not in env_from_secret:
            problems.add(where, "PARITY_DATABASE_URL not from a Secret")
        if not secret_file(env, env_from_secret, mounted, "PARITY_BOOTSTRAP_TOKEN_FILE"):
            problems.add(where, "PARITY_BOOTSTRAP_TOKEN_FILE is not a file of a mounted Secret")
    return None


# NetworkPolicy evaluation: pods are (namespace labels, pod labels).

def selects(selector, labels):
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def peer_matches(peer, policy_ns, other):
    ns_labels, pod_labels = other
    if "ipBlock" in peer:
        return True  # counted as admitting anything: an ipBlock can match pod addresses too
    ns_sel, pod_sel = peer.get("namespaceSelector"), peer.get("podSelector")
    if ns_sel is None:
        if ns_labels.get("kubernetes.io/metadata.name") != policy_ns:
            return False
    elif not selects(ns_sel, ns_labels):
        return False
    return pod_sel is None or selects(pod_sel, pod_labels)


def port_matches(rule_ports, port, protocol, port_names):
    if not rule_ports:
        return True
    for p in rule_ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        value = p.get("port")
        if value is None or value == port or (isinstance(value, str) and port_names.get(value) == port):
            return True
        if isinstance(value, int) and p.get("endPort") and value <= port <= p["endPort"]:
            return True
    return False


def allowed(policies, direction, subject, other, port, protocol="TCP", port_names=None):
    """Whether a connection is admitted: direction Ingress (other -> subject:port) or Egress
    (subject -> other:port). Subjects live in NAMESPACE."""
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    isolated = False
    for policy in policies:
        spec = policy.get("spec") or {}
        types = spec.get("policyTypes") or (["Ingress", "Egress"] if spec.get("egress") else ["Ingress"])
        if direction not in types or not selects(spec.get("podSelector") or {}, subject[1]):
            continue
        isolated = True
        for rule in spec.get(key) or []:
            if not port_matches(rule.get("ports"), port, protocol, port_names or {}):
                continue
            peers = rule.get(peers_key)
            if not peers or any(peer_matches(p, NAMESPACE, other) for p in peers):
                return True
    return not isolated


def check_network_policies(docs, pods, problems):
    policies = [doc for _, doc in docs if doc["kind"] == "NetworkPolicy"]
    where = "deploy/kubernetes: NetworkPolicy"
    if not any((p.get("spec") or {}).get("podSelector") in ({}, None) and
               "Ingress" in ((p.get("spec") or {}).get("policyTypes") or []) and
               not (p.get("spec") or {}).get("ingress") for p in policies):
        problems.add(where, "no default-deny ingress policy (podSelector {}, policyTypes [Ingress], no rules)")
    ns = {"kubernetes.io/metadata.name": NAMESPACE}
    by_program = {}
    for pod in pods:
        for container in pod["containers"]:
            by_program.setdefault(program(container), pod)
    scheduler, worker = by_program.get("parity-scheduler"), by_program.get("parity-worker")
    if scheduler is None or worker is None:
        problems.add(where, "no scheduler or no worker workload to check the policies against")
        return
    sched = (ns, scheduler["labels"])
    work = (ns, worker["labels"])
    client = (ns, CLIENT_LABELS)

    def expect(direction, subject, other, port, want, what, protocol="TCP", names=None):
        if allowed(policies, direction, subject, other, port, protocol, names) != want:
            problems.add(where, f"{what} {'must' if want else 'must not'} be allowed")

    grpc = scheduler["ports"].get("grpc", 50051)
    http = scheduler["ports"].get("http")
    expect("Ingress", sched, work, grpc, True, f"workers -> scheduler gRPC {grpc}", names=scheduler["ports"])
    expect("Ingress", sched, client, grpc, True, f"parity.dev/client pods -> scheduler gRPC {grpc}",
           names=scheduler["ports"])
    for other, what in ((STRANGER, "an unlabelled pod in parity"), (OUTSIDER, "a pod in another namespace"),
                        (PROMETHEUS, "Prometheus")):
        expect("Ingress", sched, other, grpc, False, f"{what} -> scheduler gRPC {grpc}", names=scheduler["ports"])
    for name, port in scheduler["ports"].items():
        if name == "grpc":
            continue
        for other, what in ((STRANGER, "an unlabelled pod"), (work, "a worker"), (client, "a client pod"),
                            (OUTSIDER, "a pod in another namespace")):
            expect("Ingress", sched, other, port, False, f"{what} -> scheduler {name} {port}",
                   names=scheduler["ports"])
    if http is None:
        problems.add(where, "the scheduler has no container port named http")
    else:
        expect("Ingress", sched, PROMETHEUS, http, True, f"Prometheus -> scheduler http {http}",
               names=scheduler["ports"])
    for name, port in worker["ports"].items():
        expect("Ingress", work, PROMETHEUS, port, True, f"Prometheus -> worker {name} {port}", names=worker["ports"])
        for other, what in ((STRANGER, "an unlabelled pod"), (sched, "the scheduler"),
                            (OUTSIDER, "a pod in another namespace")):
            expect("Ingress", work, other, port, False, f"{what} -> worker {name} {port}", names=worker["ports"])
    # Every other workload (client jobs, ...) is closed to strangers by the default deny.
    for pod in pods:
        for name, port in pod["ports"].items():
            if pod is not scheduler and pod is not worker:
                expect("Ingress", (ns, pod["labels"]), STRANGER, port, False,
                       f"an unlabelled pod -> {pod['where']} {name} {port}", names=pod["ports"])
        images = " ".join(c.get("image", "") for c in pod["containers"])
        if re.search(r"(^|/)postgres", images):
            for p in pod["ports"].values() or [5432]:
                expect("Ingress", (ns, pod["labels"]), sched, p, True, f"scheduler -> PostgreSQL {p}")
                expect("Ingress", (ns, pod["labels"]), work, p, False, f"a worker -> PostgreSQL {p}")
    check_gang_ports(worker, sched, work, grpc, expect, problems)
    # Workers: out to the scheduler and DNS only (and other workers' gang ports, above).
    expect("Egress", work, sched, grpc, True, f"worker egress to the scheduler's gRPC {grpc}")
    expect("Egress", work, KUBE_DNS, 53, True, "worker egress to DNS (UDP 53)", protocol="UDP")
    expect("Egress", work, KUBE_DNS, 53, True, "worker egress to DNS (TCP 53)", protocol="TCP")
    expect("Egress", work, STRANGER, 443, False, "worker egress to another pod")
    expect("Egress", work, OUTSIDER, 5432, False, "worker egress to another namespace")


def check_gang_ports(worker, sched, work, grpc, expect, problems):
    """A gang's ranks listen on ports from the worker pod's ephemeral range: workers, and only
    workers, must reach each other on exactly that range."""
    span = worker["sysctls"].get("net.ipv4.ip_local_port_range")
    if not span or not re.fullmatch(r"\s*\d+\s+\d+\s*", str(span)):
        problems.add(f"{worker['where']}", "no sysctl net.ipv4.ip_local_port_range 'LOW HIGH': the "
                                           "gang ports the NetworkPolicy admits must be pinned")
        return
    low, high = (int(v) for v in str(span).split())
    for port in (low, (low + high) // 2, high):
        expect("Ingress", work, work, port, True, f"worker -> worker gang port {port}")
        expect("Egress", work, work, port, True, f"worker egress to another worker's gang port {port}")
        for other, what in ((STRANGER, "an unlabelled pod"), (OUTSIDER, "a pod in another namespace"),
                            (sched, "the scheduler"), (PROMETHEUS, "Prometheus")):
            expect("Ingress", work, other, port, False, f"{what} -> worker gang port {port}")
        expect("Egress", work, STRANGER, port, False, f"worker egress to another pod's port {port}")
        expect("Egress", work, sched, port, port == grpc,
               f"worker egress to the scheduler's port {port}")
    for port in (low - 1, high + 1):
        expect("Ingress", work, work, port, False,
               f"worker -> worker port {port}, outside the pinned range {low}-{high},")


def check_rendezvous_host(where, container, problems):
    entry = env_map(container).get("PARITY_RENDEZVOUS_HOST") or {}
    field = ((entry.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
    if field != "status.podIP" and not flag_value(container, "--rendezvous-host"):
        problems.add(where, "PARITY_RENDEZVOUS_HOST must be the pod IP (valueFrom.fieldRef "
                            "status.podIP): a gang's other workers dial it")


def check_services(docs, pods, problems):
    services = {}
    for where, doc in docs:
        if doc["kind"] != "Service":
            continue
        spec = doc.get("spec") or {}
        selector = spec.get("selector") or {}
        targets = [p for p in pods if all(p["labels"].get(k) == v for k, v in selector.items())]
        if not targets:
            problems.add(where, f"selector {selector} matches no pod template")
            continue
        ports = {}
        for port in spec.get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            names = targets[0]["ports"]
            if isinstance(target, str) and target not in names:
                problems.add(where, f"targetPort {target} is no container port of {targets[0]['where']}")
            ports[port.get("port")] = names.get(target, target) if isinstance(target, str) else target
        services[doc["metadata"]["name"]] = (targets[0], ports)
    return services


def check_prometheus_config(path, services, problems):
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:
        problems.add(path, f"not readable: {e}")
        return
    for job in config.get("scrape_configs") or []:
        where = f"{os.path.basename(path)}: job {job.get('job_name')}"
        for sd in job.get("dns_sd_configs") or []:
            for name in sd.get("names") or []:
                service = name.split(".")[0]
                if service not in services:
                    problems.add(where, f"{name}: no Service {service} in deploy/kubernetes")
                    continue
                pod, ports = services[service]
                if sd.get("port") not in ports:
                    problems.add(where, f"port {sd.get('port')} is not a port of Service {service}")
                    continue
                container_port = ports[sd.get("port")]
                tls = any("PARITY_TLS_CERT" in env_map(c) for c in pod["containers"])
                if tls and container_port == pod["ports"].get("http"):
                    if job.get("scheme") != "https":
                        problems.add(where, "the scheduler's HTTP port serves TLS: scheme must be https")
                    if not (job.get("authorization") or job.get("basic_auth")):
                        problems.add(where, "scraping the scheduler needs a token (authorization)")


def check_kubernetes(root, problems, known_env):
    directory = os.path.join(root, "deploy", "kubernetes")
    docs = load_manifests(directory, problems)
    secret_keys = {}
    for _, doc in docs:
        if doc["kind"] == "Secret":
            data = dict(doc.get("stringData") or {})
            data.update(doc.get("data") or {})
            secret_keys[doc["metadata"]["name"]] = set(data)
    pods, images = [], {}
    worker_token_secrets = []
    for where, doc in docs:
        if doc["kind"] not in WORKLOADS:
            continue
        meta, spec = pod_template(doc)
        if not spec.get("containers"):
            problems.add(where, "no containers")
            continue
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(key):
                problems.add(where, f"{key} is on")
        for volume in spec.get("volumes") or []:
            if "hostPath" in volume:
                problems.add(where, f"hostPath volume {volume.get('name')}")
        if spec.get("automountServiceAccountToken") is not False:
            problems.add(where, "automountServiceAccountToken is not false (nothing needs the API)")
        ports = {}
        for container in all_containers(spec):
            cwhere = f"{where}: container {container.get('name')}"
            check_security_context(cwhere, spec, container, problems)
            check_resources(cwhere, container, problems)
            image_reference(cwhere, container.get("image"), problems, images)
            check_mounts(cwhere, spec, container, problems)
            env_from_secret, mounted = check_secrets(cwhere, spec, container, problems, secret_keys)
            token_secret = check_roles(cwhere, container, env_from_secret, mounted, problems)
            if program(container) == "parity-worker":
                worker_token_secrets.append(token_secret)
                check_rendezvous_host(cwhere, container, problems)
                gpus = ((container.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
                if doc["kind"] == "DaemonSet" and not gpus:
                    problems.add(cwhere, "the GPU worker has no nvidia.com/gpu limit")
            for name in env_map(container):
                if name and name.startswith("PARITY_") and name not in known_env:
                    problems.add(cwhere, f"env {name} is read by no program (no C++ source names it)")
            for port in container.get("ports") or []:
                if port.get("name"):
                    ports[port["name"]] = port.get("containerPort")
        sysctls = {x.get("name"): x.get("value")
                   for x in (spec.get("securityContext") or {}).get("sysctls") or []}
        pods.append({"where": where, "labels": meta.get("labels") or {}, "ports": ports,
                     "containers": list(all_containers(spec)), "sysctls": sysctls})
    if not worker_token_secrets:
        problems.add("deploy/kubernetes", "no parity-worker container")
    services = check_services(docs, pods, problems)
    check_network_policies(docs, pods, problems)
    check_prometheus_config(os.path.join(root, "deploy", "prometheus", "prometheus-kubernetes.yml"),
                            services, problems)
    return len(docs)


# --- systemd ------------------------------------------------------------------------------------

def parse_unit(path):
    """[(section, key, value, line number)], continuation lines joined."""
    entries, section, pending, start = [], None, "", 0
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not pending and (not line.strip() or line.lstrip().startswith(("#", ";"))):
                continue
            if not pending:
                start = number
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line, pending = pending + line, ""
            if line.startswith("["):
                section = line.strip("[] ")
            elif "=" in line:
                key, value = line.split("=", 1)
                entries.append((section, key.strip(), value.strip(), start))
    return entries


def unit_values(entries, key):
    return [v for s, k, v, _ in entries if s == "Service" and k == key]


def parse_env_file(path):
    """(active assignments {name: value}, names mentioned in commented-out assignments)."""
    active, commented = {}, set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            match = re.match(r"^(#\s*)?([A-Z][A-Z0-9_]*)=(.*)$", line)
            if not match:
                continue
            if match.group(1):
                commented.add(match.group(2))
            else:
                active[match.group(2)] = match.group(3)
    return active, commented


def assignments(value):
    """Environment= VAR=value VAR2="v 2" -> dict."""
    result = {}
    for word in re.findall(r'"[^"]*"|\S+', value):
        word = word.strip('"')
        if "=" in word:
            name, val = word.split("=", 1)
            result[name] = val
    return result


def check_systemd(root, problems, known_env):
    directory = os.path.join(root, "deploy", "systemd")
    units = sorted(glob.glob(os.path.join(directory, "*.service")))
    if not units:
        problems.add(directory, "no units")
    examples = {os.path.basename(p): parse_env_file(p)
                for p in sorted(glob.glob(os.path.join(directory, "*.env.example")))}
    secret_files = set()   # files the units read secrets from: must be installed 0600
    parsed = {}
    for path in units:
        name = os.path.basename(path)
        # Drop-ins (NAME.d/*.conf) are part of the unit as systemd reads it: merged after it.
        entries = parse_unit(path)
        for drop_in in sorted(glob.glob(os.path.join(path + ".d", "*.conf"))):
            entries += parse_unit(drop_in)
        parsed[name] = entries
        where = f"deploy/systemd/{name}"
        for section, key, value, number in entries:
            if key.startswith("Exec"):
                if "--database-url" in value or DB_URL.search(value):
                    problems.add(f"{where}:{number}", f"{key} has a database URL or --database-url")
                if TOKEN_FLAG.search(value):
                    problems.add(f"{where}:{number}", f"{key} has --token (use PARITY_TOKEN_FILE)")
                if "--insecure-plaintext" in value:
                    problems.add(f"{where}:{number}", f"{key} has --insecure-plaintext")
            if key == "Environment":
                for var, val in assignments(value).items():
                    if DB_URL.search(val) or var == "PARITY_DATABASE_URL":
                        problems.add(f"{where}:{number}", "the database URL belongs in the 0600 EnvironmentFile")
                    if is_secret_name(var):
                        problems.add(f"{where}:{number}", f"Environment={var}=...: a secret in the unit")
                    if var == "PARITY_INSECURE_PLAINTEXT":
                        problems.add(f"{where}:{number}", "PARITY_INSECURE_PLAINTEXT in a shipped unit")
                    if var.startswith("PARITY_") and var not in known_env:
                        problems.add(f"{where}:{number}", f"{var} is read by no program")
        user = (unit_values(entries, "User") or [""])[-1]
        if user in ("", "root", "0"):
            problems.add(where, f"User={user or '(none)'}: run as an unprivileged user")
        for key, wanted in (("NoNewPrivileges", {"true", "yes"}), ("ProtectSystem", {"strict"}),
                            ("ProtectHome", {"true", "yes", "read-only", "tmpfs"}),
                            ("PrivateTmp", {"true", "yes"}), ("CapabilityBoundingSet", {""})):
            values = unit_values(entries, key)
            if not values or values[-1] not in wanted:
                problems.add(where, f"{key}= must be one of {sorted(wanted)}, got {values[-1:] or 'nothing'}")
        for value in unit_values(entries, "EnvironmentFile"):
            secret_files.add(value.lstrip("-").replace("%i", "0"))
        credentials = {}
        for value in unit_values(entries, "LoadCredential"):
            cred, _, source = value.partition(":")
            credentials[cred] = source
            if not source.endswith((".crt", ".pem")):  # certificates are public
                secret_files.add(source)
        env = {}
        for value in unit_values(entries, "Environment"):
            env.update(assignments(value))
        state_dirs = ["/var/lib/" + d for v in unit_values(entries, "StateDirectory") for d in v.split()]
        rw = state_dirs + [p.lstrip("-") for v in unit_values(entries, "ReadWritePaths") for p in v.split()]
        execs = " ".join(unit_values(entries, "ExecStart"))

        def is_credential(var, key_hint):
            value = env.get(var, "")
            match = re.fullmatch(r"(?:%d|\$\{?CREDENTIALS_DIRECTORY\}?)/(.+)", value)
            if not match or match.group(1) not in credentials:
                problems.add(where, f"{var} must be %d/NAME of a LoadCredential=NAME:... ({key_hint})")

        if "parity-worker" in execs:
            is_credential("PARITY_TOKEN_FILE", "the worker token")
            if any(v in ("true", "yes") for v in unit_values(entries, "PrivateDevices")):
                problems.add(where, "PrivateDevices=true hides the GPUs from the worker")
            policy = (unit_values(entries, "DevicePolicy") or ["auto"])[-1]
            allows = " ".join(unit_values(entries, "DeviceAllow"))
            if policy in ("closed", "strict") and "nvidia" not in allows:
                problems.add(where, f"DevicePolicy={policy} without DeviceAllow= for the NVIDIA devices")
            worker_env = dict(examples.get("worker.env.example", ({}, set()))[0])
            worker_env.update(examples.get("worker-0.env.example", ({}, set()))[0])
            # The worker runs as User= and reads its metrics secret itself: a root-owned 0600
            # file named in an env file would stop its start, so the secret is a credential too.
            if "PARITY_WORKER_METRICS_LISTEN" in worker_env:
                if "PARITY_WORKER_METRICS_TOKEN_FILE" in worker_env:
                    problems.add(where, "PARITY_WORKER_METRICS_TOKEN_FILE set in an env example: a "
                                        "file User= cannot read; hand it over with LoadCredential=")
                else:
                    is_credential("PARITY_WORKER_METRICS_TOKEN_FILE", "the metrics scrape secret, "
                                  "in a drop-in since the examples turn metrics on")
            work_dir = worker_env.get("PARITY_WORK_DIR", env.get("PARITY_WORK_DIR", "")).replace("%i", "0")
            for var, value in (("PARITY_CHECKPOINT_DIR", worker_env.get("PARITY_CHECKPOINT_DIR", "")),
                               ("PARITY_WORK_DIR", work_dir)):
                rw0 = [p.replace("%i", "0") for p in rw]
                if not value.startswith("/") or not any(under(value, p) for p in rw0):
                    problems.add(where, f"{var}={value or '(unset)'} is not writable under "
                                        f"ProtectSystem=strict (StateDirectory=/ReadWritePaths=: {rw})")
        if "parity-scheduler" in execs:
            is_credential("PARITY_TLS_KEY", "the TLS key")
            is_credential("PARITY_TLS_CERT", "the TLS certificate")
            bootstrap = env.get("PARITY_BOOTSTRAP_TOKEN_FILE", "")
            if not bootstrap or not any(under(os.path.dirname(bootstrap), p) for p in rw):
                problems.add(where, f"PARITY_BOOTSTRAP_TOKEN_FILE={bootstrap or '(unset)'} must be in "
                                    "a writable StateDirectory= (the first start creates it)")
    for name, (active, commented) in examples.items():
        where = f"deploy/systemd/{name}"
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            first = f.readline()
        if not first.startswith("#") or "/etc/parity/" not in first:
            problems.add(where, "must start with a comment naming its /etc/parity/ file and what it holds")
        if "PARITY_DATABASE_URL" in active and name != "scheduler.env.example":
            problems.add(where, "PARITY_DATABASE_URL belongs only in scheduler.env")
        for var, value in active.items():
            if var == "PARITY_INSECURE_PLAINTEXT":
                problems.add(where, "PARITY_INSECURE_PLAINTEXT set in an example")
            if var == "PARITY_TOKEN":
                problems.add(where, "PARITY_TOKEN in an env file: use the credential /etc/parity/worker-token")
        for var in set(active) | commented:
            if var.startswith("PARITY_") and var not in known_env:
                problems.add(where, f"{var} is read by no program")
    verify_units(units, problems)
    return secret_files, parsed


def verify_units(units, problems):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        print("note: systemd-analyze not found; `systemd-analyze verify` not run")
        return
    with tempfile.TemporaryDirectory() as tmp:
        names = []
        for path in units:
            with open(path, encoding="utf-8") as f:
                text = re.sub(r"/usr/local/bin/parity-[a-z-]+", "/bin/true", f.read())
            name = os.path.basename(path)
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(text)
            if os.path.isdir(path + ".d"):
                shutil.copytree(path + ".d", os.path.join(tmp, name + ".d"))
            if name.endswith("@.service"):
                instance = name.replace("@.service", "@0.service")
                shutil.copy(os.path.join(tmp, name), os.path.join(tmp, instance))
                name = instance
            names.append(os.path.join(tmp, name))
        result = subprocess.run([analyze, "verify", "--man=no", *names], capture_output=True,
                                text=True, cwd=tmp)
        output = (result.stdout + result.stderr).strip()
        if result.returncode != 0 or output:
            problems.add("deploy/systemd", "systemd-analyze verify:\n" + output.replace(tmp + "/", ""))


def readme_section(path, title):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, re.S | re.M)
    return match.group(1) if match else ""


def shell_commands(markdown):
    """Commands of the ```sh blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```(?:sh|bash)\n(.*?)```", markdown, re.S):
        pending = ""
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line) if not line.lstrip().startswith("#") else ""
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            if pending + line.strip():
                commands.append((pending + line).strip())
            pending = ""
    return commands


def check_readme(root, secret_files, problems):
    path = os.path.join(root, "deploy", "README.md")
    where = "deploy/README.md (systemd)"
    section = readme_section(path, "systemd")
    if not section:
        problems.add(where, "no '## systemd' section")
        return
    installed = {}   # target path -> command
    for command in shell_commands(section):
        words = command.split()
        for i, word in enumerate(words):
            if word in (">", ">>") and i + 1 < len(words):
                target = words[i + 1]
            elif word.startswith((">", ">>")) and len(word.lstrip(">")) > 0:
                target = word.lstrip(">")
            else:
                continue
            if target.startswith(("/etc/parity", "/etc/prometheus")):
                problems.add(where, f"'{command}' writes {target} by redirection: use install -m 0600")
        if not words:
            continue
        if words[0] in ("cp", "tee", "mv", "cat") and any(w.startswith("/etc/parity") for w in words[1:]):
            problems.add(where, f"'{command}': put files into /etc/parity with install -m 0600")
        if words[0] == "install" and "-d" not in words:
            mode = None
            for i, word in enumerate(words):
                if word == "-m" and i + 1 < len(words):
                    mode = words[i + 1]
                elif word.startswith("--mode="):
                    mode = word.split("=", 1)[1]
            operands = [w for i, w in enumerate(words[1:], 1)
                        if not w.startswith("-") and words[i - 1] not in ("-m", "-o", "-g")]
            if len(operands) >= 2:
                dest = operands[-1]
                for source in operands[:-1]:
                    target = dest.rstrip("/") + "/" + os.path.basename(source) if dest.endswith("/") else dest
                    installed[target] = (mode, command)
    wanted = set(secret_files)
    wanted |= {p for p in installed if re.search(r"(token|\.key|\.env)$", p)}
    if not any(p.startswith("/etc/prometheus/") for p in wanted):
        problems.add(where, "no install of the Prometheus scrape token into /etc/prometheus/")
    for target in sorted(wanted):
        if target not in installed:
            problems.add(where, f"{target} (read by a unit) is never installed (install -m 0600 ...)")
            continue
        mode, command = installed[target]
        if mode not in ("0600", "600", "u=rw"):
            problems.add(where, f"'{command}' installs the secret {target} with mode {mode}, not 0600")
    if "install -m 0600" not in section:
        problems.add(where, "does not say to install secrets with install -m 0600")
    kube = readme_section(path, "Kubernetes")
    for command in shell_commands(kube):
        if "--from-literal" in command and re.search(r"token|database|url", command, re.I):
            problems.add("deploy/README.md (Kubernetes)", f"'{command}': a secret on a command line")
        if "--insecure-plaintext" in command:
            problems.add("deploy/README.md (Kubernetes)", f"'{command}': --insecure-plaintext")


def check_certificate_names(root, problems):
    """The scheduler's certificate, by hand (the README's subjectAltName) or by cert-manager,
    names every host a workload dials without PARITY_TLS_SERVER_NAME: gRPC checks the dialled
    name, and a certificate without it fails every handshake."""
    dialled = {}
    for where, doc in load_manifests(os.path.join(root, "deploy", "kubernetes"), Problems()):
        if doc["kind"] not in WORKLOADS:
            continue
        for container in all_containers(pod_template(doc)[1]):
            env = {name: entry.get("value") for name, entry in env_map(container).items()}
            target = env.get("PARITY_SCHEDULER")
            if not isinstance(target, str) or env.get("PARITY_TLS_SERVER_NAME"):
                continue
            for address in target.split(","):
                host = re.sub(r"^(dns|ipv4|ipv6):(//[^/]*/)?", "", address.strip()).rsplit(":", 1)[0]
                dialled.setdefault(host, f"{where}: container {container.get('name')}")
    kube = readme_section(os.path.join(root, "deploy", "README.md"), "Kubernetes")
    lists = {"deploy/README.md (Kubernetes) subjectAltName": set(
        re.findall(r"DNS:([A-Za-z0-9.-]*[A-Za-z0-9])", kube))}
    for where, doc in load_manifests(os.path.join(root, "deploy", "kubernetes"), Problems()):
        if doc["kind"] == "Certificate" and doc["metadata"]["name"] == "parity-scheduler":
            lists[f"{where} dnsNames"] = set(doc["spec"].get("dnsNames") or [])
    for where, names in lists.items():
        for host, dialler in sorted(dialled.items()):
            if host not in names:
                problems.add(where, f"lacks {host}, which {dialler} dials: its TLS handshake "
                                    "would fail")


# --- Slurm --------------------------------------------------------------------------------------

def check_slurm(root, problems):
    for path in sorted(glob.glob(os.path.join(root, "deploy", "slurm", "*.sbatch"))):
        where = os.path.relpath(path, root)
        result = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
        if result.returncode != 0:
            problems.add(where, "bash -n: " + result.stderr.strip())
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if TOKEN_FLAG.search(text) or "--database-url" in text:
            problems.add(where, "a token or database URL on a command line")
        if not re.search(r"^#SBATCH\s+--signal=\S*TERM@\d+", text, re.M):
            problems.add(where, "no '#SBATCH --signal=B:TERM@SECONDS': the workers would be killed "
                                "at the time limit without checkpointing")
        in_step = re.search(r"^\s*srun\b", text, re.M) is not None
        if not in_step and not re.search(r"^\s*trap\s+'[^']*kill\s+-TERM[^']*'\s+TERM", text, re.M):
            problems.add(where, "no `trap 'kill -TERM ...' TERM`: SIGTERM would not reach the worker")
        # srun answers a SIGTERM of its own by SIGKILLing its tasks ("forcing job termination"):
        # a script whose workers run in an srun step must have Slurm signal the step, never the
        # batch shell alone, and must not pass SIGTERM to srun itself.
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if not re.match(r"^\s*srun\b", line):
                continue
            if re.search(r"^#SBATCH\s+--signal=B:", text, re.M):
                problems.add(where, "workers in an srun step with '--signal=B:...': only the batch "
                                    "shell would be signalled, and through srun the workers die "
                                    "unflushed; use '--signal=TERM@SECONDS'")
            for follow in lines[i:i + 4]:
                pid = re.match(r"^\s*(\w+)=\$!", follow)
                if pid and re.search(rf"kill\s+(-TERM|-15|-s\s+TERM)\s+\"?\${pid.group(1)}\b",
                                     text):
                    problems.add(where, f"SIGTERM passed to srun (${pid.group(1)}): srun SIGKILLs "
                                        "its tasks when it gets one")
        # A worker keeps its id in its scratch directory: one per job and task (or node), never
        # the shared job directory's default, or the job's workers register as one.
        if "parity-worker" in text and not re.search(
                r"--work-dir\s+\"[^\"]*\$\{?job\}?[^\"]*\$\{?(task|node)\}?", text):
            problems.add(where, "no --work-dir naming the job and the task or node: workers "
                                "sharing the default .parity/work share one worker id")


def known_environment(root):
    """Every PARITY_* name some C++ source spells out as a string: the variables programs read."""
    names = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "build", "node_modules", ".parity")
                       and not d.startswith("build")]
        for filename in filenames:
            if filename.endswith((".cc", ".h", ".cpp", ".hpp")):
                try:
                    with open(os.path.join(dirpath, filename), encoding="utf-8", errors="replace") as f:
                        names.update(re.findall(r'"(PARITY_[A-Z0-9_]+)"', f.read()))
                except OSError:
                    pass
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the source tree")
    args = parser.parse_args()
    root = os.path.abspath(args.root)

    problems = Problems()
    known_env = known_environment(root)
    if not known_env:
        problems.add(root, "no PARITY_* variable found in the C++ sources")
    documents = check_kubernetes(root, problems, known_env)
    secret_files, units = check_systemd(root, problems, known_env)
    check_readme(root, secret_files, problems)
    check_certificate_names(root, problems)
    check_slurm(root, problems)

    for problem in dict.fromkeys(problems):
        print(problem)
    if problems:
        return 1
    print(f"ok: {documents} Kubernetes documents and {len(units)} systemd units keep the rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
