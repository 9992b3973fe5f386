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
