// The dashboard's entry point: picks the page for the route, mounts it, and keeps it fresh by
// polling while anything it shows is still running (a page's refresh() says whether it is).
// Bundled by esbuild into one classic script (assets/app.js) so that reports work from file://.
import {ApiError, isReport, reportInfo} from './api.js';
import {h} from './format.js';
import {currentRoute, hrefFor, installNavigation} from './router.js';
import {mountRunPage} from './pages/run.js';
import {mountSweepPage} from './pages/sweep.js';
import {mountSweepsPage} from './pages/sweeps.js';

const POLL_MS = Number(new URLSearchParams(location.search).get('poll_ms')) || 3000;

const pages = {sweeps: mountSweepsPage, sweep: mountSweepPage, run: mountRunPage};

let current = null;  // {page, timer, generation}
let generation = 0;

function setLiveIndicator(state) {
  const indicator = document.getElementById('live-indicator');
  indicator.hidden = false;
  indicator.className = `live-indicator ${state.kind}`;
  indicator.dataset.state = state.kind;
  indicator.textContent = state.text;
}

function showError(root, error) {
  const notFound = error instanceof ApiError && error.httpStatus === 404;
  root.replaceChildren(h('section', {class: 'error-card', 'data-testid': 'error'},
                         h('h1', {}, notFound ? 'Not found' : 'Something went wrong'),
                         h('p', {}, error.message),
                         isReport ? null : h('p', {}, h('a', {href: hrefFor('sweeps'), 'data-nav': true},
                                                        '← All sweeps'))));
}

async function refresh(mine) {
  if (!current || current.generation !== mine) return;
  let live = false;
  try {
    live = await current.page.refresh();
    if (!current || current.generation !== mine) return;
    const time = new Date().toLocaleTimeString();
    if (isReport) setLiveIndicator({kind: 'report', text: 'Static report'});
    else if (live) setLiveIndicator({kind: 'live', text: `Live · updated ${time}`});
    else setLiveIndicator({kind: 'final', text: `Final · loaded ${time}`});
  } catch (error) {
    if (!current || current.generation !== mine) return;
    // A page that never loaded shows the error; a page that did keeps its data and retries.
    if (!current.loaded) {
      showError(document.getElementById('app'), error);
      return;
    }
    setLiveIndicator({kind: 'stale', text: `Connection problem: ${error.message} — retrying`});
    live = true;
  }
  current.loaded = true;
  if (live && !isReport) current.timer = setTimeout(() => refresh(mine), POLL_MS);
}

function navigate() {
  if (current) {
    clearTimeout(current.timer);
    current.page.destroy();
  }
  const route = currentRoute();
  const root = document.getElementById('app');
  root.replaceChildren();
  window.scrollTo(0, 0);
  const mine = ++generation;
  current = {page: pages[route.page](root, route.id), timer: null, generation: mine, loaded: false};
  refresh(mine);
}

function start() {
  const home = document.getElementById('home-link');
  home.setAttribute('href', hrefFor('sweeps'));
  home.dataset.nav = '';
  if (isReport) {
    document.getElementById('signout').remove();  // a report has no session to end
    document.getElementById('footer').textContent =
        `Static report written by \`parity report\` on ${new Date(reportInfo.generated_at).toLocaleString()}` +
        ` from the scheduler at ${reportInfo.scheduler}. Figures show the sweep as it was then.`;
  } else {
    document.getElementById('footer').textContent =
        `Served by parity-scheduler · JSON API at /api/v1 · refreshes every ${POLL_MS / 1000} s while runs train.`;
  }
  installNavigation(navigate);
  navigate();
}

start();
