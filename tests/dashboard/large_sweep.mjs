// The sweep page at 10,000 runs (dashboard_browser.mjs --mode large, driven by
// large_sweep_test.cc): the first page of the runs table is drawn within FIRST_PAGE_MS, the
// table holds one page, next/previous/sort/filter/page size each ask the server for one page
// (page_token, order_by, state, page_size on the request), no request lists the sweep, every
// response stays under MAX_RESPONSE_BYTES, a poll re-reads only the visible page, and the counts
// and the failure banner match what the test seeded.
//
//   --sweep ID --runs 10000 --counts '{"succeeded": N, ...}' --failures '["message", ...]'
import path from 'node:path';

import {TIMEOUT, check, checkNoBrokenText, columnTexts, log} from './browser_support.mjs';

// Measured on the 2-core build machine: about 0.5-1 s from navigation to the first page of rows
// (the table's request is one page of the results view plus a lookup per row). The bound leaves
// room for a loaded CI machine; a page that fetched the whole sweep takes several times longer.
const FIRST_PAGE_MS = 3000;
// One response of the page, whatever the sweep's size: a 100-row table page is about 320 KB,
// the sweep, the summary and a page's curves less. The page that read every run and result row
// of this sweep fetched about 40 MB per poll. Not bounded here: the analysis (AnalyzeSweep as
// JSON), which lists every finished MoE run's leverage (1.7 MB and about 19 s of the server's
// time when 7,860 of the 10,000 runs have finished; this test's sweep is in mid-flight), read in
// the background once and again only when runs succeed.
const MAX_RESPONSE_BYTES = 600 * 1000;
const PAGE_SIZE = 100;  // the page's default
const POLL_MS = 1500;

const TABLE_ROWS = '[data-testid="runs-table"] tbody tr[data-row-key]';

// Every /api/v1 request the page made ({path, params, at}) and response it received ({path,
// params, bytes, at}).
function recordApi(page) {
  const seen = [];
  const asked = [];
  const pending = [];
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.pathname.startsWith('/api/v1/')) asked.push({path: url.pathname, params: url.searchParams, at: Date.now()});
  });
  page.on('response', (response) => {
    const url = new URL(response.url());
    if (!url.pathname.startsWith('/api/v1/')) return;
    pending.push(response.body().then((body) => {
      seen.push({path: url.pathname, params: url.searchParams, bytes: body.length, at: Date.now()});
    }, () => {}));
  });
  return {seen, asked, settled: () => Promise.all(pending)};
}

async function rowKeys(page) {
  return page.$$eval(TABLE_ROWS, (rows) => rows.map((row) => row.dataset.rowKey));
}

// Waits for the table to show `n` rows other than `before` (the page it showed), and returns them.
async function waitForNewRows(page, n, before, what) {
  try {
    await page.waitForFunction(([selector, want, old]) => {
      const keys = [...document.querySelectorAll(selector)].map((row) => row.dataset.rowKey);
      return keys.length === want && keys.join() !== old;
    }, [TABLE_ROWS, n, before.join()], {timeout: TIMEOUT});
  } catch {
    const keys = await rowKeys(page);
    check(false, `${what}: expected ${n} new rows, the table shows ${keys.length} (changed: ${keys.join() !== before.join()})`);
  }
  return rowKeys(page);
}

// The user's action and the table request it must cause, whose query must satisfy `want`.
async function tableRequestOf(page, action, want, what) {
  const request = page.waitForRequest((r) => {
    const url = new URL(r.url());
    return url.pathname.endsWith('/table') && want(url.searchParams);
  }, {timeout: TIMEOUT}).catch(() => null);
  await action();
  const made = await request;
  check(made, `${what} should ask the server for one page (/table with the right query)`);
  const params = new URL(made.url()).searchParams;
  log(`${what}: GET …/table?${params}`);
  return params;
}

function sortedBy(values, descending) {
  return values.every((v, i) => i === 0 || (descending ? values[i - 1] >= v : values[i - 1] <= v));
}

async function checkFirstPage(page, args, api) {
  const counts = JSON.parse(args.counts);
  const target = `${args['base-url']}/sweeps/${args.sweep}?poll_ms=${POLL_MS}`;
  const start = Date.now();
  await page.goto(target, {waitUntil: 'commit'});
  const drawnAt = await page.waitForFunction(([selector, n]) =>
      (document.querySelectorAll(selector).length === n ? performance.now() : 0),
  [TABLE_ROWS, PAGE_SIZE], {timeout: TIMEOUT, polling: 'raf'}).then((h) => h.jsonValue()).catch(() => null);
  check(drawnAt, `the first page of ${PAGE_SIZE} rows should be drawn; the table shows ${(await rowKeys(page)).length}`);
  log(`first table page of a ${args.runs}-run sweep drawn ${Math.round(drawnAt)} ms after navigation ` +
      `(${Date.now() - start} ms by the test's clock; bound ${FIRST_PAGE_MS} ms)`);
  check(drawnAt < FIRST_PAGE_MS, `the first page should be drawn within ${FIRST_PAGE_MS} ms, took ${Math.round(drawnAt)} ms`);
  const allRows = await page.$$eval('[data-testid="runs-table"] tbody tr', (rows) => rows.length);
  check(allRows === PAGE_SIZE, `the runs table should hold one page (${PAGE_SIZE} rows), holds ${allRows}`);
  const info = await page.textContent('[data-testid="page-info"]');
  check(info.includes(`rows 1–${PAGE_SIZE} of 10,000`) && info.includes('page 1 of 100'),
        `the pager should say which rows of how many: "${info}"`);

  // Counts from the sweep document, as seeded.
  await page.waitForFunction(() => document.querySelector('[data-testid="stat-runs"] .muted'), null, {timeout: TIMEOUT});
  const chips = await page.$$eval('[data-testid="stat-states"] .count-chip', (cs) => cs.map((c) => c.textContent));
  const shown = Object.fromEntries(chips.map((t) => t.split(' ')).map(([n, key]) => [key, Number(n)]));
  check(JSON.stringify(Object.keys(shown).sort()) === JSON.stringify(Object.keys(counts).sort()) &&
        Object.entries(counts).every(([key, n]) => shown[key] === n),
        `the counts by state should be the seeded ${JSON.stringify(counts)}, shown ${JSON.stringify(shown)}`);
  const runs = await page.textContent('[data-testid="stat-runs"] .stat-value');
  const [, total, moe, dense] = runs.match(/^(\d+) \((\d+) MoE, (\d+) dense\)$/) || [];
  check(Number(total) === Number(args.runs) && Number(moe) + Number(dense) === Number(args.runs),
        `the Runs stat should count ${args.runs} runs, MoE and dense: "${runs}"`);
  log(`counts as seeded: ${chips.join(', ')}; ${runs}`);

  // The failure banner: the seeded distinct failures, their runs adding up to the FAILED count.
  await page.waitForSelector('[data-testid="failure-banner"]:not([hidden]) [data-testid="failure"]', {timeout: TIMEOUT});
  const banner = await page.$$eval('[data-testid="failure-banner"] [data-testid="failure"]', (blocks) => blocks.map((b) => ({
    runs: parseInt(b.querySelector('[data-testid="failure-runs"]')?.innerText || '0', 10),
    message: b.querySelector('[data-testid="failure-message"]')?.innerText || ''})));
  const messages = JSON.parse(args.failures);
  check(banner.length === messages.length && messages.every((m) => banner.some((b) => b.message === m)) &&
        banner.reduce((sum, b) => sum + b.runs, 0) === counts.failed,
        `the banner should list ${messages.join(' | ')} over ${counts.failed} failed runs: ${JSON.stringify(banner)}`);
  log(`failure banner: ${banner.map((b) => `${b.runs} × ${b.message}`).join(' | ')}`);
  await api.settled();
  const listings = api.seen.filter((r) => /\/sweeps\/[^/]+\/(runs|results)$/.test(r.path));
  check(listings.length === 0, `the page should not list the sweep's runs or results: ${listings.map((r) => r.path).join(' ')}`);
}

async function checkPaging(page) {
  const first = await rowKeys(page);
  const next = await tableRequestOf(page, () => page.click('[data-testid="page-next"]'),
                                    (p) => p.get('page_token'), 'next page');
  check(next.get('page_size') === String(PAGE_SIZE), `the next page keeps the page size: ${next}`);
  const second = await waitForNewRows(page, PAGE_SIZE, first, 'next page');
  check(second.every((key) => !first.includes(key)), 'the next page should show other runs');
  const info = await page.textContent('[data-testid="page-info"]');
  check(info.includes(`rows 101–200`), `the pager should say rows 101–200: "${info}"`);
  await tableRequestOf(page, () => page.click('[data-testid="page-previous"]'),
                       (p) => !p.get('page_token'), 'previous page');
  const back = await waitForNewRows(page, PAGE_SIZE, second, 'previous page');
  check(back.join() === first.join(), 'the previous page should show the first page again');
}

async function checkSortAndFilter(page, args) {
  const counts = JSON.parse(args.counts);
  for (const descending of [false, true]) {
    const before = await rowKeys(page);
    const field = descending ? 'compute_flops desc' : 'compute_flops';
    await tableRequestOf(page, () => page.click('[data-testid="runs-table"] th[data-key="C"] button'),
                         (p) => p.get('order_by') === field && !p.get('page_token'), `sort by C (${field})`);
    await waitForNewRows(page, PAGE_SIZE, before, `sorted by ${field}`);
    const values = (await columnTexts(page, 'C')).map(Number);
    check(values.length === PAGE_SIZE && values.every(Number.isFinite) && sortedBy(values, descending),
          `the page should be sorted by C ${descending ? 'descending' : 'ascending'}: ${values.slice(0, 12).join(' ')} …`);
  }
  const sortedFirst = await rowKeys(page);
  await tableRequestOf(page, () => page.click('[data-testid="page-next"]'),
                       (p) => p.get('page_token') && p.get('order_by') === 'compute_flops desc', 'the next sorted page');
  await waitForNewRows(page, PAGE_SIZE, sortedFirst, 'the next sorted page');
  const before = await rowKeys(page);
  await tableRequestOf(page, () => page.selectOption('[data-testid="state-filter"]', 'FAILED'),
                       (p) => p.get('state') === 'FAILED' && !p.get('page_token'), 'filter FAILED');
  await waitForNewRows(page, PAGE_SIZE, before, 'filtered to FAILED');
  const states = await columnTexts(page, 'state');
  check(states.every((s) => s === 'FAILED'), `every row should be FAILED: ${[...new Set(states)].join(' ')}`);
  const failures = await columnTexts(page, 'failure');
  check(failures.every((t) => /^(out_of_memory|diverged): /.test(t)), `the failure column: ${[...new Set(failures)].join(' | ')}`);
  const matching = Number(await page.getAttribute('[data-testid="page-info"]', 'data-matching'));
  check(matching === counts.failed, `the pager should count ${counts.failed} FAILED runs, counts ${matching}`);
  const filtered = await rowKeys(page);
  await tableRequestOf(page, () => page.selectOption('[data-testid="page-size"]', '25'),
                       (p) => p.get('page_size') === '25' && p.get('state') === 'FAILED', 'page size 25');
  await waitForNewRows(page, 25, filtered, 'page size 25');
  log(`sort by C both ways, next sorted page, filter FAILED (${matching} runs) and 25 rows a page: each one server request`);
}

// A poll re-reads the sweep document and the visible page (with its own query) and the curves of
// its live runs; the summary and the analysis only when runs ended.
async function checkPolling(page, api) {
  await api.settled();
  const since = Date.now();
  const lastTable = [...api.asked].reverse().find((r) => r.path.endsWith('/table'));
  const polls = () => api.asked.filter((r) => r.at > since && r.path.endsWith('/table')).length;
  while (Date.now() - since < 2 * POLL_MS + 500 || (polls() < 1 && Date.now() - since < TIMEOUT)) {
    await page.waitForTimeout(250);
  }
  await api.settled();
  const polled = api.asked.filter((r) => r.at > since);
  const tables = polled.filter((r) => r.path.endsWith('/table'));
  check(tables.length >= 1 && tables.every((r) => String(r.params) === String(lastTable.params)),
        `a poll should re-read the visible page (${lastTable.params}): ${tables.map((r) => String(r.params)).join(' | ')}`);
  const other = polled.filter((r) => !/\/sweeps\/[^/]+(\/table|\/curves)?$/.test(r.path));
  check(other.length === 0, `a poll with no run ended should read nothing else: ${other.map((r) => r.path).join(' ')}`);
  log(`requests in ${Date.now() - since} ms of polling: ${polled.map((r) => r.path.split('/').pop()).join(', ')}`);
}

export async function largeSweep(page, shots, args) {
  await page.goto(`${args['base-url']}/login?token=${encodeURIComponent(args.token)}`);
  const api = recordApi(page);
  await checkFirstPage(page, args, api);
  await checkNoBrokenText(page, 'the 10,000-run sweep page');
  await page.screenshot({path: path.join(shots, 'sweep-10000.png'), fullPage: true});
  await checkPaging(page);
  await checkSortAndFilter(page, args);
  await checkPolling(page, api);
  // The figure and the analysis card come from the analysis document (server-computed).
  await page.waitForSelector('[data-testid="analysis"]', {timeout: TIMEOUT}).catch(() => null);
  const figurePoints = await page.getAttribute('[data-chart="chart-equal-resource"]', 'data-points');
  check(Number(figurePoints) > 0, `the equal-resource figure should be drawn from the analysis: ${figurePoints} points`);
  await page.screenshot({path: path.join(shots, 'sweep-10000-failed-runs.png'), fullPage: true});
  const elements = await page.evaluate(() => document.getElementsByTagName('*').length);
  check(elements < 20000, `the page's DOM should stay bounded: ${elements} elements`);
  await api.settled();
  const bounded = api.seen.filter((r) => !r.path.endsWith('/analysis'));
  const biggest = bounded.reduce((a, b) => (b.bytes > a.bytes ? b : a), {bytes: 0});
  const total = bounded.reduce((sum, r) => sum + r.bytes, 0);
  const analysis = api.seen.find((r) => r.path.endsWith('/analysis'));
  const analysisAsked = api.asked.filter((r) => r.path.endsWith('/analysis')).length;
  log(`${bounded.length} API responses but the analysis, ${total} bytes in all; the largest ${biggest.bytes} B ` +
      `(${biggest.path}); the analysis asked ${analysisAsked}×, ${analysis ? `${analysis.bytes} B` : 'still being computed'}; ` +
      `${elements} DOM elements`);
  check(analysisAsked === 1, `the analysis should be asked for once while no run succeeds, was asked ${analysisAsked}×`);
  check(biggest.bytes < MAX_RESPONSE_BYTES,
        `every response should stay under ${MAX_RESPONSE_BYTES} bytes; ${biggest.path}?${biggest.params} was ${biggest.bytes}`);
  const curves = api.seen.filter((r) => r.path.endsWith('/curves'));
  check(curves.every((r) => (r.params.get('run_id') || '').split(',').length <= PAGE_SIZE),
        'curves should be asked for the page\'s runs only');
}
