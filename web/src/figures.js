// From API documents to chart datasets: pure functions, no DOM, so each figure's rules are in
// one place. A run's "group" is what its colour means: its activation rate for an MoE run, its
// compute multiple for a dense baseline ("dense 1C", "dense 2C").
import {count, num, percent} from './format.js';

// Perceptually ordered colours for r_a (low = dark purple, high = orange).
const RATE_PALETTE = ['#3b0f70', '#6a1c81', '#9c2e7f', '#cd4071', '#f1605d', '#fd9668'];
// Categorical colours for the equal-resource series (one per budget × data variant).
const SERIES_PALETTE = ['#2563eb', '#ea580c', '#16a34a', '#9333ea', '#0891b2', '#ca8a04',
                        '#db2777', '#4b5563'];
const DENSE_COLOURS = {1: '#0f172a', 2: '#64748b'};

function mix(a, b, t) {
  const channel = (hex, i) => parseInt(hex.slice(1 + 2 * i, 3 + 2 * i), 16);
  const out = [0, 1, 2].map((i) => Math.round(channel(a, i) + (channel(b, i) - channel(a, i)) * t));
  return `#${out.map((v) => v.toString(16).padStart(2, '0')).join('')}`;
}

// A colour for r_a on a log scale between the sweep's smallest and largest MoE rates.
export function rateColour(rate, minRate, maxRate) {
  if (!(maxRate > minRate)) return RATE_PALETTE[2];
  const t = Math.min(1, Math.max(0, Math.log(rate / minRate) / Math.log(maxRate / minRate)));
  const position = t * (RATE_PALETTE.length - 1);
  const i = Math.min(Math.floor(position), RATE_PALETTE.length - 2);
  return mix(RATE_PALETTE[i], RATE_PALETTE[i + 1], position - i);
}

export function multipleLabel(multiple) {
  const m = num(multiple) || 1;
  return `${Number(m.toFixed(2))}C`;
}

function denseDash(multiple) {
  return num(multiple) > 1.5 ? [7, 4] : [];
}

export function isDense(role) {
  return role === 'RUN_ROLE_DENSE_BASELINE' || role === 'RUN_ROLE_DENSE_FRONTIER';
}

// Line patterns that tell compute budgets apart (colour is r_a's): solid, dashed, dotted, ...
const BUDGET_DASHES = [[], [8, 4], [2, 3], [12, 3, 2, 3], [4, 4]];

// {group, colour, dash, order} of a run (a Run message with its spec); `budgets` the sweep's
// budget names in order. Colour says r_a (or the dense multiple), the line's pattern its budget,
// and the legend has one entry per (r_a, budget) drawn in both, with r_a to 0.1%.
export function runStyle(spec, rateRange, budgets = []) {
  const budgetIndex = Math.max(0, budgets.indexOf(spec.compute_budget));
  const dash = BUDGET_DASHES[budgetIndex % BUDGET_DASHES.length];
  const budget = budgets.length > 1 ? ` · ${spec.compute_budget}` : '';
  if (isDense(spec.role)) {
    const multiple = num(spec.compute_multiple) || 1;
    return {group: `dense ${multipleLabel(multiple)}${budget}`,
            colour: DENSE_COLOURS[Math.round(multiple)] || '#334155',
            dash: budgets.length > 1 ? dash : denseDash(multiple), order: 1000 + multiple + budgetIndex / 100};
  }
  const rate = num(spec.accounting?.activation_rate);
  return {group: `MoE r_a ${percent(rate, 1)}${budget}`, colour: rateColour(rate, rateRange[0], rateRange[1]),
          dash, order: rate + budgetIndex / 1000};
}

export function budgetNames(specs) {
  return [...new Set(specs.map((s) => s.compute_budget))].sort();
}

export function moeRateRange(specs) {
  const rates = specs.filter((s) => !isDense(s.role)).map((s) => num(s.accounting?.activation_rate))
                     .filter((r) => r > 0);
  return rates.length ? [Math.min(...rates), Math.max(...rates)] : [0.1, 1];
}

// Validation curves, one line per run: x = "tokens" or "flops"; `sweepBudgets` (the sweep's
// compute budgets, sorted) keeps each budget's line pattern the same on every page of runs.
export function curveDatasets(runs, curves, xKey, sweepBudgets = null) {
  const byId = new Map(runs.map((run) => [run.run_id, run]));
  const range = moeRateRange(runs.map((run) => run.spec));
  const budgets = sweepBudgets || budgetNames(runs.map((run) => run.spec));
  const datasets = [];
  for (const curve of curves.runs || []) {
    const run = byId.get(curve.run_id);
    if (!run) continue;
    const style = runStyle(run.spec, range, budgets);
    datasets.push({
      label: run.spec.name,
      group: style.group,
      order: style.order,
      borderColor: style.colour,
      backgroundColor: style.colour,
      borderDash: style.dash,
      data: curve[xKey].map((x, i) => ({x: num(x), y: num(curve.val_bpc[i])})),
    });
  }
  // Legend entries in r_a order, dense baselines last.
  return datasets.sort((a, b) => a.order - b.order || a.label.localeCompare(b.label));
}

// Mean over seeds of grid points that share a key (a grid with hyperparameter axes has several
// grid points at one r_a), weighted by their seeds: {key → {sum, seeds}}.
function addWeighted(map, key, point) {
  const entry = map.get(key) || {sum: 0, seeds: 0};
  const seeds = num(point.seeds) || 1;
  entry.sum += seeds * num(point.bpc_mean);
  entry.seeds += seeds;
  map.set(key, entry);
}

// The equal-resource figure, from the analysis alone (its grid points: mean final BPC over
// seeds, computed by the server over every finished run, so a 10,000-run sweep sends its grid,
// not its rows): one series per (compute budget, data variant), each group's dense baselines
// (1C, 2C; one line per size when a group measured several) as horizontal lines, each group's
// region (the best grid point and those not significantly above it) as shaded discs on its
// points, and the point optimum as a star where the analysis gives one.
export function equalResourceDatasets(analysis) {
  const points = (analysis?.grid_points || []).filter((p) => num(p.bpc_mean) > 0);
  const groups = new Map();  // "C1 · unique" → {moe: Map(rate → mean), dense: Map("mult|N" → mean)}
  const keyOf = (p) => `${p.compute_budget} · ${p.data_variant}`;
  [...new Set(points.map(keyOf))].sort().forEach((key) => groups.set(key, {moe: new Map(), dense: new Map()}));
  const moeRates = [];
  for (const point of points) {
    const group = groups.get(keyOf(point));
    if (isDense(point.role)) {
      addWeighted(group.dense, `${num(point.compute_multiple) || 1}|${num(point.params)}`, point);
    } else {
      const rate = Number(num(point.activation_rate).toPrecision(4));
      moeRates.push(rate);
      addWeighted(group.moe, rate, point);
    }
  }
  const xMin = moeRates.length ? Math.min(...moeRates) * 0.85 : 0.05;
  const xMax = 1;
  const datasets = [];
  [...groups.entries()].forEach(([key, group], index) => {
    const colour = SERIES_PALETTE[index % SERIES_PALETTE.length];
    if (group.moe.size > 0) {
      const points = [...group.moe.entries()].sort((a, b) => a[0] - b[0])
                         .map(([rate, {sum, seeds}]) => ({x: rate, y: sum / seeds, n: seeds}));
      datasets.push({type: 'line', label: `MoE · ${key}`, group: `MoE · ${key}`, borderColor: colour,
                     backgroundColor: colour, borderWidth: 2, pointRadius: 4, pointHoverRadius: 6,
                     data: points});
    }
    const dense = [...group.dense.entries()].map(([k, {sum, seeds}]) => {
      const [multiple, params] = k.split('|').map(Number);
      return {multiple, params, y: sum / seeds};
    }).sort((a, b) => a.multiple - b.multiple || a.params - b.params);
    for (const {multiple, params, y} of dense) {
      const sizes = dense.filter((d) => d.multiple === multiple).length;
      const size = sizes > 1 ? ` N ${count(params)}` : '';
      const label = `dense ${multipleLabel(multiple)}${size} · ${key}`;
      datasets.push({type: 'line', label, group: label, borderColor: colour, backgroundColor: colour,
                     // pointStyle 'line': the legend shows a dashed line, as drawn, not a dot.
                     borderDash: multiple > 1.5 ? [2, 3] : [8, 4], borderWidth: 1.5, pointRadius: 0,
                     pointStyle: 'line',
                     data: [{x: xMin, y}, {x: xMax, y}]});
    }
    for (const optimum of analysis?.optimal_activation || []) {
      if (`${optimum.compute_budget} · ${optimum.data_variant}` !== key) continue;
      const region = (optimum.grid || []).filter((p) => p.region === 'REGION_STATUS_BEST' ||
                                                        p.region === 'REGION_STATUS_INSIDE');
      if (optimum.region && region.length) {
        const label = `region · ${key}`;
        datasets.push({type: 'scatter', label, group: label, borderColor: colour,
                       backgroundColor: `${colour}33`, pointStyle: 'circle', pointRadius: 11,
                       borderWidth: 0,
                       data: region.map((p) => ({x: num(p.activation_rate), y: num(p.bpc_mean)}))});
      }
      // Only a point optimum the analysis gives is a finding; otherwise the card says why not.
      if (optimum.status !== 'OPTIMUM_STATUS_BRACKETED') continue;
      const label = `point optimum · ${key}`;
      datasets.push({type: 'scatter', label, group: label, borderColor: colour, backgroundColor: '#fff',
                     pointStyle: 'star', pointRadius: 9, borderWidth: 2,
                     data: [{x: num(optimum.activation_rate), y: num(optimum.bpc)}]});
    }
  });
  return {datasets, xMin, xMax};
}

// Run page: columns of the history document as {x, y} points, skipping nulls.
export function series(history, xKey, yKey) {
  const xs = history[xKey] || [];
  const ys = history[yKey] || [];
  const points = [];
  for (let i = 0; i < xs.length; i++) {
    if (ys[i] === null || ys[i] === undefined) continue;
    points.push({x: num(xs[i]), y: num(ys[i])});
  }
  return points;
}

const LAYER_PALETTE = ['#2563eb', '#db2777', '#16a34a', '#ea580c', '#7c3aed', '#0891b2',
                       '#ca8a04', '#475569'];

export function layerColour(index) {
  return LAYER_PALETTE[index % LAYER_PALETTE.length];
}

// Bars of each expert's share of routing slots at the latest point, one dataset per MoE layer,
// and the uniform share 1/E as a line.
export function expertShareDatasets(latest) {
  const layers = latest?.layers || [];
  const experts = Math.max(0, ...layers.map((layer) => (layer.shares || []).length));
  const labels = Array.from({length: experts}, (_, i) => `${i}`);
  const datasets = layers.map((layer, index) => ({
    type: 'bar',
    label: `layer ${layer.layer}`,
    backgroundColor: layerColour(index),
    borderColor: layerColour(index),
    data: (layer.shares || []).map((share) => 100 * num(share)),
  }));
  if (experts > 0) {
    datasets.push({type: 'line', label: 'uniform 1/E', borderColor: '#0f172a', borderDash: [5, 4],
                   borderWidth: 1.5, pointRadius: 0, data: labels.map(() => 100 / experts)});
  }
  return {labels, datasets};
}
