// Where the pages get their data: the scheduler's /api/v1 over fetch or, in a static report
// written by `parity report`, the very same documents from data.js (window.PARITY_REPORT), so
// the pages never know which. The documents are described in web/dashboard_documents.h.

export class ApiError extends Error {
  constructor(httpStatus, code, message) {
    super(message);
    this.httpStatus = httpStatus;
    this.code = code;
  }
}

const report = typeof window !== 'undefined' ? window.PARITY_REPORT || null : null;

// True in a static report: no polling, hash routes, documents from data.js.
export const isReport = report !== null;
// {generated_at, sweep_id, scheduler} of a report; null when live.
export const reportInfo = report ? report.info : null;

function errorOf(doc, fallbackStatus, fallbackMessage) {
  const error = doc && doc.error;
  return new ApiError(error?.http_status ?? fallbackStatus, error?.code ?? 'UNKNOWN',
                      error?.message ?? fallbackMessage);
}

// GET one document. Throws ApiError with the API's code (NOT_FOUND, INVALID_ARGUMENT, ...).
export async function getJson(path) {
  if (report) {
    const key = path.split('?')[0];
    const doc = report.documents[key];
    if (doc === undefined) throw new ApiError(404, 'NOT_FOUND', `${key} is not in this report`);
    if (doc.error) throw errorOf(doc, 500, 'error');
    return doc;
  }
  let response;
  try {
    response = await fetch(path, {headers: {Accept: 'application/json'}, cache: 'no-store'});
  } catch (e) {
    throw new ApiError(0, 'UNAVAILABLE', `the scheduler cannot be reached (${e.message})`);
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON (a proxy's error page): reported below with the HTTP status.
  }
  if (!response.ok) throw errorOf(body, response.status, response.statusText);
  return body;
}

// Every item of a paged list: follows next_page_token. `listKey` names the array ("runs").
export async function getAllPages(path, listKey) {
  const items = [];
  let token = '';
  const separator = path.includes('?') ? '&' : '?';
  for (let page = 0; page < 1000; page++) {
    const url = token ? `${path}${separator}page_token=${encodeURIComponent(token)}` : path;
    const doc = await getJson(url);
    items.push(...(doc[listKey] || []));
    token = doc.next_page_token || '';
    if (!token) break;
  }
  return items;
}

// ---- The sweep page at any size: one table page and a summary, never the whole sweep. ----
//
// Live, both come from the scheduler (`/sweeps/ID/table`: the results view sorted and filtered
// in SQL, paged by an opaque page_token; `/sweeps/ID/summary`: folded over the runs on the
// server). A report holds one sweep's `runs` and `results` documents whole, so the same pages
// are cut from them here, with the offset as the token.

// Results-view columns that are NULL (0 in the JSON) until a run has finished: sorted last in
// either direction, as PostgreSQL's NULLS LAST does.
const NULL_UNTIL_FINISHED = new Set(['final_val_bpc', 'delta_bpc_vs_dense', 'measured_flops_per_token',
                                     'wall_seconds']);

function reportTablePage(sweepId, {states, orderBy, pageSize, pageToken}) {
  const base = `/api/v1/sweeps/${sweepId}`;
  const runs = new Map((report.documents[`${base}/runs`]?.runs || []).map((run) => [run.run_id, run]));
  let rows = (report.documents[`${base}/results`]?.rows || [])
      .filter((result) => runs.has(result.run_id))
      .map((result) => ({run: runs.get(result.run_id), result}));
  if (states.length) rows = rows.filter((row) => states.includes(row.result.state.replace('RUN_STATE_', '')));
  if (orderBy) {
    const [field, direction] = orderBy.split(' ');
    const sign = direction === 'desc' ? -1 : 1;
    const value = (row) => {
      const v = row.result[field];
      return v === undefined || v === null || (v === 0 && NULL_UNTIL_FINISHED.has(field)) ? null : v;
    };
    rows = rows.map((row) => ({row, value: value(row)})).sort((a, b) => {
      if (a.value === null || b.value === null) return (a.value === null) - (b.value === null);
      const order = typeof a.value === 'number' ? a.value - b.value
                                                : String(a.value).localeCompare(String(b.value));
      return sign * order || a.row.run.run_id.localeCompare(b.row.run.run_id);
    }).map((entry) => entry.row);
  }
  const offset = Number(pageToken) || 0;
  const next = offset + pageSize < rows.length ? String(offset + pageSize) : null;
  return {rows: rows.slice(offset, offset + pageSize), next_page_token: next};
}

// One page of a sweep's runs table: {rows: [{run, result}], next_page_token}. `states` are run
// state names ("RUNNING"); `orderBy` a ResultRow field with an optional " desc"; '' = grid order.
export async function getTablePage(sweepId, {states = [], orderBy = '', pageSize = 100, pageToken = ''}) {
  if (report) return reportTablePage(sweepId, {states, orderBy, pageSize, pageToken});
  const params = new URLSearchParams({page_size: String(pageSize)});
  if (states.length) params.set('state', states.join(','));
  if (orderBy) params.set('order_by', orderBy);
  if (pageToken) params.set('page_token', pageToken);
  return getJson(`/api/v1/sweeps/${encodeURIComponent(sweepId)}/table?${params}`);
}

function reportSummary(sweepId) {
  const runs = report.documents[`/api/v1/sweeps/${sweepId}/runs`]?.runs || [];
  const dense = (run) => run.spec.role === 'RUN_ROLE_DENSE_BASELINE' || run.spec.role === 'RUN_ROLE_DENSE_FRONTIER';
  const failures = new Map();
  const failed = runs.filter((run) => run.state === 'RUN_STATE_FAILED');
  for (const run of failed) {
    const key = `${run.failure_class}|${run.failure?.message || ''}`;
    const entry = failures.get(key) || {failure_class: run.failure_class, message: run.failure?.message || '', runs: 0};
    entry.runs++;
    failures.set(key, entry);
  }
  return {
    runs: runs.length,
    dense_runs: runs.filter(dense).length,
    moe_runs: runs.filter((run) => !dense(run)).length,
    compute_budgets: [...new Set(runs.map((run) => run.spec.compute_budget))].sort(),
    dense_multiples: [...new Set(runs.filter(dense).map((run) => Number(run.spec.compute_multiple) || 1))]
        .sort((a, b) => a - b),
    total_compute_flops: runs.reduce((sum, run) => sum + Number(run.spec.accounting?.compute_flops || 0), 0),
    failed_runs: failed.length,
    failures: [...failures.values()].sort((a, b) => b.runs - a.runs),
    other_failed_runs: 0,
  };
}

// What the sweep page's header says of all its runs (web::SweepSummary in dashboard_documents.h).
export async function getSweepSummary(sweepId) {
  if (report) return reportSummary(sweepId);
  return getJson(`/api/v1/sweeps/${encodeURIComponent(sweepId)}/summary`);
}
