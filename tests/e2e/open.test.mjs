// labd browser test of "Open in labd" (/open?repo=&path=, web/static/open.js): a
// logged-out visitor of a link goes through the login form and comes back to the same
// link, query and all; the page then shows labd's refusal of a link it will not open
// (a file: URL, a path with ..) and starts nothing; a link it accepts does nothing until
// the user presses Open, even when another site sent the browser there (the review's
// "acts on page load"); the press starts the user's runtime from the page, and git's
// failure to clone (nothing listens where the link points) is shown. A clone that works
// needs a Git host the runtime can reach and is covered by tests/integration/test_open.py.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launchChromium } from './browser.mjs';
import { api, apiLogin } from './console-lib.mjs';

const BASE = (process.env.LABD_URL || '').replace(/\/+$/, '');
const ADMIN_PW = process.env.LABD_ADMIN_PASSWORD || '';
const T = { timeout: 90_000 };
const USER = 'e2eopen';
const PASSWORD = 'open-test-password-1';

if (!BASE || !ADMIN_PW) {
  throw new Error('LABD_URL and LABD_ADMIN_PASSWORD must be set (use tests/e2e/run.sh)');
}

let browser;
const pageErrors = [];
const consoleErrors = [];

before(async () => {
  browser = await launchChromium();
  const admin = await apiLogin('admin', ADMIN_PW);
  const res = await api(admin, 'POST', '/users', { name: USER, role: 'user', password: PASSWORD });
  assert.ok(res.status === 201 || res.status === 409, `creating ${USER}: ${res.status}`);
});

after(async () => {
  if (browser) await browser.close();
});

async function newPage() {
  const context = await browser.newContext({ baseURL: BASE });
  const page = await context.newPage();
  page.on('pageerror', (err) => pageErrors.push(`${page.url()}: ${err.message}`));
  page.on('console', (msg) => {
    // expected: the 400 of a refused link (the page and its POST), and the 409 of the
    // first POST when no runtime runs (the page asks labd to check the link before it
    // starts a runtime for it)
    if (msg.type() === 'error' && !/status of (400|409)/.test(msg.text())) consoleErrors.push(msg.text());
  });
  return page;
}

test('a logged-out visit logs in and comes back to the link, which is refused by name', T, async () => {
  const link = '/open?' + new URLSearchParams({ repo: 'file:///etc', path: 'nb/a b.ipynb' });
  const page = await newPage();
  await page.goto(link);
  await page.waitForURL((url) => url.pathname === '/login');
  assert.equal(new URL(page.url()).searchParams.get('next'), link);
  await page.locator('#username').fill(USER);
  await page.locator('#password').fill(PASSWORD);
  await Promise.all([
    page.waitForURL((url) => url.pathname === '/open'),
    page.locator('#password').press('Enter'),
  ]);
  const here = new URL(page.url());
  assert.equal(here.pathname + here.search, link, 'back at the very link');
  assert.equal(await page.locator('#open-repo').textContent(), 'file:///etc');
  assert.equal(await page.locator('#open-path').textContent(), 'nb/a b.ipynb');
  await page.locator('#open-confirm:enabled').click();
  const error = page.locator('#open-error');
  await error.waitFor({ state: 'visible' });
  assert.match(await error.textContent(), /only http:\/\/ and https:\/\//);
  assert.equal(await page.locator('#open-go').isHidden(), true);
  // nothing was started for the refused link
  const me = await apiLogin(USER, PASSWORD);
  assert.equal((await api(me, 'GET', '/me/runtime')).body.runtime, null);
  await page.context().close();
});

test('a path leaving the repository is refused on the page', T, async () => {
  const page = await newPage();
  const res = await page.goto('/login');
  assert.equal(res.status(), 200);
  await page.locator('#username').fill(USER);
  await page.locator('#password').fill(PASSWORD);
  await Promise.all([page.waitForURL((url) => url.pathname === '/dashboard'),
    page.locator('#password').press('Enter')]);
  const doc = await page.goto('/open?' + new URLSearchParams({ repo: 'https://git.example/r.git', path: '../x.ipynb' }));
  assert.equal(doc.status(), 400, 'the page itself answers 400');
  await page.locator('#open-confirm:enabled').click();
  const error = page.locator('#open-error');
  await error.waitFor({ state: 'visible' });
  assert.match(await error.textContent(), /\.\. segments/);
  await page.context().close();
});

test('a link sent from another site waits for a press, which starts the runtime and shows why the clone failed', { timeout: 240_000 }, async () => {
  // 127.0.0.1 inside the sandbox is the runtime's own loopback: nothing leaves it, and
  // nothing listens on port 9, so git's clone fails at once
  const repo = 'http://127.0.0.1:9/nothing.git';
  const link = BASE + '/open?' + new URLSearchParams({ repo, path: 'a.ipynb' });
  const me = await apiLogin(USER, PASSWORD);
  assert.equal((await api(me, 'GET', '/me/runtime')).body.runtime, null, 'no runtime before');
  const page = await newPage();
  await page.goto('/login');
  await page.locator('#username').fill(USER);
  await page.locator('#password').fill(PASSWORD);
  await Promise.all([page.waitForURL((url) => url.pathname === '/dashboard'),
    page.locator('#password').press('Enter')]);
  // a page of another site (answered here, never on the network) sends the logged-in
  // browser to the link: a top-level navigation, so the session cookie goes along
  await page.route('http://elsewhere.example/**', (route) => route.fulfill({
    contentType: 'text/html',
    body: `<!doctype html><script>top.location = ${JSON.stringify(link)};</script>`,
  }));
  const posts = [];
  page.on('request', (r) => {
    if (r.method() !== 'GET') posts.push(`${r.method()} ${new URL(r.url()).pathname}`);
  });
  try {
    await Promise.all([page.waitForURL((url) => url.pathname === '/open'),
      page.goto('http://elsewhere.example/lure')]);
    assert.equal(await page.locator('#open-repo').textContent(), repo);
    // what the page would have done on its own by now: a runtime start is one POST away
    await page.waitForTimeout(3000);
    assert.deepEqual(posts, [], 'nothing was asked of labd before the press');
    assert.equal((await api(me, 'GET', '/me/runtime')).body.runtime, null, 'no runtime started');
    assert.equal((await api(me, 'GET', '/me/runtime/open')).status, 404, 'no open started');
    const confirm = page.locator('#open-confirm:enabled');
    await confirm.waitFor({ state: 'visible' });
    assert.match(await page.locator('#open-runtime').textContent(), /starts a CPU runtime/);
    await confirm.click();
    const error = page.locator('#open-error');
    await error.waitFor({ state: 'visible', timeout: 200_000 });
    assert.match(await error.textContent(), /git clone failed/);
    assert.equal((await api(me, 'GET', '/me/runtime')).body.runtime.state, 'running',
      'the press started the runtime');
    const open = (await api(me, 'GET', '/me/runtime/open')).body.open;
    assert.equal(open.result, 'failed');
    assert.equal(open.repo, repo);
  } finally {
    await page.context().close();
    await api(me, 'DELETE', '/me/runtime');
    for (let i = 0; i < 120; i++) {
      const r = (await api(me, 'GET', '/me/runtime')).body.runtime;
      if (!r || r.state === 'stopped' || r.state === 'failed') break;
      await new Promise((res) => setTimeout(res, 500));
    }
  }
});

test('no script error on the open page', T, async () => {
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});
