// labd browser test of a job's metric definitions on its page (docs/jobs.md "Metrics"): a
// definition whose regex keeps hitting PCRE2's match limit is dropped, and the job page says
// so by name beside the metrics, while a sound definition beside it still gives its plot and
// final value. A real job in a real job sandbox, like jobs.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_PW, WIDE, Browser, uniqueName, formLogin, apiLogin, api, createUser, waitFor } from './console-lib.mjs';

const JOB_TIMEOUT = 120_000; // a cold job sandbox on a busy 2-core machine
const T = { timeout: 300_000 };
const b = new Browser();
const USER = uniqueName('jmet');
let session, page;

before(async () => {
  await b.start();
  const admin = await apiLogin('admin', ADMIN_PW);
  const pw = await createUser(admin, USER);
  session = await apiLogin(USER, pw);
  page = await b.page(WIDE);
  await formLogin(page, USER, pw);
});

after(async () => {
  await b.stop();
});

test('a dropped metric definition is named on the job page', T, async () => {
  // 20 lines on which (a|aa)+$ hits the match limit, then a loss line
  const cmd = "for i in $(seq 1 20); do echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!; done; echo loss=0.25";
  const r = await api(session, 'POST', '/jobs', {
    name: uniqueName('drop-'),
    command: ['/bin/sh', '-c', cmd],
    metric_definitions: [
      { name: 'evil', regex: '(a|aa)+$' },
      { name: 'loss', regex: 'loss=([0-9.]+)' },
    ],
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const id = r.body.id;
  const job = await waitFor(async () => {
    const j = (await api(session, 'GET', `/jobs/${id}`)).body;
    return j.status !== 'InProgress' && j.metrics_complete && j;
  }, 'the job over with its metrics complete', JOB_TIMEOUT);
  assert.equal(job.status, 'Completed', JSON.stringify(job));
  assert.deepEqual(job.dropped_metrics.map((d) => [d.index, d.name]), [[0, 'evil']]);

  await page.goto(`/jobs/${id}`);
  const notice = page.locator('#metrics-dropped');
  await notice.waitFor();
  assert.match(await notice.textContent(), /Metric definitions dropped: evil\. .*match limit/);
  await page.locator('#final-metrics tbody tr[data-metric="loss"]').waitFor();
  assert.equal(await page.locator('#metrics-reading').isVisible(), false, 'its metrics are final');
  assert.deepEqual(b.pageErrors, []);
});
