// One run: state and progress, for a gang its ranks and rendezvous (gang.js), its accounting,
// its curves (train/validation BPC against tokens, learning rate and gradient norm against steps)
// and, for an MoE run, the expert load: each expert's share of the routing slots at the latest
// logged step, and max/min load over steps.
import {getJson, isReport} from '../api.js';
import {ChartPanel} from '../charts.js';
import {bytes, count, dateTime, duration, fixed, flops, h, isLiveRun, layoutName, num, percent,
        stateBadge, stateName} from '../format.js';
import {expertShareDatasets, isDense, layerColour, multipleLabel, series} from '../figures.js';
import {failureBlock, failureClassName, failureRemedy} from '../failures.js';
import {gangCard} from '../gang.js';
import {hrefFor} from '../router.js';

// One validation curve per evaluation set, the legend naming the set; the single
// "validation BPC" curve for an engine that reports only val_bpc.
const kSetColours = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#9333ea', '#0891b2'];
function validationDatasets(history) {
  const sets = Object.keys(history.eval_bpc || {});
  if (sets.length === 0) {
    return [{label: 'validation BPC', borderColor: '#2563eb', backgroundColor: '#2563eb', borderWidth: 2.2,
             pointRadius: 2.5, data: series(history, 'tokens', 'val_bpc')}];
  }
  sets.sort((a, b) => (a === 'validation' ? -1 : b === 'validation' ? 1 : a.localeCompare(b)));
  return sets.map((set, index) => {
    const colour = kSetColours[index % kSetColours.length];
    return {label: `val BPC · ${set}`, borderColor: colour, backgroundColor: colour, borderWidth: 2.2,
            pointRadius: 2.5, data: series({tokens: history.tokens, bpc: history.eval_bpc[set]}, 'tokens', 'bpc')};
  });
}

const HISTORY_POINTS = 1000;

function definitionList(entries) {
  return h('dl', {class: 'facts'}, entries.filter(Boolean).map(([term, value, title]) => [
    h('dt', {title: title || null}, term), h('dd', {}, value ?? '—')]));
}

function accountingFacts(spec) {
  const a = spec.accounting || {};
  const m = spec.model || {};
  const moe = m.moe || {};
  const t = spec.training || {};
  const dense = isDense(spec.role);
  return [
    ['Layout', layoutName(m)],
    ['Width D_m × layers L', `${m.d_model} × ${m.num_layers}${dense ? '' : ` (L_d ${a.dense_layers}, L_e ${a.moe_layers})`}`],
    dense ? null : ['Experts E, top-K, D_e', `${moe.num_experts}, ${moe.top_k}, ${moe.expert_hidden}${num(moe.shared_expert_hidden) ? ` + shared ${moe.shared_expert_hidden}` : ''}`],
    ['N (non-embedding parameters)', count(a.params)],
    ['N_a (activated per token)', count(a.active_params)],
    ['r_a = N_a / N', percent(a.activation_rate, 2)],
    dense ? null : ['Granularity G', fixed(a.granularity, 2)],
    ['M (training FLOPs/token)', flops(a.flops_per_token)],
    ['C = M·D (FLOPs)', flops(a.compute_flops)],
    ['D (tokens)', count(a.tokens)],
    ['D̂ (unique tokens)', count(a.unique_tokens)],
    ['Epochs D/D̂', fixed(a.epochs, 2)],
    ['Budget', `${spec.compute_budget}${num(spec.compute_multiple) > 0 && num(spec.compute_multiple) !== 1
                                         ? ` × ${num(spec.compute_multiple)}` : ''} · data ${spec.data_variant}`],
    ['Steps × batch', `${count(t.steps)} × ${count(t.batch_tokens)} tokens`],
    ['Learning rate', `${num(t.learning_rate).toExponential(2)} (${String(t.schedule || '').replace('LR_SCHEDULE_', '').toLowerCase()})`],
    ['Seed', t.seed],
    dense ? null : ['Predicted EL (published law)', `${fixed(spec.predicted_efficiency_leverage, 2)}×`],
  ];
}

// The device's peak beside the planner's estimate for the run's config, and how far apart:
// "61.2 GB of 58.0 GB estimated (+5.5%)"; null where the run reports no device peak.
function deviceMemoryText(summary) {
  const peak = num(summary.peak_device_memory_bytes);
  const estimate = num(summary.estimated_device_memory_bytes);
  if (!(peak > 0)) return null;
  if (!(estimate > 0)) return bytes(peak);
  const off = 100 * (peak / estimate - 1);
  const sign = off < 0 ? '\u2212' : '+';
  return `${bytes(peak)} of ${bytes(estimate)} estimated (${sign}${Math.abs(off).toFixed(1)}%)`;
}

function summaryFacts(run) {
  const s = run.summary || {};
  const planned = num(run.spec?.accounting?.flops_per_token);
  const measured = num(s.measured_flops_per_token);
  return [
    ['Final validation BPC', fixed(s.final_val_bpc, 4)],
    ['Final training BPC', fixed(s.final_train_bpc, 4)],
    ['Tokens / steps', `${count(s.tokens)} / ${count(s.steps)}`],
    ['Measured M vs planned', measured > 0 ? `${flops(measured)} (${fixed(measured / planned, 4)}× planned)` : '—'],
    ['Wall time', duration(num(s.wall_time?.replace?.('s', '')))],
    ['Throughput', `${count(s.tokens_per_second)} tokens/s`],
    ['Peak memory', num(s.peak_memory_bytes) > 0 ? `${bytes(s.peak_memory_bytes)} (host RSS)` : null,
     'the engine process\'s peak resident memory on the host'],
    deviceMemoryText(s) && ['Device memory', deviceMemoryText(s),
                            'the device\'s high-water mark beside the planner\'s estimate for this run'],
  ];
}

export function mountRunPage(root, runId) {
  const head = h('div', {class: 'page-head'});
  const stats = h('section', {class: 'stats', 'data-testid': 'run-summary'});
  const gangSection = h('section', {});  // a gang's ranks and rendezvous (gang.js)
  const details = h('section', {class: 'two-columns'});
  const curves = h('section', {class: 'chart-grid'});
  const expertSection = h('section', {class: 'chart-grid'});
  const expertNote = h('p', {class: 'muted', hidden: true, 'data-testid': 'expert-note'});
  const curvesTitle = h('h2', {class: 'section-title'}, 'Training curves');
  const expertTitle = h('h2', {class: 'section-title'}, 'Expert load');
  const noMetrics = h('p', {class: 'muted', hidden: true, 'data-testid': 'no-metrics'});
  root.append(head, stats, gangSection, details, curvesTitle, noMetrics, curves, expertTitle, expertNote,
              expertSection);

  const bpc = new ChartPanel(curves, {
    title: 'BPC vs tokens', subtitle: 'training batches and held-out validation',
    testId: 'chart-run-bpc', x: {title: 'Tokens consumed (tokens)', format: count},
    y: {title: 'BPC (bits/byte)', format: (v) => fixed(v, 2)}, interaction: 'index',
    tooltipTitle: (x) => `${count(x)} tokens`,
    tooltipLabel: (dataset, y) => `${dataset.label}: ${fixed(y)}`});
  const lr = new ChartPanel(curves, {
    title: 'Learning rate', testId: 'chart-run-lr', x: {title: 'Optimizer step', format: count},
    y: {title: 'Learning rate', format: (v) => (num(v) === 0 ? '0' : num(v).toExponential(1))},
    interaction: 'index',
    tooltipTitle: (x) => `step ${x}`, tooltipLabel: (d, y) => `lr ${num(y).toExponential(3)}`});
  const gradNorm = new ChartPanel(curves, {
    title: 'Gradient norm', subtitle: 'global L2 norm before clipping',
    testId: 'chart-run-grad-norm', x: {title: 'Optimizer step', format: count},
    y: {title: 'Gradient norm (L2)', format: (v) => fixed(v, 2)}, interaction: 'index',
    tooltipTitle: (x) => `step ${x}`, tooltipLabel: (d, y) => `‖g‖ ${fixed(y, 3)}`});
  const reuse = new ChartPanel(curves, {
    title: 'Data reuse', subtitle: 'passes over the unique tokens D̂ (strict reuse repeats them)',
    testId: 'chart-run-epochs', x: {title: 'Tokens consumed (tokens)', format: count},
    y: {title: 'Epochs (D / D̂)', beginAtZero: true, format: (v) => fixed(v, 1)}, interaction: 'index',
    tooltipTitle: (x) => `${count(x)} tokens`, tooltipLabel: (d, y) => `${fixed(y, 2)} epochs`});
  let shares = null;
  let imbalance = null;

  function ensureExpertCharts() {
    if (shares) return;
    shares = new ChartPanel(expertSection, {
      title: 'Expert load at the latest step', subtitle: 'share of routing slots per expert',
      testId: 'chart-expert-shares', type: 'bar', interaction: 'index',
      x: {title: 'Expert', type: 'category'}, y: {title: 'Share of routing slots (%)', beginAtZero: true,
                                                  format: (v) => `${fixed(v, 1)}%`},
      tooltipLabel: (dataset, y) => `${dataset.label}: ${fixed(y, 2)}%`});
    imbalance = new ChartPanel(expertSection, {
      title: 'Load imbalance over training', subtitle: 'max / min expert share per MoE layer (1 = balanced)',
      testId: 'chart-expert-imbalance', x: {title: 'Optimizer step', format: count},
      y: {title: 'Max / min share (ratio)', format: (v) => fixed(v, 1)}, interaction: 'index',
      tooltipTitle: (x) => `step ${x}`, tooltipLabel: (d, y) => `${d.label}: ${fixed(y, 2)}×`});
  }

  return {
    async refresh() {
      const base = `/api/v1/runs/${encodeURIComponent(runId)}`;
      const [runDoc, history] = await Promise.all([
        getJson(base), getJson(`${base}/history?points=${HISTORY_POINTS}`)]);
      const run = runDoc.run;
      const spec = run.spec || {};
      const dense = isDense(spec.role);
      document.title = `${spec.name} · Parity`;
      head.replaceChildren(h('div', {},
          h('nav', {class: 'breadcrumb'},
            isReport ? null : [h('a', {href: hrefFor('sweeps'), 'data-nav': true}, 'Sweeps'), ' / '],
            h('a', {href: hrefFor('sweep', run.sweep_id), 'data-nav': true}, spec.sweep_name || 'sweep'),
            ' / ', spec.name),
          h('h1', {}, spec.name, ' ', stateBadge(run.state)),
          h('p', {class: 'muted'}, dense ? `Dense baseline at ${multipleLabel(spec.compute_multiple)}`
                                         : `MoE at r_a ${percent(spec.accounting?.activation_rate)}`,
            ` · budget ${spec.compute_budget} · data ${spec.data_variant}`)),
        h('div', {class: 'head-side muted small'}, `run ${run.run_id}`));

      const steps = num(spec.training?.steps);
      const step = stateName(run.state) === 'SUCCEEDED' ? steps : num(run.latest_step);
      stats.replaceChildren(
          h('div', {class: 'stat'}, h('div', {class: 'stat-label'}, 'State'),
            h('div', {class: 'stat-value'}, stateBadge(run.state), ` attempt ${run.attempt || 0}/${run.max_attempts}`)),
          h('div', {class: 'stat'}, h('div', {class: 'stat-label'}, 'Progress'),
            h('div', {class: 'stat-value'}, `step ${count(step)} of ${count(steps)} (${percent(steps ? step / steps : 0, 0)})`)),
          h('div', {class: 'stat'}, h('div', {class: 'stat-label'}, 'Validation BPC'),
            h('div', {class: 'stat-value', 'data-testid': 'run-val-bpc'},
              num(run.summary?.final_val_bpc) > 0 ? `${fixed(run.summary.final_val_bpc)} (final)`
                                                  : num(run.latest_val_bpc) > 0 ? `${fixed(run.latest_val_bpc)} (latest)` : '—')),
          h('div', {class: 'stat'}, h('div', {class: 'stat-label'}, 'Started'),
            h('div', {class: 'stat-value'}, dateTime(run.start_time))),
          h('div', {class: 'stat'}, h('div', {class: 'stat-label'}, 'Ended'),
            h('div', {class: 'stat-value'}, dateTime(run.end_time))));

      const failure = run.failure?.message || failureClassName(run.failure_class)
          ? failureBlock({className: failureClassName(run.failure_class),
                          message: run.failure?.message || '(no message)',
                          remedy: failureRemedy(run.failure_class)})
          : null;
      const gang = gangCard(run, runDoc.gang);
      gangSection.replaceChildren(...(gang ? [gang] : []));
      details.replaceChildren(
          h('div', {class: 'card'}, h('h2', {}, 'Accounting'), definitionList(accountingFacts(spec))),
          h('div', {class: 'card'}, h('h2', {}, 'Outcome'), failure,
            stateName(run.state) === 'SUCCEEDED' ? definitionList(summaryFacts(run))
                                                 : h('p', {class: 'muted'}, isLiveRun(run) ? 'Still training.' : 'No summary.')));

      // A run that ended without reporting a point (it failed before training) has no curves:
      // one sentence instead of six empty chart cards.
      const noPoints = !isLiveRun(run) && (history.step || []).length === 0;
      noMetrics.hidden = !noPoints;
      noMetrics.textContent = noPoints ? 'This run reported no metrics before it ended: there are no curves to draw.' : '';
      for (const element of [curves, expertTitle, expertNote, expertSection]) element.hidden = noPoints;
      if (noPoints) return false;

      bpc.update([
        {label: 'train BPC', borderColor: '#94a3b8', backgroundColor: '#94a3b8', borderWidth: 1.2,
         data: series(history, 'tokens', 'train_bpc')},
        ...validationDatasets(history),
      ]);
      lr.update([{label: 'learning rate', borderColor: '#7c3aed', backgroundColor: '#7c3aed',
                  data: series(history, 'step', 'learning_rate')}]);
      reuse.update([{label: 'epochs', borderColor: '#0891b2', backgroundColor: '#0891b2',
                     data: series(history, 'tokens', 'epoch')}]);
      gradNorm.update([{label: 'gradient norm', borderColor: '#ea580c', backgroundColor: '#ea580c',
                        data: series(history, 'step', 'grad_norm')}]);

      if (dense) {
        expertNote.hidden = false;
        expertNote.textContent = 'A dense model has no experts.';
      } else {
        ensureExpertCharts();
        const latest = expertShareDatasets(history.latest_expert_load);
        shares.update(latest.datasets, {labels: latest.labels});
        imbalance.update((history.expert_load || []).map((layer, index) => ({
          label: `layer ${layer.layer}`, borderColor: layerColour(index), backgroundColor: layerColour(index),
          data: series({step: history.step, ratio: layer.max_min_ratio}, 'step', 'ratio')})));
        const dead = (history.latest_expert_load?.layers || []).reduce((s, l) => s + num(l.dead_experts), 0);
        expertNote.hidden = !history.latest_expert_load;
        expertNote.textContent = history.latest_expert_load
            ? `Latest expert load at step ${history.latest_expert_load.step}` +
              (dead > 0 ? ` · ${dead} dead expert${dead === 1 ? '' : 's'}` : ' · no dead experts')
            : '';
      }
      return isLiveRun(run);
    },
    destroy() {
      for (const panel of [bpc, lr, gradNorm, reuse, shares, imbalance]) panel?.destroy();
    },
  };
}
