"""The export schema (docs/export.md) in Python: the same columns, in the same order, with the
same rules as `parity results --format csv|json|parquet` (export/export_schema.cc), so a frame, a
CSV from the CLI and a Parquet file from either read alike.

The column list is export_columns.json, written by `parity results --columns --format json` and
kept equal to it by the test cli_export_columns_in_sync; every fixed column there must have a
cell rule in _FIXED below (test_export.py fails when the C++ side adds one and this file does
not). Missing is None here: NaN in a frame's numeric columns, null in JSON and Parquet, an empty
CSV cell."""

import csv
import decimal
import io
import json
import math
import os

from parity.v1 import model_pb2, run_pb2, sweep_pb2, sweep_service_pb2 as api, training_pb2

_HERE = os.path.dirname(os.path.abspath(__file__))
PRIMARY_EVAL_SET = "validation"

# The family placeholders of export_columns.json.
GRID_FAMILY = "grid.<axis>"
FINAL_SET_FAMILY = "final_bpc.<set>"
DELTA_FAMILY = "delta_bpc_vs_dense_<m>c"
DELTA_SET_FAMILY = "delta_bpc_vs_dense_<m>c.<set>"


def documented_columns():
    """[{"name", "type", "unit", "meaning"}, ...]: the column reference, families included."""
    with open(os.path.join(_HERE, "export_columns.json"), encoding="utf-8") as f:
        return json.load(f)


def _enum(enum_type, number, prefix):
    """The spec's spelling of an enum value ("succeeded", "dense_baseline", "wsd"); None for 0."""
    if number == 0:
        return None
    try:
        return enum_type.Name(number)[len(prefix):].lower()
    except ValueError:
        return "unspecified"


def _text(s):
    return s if s else None


def _double(v):
    return v if math.isfinite(v) else None


def _positive(v):
    return v if math.isfinite(v) and v > 0 else None


def _seed_int(v):
    """uint64 as the int64 the CLI writes (two's complement past 2^63)."""
    return v - (1 << 64) if v >= (1 << 63) else v


def _training(run, get):
    return None if run is None else get(run.spec.training)


def _optional(message, name):
    return getattr(message, name) if message.HasField(name) else None


def _finished(row):
    return (row.state == run_pb2.RUN_STATE_SUCCEEDED and math.isfinite(row.final_val_bpc)
            and row.final_val_bpc > 0)


# Every fixed column: how its cell is made from (ResultRow, Run or None, finished).
_FIXED = {
    "sweep_id": lambda r, run, done: r.sweep_id,
    "run_id": lambda r, run, done: r.run_id,
    "run_name": lambda r, run, done: r.name,
    "role": lambda r, run, done: _enum(sweep_pb2.RunRole, r.role, "RUN_ROLE_"),
    "layout": lambda r, run, done: _text(r.layout),
    "state": lambda r, run, done: _enum(run_pb2.RunState, r.state, "RUN_STATE_"),
    "compute_budget": lambda r, run, done: _text(r.compute_budget),
    "compute_multiple": lambda r, run, done: _double(r.compute_multiple),
    "data_variant": lambda r, run, done: _text(r.data_variant),
    "seed": lambda r, run, done: _seed_int(r.seed),
    "d_model": lambda r, run, done: r.d_model,
    "num_layers": lambda r, run, done: r.num_layers,
    "num_experts": lambda r, run, done: r.num_experts,
    "top_k": lambda r, run, done: r.top_k,
    "expert_hidden": lambda r, run, done: r.expert_hidden,
    "hyperparameter_rule": lambda r, run, done: _training(
        run, lambda t: _enum(training_pb2.HyperparameterRule, t.rule, "HYPERPARAMETER_RULE_")),
    "learning_rate": lambda r, run, done: _training(run, lambda t: _positive(t.learning_rate)),
    "batch_tokens": lambda r, run, done: _training(run, lambda t: t.batch_tokens),
    "sequence_length": lambda r, run, done: _training(run, lambda t: t.sequence_length),
    "steps": lambda r, run, done: _training(run, lambda t: t.steps),
    "lr_schedule": lambda r, run, done: _training(
        run, lambda t: _enum(training_pb2.LrSchedule, t.schedule, "LR_SCHEDULE_")),
    "warmup_steps": lambda r, run, done: _training(run, lambda t: t.warmup_steps),
    "weight_decay": lambda r, run, done: _training(run, lambda t: _optional(t, "weight_decay")),
    "grad_clip": lambda r, run, done: _training(run, lambda t: _optional(t, "grad_clip")),
    "params": lambda r, run, done: r.params,
    "active_params": lambda r, run, done: r.active_params,
    "activation_rate": lambda r, run, done: _double(r.activation_rate),
    "flops_per_token": lambda r, run, done: _double(r.flops_per_token),
    "measured_flops_per_token": lambda r, run, done: _positive(r.measured_flops_per_token),
    "compute_flops": lambda r, run, done: _double(r.compute_flops),
    "tokens": lambda r, run, done: r.tokens,
    "unique_tokens": lambda r, run, done: r.unique_tokens,
    "epochs": lambda r, run, done: _double(r.epochs),
    "wall_seconds": lambda r, run, done: _positive(r.wall_seconds),
    "predicted_efficiency_leverage": lambda r, run, done: (
        _positive(r.predicted_efficiency_leverage) if r.role == sweep_pb2.RUN_ROLE_MOE else None),
    "final_val_bpc": lambda r, run, done: r.final_val_bpc if done else None,
    "failure_class": lambda r, run, done: None if run is None else _enum(
        run_pb2.FailureClass, run.failure_class, "FAILURE_CLASS_"),
    "failure_message": lambda r, run, done: None if run is None else _text(run.failure.message),
    "dataset_digest": lambda r, run, done: _text(r.dataset_digest),
}
FIXED_RULES = frozenset(_FIXED)


_LAYOUTS = {model_pb2.MOE_LAYOUT_ALL_MOE: "all-moe",
            model_pb2.MOE_LAYOUT_INTERLEAVED: "interleaved"}


def result_row_of_run(run):
    """The results view's row of a parity.v1.Run, from the run alone (as
    export/export_schema.cc's ResultRowOfRun): the export reads ListRuns, not QueryResults,
    whose per-row baseline lookup is slow on very large sweeps. BPC, measured M and wall time
    only for a succeeded run."""
    spec, model, a = run.spec, run.spec.model, run.spec.accounting
    if model.architecture != model_pb2.ARCHITECTURE_MOE:
        layout = "dense"
    else:
        layout = _LAYOUTS.get(model.moe.layout, "1dense+SE")
    row = api.ResultRow(
        run_id=run.run_id, sweep_id=run.sweep_id, name=spec.name, role=spec.role, layout=layout,
        state=run.state, d_model=model.d_model, num_layers=model.num_layers,
        num_experts=model.moe.num_experts, top_k=model.moe.top_k,
        expert_hidden=model.moe.expert_hidden, params=a.params, active_params=a.active_params,
        activation_rate=a.activation_rate, flops_per_token=a.flops_per_token,
        compute_flops=a.compute_flops, tokens=a.tokens, unique_tokens=a.unique_tokens,
        epochs=a.epochs, compute_budget=spec.compute_budget,
        compute_multiple=spec.compute_multiple, data_variant=spec.data_variant,
        predicted_efficiency_leverage=spec.predicted_efficiency_leverage,
        seed=spec.training.seed)
    if run.state == run_pb2.RUN_STATE_SUCCEEDED:
        summary = run.summary
        row.final_val_bpc = summary.final_val_bpc
        row.measured_flops_per_token = summary.measured_flops_per_token
        row.wall_seconds = summary.wall_time.seconds + summary.wall_time.nanos * 1e-9
        row.final_eval_bpc.update(summary.final_eval_bpc)
        row.dataset_digest = summary.dataset_digest
    return row


def multiple_suffix(multiple):
    """"1c", "2c", "0p5c", as export/export_schema.cc's MultipleSuffix."""
    return f"{multiple:g}c".replace(".", "p")


def _baselines(rows, runs):
    """Multiples present (1 always) and (sweep, budget, variant, seed, m) → baseline ResultRow: the
    first succeeded dense baseline in grid order, or a run serving as one for that group."""
    multiples = {1.0}
    baselines = {}
    for row in rows:
        groups = []
        if row.role == sweep_pb2.RUN_ROLE_DENSE_BASELINE:
            groups.append((row.compute_budget, row.data_variant, row.compute_multiple))
        run = runs.get(row.run_id)
        if run is not None:
            groups += [(g.compute_budget, g.data_variant, g.compute_multiple)
                       for g in run.spec.also_serves
                       if g.role == sweep_pb2.RUN_ROLE_DENSE_BASELINE]
        for budget, variant, m in groups:
            if not m > 0:
                continue
            multiples.add(m)
            if _finished(row):
                baselines.setdefault((row.sweep_id, budget, variant, row.seed, m), row)
    return sorted(multiples), baselines


def _set_bpc(row, name):
    value = row.final_eval_bpc.get(name)
    return None if value is None or not math.isfinite(value) else value


def export_table(rows, runs):
    """(columns, cells): columns as [(name, type)], cells one list per row, for ResultRow
    messages `rows` (grid order) joined with `runs` (run id → parity.v1.Run; a run absent leaves
    its grid-point, hyperparameter and failure cells None)."""
    axes = sorted({axis for r in rows if r.run_id in runs
                   for axis in runs[r.run_id].spec.grid_point})
    sets = sorted({s for r in rows for s in r.final_eval_bpc if s != PRIMARY_EVAL_SET})
    multiples, baselines = _baselines(rows, runs)

    def baseline(row, m):
        return baselines.get((row.sweep_id, row.compute_budget, row.data_variant, row.seed, m))

    def delta(row, done, m, name=None):
        b = baseline(row, m) if done else None
        if b is None:
            return None
        if name is None:
            return _double(row.final_val_bpc - b.final_val_bpc)
        mine, theirs = _set_bpc(row, name), _set_bpc(b, name)
        return None if mine is None or theirs is None else _double(mine - theirs)

    plans = []  # (name, type, cell(row, run, done))
    for c in documented_columns():
        name, kind = c["name"], c["type"]
        if name == GRID_FAMILY:
            plans += [("grid." + a, kind, lambda r, run, done, a=a: None if run is None else
                       run.spec.grid_point.get(a)) for a in axes]
        elif name == FINAL_SET_FAMILY:
            plans += [("final_bpc." + s, kind, lambda r, run, done, s=s:
                       _set_bpc(r, s) if done else None) for s in sets]
        elif name == DELTA_FAMILY:
            plans += [("delta_bpc_vs_dense_" + multiple_suffix(m), kind,
                       lambda r, run, done, m=m: delta(r, done, m)) for m in multiples]
        elif name == DELTA_SET_FAMILY:
            plans += [("delta_bpc_vs_dense_" + multiple_suffix(m) + "." + s, kind,
                       lambda r, run, done, m=m, s=s: delta(r, done, m, s))
                      for m in multiples for s in sets]
        else:
            plans.append((name, kind, _FIXED[name]))
    cells = []
    for row in rows:
        run = runs.get(row.run_id)
        done = _finished(row)
        cells.append([cell(row, run, done) for _, _, cell in plans])
    return [(name, kind) for name, kind, _ in plans], cells


def frame(columns, cells):
    """A pandas DataFrame of the table: NaN for a missing number, None for a missing string."""
    from .rows import dict_frame
    df = dict_frame([dict(zip((n for n, _ in columns), row)) for row in cells])
    if not cells:
        import pandas
        return pandas.DataFrame(columns=[n for n, _ in columns])
    for name, kind in columns:
        if kind == "double" or (kind == "int64" and df[name].isna().any()):
            df[name] = df[name].astype("float64")  # None → NaN
    return df


def number_text(value):
    """A number as the CLI writes it (C++ std::to_chars): the shortest digits that read back to
    the same double, in fixed or scientific notation, whichever is shorter (fixed on a tie):
    0.1 → "0.1", 2e10 → "2e+10", 123456789.0 → "123456789", 1e-05 → "1e-05"."""
    if not isinstance(value, float):
        return str(value)
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    exact = decimal.Decimal(repr(abs(value))).as_tuple()  # repr: the shortest round-trip digits
    exponent = len(exact.digits) + exact.exponent - 1  # of the first digit
    digits = "".join(map(str, exact.digits)).rstrip("0") or "0"
    scientific = (digits[0] + ("." + digits[1:] if len(digits) > 1 else "") +
                  ("e+" if exponent >= 0 else "e-") + f"{abs(exponent):02d}")
    if exponent >= 0:
        whole = exponent + 1
        # A whole number in fixed notation is its exact value (to_chars: 1.2345678901234567e20
        # → "123456789012345667584"), not the shortest digits padded with zeros.
        fixed = (str(int(abs(value))) if len(digits) <= whole
                 else digits[:whole] + "." + digits[whole:])
    else:
        fixed = "0." + "0" * (-exponent - 1) + digits
    return sign + (fixed if len(fixed) <= len(scientific) else scientific)


def write(columns, cells, path, fmt):
    """Writes the table to `path` as "csv", "json" or "parquet" (Parquet needs pyarrow)."""
    if fmt == "parquet":
        _write_parquet(columns, cells, path)
    elif fmt == "csv":
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(csv_text(columns, cells))
    elif fmt == "json":
        names = [n for n, _ in columns]
        with open(path, "w", encoding="utf-8") as f:
            json.dump([dict(zip(names, row)) for row in cells], f, ensure_ascii=False,
                      indent=1, allow_nan=False)
    else:
        raise ValueError(f"format: {fmt!r} is not csv, json or parquet")


def _write_parquet(columns, cells, path):
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as e:
        raise ImportError(
            "writing Parquet from Python needs pyarrow: pip install pyarrow (or "
            "pip install 'parity-client[parquet]'); without it, the CLI writes the same file: "
            "parity results SWEEP --format parquet --out FILE") from e
    types = {"string": pyarrow.string(), "int64": pyarrow.int64(), "double": pyarrow.float64()}
    arrays = [pyarrow.array([row[i] for row in cells], type=types[kind])
              for i, (_, kind) in enumerate(columns)]
    table = pyarrow.Table.from_arrays(arrays, names=[n for n, _ in columns])
    pyarrow.parquet.write_table(table, path)


def csv_text(columns, cells):
    """The table as the CLI's CSV text (for tests and small sweeps)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([n for n, _ in columns])
    for row in cells:
        writer.writerow(["" if v is None else v if isinstance(v, str) else number_text(v)
                         for v in row])
    return out.getvalue()
