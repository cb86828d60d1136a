// labd browser test of a job with several GPUs (jobs_gpus.ini: two stand-in GPUs, a plan
// allowing two a job): the job page names the host GPUs the job's pool binds while it
// runs, "GPU × 2 (GPUs 0, 1)", and the job's own SM_NUM_GPUS says the same count.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_PW, WIDE, Browser, uniqueName, formLogin, apiLogin, api, createUser } from './console-lib.mjs';

const JOB_TIMEOUT = 120_000; // a cold job sandbox on a busy 2-core machine
const T = { timeout: 300_000 };
const b = new Browser();
const USER = uniqueName('gpus');
let pw, session, page;

before(async () => {
  await b.start();
  const admin = await apiLogin('admin', ADMIN_PW);
  pw = await createUser(admin, USER);
  session = await apiLogin(USER, pw);
  page = await b.page(WIDE);
  await formLogin(page, USER, pw);
});

after(async () => {
  const r = await api(session, 'GET', '/jobs?limit=50').catch(() => null);
  for (const j of r?.body?.jobs ?? []) {
    if (j.status === 'InProgress') await api(session, 'POST', `/jobs/${j.id}/stop`, { grace_s: 1 }).catch(() => {});
  }
  await b.stop();
});

test('the job page shows the GPUs a 2-GPU job binds', T, async () => {
  const r = await api(session, 'POST', '/jobs', {
    name: uniqueName('two-'), type: 'gpu', gpu_count: 2,
    command: ['/bin/sh', '-c', 'echo gpus=$SM_NUM_GPUS; exec sleep 60'],
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await page.goto(`/jobs/${r.body.id}`);
  await page.getByRole('log').filter({ hasText: 'gpus=2' }).waitFor({ timeout: JOB_TIMEOUT });
  await page.locator('#job-type', { hasText: 'GPU × 2 (GPUs 0, 1)' }).waitFor();
  const job = await api(session, 'GET', `/jobs/${r.body.id}`);
  assert.deepEqual(job.body.gpus, [0, 1], JSON.stringify(job.body));
  await page.getByRole('button', { name: 'Stop job' }).click();
  await page.locator('#job-status[data-status="Stopped"]').waitFor({ timeout: 60_000 });
  // an ended job still names the GPUs it held
  await page.locator('#job-type', { hasText: 'GPU × 2 (GPUs 0, 1)' }).waitFor();
});
