// What the dashboard's browser checks share (dashboard_browser.mjs and failed_sweep.mjs): failing a
// check, logging, text a rendering bug leaves behind, the runs table's cells, and axe-core.
import fs from 'node:fs';
import path from 'node:path';

export const TIMEOUT = 20000;

export class CheckFailed extends Error {}
export function check(condition, message) {
  if (!condition) throw new CheckFailed(message);
}
export function log(message) {
  console.log(`[browser] ${message}`);
}

// Text a rendering bug leaves behind: an object or a missing value printed as text.
export async function checkNoBrokenText(page, what) {
  const text = await page.evaluate(() => document.getElementById('app').innerText);
  for (const broken of ['[object ', 'undefined', 'NaN']) {
    const at = text.indexOf(broken);
    check(at < 0, `${what} shows "${broken}": …${text.slice(Math.max(0, at - 60), at + 60)}…`);
  }
}

// axe-core on the page as it stands: WCAG 2.0/2.1 A and AA rules. The source is evaluated
// through the DevTools protocol, which the pages' Content-Security-Policy does not govern.
let axeSource = null;
export const axeResults = [];
export async function checkAccessibility(page, what, nodeModules) {
  if (axeSource === null) {
    const file = path.join(nodeModules, 'axe-core', 'axe.min.js');
    check(fs.existsSync(file), `axe-core is not installed in ${nodeModules} (web/'s npm ci installs it)`);
    axeSource = fs.readFileSync(file, 'utf8');
  }
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, {
      runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']},
      resultTypes: ['violations'],
      // From file:// (a report) axe cannot fetch the stylesheets it preloads for one rule (CSS
      // orientation lock), and Chromium logs the refused requests as errors.
      preload: location.protocol !== 'file:'});
    return result.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length,
                                          targets: v.nodes.slice(0, 4).map((n) => n.target.join(' '))}));
  });
  const counts = {};
  for (const v of violations) counts[v.impact] = (counts[v.impact] || 0) + v.nodes;
  axeResults.push({page: what, counts, violations});
  log(`axe-core on ${what}: ${violations.length ? JSON.stringify(counts) : 'no violations'}`);
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  check(bad.length === 0, `${what} has serious or critical WCAG 2.1 AA violations (axe-core): ` +
        bad.map((v) => `${v.id} (${v.impact}, ${v.nodes} nodes: ${v.targets.join(', ')}) ${v.help}`).join(' | '));
}
export async function columnTexts(page, key) {
  return page.$$eval(`[data-testid="runs-table"] tbody tr[data-row-key] td[data-key="${key}"]`,
                     (cells) => cells.map((cell) => cell.textContent.trim()));
}

