#!/usr/bin/env python3
"""Checks that the Grafana dashboard and the Prometheus alert rules use only what Parity exports.

deploy/prometheus/metrics.txt lists every exported family with its type and labels; the C++
tests (tests/scheduler/metrics_test.cc, worker/tests/worker_metrics_test.cc) keep it equal to a
real scrape. This script checks, against that list:
  - the dashboard JSON parses and is importable: schemaVersion, the ${DS_PROMETHEUS} input, a
    datasource on every panel, unique panel ids, the four rows (queue, throughput, worker health,
    live BPC);
  - every parity_* name in a dashboard query, a template variable or alerts.yml is exported
    (histograms as _bucket/_sum/_count), every label it matches on, groups by or shows in a
    legend is one of that metric's labels (or a target label);
  - every dashboard query is valid PromQL: they are written into a rule file for
    `promtool check rules` (template variables replaced by plain values).
Exit status 0 when all holds; 1 with one line per problem otherwise.

  check_metric_names.py --metrics M.txt --dashboard D.json --rules alerts.yml --promtool promtool
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

TARGET_LABELS = {"instance", "job"}  # added by Prometheus to every scraped series
NAME = re.compile(r"(?<![A-Za-z0-9_:.$])(parity_[A-Za-z0-9_:]+)")
SELECTOR = re.compile(r"(parity_[A-Za-z0-9_:]+)\s*\{([^}]*)\}")
MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
LEGEND = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
REQUIRED_ROWS = ["queue", "throughput", "worker health", "bpc"]
# Series Prometheus makes itself, which a query may use besides Parity's.
STANDARD = re.compile(r"\bup\s*\{")


def read_list(path):
    """name -> (type, set of labels)"""
    families = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, kind, labels = line.split()
            families[name] = (kind, set() if labels == "-" else set(labels.split(",")))
    return families


def sample_names(families):
    """Names a query may use -> the labels their samples carry."""
    names = {}
    for name, (kind, labels) in families.items():
        if kind in ("histogram", "summary"):
            names[name + "_bucket"] = labels | {"le"}
            names[name + "_sum"] = labels
            names[name + "_count"] = labels
        else:
            names[name] = labels
    return names


def check_expr(where, expr, names, problems, legend=""):
    used = NAME.findall(expr)
    labels = set(TARGET_LABELS)
    for name in used:
        if name not in names:
            problems.append(f"{where}: {name} is not exported (deploy/prometheus/metrics.txt)")
        else:
            labels |= names[name]
    for name, matchers in SELECTOR.findall(expr):
        for label in MATCHER.findall(matchers):
            if name in names and label not in names[name] | TARGET_LABELS:
                problems.append(f"{where}: {name} has no label {label}")
    for group in GROUPING.findall(expr):
        for label in filter(None, (l.strip() for l in group.split(","))):
            if used and label not in labels:
                problems.append(f"{where}: groups by {label}, which none of its metrics has")
    for label in LEGEND.findall(legend):
        if label not in labels:
            problems.append(f"{where}: legend shows {{{{{label}}}}}, which its metrics lack")
    return used


def walk_panels(panels):
    for panel in panels:
        yield panel
        yield from walk_panels(panel.get("panels", []))


def check_dashboard(path, names, problems):
    """Returns the PromQL expressions to give promtool."""
    try:
        with open(path, encoding="utf-8") as f:
            dashboard = json.load(f)
    except (OSError, ValueError) as e:
        problems.append(f"{path}: not readable JSON: {e}")
        return []
    if not isinstance(dashboard.get("schemaVersion"), int) or dashboard["schemaVersion"] < 36:
        problems.append(f"{path}: schemaVersion must be 36 or newer")
    inputs = {i.get("name"): i for i in dashboard.get("__inputs", [])}
    if inputs.get("DS_PROMETHEUS", {}).get("pluginId") != "prometheus":
        problems.append(f"{path}: no __inputs entry DS_PROMETHEUS for the prometheus plugin")
    for key in ("title", "uid", "panels"):
        if not dashboard.get(key):
            problems.append(f"{path}: no {key}")
    exprs = []
    ids = set()
    rows = []
    for panel in walk_panels(dashboard.get("panels", [])):
        where = f"{path}: panel '{panel.get('title', '?')}'"
        if panel.get("id") in ids:
            problems.append(f"{where}: duplicate id {panel.get('id')}")
        ids.add(panel.get("id"))
        if "gridPos" not in panel:
            problems.append(f"{where}: no gridPos")
        if panel.get("type") == "row":
            rows.append(panel.get("title", "").lower())
            continue
        if panel.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}":
            problems.append(f"{where}: datasource is not ${{DS_PROMETHEUS}}")
        if not panel.get("targets"):
            problems.append(f"{where}: no queries")
        for target in panel.get("targets", []):
            expr = target.get("expr", "")
            if not expr:
                problems.append(f"{where}: a query without expr")
                continue
            used = check_expr(where, expr, names, problems, target.get("legendFormat", ""))
            if not used and not STANDARD.search(expr):
                problems.append(f"{where}: '{expr}' uses no Parity metric")
            exprs.append(expr)
    for wanted in REQUIRED_ROWS:
        if not any(wanted in row for row in rows):
            problems.append(f"{path}: no row about '{wanted}' (rows: {rows})")
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        query = query.get("query", "") if isinstance(query, dict) else query or ""
        where = f"{path}: variable '{variable.get('name')}'"
        match = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", query)
        if not match:
            problems.append(f"{where}: expected label_values(SELECTOR, LABEL), got '{query}'")
            continue
        selector, label = match.groups()
        for name in check_expr(where, selector, names, problems):
            if name in names and label not in names[name] | TARGET_LABELS:
                problems.append(f"{where}: {name} has no label {label}")
        exprs.append(selector)
    return exprs


def rule_exprs(path, problems):
    """The expr of every rule in an alerts file (plain or folded/literal block scalars)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        problems.append(f"{path}: {e}")
        return []
    exprs = []
    i = 0
    while i < len(lines):
        match = re.match(r"^(\s*)(?:- )?expr:\s*(.*)$", lines[i])
        i += 1
        if not match:
            continue
        indent, value = len(match.group(1)), match.group(2).strip()
        if value in ("", ">", ">-", "|", "|-"):
            block = []
            while i < len(lines) and (not lines[i].strip() or
                                      len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i].strip())
                i += 1
            value = " ".join(block)
        exprs.append(value)
    if not exprs:
        problems.append(f"{path}: no expr found")
    return exprs


def promtool_check(promtool, exprs, problems):
    rules = ["groups:", "  - name: dashboard", "    rules:"]
    for n, expr in enumerate(exprs):
        plain = (expr.replace("$__rate_interval", "5m").replace("$sweep", ".*")
                 .replace("$instance", ".*"))
        rules.append(f"      - record: parity:dashboard_query_{n}")
        rules.append(f"        expr: {json.dumps(plain)}")
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write("\n".join(rules) + "\n")
        path = f.name
    try:
        result = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
    except OSError as e:
        problems.append(f"cannot run {promtool} (Debian package prometheus, deploy/setup.sh): {e}")
        return
    finally:
        os.unlink(path)
    if result.returncode != 0:
        problems.append("promtool rejects a dashboard query:\n" + result.stdout + result.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--dashboard", required=True)
    parser.add_argument("--rules", required=True)
    parser.add_argument("--promtool", default="promtool")
    args = parser.parse_args()

    problems = []
    names = sample_names(read_list(args.metrics))
    exprs = check_dashboard(args.dashboard, names, problems)
    for expr in rule_exprs(args.rules, problems):
        check_expr(f"{args.rules}: '{expr}'", expr, names, problems)
    # Names anywhere in the rules (annotations too) must exist.
    with open(args.rules, encoding="utf-8") as f:
        for name in NAME.findall(f.read()):
            if name not in names:
                problems.append(f"{args.rules}: {name} is not exported")
    promtool_check(args.promtool, exprs, problems)

    for problem in dict.fromkeys(problems):
        print(problem)
    if problems:
        return 1
    print(f"ok: {len(exprs)} dashboard queries and the rules of {args.rules} use exported metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
