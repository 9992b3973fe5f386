// The sweep page's analysis card (AnalyzeSweepResponse), in the order a paper reads it: every MoE
// grid point's FRONTIER EL (the papers' EL, against the compute-optimal dense frontier) beside
// its FIXED-N EL (against one dense shape's own law), each with its 90% interval and an
// extrapolation mark; per group the best grid point, region, lack of fit and point optimum
// (sweep_optima.js); ΔBPC against every dense baseline; the dense frontier and the fixed-N law;
// the joint EL law; and the paper-style table of grid points. Nothing here computes a figure: the
// scheduler's analysis (core/analysis.h) does; the wording is analysis_text.js's, shared in
// spirit with `parity report` (cli/report_format.h).
import {leverageText} from '../analysis_text.js';
import {count, fixed, flops, h, percent, signed} from '../format.js';
import {baselinesView, optimaView, table, VERDICT} from './sweep_optima.js';

function interval(range, format) {
  if (!range) return '';
  return ` [${format(range.low)} – ${format(range.high)}]`;
}

function refusal(testId, what, reason) {
  return h('p', {class: 'muted', 'data-testid': testId}, `${what} not fitted: ${reason}`);
}

function lawText(fit) {
  const four = (v) => fixed(v, 4);
  return [h('span', {class: 'formula'}, `L(C) = ${flops(fit.a)} · C^(−${four(fit.b)}) + ${fixed(fit.c, 3)}`),
          fit.b_interval
              ? ` — 90% bootstrap intervals (${fit.resamples} refits): a${interval(fit.a_interval, flops)}, ` +
                `b${interval(fit.b_interval, four)}, c${interval(fit.c_interval, (v) => fixed(v, 3))}.`
              : ` — no intervals: ${fit.interval_note}.`];
}

function leverageView(points) {
  const moe = points.filter((p) => p.role === 'RUN_ROLE_MOE');
  if (!moe.length) return null;
  const rows = moe.map((p) => h('tr', {'data-testid': 'leverage-row', 'data-point': p.name, 'data-group': p.group || ''},
      h('td', {}, p.name), h('td', {}, p.group || ''), h('td', {class: 'numeric'}, percent(p.activation_rate)),
      h('td', {class: 'numeric'}, `${fixed(p.bpc_mean, 4)} (n=${p.seeds})`),
      h('td', {class: 'numeric', 'data-testid': 'frontier-el'}, leverageText(p.frontier_leverage)),
      h('td', {class: 'numeric muted', 'data-testid': 'fixed-n-el'}, leverageText(p.fixed_n_leverage))));
  return h('div', {'data-testid': 'leverage'},
           h('h3', {}, 'Efficiency leverage per MoE grid point'),
           h('p', {class: 'muted small'},
             'Frontier EL is the papers\u2019 EL: the dense compute on the compute-optimal dense ' +
             'frontier that reaches the point\u2019s mean loss, over the MoE compute. Fixed-N EL ' +
             'measures the same against one dense shape\u2019s own law and overstates it far from ' +
             'compute-optimal training. 90% intervals bootstrap dense and MoE seeds; ' +
             '\u201cextrapolated \u00d7k\u201d: the dense compute lies k times outside the measured dense range.'),
           table('leverage-table', [['Model'], ['Group'], ['r_a', true], ['BPC (seeds)', true],
                                    ['Frontier EL (the papers\u2019) [90%]', true], ['Fixed-N EL [90%]', true]], rows));
}

function frontierView(analysis) {
  const f = analysis.dense_frontier;
  if (!f) return refusal('frontier-refusal', 'Compute-optimal dense frontier', analysis.dense_frontier_refusal);
  const rows = (f.points || []).map((p) => h('tr', {'data-testid': 'frontier-row'},
      h('td', {class: 'numeric'}, flops(p.compute)), h('td', {class: 'numeric'}, count(p.params)),
      h('td', {class: 'numeric'}, `${fixed(p.bpc, 4)} (n=${p.seeds})`), h('td', {class: 'numeric'}, String(p.sizes))));
  return h('div', {'data-testid': 'dense-frontier'},
           h('h3', {}, 'Compute-optimal dense frontier (frontier EL)'),
           h('p', {}, `At each budget the best dense size measured (seeds averaged per size), over ${f.runs} ` +
             'fresh-data dense runs. ',
             f.law ? ['L*(C): ', lawText(f.law)] : `L*(C) not fitted: ${f.law_refusal}`),
           f.replicate_note ? h('p', {class: 'muted small'}, `Bootstrap: ${f.replicate_note}.`) : null,
           table('frontier-table', [['Budget C (FLOPs)', true], ['Best size N', true], ['BPC (seeds)', true],
                                    ['Sizes measured', true]], rows));
}

function fixedNLaw(analysis) {
  const fit = analysis.dense_fit;
  if (!fit) return refusal('dense-law-refusal', 'Fixed-N dense law', analysis.dense_fit_refusal);
  return h('div', {'data-testid': 'dense-law'},
           h('h3', {}, 'Fixed-N dense law (fixed-N EL)'),
           h('p', {}, `The dense shape nearest in N to the MoE runs (N = ${count(analysis.dense_fit_params)}), ` +
             `fitted to its own ${fit.points} runs at ${fit.budgets} budgets` +
             (fit.repeated_data_excluded ? ` (${fit.repeated_data_excluded} runs that repeat data left out)` : '') +
             `, RMS residual ${fixed(fit.rms_residual, 4)} bits/byte: `, lawText(fit)));
}

function elLaw(analysis) {
  const law = analysis.efficiency_leverage_law;
  if (!law) {
    return refusal('el-law-refusal', 'Joint EL law EL(A, G, C)',
                   analysis.efficiency_leverage_law_refusal);
  }
  const rows = [['a', 'a'], ['d', 'd'], ['γ', 'gamma'], ['β', 'beta']].map(([label, key]) =>
      h('tr', {}, h('td', {}, label), h('td', {class: 'numeric'}, fixed(law.fitted[key], 4)),
        h('td', {class: 'numeric'}, fixed(law.published[key], 4))));
  return h('div', {'data-testid': 'el-law'},
           h('p', {}, `Joint EL law refitted to the fixed-N EL of ${law.points} MoE runs at ${law.budgets} ` +
             `budgets and ${law.granularities} granularities (A_start, A_max kept published); RMS of ` +
             `ln(EL measured / fitted) ${fixed(law.rms_log_residual, 3)}.`),
           table('el-law-table', [['Coefficient'], ['Fitted', true], ['Published', true]], rows));
}

function paperTable(points) {
  const rows = points.map((p) => {
    const dense = p.role === 'RUN_ROLE_DENSE_BASELINE' || p.role === 'RUN_ROLE_DENSE_FRONTIER';
    const [verdict, verdictClass] = VERDICT[p.verdict] || ['', 'muted'];
    const hasDelta = p.verdict !== 'DELTA_VERDICT_NO_BASELINE' && p.verdict !== 'DELTA_VERDICT_IS_BASELINE';
    const spread = p.seeds > 1 ? ` ± ${fixed(p.bpc_spread, 4)}` : '';
    return h('tr', {'data-testid': 'paper-row', 'data-verdict': p.verdict || ''},
             h('td', {}, p.name), h('td', {}, p.compute_budget), h('td', {}, p.data_variant),
             h('td', {class: 'numeric'}, count(p.params)), h('td', {class: 'numeric'}, count(p.active_params)),
             h('td', {class: 'numeric'}, dense ? '100%' : percent(p.activation_rate)),
             h('td', {class: 'numeric'}, count(p.tokens)), h('td', {class: 'numeric'}, count(p.unique_tokens)),
             h('td', {class: 'numeric'}, fixed(p.epochs, 2)),
             h('td', {class: 'numeric'}, `${fixed(p.bpc_mean, 4)}${spread} (n=${p.seeds})`),
             h('td', {class: 'numeric'}, hasDelta ? signed(p.delta_bpc, 4) : '—'),
             h('td', {class: verdictClass}, verdict));
  });
  return table('paper-table',
               [['Model'], ['Budget'], ['Data'], ['N', true], ['N_a', true], ['r_a', true], ['D', true],
                ['D̂', true], ['Epochs', true], ['BPC ± spread', true], ['ΔBPC vs 1C dense', true],
                ['ΔBPC vs noise']], rows);
}

export function analysisView(analysis, analysisError) {
  if (!analysis) {
    const why = analysisError?.code === 'FAILED_PRECONDITION'
        ? `Not yet available: ${analysisError.message}`
        : `Analysis unavailable: ${analysisError?.message || 'unknown error'}`;
    return h('p', {class: 'muted', 'data-testid': 'analysis-note'}, why);
  }
  const points = analysis.grid_points || [];
  return h('div', {class: 'analysis', 'data-testid': 'analysis'},
           h('p', {class: 'muted small'}, 'Intervals are 90% percentile-bootstrap intervals (fixed RNG seed); ' +
             'tests are at α = 0.10.'),
           leverageView(points),
           optimaView(analysis.optimal_activation || []),
           baselinesView(points),
           frontierView(analysis),
           fixedNLaw(analysis),
           h('h3', {}, 'Joint efficiency-leverage law EL(A, G, C)'),
           elLaw(analysis),
           points.length ? h('h3', {}, 'Grid points over seeds') : null,
           points.length ? paperTable(points) : null);
}
