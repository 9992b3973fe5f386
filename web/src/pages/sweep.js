// A sweep: summary, training curves (validation BPC against tokens and against FLOPs, one line
// per run of the table's page), the equal-resource figure, the analysis, and the runs table.
//
// Built for a 10,000-run sweep: nothing here scales with the sweep. The counts and progress come
// from the sweep document; the header's totals and the failure banner from /summary (folded on
// the server, asked again only when runs end); the figure and the analysis from /analysis
// (asked again only when runs succeed); the runs table is one page of /table, sorted, filtered
// and paged by the server (order_by, state, page_token), and a poll fetches only that page; the
// curves are those of the page's runs, and a poll asks only for the ones still training.
import {getJson, getSweepSummary, getTablePage, isReport} from '../api.js';
import {ChartPanel} from '../charts.js';
import {count, dateTime, fixed, flops, h, num, percent, stateBadge, stateName} from '../format.js';
import {curveDatasets, equalResourceDatasets, isDense, multipleLabel} from '../figures.js';
import {failureBlock, summaryFailures} from '../failures.js';
import {hrefFor} from '../router.js';
import {SortableTable} from '../table.js';
import {progressBar, stateCounts} from './sweeps.js';
import {extraEvalSets, runColumns} from './sweep_columns.js';
import {analysisView} from './sweep_analysis.js';
import {RunsPager} from './sweep_pager.js';

const CURVE_POINTS = 200;
const ENDED_KEYS = ['succeeded', 'failed', 'cancelled'];
const ANALYSIS_SPACING = 5;

function stat(label, value, testId) {
  return h('div', {class: 'stat', 'data-testid': testId || null},
           h('div', {class: 'stat-label'}, label), h('div', {class: 'stat-value'}, value));
}

export function mountSweepPage(root, sweepId) {
  const head = h('div', {class: 'page-head'});
  const summaryBox = h('section', {class: 'stats', 'data-testid': 'sweep-summary'});
  const failures = h('section', {'data-testid': 'failure-banner', hidden: true});
  const figures = h('section', {class: 'chart-grid'});
  const analysisCard = h('section', {class: 'card'}, h('h2', {}, 'Analysis'));
  // The analysis of a large sweep takes the server seconds: say so until it arrives.
  const analysisBody = h('div', {}, h('p', {class: 'muted'}, 'Computing the analysis…'));
  analysisCard.append(analysisBody);
  const runsCard = h('section', {class: 'card'});
  root.append(head, failures, summaryBox, figures, analysisCard, runsCard);

  const bpcAxis = {title: 'Validation BPC (bits/byte)', format: (v) => fixed(v, 2)};
  const byTokens = new ChartPanel(figures, {
    title: 'Validation BPC vs tokens', subtitle: 'one line per run of the table\'s page, coloured by activation rate',
    testId: 'chart-curves-tokens', groupLegend: true, emptyText: 'No validation points yet.',
    x: {title: 'Tokens consumed D (tokens)', format: count}, y: bpcAxis,
    tooltipTitle: (x) => `${count(x)} tokens`,
    tooltipLabel: (dataset, y) => `${dataset.label}: ${fixed(y)} BPC`});
  const byFlops = new ChartPanel(figures, {
    title: 'Validation BPC vs compute', subtitle: 'cumulative training FLOPs; the table\'s page',
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

  const pager = new RunsPager(runsCard, {
    // A user's choice re-reads the table at once; an error keeps the rows and says why.
    onChange: () => loadTable().catch((error) => pager.showError(error)),
  });
  const table = new SortableTable(runsCard, {
    testId: 'runs-table', rowKey: (row) => row.run.run_id, columns: runColumns(),
    emptyText: 'No runs match.',
    onSort: (sort) => pager.sortBy(table.columns.find((c) => c.key === sort.key)?.sortField,
                                   sort.descending)});

  let sweep = null;
  let summary = null;
  let summaryKey = '';  // the counts the summary was read at
  let analysis = null;
  let analysisError = null;
  let analysisKey = '';  // the succeeded count the analysis was read at
  let leverageById = new Map();  // run_id → RunLeverage (the runs table's fixed-N EL)
  let baselines = new Set();  // "budget|variant" of groups whose 1C dense grid point finished
  let pageRows = [];  // [{run, result}] of the table's page
  let shownSets = [];  // the evaluation sets with columns in the runs table
  const curves = new Map();  // run_id → curve (validation points), the page's runs only
  const curveState = new Map();  // run_id → state when its curve was read
  let curveRunsPerPage = 0;  // runs one curves response holds (the server's runs_per_page)
  let destroyed = false;

  // Curves of the page's runs: the first time, and again while a run trains or when its state
  // changed (a queued run has no new points until it starts); the cache holds the page's runs
  // only, so it stays one page whatever was browsed.
  async function fetchCurves(runs) {
    const ids = new Set(runs.map((run) => run.run_id));
    for (const id of [...curves.keys()]) if (!ids.has(id)) curves.delete(id);
    for (const id of [...curveState.keys()]) if (!ids.has(id)) curveState.delete(id);
    const stale = runs.filter((run) => !curveState.has(run.run_id) || stateName(run.state) === 'RUNNING' ||
                                       curveState.get(run.run_id) !== run.state);
    const base = `/api/v1/sweeps/${encodeURIComponent(sweepId)}/curves?points=${CURVE_POINTS}`;
    const chunk = curveRunsPerPage || 100;
    for (let i = 0; i < stale.length; i += chunk) {
      const part = stale.slice(i, i + chunk);
      const doc = await getJson(`${base}&run_id=${part.map((run) => run.run_id).join(',')}`);
      curveRunsPerPage = doc.runs_per_page || curveRunsPerPage;
      // A report's curves document holds every run: keep the page's.
      for (const curve of doc.runs || []) if (ids.has(curve.run_id)) curves.set(curve.run_id, curve);
      for (const run of part) curveState.set(run.run_id, run.state);
    }
  }

  function drawCurves() {
    const runs = pageRows.map((row) => row.run);
    const budgets = summary?.compute_budgets;
    const curveDoc = {runs: runs.map((run) => curves.get(run.run_id)).filter(Boolean)};
    byTokens.update(curveDatasets(runs, curveDoc, 'tokens', budgets));
    byFlops.update(curveDatasets(runs, curveDoc, 'flops', budgets));
  }

  function drawTable() {
    // One BPC and one ΔBPC column per evaluation set beyond the primary.
    const sets = extraEvalSets(pageRows.map((row) => row.result), analysis?.eval_sets);
    if (sets.join('\n') !== shownSets.join('\n')) {
      shownSets = sets;
      table.setColumns(runColumns(sets));
    }
    table.setRows(pageRows.map(({run, result}) => ({
      run, result, leverage: leverageById.get(run.run_id),
      hasBaseline: baselines.has(`${run.spec.compute_budget}|${run.spec.data_variant}`)})));
  }

  // The table's page as the pager asks for it (a poll, or a user's next/sort/filter/size); an
  // answer overtaken by a newer request is dropped.
  let tableRequest = 0;
  async function loadTable() {
    const mine = ++tableRequest;
    const doc = await getTablePage(sweepId, pager.request());
    if (mine !== tableRequest || destroyed) return;
    if ((doc.rows || []).length === 0 && pager.onLaterPage()) {
      pager.firstPage();  // the page emptied (runs left the filter): back to the first
      return loadTable();
    }
    pageRows = doc.rows || [];
    pager.setPage(pageRows.length, doc.next_page_token, sweep?.counts);
    drawTable();
    await fetchCurves(pageRows.map((row) => row.run));
    if (mine === tableRequest && !destroyed) drawCurves();
  }

  function drawSummary() {
    const counts = sweep.counts || {};
    const total = summary ? num(summary.runs) : num(counts.total);
    const multiples = (summary?.dense_multiples || []).map(multipleLabel);
    const budgets = (summary?.compute_budgets || []).join(', ');
    // Why runs failed, and what to do, before anything else: a failed sweep's first question.
    if (summary) {
      const others = num(summary.other_failed_runs);
      failures.replaceChildren(...summaryFailures(summary).map(failureBlock));
      if (others > 0) failures.append(h('p', {class: 'muted small'}, `and ${others} more failed runs with other reasons`));
    }
    failures.hidden = !summary || num(summary.failed_runs) === 0;
    summaryBox.replaceChildren(
        stat('Runs', h('span', {}, `${total} `, summary ? h('span', {class: 'muted small'},
                                                    `(${num(summary.moe_runs)} MoE, ${num(summary.dense_runs)} dense)`) : null),
             'stat-runs'),
        stat('By state', stateCounts(counts), 'stat-states'),
        stat('Progress', progressBar(counts), 'stat-progress'),
        stat('Compute budgets', summary ? `${budgets || '—'}${multiples.length ? ` · dense at ${multiples.join(', ')}` : ''}` : '…'),
        stat('Total compute', summary ? `${flops(summary.total_compute_flops)} FLOPs` : '…'),
        stat('Submitted', `${dateTime(sweep.create_time)}${sweep.owner ? ` by ${sweep.owner}` : ''}`),
        stat('Ended', dateTime(sweep.end_time)));
  }

  function drawHead() {
    document.title = `${sweep.spec?.name || 'Sweep'} · Parity`;
    head.replaceChildren(
        h('div', {},
          h('nav', {class: 'breadcrumb'}, isReport ? null : h('a', {href: hrefFor('sweeps'), 'data-nav': true}, 'Sweeps'),
            isReport ? null : ' / ', sweep.spec?.name),
          h('h1', {}, sweep.spec?.name || sweep.sweep_id, ' ', stateBadge(sweep.state)),
          sweep.spec?.description ? h('p', {class: 'muted'}, sweep.spec.description) : null),
        h('div', {class: 'head-side muted small'}, `sweep ${sweep.sweep_id}`));
  }

  // The analysis and the figure drawn from it: read again only when more runs have succeeded,
  // and while runs train not more often than every ANALYSIS_SPACING × its last duration (the
  // analysis of a 10,000-run sweep takes the server seconds); once nothing runs (the polls stop)
  // the last one is read whatever the spacing. It arrives in the background: the table and the
  // polls never wait for it.
  let analysisLoad = null;  // the read in flight
  let analysisNext = 0;  // Date.now() before which it is not read again while runs train
  let latest = {counts: {}, live: true};  // the sweep as the last poll saw it
  function loadAnalysis() {
    const key = String(num(latest.counts.succeeded));
    if (key === analysisKey || analysisLoad || (latest.live && Date.now() < analysisNext)) return;
    const started = Date.now();
    analysisLoad = getJson(`/api/v1/sweeps/${encodeURIComponent(sweepId)}/analysis`)
        .then((doc) => [doc, null], (error) => [null, error])
        .then(([doc, error]) => {
          if (destroyed) return;
          analysisKey = key;
          analysisNext = Date.now() + ANALYSIS_SPACING * (Date.now() - started);
          analysis = doc;
          // A refusal (nothing finished yet: 400) is the card's to show; anything else too, and
          // the next poll with more successes asks again.
          analysisError = error;
          leverageById = new Map((analysis?.leverage || []).map((l) => [l.run_id, l]));
          // A 1C dense grid point of the group finished: the group's ΔBPC has a baseline.
          baselines = new Set((analysis?.grid_points || [])
              .filter((p) => isDense(p.role) && num(p.compute_multiple) === 1 && num(p.bpc_mean) > 0)
              .map((p) => `${p.compute_budget}|${p.data_variant}`));
          const figure = equalResourceDatasets(analysis);
          equalResource.chart.options.scales.x.min = figure.xMin;
          equalResource.chart.options.scales.x.max = figure.xMax * 1.05;
          equalResource.update(figure.datasets);
          analysisBody.replaceChildren(analysisView(analysis, analysisError));
          drawTable();  // the EL column, the ΔBPC baselines and the evaluation sets come from it
        })
        .finally(() => {
          analysisLoad = null;
          if (!destroyed && !latest.live) loadAnalysis();  // the sweep ended while it was read
        });
  }

  return {
    async refresh() {
      const doc = await getJson(`/api/v1/sweeps/${encodeURIComponent(sweepId)}`);
      sweep = doc.sweep;
      const counts = sweep.counts || {};
      drawHead();
      drawSummary();
      const live = num(counts.pending) + num(counts.leased) + num(counts.running) > 0;
      const noPoints = live ? 'No validation points yet.'
                            : 'No validation points: no run reported any before the sweep ended.';
      byTokens.setEmptyText(noPoints);
      byFlops.setEmptyText(noPoints);
      equalResource.setEmptyText(live ? 'No finished runs yet.' : 'No run finished: nothing to compare.');
      // The table first (what the page is opened for), the summary beside it.
      const wantSummary = [num(counts.total), ...ENDED_KEYS.map((k) => num(counts[k]))].join('|');
      await Promise.all([
        loadTable(),
        wantSummary === summaryKey ? null : getSweepSummary(sweepId).then((s) => {
          if (destroyed) return;
          summary = s;
          summaryKey = wantSummary;
          drawSummary();
          drawCurves();  // the line patterns follow the sweep's budgets
        }),
      ]);
      latest = {counts, live};
      loadAnalysis();
      return live;
    },
    destroy() {
      destroyed = true;
      byTokens.destroy();
      byFlops.destroy();
      equalResource.destroy();
    },
  };
}
