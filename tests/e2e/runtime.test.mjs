// labd browser test of the runtime (issues 4 and 10): a user starts a CPU runtime from the
// dashboard, opens JupyterLab 4 through labd's proxy, runs print(6*7) in a notebook, sees 42,
// saves, stops the runtime, starts it again and finds the notebook still there; then the
// "runtime not running" page (503) starts it once more and lands in the notebook.
// (lab.test.mjs covers the launcher, terminals, shell history and the token sweep.)
//
// Started by tests/e2e/run.sh (LABD_URL, LABD_ADMIN_PASSWORD; the daemon's config has a
// [runtime] section with a small home and no idle culling). Slow machines: the waits are long.
// Whatever happens, the runtime is stopped at the end (after hook).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { launchChromium } from './browser.mjs';
import {
  BASE, ADMIN_PW, USER, JUPYTER, STOP_TIMEOUT, START_TIMEOUT,
  step as runStep, formLogin as labdLogin, api, apiSession, stopRuntimeByApi, waitState,
  startFromDashboard as startRuntime, stopFromDashboard, openLabTab, waitLab, labFetch,
  notebookPanel, runFirstCell, notebookSaved, sleep, createNotebook, countNetworkChanges,
  stepOnce as runStepOnce,
} from './lab-lib.mjs';

const step = (name, page, fn) => runStep('runtime', name, page, fn);
// a step whose page a change of the machine's network broke: reloaded, and run once more
const stepOnce = (name, page, fn) => runStepOnce('runtime', name, page, fn, async () => {
  await page.reload();
  await waitLab(page);
});
const CODE = 'print(6*7)';
const FORTY_TWO = /^42$/;

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
  countNetworkChanges(page);
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

async function formLogin(page, username, password) {
  await labdLogin(page, username, password);
  labdRendered.add('/dashboard');
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

/* The shared start (lab-lib.mjs), and what the dashboard shows of a running CPU runtime. */
async function startFromDashboard(page) {
  await startRuntime(page);
  assert.equal(await page.locator('#runtime-reason').isVisible(), false, 'no reason shown while running');
  assert.equal(await page.locator('#start-cpu').isDisabled(), true, 'start disabled while running');
  assert.equal(await page.locator('#start-gpu').isDisabled(), true, 'GPU start disabled while running');
  assert.match(await page.locator('#runtime-countdown').textContent(), /^\d+:\d\d:\d\d$/, 'countdown H:MM:SS');
}

/* ---- JupyterLab ------------------------------------------------------------------- */

/* A Jupyter page must not carry Jupyter's token (labd keeps it to itself): not in its HTML,
 * not in JupyterLab's page config, not in a cookie. */
async function assertNoToken(page, what) {
  const html = await page.evaluate(() => document.documentElement.outerHTML);
  const leaked = html.match(/token=["']?([A-Za-z0-9_\-%.]{32,})/i);
  assert.equal(leaked, null, `${what}: a token value appears in the page: ${leaked && leaked[0].slice(0, 24)}…`);
  const config = await page.evaluate(() => {
    const el = document.getElementById('jupyter-config-data');
    return el ? JSON.parse(el.textContent) : null;
  });
  assert.ok(config, `${what}: JupyterLab's page config is there`);
  assert.equal(config.token || '', '', `${what}: the page config's token is empty`);
  const cookies = await context.cookies(BASE);
  for (const c of cookies) {
    assert.ok(!/token/i.test(c.name) || c.name === 'labd_session', `${what}: unexpected cookie ${c.name}`);
  }
}

// ---------------------------------------------------------------------------------------

test('start a CPU runtime, run print(6*7) in JupyterLab, stop, start again: the notebook is still there', { timeout: 900_000 }, async () => {
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

  const tree = await step('open JupyterLab', page, async () => {
    const tab = await openLabTab(context, page);
    // JupyterLab's file browser lists the home.
    await tab.locator('.jp-DirListing-content').waitFor({ timeout: 60_000 });
    return tab;
  });

  await step('no Jupyter token in the JupyterLab page', tree, async () => {
    await assertNoToken(tree, 'lab page');
  });

  const name = `labd-e2e-${Date.now().toString(36)}.ipynb`;
  shared.notebook = name;

  await step('create a Python 3 notebook (contents API)', tree, () => createNotebook(tree, name));

  const nbPage = tree;
  await step('open the notebook and wait for its kernel', nbPage, async () => {
    // No autosave (a user setting, read when JupyterLab loads): the save checked below is
    // the one Ctrl+S makes.
    const r = await labFetch(nbPage, 'PUT', 'lab/api/settings/@jupyterlab/docmanager-extension:plugin', {
      raw: '{"autosave": false}',
    });
    assert.equal(r.status, 204, `PUT docmanager settings: ${r.status} ${r.text}`);
    const res = await nbPage.goto(`${JUPYTER}lab/tree/${encodeURIComponent(name)}`);
    assert.equal(res.status(), 200, 'notebook page loads');
    await waitLab(nbPage);
    await notebookPanel(nbPage).locator('.jp-Cell.jp-CodeCell').first().waitFor({ timeout: 60_000 });
    await assertNoToken(nbPage, 'notebook page');
  });

  await stepOnce('type print(6*7), Shift+Enter, see 42', nbPage, async () => {
    const out = await runFirstCell(nbPage, CODE);
    assert.equal((await out.innerText()).trim(), '42');
  });

  await step('save with Ctrl+S', nbPage, async () => {
    // Only the empty notebook is on disk so far.
    assert.equal(await notebookSaved(nbPage, name, CODE, FORTY_TWO), false, 'not saved yet');
    await notebookPanel(nbPage).locator('.jp-Cell').first().click();
    await nbPage.keyboard.press('Control+s');
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (await notebookSaved(nbPage, name, CODE, FORTY_TWO)) break;
      if (Date.now() > deadline) throw new Error('the saved notebook has no print(6*7) cell with output 42');
      await sleep(500);
    }
    const tab = nbPage.locator('.lm-TabBar-tab', { hasText: name }).first();
    await nbPage.waitForFunction((el) => !el.classList.contains('jp-mod-dirty'), await tab.elementHandle());
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
    const tab = (tab2 = await openLabTab(context, page));
    await tab.locator('.jp-DirListing-item', { hasText: name }).first().waitFor({ timeout: 60_000 });
    assert.ok(await notebookSaved(tab, name, CODE, FORTY_TWO), 'the notebook kept its print(6*7) cell and its output 42');
    await assertNoToken(tab, 'lab page after restart');
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

  const url = `${JUPYTER}lab/tree/${encodeURIComponent(name)}`;
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
  });

  await stepOnce('the notebook shows its saved cell and output', page, async () => {
    await waitLab(page);
    const cell = notebookPanel(page).locator('.jp-Cell.jp-CodeCell').first();
    await cell.locator('.jp-OutputArea-output').first().waitFor({ timeout: 60_000 });
    assert.equal(new URL(page.url()).pathname, url);
    assert.equal((await cell.locator('.cm-content').innerText()).includes(CODE), true, 'the saved cell');
    assert.equal((await cell.locator('.jp-OutputArea-output').first().innerText()).trim(), '42', 'its saved output');
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
