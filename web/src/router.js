// Routes of the single-page app. Live, pages are real paths the scheduler serves index.html for
// (/, /sweeps/ID, /runs/ID) and navigation uses the History API; a report opened from file://
// cannot do that, so there the same routes live in the hash (#/sweeps/ID).
import {isReport, reportInfo} from './api.js';

export function currentRoute() {
  const path = isReport ? location.hash.replace(/^#/, '') || '/' : location.pathname;
  let match = path.match(/^\/sweeps\/([^/]+)\/?$/);
  if (match) return {page: 'sweep', id: decodeURIComponent(match[1])};
  match = path.match(/^\/runs\/([^/]+)\/?$/);
  if (match) return {page: 'run', id: decodeURIComponent(match[1])};
  // A report is about one sweep: its front page is that sweep.
  if (isReport && reportInfo?.sweep_id) return {page: 'sweep', id: reportInfo.sweep_id};
  return {page: 'sweeps'};
}

export function hrefFor(page, id) {
  const path = page === 'sweeps' ? '/' : `/${page}s/${encodeURIComponent(id)}`;
  return isReport ? `#${path}` : path;
}

// Calls `onNavigate()` whenever the route changes: in-app links (a[data-nav]) and back/forward.
export function installNavigation(onNavigate) {
  if (isReport) {
    window.addEventListener('hashchange', onNavigate);
    return;
  }
  document.addEventListener('click', (event) => {
    const link = event.target.closest && event.target.closest('a[data-nav]');
    if (!link || event.defaultPrevented || event.button !== 0 || event.metaKey ||
        event.ctrlKey || event.shiftKey || event.altKey) {
      return;
    }
    event.preventDefault();
    if (link.getAttribute('href') !== location.pathname) {
      history.pushState(null, '', link.getAttribute('href'));
      onNavigate();
    }
  });
  window.addEventListener('popstate', onNavigate);
}
