// labd browser test of notifications: a user adds a webhook on the dashboard (the secret
// is shown once), a job of theirs ends, and the delivery log on the dashboard shows the
// receiver's 500, the retry and its 200; a URL on the host's loopback is refused next to
// the form and creates nothing. The receiver is a test host in a network namespace with an
// address of 198.18.0.0/15 (as tests/integration/testnet.py makes them); nothing else is
// ever addressed.
// e2e: alone (its test host's veth pair changes the machine's interfaces: tests/e2e/run.sh)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { ADMIN_PW, WIDE, Browser, uniqueName, formLogin, apiLogin, api, createUser, waitFor } from './console-lib.mjs';

const T = { timeout: 180_000 };
const TAG = `lwh${process.pid % 100000}`;
const THIRD = (process.pid % 200) + 20;
const HOST_ADDR = `198.18.${THIRD}.1`;
const ADDR = `198.18.${THIRD}.2`;
const PORT = 8080;
// 500 to the first request of each path, 200 after
const RECEIVER = `
import http.server
seen = {}
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        seen[self.path] = seen.get(self.path, 0) + 1
        self.send_response(500 if seen[self.path] == 1 else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", ${PORT}), H).serve_forever()
`;
const b = new Browser();
const USER = uniqueName('hook');
let session, page, receiver;

const ip = (...args) => execFileSync('ip', args, { stdio: 'pipe' });

function netDown() {
  if (receiver) receiver.kill();
  try { ip('link', 'del', `${TAG}h`); } catch { /* not there */ }
  try { ip('netns', 'del', TAG); } catch { /* not there */ }
}

before(async () => {
  netDown();
  ip('netns', 'add', TAG);
  ip('link', 'add', `${TAG}h`, 'type', 'veth', 'peer', 'name', `${TAG}n`);
  ip('link', 'set', `${TAG}n`, 'netns', TAG);
  ip('addr', 'add', `${HOST_ADDR}/24`, 'dev', `${TAG}h`);
  ip('link', 'set', `${TAG}h`, 'up');
  ip('-n', TAG, 'addr', 'add', `${ADDR}/24`, 'dev', `${TAG}n`);
  ip('-n', TAG, 'link', 'set', `${TAG}n`, 'up');
  ip('-n', TAG, 'link', 'set', 'lo', 'up');
  receiver = spawn('ip', ['netns', 'exec', TAG, 'python3', '-c', RECEIVER], { stdio: 'ignore' });
  await waitFor(() => {
    try {
      execFileSync('ip', ['netns', 'exec', TAG, 'python3', '-c',
        `import socket; socket.create_connection(("${ADDR}", ${PORT}), 1)`], { stdio: 'pipe' });
      return true;
    } catch {
      return false;
    }
  }, 'the receiver to listen', 15_000);
  await b.start();
  const admin = await apiLogin('admin', ADMIN_PW);
  const pw = await createUser(admin, USER);
  session = await apiLogin(USER, pw);
  page = await b.page(WIDE);
  await formLogin(page, USER, pw);
});

after(async () => {
  await b.stop();
  netDown();
});

test('a webhook added on the dashboard shows its secret once and its delivery log', T, async () => {
  const card = page.locator('#webhooks-card');
  // the host's own loopback is refused, naming the field, and nothing is made
  await card.getByLabel('URL').fill(`http://127.0.0.1:${PORT}/hook`);
  await card.getByRole('button', { name: 'Add webhook' }).click();
  await waitFor(async () => /url/.test(await page.locator('#webhook-error').textContent() || ''),
    'the refusal of a loopback URL');
  assert.equal(await page.locator('#new-webhook-box').isHidden(), true);
  assert.equal((await api(session, 'GET', '/webhooks')).body.webhooks.length, 0);

  await card.getByLabel('URL').fill(`http://${ADDR}:${PORT}/flaky`);
  await card.getByRole('button', { name: 'Add webhook' }).click();
  await page.locator('#new-webhook-box').waitFor({ state: 'visible' });
  const secret = await page.locator('#new-webhook-secret').textContent();
  assert.match(secret, /^whsec_[A-Za-z0-9_-]{43}$/);
  await page.locator('#webhooks tbody tr', { hasText: `${ADDR}:${PORT}/flaky` }).waitFor();
  assert.equal(await page.locator('#webhook-error').isHidden(), true);

  const r = await api(session, 'POST', '/jobs', { name: uniqueName('hj'), command: ['/bin/true'] });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await page.getByRole('button', { name: `Delivery log of http://${ADDR}:${PORT}/flaky` }).click();
  const log = page.locator('#webhook-log tbody');
  // the retry's row (attempt 2, 200) above the first attempt's (500), both job.ended, delivered
  await waitFor(async () => (await log.locator('tr').count()) === 2 &&
    /delivered/.test(await log.locator('tr').nth(0).textContent()), 'a delivered retry in the log', 90_000);
  const cells = async (n) => (await log.locator('tr').nth(n).locator('td').allTextContents()).map((s) => s.trim());
  const second = await cells(0);
  const first = await cells(1);
  assert.deepEqual([second[0], second[2], second[4], second[5]], ['job.ended', '2', '200', '']);
  assert.deepEqual([first[0], first[2], first[4], first[5]], ['job.ended', '1', '500', 'answered 500']);
});
