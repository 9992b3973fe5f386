// A sweep: summary, training curves (validation BPC against tokens and against FLOPs, one line
// per run), the equal-resource figure, the analysis, and the runs table. Curves of runs that
// ended are fetched once; later polls ask only for the runs still training.
import {ApiError, getAllPages, getJson, isReport} from '../api.js';
import {ChartPanel} from '../charts.js';
import {count, dateTime, fixed, flops, h, isLiveRun, num, percent, stateBadge,
        stateName} from '../format.js';
import {curveDatasets, equalResourceDatasets, isDense, multipleLabel} from '../figures.js';
import {distinctFailures, failureBlock} from '../failures.js';
import {hrefFor} from '../router.js';
import {SortableTable} from '../table.js';
import {progressBar, stateCounts} from './sweeps.js';
import {extraEvalSets, runColumns} from './sweep_columns.js';
import {analysisView} from './sweep_analysis.js';

const CURVE_POINTS = 200;

function stat(label, value, testId) {
  return h('div', {class: 'stat', 'data-testid': testId || null},
           h('div', {class: 'stat-label'}, label), h('div', {class: 'stat-value'}, value));
}

export function mountSweepPage(root, sweepId) {
  const head = h('div', {class: 'page-head'});
  const summary = h('section', {class: 'stats', 'data-testid': 'sweep-summary'});
  const failures = h('section', {'data-testid': 'failure-banner', hidden: true});
  const figures = h('section', {class: 'chart-grid'});
  const analysisCard = h('section', {class: 'card'}, h('h2', {}, 'Analysis'));
  const analysisBody = h('div');
  analysisCard.append(analysisBody);
  const runsCard = h('section', {class: 'card'});
  root.append(head, failures, summary, figures, analysisCard, runsCard);

  const bpcAxis = {title: 'Validation BPC (bits/byte)', format: (v) => fixed(v, 2)};
  const byTokens = new ChartPanel(figures, {
    title: 'Validation BPC vs tokens', subtitle: 'one line per run, coloured by activation rate',
    testId: 'chart-curves-tokens', groupLegend: true, emptyText: 'No validation points yet.',
    x: {title: 'Tokens consumed D (tokens)', format: count}, y: bpcAxis,
    tooltipTitle: (x) => `${count(x)} tokens`,
    tooltipLabel: (dataset, y) => `${dataset.label}: ${fixed(y)} BPC`});
  const byFlops = new ChartPanel(figures, {
    title: 'Validation BPC vs compute', subtitle: 'cumulative training FLOPs',
    testId: 'chart-curves-flops', groupLegend: true, emptyText: 'No validation points yet.',
    x: {title: 'Training compute C (FLOPs)', format: flops}, y: bpcAxis,
    tooltipTitle: (x) => `${flops(x)} FLOPs`,
    tooltipLabel: (dataset, y) => `${dataset.label}: ${fixed(y)} BPC`});
  const equalResource = new ChartPanel(figures, {
    title: 'Equal-resource comparison',
    subtitle: 'final validation BPC against activation rate at equal N, C and D; dense baselines as lines',
    testId: 'chart-equal-resource', wide: true, interaction: 'nearest',
    emptyText: 'No finished runs yet.',
    x: {title: 'Activation rate r_a = N_a / N (log scale)', type: 'logarithmic',
        format: (v) => percent(v, v < 0.1 ? 1 : 0)},
    y: {title: 'Final validation BPC (bits/byte)', format: (v) => fixed(v, 3)},
    tooltipTitle: (x) => `r_a ${percent(x)}`,
    tooltipLabel: (dataset, y) => `${dataset.label}: ${fixed(y)} BPC`});

  const filter = h('select', {'aria-label': 'Filter runs by state', 'data-testid': 'state-filter'},
                   ['all', 'PENDING', 'LEASED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED']
                       .map((s) => h('option', {value: s}, s === 'all' ? 'All states' : s)));
  const runsCount = h('span', {class: 'muted'});
  runsCard.append(h('div', {class: 'card-head'}, h('h2', {}, 'Runs'), runsCount, filter));
  const table = new SortableTable(runsCard, {
    testId: 'runs-table', rowKey: (row) => row.run.run_id, columns: runColumns(),
    emptyText: 'No runs match.'});
  filter.addEventListener('change', () => {
    const wanted = filter.value;
    table.setFilter(wanted === 'all' ? null : (row) => stateName(row.run.state) === wanted);
  });

  let shownSets = [];  // the evaluation sets with columns in the runs table
  const curves = new Map();  // run_id → curve (validation points)
  const lastState = new Map();  // run_id → state seen at the previous poll
  let first = true;

  let curveRunsPerPage = 0;  // runs one curves response holds (the server's runs_per_page)
  function takeCurves(doc) {
    curveRunsPerPage = doc.runs_per_page || curveRunsPerPage;
    for (const curve of doc.runs || []) curves.set(curve.run_id, curve);
  }

  // A curves response holds at most the server's points per response, so the sweep's curves come
  // page by page (next_page_token), and a list of runs in chunks of runs_per_page.
  async function fetchCurves(runs) {
    // Runs that may have new points: still live, or ended since the previous poll.
    const stale = runs.filter((run) => first || isLiveRun(run) ||
                                       lastState.get(run.run_id) !== run.state);
    if (stale.length === 0) return;
    const base = `/api/v1/sweeps/${encodeURIComponent(sweepId)}/curves?points=${CURVE_POINTS}`;
    if (first || isReport || !curveRunsPerPage) {
      let token = '';
      for (let page = 0; page < 10000; page++) {
        const doc = await getJson(token ? `${base}&page_token=${encodeURIComponent(token)}` : base);
        takeCurves(doc);
        token = doc.next_page_token || '';
        if (!token) break;
      }
      return;
    }
    for (let i = 0; i < stale.length; i += curveRunsPerPage) {
      const ids = stale.slice(i, i + curveRunsPerPage).map((run) => run.run_id).join(',');
      takeCurves(await getJson(`${base}&run_id=${ids}`));
    }
  }

  return {
    async refresh() {
      const base = `/api/v1/sweeps/${encodeURIComponent(sweepId)}`;
      const [sweepDoc, runs, results] = await Promise.all([
        getJson(base),
        getAllPages(`${base}/runs?page_size=1000`, 'runs'),
        getAllPages(`${base}/results?page_size=10000`, 'rows'),
      ]);
      let analysis = null;
      let analysisError = null;
      try {
        analysis = await getJson(`${base}/analysis`);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        analysisError = error;
      }
      await fetchCurves(runs);
      first = false;
      for (const run of runs) lastState.set(run.run_id, run.state);

      const sweep = sweepDoc.sweep;
      document.title = `${sweep.spec?.name || 'Sweep'} · Parity`;
      head.replaceChildren(
          h('div', {},
            h('nav', {class: 'breadcrumb'}, isReport ? null : h('a', {href: hrefFor('sweeps'), 'data-nav': true}, 'Sweeps'),
              isReport ? null : ' / ', sweep.spec?.name),
            h('h1', {}, sweep.spec?.name || sweep.sweep_id, ' ', stateBadge(sweep.state)),
            sweep.spec?.description ? h('p', {class: 'muted'}, sweep.spec.description) : null),
          h('div', {class: 'head-side muted small'}, `sweep ${sweep.sweep_id}`));

      const specs = runs.map((run) => run.spec);
      const moe = specs.filter((s) => !isDense(s.role)).length;
      const budgets = [...new Set(specs.map((s) => s.compute_budget))].join(', ');
      const multiples = [...new Set(specs.filter((s) => isDense(s.role)).map((s) => multipleLabel(s.compute_multiple)))];
      const totalCompute = specs.reduce((sum, s) => sum + num(s.accounting?.compute_flops), 0);
      summary.replaceChildren(
          stat('Runs', h('span', {}, `${runs.length} `, h('span', {class: 'muted small'},
                                                      `(${moe} MoE, ${runs.length - moe} dense)`))),
          stat('By state', stateCounts(sweep.counts)),
          stat('Progress', progressBar(sweep.counts)),
          stat('Compute budgets', `${budgets || '—'}${multiples.length ? ` · dense at ${multiples.join(', ')}` : ''}`),
          stat('Total compute', `${flops(totalCompute)} FLOPs`),
          stat('Submitted', `${dateTime(sweep.create_time)}${sweep.owner ? ` by ${sweep.owner}` : ''}`),
          stat('Ended', dateTime(sweep.end_time)));

      // Why runs failed, and what to do, before anything else: a failed sweep's first question.
      const distinct = distinctFailures(runs);
      failures.hidden = distinct.length === 0;
      failures.replaceChildren(...distinct.map(failureBlock));
      const counts = sweep.counts || {};
      const live = num(counts.pending) + num(counts.leased) + num(counts.running) > 0;
      const noPoints = live ? 'No validation points yet.'
                            : 'No validation points: no run reported any before the sweep ended.';
      byTokens.setEmptyText(noPoints);
      byFlops.setEmptyText(noPoints);
      equalResource.setEmptyText(live ? 'No finished runs yet.' : 'No run finished: nothing to compare.');

      const curveDoc = {runs: [...curves.values()]};
      byTokens.update(curveDatasets(runs, curveDoc, 'tokens'));
      byFlops.update(curveDatasets(runs, curveDoc, 'flops'));
      const figure = equalResourceDatasets(results, analysis);
      equalResource.chart.options.scales.x.min = figure.xMin;
      equalResource.chart.options.scales.x.max = figure.xMax * 1.05;
      equalResource.update(figure.datasets);
      analysisBody.replaceChildren(analysisView(analysis, analysisError));

      const resultsById = new Map(results.map((row) => [row.run_id, row]));
      const leverage = new Map((analysis?.leverage || []).map((l) => [l.run_id, l]));
      const baselines = new Set(results.filter((row) => isDense(row.role) && num(row.compute_multiple) === 1 &&
                                                        row.state === 'RUN_STATE_SUCCEEDED')
                                    .map((row) => `${row.compute_budget}|${row.data_variant}`));
      // One BPC and one ΔBPC column per evaluation set beyond the primary, once results name one.
      const sets = extraEvalSets(results);
      if (sets.join('\n') !== shownSets.join('\n')) {
        shownSets = sets;
        table.setColumns(runColumns(sets));
      }
      table.setRows(runs.map((run) => {
        const result = resultsById.get(run.run_id) || {};
        return {run, result, leverage: leverage.get(run.run_id),
                hasBaseline: baselines.has(`${run.spec.compute_budget}|${run.spec.data_variant}`)};
      }));
      runsCount.textContent = `${runs.length} runs · click a column to sort`;
      return live;
    },
    destroy() {
      byTokens.destroy();
      byFlops.destroy();
      equalResource.destroy();
    },
  };
}

