// labd browser test of preemptible jobs (docs/jobs.md "Preemptible capacity"): a
// preemptible GPU job holds the one stand-in GPU (jobs_preempt.ini); another user's
// on-demand GPU job preempts it; the job page shows the job as preemptible, the
// interruption (when, the reason Preempted, what was waiting) and, once the on-demand
// job is done, when it resumed. Real jobs in real job sandboxes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  ADMIN_PW, WIDE, PHONE, Browser, uniqueName, formLogin, apiLogin, api, createUser, waitFor,
  assertFits, assertLabelled,
} from './console-lib.mjs';

const JOB_TIMEOUT = 120_000;
const T = { timeout: 300_000 };
const b = new Browser();
const A = uniqueName('spot');
const B = uniqueName('odem');
let pwA, sa, sb;

before(async () => {
  await b.start();
  const admin = await apiLogin('admin', ADMIN_PW);
  pwA = await createUser(admin, A);
  const pwB = await createUser(admin, B);
  sa = await apiLogin(A, pwA);
  sb = await apiLogin(B, pwB);
});

after(async () => {
  for (const s of [sa, sb]) {
    const r = await api(s, 'GET', '/jobs?limit=50').catch(() => null);
    for (const j of r?.body?.jobs ?? []) {
      if (j.status === 'InProgress') await api(s, 'POST', `/jobs/${j.id}/stop`, { grace_s: 1 }).catch(() => {});
    }
  }
  await b.stop();
});

async function job(s, id) {
  const r = await api(s, 'GET', `/jobs/${id}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

async function submit(s, body) {
  const r = await api(s, 'POST', '/jobs', { name: uniqueName('p-'), type: 'gpu', ...body });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

test('the job page shows a preemptible job, its interruption and its resumption', T, async () => {
  const spot = await submit(sa, { command: ['/bin/sh', '-c', 'echo counting; exec sleep 120'], capacity: 'preemptible' });
  await waitFor(async () => (await job(sa, spot.id)).secondary_status === 'Training', 'the preemptible job trains', JOB_TIMEOUT);

  const page = await b.page(WIDE);
  await formLogin(page, A, pwA, `/jobs/${spot.id}`);
  await page.locator('#interruptions-card').waitFor();
  assert.match(await page.locator('#job-capacity').textContent(), /^Preemptible/);
  await page.locator('#job-interruptions tbody td.empty', { hasText: 'Not interrupted.' }).waitFor();

  const od = await submit(sb, { command: ['/bin/sh', '-c', 'echo on-demand; sleep 6'] });
  const preempted = await waitFor(async () => {
    const j = await job(sa, spot.id);
    return j.status_reason === 'Preempted' && j;
  }, 'the preemption', JOB_TIMEOUT);

  // the page follows the job's status stream: the interruption appears without a reload
  const rowSel = '#job-interruptions tbody tr[data-reason="Preempted"]';
  await page.locator(rowSel).waitFor({ timeout: JOB_TIMEOUT });
  // the row comes with the stop begun ("stopping…"), then the job is back in the queue
  await page.locator(`${rowSel} td:nth-child(4)`).filter({ hasNotText: 'stopping…' }).waitFor({ timeout: JOB_TIMEOUT });
  const cells = await page.locator(`${rowSel} td`).allTextContents();
  const x = preempted.interruptions[0];
  assert.equal(cells[1], 'Preempted');
  assert.equal(cells[2], x.waiting);
  assert.match(cells[2], new RegExp(`on-demand job ${od.id} of ${B}`));
  assert.ok(cells[0] && cells[0] !== '—', `the interruption's time: ${cells}`);
  assert.ok(cells[3] && cells[3] !== 'stopping…', `back in the queue: ${cells}`);
  assert.match(await page.locator('#job-capacity').textContent(), /Preempted: back in the queue/);
  await page.locator('#job-status', { hasText: 'In progress · Pending (Preempted)' }).waitFor();
  // the timeline says it too
  await page.locator('#job-timeline li[data-status="Pending"]', { hasText: 'Preempted:' }).waitFor();

  // the on-demand job ends; the preemptible one resumes and the row says when
  await waitFor(async () => (await job(sb, od.id)).status === 'Completed', 'the on-demand job', JOB_TIMEOUT);
  await waitFor(async () => (await job(sa, spot.id)).interruptions[0].resumed_at, 'the resumption', JOB_TIMEOUT);
  await page.locator(`${rowSel} td:nth-child(5)`).filter({ hasNotText: '—' }).waitFor({ timeout: JOB_TIMEOUT });
  await assertLabelled(page);

  const phone = await b.page(PHONE);
  await formLogin(phone, A, pwA, `/jobs/${spot.id}`);
  await phone.locator(rowSel).waitFor();
  await assertFits(phone, ['#interruptions-card h2']);
  assert.deepEqual(b.pageErrors, []);
  assert.deepEqual(b.cspMessages(), []);
});
