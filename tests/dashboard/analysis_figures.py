"""The same analysis figures everywhere: for one seeded sweep, compares the dashboard API's
analysis document (GET /api/v1/sweeps/ID/analysis, saved by dashboard_test.cc), the Python
client's analyze() and `parity report`'s analysis.md — per MoE grid point the frontier EL and the
fixed-N EL (value, 90% interval, extrapolation), per group the best grid point, region span,
every point's probability of being best and region status, the lack-of-fit verdict and the
point optimum or its reason, and ΔBPC against every dense baseline with its Welch p.

    analysis_figures.py --api-json FILE --report-md FILE --scheduler HOST:PORT --token T --sweep ID

Prints "FAIL: what differs" for each difference and exits 1; exits 0 when all agree.
"""

import argparse
import json
import re
import sys

import parity_client

FAILURES = []


def fail(message):
    FAILURES.append(message)


def close(a, b, tolerance):
    return a is not None and b is not None and abs(a - b) <= tolerance


def api_leverage(leverage):
    """(value or None, low, high, extrapolation factor or None) of an API GridPointLeverage."""
    value = leverage.get("value", 0)
    if not value > 0:
        return None, None, None, None
    interval = leverage.get("interval")
    return (value, interval["low"] if interval else None, interval["high"] if interval else None,
            leverage["extrapolation_factor"] if leverage.get("extrapolated") else None)


def client_leverage(leverage):
    if leverage is None or leverage.value is None:
        return None, None, None, None
    interval = leverage.interval
    return (leverage.value, interval.low if interval else None, interval.high if interval else None,
            leverage.extrapolation_factor if leverage.extrapolated else None)


def same(what, api, client, tolerance=1e-9):
    for i, (a, c) in enumerate(zip(api, client)):
        if (a is None) != (c is None) or (a is not None and not close(a, c, tolerance)):
            fail(f"{what}: API {api} but Python client {client} (element {i})")
            return


LEVERAGE_CELL = re.compile(
    r"^([\d.]+)(?: \[([\d.]+) – ([\d.]+)\])?(?: \(extrapolated ×([\d.]+)\))?$")


def markdown_leverage(cell):
    if cell.startswith("—"):
        return None, None, None, None
    m = LEVERAGE_CELL.match(cell)
    if not m:
        fail(f"analysis.md: an EL cell reads {cell!r}, "
             "not 'value [low – high] (extrapolated ×k)'")
        return None, None, None, None
    return tuple(float(g) if g is not None else None for g in m.groups())


def same_shown(what, api, shown, digits):
    """The report shows `api` rounded to `digits` (the extrapolation factor to 1 decimal)."""
    for i, (a, s) in enumerate(zip(api, shown)):
        tolerance = 0.051 if i == 3 else 0.51 * 10 ** -digits
        if (a is None) != (s is None) or (a is not None and not close(a, s, tolerance)):
            fail(f"{what}: API {api} but analysis.md shows {shown}")
            return


def markdown_tables(text):
    """{section heading: [rows as cell lists]} for every '## ' and '### ' section's tables."""
    tables, heading = {}, None
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            continue
        if line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            tables.setdefault(heading, []).append(cells)
    return {k: rows[1:] for k, rows in tables.items()}  # without the header row


def percent(cell):
    return float(cell.rstrip("%")) / 100 if cell.endswith("%") else None


def check_points(api, analysis, tables):
    client = {(p.group, p.name): p for p in analysis.grid_points}
    shown = {(r[1], r[0]): r for r in tables.get("Efficiency leverage per MoE grid point", [])}
    moe = [p for p in api["grid_points"] if p["role"] == "RUN_ROLE_MOE"]
    if not moe:
        fail("the API lists no MoE grid point")
    for p in moe:
        key = (p["group"], p["name"])
        c = client.get(key)
        if c is None:
            fail(f"the Python client has no grid point {key}")
            continue
        row = shown.get(key)
        if row is None:
            fail(f"analysis.md's EL table has no row for {key}")
        for kind, column in (("frontier_leverage", 4), ("fixed_n_leverage", 5)):
            a = api_leverage(p[kind])
            same(f"{key} {kind}", a, client_leverage(getattr(c, kind)))
            if row is not None:
                same_shown(f"{key} {kind}", a, markdown_leverage(row[column]), 2)
        api_baselines = {b["baseline"]: b for b in p.get("baselines", [])}
        client_baselines = {b.baseline: b for b in c.baselines}
        if set(api_baselines) != set(client_baselines):
            fail(f"{key}: baselines {sorted(api_baselines)} in the API, {sorted(client_baselines)} "
                 "in the Python client")
    shown_baselines = {(r[1], r[0], r[2]): r
                       for r in tables.get("ΔBPC against every dense baseline", [])}
    for p in api["grid_points"]:
        c = client.get((p["group"], p["name"]))
        for b in p.get("baselines", []):
            key = (p["group"], p["name"], b["baseline"])
            cb = next((x for x in (c.baselines if c else []) if x.baseline == b["baseline"]), None)
            if cb is None:
                continue
            same(f"ΔBPC {key}", (b["delta_bpc"], b.get("welch_p")), (cb.delta_bpc, cb.welch_p))
            row = shown_baselines.get(key)
            if row is None:
                fail(f"analysis.md's ΔBPC table has no row for {key}")
                continue
            welch = float(row[8][4:]) if row[8].startswith("p = ") else None
            same_shown(f"ΔBPC {key}", (b["delta_bpc"], b.get("welch_p")),
                       (float(row[5]), welch), 3)


REGION_WORD = {"REGION_STATUS_BEST": "best", "REGION_STATUS_INSIDE": "inside",
               "REGION_STATUS_OUTSIDE": "outside", "REGION_STATUS_UNTESTED": "untested"}
LACK_OF_FIT_WORD = {"LACK_OF_FIT_VERDICT_PASSES": "passes",
                    "LACK_OF_FIT_VERDICT_REJECTED": "rejected",
                    "LACK_OF_FIT_VERDICT_UNTESTED": "untested"}


def check_optima(api, analysis, tables):
    shown = {r[0]: r for r in tables.get("Optimal activation rate per group", [])}
    for o in api["optimal_activation"]:
        group = o["group"]
        try:
            c = analysis.optimum(group)
        except KeyError as e:
            fail(str(e))
            continue
        region = o.get("region")
        same(f"{group} best and region",
             (o["best_grid_activation_rate"], region["low"] if region else None,
              region["high"] if region else None),
             (c.best_grid_activation_rate, c.region_low, c.region_high))
        if c.lack_of_fit.verdict != LACK_OF_FIT_WORD[o["lack_of_fit"]["verdict"]]:
            fail(f"{group}: lack of fit {o['lack_of_fit']['verdict']} in the API, "
                 f"{c.lack_of_fit.verdict} in the Python client")
        bracketed = o["status"] == "OPTIMUM_STATUS_BRACKETED"
        if bracketed != (c.point_optimum is not None):
            fail(f"{group}: status {o['status']} but the Python client's point optimum is "
                 f"{c.point_optimum}")
        row = shown.get(group)
        if row is None:
            fail(f"analysis.md's optimum table has no row for {group}")
            continue
        if not row[3].startswith(LACK_OF_FIT_WORD[o["lack_of_fit"]["verdict"]]):
            fail(f"{group}: analysis.md's lack of fit reads {row[3]!r}, "
                 f"the API says {o['lack_of_fit']}")
        if bracketed == row[4].startswith("none: "):
            fail(f"{group}: analysis.md's point optimum reads {row[4]!r}, "
                 f"the API's status is {o['status']}")
        if not bracketed and row[4] != f"none: {o['reason']}":
            fail(f"{group}: analysis.md's reason {row[4]!r} differs from the API's {o['reason']!r}")
        span = f"{100 * region['low']:.1f}% – {100 * region['high']:.1f}%" if region else ""
        if region and not row[2].startswith(span):
            fail(f"{group}: analysis.md's region {row[2]!r}, the API's {region}")
        grid_rows = tables.get(group, [])
        if len(grid_rows) != len(o["grid"]) or len(c.grid) != len(o["grid"]):
            fail(f"{group}: {len(o['grid'])} grid points in the API, {len(c.grid)} in the Python "
                 f"client, {len(grid_rows)} in analysis.md")
            continue
        resampled = o["probability_resamples"] > 0
        for p, cp, r in zip(o["grid"], c.grid, grid_rows):
            what = f"{group} r_a {p['activation_rate']:.4f}"
            same(what, (p["activation_rate"], p["probability_best"] if resampled else None,
                        p.get("p_value_above_best")),
                 (cp.activation_rate, cp.probability_best, cp.p_value_above_best))
            if cp.region != REGION_WORD[p["region"]] or r[3] != REGION_WORD[p["region"]]:
                fail(f"{what}: region {p['region']} in the API, {cp.region} in the Python client, "
                     f"{r[3]} in analysis.md")
            same_shown(what, (p["activation_rate"], p["probability_best"] if resampled else None),
                       (percent(r[0]), percent(r[2])), 3)


def main():
    parser = argparse.ArgumentParser()
    for name in ("api-json", "report-md", "scheduler", "token", "sweep"):
        parser.add_argument("--" + name, required=True)
    args = parser.parse_args()
    with open(args.api_json) as f:
        api = json.load(f)
    with open(args.report_md) as f:
        tables = markdown_tables(f.read())
    with parity_client.connect(args.scheduler, token=args.token) as client:
        analysis = client.analyze(args.sweep)
    check_points(api, analysis, tables)
    check_optima(api, analysis, tables)
    if analysis.dense_frontier is None or api.get("dense_frontier") is None:
        fail("the dense frontier is missing from the API or the Python client")
    else:
        same("frontier points",
             [p["bpc"] for p in api["dense_frontier"]["points"]],
             [p.bpc for p in analysis.dense_frontier.points])
    for message in FAILURES:
        print(f"FAIL: {message}")
    if FAILURES:
        return 1
    moe = sum(1 for p in api["grid_points"] if p["role"] == "RUN_ROLE_MOE")
    print(f"analysis figures agree: {moe} MoE grid points (frontier and fixed-N EL), "
          f"{len(api['optimal_activation'])} groups (region, P(best), lack of fit, point optimum), "
          f"{sum(len(p.get('baselines', [])) for p in api['grid_points'])} baseline comparisons")
    return 0


if __name__ == "__main__":
    sys.exit(main())
