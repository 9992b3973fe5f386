"""Plain Python views of the API's messages: dataclasses with the proto's field names, enums as
short lower-case names ("succeeded", "moe"), and tables as pandas DataFrames when pandas is
importable (it is optional).

Missing numbers are NaN, never 0.0: the proto has no "unset" for a double, so a failed run's BPC,
a ΔBPC without a finished baseline or a dense run's predicted EL arrive as 0 and are turned into
NaN here (pandas' mean/min skip them; 0.0 would pass for the best BPC ever seen)."""

import datetime
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Dict, List, Optional

from parity.v1 import run_pb2, sweep_pb2, worker_pb2


def nan_if_zero(value):
    """A proto double whose 0 means "not set" as NaN."""
    return math.nan if value == 0 else value


def enum_name(enum_type, number, prefix):
    """RUN_STATE_SUCCEEDED → "succeeded" (unknown numbers as their number)."""
    try:
        return enum_type.Name(number)[len(prefix):].lower()
    except ValueError:
        return str(number)


@dataclass
class ResultRow:
    """One row of the results view (parity.v1.ResultRow): a run's accounting and outcome.
    Units as in the proto: N in parameters, M in FLOPs/token, C in FLOPs, D in tokens, BPC in
    bits per byte; final_val_bpc, measured_flops_per_token, wall_seconds, delta_bpc_vs_dense and
    predicted_efficiency_leverage are NaN until they exist (or where they do not apply). The only EL here
    is the published law's prediction; measured EL (frontier and fixed-N) is Client.analyze()'s."""

    run_id: str
    sweep_id: str
    name: str
    role: str  # "moe" or "dense_baseline"
    layout: str
    state: str  # "pending", "running", "succeeded", ...
    d_model: int
    num_layers: int
    num_experts: int
    top_k: int
    expert_hidden: int
    params: int
    active_params: int
    activation_rate: float
    flops_per_token: float
    measured_flops_per_token: float
    compute_flops: float
    tokens: int
    unique_tokens: int
    epochs: float
    final_val_bpc: float
    wall_seconds: float
    compute_budget: str
    compute_multiple: float
    data_variant: str
    predicted_efficiency_leverage: float  # the published joint law's prediction, not measured
    delta_bpc_vs_dense: float
    seed: int
    # Per evaluation set (set name → bits per byte), the primary set too; empty until finished
    # or for an engine that reports only final_val_bpc. A frame has one column per set:
    # "final_bpc.<set>" and "delta_bpc.<set>" (ΔBPC against the dense 1C baseline on that set).
    final_eval_bpc: Dict[str, float] = field(default_factory=dict)
    delta_eval_bpc_vs_dense: Dict[str, float] = field(default_factory=dict)
    dataset_digest: str = ""  # manifest digest of the dataset the engine read; "" = unreported

    @classmethod
    def from_proto(cls, row):
        values = {f.name: getattr(row, f.name) for f in fields(cls)}
        values["final_eval_bpc"] = dict(row.final_eval_bpc)
        values["delta_eval_bpc_vs_dense"] = dict(row.delta_eval_bpc_vs_dense)
        values["role"] = enum_name(sweep_pb2.RunRole, row.role, "RUN_ROLE_")
        values["state"] = enum_name(run_pb2.RunState, row.state, "RUN_STATE_")
        for name in ("final_val_bpc", "measured_flops_per_token", "wall_seconds"):
            values[name] = nan_if_zero(values[name])
        if values["role"] != "moe":
            values["predicted_efficiency_leverage"] = math.nan
        own_baseline = values["role"] == "dense_baseline" and values["compute_multiple"] == 1
        if math.isnan(values["final_val_bpc"]) or (values["delta_bpc_vs_dense"] == 0
                                                   and not own_baseline):
            values["delta_bpc_vs_dense"] = math.nan
        return cls(**values)


@dataclass
class MetricPoint:
    """One point of a run's curve (parity.v1.MetricPoint, without the expert load)."""

    step: int
    tokens: int
    unique_tokens: int
    epoch: float
    train_bpc: float
    val_bpc: Optional[float]  # set at evaluation steps only
    learning_rate: float
    grad_norm: float
    aux_loss: float
    z_loss: float
    tokens_per_second: float
    flops_per_second: float
    attempt: int
    # Validation BPC per evaluation set at evaluation steps (set name → bits per byte), the
    # primary set (val_bpc) too; a frame has one column "val_bpc.<set>" per set.
    eval_bpc: Dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_proto(cls, point):
        values = {f.name: getattr(point, f.name) for f in fields(cls)
                  if f.name not in ("val_bpc", "eval_bpc")}
        values["val_bpc"] = point.val_bpc if point.HasField("val_bpc") else None
        values["eval_bpc"] = dict(point.eval_bpc)
        return cls(**values)


@dataclass
class SweepInfo:
    """A sweep and its run counts (parity.v1.Sweep)."""

    sweep_id: str
    name: str
    state: str  # "active", "succeeded", "failed", "cancelled"
    owner: str
    counts: Dict[str, int]  # pending, leased, running, succeeded, failed, cancelled, total
    run_ids: List[str] = field(default_factory=list)  # set by submit(), in grid order

    @property
    def done(self):
        """Runs that ended (succeeded, failed or cancelled)."""
        return self.counts["succeeded"] + self.counts["failed"] + self.counts["cancelled"]

    @property
    def finished(self):
        """Ended for good: its state is final and none of its runs is still pending, leased or
        running. A cancelled sweep is "cancelled" at once, but its running runs stop only at their
        workers' next heartbeat (some may still succeed); until then it cannot be deleted."""
        live = self.counts["pending"] + self.counts["leased"] + self.counts["running"]
        return self.state != "active" and live == 0

    @classmethod
    def from_proto(cls, sweep):
        c = sweep.counts
        counts = {k: getattr(c, k) for k in
                  ("pending", "leased", "running", "succeeded", "failed", "cancelled", "total")}
        return cls(sweep_id=sweep.sweep_id, name=sweep.spec.name,
                   state=enum_name(run_pb2.SweepState, sweep.state, "SWEEP_STATE_"),
                   owner=sweep.owner, counts=counts)


@dataclass
class RunInfo:
    """A run's state and progress (parity.v1.Run, without its spec)."""

    run_id: str
    name: str
    state: str
    attempt: int
    latest_step: int
    latest_val_bpc: float
    final_val_bpc: float
    # Final BPC per evaluation set (set name → bits per byte); frame columns "final_bpc.<set>".
    final_eval_bpc: Dict[str, float] = field(default_factory=dict)
    # Why the last failed attempt failed: its class as `parity status` spells it ("user_error",
    # "data_mismatch"; "" when none) and the scheduler's message for it.
    failure_class: str = ""
    failure: str = ""

    @classmethod
    def from_proto(cls, run):
        failure_class = ""
        if run.failure_class:
            failure_class = enum_name(run_pb2.FailureClass, run.failure_class, "FAILURE_CLASS_")
        return cls(run_id=run.run_id, name=run.spec.name,
                   state=enum_name(run_pb2.RunState, run.state, "RUN_STATE_"),
                   attempt=run.attempt, latest_step=run.latest_step,
                   latest_val_bpc=nan_if_zero(run.latest_val_bpc),
                   final_val_bpc=nan_if_zero(run.summary.final_val_bpc),
                   final_eval_bpc=dict(run.summary.final_eval_bpc),
                   failure_class=failure_class, failure=run.failure.message)


def _utc(message, name):
    """A Timestamp field as an aware UTC datetime; None when unset."""
    if not message.HasField(name):
        return None
    return getattr(message, name).ToDatetime(tzinfo=datetime.timezone.utc)


@dataclass
class GangRank:
    """One rank of a placed gang (parity.v1.RunGangRank): the worker that runs it, that worker's
    host, the rank's device indices there, and its rendezvous check-in."""

    rank: int
    worker_id: str
    hostname: str  # "" once the scheduler forgot the worker
    device_indices: List[int]
    checked_in: bool
    check_in_time: Optional[datetime.datetime]  # UTC; None until it checked in


@dataclass
class GangInfo:
    """Where a gang run (resources.ranks > 1) is placed under its current epoch
    (parity.v1.RunGang, GetRunResponse.gang): what `parity status RUN` prints."""

    world_size: int
    lease_epoch: int
    placed_time: Optional[datetime.datetime]  # UTC
    rendezvous_deadline: Optional[datetime.datetime]  # UTC: every rank checks in before
    released: bool  # every rank checked in and rank 0 posted its address
    released_time: Optional[datetime.datetime]  # UTC; None until released
    ranks: List[GangRank] = field(default_factory=list)  # lowest rank first

    @property
    def checked_in(self):
        """How many ranks checked in."""
        return sum(1 for rank in self.ranks if rank.checked_in)

    @property
    def hosts(self):
        """The distinct hosts the ranks run on, sorted."""
        return sorted({rank.hostname or rank.worker_id for rank in self.ranks})

    @property
    def rendezvous_seconds(self):
        """Seconds from placement to release; NaN while not released."""
        if not self.released or self.released_time is None or self.placed_time is None:
            return math.nan
        return (self.released_time - self.placed_time).total_seconds()

    @classmethod
    def from_proto(cls, gang):
        ranks = [GangRank(rank=r.rank, worker_id=r.worker_id, hostname=r.hostname,
                          device_indices=list(r.device_indices), checked_in=r.checked_in,
                          check_in_time=_utc(r, "check_in_time")) for r in gang.ranks]
        return cls(world_size=gang.world_size, lease_epoch=gang.lease_epoch,
                   placed_time=_utc(gang, "placed_time"),
                   rendezvous_deadline=_utc(gang, "rendezvous_deadline"),
                   released=gang.released, released_time=_utc(gang, "released_time"),
                   ranks=ranks)


@dataclass
class WorkerInfo:
    """A worker daemon the scheduler saw recently (parity.v1.Worker). devices reads like
    "cpu:0 (16 threads)" or "cuda:0 NVIDIA H100 (80.0 GiB)"; datasets are the names it holds."""

    worker_id: str
    hostname: str
    last_seen: Optional[datetime.datetime]  # UTC; None if never reported
    active_runs: int
    version: str
    devices: List[str] = field(default_factory=list)
    datasets: List[str] = field(default_factory=list)
    labels: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_proto(cls, worker):
        seen = None
        if worker.HasField("last_seen_time"):
            seen = worker.last_seen_time.ToDatetime(tzinfo=datetime.timezone.utc)
        return cls(worker_id=worker.worker_id, hostname=worker.hostname, last_seen=seen,
                   active_runs=worker.active_runs, version=worker.version,
                   devices=[_device_text(d) for d in worker.devices],
                   datasets=[d.name for d in worker.datasets], labels=dict(worker.labels))


def _device_text(device):
    kind = enum_name(worker_pb2.DeviceKind, device.kind, "DEVICE_KIND_")
    text = f"{kind}:{device.index}"
    if device.name:
        text += " " + device.name
    if device.memory_bytes:
        text += f" ({device.memory_bytes / 2**30:.1f} GiB)"
    elif device.threads:
        text += f" ({device.threads} threads)"
    return text


# The per-set dict fields a frame spreads into one column per evaluation set, and the prefix of
# those columns ("final_bpc.code"). A set some rows lack reads NaN there.
_PER_SET_COLUMNS = {"final_eval_bpc": "final_bpc.", "delta_eval_bpc_vs_dense": "delta_bpc.",
                    "eval_bpc": "val_bpc."}


def flat_row(item):
    """A dataclass row as a flat dict: each per-set dict spread into "<prefix><set>" keys."""
    flat = {}
    for name, value in asdict(item).items():
        if name in _PER_SET_COLUMNS:
            for set_name, bpc in sorted(value.items()):
                flat[_PER_SET_COLUMNS[name] + set_name] = bpc
        elif value is None:
            flat[name] = math.nan  # an optional number (a curve point's val_bpc): NaN in a frame
        else:
            flat[name] = value
    return flat


def dict_frame(dicts):
    """A pandas DataFrame of flat dicts; ImportError naming the package without pandas."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError("a DataFrame needs pandas (apt-get install python3-pandas, or "
                          "pip install 'parity-client[pandas]'); the rows themselves need "
                          "nothing") from e
    return pandas.DataFrame(dicts)


def to_frame(items):
    """A pandas DataFrame of dataclass rows; ImportError naming the package without pandas."""
    return dict_frame([flat_row(item) for item in items])
