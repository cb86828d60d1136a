// labd browser test of JupyterLab 4 as the runtime (issue 10): log in, start a CPU runtime,
// JupyterLab's launcher appears; a notebook from the launcher runs `import sys; sys.version`
// and shows the version; it is saved; a terminal from the launcher runs `echo ok` and shows
// ok; the runtime stops and starts again: JupyterLab reopens the saved notebook with its
// output, and the shell history still holds `echo ok`. All the while no Jupyter token
// appears in any page source, URL (every request, navigation and WebSocket the pages make)
// or console message.
//
// Started by tests/e2e/run.sh with a labd of its own (lab.ini: a fresh home). Whatever
// happens, the runtime is stopped at the end (after hook).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launchChromium } from './browser.mjs';
import {
  BASE, ADMIN_PW, USER, JUPYTER, KERNEL_TIMEOUT,
  step as runStep, formLogin, stopRuntimeByApi, jupyterTokens, startFromDashboard,
  stopFromDashboard, openLabTab, waitLab, launcherCard, notebookPanel, runFirstCell,
  notebookSaved, terminalTextInDom, terminalRun, terminalPrompt, sleep,
} from './lab-lib.mjs';

const step = (name, page, fn) => runStep('lab', name, page, fn);
const UNTITLED = 'Untitled.ipynb'; // the launcher's first notebook in a fresh home
const NOTEBOOK = 'lab-e2e.ipynb'; // its name from the first save's rename dialog
const CODE = 'import sys; sys.version';
// sys.version's repr: '3.11.2 (main, ...) [GCC 12.2.0]'
const VERSION = /^'3\.\d+\.\d+.*\[GCC/s;

let browser;
let context;
// Everything the browser showed or sent, to look for the tokens in at the end.
const seen = { urls: [], console: [], sources: [] };

before(async () => {
  browser = await launchChromium();
  context = await browser.newContext({ baseURL: BASE, viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(30_000);
  context.setDefaultNavigationTimeout(60_000);
  context.on('request', (req) => seen.urls.push(req.url()));
  context.on('page', watchPage);
});

after(async () => {
  try {
    await stopRuntimeByApi();
  } catch (err) {
    console.error(`# cleanup: could not stop the runtime: ${err.message}`);
  }
  if (context) await context.close().catch(() => {});
  if (browser) await browser.close().catch(() => {});
});

function watchPage(page) {
  page.on('framenavigated', (frame) => seen.urls.push(frame.url()));
  page.on('websocket', (ws) => seen.urls.push(ws.url()));
  page.on('console', (msg) => seen.console.push(msg.text()));
  page.on('pageerror', (err) => seen.console.push(`${err.message}\n${err.stack || ''}`));
  // The page source as served, for every document the page loads.
  page.on('response', async (res) => {
    const req = res.request();
    if (!req.isNavigationRequest() || res.status() >= 300 && res.status() < 400) return;
    try {
      seen.sources.push({ url: res.url(), text: await res.text() });
    } catch {
      // a document replaced before its body was read: its DOM is checked instead
    }
  });
  // JupyterLab asks before leaving a page with unsaved state; labd asks nothing.
  page.on('dialog', (d) => d.accept().catch(() => {}));
}

/* The DOM as it is now (JupyterLab writes much of its page after loading). */
async function keepDom(page, what) {
  seen.sources.push({ url: `${what}: ${page.url()}`, text: await page.content() });
}

/* The runtime's WebSockets, as JupyterLab 4 opens them through labd's proxy. */
function sockets() {
  return seen.urls.filter((u) => u.startsWith('ws:')).map((u) => new URL(u).pathname);
}

test('JupyterLab: launcher, notebook, terminal; stop and start: notebook and shell history kept; no token shown', { timeout: 1_200_000 }, async () => {
  const page = await context.newPage();
  let lab = null;

  await step('log in and start a CPU runtime', page, async () => {
    await formLogin(page, USER, ADMIN_PW);
    await startFromDashboard(page);
  });

  await step('Open Jupyter: JupyterLab shows its launcher', () => lab || page, async () => {
    lab = await openLabTab(context, page);
    await launcherCard(lab, 'Notebook').waitFor();
    await launcherCard(lab, 'Terminal').waitFor();
    await keepDom(lab, 'launcher');
  });

  await step('the terminal mirrors its text into the page (a JupyterLab setting), reload', lab, async () => {
    await terminalTextInDom(lab);
    await lab.reload();
    await waitLab(lab);
    await launcherCard(lab, 'Notebook').waitFor();
  });

  await step('a notebook from the launcher runs import sys; sys.version', lab, async () => {
    await launcherCard(lab, 'Notebook').click();
    await notebookPanel(lab).waitFor();
    await lab.locator('.lm-TabBar-tab', { hasText: UNTITLED }).first().waitFor();
    const out = await runFirstCell(lab, CODE);
    await lab.waitForFunction(
      (el) => /^'3\./.test(el.innerText.trim()), await out.elementHandle(), { timeout: KERNEL_TIMEOUT });
    assert.match((await out.innerText()).trim(), VERSION, 'the cell shows sys.version');
  });

  await step('save with Ctrl+S, named in the rename dialog: the file has the cell and its output', lab, async () => {
    assert.equal(await notebookSaved(lab, UNTITLED, CODE, VERSION), false, 'not saved before Ctrl+S');
    await notebookPanel(lab).locator('.jp-Cell').first().click();
    await lab.keyboard.press('Control+s');
    // JupyterLab asks for a name on a new notebook's first save.
    const dialog = lab.locator('.jp-Dialog', { hasText: 'Rename file' });
    await dialog.locator('input[type="text"], input:not([type])').first().fill(NOTEBOOK);
    await dialog.locator('button', { hasText: 'Rename and Save' }).click();
    await lab.locator('.lm-TabBar-tab', { hasText: NOTEBOOK }).first().waitFor();
    const deadline = Date.now() + 30_000;
    while (!(await notebookSaved(lab, NOTEBOOK, CODE, VERSION))) {
      if (Date.now() > deadline) throw new Error(`${NOTEBOOK} was not saved with its cell and output`);
      await sleep(500);
    }
    await keepDom(lab, 'notebook');
  });

  await step('a terminal from the launcher runs echo ok and shows ok', lab, async () => {
    await lab.keyboard.press('Control+Shift+L'); // a new launcher tab
    await launcherCard(lab, 'Terminal').click();
    await terminalPrompt(lab);
    await terminalRun(lab, 'echo ok', (rows) => rows.includes('ok'));
    assert.ok(sockets().some((p) => p.startsWith(`${JUPYTER}terminals/websocket/`)),
      `the terminal's WebSocket went through labd: ${sockets().join(', ')}`);
    await keepDom(lab, 'terminal');
  });

  await step('stop the runtime from the dashboard', page, async () => {
    await lab.close({ runBeforeUnload: false });
    await page.bringToFront();
    await stopFromDashboard(page);
  });

  await step('start again: JupyterLab reopens the notebook with its saved output', () => lab || page, async () => {
    lab = null;
    await startFromDashboard(page);
    lab = await openLabTab(context, page);
    // The workspace (under the home) reopens the notebook's tab (and the terminal's, the
    // last one active); the notebook's output is the saved one, shown without running it.
    await lab.locator('.lm-TabBar-tab', { hasText: NOTEBOOK }).first().click();
    const cell = notebookPanel(lab).locator('.jp-Cell.jp-CodeCell').first();
    await cell.locator('.jp-OutputArea-output').waitFor({ timeout: 60_000 });
    assert.equal((await cell.locator('.cm-content').innerText()).trim(), CODE, 'the saved cell');
    assert.match((await cell.locator('.jp-OutputArea-output').innerText()).trim(), VERSION, 'its saved output');
    assert.ok(await notebookSaved(lab, NOTEBOOK, CODE, VERSION), 'the file is unchanged on disk');
    await keepDom(lab, 'notebook after restart');
  });

  await step('a new terminal: the shell history still holds echo ok', lab, async () => {
    await lab.keyboard.press('Control+Shift+L');
    await launcherCard(lab, 'Terminal').click();
    const rows = await terminalRun(lab, 'history', (r) => r.some((l) => /^\s*\d+\s+history$/.test(l)));
    assert.ok(rows.some((l) => /^\s*\d+\s+echo ok$/.test(l)),
      `"echo ok" from before the restart is in the history:\n${rows.filter(Boolean).join('\n')}`);
    await keepDom(lab, 'terminal after restart');
  });

  await lab.close({ runBeforeUnload: false });
  await page.close();
});

test('no Jupyter token in any page source, URL or console message', () => {
  const tokens = jupyterTokens();
  assert.ok(tokens.length >= 2, `one token per runtime start was read from labd's database (${tokens.length})`);
  // There was something to look at: JupyterLab's pages, its API and WebSockets.
  assert.ok(seen.sources.some((s) => s.text.includes('jupyter-config-data')), 'JupyterLab page sources were kept');
  assert.ok(seen.urls.some((u) => u.includes(`${JUPYTER}api/kernels/`)), 'kernel requests were seen');
  assert.ok(sockets().some((p) => /\/api\/kernels\/[^/]+\/channels$/.test(p)), 'kernel WebSockets were seen');
  const leaks = [];
  const look = (where, text) => {
    for (const t of tokens) if (text.includes(t)) leaks.push(`${where}: ${text.slice(0, 160)}`);
  };
  for (const u of seen.urls) {
    look('URL', u);
    if (/[?&]token=/.test(u)) leaks.push(`URL with a token parameter: ${u}`);
  }
  for (const c of seen.console) look('console', c);
  for (const s of seen.sources) {
    look(`source of ${s.url}`, s.text);
    // JupyterLab's page config carries the token it was given: it must be empty.
    const m = s.text.match(/"token":\s*"([^"]*)"/);
    if (m && m[1]) leaks.push(`source of ${s.url}: page config token "${m[1].slice(0, 6)}…"`);
  }
  assert.deepEqual(leaks, [], 'Jupyter tokens shown to the browser');
});
