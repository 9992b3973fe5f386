// The analysis card's per-group answer and baselines (AnalyzeSweepResponse.optimal_activation
// and GridPointSummary.baselines): the best grid point, the region with every grid point's
// probability of being best and its status, the lack-of-fit verdict, the point optimum with its
// 90% bracket or the reason there is none, and ΔBPC against every dense baseline.
import {lackOfFitText, pointOptimumText, pValue, REGION_TEXT, regionText,
        welchText} from '../analysis_text.js';
import {fixed, h, num, percent, signed} from '../format.js';
import {multipleLabel} from '../figures.js';

export function table(testId, headings, rows, attributes = {}) {
  return h('table', {class: 'data-table compact', 'data-testid': testId, ...attributes},
           h('thead', {}, h('tr', {}, headings.map(([label, numeric]) =>
               h('th', {class: numeric ? 'numeric' : null}, label)))),
           h('tbody', {}, rows));
}

export const VERDICT = {
  DELTA_VERDICT_EXCEEDS_SPREAD: ['beyond seed spread', ''],
  DELTA_VERDICT_WITHIN_SPREAD: ['within seed spread', 'muted'],
  DELTA_VERDICT_NO_SPREAD: ['one seed: spread unknown', 'muted'],
  DELTA_VERDICT_NO_BASELINE: ['no 1C dense baseline', 'muted'],
  DELTA_VERDICT_IS_BASELINE: ['reference', 'muted'],
};

function groupOf(o) {
  return o.group || `${o.compute_budget}/${o.data_variant}`;
}

function optimumRow(o) {
  const bracketed = o.status === 'OPTIMUM_STATUS_BRACKETED';
  return h('tr', {'data-testid': 'optimum-row', 'data-status': o.status || '', 'data-group': groupOf(o),
                  'data-lack-of-fit': o.lack_of_fit?.verdict || ''},
           h('td', {}, groupOf(o)),
           h('td', {class: 'numeric'}, `${percent(o.best_grid_activation_rate)} (${fixed(o.best_grid_bpc, 4)})`),
           h('td', {class: o.region ? 'numeric' : 'muted note', 'data-testid': 'region-span'}, regionText(o)),
           h('td', {class: 'note', 'data-testid': 'lack-of-fit'}, lackOfFitText(o.lack_of_fit)),
           h('td', {class: bracketed ? 'numeric' : 'muted note', 'data-testid': 'point-optimum'},
             pointOptimumText(o)),
           h('td', {class: 'numeric'}, `${o.points} / ${o.rates}`));
}

function regionTable(o) {
  const resampled = num(o.probability_resamples) > 0;
  const rows = (o.grid || []).map((p) => {
    const spread = p.seeds > 1 ? ` ± ${fixed(p.bpc_spread, 4)}` : '';
    const inRegion = p.region === 'REGION_STATUS_BEST' || p.region === 'REGION_STATUS_INSIDE';
    return h('tr', {'data-testid': 'region-row', 'data-rate': String(num(p.activation_rate)),
                    'data-region': p.region || '', class: inRegion ? 'in-region' : null},
             h('td', {class: 'numeric'}, percent(p.activation_rate)),
             h('td', {class: 'numeric'}, `${fixed(p.bpc_mean, 4)}${spread} (n=${p.seeds})`),
             h('td', {class: 'numeric', 'data-testid': 'probability-best'},
               resampled ? percent(p.probability_best) : '—'),
             h('td', {class: inRegion ? 'strong' : 'muted'}, REGION_TEXT[p.region] || ''),
             h('td', {class: 'numeric'}, p.p_value_above_best === undefined ? '—' : pValue(p.p_value_above_best)));
  });
  const how = resampled ? `P(best) over ${o.probability_resamples} seed resamples.`
                        : 'P(best) not estimated: no r_a has two seeds.';
  const fit = o.lack_of_fit?.curve ? ` Lack of fit of the ${o.lack_of_fit.curve}: ${lackOfFitText(o.lack_of_fit)}.` : '';
  return h('div', {class: 'region-group'},
           h('h4', {}, groupOf(o)),
           h('p', {class: 'muted small', 'data-testid': 'region-note'}, `Region: ${o.region_note}. ${how}${fit}`),
           table('region-table', [['r_a', true], ['BPC ± spread', true], ['P(best)', true], ['Region'],
                                  ['p (above best)', true]], rows, {'data-group': groupOf(o)}));
}

export function optimaView(optima) {
  if (!optima.length) return h('p', {class: 'muted'}, 'No finished MoE runs yet: no optimal activation rate.');
  return h('div', {'data-testid': 'optima'},
           h('h3', {}, 'Optimal activation rate per group'),
           h('p', {class: 'muted small'},
             'As the papers report it: the best grid point, the region of grid points not ' +
             'significantly above it (one-sided Welch, α = 0.10), a lack-of-fit test, and a point ' +
             'optimum with its 90% bracket only when the fit passes and both ends are ' +
             'significantly above the best.'),
           table('optimum-table', [['Group'], ['Best grid r_a (mean BPC)', true], ['Region', true],
                                   ['Lack of fit'], ['Point optimum [90% bracket]', true],
                                   ['Runs / r_a', true]], optima.map(optimumRow)),
           optima.map(regionTable));
}

export function baselinesView(points) {
  const rows = [];
  for (const p of points) {
    for (const d of p.baselines || []) {
      const [verdict, verdictClass] = VERDICT[d.verdict] || ['', 'muted'];
      const delta = num(d.delta_bpc);
      rows.push(h('tr', {'data-testid': 'baseline-row', 'data-point': p.name, 'data-group': p.group || '',
                         'data-baseline': d.baseline},
                  h('td', {}, p.name), h('td', {}, p.group || ''), h('td', {}, d.baseline),
                  h('td', {class: 'numeric'}, multipleLabel(d.compute_multiple)), h('td', {}, d.data_variant),
                  h('td', {class: 'numeric'}, h('span', {class: delta < 0 ? 'better' : delta > 0 ? 'worse' : null},
                                                signed(delta, 4))),
                  h('td', {class: 'numeric'}, fixed(d.delta_spread, 4)),
                  h('td', {class: verdictClass}, verdict),
                  h('td', {class: 'numeric'}, welchText(d))));
    }
  }
  if (!rows.length) return h('p', {class: 'muted'}, 'No grid point has a finished dense baseline in its group.');
  return h('div', {},
           h('h3', {}, 'ΔBPC against every dense baseline'),
           table('baseline-table', [['Model'], ['Group'], ['Baseline'], ['Multiple', true], ['Baseline data'],
                                    ['ΔBPC', true], ['Spread', true], ['ΔBPC vs noise'],
                                    ['Welch (two-sided)', true]], rows));
}
