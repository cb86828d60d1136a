// labd browser test of a job's shell (docs/jobs.md, "A shell into a running job"): on the
// page of a job that trains, the Shell button opens a terminal (xterm.js) in the job's own
// sandbox; a command typed there runs as the user beside the job's command, and its output
// shows in the terminal. Stopping the job closes the shell. A real job in a real sandbox.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_PW, STATE_DIR, WIDE, Browser, uniqueName, formLogin, apiLogin, api, createUser, waitFor } from './console-lib.mjs';

const JOB_TIMEOUT = 120_000; // a cold job sandbox on a busy 2-core machine
const T = { timeout: 300_000 };
const b = new Browser();
const USER = uniqueName('jshell');
let session, page;
let jobId = null; // stopped by after() whatever happened, so no pool outlives the daemon

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
  if (jobId === null) return;
  await api(session, 'POST', `/jobs/${jobId}/stop`, {});
  const job = await waitFor(async () => {
    const j = (await api(session, 'GET', `/jobs/${jobId}`)).body;
    return j.status !== 'InProgress' && j;
  }, 'the job ended', JOB_TIMEOUT);
  // root removes the pool's folder last in its teardown
  if (STATE_DIR && job.warm_pool)
    await waitFor(async () => !existsSync(join(STATE_DIR, 'pools', String(job.warm_pool.id))),
      'its pool torn down', 30_000);
});

test('the Shell button opens a terminal in the job that runs a typed command', T, async () => {
  const r = await api(session, 'POST', '/jobs', {
    name: uniqueName('shell-'),
    command: ['/bin/sh', '-c', 'exec sleep 600'],
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const id = r.body.id;
  jobId = id;
  await waitFor(async () => {
    const j = (await api(session, 'GET', `/jobs/${id}`)).body;
    return j.secondary_status === 'Training' && j;
  }, 'the job training', JOB_TIMEOUT);

  await page.goto(`/jobs/${id}`);
  const button = page.locator('#job-shell-open');
  await button.waitFor({ state: 'visible' });
  await button.click();
  await page.locator('#job-shell-close').waitFor({ state: 'visible' });
  const rows = page.locator('#job-shell-term .xterm-rows');
  await rows.waitFor();
  await page.locator('#job-shell-term').click();
  await page.keyboard.type('echo "uid=$(id -u) $((6*7))"; ps -e -o args= | grep -c "sleep 60[0]"\n');
  await waitFor(async () => /uid=1000 42/.test(await rows.textContent()),
    'the command\'s output in the terminal', 20_000);
  // legible under labd's Content-Security-Policy, which refuses xterm.js's own <style>
  // elements (job-shell.css): light monospace text on a dark terminal
  const look = await rows.evaluate((e) => {
    const cs = getComputedStyle(e);
    return [cs.color, cs.fontFamily];
  });
  assert.equal(look[0], 'rgb(230, 230, 230)');
  assert.match(look[1], /mono/i);
  // the rows' text has no line breaks: the echo's line, then grep's count of the job's sleep
  assert.match(await rows.textContent(), /uid=1000 42\s*1(?!\d)/);

  await api(session, 'POST', `/jobs/${id}/stop`, {});
  await waitFor(async () => /closed/.test(await page.locator('#job-shell-state').textContent()),
    'the shell closed as the job ended', 30_000);
  assert.deepEqual(b.pageErrors, []);
});
