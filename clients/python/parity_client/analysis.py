"""A sweep's analysis (parity.v1.AnalyzeSweepResponse) as plain Python: dataclasses with the
proto's field names and units, enums as short lower-case names ("bracketed", "inside",
"passes"), and a figure that is missing as None beside the reason it is missing. The same
figures `parity report` writes to analysis.md and the dashboard's analysis panel shows.

Two efficiency leverages, never to be confused (docs/domain.md):
  * GridPoint.frontier_leverage — the papers' EL, against the compute-optimal dense frontier;
  * GridPoint.fixed_n_leverage (and RunLeverage.fixed_n_efficiency_leverage) — against one dense
    shape's own law; far from compute-optimal training it overstates the papers' EL.
"""

from dataclasses import dataclass, field
from typing import List, Optional

from parity.v1 import analysis_pb2 as api, sweep_pb2

from .rows import enum_name


@dataclass
class Interval:
    """A two-sided interval: low and high in the unit of the value it bounds; level 0.9."""

    low: float
    high: float
    level: float

    @classmethod
    def of(cls, message, parent, name):
        if not parent.HasField(name):
            return None
        return cls(low=message.low, high=message.high, level=message.level)


@dataclass
class DenseLaw:
    """L(C) = a·C^-b + c (bits per byte; C in FLOPs), with 90% intervals (None when
    interval_note says why)."""

    a: float
    b: float
    c: float
    a_interval: Optional[Interval]
    b_interval: Optional[Interval]
    c_interval: Optional[Interval]
    points: int  # runs (fixed-N law) or frontier points (frontier law)
    budgets: int
    rms_residual: float  # bits per byte
    interval_note: str
    repeated_data_excluded: int

    @classmethod
    def from_proto(cls, f):
        return cls(a=f.a, b=f.b, c=f.c, a_interval=Interval.of(f.a_interval, f, "a_interval"),
                   b_interval=Interval.of(f.b_interval, f, "b_interval"),
                   c_interval=Interval.of(f.c_interval, f, "c_interval"), points=f.points,
                   budgets=f.budgets, rms_residual=f.rms_residual, interval_note=f.interval_note,
                   repeated_data_excluded=f.repeated_data_excluded)


@dataclass
class FrontierPoint:
    """The best dense size measured at one budget."""

    compute: float  # FLOPs
    params: int  # N of the best size
    bpc: float  # mean over seeds, bits per byte
    seeds: int
    sizes: int  # dense sizes measured at this budget


@dataclass
class DenseFrontier:
    """The compute-optimal dense frontier and its law L*(C); law None when law_refusal says
    why."""

    points: List[FrontierPoint]
    law: Optional[DenseLaw]
    law_refusal: str
    runs: int
    replicates: int
    replicate_note: str

    @classmethod
    def from_proto(cls, f):
        return cls(points=[FrontierPoint(p.compute, p.params, p.bpc, p.seeds, p.sizes)
                           for p in f.points],
                   law=DenseLaw.from_proto(f.law) if f.HasField("law") else None,
                   law_refusal=f.law_refusal, runs=f.runs, replicates=f.replicates,
                   replicate_note=f.replicate_note)


@dataclass
class Leverage:
    """EL of a grid point's mean loss against one dense law (ratio C_dense / C_moe). value is
    None when missing_reason says why; extrapolated with its factor when C_dense lies outside
    the measured dense range."""

    value: Optional[float]
    dense_compute: float  # FLOPs
    extrapolated: bool
    extrapolation_factor: float  # ≥ 1
    interval: Optional[Interval]  # 90%, dense and MoE seeds bootstrapped
    interval_note: str
    missing_reason: str
    resamples: int

    @classmethod
    def from_proto(cls, parent, name):
        if not parent.HasField(name):
            return None
        l = getattr(parent, name)
        return cls(value=l.value if l.value > 0 else None, dense_compute=l.dense_compute,
                   extrapolated=l.extrapolated, extrapolation_factor=l.extrapolation_factor,
                   interval=Interval.of(l.interval, l, "interval"), interval_note=l.interval_note,
                   missing_reason=l.missing_reason, resamples=l.resamples)


@dataclass
class BaselineDelta:
    """ΔBPC of a grid point against one dense baseline of its group (bits per byte)."""

    baseline: str
    compute_multiple: float
    data_variant: str
    baseline_bpc: float
    baseline_seeds: int
    delta_bpc: float  # negative: the grid point is better
    delta_spread: float
    verdict: str  # "exceeds_spread", "within_spread", "no_spread"
    welch_p: Optional[float]  # two-sided; None unless both sides have ≥ 2 seeds

    @classmethod
    def from_proto(cls, d):
        return cls(baseline=d.baseline, compute_multiple=d.compute_multiple,
                   data_variant=d.data_variant, baseline_bpc=d.baseline_bpc,
                   baseline_seeds=d.baseline_seeds, delta_bpc=d.delta_bpc,
                   delta_spread=d.delta_spread,
                   verdict=enum_name(api.DeltaVerdict, d.verdict, "DELTA_VERDICT_"),
                   welch_p=d.welch_p if d.HasField("welch_p") else None)


@dataclass
class GridPoint:
    """One grid point of one group over its seeds: a paper-table row."""

    name: str
    group: str
    role: str  # "moe" or "dense_baseline"
    compute_budget: str
    data_variant: str
    compute_multiple: float
    params: int
    active_params: int
    activation_rate: float
    tokens: int
    unique_tokens: int
    epochs: float
    seeds: int
    bpc_mean: float
    bpc_spread: float
    frontier_leverage: Optional[Leverage]  # the papers' EL; None for dense points
    fixed_n_leverage: Optional[Leverage]  # against one dense shape's law; None for dense
    baselines: List[BaselineDelta]  # against every dense baseline of the group
    delta_bpc_vs_dense_1c: Optional[float]  # None without a 1C baseline (or for it)
    verdict_vs_dense_1c: str

    @classmethod
    def from_proto(cls, p):
        verdict = enum_name(api.DeltaVerdict, p.verdict, "DELTA_VERDICT_")
        return cls(name=p.name, group=p.group,
                   role=enum_name(sweep_pb2.RunRole, p.role, "RUN_ROLE_"),
                   compute_budget=p.compute_budget, data_variant=p.data_variant,
                   compute_multiple=p.compute_multiple, params=p.params,
                   active_params=p.active_params, activation_rate=p.activation_rate,
                   tokens=p.tokens, unique_tokens=p.unique_tokens, epochs=p.epochs,
                   seeds=p.seeds, bpc_mean=p.bpc_mean, bpc_spread=p.bpc_spread,
                   frontier_leverage=Leverage.from_proto(p, "frontier_leverage"),
                   fixed_n_leverage=Leverage.from_proto(p, "fixed_n_leverage"),
                   baselines=[BaselineDelta.from_proto(d) for d in p.baselines],
                   delta_bpc_vs_dense_1c=(p.delta_bpc if verdict not in
                                          ("no_baseline", "is_baseline") else None),
                   verdict_vs_dense_1c=verdict)


@dataclass
class RatePoint:
    """One r_a of a group as the region test sees it."""

    activation_rate: float
    seeds: int
    bpc_mean: float
    bpc_spread: float
    probability_best: Optional[float]  # None when no r_a has two seeds (nothing resampled)
    region: str  # "best", "inside", "outside", "untested"
    p_value_above_best: Optional[float]  # one-sided Welch; None for the best and untested


@dataclass
class LackOfFit:
    verdict: str  # "passes", "rejected", "untested"
    curve: str
    note: str  # why untested
    f: float
    p_value: float
    df_lack: int
    df_pure: int
    test_level: float  # 0.10


@dataclass
class GroupOptimum:
    """A group's optimum as the papers report it. point_optimum (r_a) and its 90% bracket only
    when status is "bracketed"; otherwise reason says why."""

    group: str
    compute_budget: str
    data_variant: str
    status: str  # "bracketed", "not_bracketed", "too_few_rates", "poor_fit", "fit_unchecked"
    reason: str
    best_grid_activation_rate: float
    best_grid_bpc: float
    grid: List[RatePoint]
    region_low: Optional[float]  # r_a span of the region; None when region_note says why
    region_high: Optional[float]
    region_contiguous: bool
    region_note: str  # the test, or why there is no region
    probability_resamples: int
    lack_of_fit: LackOfFit
    point_optimum: Optional[float]
    point_optimum_bpc: Optional[float]
    point_optimum_bracket: Optional[Interval]
    interval_note: str
    points: int
    rates: int

    @classmethod
    def from_proto(cls, o):
        bracketed = o.status == api.OPTIMUM_STATUS_BRACKETED
        resampled = o.probability_resamples > 0
        lof = o.lack_of_fit
        return cls(
            group=o.group, compute_budget=o.compute_budget, data_variant=o.data_variant,
            status=enum_name(api.OptimumStatus, o.status, "OPTIMUM_STATUS_"), reason=o.reason,
            best_grid_activation_rate=o.best_grid_activation_rate,
            best_grid_bpc=o.best_grid_bpc,
            grid=[RatePoint(p.activation_rate, p.seeds, p.bpc_mean, p.bpc_spread,
                            p.probability_best if resampled else None,
                            enum_name(api.RegionStatus, p.region, "REGION_STATUS_"),
                            p.p_value_above_best if p.HasField("p_value_above_best") else None)
                  for p in o.grid],
            region_low=o.region.low if o.HasField("region") else None,
            region_high=o.region.high if o.HasField("region") else None,
            region_contiguous=o.region.contiguous if o.HasField("region") else False,
            region_note=o.region_note, probability_resamples=o.probability_resamples,
            lack_of_fit=LackOfFit(enum_name(api.LackOfFitVerdict, lof.verdict,
                                            "LACK_OF_FIT_VERDICT_"), lof.curve, lof.note, lof.f,
                                  lof.p_value, lof.df_lack, lof.df_pure, lof.test_level),
            point_optimum=o.activation_rate if bracketed else None,
            point_optimum_bpc=o.bpc if bracketed else None,
            point_optimum_bracket=Interval.of(o.activation_rate_interval, o,
                                              "activation_rate_interval"),
            interval_note=o.interval_note, points=o.points, rates=o.rates)


@dataclass
class RunLeverage:
    """A finished MoE run's FIXED-N EL (None when missing says why) beside the EL the published
    joint law predicts for it (not a measurement) and the law refitted to this sweep."""

    run_id: str
    name: str
    activation_rate: float
    fixed_n_efficiency_leverage: Optional[float]
    fixed_n_interval: Optional[Interval]
    missing: str
    predicted_efficiency_leverage_published_law: float
    efficiency_leverage_refitted_law: Optional[float]

    @classmethod
    def from_proto(cls, l):
        return cls(run_id=l.run_id, name=l.name, activation_rate=l.activation_rate,
                   fixed_n_efficiency_leverage=(l.efficiency_leverage
                                                if l.efficiency_leverage > 0 else None),
                   fixed_n_interval=Interval.of(l.efficiency_leverage_interval, l,
                                                "efficiency_leverage_interval"),
                   missing=l.efficiency_leverage_missing,
                   predicted_efficiency_leverage_published_law=l.predicted_efficiency_leverage,
                   efficiency_leverage_refitted_law=(l.fitted_law_efficiency_leverage
                                                     if l.fitted_law_efficiency_leverage > 0
                                                     else None))


@dataclass
class Analysis:
    """client.analyze(sweep_id): every figure of AnalyzeSweep. A law that could not be fitted
    is None beside its *_refusal."""

    dense_frontier: Optional[DenseFrontier]
    dense_frontier_refusal: str
    fixed_n_law: Optional[DenseLaw]
    fixed_n_law_params: int  # N of the dense shape the fixed-N law is fitted to
    fixed_n_law_refusal: str
    grid_points: List[GridPoint] = field(default_factory=list)
    optima: List[GroupOptimum] = field(default_factory=list)
    runs: List[RunLeverage] = field(default_factory=list)
    # The joint EL law refitted to the fixed-N EL: {"fitted": {a, d, gamma, beta, a_start,
    # a_max}, "published": {...}, "points", "budgets", "granularities", "rms_log_residual"};
    # None when el_law_refusal says why.
    el_law: Optional[dict] = None
    el_law_refusal: str = ""
    # The evaluation set analysed ("" = the primary) and every set the finished runs report.
    eval_set: str = ""
    eval_sets: List[str] = field(default_factory=list)

    @classmethod
    def from_proto(cls, r):
        return cls(
            eval_set=r.eval_set, eval_sets=list(r.eval_sets),
            dense_frontier=(DenseFrontier.from_proto(r.dense_frontier)
                            if r.HasField("dense_frontier") else None),
            dense_frontier_refusal=r.dense_frontier_refusal,
            fixed_n_law=DenseLaw.from_proto(r.dense_fit) if r.HasField("dense_fit") else None,
            fixed_n_law_params=r.dense_fit_params, fixed_n_law_refusal=r.dense_fit_refusal,
            grid_points=[GridPoint.from_proto(p) for p in r.grid_points],
            optima=[GroupOptimum.from_proto(o) for o in r.optimal_activation],
            runs=[RunLeverage.from_proto(l) for l in r.leverage],
            el_law=({"fitted": _coefficients(r.efficiency_leverage_law.fitted),
                     "published": _coefficients(r.efficiency_leverage_law.published),
                     "points": r.efficiency_leverage_law.points,
                     "budgets": r.efficiency_leverage_law.budgets,
                     "granularities": r.efficiency_leverage_law.granularities,
                     "rms_log_residual": r.efficiency_leverage_law.rms_log_residual}
                    if r.HasField("efficiency_leverage_law") else None),
            el_law_refusal=r.efficiency_leverage_law_refusal)

    def optimum(self, group):
        """The GroupOptimum of `group` (e.g. "C1/unique"); KeyError naming the groups there are."""
        for o in self.optima:
            if o.group == group:
                return o
        raise KeyError(f"no group {group!r}; groups: {[o.group for o in self.optima]}")

    def leverage_rows(self):
        """One flat dict per MoE grid point: frontier EL and fixed-N EL side by side, each with
        its 90% interval and extrapolation factor (None where missing)."""
        rows = []
        for p in self.grid_points:
            if p.role != "moe":
                continue
            row = {"name": p.name, "group": p.group, "activation_rate": p.activation_rate,
                   "seeds": p.seeds, "bpc_mean": p.bpc_mean}
            for prefix, l in (("frontier_el", p.frontier_leverage),
                              ("fixed_n_el", p.fixed_n_leverage)):
                row[prefix] = l.value if l else None
                row[prefix + "_90_low"] = l.interval.low if l and l.interval else None
                row[prefix + "_90_high"] = l.interval.high if l and l.interval else None
                row[prefix + "_extrapolation_factor"] = (l.extrapolation_factor
                                                         if l and l.extrapolated else None)
                row[prefix + "_missing"] = l.missing_reason if l else ""
            rows.append(row)
        return rows

    def baseline_rows(self):
        """One flat dict per (grid point, dense baseline): ΔBPC, spread, verdict, Welch p."""
        return [dict(name=p.name, group=p.group, **d.__dict__)
                for p in self.grid_points for d in p.baselines]

    def region_rows(self):
        """One flat dict per (group, r_a): probability best, region status, p above best."""
        return [dict(group=o.group, **r.__dict__) for o in self.optima for r in o.grid]

    def leverage_frame(self):
        """leverage_rows() as a pandas DataFrame (needs pandas)."""
        return _frame(self.leverage_rows())

    def baseline_frame(self):
        return _frame(self.baseline_rows())

    def region_frame(self):
        return _frame(self.region_rows())


def _frame(rows):
    try:
        import pandas
    except ImportError as e:
        raise ImportError("a DataFrame needs pandas (apt-get install python3-pandas); "
                          "the rows themselves need nothing") from e
    return pandas.DataFrame(rows)


def _coefficients(c):
    return {"a": c.a, "d": c.d, "gamma": c.gamma, "beta": c.beta, "a_start": c.a_start,
            "a_max": c.a_max}
