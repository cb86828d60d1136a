// labd browser test of a job's profiler report (docs/jobs.md "The profiler report"): a real job
// whose first step is slow and that asks for no warm-up gets a StepOutlier finding; its job page
// links to the report, which lists every rule with its status, says what to do about the
// finding, plots the samples, draws the step-time histogram, and prints without the page's
// navigation. A job without a step-time metric says so.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_PW, WIDE, Browser, uniqueName, formLogin, apiLogin, api, createUser, waitFor } from './console-lib.mjs';

const JOB_TIMEOUT = 120_000; // a cold job sandbox on a busy 2-core machine
const T = { timeout: 300_000 };
const b = new Browser();
const USER = uniqueName('jrep');
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

async function runJob(body) {
  const r = await api(session, 'POST', '/jobs', { name: uniqueName('rep-'), ...body });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const job = await waitFor(async () => {
    const j = (await api(session, 'GET', `/jobs/${r.body.id}`)).body;
    return j.status !== 'InProgress' && j.metrics_complete && j;
  }, 'the job over with its metrics complete', JOB_TIMEOUT);
  assert.equal(job.status, 'Completed', JSON.stringify(job));
  return job;
}

test('the report of a job with a slow step, from its job page, printable', T, async () => {
  const cmd = 'echo step_time=0.90; for i in $(seq 1 20); do echo step_time=0.05$((i % 5)); sleep 0.1; done';
  const job = await runJob({
    command: ['/bin/sh', '-c', cmd],
    metric_definitions: [{ name: 'step_time', regex: 'step_time=([0-9.]+)' }],
    rules: { warmup_s: 0 },
  });
  assert.ok(job.findings.some((f) => f.rule === 'StepOutlier'), JSON.stringify(job.findings));

  await page.goto(`/jobs/${job.id}`);
  const link = page.locator('#job-report-link');
  await link.waitFor();
  assert.equal(await link.getAttribute('href'), `/jobs/${job.id}/report`);
  await link.click();
  await page.waitForURL(`**/jobs/${job.id}/report`);
  await page.locator('body[data-loaded="true"]').waitFor();

  assert.equal(await page.locator('#report-rules tbody tr').count(), 8);
  assert.equal(await page.locator('#report-rules tr[data-rule="StepOutlier"]').getAttribute('data-status'), 'IssuesFound');
  assert.equal(await page.locator('#report-rules tr[data-rule="LowGPUUtilization"]').getAttribute('data-status'), 'NotApplicable');
  assert.match(await page.locator('#report-verdict').textContent(), /1 rule found an issue: StepOutlier/);
  assert.match(await page.locator('#report-warmup').textContent(), /first 0 s .*the job's rules\.warmup_s/);
  const advice = page.locator('#report-findings li[data-rule="StepOutlier"] .finding-advice');
  assert.match(await advice.textContent(), /What to do: .*checkpoint/);
  assert.equal(await page.locator('#report-findings-empty').isVisible(), false);

  // the readings: CPU and memory plotted (a CPU job: no GPU plot), percentiles tabled
  await page.locator('#report-plots [data-reading="cpu_percent"]').waitFor();
  await page.locator('#report-plots [data-reading="memory_bytes"]').waitFor();
  assert.equal(await page.locator('#report-plots [data-reading="gpu_percent"]').count(), 0);
  assert.match(await page.locator('#report-usage tr[data-reading="gpu_percent"]').textContent(), /not read/);

  // the histogram: every step counted once, the slow one in the last bar
  const rows = page.locator('#report-histogram tbody tr');
  assert.ok(await rows.count() > 1);
  const counts = await page.locator('#report-histogram tbody td.num').allTextContents();
  assert.equal(counts.reduce((a, c) => a + Number(c), 0), 21);
  assert.equal(counts[counts.length - 1], '1');
  assert.match(await page.locator('#report-steps-note').textContent(), /21 steps of the metric "step_time"/);

  // printed: no top bar, no buttons; the sections stay
  await page.emulateMedia({ media: 'print' });
  assert.equal(await page.locator('header.topbar').isVisible(), false);
  assert.equal(await page.locator('#report-print').isVisible(), false);
  assert.equal(await page.locator('#report-summary').isVisible(), true);
  await page.emulateMedia({ media: 'screen' });
  assert.deepEqual(b.pageErrors, []);
});

test('a job without a step-time metric says so on its report', T, async () => {
  const job = await runJob({ command: ['/bin/sh', '-c', 'echo hello'] });
  await page.goto(`/jobs/${job.id}/report`);
  await page.locator('body[data-loaded="true"]').waitFor();
  assert.match(await page.locator('#report-steps-note').textContent(), /no step-time metric.*"step_time"/);
  assert.equal(await page.locator('#report-histogram').isVisible(), false);
  assert.match(await page.locator('#report-warmup').textContent(), /first 20 s .*\[jobs\] rules_warmup/);
  assert.equal(await page.locator('#report-findings-empty').isVisible(), true);
  assert.deepEqual(b.pageErrors, []);
});
