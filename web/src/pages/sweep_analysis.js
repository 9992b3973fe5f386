// The sweep page's analysis card (AnalyzeSweepResponse): the dense compute law with its 90%
// intervals or the reason it was not fitted, each group's optimal r_a with its interval or the
// reason there is none, the joint EL law beside the published coefficients, and a paper-style
// table of the grid points (mean BPC ± seed spread, ΔBPC against the 1C dense baseline, EL).
// Nothing here computes a figure: the scheduler's analysis (core/analysis.h) does.
import {count, fixed, flops, h, num, percent, signed} from '../format.js';

function interval(range, format) {
  if (!range) return '';
  return ` [${format(range.low)} – ${format(range.high)}]`;
}

function table(testId, headings, rows) {
  return h('table', {class: 'data-table compact', 'data-testid': testId},
           h('thead', {}, h('tr', {}, headings.map(([label, numeric]) =>
               h('th', {class: numeric ? 'numeric' : null}, label)))),
           h('tbody', {}, rows));
}

function refusal(testId, what, reason) {
  return h('p', {class: 'muted', 'data-testid': testId}, `${what} not fitted: ${reason}`);
}

function denseLaw(analysis) {
  const fit = analysis.dense_fit;
  if (!fit) return refusal('dense-law-refusal', 'Dense compute law', analysis.dense_fit_refusal);
  const sci = (v) => flops(v);
  const three = (v) => fixed(v, 3);
  const four = (v) => fixed(v, 4);
  return h('div', {'data-testid': 'dense-law'},
           h('p', {}, 'Dense compute law fitted to the finished dense runs: ',
             h('span', {class: 'formula'},
               `L(C) = ${sci(fit.a)} · C^(−${four(fit.b)}) + ${three(fit.c)}`),
             ` (${fit.points} runs at ${fit.budgets} budgets` +
             (fit.repeated_data_excluded ? `; ${fit.repeated_data_excluded} runs that repeat data left out` : '') +
             `, RMS residual ` +
             `${four(fit.rms_residual)} bits/byte; c kept in [0, lowest loss)).`),
           fit.b_interval
               ? h('p', {class: 'muted'}, `90% bootstrap intervals (${fit.resamples} refits): ` +
                   `a${interval(fit.a_interval, sci)}, b${interval(fit.b_interval, four)}, ` +
                   `c${interval(fit.c_interval, three)}.`)
               : h('p', {class: 'muted'}, `No intervals: ${fit.interval_note}.`));
}

function optimumRow(o) {
  const bracketed = o.status === 'OPTIMUM_STATUS_BRACKETED';
  const pct = (v) => percent(v);
  const optimum = bracketed
      ? `${percent(o.activation_rate)}${interval(o.activation_rate_interval, pct)}`
      : o.reason;
  const bpc = bracketed ? `${fixed(o.bpc)}${interval(o.bpc_interval, (v) => fixed(v))}` : '—';
  return h('tr', {'data-testid': 'optimum-row', 'data-status': o.status || ''},
           h('td', {}, o.compute_budget), h('td', {}, o.data_variant),
           h('td', {class: bracketed ? 'numeric' : 'muted note'}, optimum),
           h('td', {class: 'numeric'}, bpc),
           h('td', {class: 'numeric'}, `${percent(o.best_grid_activation_rate)} (${fixed(o.best_grid_bpc)})`),
           h('td', {class: 'numeric'}, `${o.points} / ${o.rates}`),
           h('td', {class: 'muted note'}, o.interval_note || ''));
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
           h('p', {}, `Joint EL law refitted to ${law.points} MoE runs at ${law.budgets} budgets and ` +
             `${law.granularities} granularities (A_start, A_max kept published); RMS of ` +
             `ln(EL measured / fitted) ${fixed(law.rms_log_residual, 3)}.`),
           table('el-law-table', [['Coefficient'], ['Fitted', true], ['Published', true]], rows));
}

const VERDICT = {
  DELTA_VERDICT_EXCEEDS_SPREAD: ['beyond seed spread', ''],
  DELTA_VERDICT_WITHIN_SPREAD: ['within seed spread', 'muted'],
  DELTA_VERDICT_NO_SPREAD: ['one seed: spread unknown', 'muted'],
  DELTA_VERDICT_NO_BASELINE: ['no 1C dense baseline', 'muted'],
  DELTA_VERDICT_IS_BASELINE: ['reference', 'muted'],
};

function paperTable(points) {
  const rows = points.map((p) => {
    const dense = p.role === 'RUN_ROLE_DENSE_BASELINE';
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
             h('td', {class: verdictClass}, verdict),
             h('td', {class: 'numeric'}, num(p.efficiency_leverage) > 0 ? `${fixed(p.efficiency_leverage, 2)}×` : '—'));
  });
  return table('paper-table',
               [['Model'], ['Budget'], ['Data'], ['N', true], ['N_a', true], ['r_a', true], ['D', true],
                ['D̂', true], ['Epochs', true], ['BPC ± spread', true], ['ΔBPC vs 1C dense', true],
                ['ΔBPC vs noise'], ['EL', true]], rows);
}

export function analysisView(analysis, analysisError) {
  if (!analysis) {
    const why = analysisError?.code === 'FAILED_PRECONDITION'
        ? `Not yet available: ${analysisError.message}`
        : `Analysis unavailable: ${analysisError?.message || 'unknown error'}`;
    return h('p', {class: 'muted', 'data-testid': 'analysis-note'}, why);
  }
  const optima = (analysis.optimal_activation || []).map(optimumRow);
  const points = analysis.grid_points || [];
  return h('div', {class: 'analysis', 'data-testid': 'analysis'},
           denseLaw(analysis),
           optima.length
               ? table('optimum-table', [['Budget'], ['Data'], ['Optimal r_a [90% interval]', true],
                                         ['BPC at optimum', true], ['Best grid r_a (mean BPC)', true],
                                         ['Runs / r_a', true], ['Note']], optima)
               : h('p', {class: 'muted'}, 'No finished MoE runs yet: no optimal activation rate.'),
           elLaw(analysis),
           points.length ? h('h3', {}, 'Grid points over seeds') : null,
           points.length ? paperTable(points) : null);
}
