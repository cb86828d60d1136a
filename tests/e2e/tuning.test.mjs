// labd browser test of tuning jobs: a user's tuning job (random search over a small real
// training, tests/integration/jobs_scripts/tune_ridge.py) runs its trials as jobs; the
// dashboard's jobs list links to its page, which shows every trial with its parameters,
// objective, status and time, the best trial (the lowest objective, marked in the table),
// the objective over time and against each parameter, and no Stop button once it ended.
// A running tuning job is stopped from its page. Real jobs in real job sandboxes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  ADMIN_PW, WIDE, PHONE, Browser, uniqueName, formLogin, apiLogin, api, createUser, waitFor,
  assertFits, assertLabelled,
} from './console-lib.mjs';

const TIMEOUT = 180_000; // cold job sandboxes on a busy 2-core machine
const T = { timeout: 300_000 };
const SCRIPT = readFileSync(fileURLToPath(new URL('../integration/jobs_scripts/tune_ridge.py', import.meta.url)), 'utf8');
const b = new Browser();
const USER = uniqueName('tune');
let pw, session, dashboard;

function request(name, fields = {}) {
  return {
    name,
    job: {
      script: SCRIPT,
      metric_definitions: [{ name: 'val_loss', regex: 'val_loss=([0-9.e+-]+)' }],
      keep_alive_s: 0, // no warm pool outlives the file (the daemon keeps sandboxes on shutdown)
      hyperparameters: fields.hyperparameters ?? {},
    },
    parameter_ranges: [
      { name: 'lr', type: 'continuous', min: 0.001, max: 1, scaling: 'log' },
      { name: 'reg', type: 'continuous', min: 0, max: 2 },
    ],
    objective: { metric: 'val_loss', type: 'minimize' },
    strategy: 'random',
    max_trials: fields.max_trials ?? 4,
    max_parallel: 2,
    seed: 7,
  };
}

before(async () => {
  await b.start();
  const admin = await apiLogin('admin', ADMIN_PW);
  pw = await createUser(admin, USER);
  session = await apiLogin(USER, pw);
  dashboard = await b.page(WIDE);
  await formLogin(dashboard, USER, pw);
});

after(async () => {
  // nothing of this file may outlive it: stop what is live and wait for its trials to end
  if (session) {
    const r = await api(session, 'GET', '/tuning-jobs').catch(() => null);
    for (const t of r?.body?.tuning_jobs ?? []) {
      if (t.status === 'InProgress') await api(session, 'POST', `/tuning-jobs/${t.id}/stop`).catch(() => {});
    }
    await waitFor(async () => {
      const l = await api(session, 'GET', '/tuning-jobs').catch(() => null);
      return (l?.body?.tuning_jobs ?? []).every((t) => !['InProgress', 'Stopping'].includes(t.status));
    }, 'the tuning jobs to end', 60_000).catch(() => {});
  }
  await b.stop();
});

async function tuning(id) {
  const r = await api(session, 'GET', `/tuning-jobs/${id}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

test('the tuning page: trials, the best trial, objective plots; linked from the jobs list', T, async () => {
  const r = await api(session, 'POST', '/tuning-jobs', request(uniqueName('rs-')));
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const done = await waitFor(async () => {
    const t = await tuning(r.body.id);
    return t.status === 'Completed' ? t : null;
  }, 'the tuning job to complete', TIMEOUT);
  assert.equal(done.trials.length, 4);

  await dashboard.reload();
  const link = dashboard.locator(`#tuning-jobs a[href="/tuning/${done.id}"]`);
  await link.waitFor();
  await link.click();
  await dashboard.waitForURL(`**/tuning/${done.id}`);
  const page = dashboard;
  await page.locator('#tuning-status', { hasText: 'Completed' }).waitFor();
  assert.equal(await page.locator('#tuning-name').textContent(), done.name);

  // the trials table: one row per trial, its parameters and objective as the API says
  const rows = page.locator('#trials tbody tr[data-index]');
  await waitFor(async () => (await rows.count()) === 4, 'four trial rows');
  const head = await page.locator('#trials thead th').allTextContents();
  assert.deepEqual(head, ['#', 'Job', 'lr', 'reg', 'Status', 'Objective', 'Started', 'Time']);
  for (const tr of done.trials) {
    const row = page.locator(`#trials tbody tr[data-index="${tr.index}"]`);
    const cells = await row.locator('td').allTextContents();
    assert.equal(cells[1], tr.job_name);
    assert.ok(Math.abs(Number(cells[2]) - tr.parameters.lr) < 1e-5, `lr ${cells[2]} vs ${tr.parameters.lr}`);
    assert.equal(cells[4], 'Completed');
    assert.ok(Math.abs(Number(cells[5]) - tr.objective) < 1e-5, `objective ${cells[5]} vs ${tr.objective}`);
    assert.equal(await row.locator('a').getAttribute('href'), `/jobs/${tr.job_id}`);
  }
  // the best trial: the lowest objective, said above and starred in the table
  const best = done.trials.reduce((a, t) => (t.objective < a.objective ? t : a));
  assert.equal(done.best_trial.index, best.index);
  assert.equal(await page.locator('#best-trial').getAttribute('data-index'), String(best.index));
  assert.match(await page.locator('#best-trial').textContent(), new RegExp(`Trial #${best.index}: val_loss`));
  assert.match(await page.locator(`#trials tbody tr[data-index="${best.index}"] td`).first().textContent(), /★/);

  // objective over time and against each parameter, every trial a point
  await page.locator('#objective-time[data-points="4"]').waitFor();
  for (const p of ['lr', 'reg']) {
    const plot = page.locator(`#objective-params .metric-plot[data-param="${p}"][data-points="4"]`);
    await plot.waitFor();
    assert.ok((await plot.locator('canvas').count()) > 0, `uPlot drew the ${p} plot`);
    assert.match(await plot.getByRole('img').getAttribute('aria-label'), /val_loss against .*: 4 points/);
  }
  assert.equal(await page.getByRole('button', { name: 'Stop tuning job' }).isVisible(), false);
  await assertLabelled(page);
  await assertFits(page, ['#trials-card', '#best-card']);

  const phone = await b.page(PHONE);
  await formLogin(phone, USER, pw, `/tuning/${done.id}`);
  await phone.locator('#tuning-status', { hasText: 'Completed' }).waitFor();
  await assertFits(phone, ['#best-card', '#tuning-summary']);
  await phone.close();
});

test('a running tuning job is stopped from its page', T, async () => {
  const r = await api(session, 'POST', '/tuning-jobs',
    request(uniqueName('st-'), { max_trials: 6, hyperparameters: { pause: '2' } }));
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const id = r.body.id;
  await waitFor(async () => (await tuning(id)).trials.some((t) => t.status === 'InProgress'), 'a trial running', TIMEOUT);
  await dashboard.goto(`/tuning/${id}`);
  await dashboard.getByRole('button', { name: 'Stop tuning job' }).click();
  await dashboard.locator('#tuning-status', { hasText: 'Stopped' }).waitFor({ timeout: TIMEOUT });
  assert.equal(await dashboard.locator('#page-error').isVisible(), false, 'no error on the page');
  const t = await tuning(id);
  assert.equal(t.status, 'Stopped');
  assert.ok(t.trials.every((tr) => tr.status === 'Stopped'), JSON.stringify(t.trials.map((tr) => tr.status)));
});
