// lab-lib.mjs - what the runtime browser tests share (not a test file): labd's login, API and
// dashboard runtime card, and driving JupyterLab 4 through labd's proxy. Used by
// lab.test.mjs and runtime.test.mjs. Every wait is on a real UI or API state, with a deadline.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { api, apiLogin } from './console-lib.mjs';

export const BASE = (process.env.LABD_URL || '').replace(/\/+$/, '');
export const ADMIN_PW = process.env.LABD_ADMIN_PASSWORD || '';
export const STATE_DIR = process.env.LABD_STATE_DIR || '';
// Screenshots of the page a step failed on go here.
export const ARTIFACTS = process.env.LABD_E2E_ARTIFACTS || '/tmp/labd-e2e-artifacts';
export const USER = 'admin';
export const JUPYTER = `/user/${USER}/`;

export const START_TIMEOUT = 120_000; // starting -> running (the daemon gives up after start_timeout)
export const STOP_TIMEOUT = 90_000; // stopping -> stopped (stop_grace + teardown)
export const KERNEL_TIMEOUT = 90_000; // kernel started and its first output shown
export const LAB_TIMEOUT = 120_000; // JupyterLab's bundle loaded and its shell drawn (2 slow cores)

if (!BASE || !ADMIN_PW) {
  throw new Error('LABD_URL and LABD_ADMIN_PASSWORD must be set (use tests/e2e/run.sh)');
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* Runs one step; on failure saves a screenshot of the page (or of what `page()` returns
 * by then) named after the file and the step, and names the step in the error. */
export async function step(file, name, page, fn) {
  try {
    return await fn();
  } catch (err) {
    let shot = '';
    if (typeof page === 'function') page = page();
    if (page && !page.isClosed()) {
      try {
        mkdirSync(ARTIFACTS, { recursive: true });
        shot = `${ARTIFACTS}/${file}-${name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}.png`;
        await page.screenshot({ path: shot, fullPage: true });
      } catch {
        shot = '';
      }
    }
    err.message = `[${name}] ${err.message}${shot ? ` (screenshot: ${shot})` : ''}`;
    throw err;
  }
}

/* Chromium fails the requests in flight with ERR_NETWORK_CHANGED when an interface of the
 * machine comes or goes (a runtime's veth, another test's namespaces): the machine's doing,
 * not labd's, and no user's browser on another machine sees it. Pages given to
 * countNetworkChanges count them; stepOnce runs a step that failed while one happened once
 * more, after `again` (a fresh load). */
let networkChanges = 0;

export function countNetworkChanges(page) {
  page.on('requestfailed', (req) => {
    if ((req.failure()?.errorText || '').includes('ERR_NETWORK_CHANGED')) networkChanges++;
  });
}

export async function stepOnce(file, name, page, fn, again = async () => {}) {
  const seen = networkChanges;
  try {
    return await step(file, name, page, fn);
  } catch (err) {
    if (networkChanges === seen) throw err;
    console.error(`# ${name}: the machine's network changed under the browser; once more`);
    await again();
    return step(file, name, page, fn);
  }
}

/* ---- labd: login, API --------------------------------------------------------------- */

const isPath = (path) => (url) => url.pathname === path;

export async function formLogin(page, username, password) {
  await page.goto('/login');
  await page.locator('#username').fill(username);
  await page.locator('#password').fill(password);
  await Promise.all([page.waitForURL(isPath('/dashboard')), page.locator('#password').press('Enter')]);
  await page.locator('#whoami', { hasText: `Signed in as ${username}` }).waitFor();
}

/* The API from Node with its own login (for cleanup, independent of the browser). */
export const apiSession = () => apiLogin(USER, ADMIN_PW);
export { api };

export async function stopRuntimeByApi() {
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

/* Every Jupyter token labd ever gave this daemon's runtimes (read from its database, as
 * root), so a test can look for the values themselves, not only for a "token=" pattern. */
export function jupyterTokens() {
  if (!STATE_DIR) return [];
  const out = execFileSync('sqlite3', [`${STATE_DIR}/db/labd.db`, 'SELECT token FROM runtimes'], {
    encoding: 'utf8',
  });
  return out.split('\n').map((t) => t.trim()).filter((t) => t.length >= 16);
}

/* ---- dashboard ---------------------------------------------------------------------- */

export async function runtimeState(page) {
  const badge = page.locator('#runtime-state');
  if (!(await badge.isVisible())) return '';
  return ((await badge.textContent()) || '').trim();
}

/* Waits until #runtime-state reads `want`; a `failed` on the way ends the wait at once. */
export async function waitState(page, want, timeout) {
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

/* Clicks "Start CPU runtime" and waits for running; the card then links to the runtime. */
export async function startFromDashboard(page) {
  await page.locator('#start-cpu:not([disabled])').waitFor();
  await page.locator('#start-cpu').click();
  // The 202 reply is rendered at once: starting (or already running, or failed).
  await page.locator('#runtime-state').waitFor({ state: 'visible' });
  await waitState(page, 'running', START_TIMEOUT);
  assert.equal(await page.locator('#runtime-error').isVisible(), false, 'no error shown while running');
  assert.equal(await page.locator('#stop-runtime').isDisabled(), false, 'stop enabled while running');
  assert.equal(await page.locator('#open-runtime').getAttribute('href'), JUPYTER, 'Open links to the runtime');
}

export async function stopFromDashboard(page) {
  await page.locator('#stop-runtime:not([disabled])').waitFor();
  await page.locator('#stop-runtime').click();
  await waitState(page, 'stopped', STOP_TIMEOUT);
  assert.equal(await page.locator('#start-cpu').isDisabled(), false, 'start enabled again once stopped');
  assert.equal(await page.locator('#stop-runtime').isDisabled(), true, 'stop disabled once stopped');
  assert.equal(await page.locator('#open-runtime').getAttribute('href'), null, 'no link to a stopped runtime');
}

/* ---- JupyterLab 4 ------------------------------------------------------------------- */

/* Clicks "Open Jupyter" (target=_blank): a new tab on the runtime's base URL, which
 * Jupyter redirects to /lab; returns it once JupyterLab has drawn its shell. */
export async function openLabTab(context, page) {
  const [tab] = await Promise.all([context.waitForEvent('page'), page.locator('#open-runtime').click()]);
  await waitLab(tab);
  assert.equal(new URL(tab.url()).pathname, `${JUPYTER}lab`, 'Open lands in JupyterLab');
  return tab;
}

/* JupyterLab's shell is up: its main dock panel drawn, and the page's first status
 * (the kernel/terminal counts in the status bar) rendered. */
export async function waitLab(page) {
  await page.locator('#jp-main-dock-panel').waitFor({ timeout: LAB_TIMEOUT });
  await page.locator('#jp-main-statusbar').waitFor({ timeout: LAB_TIMEOUT });
}

/* fetch() in a JupyterLab page (same origin), with Jupyter Server's XSRF header from its
 * _xsrf cookie; path is relative to the runtime's base URL. */
export async function labFetch(page, method, path, body) {
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

/* Creates an empty Python 3 notebook `name` in the home through the contents API. */
export async function createNotebook(page, name) {
  const r = await labFetch(page, 'PUT', `api/contents/${encodeURIComponent(name)}`, {
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
}

/* The saved notebook (contents API), or null. */
export async function savedNotebook(page, name) {
  const r = await labFetch(page, 'GET', `api/contents/${encodeURIComponent(name)}?content=1`);
  return r.status === 200 ? r.json : null;
}

/* The text of a cell's outputs in a saved notebook (stream text and text/plain results). */
export function outputText(cell) {
  const join = (v) => (Array.isArray(v) ? v.join('') : v || '');
  return (cell.outputs || []).map((o) => join(o.text) + join(o.data && o.data['text/plain'])).join('');
}

/* The first code cell of the saved notebook `name` has `source` and an output matching `re`. */
export async function notebookSaved(page, name, source, re) {
  const nb = await savedNotebook(page, name);
  const cell = nb && nb.content && nb.content.cells && nb.content.cells[0];
  if (!cell || cell.cell_type !== 'code') return false;
  const src = Array.isArray(cell.source) ? cell.source.join('') : cell.source;
  return src.trim() === source && re.test(outputText(cell).trim());
}

/* The launcher's card for a kind ("Notebook" or "Terminal"). */
export function launcherCard(page, kind) {
  return kind === 'Terminal'
    ? page.locator('.jp-Launcher .jp-LauncherCard[data-category="Other"]', { hasText: 'Terminal' })
    : page.locator(`.jp-Launcher .jp-LauncherCard[data-category="${kind}"]`).first();
}

/* The notebook tab of `name`: its panel, once the file is open. */
export function notebookPanel(page) {
  return page.locator('.jp-NotebookPanel:visible');
}

/* The visible notebook's kernel is connected and idle (the status bar says so): a cell
 * run before that may be dropped rather than queued. */
export async function kernelIdle(page) {
  await page
    .locator('#jp-main-statusbar', { hasText: /\| Idle/ })
    .waitFor({ timeout: KERNEL_TIMEOUT });
}

/* Types `code` into the first cell of the visible notebook and runs it with Shift+Enter;
 * returns the locator of that cell's output once it shows something. */
export async function runFirstCell(page, code) {
  const nb = notebookPanel(page);
  await kernelIdle(page);
  const cell = nb.locator('.jp-Cell.jp-CodeCell').first();
  await cell.locator('.cm-content').click();
  await page.keyboard.type(code);
  await page.keyboard.press('Shift+Enter');
  const out = cell.locator('.jp-OutputArea-output');
  await out.first().waitFor({ timeout: KERNEL_TIMEOUT });
  return out.first();
}

/* JupyterLab setting that makes xterm.js mirror the terminal's text into an
 * accessibility tree (its WebGL/canvas renderer draws pixels only); stored under the
 * home like every user setting, and read when JupyterLab loads. */
export async function terminalTextInDom(page) {
  const r = await labFetch(page, 'PUT', 'lab/api/settings/@jupyterlab/terminal-extension:plugin', {
    raw: '{"screenReaderMode": true}',
  });
  assert.equal(r.status, 204, `PUT terminal settings: ${r.status} ${r.text}`);
}

/* The rows of the visible terminal (screen-reader mirror), trimmed on the right. */
export async function terminalRows(page) {
  const text = await page.locator('.jp-Terminal:visible .xterm-accessibility-tree').innerText();
  return text.split('\n').map((l) => l.replace(/\s+$/, ''));
}

/* The visible terminal shows a shell prompt (its WebSocket is up and the shell reads). */
export async function terminalPrompt(page, timeout = 60_000) {
  const deadline = Date.now() + timeout;
  await page.locator('.jp-Terminal:visible .xterm-accessibility-tree').waitFor({ timeout });
  for (;;) {
    const rows = await terminalRows(page);
    if (rows.some((r) => /[$#]$/.test(r))) return;
    if (Date.now() > deadline) throw new Error(`no shell prompt in the terminal: ${rows.filter(Boolean).join(' | ')}`);
    await sleep(200);
  }
}

/* Types a command line into the visible terminal and waits until `done(rows)` holds. */
export async function terminalRun(page, line, done, timeout = 30_000) {
  const term = page.locator('.jp-Terminal:visible');
  await terminalPrompt(page);
  await term.locator('.xterm-helper-textarea').focus();
  await page.keyboard.type(line);
  await page.keyboard.press('Enter');
  const deadline = Date.now() + timeout;
  let rows = [];
  for (;;) {
    rows = await terminalRows(page);
    if (done(rows)) return rows;
    if (Date.now() > deadline) {
      throw new Error(`terminal: "${line}" did not give the expected output in ${timeout / 1000} s:\n${rows.filter(Boolean).join('\n')}`);
    }
    await sleep(200);
  }
}
