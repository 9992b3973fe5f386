// The dashboard in headless Chromium (Debian's chromium, driven by playwright-core), started by
// dashboard_test.cc against a seeded scheduler or a `parity report` directory. Exits 0 when every
// check passed; otherwise prints "FAIL: what was expected" and exits 1. Screenshots of every page
// go to --screenshots for inspection.
//
//   node dashboard_browser.mjs --mode live --base-url http://127.0.0.1:PORT --handshake DIR ...
//   node dashboard_browser.mjs --mode report --report DIR/index.html ...
//   node dashboard_browser.mjs --mode signin --base-url https://127.0.0.1:PORT --token TOKEN ...
//   node dashboard_browser.mjs --mode failed --base-url http://127.0.0.1:PORT --token TOKEN
//        --failed-sweep ID --failed-run ID ...  (a sweep whose every run failed: USER_ERROR)
//   node dashboard_browser.mjs --mode large --base-url http://127.0.0.1:PORT --token TOKEN
//        --sweep ID --runs 10000 --counts JSON --failures JSON  (large_sweep.mjs)
//   node dashboard_browser.mjs --mode gang --base-url http://127.0.0.1:PORT --token TOKEN
//        --gang-run ID --rank-hosts A,B --rank-workers ID,ID  (a placed gang's run page, gang_run.mjs)
//
// Every page is checked with axe-core (vendored by web/'s npm ci) for WCAG 2.1 A/AA: no serious
// or critical violation may remain; each page's counts go to SCREENSHOTS/axe-MODE.json.
// Common: --node-modules DIR --chromium PATH --screenshots DIR --sweep ID --sweep-name NAME
//         --runs N --succeeded N --moe-run ID (a RUNNING MoE run) --dense-run ID
//
// Live update handshake (live mode): once the MoE run's page is drawn the script writes
// HANDSHAKE/live-ready; the test then reports more metrics for that run, and the script waits
// for the page's charts to grow without a reload.
import fs from 'node:fs';
import {createRequire} from 'node:module';
import os from 'node:os';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

import {CheckFailed, TIMEOUT, axeResults, check, checkAccessibility, checkNoBrokenText, columnTexts,
        log} from './browser_support.mjs';
import {failedSweep} from './failed_sweep.mjs';
import {gangRun} from './gang_run.mjs';
import {largeSweep} from './large_sweep.mjs';

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--')) throw new Error(`unexpected argument ${argv[i]}`);
    args[argv[i].slice(2)] = argv[i + 1];
  }
  return args;
}

const args = parseArgs(process.argv.slice(2));

function loadPlaywright() {
  const modules = args['node-modules'];
  check(modules && fs.existsSync(path.join(modules, 'playwright-core')),
        `playwright-core is not installed in ${modules} (the build runs npm ci in web/; ` +
        'is the build complete?)');
  return createRequire(path.join(modules, 'resolve.js'))('playwright-core');
}

// The chart cards of a page and their drawn point counts: {testId: points}.
async function chartPoints(page) {
  return page.$$eval('[data-chart]', (cards) => Object.fromEntries(
      cards.map((card) => [card.dataset.chart, Number(card.dataset.points || 0)])));
}

async function waitForCharts(page, testIds, what) {
  try {
    await page.waitForFunction((ids) => ids.every((id) => {
      const card = document.querySelector(`[data-chart="${id}"]`);
      return card && Number(card.dataset.points) > 0;
    }), testIds, {timeout: TIMEOUT});
  } catch {
    const points = await chartPoints(page);
    throw new CheckFailed(`${what}: every chart should draw points; drawn: ${JSON.stringify(points)}`);
  }
  const points = await chartPoints(page);
  log(`${what}: ${JSON.stringify(points)}`);
  return points;
}

async function rowCount(page, table) {
  return page.$$eval(`[data-testid="${table}"] tbody tr[data-row-key]`, (rows) => rows.length);
}

async function waitForRows(page, table, expected, what) {
  try {
    await page.waitForFunction(([t, n]) =>
        document.querySelectorAll(`[data-testid="${t}"] tbody tr[data-row-key]`).length === n,
        [table, expected], {timeout: TIMEOUT});
  } catch {
    throw new CheckFailed(`${what}: expected ${expected} rows in ${table}, found ${await rowCount(page, table)}`);
  }
}

// Sorting by a header asks the server for the rows in that order (order_by on the table
// request) and reorders them: ascending, then descending. "Val BPC" sorts by the FINAL BPC, so
// rows without one (a live run's latest BPC in italics, or "—") come last either way.
async function checkSorting(page) {
  const before = await page.$$eval('[data-testid="runs-table"] tbody tr[data-row-key]',
                                   (rows) => rows.map((row) => row.dataset.rowKey));
  for (const [clicks, direction] of [[1, 'ascending'], [2, 'descending']]) {
    // Live, the order is the server's (a report cuts its pages from its documents).
    const asked = !page.url().startsWith('http') ? Promise.resolve() : page.waitForRequest((request) => new URL(request.url()).pathname.endsWith('/table') &&
        new URL(request.url()).searchParams.get('order_by') ===
            (direction === 'ascending' ? 'final_val_bpc' : 'final_val_bpc desc'), {timeout: TIMEOUT});
    await page.click('[data-testid="runs-table"] th[data-key="val_bpc"] button');
    await asked;
    const sortState = await page.getAttribute('[data-testid="runs-table"] th[data-key="val_bpc"]', 'aria-sort');
    check(sortState === direction, `after ${clicks} click(s) on "Val BPC" the header should be ${direction}, is ${sortState}`);
    const cells = await page.waitForFunction((want) => {
      const tds = [...document.querySelectorAll('[data-testid="runs-table"] tbody tr[data-row-key] td[data-key="val_bpc"]')];
      const finals = tds.filter((td) => !td.querySelector('em') && td.textContent.trim() !== '—')
                        .map((td) => Number(td.textContent));
      const sorted = finals.every((v, i) => i === 0 || (want === 'ascending' ? finals[i - 1] <= v : finals[i - 1] >= v));
      return sorted ? tds.map((td) => ({text: td.textContent.trim(), final: !td.querySelector('em') && td.textContent.trim() !== '—'}))
                    : null;
    }, direction, {timeout: TIMEOUT}).then((handle) => handle.jsonValue()).catch(() => null);
    const texts = await columnTexts(page, 'val_bpc');
    check(cells, `Val BPC should be sorted ${direction} by final BPC: ${texts.join(' ')}`);
    const firstOther = cells.findIndex((c) => !c.final);
    check(firstOther < 0 || cells.slice(firstOther).every((c) => !c.final),
          `rows without a final BPC should come last when sorting ${direction}: ${texts.join(' ')}`);
    const values = cells.filter((c) => c.final).map((c) => Number(c.text));
    check(values.length >= 20 && values.every((v) => Number.isFinite(v)),
          `the Val BPC column should hold numbers: ${texts.join(' ')}`);
  }
  const after = await page.$$eval('[data-testid="runs-table"] tbody tr[data-row-key]',
                                  (rows) => rows.map((row) => row.dataset.rowKey));
  check(after.join() !== before.join(), 'sorting by Val BPC should reorder the rows');
  log('sorting by Val BPC asks the server (order_by) and reorders the rows (ascending, then descending)');
}

async function checkEqualResourceFigure(page) {
  const labels = JSON.parse(await page.getAttribute('[data-chart="chart-equal-resource"]', 'data-series-labels'));
  const dense1 = labels.filter((l) => l.startsWith('dense 1C'));
  const dense2 = labels.filter((l) => l.startsWith('dense 2C'));
  const moe = labels.filter((l) => l.startsWith('MoE'));
  check(dense1.length > 0 && dense2.length > 0,
        `the equal-resource figure should have dense 1C and 2C lines; series: ${labels.join(' | ')}`);
  check(moe.length > 0, `the equal-resource figure should have MoE series; series: ${labels.join(' | ')}`);
  const regions = labels.filter((l) => l.startsWith('region'));
  check(regions.length > 0, `the equal-resource figure should mark each group's region; series: ${labels.join(' | ')}`);
  log(`equal-resource figure: ${moe.length} MoE series, ${dense1.length} dense 1C and ${dense2.length} dense 2C lines`);
}

// The analysis document the page drew: fetched again live, read from data.js in a report.
async function analysisDocument(page) {
  const key = `/api/v1/sweeps/${args.sweep}/analysis`;
  return page.evaluate(async (path) => window.PARITY_REPORT
      ? window.PARITY_REPORT.documents[path]
      : (await fetch(path, {headers: {Accept: 'application/json'}})).json(), key);
}

function elText(leverage) {
  if (!(Number(leverage?.value) > 0)) return null;
  let text = Number(leverage.value).toFixed(2);
  if (leverage.interval) text += ` [${leverage.interval.low.toFixed(2)} – ${leverage.interval.high.toFixed(2)}]`;
  if (leverage.extrapolated) text += ` (extrapolated ×${leverage.extrapolation_factor.toFixed(1)})`;
  return text;
}

// The panel's EL table: every MoE grid point's frontier EL and fixed-N EL as the API gives them
// (value, 90% interval, extrapolation mark) or the reason each is missing, in columns that say
// which EL they are.
async function checkLeverage(page, doc) {
  const headers = await page.$$eval('[data-testid="leverage-table"] th', (ths) => ths.map((t) => t.innerText));
  check(headers.some((t) => t.startsWith('Frontier EL')) && headers.some((t) => t.startsWith('Fixed-N EL')),
        `the EL table should name both ELs in its headings: ${headers.join(' | ')}`);
  const rows = await page.$$eval('[data-testid="leverage-row"]', (trs) => trs.map((r) => ({
    point: r.dataset.point, group: r.dataset.group,
    frontier: r.querySelector('[data-testid="frontier-el"]').innerText,
    fixedN: r.querySelector('[data-testid="fixed-n-el"]').innerText})));
  const moe = doc.grid_points.filter((p) => p.role === 'RUN_ROLE_MOE');
  check(rows.length === moe.length, `one EL row per MoE grid point: ${rows.length} rows, ${moe.length} points`);
  let extrapolated = 0;
  for (const p of moe) {
    const row = rows.find((r) => r.point === p.name && r.group === p.group);
    check(row, `the EL table has no row for ${p.group} ${p.name}`);
    for (const [shown, leverage, which] of [[row.frontier, p.frontier_leverage, 'frontier'],
                                            [row.fixedN, p.fixed_n_leverage, 'fixed-N']]) {
      const expected = elText(leverage);
      if (expected === null) {
        check(shown.startsWith('—') && shown.includes(leverage.missing_reason),
              `${p.name}: a missing ${which} EL should show its reason "${leverage.missing_reason}": "${shown}"`);
      } else {
        check(shown === expected, `${p.name}: ${which} EL should read "${expected}" as the API says, reads "${shown}"`);
      }
      if (leverage?.extrapolated) extrapolated++;
    }
  }
  log(`analysis: ${rows.length} MoE grid points with frontier and fixed-N EL as the API gives them ` +
      `(${extrapolated} extrapolated); e.g. ${rows[0]?.point}: ${rows[0]?.frontier} | ${rows[0]?.fixedN}`);
}

const REGION_WORDS = {REGION_STATUS_BEST: 'best', REGION_STATUS_INSIDE: 'inside',
                      REGION_STATUS_OUTSIDE: 'outside', REGION_STATUS_UNTESTED: 'untested'};
const LACK_OF_FIT_WORDS = {LACK_OF_FIT_VERDICT_PASSES: 'passes', LACK_OF_FIT_VERDICT_REJECTED: 'rejected',
                           LACK_OF_FIT_VERDICT_UNTESTED: 'untested'};

// Per group: the point optimum (inside the 15–60% grid, with its bracket) or its reason, the
// lack-of-fit verdict, and every grid point's probability of being best and region status.
async function checkOptima(page, doc) {
  const optima = await page.$$eval('[data-testid="optimum-row"]', (rows) => rows.map((r) => ({
    group: r.dataset.group, status: r.dataset.status,
    region: r.querySelector('[data-testid="region-span"]').innerText,
    lackOfFit: r.querySelector('[data-testid="lack-of-fit"]').innerText,
    optimum: r.querySelector('[data-testid="point-optimum"]').innerText})));
  check(optima.length === doc.optimal_activation.length && optima.length >= 4,
        `one optimum row per group: ${JSON.stringify(optima)}`);
  for (const o of doc.optimal_activation) {
    const row = optima.find((r) => r.group === o.group);
    check(row, `no optimum row for ${o.group}`);
    if (o.status === 'OPTIMUM_STATUS_BRACKETED') {
      const rates = [...row.optimum.matchAll(/([\d.]+)%/g)].map((m) => Number(m[1]));
      check(rates.length > 0 && rates.every((r) => r >= 14 && r <= 61),
            `a point optimum must lie inside the 15–60% grid: "${row.optimum}"`);
    } else {
      check(row.optimum === `none: ${o.reason}`, `${o.group}: no point optimum should show "none: ${o.reason}": "${row.optimum}"`);
    }
    check(row.lackOfFit.startsWith(LACK_OF_FIT_WORDS[o.lack_of_fit.verdict]),
          `${o.group}: lack of fit should read ${o.lack_of_fit.verdict}: "${row.lackOfFit}"`);
    if (o.region) {
      check(row.region.startsWith(`${(100 * o.region.low).toFixed(1)}% – ${(100 * o.region.high).toFixed(1)}%`),
            `${o.group}: region should span ${JSON.stringify(o.region)}: "${row.region}"`);
    }
    const grid = await page.$$eval(`[data-testid="region-table"][data-group="${o.group}"] [data-testid="region-row"]`,
        (trs) => trs.map((r) => ({region: r.dataset.region, best: r.querySelector('[data-testid="probability-best"]').innerText,
                                  word: r.cells[3].innerText})));
    check(grid.length === o.grid.length, `${o.group}: ${o.grid.length} grid points, the region table has ${grid.length}`);
    o.grid.forEach((p, i) => {
      const best = o.probability_resamples > 0 ? `${(100 * p.probability_best).toFixed(1)}%` : '—';
      check(grid[i].best === best && grid[i].region === p.region && grid[i].word === REGION_WORDS[p.region],
            `${o.group} r_a ${p.activation_rate}: P(best) ${best} and region ${p.region} expected, shown ${JSON.stringify(grid[i])}`);
    });
  }
  log(`analysis: ${optima.length} groups — ${optima.map((o) => `${o.group}: region ${o.region}, lack of fit ${o.lackOfFit}, point optimum ${o.optimum}`).join(' | ')}`);
}

// The analysis card: both ELs, the per-group optimum and region, ΔBPC against every baseline,
// the frontier and fixed-N laws with intervals, and the paper-style table of grid points — each
// figure as the API document gives it.
async function checkAnalysis(page) {
  await page.waitForSelector('[data-testid="analysis"]', {timeout: TIMEOUT});
  const doc = await analysisDocument(page);
  check(doc && doc.grid_points, `the analysis document should be readable: ${JSON.stringify(doc).slice(0, 200)}`);
  const law = await page.$eval('[data-testid="dense-law"]', (e) => e.innerText).catch(() => '');
  check(law.includes('Fixed-N dense law') && law.includes('L(C) =') && law.includes('90% bootstrap intervals'),
        `the analysis should show the fixed-N dense law with its 90% intervals: "${law}"`);
  const frontier = await page.$$eval('[data-testid="frontier-row"]', (rows) => rows.length);
  check(frontier === (doc.dense_frontier?.points || []).length && frontier >= 3,
        `the compute-optimal dense frontier should list its ${doc.dense_frontier?.points?.length} points, lists ${frontier}`);
  await checkLeverage(page, doc);
  await checkOptima(page, doc);
  const baselines = await page.$$eval('[data-testid="baseline-row"]', (rows) => rows.length);
  const expected = doc.grid_points.reduce((n, p) => n + (p.baselines || []).length, 0);
  check(baselines === expected && expected > 0, `ΔBPC against every baseline: ${expected} comparisons, ${baselines} rows`);
  const paper = await page.$$eval('[data-testid="paper-row"]', (rows) => rows.length);
  check(paper >= 16, `the paper-style table should list the finished grid points, has ${paper}`);
  const refusal = await page.$eval('[data-testid="el-law-refusal"]', (e) => e.innerText).catch(() => '');
  const law2 = await page.$('[data-testid="el-law"]');
  check(law2 !== null || refusal.includes('not fitted'),
        `the joint EL law should be fitted or say why not: "${refusal}"`);
  log(`analysis: frontier of ${frontier} budgets, fixed-N law with intervals, ${baselines} baseline comparisons, ${paper} grid points`);
}

// Curves: colour is r_a, the line pattern the budget, and the legend draws each entry as its
// lines are drawn (dashes included); the equal-resource legend shows dense baselines as lines.
async function checkLegends(page) {
  const legends = await page.evaluate(() => {
    const legendOf = (id) => {
      const chart = window.Chart.getChart(document.querySelector(`[data-chart="${id}"] canvas`));
      // A line's entry is a drawn sample of the line (a canvas marked data-line), not a dot.
      const style = (i) => (i.pointStyle instanceof HTMLCanvasElement ? i.pointStyle.dataset.sample : i.pointStyle);
      return {items: chart.legend.legendItems.map((i) => ({text: i.text, dash: i.lineDash || [], pointStyle: style(i)})),
              datasets: chart.data.datasets.map((d) => ({group: d.group ?? d.label, dash: d.borderDash || []}))};
    };
    return {curves: legendOf('chart-curves-tokens'), equal: legendOf('chart-equal-resource')};
  });
  const {items, datasets} = legends.curves;
  const dashOf = (group) => JSON.stringify(datasets.find((d) => d.group === group)?.dash);
  for (const item of items) {
    check(JSON.stringify(item.dash) === dashOf(item.text), `legend entry "${item.text}" should show its lines' dash ${dashOf(item.text)}, shows ${JSON.stringify(item.dash)}`);
  }
  const c1 = items.filter((i) => i.text.startsWith('MoE') && i.text.endsWith('· C1'));
  const c2 = items.filter((i) => i.text.startsWith('MoE') && i.text.endsWith('· C2'));
  check(c1.length > 0 && c2.length > 0 && /r_a \d+\.\d%/.test(c1[0].text),
        `the curves' legend should have one entry per r_a (to 0.1%) and budget: ${items.map((i) => i.text).join(' | ')}`);
  check(JSON.stringify(c1[0].dash) !== JSON.stringify(c2[0].dash), 'budgets C1 and C2 should be drawn with different line patterns');
  check(items.every((i) => i.pointStyle === 'line'), `every curve legend entry should be a line sample: ${JSON.stringify(items.slice(0, 3))}`);
  const dense = legends.equal.items.filter((i) => i.text.startsWith('dense'));
  check(dense.length > 0 && dense.every((i) => i.pointStyle === 'line' && i.dash.length > 0),
        `the dense baselines' legend entries should be dashed lines, not dots: ${JSON.stringify(dense.slice(0, 3))}`);
  log(`legends: ${items.length} curve entries (r_a × budget, dashed by budget); dense baselines as dashed lines`);
}

async function checkSweepPage(page, shots, prefix) {
  await page.waitForSelector('[data-testid="runs-table"]', {timeout: TIMEOUT});
  await waitForRows(page, 'runs-table', Number(args.runs), 'sweep page');
  const title = await page.textContent('h1');
  check(title.includes(args['sweep-name']), `the sweep page should be titled ${args['sweep-name']}: ${title}`);
  await waitForCharts(page, ['chart-curves-tokens', 'chart-curves-flops', 'chart-equal-resource'], 'sweep page');
  await checkEqualResourceFigure(page);
  await checkLegends(page);
  // Each progress cell's percentage sits right of its bar, never on it ("0%" over the track).
  const overlapping = await page.$$eval('[data-testid="runs-table"] td[data-key="progress"] .mini-progress', (cells) =>
    cells.filter((cell) => {
      const track = cell.querySelector('.mini-track')?.getBoundingClientRect();
      const text = [...cell.childNodes].find((n) => n.nodeType === Node.TEXT_NODE);
      if (!track || !text) return true;
      const range = document.createRange();
      range.selectNodeContents(text);
      return range.getBoundingClientRect().left < track.right;
    }).map((cell) => cell.innerText));
  check(overlapping.length === 0, `progress labels overlap their bars: ${overlapping.slice(0, 5).join(' | ')}`);
  await (await page.$('.chart-grid')).screenshot({path: path.join(shots, `${prefix}sweep-figures.png`)});
  await checkAnalysis(page);
  // Two evaluation sets: "code" gets a final BPC and a ΔBPC column of its own.
  const codeBpc = (await columnTexts(page, 'bpc.code')).filter((t) => /^\d+\.\d+$/.test(t));
  check(codeBpc.length >= Number(args.succeeded),
        `the runs table should show each finished run's final BPC on "code": ${codeBpc.length} values`);
  check(await page.$('[data-testid="runs-table"] th[data-key="delta.code"]'),
        'the runs table should have a ΔBPC column for the evaluation set "code"');
  await checkNoBrokenText(page, 'the sweep page');
  await checkAccessibility(page, `${prefix}sweep page`, args['node-modules']);
  await page.screenshot({path: path.join(shots, `${prefix}sweep.png`), fullPage: true});
  await checkSorting(page);
  await page.selectOption('[data-testid="state-filter"]', 'RUNNING');
  await waitForRows(page, 'runs-table', 2, 'filtering by RUNNING should leave the 2 running runs');
  await page.selectOption('[data-testid="state-filter"]', 'all');
  await waitForRows(page, 'runs-table', Number(args.runs), 'every state again');
  await page.screenshot({path: path.join(shots, `${prefix}sweep-sorted.png`), fullPage: true});
}

async function openRunFromTable(page, runId) {
  await page.click(`[data-testid="runs-table"] tr[data-row-key="${runId}"] td[data-key="name"] a`);
  await page.waitForSelector('[data-testid="run-summary"] .stat', {timeout: TIMEOUT});
}

const RUN_CHARTS = ['chart-run-bpc', 'chart-run-lr', 'chart-run-grad-norm', 'chart-run-epochs'];
const EXPERT_CHARTS = ['chart-expert-shares', 'chart-expert-imbalance'];

async function checkMoeRunPage(page, shots, prefix) {
  const points = await waitForCharts(page, [...RUN_CHARTS, ...EXPERT_CHARTS], 'MoE run page');
  const layers = JSON.parse(await page.getAttribute('[data-chart="chart-expert-shares"]', 'data-series-labels'));
  check(layers.some((l) => l.startsWith('layer')), `the expert-load chart should have one bar series per layer: ${layers}`);
  // The seeded runs report two evaluation sets: one validation curve each, the legend naming it.
  const bpcSeries = JSON.parse(await page.getAttribute('[data-chart="chart-run-bpc"]', 'data-series-labels'));
  const setCurves = bpcSeries.filter((l) => l.startsWith('val BPC · '));
  check(setCurves.length === 2 && setCurves.includes('val BPC · validation') && setCurves.includes('val BPC · code'),
        `the BPC chart should have one validation curve per evaluation set (validation, code): ${bpcSeries}`);
  await checkNoBrokenText(page, 'the MoE run page');
  await checkAccessibility(page, `${prefix}MoE run page`, args['node-modules']);
  await page.screenshot({path: path.join(shots, `${prefix}run-moe.png`), fullPage: true});
  return points;
}

async function checkDenseRunPage(page, shots, prefix) {
  await waitForCharts(page, RUN_CHARTS, 'dense run page');
  const note = await page.textContent('[data-testid="expert-note"]');
  check(note.includes('no experts'), `a dense run page should say it has no experts: ${note}`);
  // A finished run: the host's peak, and the device's beside the planner's estimate (seeded 5.5%
  // over it).
  const facts = await page.$$eval('dl.facts dt', (terms) => Object.fromEntries(
    terms.map((dt) => [dt.textContent, dt.nextElementSibling?.textContent || ''])));
  check(facts['Device memory'] === '61.2 GB of 58.0 GB estimated (+5.5%)',
        `the finished dense run should show its device memory beside the estimate: ${JSON.stringify(facts)}`);
  check((facts['Peak memory'] || '').includes('(host RSS)'),
        `the peak memory row should say it is the host's: ${facts['Peak memory']}`);
  await checkNoBrokenText(page, 'the dense run page');
  await checkAccessibility(page, `${prefix}dense run page`, args['node-modules']);
  await page.screenshot({path: path.join(shots, `${prefix}run-dense.png`), fullPage: true});
}

async function waitForFile(file, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new CheckFailed(`${file} did not appear: the test did not report the live update`);
}

async function live(page, shots) {
  const base = args['base-url'];
  // Signed out, a page sends the browser to the sign-in page; the token's link signs it in
  // (an HttpOnly cookie) and lands on the sweeps page without the token in the address bar.
  await page.goto(`${base}/`);
  check(new URL(page.url()).pathname === '/login',
        `a signed-out browser should be sent to /login, not ${page.url()}`);
  await checkAccessibility(page, 'sign-in page', args['node-modules']);
  await page.goto(`${base}/login?token=${encodeURIComponent(args.token)}`);
  check(new URL(page.url()).pathname === '/' && !page.url().includes('token'),
        `signing in should land on / without the token in the URL: ${page.url()}`);
  await waitForRows(page, 'sweeps-table', 1, 'sweeps page');
  const row = `[data-testid="sweeps-table"] tr[data-row-key="${args.sweep}"]`;
  const rowText = await page.textContent(row);
  check(rowText.includes(args['sweep-name']) && rowText.includes('ACTIVE'),
        `the sweeps page should list ${args['sweep-name']} as ACTIVE: ${rowText}`);
  check(rowText.includes('2 running') && rowText.includes(`${args.succeeded} succeeded`),
        `the sweep row should count its runs by state: ${rowText}`);
  await checkNoBrokenText(page, 'the sweeps page');
  await checkAccessibility(page, 'sweeps page', args['node-modules']);
  await page.screenshot({path: path.join(shots, 'sweeps.png'), fullPage: true});

  await page.click(`${row} a`);  // client-side navigation to the sweep page
  await page.waitForURL(`**/sweeps/${args.sweep}`);
  await checkSweepPage(page, shots, '');
  const indicator = await page.getAttribute('#live-indicator', 'data-state');
  check(indicator === 'live', `a sweep with running runs should be polled live; indicator: ${indicator}`);

  await openRunFromTable(page, args['dense-run']);
  await checkDenseRunPage(page, shots, '');
  await page.goBack();
  await waitForRows(page, 'runs-table', Number(args.runs), 'back on the sweep page');

  await openRunFromTable(page, args['moe-run']);
  const before = await checkMoeRunPage(page, shots, '');
  fs.writeFileSync(path.join(args.handshake, 'live-ready'), JSON.stringify(before));
  const answer = await waitForFile(path.join(args.handshake, 'live-reported'), 30000);
  check(answer.startsWith('ok'), `the test failed to report more metrics: ${answer}`);
  try {
    await page.waitForFunction((count) =>
        Number(document.querySelector('[data-chart="chart-run-bpc"]').dataset.points) > count,
        before['chart-run-bpc'], {timeout: 30000});
  } catch {
    const now = await chartPoints(page);
    throw new CheckFailed(`the run page should grow after more metrics arrived (no reload): ` +
                          `before ${JSON.stringify(before)}, now ${JSON.stringify(now)}`);
  }
  const after = await chartPoints(page);
  log(`live update: ${before['chart-run-bpc']} → ${after['chart-run-bpc']} points on the BPC chart`);
  check(after['chart-expert-imbalance'] > before['chart-expert-imbalance'],
        `the expert-load chart should grow too: ${before['chart-expert-imbalance']} → ${after['chart-expert-imbalance']}`);
  await page.screenshot({path: path.join(shots, 'run-moe-live-update.png'), fullPage: true});
}

async function report(page, shots) {
  const file = pathToFileURL(path.resolve(args.report)).href;
  await page.goto(file);
  await checkSweepPage(page, shots, 'report-');
  const indicator = await page.getAttribute('#live-indicator', 'data-state');
  check(indicator === 'report', `a report should say it is static; indicator: ${indicator}`);
  await openRunFromTable(page, args['moe-run']);
  check(page.url().startsWith('file://') && page.url().includes(`#/runs/${args['moe-run']}`),
        `a report's run page should be a hash route of the same file: ${page.url()}`);
  await checkMoeRunPage(page, shots, 'report-');
  await page.goBack();
  await waitForRows(page, 'runs-table', Number(args.runs), 'back on the report sweep page');
  await openRunFromTable(page, args['dense-run']);
  await checkDenseRunPage(page, shots, 'report-');
}

// Signing in through the form, over HTTPS: a wrong token stays on /login with the reason, a
// viewer's token lands on the sweeps page, signing out sends the browser back to /login.
async function signin(page, shots) {
  const base = args['base-url'];
  // A colleague's link to a sweep: signed out, it goes to /login and, signed in, to the sweep.
  const target = `/sweeps/${args.sweep}`;
  const loginPage = await page.goto(`${base}${target}`);
  check(new URL(page.url()).pathname === '/login' && new URL(page.url()).searchParams.get('next') === target,
        `signed out, ${target} should go to /login?next=${target}: ${page.url()}`);
  const help = await page.textContent('[data-testid="token-help"]');
  check(help.includes('admin.token') && help.includes('parity token create'),
        `the sign-in page should say where tokens come from: ${help}`);
  await checkAccessibility(page, 'sign-in page', args['node-modules']);
  // The page works under the scheduler's Content-Security-Policy (a blocked script or style
  // would log an error, which fails the run) and may not be framed.
  const headers = loginPage.headers();
  check((headers['content-security-policy'] || '').includes("frame-ancestors 'none'") &&
        headers['x-frame-options'] === 'DENY',
        `the sign-in page should carry the CSP and X-Frame-Options: ${JSON.stringify(headers)}`);
  await page.fill('#token', 'parity_wrong-token-000000000000000000000000000000');
  await Promise.all([page.waitForNavigation(), page.click('input[type="submit"]')]);
  const refused = await page.textContent('body');
  check(refused.includes('not valid'), `a wrong token should be refused with its reason: ${refused}`);
  await page.fill('#token', args.token);
  await Promise.all([page.waitForNavigation(), page.click('input[type="submit"]')]);
  check(new URL(page.url()).pathname === target,
        `signing in should land on the page asked for, ${target} (after a refused token too): ${page.url()}`);
  await waitForRows(page, 'runs-table', Number(args.runs), 'the linked sweep page over https');
  await page.screenshot({path: path.join(shots, 'signed-in-https.png'), fullPage: true});
  // The sign-out button: a form POST (Chromium sends Origin with it, which /logout insists on).
  await Promise.all([page.waitForNavigation(), page.click('[data-testid="sign-out"]')]);
  check(new URL(page.url()).pathname === '/login', `the sign-out button should end on /login: ${page.url()}`);
  await page.goto(`${base}/`);
  check(new URL(page.url()).pathname === '/login', `signed out again, / should go to /login: ${page.url()}`);
}

async function main() {
  const shots = args.screenshots;
  fs.mkdirSync(shots, {recursive: true});
  check(fs.existsSync(args.chromium), `Chromium not found at ${args.chromium} (apt-get install chromium)`);
  const {chromium} = loadPlaywright();
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'parity-chromium-'));
  // Without the background-networking flags Chromium's own connections are refused in sandboxes.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: args.chromium,
    headless: true,
    viewport: {width: 1440, height: 900},
    // The sign-in test's scheduler has a certificate of a CA made for the test; what is checked
    // there is the sign-in over TLS, the certificate itself is checked by the C++ tests.
    ignoreHTTPSErrors: args.mode === 'signin',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = context.pages()[0] || await context.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(error.message));
  // A failed sweep has nothing to analyse: its /analysis answers 400 with the reason, which the
  // page's analysis card shows. Any other refused request is an error.
  const failedRequests = [];
  page.on('response', (response) => {
    if (response.status() < 400) return;
    const expected = args.mode === 'failed' && response.status() === 400 &&
                     new URL(response.url()).pathname.endsWith('/analysis');
    if (!expected) failedRequests.push(`${response.status()} ${response.url()}`);
  });
  page.on('console', (message) => {
    // The sign-in test sends a wrong token on purpose: its 401 is the expected answer; a
    // refused request is judged by its URL above.
    const expected = (args.mode === 'signin' && message.text().includes('status of 401')) ||
                     message.text().startsWith('Failed to load resource');
    if (message.type() === 'error' && !expected) errors.push(message.text());
  });
  let failed = null;
  try {
    if (args.mode === 'live') await live(page, shots);
    else if (args.mode === 'report') await report(page, shots);
    else if (args.mode === 'signin') await signin(page, shots);
    else if (args.mode === 'failed') await failedSweep(page, shots, args);
    else if (args.mode === 'large') await largeSweep(page, shots, args);
    else if (args.mode === 'gang') await gangRun(page, shots, args);
    else throw new CheckFailed(`unknown --mode ${args.mode}`);
    check(errors.length === 0, `the pages logged errors: ${errors.join(' | ')}`);
    check(failedRequests.length === 0 || (args.mode === 'signin' && failedRequests.every((r) => r.startsWith('401'))),
          `requests the server refused: ${failedRequests.join(' | ')}`);
  } catch (error) {
    failed = error;
    await page.screenshot({path: path.join(shots, `${args.mode}-failure.png`), fullPage: true}).catch(() => {});
  } finally {
    fs.writeFileSync(path.join(shots, `axe-${args.mode}.json`), JSON.stringify(axeResults, null, 2));
    await context.close();
    fs.rmSync(profile, {recursive: true, force: true});
  }
  if (failed) {
    console.log(`FAIL: ${failed instanceof CheckFailed ? failed.message : failed.stack}`);
    if (errors.length) console.log(`page errors: ${errors.join(' | ')}`);
    process.exit(1);
  }
  log(`all ${args.mode} checks passed; screenshots in ${shots}`);
}

main().catch((error) => {
  console.log(`FAIL: ${error.stack || error}`);
  process.exit(1);
});
