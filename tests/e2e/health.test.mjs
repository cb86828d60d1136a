// The admin console shows what the supervisor found missing on the host (a cgroup
// controller), so an admin sees weakened limits without reading logs. Runs against a labd
// of its own whose supervisor has one gap injected (health.env); tests/e2e/run.sh starts it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launchChromium } from './browser.mjs';

const BASE = (process.env.LABD_URL || '').replace(/\/+$/, '');
const ADMIN_PW = process.env.LABD_ADMIN_PASSWORD || '';
const GAP = 'injected by the e2e test: memory.memsw is missing';

let browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => {
  if (browser) await browser.close();
});

test('the admin console lists the host\'s missing cgroup controllers', { timeout: 60_000 }, async () => {
  const context = await browser.newContext({ baseURL: BASE });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  await page.goto('/login');
  await page.locator('#username').fill('admin');
  await page.locator('#password').fill(ADMIN_PW);
  await Promise.all([page.waitForURL((u) => new URL(u).pathname === '/dashboard'), page.locator('#password').press('Enter')]);
  await page.goto('/admin');
  // The page rendered (its user table filled) before anything is judged.
  await page.locator('#users tbody tr[data-name="admin"]').waitFor();
  const panel = page.locator('#host-health');
  await panel.waitFor({ state: 'visible' });
  assert.match(await page.locator('#host-warnings li').first().innerText(), new RegExp(GAP));
  // The panel shows what the health answer gives admins.
  const h = await page.evaluate(async () => (await fetch('/api/v1/health')).json());
  assert.ok(h.warnings.some((w) => w.includes('memory.memsw is missing')), JSON.stringify(h));
  await context.close();
});
