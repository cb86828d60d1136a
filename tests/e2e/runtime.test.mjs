// labd browser test of the runtime (issue 4): a user starts a CPU runtime from the dashboard,
// opens Jupyter (classic Notebook 6) through labd's proxy, runs print(6*7) in a new notebook,
// sees 42, saves, stops the runtime, starts it again and finds the notebook still there;
// then the "runtime not running" page (503) starts it once more and lands in the notebook.
//
// Started by tests/e2e/run.sh (LABD_URL, LABD_ADMIN_PASSWORD; the daemon's config has a
// [runtime] section with a small home and no idle culling). Slow machines: the waits are long.
// Whatever happens, the runtime is stopped at the end (after hook).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import http from 'node:http';
import { launchChromium } from './browser.mjs';

const BASE = (process.env.LABD_URL || '').replace(/\/+$/, '');
const ADMIN_PW = process.env.LABD_ADMIN_PASSWORD || '';
// Screenshots of the page a step failed on go here.
const ARTIFACTS = process.env.LABD_E2E_ARTIFACTS || '/tmp/labd-e2e-artifacts';
const USER = 'admin';
const JUPYTER = `/user/${USER}/`;

const START_TIMEOUT = 120_000; // starting -> running (the daemon gives up after start_timeout)
const STOP_TIMEOUT = 90_000; // stopping -> stopped (stop_grace + teardown)
const KERNEL_TIMEOUT = 90_000; // kernel started and its WebSocket connected

if (!BASE || !ADMIN_PW) {
  throw new Error('LABD_URL and LABD_ADMIN_PASSWORD must be set (use tests/e2e/run.sh)');
}

let browser;
let context;
// Console messages and uncaught errors of labd's own pages (not Jupyter's; labd's
// "runtime not running" page counts as labd's although it answers on a Jupyter path).
const labdConsole = [];
const labdErrors = [];
// Every page document the browser got (path, HTTP status, labd's or not), and the labd
// pages a test saw rendered (a known element visible): the console check at the end
// means nothing unless these pages really loaded.
const documents = [];
const labdRendered = new Set();
// Shared between the tests of this file, which run in order.
const shared = { notebook: null, ranOnce: false };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const isLabdPage = (url) => {
  try {
    return !new URL(url).pathname.startsWith('/user/');
  } catch {
    return false;
  }
};
// Whether each page's current document is labd's (set from its main-frame response).
const labdDocument = new WeakMap();
const showsLabd = (page) => labdDocument.get(page) ?? isLabdPage(page.url());

before(async () => {
  browser = await launchChromium();
  context = await browser.newContext({ baseURL: BASE, viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(30_000);
  context.setDefaultNavigationTimeout(60_000);
  context.on('page', watchPage);
});

after(async () => {
  // Clean up even when a step failed: stop the runtime and wait until it is down, so the
  // daemon (stopped by run.sh next) has nothing left to tear down.
  try {
    await stopRuntimeByApi();
  } catch (err) {
    console.error(`# cleanup: could not stop the runtime: ${err.message}`);
  }
  if (context) await context.close().catch(() => {});
  if (browser) await browser.close().catch(() => {});
});

function watchPage(page) {
  page.on('response', (res) => {
    const req = res.request();
    if (req.isNavigationRequest() && req.frame() === page.mainFrame()) {
      const labd = isLabdPage(res.url()) || res.status() === 503;
      labdDocument.set(page, labd);
      documents.push({ path: new URL(res.url()).pathname, status: res.status(), labd });
    }
  });
  page.on('console', (msg) => {
    if (showsLabd(page)) labdConsole.push({ type: msg.type(), text: msg.text(), url: page.url() });
  });
  page.on('pageerror', (err) => {
    if (showsLabd(page)) labdErrors.push(`${page.url()}: ${err.message}`);
  });
  // Jupyter asks before leaving a page with a running kernel; labd asks nothing.
  page.on('dialog', (d) => d.accept().catch(() => {}));
}

/* Runs one step; on failure saves a screenshot of the page (or of what `page()` returns
 * by then) and names the step in the error. */
async function step(name, page, fn) {
  try {
    return await fn();
  } catch (err) {
    let shot = '';
    if (typeof page === 'function') page = page();
    if (page && !page.isClosed()) {
      try {
        mkdirSync(ARTIFACTS, { recursive: true });
        shot = `${ARTIFACTS}/runtime-${name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}.png`;
        await page.screenshot({ path: shot, fullPage: true });
      } catch {
        shot = '';
      }
    }
    err.message = `[${name}] ${err.message}${shot ? ` (screenshot: ${shot})` : ''}`;
    throw err;
  }
}

/* ---- labd: login, API --------------------------------------------------------------- */

const isPath = (path) => (url) => url.pathname === path;

async function formLogin(page, username, password) {
  await page.goto('/login');
  await page.locator('#username').fill(username);
  await page.locator('#password').fill(password);
  await Promise.all([page.waitForURL(isPath('/dashboard')), page.locator('#password').press('Enter')]);
  await page.locator('#whoami', { hasText: `Signed in as ${username}` }).waitFor();
  labdRendered.add('/dashboard');
}

/* The API from Node with its own login (for cleanup, independent of the browser). */
async function apiSession() {
  const res = await fetch(`${BASE}/api/v1/login`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: USER, password: ADMIN_PW }),
  });
  const body = await res.json().catch(() => null);
  if (res.status !== 200) throw new Error(`API login: HTTP ${res.status} ${JSON.stringify(body)}`);
  const cookie = res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .find((c) => c.startsWith('labd_session='));
  return { cookie, csrf: body.csrf_token };
}

async function api(session, method, path, body) {
  const headers = { Cookie: session.cookie, Accept: 'application/json' };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    headers['X-CSRF-Token'] = session.csrf;
  }
  const res = await fetch(`${BASE}/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = { raw: text };
  }
  return { status: res.status, body: json };
}

async function stopRuntimeByApi() {
  const s = await apiSession();
  let cur = (await api(s, 'GET', '/me/runtime')).body?.runtime;
  if (!cur || !['starting', 'running', 'stopping'].includes(cur.state)) return;
  if (cur.state !== 'stopping') await api(s, 'DELETE', '/me/runtime');
  const deadline = Date.now() + STOP_TIMEOUT;
  while (Date.now() < deadline) {
    cur = (await api(s, 'GET', '/me/runtime')).body?.runtime;
    if (!cur || !['starting', 'running', 'stopping'].includes(cur.state)) return;
    await sleep(1000);
  }
  throw new Error(`runtime still ${cur && cur.state} ${STOP_TIMEOUT / 1000} s after DELETE`);
}

/* Follows a handoff Location (http://<user>.localhost:<port>/_labd/handoff?...) from Node as
 * a browser would, but connecting to 127.0.0.1 with that Host (Node does not resolve
 * *.localhost): redeems the code for the runtime cookie, then GETs where it leads. */
async function onUserOrigin(location) {
  const target = new URL(location);
  const get = (path, cookie) =>
    new Promise((resolve, reject) => {
      const req = http.get(
        {
          host: '127.0.0.1',
          port: target.port,
          path,
          headers: { Host: target.host, Accept: 'application/json', ...(cookie ? { Cookie: cookie } : {}) },
        },
        (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
        },
      );
      req.on('error', reject);
    });
  const hand = await get(target.pathname + target.search);
  assert.equal(hand.status, 303, `handoff: ${hand.status} ${hand.body}`);
  const cookie = (hand.headers['set-cookie'] || []).map((c) => c.split(';')[0]).find((c) => c.startsWith('labd_rt='));
  assert.ok(cookie, 'the handoff sets the runtime cookie');
  const r = await get(hand.headers.location, cookie);
  return { status: r.status, json: JSON.parse(r.body) };
}

/* ---- dashboard ---------------------------------------------------------------------- */

async function runtimeState(page) {
  const badge = page.locator('#runtime-state');
  if (!(await badge.isVisible())) return '';
  return ((await badge.textContent()) || '').trim();
}

/* Waits until #runtime-state reads `want`; a `failed` on the way ends the wait at once. */
async function waitState(page, want, timeout) {
  const deadline = Date.now() + timeout;
  let state = '';
  for (;;) {
    state = await runtimeState(page);
    if (state === want) return;
    if (state === 'failed' && want !== 'failed') {
      const reason = (await page.locator('#runtime-reason').textContent()) || '';
      const error = (await page.locator('#runtime-error').textContent()) || '';
      throw new Error(`runtime failed while waiting for "${want}": ${reason.trim()} ${error.trim()}`.trim());
    }
    if (Date.now() > deadline) {
      const error = (await page.locator('#runtime-error').textContent()) || '';
      throw new Error(`runtime state still "${state}" after ${timeout / 1000} s, wanted "${want}" ${error.trim()}`);
    }
    await sleep(250);
  }
}

async function startFromDashboard(page) {
  await page.locator('#start-cpu:not([disabled])').waitFor();
  await page.locator('#start-cpu').click();
  // The 202 reply is rendered at once: starting (or already running, or failed).
  await page.locator('#runtime-state').waitFor({ state: 'visible' });
  await waitState(page, 'running', START_TIMEOUT);
  assert.equal(await page.locator('#runtime-reason').isVisible(), false, 'no reason shown while running');
  assert.equal(await page.locator('#runtime-error').isVisible(), false, 'no error shown while running');
  assert.equal(await page.locator('#start-cpu').isDisabled(), true, 'start disabled while running');
  assert.equal(await page.locator('#start-gpu').isDisabled(), true, 'GPU start disabled while running');
  assert.equal(await page.locator('#stop-runtime').isDisabled(), false, 'stop enabled while running');
  assert.equal(await page.locator('#open-runtime').getAttribute('href'), `${JUPYTER}tree`);
  assert.match(await page.locator('#runtime-countdown').textContent(), /^\d+:\d\d:\d\d$/, 'countdown H:MM:SS');
}

async function stopFromDashboard(page) {
  await page.locator('#stop-runtime:not([disabled])').waitFor();
  await page.locator('#stop-runtime').click();
  await waitState(page, 'stopped', STOP_TIMEOUT);
  assert.equal(await page.locator('#start-cpu').isDisabled(), false, 'start enabled again once stopped');
  assert.equal(await page.locator('#stop-runtime').isDisabled(), true, 'stop disabled once stopped');
  assert.equal(await page.locator('#open-runtime').getAttribute('href'), null, 'no link to a stopped runtime');
}

/* Clicks "Open Jupyter" (target=_blank) and returns the new tab, loaded. */
async function openJupyterTab(page) {
  const [tab] = await Promise.all([context.waitForEvent('page'), page.locator('#open-runtime').click()]);
  await tab.waitForLoadState('domcontentloaded');
  assert.equal(new URL(tab.url()).pathname, `${JUPYTER}tree`, 'Open goes to the Jupyter tree');
  return tab;
}

/* ---- Jupyter (classic Notebook 6) --------------------------------------------------- */

/* The HTML of a Jupyter page must not carry Jupyter's token (labd keeps it to itself). */
async function assertNoToken(page, what) {
  const html = await page.evaluate(() => document.documentElement.outerHTML);
  const leaked = html.match(/token=["']?([A-Za-z0-9_\-%.]{32,})/i);
  assert.equal(leaked, null, `${what}: a token value appears in the page: ${leaked && leaked[0].slice(0, 24)}…`);
  const attr = await page.evaluate(() => {
    const el = document.querySelector('[data-jupyter-api-token]');
    return el ? el.getAttribute('data-jupyter-api-token') : null;
  });
  assert.ok(attr === null || attr === '', `${what}: data-jupyter-api-token is not empty (${(attr || '').length} chars)`);
  // And the cookie jar holds nothing of it either.
  const cookies = await context.cookies(BASE);
  for (const c of cookies) {
    assert.ok(!/token/i.test(c.name) || c.name === 'labd_session', `${what}: unexpected cookie ${c.name}`);
  }
}

/* fetch() in the Jupyter page, with Jupyter's XSRF header from its _xsrf cookie. */
async function jupyterFetch(page, method, path, body) {
  return page.evaluate(
    async ({ method, url, body }) => {
      const m = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
      const headers = { Accept: 'application/json' };
      if (m) headers['X-XSRFToken'] = decodeURIComponent(m[1]);
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      const res = await fetch(url, {
        method,
        credentials: 'same-origin',
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      let json = null;
      try {
        json = JSON.parse(text);
      } catch {
        json = null;
      }
      return { status: res.status, json, text: text.slice(0, 500) };
    },
    { method, url: `${JUPYTER}${path}`, body }
  );
}

async function waitKernel(page) {
  await page.waitForFunction(
    () => {
      const J = window.Jupyter;
      return !!(J && J.notebook && J.notebook.kernel && J.notebook.kernel.is_connected());
    },
    null,
    { timeout: KERNEL_TIMEOUT, polling: 250 }
  );
}

/* The saved notebook (contents API), or null. */
async function savedNotebook(page, name) {
  const r = await jupyterFetch(page, 'GET', `api/contents/${encodeURIComponent(name)}?content=1`);
  return r.status === 200 ? r.json : null;
}

function cellRan(nb) {
  const cell = nb && nb.content && nb.content.cells && nb.content.cells[0];
  if (!cell || cell.cell_type !== 'code') return false;
  const src = Array.isArray(cell.source) ? cell.source.join('') : cell.source;
  const out = (cell.outputs || [])
    .map((o) => (Array.isArray(o.text) ? o.text.join('') : o.text || ''))
    .join('');
  return src.trim() === 'print(6*7)' && out.trim() === '42';
}

// ---------------------------------------------------------------------------------------

test('start a CPU runtime, run print(6*7) in Jupyter, stop, start again: the notebook is still there', { timeout: 900_000 }, async () => {
  const page = await context.newPage();

  await step('log in', page, async () => {
    await formLogin(page, USER, ADMIN_PW);
  });

  await step('dashboard runtime card before starting', page, async () => {
    // The card has loaded the runtime: none live, so the start buttons are enabled.
    await page.locator('#start-cpu:not([disabled])').waitFor();
    assert.equal(await page.locator('#start-gpu').isDisabled(), false);
    assert.equal(await page.locator('#stop-runtime').isDisabled(), true, 'nothing to stop');
    assert.equal(await page.locator('#open-runtime').getAttribute('href'), null, 'nothing to open');
    assert.equal(await page.locator('#runtime-error').getAttribute('role'), 'alert');
    assert.equal(await page.locator('#runtime-warning').getAttribute('role'), 'alert');
  });

  await step('a GPU runtime without a GPU shows the API error', page, async () => {
    // run.sh configures no [gpu] devices: 409 no_gpu_available, and its message is shown.
    await page.locator('#start-gpu').click();
    const err = page.locator('#runtime-error');
    await err.waitFor({ state: 'visible' });
    assert.match(await err.textContent(), /GPU/);
    await page.locator('#start-cpu:not([disabled])').waitFor();
  });

  await step('start a CPU runtime from the dashboard', page, async () => {
    await startFromDashboard(page);
    assert.equal(await page.locator('#runtime-type').textContent(), 'CPU');
  });

  await step('countdown and time-limit warning', page, async () => {
    // run.sh sets cpu_limit = 20m, under the first warn_before lead time (30 minutes).
    const seconds = (text) => text.split(':').reduce((acc, part) => acc * 60 + Number(part), 0);
    const first = seconds(await page.locator('#runtime-countdown').textContent());
    assert.ok(first > 0 && first <= 20 * 60, `countdown within the 20 minute limit (${first} s)`);
    await sleep(2500);
    const later = seconds(await page.locator('#runtime-countdown').textContent());
    assert.ok(later < first, `the countdown ticks (${first} s, then ${later} s)`);
    const warning = page.locator('#runtime-warning');
    await warning.waitFor({ state: 'visible' });
    assert.match(await warning.textContent(), /^Your runtime stops in \d+:\d\d — save your work\.$/);
  });

  const tree = await step('open Jupyter', page, async () => {
    const tab = await openJupyterTab(page);
    // The classic Notebook tree page with its file list.
    await tab.locator('#notebook_list').waitFor({ timeout: 60_000 });
    return tab;
  });

  await step('no Jupyter token in the tree page', tree, async () => {
    await assertNoToken(tree, 'tree page');
  });

  const name = `labd-e2e-${Date.now().toString(36)}.ipynb`;
  shared.notebook = name;

  await step('create a Python 3 notebook (contents API)', tree, async () => {
    const r = await jupyterFetch(tree, 'PUT', `api/contents/${encodeURIComponent(name)}`, {
      type: 'notebook',
      format: 'json',
      content: {
        cells: [],
        metadata: {
          kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' },
          language_info: { name: 'python' },
        },
        nbformat: 4,
        nbformat_minor: 5,
      },
    });
    assert.equal(r.status, 201, `PUT api/contents/${name}: ${r.text}`);
  });

  const nbPage = tree;
  await step('open the notebook and wait for its kernel', nbPage, async () => {
    const res = await nbPage.goto(`${JUPYTER}notebooks/${encodeURIComponent(name)}`);
    assert.equal(res.status(), 200, 'notebook page loads');
    await nbPage.locator('#notebook-container .cell.code_cell').first().waitFor({ timeout: 60_000 });
    await waitKernel(nbPage);
    // No autosave: the save checked below is the one Ctrl+S makes.
    await nbPage.evaluate(() => window.Jupyter.notebook.set_autosave_interval(0));
    await assertNoToken(nbPage, 'notebook page');
  });

  await step('type print(6*7), Shift+Enter, see 42', nbPage, async () => {
    const cell = nbPage.locator('#notebook-container .cell.code_cell').first();
    await cell.locator('.CodeMirror').click();
    await nbPage.keyboard.type('print(6*7)');
    await nbPage.keyboard.press('Shift+Enter');
    const out = cell.locator('.output_area .output_subarea');
    await out.first().waitFor({ timeout: KERNEL_TIMEOUT });
    await cell.locator('.output_area .output_subarea', { hasText: '42' }).waitFor({ timeout: KERNEL_TIMEOUT });
    assert.equal((await out.first().innerText()).trim(), '42');
  });

  await step('save with Ctrl+S', nbPage, async () => {
    // Only the empty notebook is on disk so far.
    assert.equal(cellRan(await savedNotebook(nbPage, name)), false, 'not saved yet');
    await nbPage.keyboard.press('Control+s');
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (cellRan(await savedNotebook(nbPage, name))) break;
      if (Date.now() > deadline) throw new Error('the saved notebook has no print(6*7) cell with output 42');
      await sleep(500);
    }
    assert.equal(await nbPage.evaluate(() => window.Jupyter.notebook.dirty), false, 'notebook not dirty after save');
  });

  await step('stop the runtime from the dashboard', page, async () => {
    await nbPage.close({ runBeforeUnload: false });
    await page.bringToFront();
    await stopFromDashboard(page);
    // The proxy now answers for a stopped runtime, on the runtime's own origin: labd's origin
    // hands the browser's session over (303 with a one-time code) rather than serve it.
    const res = await context.request.get(`${JUPYTER}api/contents`, {
      headers: { Accept: 'application/json' },
      maxRedirects: 0,
    });
    assert.equal(res.status(), 303, 'labd hands a runtime path over to the user origin');
    const { status, json } = await onUserOrigin(res.headers().location);
    assert.equal(status, 503, 'the proxy says the runtime is not running');
    assert.equal(json.error.code, 'runtime_not_running');
  });

  await step('start it again', page, async () => {
    await startFromDashboard(page);
  });

  let tab2 = null;
  await step('the notebook is still there', () => tab2 || page, async () => {
    const tab = (tab2 = await openJupyterTab(page));
    await tab.locator('#notebook_list').waitFor({ timeout: 60_000 });
    await tab.locator('#notebook_list a.item_link', { hasText: name }).first().waitFor({ timeout: 30_000 });
    const nb = await savedNotebook(tab, name);
    assert.ok(cellRan(nb), 'the notebook kept its print(6*7) cell and its output 42');
    await assertNoToken(tab, 'tree page after restart');
    await tab.close();
  });

  shared.ranOnce = true;
  await page.close();
});

test('the "runtime not running" page (503) starts the runtime and lands in the notebook', { timeout: 600_000 }, async (t) => {
  if (!shared.ranOnce) {
    t.skip('needs the notebook of the previous test');
    return;
  }
  const name = shared.notebook;
  const page = await context.newPage();
  // The dashboard's polls of the runtime, and its event stream.
  const polls = [];
  const streams = [];
  page.on('request', (req) => {
    if (req.method() === 'GET' && new URL(req.url()).pathname === '/api/v1/me/runtime') polls.push(req.url());
  });
  page.on('response', (res) => {
    if (new URL(res.url()).pathname === '/api/v1/me/runtime/events') {
      streams.push({ status: res.status(), type: res.headers()['content-type'] });
    }
  });
  await page.goto('/dashboard');

  await step('a stop made elsewhere shows on the dashboard at once: pushed, not polled', page, async () => {
    await waitState(page, 'running', 30_000);
    const deadline = Date.now() + 10_000;
    while (!streams.length && Date.now() < deadline) await sleep(100);
    assert.deepEqual(streams[0], { status: 200, type: 'text/event-stream' }, 'the card follows the event stream');
    await sleep(500); // the stream is open: polling has slowed to once a minute
    const before = polls.length;
    const r = await api(await apiSession(), 'DELETE', '/me/runtime');
    assert.equal(r.status, 202, `DELETE /me/runtime: ${JSON.stringify(r.body)}`);
    await waitState(page, 'stopped', STOP_TIMEOUT);
    assert.equal(polls.length, before, 'no GET /api/v1/me/runtime between the stop and the card showing it');
    assert.equal(await page.locator('#start-cpu').isDisabled(), false, 'start enabled again once stopped');
  });

  const url = `${JUPYTER}notebooks/${encodeURIComponent(name)}`;
  await step('a stopped runtime gets the runtime page', page, async () => {
    const res = await page.goto(url);
    assert.equal(res.status(), 503);
    assert.equal(new URL(page.url()).pathname, url, 'the address stays the same');
    await page.locator('h1', { hasText: 'not running' }).waitFor();
    await page.locator('#runtime-state', { hasText: 'stopped' }).waitFor();
    labdRendered.add('runtime page');
    assert.equal(await page.locator('a[href="/dashboard"]').count() > 0, true, 'links back to the dashboard');
    assert.equal(await page.locator('#runtime-error').getAttribute('role'), 'alert');
  });

  await step('Start CPU runtime on that page opens the notebook when it runs', page, async () => {
    await page.locator('#start-cpu:not([disabled])').waitFor();
    // The page polls the runtime API and reloads the same address once the runtime runs.
    await Promise.all([
      page.waitForEvent('load', { timeout: START_TIMEOUT + 30_000 }),
      page.locator('#start-cpu').click(),
    ]);
    await page.locator('#notebook-container .cell.code_cell').first().waitFor({ timeout: 60_000 });
    assert.equal(new URL(page.url()).pathname, url);
    const cell = page.locator('#notebook-container .cell.code_cell').first();
    assert.equal((await cell.locator('.CodeMirror').innerText()).includes('print(6*7)'), true, 'the saved cell');
    assert.equal((await cell.locator('.output_area .output_subarea').first().innerText()).trim(), '42', 'its saved output');
    await assertNoToken(page, 'notebook page after start from the runtime page');
  });

  await page.close({ runBeforeUnload: false });
});

test('labd pages logged no Content-Security-Policy violation and no script error', () => {
  // First, that there was something to check: the dashboard (200) and the runtime page
  // (503, its documented status) were loaded and rendered by the tests above.
  const seen = JSON.stringify(documents);
  assert.ok(documents.some((d) => d.path === '/dashboard' && d.status === 200), `no /dashboard with 200: ${seen}`);
  assert.ok(documents.some((d) => d.path.startsWith(JUPYTER) && d.status === 503 && d.labd),
    `no runtime page (503): ${seen}`);
  assert.deepEqual([...labdRendered].sort(), ['/dashboard', 'runtime page'],
    'labd pages the tests saw rendered');
  const csp = labdConsole.filter((m) => /Content[- ]Security[- ]Policy/i.test(m.text));
  assert.deepEqual(csp, [], 'CSP violations');
  assert.deepEqual(labdErrors, [], 'uncaught errors in labd pages');
});
