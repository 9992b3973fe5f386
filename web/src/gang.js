// A gang run's placement on the run page (GetRunResponse.gang, docs/api.md): where its ranks run
// (rank, worker, host, devices, checked in) and how far its rendezvous got, worded as
// `parity status RUN` words it (cli/run_status_format.h). Nothing for a run of one rank.
import {h, num, stateName} from './format.js';

function millis(timestamp) {
  const t = timestamp ? new Date(timestamp).getTime() : NaN;
  return Number.isFinite(t) ? t : NaN;
}

// "3.2 s", "4m 10s", "2h 5m" (a negative span as its magnitude), as the CLI's SpanText.
export function spanText(milliseconds) {
  const seconds = Math.abs(milliseconds) / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const whole = Math.round(seconds);
  if (whole < 3600) return `${Math.floor(whole / 60)}m ${whole % 60}s`;
  return `${Math.floor(whole / 3600)}h ${Math.floor((whole % 3600) / 60)}m`;
}

// "released 3.2 s after placement" or "waiting: 2 of 4 checked in, deadline in 4m 10s".
export function rendezvousText(gang, nowMs = Date.now()) {
  const placed = millis(gang.placed_time);
  if (gang.released) return `released ${spanText(millis(gang.released_time) - placed)} after placement`;
  const ranks = gang.ranks || [];
  const checkedIn = ranks.filter((rank) => rank.checked_in).length;
  const left = millis(gang.rendezvous_deadline) - nowMs;
  const deadline = left >= 0 ? `deadline in ${spanText(left)}`
                             : `deadline passed ${spanText(left)} ago (the scheduler fails and requeues the gang)`;
  return `waiting: ${checkedIn} of ${num(gang.world_size)} checked in, ${deadline}`;
}

// The card, or null for a run that is not a gang. A PENDING gang says it waits to be placed.
export function gangCard(run, gang) {
  const ranks = num(run.spec?.resources?.ranks);
  if (!gang) {
    if (!(ranks > 1) || stateName(run.state) !== 'PENDING') return null;
    return h('div', {class: 'card', 'data-testid': 'run-gang'}, h('h2', {}, `Gang of ${ranks} ranks`),
             h('p', {class: 'muted', 'data-testid': 'gang-rendezvous'}, 'Waiting to be placed whole.'));
  }
  const placed = millis(gang.placed_time);
  const hosts = new Set((gang.ranks || []).map((rank) => rank.hostname || rank.worker_id));
  const rows = (gang.ranks || []).map((rank) => h('tr', {},
      h('td', {class: 'numeric'}, String(num(rank.rank))),
      h('td', {}, h('code', {}, rank.worker_id)),
      h('td', {}, rank.hostname || '—'),
      h('td', {}, (rank.device_indices || []).join(', ') || '—'),
      h('td', {}, rank.checked_in ? `yes (+${spanText(millis(rank.check_in_time) - placed)})` : 'no')));
  return h('div', {class: 'card', 'data-testid': 'run-gang'},
    h('h2', {}, `Gang: ${num(gang.world_size)} ranks on ${hosts.size} host${hosts.size === 1 ? '' : 's'}`),
    h('p', {class: 'muted'}, `epoch ${gang.lease_epoch} · placed ${Number.isFinite(placed)
        ? `${new Date(placed).toISOString().replace('T', ' ').slice(0, 19)} UTC` : '—'}`),
    h('p', {'data-testid': 'gang-rendezvous'}, `Rendezvous: ${rendezvousText(gang)}`),
    h('div', {class: 'table-scroll'},
      h('table', {class: 'data-table compact', 'data-testid': 'gang-ranks'},
        h('thead', {}, h('tr', {}, ['Rank', 'Worker', 'Host', 'Devices', 'Checked in'].map(
            (title) => h('th', {scope: 'col'}, title)))),
        h('tbody', {}, rows))));
}
