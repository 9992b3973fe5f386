"""Planned runs and their settings as flat rows: Client.plan()'s PlanResult, and the grid-point and
hyperparameter columns Client.results_frame() joins onto the results.

Column names are the ResultRow's where the quantity is the same (so a plan and its results line
up by `name`): num_experts (E), top_k (K), expert_hidden (D_e), params (N), active_params (N_a),
activation_rate (r_a), flops_per_token (M), compute_flops (C), tokens (D), unique_tokens (D̂),
epochs. Enums read as the YAML spells them ("moe", "strict", "cosine"); each grid axis the
planner recorded is a column "grid.<axis>" (text, as RunSpec.grid_point has it); also_serves
lists the other groups ("<budget>/<data variant>") an identical run is planned once for.
"""

import math
from dataclasses import dataclass, field
from typing import Dict

from parity.v1 import model_pb2, sweep_pb2, training_pb2

from .rows import dict_frame, enum_name

_LAYOUTS = {  # MoeLayout → the spelling of the results view and the YAML
    model_pb2.MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT: "1dense+SE",
    model_pb2.MOE_LAYOUT_ALL_MOE: "all-moe",
    model_pb2.MOE_LAYOUT_INTERLEAVED: "interleaved",
}


def _optional(message, name):
    """An optional double of a message, NaN when unset (the engine's default applies)."""
    return getattr(message, name) if message.HasField(name) else math.nan


def layout_of(run):
    if run.model.moe.num_experts == 0 or run.role != sweep_pb2.RUN_ROLE_MOE:
        return "dense"
    return _LAYOUTS.get(run.model.moe.layout, "dense")


def hyperparameters(run):
    """A RunSpec's training settings (the resolved ones), as frame columns."""
    t = run.training
    return {
        "learning_rate": t.learning_rate,
        "batch_tokens": t.batch_tokens,
        "sequence_length": t.sequence_length,
        "steps": t.steps,
        "warmup_steps": t.warmup_steps,
        "schedule": enum_name(training_pb2.LrSchedule, t.schedule, "LR_SCHEDULE_"),
        "min_lr_ratio": _optional(t, "min_lr_ratio"),
        "weight_decay": _optional(t, "weight_decay"),
        "grad_clip": _optional(t, "grad_clip"),
        "seed": t.seed,
        "reuse": enum_name(training_pb2.ReuseMode, run.data.reuse, "REUSE_MODE_"),
    }


def grid_columns(run):
    """The grid coordinates of a RunSpec ("grid.<axis>" → value) and the other groups it
    serves."""
    columns = {"grid." + axis: value for axis, value in sorted(run.grid_point.items())}
    columns["also_serves"] = [f"{g.compute_budget}/{g.data_variant}" for g in run.also_serves]
    return columns


@dataclass
class PlannedRun:
    """One planned run (a parity.v1.RunSpec, flattened); `spec` keeps the message itself."""

    name: str
    role: str
    compute_budget: str
    compute_multiple: float
    data_variant: str
    seed: int
    layout: str
    d_model: int
    num_layers: int
    num_experts: int
    top_k: int
    expert_hidden: int
    params: int
    active_params: int
    activation_rate: float
    flops_per_token: float
    compute_flops: float
    tokens: int
    unique_tokens: int
    epochs: float
    steps: int
    learning_rate: float
    batch_tokens: int
    warmup_steps: int
    schedule: str
    predicted_efficiency_leverage: float
    columns: Dict[str, object] = field(default_factory=dict)  # the rest: grid.*, reuse, ...
    spec: object = None

    @classmethod
    def from_proto(cls, run):
        a, moe, hp = run.accounting, run.model.moe, hyperparameters(run)
        role = enum_name(sweep_pb2.RunRole, run.role, "RUN_ROLE_")
        return cls(
            name=run.name, role=role, compute_budget=run.compute_budget,
            compute_multiple=run.compute_multiple, data_variant=run.data_variant,
            seed=hp.pop("seed"), layout=layout_of(run), d_model=run.model.d_model,
            num_layers=run.model.num_layers, num_experts=moe.num_experts, top_k=moe.top_k,
            expert_hidden=moe.expert_hidden, params=a.params, active_params=a.active_params,
            activation_rate=a.activation_rate, flops_per_token=a.flops_per_token,
            compute_flops=a.compute_flops, tokens=a.tokens, unique_tokens=a.unique_tokens,
            epochs=a.epochs, steps=hp.pop("steps"), learning_rate=hp.pop("learning_rate"),
            batch_tokens=hp.pop("batch_tokens"), warmup_steps=hp.pop("warmup_steps"),
            schedule=hp.pop("schedule"),
            predicted_efficiency_leverage=(run.predicted_efficiency_leverage
                                           if role == "moe" else math.nan),
            columns={**hp, **grid_columns(run)}, spec=run)

    def flat(self):
        out = {k: v for k, v in self.__dict__.items() if k not in ("columns", "spec")}
        out.update(self.columns)
        return out


@dataclass(frozen=True)
class PlanWarning:
    """Something the plan does that the researcher should know (an undertrained baseline, K = 1):
    the spec field it concerns and why."""

    field: str
    description: str

    def __str__(self):
        return f"{self.field}: {self.description}"


class PlanResult:
    """What Client.plan() returns: the planned runs and the plan's warnings, nothing queued.

    .runs: list of PlannedRun in grid order (.spec on each is the parity.v1.RunSpec);
    .specs: the RunSpec messages; .warnings: list of PlanWarning;
    .frame: a pandas DataFrame, one row per run (needs pandas).
    len(), iteration and indexing go over .runs; in a notebook it displays as its frame with the
    warnings above it."""

    def __init__(self, response):
        self.runs = [PlannedRun.from_proto(r) for r in response.runs]
        self.specs = list(response.runs)
        self.warnings = [PlanWarning(w.field, w.description) for w in response.warnings]

    @property
    def frame(self):
        return plan_frame(self.runs)

    def __len__(self):
        return len(self.runs)

    def __iter__(self):
        return iter(self.runs)

    def __getitem__(self, i):
        return self.runs[i]

    def __repr__(self):
        lines = [f"PlanResult: {len(self.runs)} runs, {len(self.warnings)} warnings"]
        lines += [f"  warning {w}" for w in self.warnings]
        lines += [f"  {r.name}" for r in self.runs]
        return "\n".join(lines)

    def _repr_html_(self):
        import html
        try:
            frame = self.frame
        except ImportError:
            return None  # no pandas: the notebook falls back to repr()
        warnings = "".join(f"<p>⚠ {html.escape(str(w))}</p>" for w in self.warnings)
        return warnings + frame.to_html()


def plan_frame(runs):
    """PlannedRuns as a DataFrame (needs pandas)."""
    return dict_frame([r.flat() for r in runs])


__all__ = ["PlanResult", "PlannedRun", "PlanWarning", "hyperparameters", "grid_columns",
           "plan_frame"]
