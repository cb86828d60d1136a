// lab_browser.mjs - the browser half of test_slurm_restart.py's browser test (not a node
// test file; run with `node`): real Chromium opens the head's dashboard, logs in as admin,
// starts a CPU runtime (Slurm places it on a node), opens JupyterLab through the head's
// proxy, runs print(6*7) in a notebook and sees 42, then stops the runtime from the
// dashboard. The login, dashboard and JupyterLab steps are tests/e2e/lab-lib.mjs's.
//
// Environment: LABD_URL (the head), LABD_ADMIN_PASSWORD. Prints "runtime <id>" once it
// runs and "ok" at the end; exits non-zero with the failed step named (a screenshot of it
// under LABD_E2E_ARTIFACTS). The runtime is stopped whatever happened.
import assert from 'node:assert/strict';
import { launchChromium } from '../e2e/browser.mjs';
import {
  BASE, ADMIN_PW, USER, JUPYTER, step as runStep, stepOnce as runStepOnce, countNetworkChanges, formLogin, api, apiSession,
  stopRuntimeByApi, startFromDashboard, stopFromDashboard, openLabTab, waitLab, createNotebook,
  notebookPanel, runFirstCell,
} from '../e2e/lab-lib.mjs';

const step = (name, page, fn) => runStep('slurm-lab', name, page, fn);

const stepOnce = (name, page, fn) => runStepOnce('slurm-lab', name, page, fn);

async function main() {
  const browser = await launchChromium();
  try {
    const context = await browser.newContext({ baseURL: BASE, viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(30_000);
    context.setDefaultNavigationTimeout(60_000);
    context.on('page', (p) => {
      p.on('dialog', (d) => d.accept().catch(() => {}));
      // a request the browser saw fail (the proxy's path to the node): named on stderr
      countNetworkChanges(p);
      p.on('requestfailed', (req) => {
        console.error(`request failed: ${req.method()} ${req.url()}: ${req.failure()?.errorText || ''}`);
      });
    });
    const page = await context.newPage();

    await step('log in', page, () => formLogin(page, USER, ADMIN_PW));
    await step('start a CPU runtime from the dashboard', page, () => startFromDashboard(page));
    const rt = (await api(await apiSession(), 'GET', '/me/runtime')).body.runtime;
    console.log(`runtime ${rt.id}`);

    const lab = await step('open JupyterLab through the head', page, async () => {
      const tab = await openLabTab(context, page);
      await tab.locator('.jp-DirListing-content').waitFor({ timeout: 60_000 });
      return tab;
    });

    const name = `slurm-${Date.now().toString(36)}.ipynb`;
    await step('create a notebook', lab, () => createNotebook(lab, name));

    await stepOnce('open the notebook, run print(6*7) and see 42', lab, async () => {
      const res = await lab.goto(`${JUPYTER}lab/tree/${encodeURIComponent(name)}`);
      assert.equal(res.status(), 200, 'the notebook page loads');
      await waitLab(lab);
      await notebookPanel(lab).locator('.jp-Cell.jp-CodeCell').first().waitFor({ timeout: 60_000 });
      const out = await runFirstCell(lab, 'print(6*7)');
      assert.equal((await out.innerText()).trim(), '42');
    });

    await step('stop the runtime from the dashboard', page, async () => {
      await lab.close({ runBeforeUnload: false });
      await page.bringToFront();
      await stopFromDashboard(page);
    });
    console.log('ok');
  } finally {
    await stopRuntimeByApi().catch((err) => console.error(`cleanup: ${err.message}`));
    await browser.close().catch(() => {});
  }
}

main().catch((err) => {
  console.error(err.stack || String(err));
  process.exit(1);
});
