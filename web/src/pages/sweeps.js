// The front page: every sweep with its state, runs by state, progress and submission time, and
// the workers seen recently.
import {getAllPages, getJson} from '../api.js';
import {count, dateTime, h, num, stateBadge, stateName} from '../format.js';
import {hrefFor} from '../router.js';
import {SortableTable} from '../table.js';

const STATE_KEYS = ['pending', 'leased', 'running', 'succeeded', 'failed', 'cancelled'];

export function progressBar(counts) {
  const total = num(counts?.total) || 0;
  const segments = STATE_KEYS.filter((key) => num(counts?.[key]) > 0).map((key) =>
      h('span', {class: `segment state-${key}`, style: `width:${(100 * num(counts[key])) / total}%`,
                 title: `${key}: ${counts[key]}`}));
  const ended = ['succeeded', 'failed', 'cancelled'].reduce((s, k) => s + (num(counts?.[k]) || 0), 0);
  return h('div', {class: 'progress', title: `${ended} of ${total} runs ended`},
           h('div', {class: 'progress-track'}, segments),
           h('span', {class: 'progress-label'}, total ? `${Math.round((100 * ended) / total)}%` : '—'));
}

export function stateCounts(counts) {
  return h('span', {class: 'state-counts'}, STATE_KEYS.filter((key) => num(counts?.[key]) > 0).map(
      (key) => h('span', {class: `count-chip state-${key}`, title: key}, `${counts[key]} ${key}`)));
}

export function mountSweepsPage(root) {
  const workersNote = h('p', {class: 'muted', 'data-testid': 'workers-summary'});
  root.append(h('div', {class: 'page-head'},
                h('div', {}, h('h1', {}, 'Sweeps'),
                  h('p', {class: 'muted'}, 'Studies submitted to this scheduler, newest first.')),
                workersNote));
  const card = h('section', {class: 'card'});
  root.append(card);
  const table = new SortableTable(card, {
    testId: 'sweeps-table',
    rowKey: (sweep) => sweep.sweep_id,
    emptyText: 'No sweeps yet: submit one with `parity submit SPEC`.',
    columns: [
      {key: 'name', label: 'Sweep', value: (s) => s.spec?.name,
       render: (s) => h('div', {}, h('a', {href: hrefFor('sweep', s.sweep_id), 'data-nav': true,
                                           class: 'strong'}, s.spec?.name || s.sweep_id),
                        s.spec?.description ? h('div', {class: 'muted small'}, s.spec.description) : null)},
      {key: 'state', label: 'State', value: (s) => stateName(s.state), render: (s) => stateBadge(s.state)},
      {key: 'runs', label: 'Runs', numeric: true, value: (s) => num(s.counts?.total),
       render: (s) => count(s.counts?.total)},
      {key: 'by_state', label: 'Runs by state', value: (s) => num(s.counts?.running),
       render: (s) => stateCounts(s.counts)},
      {key: 'progress', label: 'Progress', title: 'Share of runs that ended',
       value: (s) => (num(s.counts?.succeeded) + num(s.counts?.failed) + num(s.counts?.cancelled)) /
                     Math.max(1, num(s.counts?.total)),
       render: (s) => progressBar(s.counts)},
      {key: 'owner', label: 'Owner', value: (s) => s.owner || ''},
      {key: 'submitted', label: 'Submitted', value: (s) => s.create_time || '',
       render: (s) => dateTime(s.create_time)},
    ],
    sort: {key: 'submitted', descending: true},
  });

  return {
    async refresh() {
      const [sweeps, workers] = await Promise.all([
        getAllPages('/api/v1/sweeps?page_size=200', 'sweeps'),
        getJson('/api/v1/workers').catch(() => null),
      ]);
      table.setRows(sweeps);
      if (workers) {
        const list = workers.workers || [];
        const busy = list.reduce((sum, w) => sum + (num(w.active_runs) || 0), 0);
        workersNote.textContent = `${list.length} worker${list.length === 1 ? '' : 's'} seen in the ` +
                                  `last 5 minutes · ${busy} run${busy === 1 ? '' : 's'} in progress`;
      }
      return sweeps.some((sweep) => stateName(sweep.state) === 'ACTIVE');
    },
    destroy() {},
  };
}
