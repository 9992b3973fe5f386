// The columns of a sweep's runs table: accounting (docs/domain.md symbols), state and BPC.
// A row is {run (Run message), result (ResultRow), leverage (RunLeverage, the run's fixed-N EL,
// or undefined),
// hasBaseline (a finished dense 1C run shares its budget and data variant)}.
import {count, fixed, flops, h, layoutName, num, percent, signed, stateBadge,
        stateName} from '../format.js';
import {failureRemedy, failureText} from '../failures.js';
import {hrefFor} from '../router.js';

function progress(run) {
  const steps = num(run.spec?.training?.steps);
  if (stateName(run.state) === 'SUCCEEDED') return 1;
  return steps > 0 ? Math.min(1, num(run.latest_step) / steps) : 0;
}

// Final BPC once finished, else the latest evaluation while training (shown in italics).
function valBpc(row) {
  const final = num(row.result.final_val_bpc);
  if (final > 0) return {value: final, live: false};
  const latest = num(row.run.latest_val_bpc);
  return latest > 0 ? {value: latest, live: true} : null;
}

function delta(row) {
  if (stateName(row.run.state) !== 'SUCCEEDED' || !row.hasBaseline) return null;
  return num(row.result.delta_bpc_vs_dense);
}

// 0 means not measured (no dense law, or a loss the law cannot reach): shown as "—", not 0×.
function measuredLeverage(row) {
  return row.leverage && num(row.leverage.efficiency_leverage) > 0;
}

// Per evaluation set beyond the primary (whose final BPC is "Val BPC"): its final BPC and its
// ΔBPC against the dense 1C baseline's BPC on that set (absent when either lacks the set).
function evalSetColumns(sets) {
  return sets.flatMap((set) => [
    {key: `bpc.${set}`, label: `BPC ${set}`, numeric: true,
     title: `Final BPC on the evaluation set "${set}"`,
     value: (row) => row.result.final_eval_bpc?.[set] ?? null,
     render: (row) => (row.result.final_eval_bpc?.[set] === undefined ? '—'
                                                                     : fixed(row.result.final_eval_bpc[set]))},
    {key: `delta.${set}`, label: `ΔBPC ${set}`, numeric: true,
     title: `Final BPC on "${set}" minus the dense 1C baseline's on "${set}" (lower is better)`,
     value: (row) => row.result.delta_eval_bpc_vs_dense?.[set] ?? null,
     render: (row) => {
       const d = row.result.delta_eval_bpc_vs_dense?.[set];
       if (d === undefined) return '—';
       return h('span', {class: d < 0 ? 'better' : d > 0 ? 'worse' : null}, signed(d));
     }},
  ]);
}

// The evaluation sets beyond the primary ("validation"), by name: the sets that get columns of
// their own. From the analysis (every set the sweep's finished runs report) and the rows shown,
// so that the columns do not change from one page to the next.
export function extraEvalSets(results, analysisSets = []) {
  const sets = new Set(analysisSets);
  for (const row of results) for (const set of Object.keys(row.final_eval_bpc || {})) sets.add(set);
  sets.delete('validation');
  return [...sets].sort();
}

// The results-view field (ResultRow, QueryResultsRequest.order_by) each column is sorted by on
// the server; a column missing here (failure, progress, EL, per-set BPC) is not sortable. The
// "Val BPC" column sorts by the FINAL BPC: runs still training (their latest BPC in italics)
// sort with the unfinished, last in either direction.
const SORT_FIELDS = {name: 'name', layout: 'layout', budget: 'compute_budget', data: 'data_variant',
                     r_a: 'activation_rate', N: 'params', N_a: 'active_params', C: 'compute_flops',
                     D: 'tokens', D_hat: 'unique_tokens', epochs: 'epochs', state: 'state',
                     val_bpc: 'final_val_bpc', delta: 'delta_bpc_vs_dense'};

export function runColumns(extraSets = []) {
  const acc = (row) => row.run.spec?.accounting || {};
  const columns = [
    {key: 'name', label: 'Run', value: (row) => row.run.spec?.name,
     render: (row) => h('a', {href: hrefFor('run', row.run.run_id), 'data-nav': true, class: 'strong'},
                        row.run.spec?.name)},
    {key: 'layout', label: 'Layout', value: (row) => layoutName(row.run.spec?.model)},
    {key: 'budget', label: 'Budget', title: 'Compute budget × multiple',
     value: (row) => `${row.run.spec?.compute_budget} ${num(row.run.spec?.compute_multiple)}`,
     render: (row) => `${row.run.spec?.compute_budget}${num(row.run.spec?.compute_multiple) !== 1
                                                         ? ` ×${num(row.run.spec?.compute_multiple)}` : ''}`},
    {key: 'data', label: 'Data', title: 'Data variant (reuse mode)', value: (row) => row.run.spec?.data_variant},
    {key: 'r_a', label: 'r_a', numeric: true, title: 'Activation rate N_a/N',
     value: (row) => num(acc(row).activation_rate), render: (row) => percent(acc(row).activation_rate)},
    {key: 'N', label: 'N', numeric: true, title: 'Non-embedding parameters',
     value: (row) => num(acc(row).params), render: (row) => count(acc(row).params)},
    {key: 'N_a', label: 'N_a', numeric: true, title: 'Parameters activated per token',
     value: (row) => num(acc(row).active_params), render: (row) => count(acc(row).active_params)},
    {key: 'C', label: 'C (FLOPs)', numeric: true, title: 'Training compute C = M·D',
     value: (row) => num(acc(row).compute_flops), render: (row) => flops(acc(row).compute_flops)},
    {key: 'D', label: 'D', numeric: true, title: 'Tokens consumed',
     value: (row) => num(acc(row).tokens), render: (row) => count(acc(row).tokens)},
    // "D̂" in a bold 12px header loses its hat in common fonts and reads as a second "D".
    {key: 'D_hat', label: 'Unique D', numeric: true, title: 'D̂: unique tokens available',
     value: (row) => num(acc(row).unique_tokens), render: (row) => count(acc(row).unique_tokens)},
    {key: 'epochs', label: 'Epochs', numeric: true, title: 'D / D̂',
     value: (row) => num(acc(row).epochs), render: (row) => fixed(acc(row).epochs, 2)},
    {key: 'state', label: 'State', value: (row) => stateName(row.run.state),
     render: (row) => stateBadge(row.run.state)},
    {key: 'failure', label: 'Last failure', title: 'Class and message of the last failed attempt',
     value: (row) => failureText(row.run) || null,
     render: (row) => {
       const text = failureText(row.run);
       if (!text) return '—';
       const remedy = failureRemedy(row.run.failure_class);
       return h('span', {class: 'failure-cell', title: remedy ? `${text}\nWhat to do: ${remedy}` : text},
                text.length > 60 ? `${text.slice(0, 57)}…` : text);
     }},
    {key: 'progress', label: 'Progress', numeric: true, title: 'Latest step / planned steps',
     value: (row) => progress(row.run), render: (row) => h('span', {class: 'mini-progress', title: `step ${row.run.latest_step}`},
                                         h('span', {class: 'mini-track'},
                                           h('span', {class: 'mini-fill', style: `width:${100 * progress(row.run)}%`})),
                                         percent(progress(row.run), 0))},
    {key: 'val_bpc', label: 'Val BPC', numeric: true,
     title: 'Final validation BPC; latest evaluation (italic) while training',
     value: (row) => valBpc(row)?.value ?? null,
     render: (row) => {
       const bpc = valBpc(row);
       if (!bpc) return '—';
       return bpc.live ? h('em', {title: 'latest evaluation'}, fixed(bpc.value)) : fixed(bpc.value);
     }},
    {key: 'delta', label: 'ΔBPC vs 1C', numeric: true,
     title: 'Final BPC minus the dense 1C baseline at the same budget and data variant (lower is better)',
     value: delta,
     render: (row) => {
       const d = delta(row);
       if (d === null) return '—';
       return h('span', {class: d < 0 ? 'better' : d > 0 ? 'worse' : null}, signed(d));
     }},
    {key: 'el', label: 'Fixed-N EL', numeric: true,
     title: 'Fixed-N efficiency leverage of this run: the compute the one dense shape\'s own law ' +
            'needs to match it / the compute used (> 1: MoE wins). Not the papers\' EL: the ' +
            'frontier EL of each grid point is in the analysis card.',
     value: (row) => (measuredLeverage(row) ? num(row.leverage.efficiency_leverage) : null),
     render: (row) => {
       if (!measuredLeverage(row)) {
         return row.leverage?.efficiency_leverage_missing
             ? h('span', {class: 'muted', title: row.leverage.efficiency_leverage_missing}, '—')
             : '—';
       }
       const range = row.leverage.efficiency_leverage_interval;
       return h('span', {title: range ? `90% interval ${fixed(range.low, 2)}–${fixed(range.high, 2)}×` : null},
                `${fixed(row.leverage.efficiency_leverage, 2)}×`);
     }},
  ];
  return columns.concat(evalSetColumns(extraSets))
      .map((column) => ({...column, sortField: SORT_FIELDS[column.key] || null}));
}
