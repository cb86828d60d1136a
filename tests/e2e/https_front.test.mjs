// labd behind the shipped nginx front (deploy/nginx/labd.conf, started by
// tests/integration/https_front.py with a CA the test makes): Chromium, trusting that
// CA and resolving lab.test and *.users.test to 127.0.0.1, logs in over HTTPS and
// HTTP/2, gets __Host- cookies marked Secure and an HSTS header, starts a runtime and
// runs a cell in JupyterLab on its user origin https://admin.users.test:<port>, whose
// kernel WebSocket goes through nginx too.
//
// Started by tests/e2e/run.sh with a labd of its own (https_front.ini). Whatever
// happens, the runtime is stopped at the end (after hook).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, chmodSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { launchChromium } from './browser.mjs';
import {
  BASE, ADMIN_PW, USER, KERNEL_TIMEOUT, STOP_TIMEOUT,
  step as runStep, formLogin, startFromDashboard, openLabTab, launcherCard, notebookPanel,
  runFirstCell, sleep,
} from './lab-lib.mjs';

const step = (name, page, fn) => runStep('https_front', name, page, fn);
const FRONT = fileURLToPath(new URL('../integration/https_front.py', import.meta.url));

let dir;
let front; // the nginx front (https_front.py), stopped by closing its stdin
let info; // its ports, CA and names
let browser;
let context;
const sockets = [];

/* nginx before this file's labd: resolves with https_front.py's JSON line. */
function startFront() {
  front = spawn('python3', [FRONT, dir, new URL(BASE).port], { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    createInterface({ input: front.stdout }).once('line', (l) => resolve(JSON.parse(l)));
    front.once('exit', (code) => reject(new Error(`https_front.py exited with ${code}`)));
  });
}

/* A Chromium profile home whose NSS database trusts the test CA, as an admin's
 * `certutil -A` would: Chromium on Linux reads ~/.pki/nssdb. */
function trustingHome(ca) {
  const home = `${dir}/home`;
  const db = `sql:${home}/.pki/nssdb`;
  mkdirSync(`${home}/.pki/nssdb`, { recursive: true });
  execFileSync('certutil', ['-N', '-d', db, '--empty-password']);
  execFileSync('certutil', ['-A', '-d', db, '-t', 'C,,', '-n', 'labd test CA', '-i', ca]);
  return home;
}

/* Stops the admin's runtime straight through labd (its own address, as root may). */
async function stopRuntime() {
  const res = await fetch(`${BASE}/api/v1/login`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: USER, password: ADMIN_PW }),
  });
  const body = await res.json();
  const cookie = res.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const call = (method) => fetch(`${BASE}/api/v1/me/runtime`, {
    method, headers: { Cookie: cookie, 'X-CSRF-Token': body.csrf_token },
  }).then((r) => r.json());
  let cur = (await call('GET')).runtime;
  if (cur && ['starting', 'running'].includes(cur.state)) await call('DELETE');
  const deadline = Date.now() + STOP_TIMEOUT;
  while (cur && ['starting', 'running', 'stopping'].includes(cur.state) && Date.now() < deadline) {
    await sleep(1000);
    cur = (await call('GET')).runtime;
  }
}

before(async () => {
  dir = mkdtempSync('/tmp/labd-e2e-https-');
  chmodSync(dir, 0o755);
  info = await startFront();
  const home = trustingHome(info.ca);
  browser = await launchChromium({
    args: [`--host-resolver-rules=MAP ${info.lab_host} 127.0.0.1, MAP *.${info.user_domain} 127.0.0.1`],
    env: { ...process.env, HOME: home },
  });
  context = await browser.newContext({
    baseURL: `https://${info.lab_host}:${info.https_port}`,
    viewport: { width: 1280, height: 900 },
  });
  context.setDefaultTimeout(30_000);
  context.setDefaultNavigationTimeout(60_000);
  context.on('page', (p) => p.on('websocket', (ws) => sockets.push(ws.url())));
});

after(async () => {
  try {
    await stopRuntime();
  } catch (err) {
    console.error(`# cleanup: could not stop the runtime: ${err.message}`);
  }
  if (context) await context.close().catch(() => {});
  if (browser) await browser.close().catch(() => {});
  if (front) {
    front.stdin.end();
    await new Promise((r) => (front.exitCode !== null ? r() : front.once('exit', r)));
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/* The protocol the page's own document came over ('h2' for HTTP/2). */
const protocolOf = (page) =>
  page.evaluate(() => performance.getEntriesByType('navigation')[0].nextHopProtocol);

test('through the nginx front: HTTPS with a trusted CA, HTTP/2, HSTS, __Host- Secure cookies, a cell runs in JupyterLab', { timeout: 600_000 }, async () => {
  const page = await context.newPage();
  const origin = `https://${info.lab_host}:${info.https_port}`;
  const userOrigin = `https://${USER}.${info.user_domain}:${info.https_port}`;
  let lab = null;

  await step('the login page over HTTPS (certificate trusted), HTTP/2, with HSTS', page, async () => {
    const res = await page.goto('/login');
    assert.equal(res.status(), 200);
    assert.equal(res.headers()['strict-transport-security'], 'max-age=63072000');
    assert.equal(await protocolOf(page), 'h2');
    const tls = await res.securityDetails();
    assert.ok(tls && /TLS/.test(tls.protocol), `TLS: ${JSON.stringify(tls)}`);
  });

  await step('log in: the session cookie is __Host- and Secure', page, async () => {
    await formLogin(page, USER, ADMIN_PW);
    const cookies = await context.cookies(origin);
    const session = cookies.find((c) => c.name === '__Host-labd_session');
    assert.ok(session, `cookies: ${cookies.map((c) => c.name).join(', ')}`);
    assert.equal(session.secure, true);
    assert.ok(!cookies.some((c) => c.name === 'labd_session'), 'no unprefixed session cookie');
  });

  await step('start a runtime; Open Jupyter lands on the user origin over HTTPS and HTTP/2', () => lab || page, async () => {
    await startFromDashboard(page);
    lab = await openLabTab(context, page);
    assert.equal(new URL(lab.url()).origin, userOrigin);
    assert.equal(await protocolOf(lab), 'h2');
    const rt = (await context.cookies(userOrigin)).find((c) => c.name === '__Host-labd_rt');
    assert.ok(rt && rt.secure, 'the runtime cookie is __Host- and Secure');
  });

  await step('a notebook runs a cell through the front', lab, async () => {
    await launcherCard(lab, 'Notebook').click();
    await notebookPanel(lab).waitFor();
    const out = await runFirstCell(lab, '6 * 7');
    await lab.waitForFunction((el) => el.innerText.trim() === '42', await out.elementHandle(),
      { timeout: KERNEL_TIMEOUT });
    const kernel = sockets.filter((u) => u.startsWith(`wss://${USER}.${info.user_domain}:`) &&
      u.includes('/api/kernels/'));
    assert.ok(kernel.length, `the kernel's WebSocket went over wss through the front: ${sockets.join(', ')}`);
  });
});
