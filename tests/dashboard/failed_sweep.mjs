// The failed-sweep checks of dashboard_browser.mjs (--mode failed), driven by dashboard_test.cc.
import path from 'node:path';

import {TIMEOUT, check, checkAccessibility, checkNoBrokenText, columnTexts, log} from './browser_support.mjs';

// A sweep whose every run failed (USER_ERROR, a missing dataset): the sweep page says why and
// what to do (a banner and a column), its empty charts say nothing will come and draw no axes,
// and the run page explains the failure instead of showing empty chart cards.
export async function failedSweep(page, shots, args) {
  const base = args['base-url'];
  const target = `/sweeps/${args['failed-sweep']}`;
  await page.goto(`${base}/login?token=${encodeURIComponent(args.token)}&next=${encodeURIComponent(target)}`);
  check(new URL(page.url()).pathname === target, `a sign-in link with next= should land on ${target}: ${page.url()}`);
  await page.waitForSelector('[data-testid="failure-banner"] [data-testid="failure"]', {timeout: TIMEOUT});
  const banner = await page.$$eval('[data-testid="failure-banner"] [data-testid="failure"]', (blocks) => blocks.map((b) => ({
    runs: b.querySelector('[data-testid="failure-runs"]')?.innerText || '',
    className: b.querySelector('[data-testid="failure-class"]')?.innerText || '',
    message: b.querySelector('[data-testid="failure-message"]')?.innerText || '',
    remedy: b.querySelector('[data-testid="failure-remedy"]')?.innerText || ''})));
  check(banner.length === 1, `one distinct failure should make one banner entry: ${JSON.stringify(banner)}`);
  const [failure] = banner;
  check(failure.className === 'user_error' && /^dataset '.+' not found on worker /.test(failure.message) &&
        failure.remedy === 'fix the spec or give the workers the dataset; see the message' &&
        failure.runs === `${args['failed-runs']} runs failed · `,
        `the banner should give the class, message, remedy and count: ${JSON.stringify(failure)}`);
  // The banner and the runs table come from two requests: wait for the table's rows too (a
  // table still empty failed CI once; a table that never fills still fails below).
  await page.waitForFunction((n) => document.querySelectorAll(
    '[data-testid="runs-table"] tbody tr[data-row-key] td[data-key="failure"]').length >= n,
  Number(args['failed-runs']), {timeout: TIMEOUT}).catch(() => {});
  const column = await columnTexts(page, 'failure');
  check(column.length === Number(args['failed-runs']) && column.every((t) => t.startsWith('user_error: dataset')),
        `every row's "Last failure" cell should name the failure: ${column.join(' | ')}`);
  const header = await page.$$eval('[data-testid="runs-table"] th', (ths) => ths.map((t) => t.innerText.trim()));
  check(header.includes('Last failure') && header.includes('Unique D'), `the runs table's headers: ${header.join(' | ')}`);
  const text = await page.evaluate(() => document.getElementById('app').innerText);
  check(!text.includes('No validation points yet'), 'an ended sweep should not say validation points are still to come');
  check(text.includes('no run reported any before the sweep ended'), `the empty curves should say why: ${text.slice(0, 400)}`);
  check(!text.includes('FAILURE_CLASS_'), 'failure classes are spelled like the spec (user_error)');
  // An empty chart draws no axes (Chart.js would invent ticks "0 0 0 1 1 1"). The three charts
  // settle one by one as their (empty) series arrive: wait for that, then check what is shown
  // (a chart that never hides its axes still fails below, after the timeout).
  await page.waitForFunction(() => {
    const canvases = [...document.querySelectorAll('[data-chart] canvas')];
    return canvases.length === 3 && canvases.every((c) => {
      const chart = window.Chart.getChart(c);
      return chart && Object.values(chart.options.scales).every((scale) => scale.display === false);
    });
  }, null, {timeout: TIMEOUT}).catch(() => {});
  const axes = await page.$$eval('[data-chart] canvas', (canvases) => canvases.map((c) => {
    const chart = window.Chart.getChart(c);
    return Object.values(chart.options.scales).some((scale) => scale.display !== false);
  }));
  check(axes.length === 3 && axes.every((shown) => !shown), `empty charts should hide their axes: ${axes}`);
  await checkNoBrokenText(page, 'the failed sweep page');
  await checkAccessibility(page, 'failed sweep page', args['node-modules']);
  await page.screenshot({path: path.join(shots, 'sweep-failed.png'), fullPage: true});

  await page.click(`[data-testid="runs-table"] tr[data-row-key="${args['failed-run']}"] td[data-key="name"] a`);
  await page.waitForSelector('[data-testid="run-summary"] .stat', {timeout: TIMEOUT});
  await page.waitForSelector('[data-testid="failure"] [data-testid="failure-remedy"]', {timeout: TIMEOUT});
  const runFailure = await page.textContent('[data-testid="failure"]');
  check(runFailure.includes('user_error') && runFailure.includes('not found on worker') &&
        runFailure.includes('give the workers the dataset'), `the run page should explain the failure: ${runFailure}`);
  await page.waitForSelector('[data-testid="no-metrics"]:not([hidden])', {timeout: TIMEOUT});
  const visibleCharts = await page.$$eval('[data-chart]', (cards) => cards.filter((c) => c.offsetParent !== null).length);
  check(visibleCharts === 0, `a run without metrics should show no empty chart cards, shows ${visibleCharts}`);
  await checkNoBrokenText(page, 'the failed run page');
  await checkAccessibility(page, 'failed run page', args['node-modules']);
  await page.screenshot({path: path.join(shots, 'run-failed.png'), fullPage: true});
}

