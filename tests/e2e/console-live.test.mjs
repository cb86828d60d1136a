// The console and dashboard against the live parts of issue 9 that other branches build:
// the GPU pool and fair queue (GET /api/v1/gpus, the runtime's "queue"), the admin runtimes
// API (GET /api/v1/runtimes, DELETE /api/v1/runtimes/{id}) and storage in the user quota.
// With one stand-in GPU (console-live.ini): alice holds it, bob queues and sees position 1
// on his dashboard, the admin sees pool and queue, bob leaves the queue, the admin stops
// alice's runtime from the console with a reason (audit log), and both pages show storage
// used against the quota with numbers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  ADMIN_PW, WIDE, Browser, uniqueName, formLogin, apiLogin, api, createUser, waitFor,
} from './console-lib.mjs';

const START_TIMEOUT = 120_000;
const T = { timeout: 300_000 };
const b = new Browser();
const ALICE = uniqueName('alice');
const BOB = uniqueName('bob');
let admin, alice, bob, alicePw, bobPw, adminPage, bobPage;

before(async () => {
  await b.start();
  admin = await apiLogin('admin', ADMIN_PW);
  alicePw = await createUser(admin, ALICE);
  bobPw = await createUser(admin, BOB);
  alice = await apiLogin(ALICE, alicePw);
  bob = await apiLogin(BOB, bobPw);
});

after(async () => {
  for (const s of [alice, bob]) if (s) await api(s, 'DELETE', '/me/runtime').catch(() => {});
  await b.stop();
});

async function runtimeOf(session) {
  return (await api(session, 'GET', '/me/runtime')).body?.runtime ?? null;
}

test('alice holds the GPU; bob queues and his dashboard shows position 1', T, async () => {
  const r = await api(alice, 'POST', '/me/runtime', { type: 'gpu' });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  await waitFor(async () => (await runtimeOf(alice))?.state === 'running', 'alice running', START_TIMEOUT);

  bobPage = await b.page(WIDE);
  await formLogin(bobPage, BOB, bobPw);
  await bobPage.locator('#start-gpu:not([disabled])').click();
  await bobPage.locator('#runtime-state', { hasText: 'queued' }).waitFor();
  await bobPage.locator('#runtime-queue-position', { hasText: 'Position 1 in the GPU queue' }).waitFor();
  assert.match(await bobPage.locator('#runtime-queue-detail').textContent(), /waiting since/);
  assert.equal(await bobPage.locator('#stop-runtime').textContent(), 'Leave the queue');
  const mine = await runtimeOf(bob);
  assert.equal(mine.state, 'queued');
  assert.equal(mine.queue.position, 1);
});

test('the console shows the GPU held by alice, bob in the queue, and both runtimes', T, async () => {
  adminPage = await b.page(WIDE);
  await formLogin(adminPage, 'admin', ADMIN_PW, '/admin');
  const gpu = adminPage.locator('#gpus tbody tr[data-id="0"]');
  await gpu.filter({ hasText: 'busy' }).waitFor();
  assert.match(await gpu.locator('.holder').textContent(), new RegExp(ALICE));
  const q = adminPage.locator('#gpu-queue tbody tr[data-position="1"]');
  await q.filter({ hasText: BOB }).waitFor();
  assert.equal((await q.locator('.kind').textContent()).trim(), 'whole'); // the queue's kind of device
  assert.match(await adminPage.locator('#queue-length').textContent(), /1 waiting/);
  await adminPage.locator(`#runtimes tbody tr[data-user="${ALICE}"]`, { hasText: 'running' }).waitFor();
  await adminPage.locator(`#runtimes tbody tr[data-user="${BOB}"]`, { hasText: 'queued (position 1)' }).waitFor();
});

test('bob leaves the queue from his dashboard', T, async () => {
  await bobPage.locator('#stop-runtime').click();
  await bobPage.locator('#runtime-state', { hasText: 'stopped' }).waitFor();
  await bobPage.locator('#runtime-reason', { hasText: 'cancelled while queued' }).waitFor();
  assert.equal(await bobPage.locator('#runtime-queue-row').isVisible(), false);
});

test('the admin stops alice\'s runtime from the console, with a reason in the audit log', T, async () => {
  const page = adminPage;
  await page.locator('#runtimes-refresh').click();
  const row = page.locator(`#runtimes tbody tr[data-user="${ALICE}"]`);
  await row.waitFor();
  await page.locator('#stop-reason').fill('course session over');
  await row.getByRole('button', { name: `Stop the runtime of ${ALICE}` }).click();
  await page.locator('#runtimes-message', { hasText: `The runtime of ${ALICE} is stopping.` }).waitFor();
  await waitFor(async () => ['stopped', 'failed'].includes((await runtimeOf(alice))?.state), 'alice stopped', 60_000);
  assert.match((await runtimeOf(alice)).reason, /admin/i);
  await page.locator('#runtimes-refresh').click();
  await row.waitFor({ state: 'detached' });

  await page.locator('#audit-action').fill('runtime.stop');
  await page.locator('#audit-actor').fill('admin');
  await page.locator('#audit-apply').click();
  await page.locator('#audit tbody tr[data-action="runtime.stop"]', { hasText: 'course session over' }).first().waitFor();
});

test('storage used against the quota, with numbers, on the dashboard and in the console', T, async () => {
  // alice's runtime was just stopped: her home may still be on its way out of the
  // sandbox, so ask as a person would look again
  let q;
  await waitFor(async () => {
    q = (await api(admin, 'GET', `/users/${ALICE}/quota`)).body;
    return typeof q.storage.used_bytes === 'number';
  }, "a number for alice's storage", 30_000);
  assert.equal(typeof q.storage.quota_bytes, 'number', JSON.stringify(q.storage));

  const page = await b.page(WIDE);
  await formLogin(page, ALICE, alicePw);
  await page.locator('#storage-text', { hasText: /used of \d/ }).waitFor();
  assert.equal(await page.locator('#storage-used').isVisible(), true, 'the storage bar shows');
  const max = Number(await page.locator('#storage-used').evaluate((p) => p.max));
  assert.equal(max, q.storage.quota_bytes);

  await adminPage.reload();
  const row = adminPage.locator(`#storage tbody tr[data-user="${ALICE}"]`);
  await row.locator('progress').waitFor();
  assert.notEqual((await row.locator('.used').textContent()).trim(), '—');
});

test('no CSP violation or script error in any of these pages', T, async () => {
  assert.deepEqual(b.cspMessages(), [], 'CSP violations in the console');
  assert.deepEqual(b.pageErrors, [], 'uncaught errors in pages');
});
