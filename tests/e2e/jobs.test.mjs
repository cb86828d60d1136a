// labd browser test of training jobs (issue 11): a user submits a job from the dashboard's
// form, watches its log arrive live on the job page, sees the loss plot drawn with its
// points, the phase timeline, billable seconds and Completed, gets the end notice on the
// dashboard, closes the page and finds it all again on a fresh one. A bad metric regex is
// refused next to the metrics field and creates nothing; a running job is stopped from its
// page; a failed job says why; a rule finding shows while its job runs (jobs.ini); the web
// process is killed mid-job and the page's log goes on without a line lost or repeated.
// Real jobs in real job sandboxes: started by tests/e2e/run.sh like the others.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  ADMIN_PW, STATE_DIR, WIDE, PHONE, Browser, uniqueName, formLogin, apiLogin, api, createUser, waitFor,
  assertFits, assertLabelled,
} from './console-lib.mjs';

const JOB_TIMEOUT = 120_000; // a cold job sandbox on a busy 2-core machine
const T = { timeout: 300_000 };
const LOSS_CMD = "/bin/sh -c 'for i in 1 2 3 4 5; do echo step=$i loss=0.$((10-i)); sleep 0.3; done'";
const SLEEP_CMD = "/bin/sh -c 'echo going to sleep; exec sleep 60'";
const b = new Browser();
const USER = uniqueName('jobs');
let pw, session, dashboard;
const shared = { jobId: null };

before(async () => {
  await b.start();
  const admin = await apiLogin('admin', ADMIN_PW);
  pw = await createUser(admin, USER);
  session = await apiLogin(USER, pw);
  dashboard = await b.page(WIDE);
  await formLogin(dashboard, USER, pw);
});

after(async () => {
  // nothing of this file may outlive it: stop whatever job is still live
  if (session) {
    const r = await api(session, 'GET', '/jobs?limit=200').catch(() => null);
    for (const j of r?.body?.jobs ?? []) {
      if (j.status === 'InProgress') await api(session, 'POST', `/jobs/${j.id}/stop`, { grace_s: 0 }).catch(() => {});
    }
  }
  await b.stop();
});

async function jobsNamed(name) {
  const r = await api(session, 'GET', `/jobs?name=${encodeURIComponent(name)}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.jobs;
}

/* The pid of this daemon's web process: the labd process running as user labd whose
 * config lies beside STATE_DIR (tests/e2e/run.sh). */
function webProcessPid() {
  const ini = `${STATE_DIR.replace(/\/state$/, '')}/labd.ini`;
  let out = '';
  try {
    out = execFileSync('pgrep', ['-u', 'labd', '-f', `/labd --config ${ini}$`], { encoding: 'utf8' });
  } catch {
    return null; // none right now (restarting)
  }
  const pids = out.trim().split('\n').filter(Boolean).map(Number);
  assert.ok(pids.length <= 1, `one web process, not ${pids}`);
  return pids[0] ?? null;
}

async function jobFindings(id) {
  const r = await api(session, 'GET', `/jobs/${id}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.findings ?? [];
}

/* Fills the dashboard's submit form and sends it. */
async function submitForm(page, { name, command, metrics = '' }) {
  await page.getByLabel('Job name').fill(name);
  await page.getByLabel('Command', { exact: true }).fill(command);
  await page.getByLabel('Metrics (name=regex, one a line)').fill(metrics);
  await page.getByRole('button', { name: 'Submit job' }).click();
}

/* Submits from the form and returns the whole job (GET /jobs/{id}: the list holds
 * summaries, without the request fields), once the list shows it. */
async function submitAndFind(page, fields) {
  await submitForm(page, fields);
  const row = page.locator(`#jobs tbody tr[data-name="${fields.name}"]`);
  await row.waitFor();
  const [item] = await jobsNamed(fields.name);
  assert.ok(item, `job ${fields.name} is in the API's list`);
  assert.equal(await row.getAttribute('data-id'), String(item.id));
  const r = await api(session, 'GET', `/jobs/${item.id}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

/* The job page, checked as a person would read it after the job completed. */
async function assertCompletedPage(page, job) {
  await page.locator('#job-status[data-status="Completed"]').waitFor({ timeout: JOB_TIMEOUT });
  const log = page.getByRole('log');
  await log.filter({ hasText: 'step=5 loss=0.5' }).waitFor();
  const lines = (await log.textContent()).trim().split('\n');
  assert.deepEqual(lines, [1, 2, 3, 4, 5].map((i) => `step=${i} loss=0.${10 - i}`), 'the whole log, in order, once');

  const plot = page.locator('.metric-plot[data-metric="loss"]');
  await page.locator('.metric-plot[data-metric="loss"][data-points="5"]').waitFor();
  assert.equal(await plot.locator('canvas').count() > 0, true, 'uPlot drew a canvas');
  assert.match(await plot.getByRole('img').getAttribute('aria-label'), /loss over time: 5 points/);
  const values = await plot.locator('tbody td.num').allTextContents();
  assert.deepEqual(values.map(Number), [0.9, 0.8, 0.7, 0.6, 0.5], 'the plotted loss values');

  const fresh = (await api(session, 'GET', `/jobs/${job.id}`)).body;
  assert.equal(fresh.status, 'Completed');
  // the timeline lists every phase the API lists, in order, each ended
  const phases = await page.locator('#job-timeline li').evaluateAll((lis) => lis.map((li) => li.dataset.status));
  assert.deepEqual(phases, fresh.transitions.map((t) => t.status));
  for (const p of ['Starting', 'Downloading', 'Training', 'Uploading', 'Completed']) {
    assert.ok(phases.includes(p), `the timeline shows ${p}: ${phases}`);
  }
  assert.ok(fresh.billable_s >= 1, `billable seconds ${fresh.billable_s}`);
  // the one duration format of the UI: zero units left out ("1 min 5 s", "2 min", "7 s")
  const [m, sec] = [Math.floor(fresh.billable_s / 60) % 60, fresh.billable_s % 60];
  const billable = [m ? `${m} min` : '', sec ? `${sec} s` : ''].filter(Boolean).join(' ');
  assert.match(await page.locator('#job-billable').textContent(), new RegExp(`(^|\\s)${billable}$`));
  await page.locator('#final-metrics tbody tr[data-metric="loss"]').waitFor(); // final metrics table
  assert.equal(await page.getByRole('button', { name: 'Stop job' }).isVisible(), false);
  return fresh;
}

test('a job submitted from the dashboard: live log, loss plot, timeline, billable, notice', T, async () => {
  const name = uniqueName('loss-');
  const job = await submitAndFind(dashboard, { name, command: LOSS_CMD, metrics: 'loss=loss=([0-9.]+)' });
  shared.jobId = job.id;
  assert.deepEqual(job.command, ['/bin/sh', '-c', 'for i in 1 2 3 4 5; do echo step=$i loss=0.$((10-i)); sleep 0.3; done']);
  assert.deepEqual(job.metric_definitions, [{ name: 'loss', regex: 'loss=([0-9.]+)' }]);

  // the job page in a second tab (the link's address), while the dashboard stays open
  const href = await dashboard.locator(`#jobs tbody tr[data-name="${name}"] a`).getAttribute('href');
  assert.equal(href, `/jobs/${job.id}`);
  const jobPage = await dashboard.context().newPage();
  jobPage.on('pageerror', (e) => b.pageErrors.push(`${jobPage.url()}: ${e.message}`));
  jobPage.on('console', (m) => b.consoleLog.push({ type: m.type(), text: m.text(), url: jobPage.url() }));
  await jobPage.goto(href);
  await jobPage.locator('#job-name', { hasText: name }).waitFor();

  await assertCompletedPage(jobPage, job);

  // the dashboard's notice, and the list's status and billable time
  const toast = dashboard.locator(`#toasts .toast[data-job="${job.id}"]`, { hasText: 'ended: Completed' });
  await toast.waitFor({ timeout: 15_000 });
  assert.match(await toast.getByRole('link').getAttribute('href'), new RegExp(`/jobs/${job.id}$`));
  await dashboard.locator(`#jobs tbody tr[data-name="${name}"][data-status="Completed"]`).waitFor();
  await jobPage.close();
});

test('closed and opened again: the job page shows everything still', T, async () => {
  assert.ok(shared.jobId, 'the first test made a job');
  const page = await b.page(WIDE);
  await formLogin(page, USER, pw, `/jobs/${shared.jobId}`);
  const job = (await api(session, 'GET', `/jobs/${shared.jobId}`)).body;
  await assertCompletedPage(page, job);
  await page.locator('#log-state', { hasText: 'complete' }).waitFor();
  await assertLabelled(page);
  await page.setViewportSize(PHONE);
  await assertFits(page, ['#job-status', '#job-log', '.metric-plot']);
});

test('a bad metric regex is refused next to the metrics field, and no job is made', T, async () => {
  const name = uniqueName('badre-');
  await submitForm(dashboard, { name, command: 'echo hi', metrics: 'loss=loss=([0-9.]+' });
  const error = dashboard.locator('#job-metrics-error');
  await error.waitFor();
  assert.match(await error.textContent(), /^Line 1, regex: \S/);
  assert.equal(await dashboard.getByLabel('Metrics (name=regex, one a line)').getAttribute('aria-invalid'), 'true');
  assert.equal(await dashboard.locator('#job-name-error').isVisible(), false);
  assert.deepEqual(await jobsNamed(name), []);
  assert.equal(await dashboard.locator(`#jobs tbody tr[data-name="${name}"]`).count(), 0);

  // a command with an unclosed quote never leaves the browser
  await submitForm(dashboard, { name, command: "echo 'hi", metrics: '' });
  await dashboard.locator('#job-command-error', { hasText: 'unclosed' }).waitFor();
  assert.equal(await dashboard.locator('#job-metrics-error').isVisible(), false, 'the old error is cleared');
  assert.deepEqual(await jobsNamed(name), []);
  await assertLabelled(dashboard);
});

test('a running job stopped from its page ends Stopped', T, async () => {
  const name = uniqueName('sleep-');
  const job = await submitAndFind(dashboard, { name, command: SLEEP_CMD });
  const page = await dashboard.context().newPage();
  page.on('pageerror', (e) => b.pageErrors.push(`${page.url()}: ${e.message}`));
  page.on('dialog', (d) => d.accept());
  await page.goto(`/jobs/${job.id}`);
  // the line shows while the job still runs (it sleeps 60 s after it): the log is live
  await page.getByRole('log').filter({ hasText: 'going to sleep' }).waitFor({ timeout: JOB_TIMEOUT });
  await page.locator('#log-state', { hasText: 'live' }).waitFor();
  await page.locator('#job-status', { hasText: 'Training' }).waitFor();
  await page.getByRole('button', { name: 'Stop job' }).click();
  await page.locator('#job-status[data-status="Stopped"]').waitFor({ timeout: 60_000 });
  const phases = await page.locator('#job-timeline li').evaluateAll((lis) => lis.map((li) => li.dataset.status));
  assert.ok(phases.includes('Training') && phases.at(-1) === 'Stopped', `timeline ${phases}`);
  assert.equal(await page.getByRole('button', { name: 'Stop job' }).isVisible(), false);
  await dashboard.locator(`#toasts .toast[data-job="${job.id}"]`, { hasText: 'Stopped' }).waitFor({ timeout: 15_000 });
  await dashboard.locator(`#jobs tbody tr[data-name="${name}"][data-status="Stopped"]`).waitFor();
});

test('a failed job says why on its page, with its exit code', T, async () => {
  const name = uniqueName('fail-');
  const r = await api(session, 'POST', '/jobs', { name, command: ['/bin/sh', '-c', "echo 'about to fail <b>x</b>'; exit 3"] });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const page = await dashboard.context().newPage();
  page.on('pageerror', (e) => b.pageErrors.push(`${page.url()}: ${e.message}`));
  await page.goto(`/jobs/${r.body.id}`);
  await page.locator('#job-status[data-status="Failed"]').waitFor({ timeout: JOB_TIMEOUT });
  const job = (await api(session, 'GET', `/jobs/${r.body.id}`)).body;
  assert.equal(job.exit_code, 3);
  assert.ok(job.failure_reason, 'the API gives a reason');
  await page.getByRole('alert').filter({ hasText: job.failure_reason }).waitFor();
  assert.equal((await page.locator('#job-exit').textContent()).trim(), '3');
  await page.getByRole('log').filter({ hasText: 'about to fail' }).waitFor();
  // the summary shows the log's last lines, where the reason is, as text
  assert.ok((job.failure_tail || '').includes('about to fail <b>x</b>'), `failure_tail: ${job.failure_tail}`);
  await page.locator('#job-failure-tail-text', { hasText: 'about to fail <b>x</b>' }).waitFor();
  assert.equal(await page.locator('#job-failure-tail-text b').count(), 0, 'the tail is text, not markup');
  await dashboard.locator(`#toasts .toast[data-job="${job.id}"]`, { hasText: 'ended: Failed' }).waitFor({ timeout: 15_000 });
  await page.close();
});

const SNIPPET = '#!/usr/bin/env python3\nfor i in range(3):\n    print(f"step={i} loss={1 / (i + 1)}")\n';

test('a multi-line snippet pasted in the command field runs as a script', T, async () => {
  const name = uniqueName('script-');
  await dashboard.getByLabel('Job name').fill(name);
  // a paste of several lines: an <input> would make it one line; the form takes it as a script
  await dashboard.getByLabel('Command', { exact: true }).evaluate((el, text) => {
    const data = new DataTransfer();
    data.setData('text/plain', text);
    el.dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
  }, SNIPPET.replace(/\n/g, '\r\n'));
  assert.ok(await dashboard.getByLabel('A script').isChecked(), 'the form switched to Script');
  assert.equal(await dashboard.getByLabel('Command', { exact: true }).isVisible(), false);
  assert.equal(await dashboard.getByLabel('Script', { exact: true }).inputValue(), SNIPPET);
  await assertLabelled(dashboard);
  await dashboard.getByRole('button', { name: 'Submit job' }).click();
  const row = dashboard.locator(`#jobs tbody tr[data-name="${name}"]`);
  await row.waitFor();
  const [item] = await jobsNamed(name);
  assert.equal((await api(session, 'GET', `/jobs/${item.id}`)).body.script, SNIPPET);
  const page = await dashboard.context().newPage();
  page.on('pageerror', (e) => b.pageErrors.push(`${page.url()}: ${e.message}`));
  await page.goto(`/jobs/${item.id}`);
  await page.locator('#job-status[data-status="Completed"]').waitFor({ timeout: JOB_TIMEOUT });
  await page.getByRole('log').filter({ hasText: 'step=2 loss=0.333' }).waitFor();
  assert.equal(await page.locator('#job-script').textContent(), SNIPPET, 'the page shows the script');
  assert.equal(await page.locator('#job-command-row').isVisible(), false);
  await page.close();
  // back to a command for the tests after this one
  await dashboard.getByLabel('A command').check();
  await dashboard.getByLabel('Command', { exact: true }).waitFor();
});

test('a job kept warm leaves a pool that the dashboard releases', T, async () => {
  const name = uniqueName('warm-');
  await dashboard.getByLabel('Keep warm after (seconds)').fill('300');
  const job = await submitAndFind(dashboard, { name, command: 'true' });
  await dashboard.getByLabel('Keep warm after (seconds)').fill('0');
  assert.equal(job.keep_alive_s, 300);
  await waitFor(async () => (await api(session, 'GET', `/jobs/${job.id}`)).body.warm_pool?.status === 'Available',
    'the warm pool Available', JOB_TIMEOUT);
  const pool = (await api(session, 'GET', `/jobs/${job.id}`)).body.warm_pool;
  await dashboard.locator(`#jobs tbody tr[data-name="${name}"]`, { hasText: 'Available until' }).waitFor();
  // the earlier jobs' notices may sit over the button: dismiss them, as a person would
  const dismiss = dashboard.locator('#toasts').getByRole('button', { name: 'Dismiss' });
  while (await dismiss.count()) await dismiss.first().click();
  const release = dashboard.getByRole('button', { name: `Release warm pool ${pool.id}` });
  await release.click(); // the confirm() is accepted
  await waitFor(async () => (await api(session, 'GET', `/jobs/${job.id}`)).body.warm_pool?.status === 'Terminated',
    'the pool Terminated', 30_000);
  await release.waitFor({ state: 'hidden' });
  const after = (await api(session, 'GET', `/jobs/${job.id}`)).body.warm_pool;
  assert.match(after.reason, /released by the user/);
  const page = await dashboard.context().newPage();
  await page.goto(`/jobs/${job.id}`);
  await page.locator('#job-warm', { hasText: 'Terminated' }).waitFor();
  assert.match(await page.locator('#job-warm').textContent(), /released by the user/);
  assert.equal(await page.getByRole('button', { name: 'Release' }).isVisible(), false);
  await page.close();
});

test('a rule finding shows on the job page while the job runs, with its samples', T, async () => {
  // jobs.ini: SlowInitialization after 2 s without a log line or metric
  const name = uniqueName('quiet-');
  const job = await submitAndFind(dashboard, { name, command: "/bin/sh -c 'sleep 6; echo awake'" });
  const page = await dashboard.context().newPage();
  page.on('pageerror', (e) => b.pageErrors.push(`${page.url()}: ${e.message}`));
  await page.goto(`/jobs/${job.id}`);
  const finding = page.locator('#findings li[data-rule="SlowInitialization"]');
  await finding.waitFor({ timeout: JOB_TIMEOUT });
  assert.equal(await page.locator('#job-status').getAttribute('data-status'), 'InProgress', 'found while it runs');
  assert.equal(await page.getByRole('log').textContent(), '', 'nothing logged yet');
  const api = (await jobFindings(job.id)).find((f) => f.rule === 'SlowInitialization');
  assert.ok(api, 'the API has the finding');
  // the message's words (its seconds move on with each evaluation)
  const words = api.message.split(/\d/)[0].trim();
  assert.ok(words.length > 5 && (await finding.textContent()).includes(words), `${words} on the page`);
  await finding.getByText(/^The samples that triggered it \(\d+\)$/).click();
  assert.equal(await page.locator('#findings-empty').isVisible(), false);
  await page.locator('#job-status[data-status="Completed"]').waitFor({ timeout: JOB_TIMEOUT });
  await finding.waitFor(); // still there after the end
  await page.close();
});

test('the live log resumes after the web process restarts mid-job: no line lost or shown twice', T, async () => {
  // labd-web is the daemon's child running as user labd; killing it drops every stream
  // (the daemon starts a new one within a second, and the job goes on in its sandbox)
  const name = uniqueName('count-');
  const cmd = "/bin/sh -c 'i=0; while [ $i -lt 30 ]; do i=$((i+1)); echo line=$i; sleep 0.2; done'";
  const job = await submitAndFind(dashboard, { name, command: cmd });
  const page = await dashboard.context().newPage();
  page.on('pageerror', (e) => b.pageErrors.push(`${page.url()}: ${e.message}`));
  await page.goto(`/jobs/${job.id}`);
  // every state the log's label goes through, as the page shows it
  await page.locator('#log-state').evaluate((el) => {
    window.logStates = [el.textContent];
    new MutationObserver(() => window.logStates.push(el.textContent)).observe(el, { childList: true, characterData: true, subtree: true });
  });
  await page.getByRole('log').filter({ hasText: 'line=3' }).waitFor({ timeout: JOB_TIMEOUT });
  const web = webProcessPid();
  process.kill(web, 'SIGKILL');
  await waitFor(() => webProcessPid() !== web, 'a new web process', 20_000);
  await page.locator('#job-status[data-status="Completed"]').waitFor({ timeout: JOB_TIMEOUT });
  await page.locator('#log-state', { hasText: 'complete' }).waitFor();
  const lines = (await page.getByRole('log').textContent()).trim().split('\n');
  assert.deepEqual(lines, Array.from({ length: 30 }, (_, i) => `line=${i + 1}`));
  const states = await page.evaluate(() => window.logStates);
  assert.ok(states.includes('(reconnecting…)'), `the stream really dropped: ${states}`);
  await page.close();
});

test('no CSP violation or script error in any of these pages', T, async () => {
  assert.deepEqual(b.cspMessages(), [], 'CSP violations in the console');
  assert.deepEqual(b.pageErrors, [], 'uncaught errors in pages');
});
