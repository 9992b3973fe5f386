// The gang checks of dashboard_browser.mjs (--mode gang), driven by gang_run_test.cc: a run of
// two ranks placed on two hosts with rank 1 checked in. Its run page shows a ranks table (rank,
// worker, host, devices, checked in) and the rendezvous waiting for rank 0, as
// `parity status RUN` does.
import path from 'node:path';

import {TIMEOUT, check, checkAccessibility, checkNoBrokenText} from './browser_support.mjs';

export async function gangRun(page, shots, args) {
  const target = `/runs/${args['gang-run']}`;
  await page.goto(`${args['base-url']}/login?token=${encodeURIComponent(args.token)}&next=${encodeURIComponent(target)}`);
  await page.waitForSelector('[data-testid="run-gang"] [data-testid="gang-ranks"] tbody tr', {timeout: TIMEOUT});
  const rows = await page.$$eval('[data-testid="gang-ranks"] tbody tr', (trs) => trs.map(
      (tr) => [...tr.querySelectorAll('td')].map((td) => td.innerText.trim())));
  const hosts = args['rank-hosts'].split(',');
  const workers = args['rank-workers'].split(',');
  check(rows.length === 2, `two ranks should make two rows: ${JSON.stringify(rows)}`);
  rows.forEach(([rank, worker, host, devices, checkedIn], i) => {
    check(rank === String(i) && worker === workers[i] && host === hosts[i],
          `rank ${i} should run on ${workers[i]} at ${hosts[i]}: ${JSON.stringify(rows[i])}`);
    check(devices !== '' && devices !== '—', `rank ${i} should list its devices: ${JSON.stringify(rows[i])}`);
    check(i === 0 ? checkedIn === 'no' : /^yes \(\+\d+\.\d s\)$/.test(checkedIn),
          `rank 0 has not checked in, rank 1 has: ${JSON.stringify(rows[i])}`);
  });
  const heading = await page.textContent('[data-testid="run-gang"] h2');
  check(heading === 'Gang: 2 ranks on 2 hosts', `the card's title: ${heading}`);
  const rendezvous = await page.textContent('[data-testid="gang-rendezvous"]');
  check(/^Rendezvous: waiting: 1 of 2 checked in, deadline in [45]m \d+s$/.test(rendezvous),
        `the rendezvous should wait for rank 0: ${rendezvous}`);
  await checkNoBrokenText(page, 'the gang run page');
  await checkAccessibility(page, 'gang run page', args['node-modules']);
  await page.screenshot({path: path.join(shots, 'run-gang.png'), fullPage: true});
}
