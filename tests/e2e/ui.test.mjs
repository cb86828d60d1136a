// labd browser tests: Debian's Chromium, headless, driven by npm playwright-core through
// node's built-in test runner. Started by tests/e2e/run.sh, which runs a throw-away daemon
// and passes LABD_URL and LABD_ADMIN_PASSWORD.
//
// The tests in this file run in order and share the daemon's state (users created here).
// Login throttling counts failures per client address (backoff after 3), so the whole file
// makes only two failed logins.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launchChromium } from './browser.mjs';

const BASE = (process.env.LABD_URL || '').replace(/\/+$/, '');
const ADMIN_PW = process.env.LABD_ADMIN_PASSWORD || '';
const T = { timeout: 60_000 };

if (!BASE || !ADMIN_PW) {
  throw new Error('LABD_URL and LABD_ADMIN_PASSWORD must be set (use tests/e2e/run.sh)');
}

let browser;
const contexts = [];
// Every console message and uncaught page error of every page, for the CSP check.
const consoleLog = [];
const pageErrors = [];
// Every page document loaded (path and HTTP status) and every page a test saw rendered
// (a known element visible): the CSP check at the end means nothing unless they did.
const documents = [];
const rendered = new Set();

before(async () => {
  browser = await launchChromium();
});

after(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  if (browser) await browser.close();
});

/* A fresh browser profile (no cookies) with one page, logging its console. */
async function newPage() {
  const context = await browser.newContext({ baseURL: BASE });
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  page.setDefaultNavigationTimeout(15_000);
  page.on('console', (msg) => {
    consoleLog.push({ type: msg.type(), text: msg.text(), url: page.url() });
  });
  page.on('pageerror', (err) => pageErrors.push(`${page.url()}: ${err.message}`));
  page.on('response', (res) => {
    const req = res.request();
    if (req.isNavigationRequest() && req.frame() === page.mainFrame()) {
      documents.push({ path: new URL(res.url()).pathname, status: res.status() });
    }
  });
  // Dialogs (confirm before delete/revoke/reset) are accepted.
  page.on('dialog', (d) => d.accept());
  return { context, page };
}

const isPath = (path) => (url) => url.pathname === path;

/* Log in through the form: type, press Enter, wait for the redirect away from /login. */
async function formLogin(page, username, password, { expectPath = '/dashboard' } = {}) {
  if (new URL(page.url(), BASE).pathname !== '/login') await page.goto('/login');
  await page.locator('#username').fill(username);
  await page.locator('#password').fill(password);
  await Promise.all([page.waitForURL(isPath(expectPath)), page.locator('#password').press('Enter')]);
}

async function waitSignedIn(page, name) {
  await page.locator('#whoami', { hasText: `Signed in as ${name}` }).waitFor();
  assert.equal(await page.locator('#whoami').textContent(), `Signed in as ${name}`);
  rendered.add(new URL(page.url()).pathname);
}

/* The login page rendered: its heading is visible. */
async function loginRendered(page) {
  await page.locator('#login-title', { hasText: 'Log in' }).waitFor();
  rendered.add('/login');
}

/* The last document loaded for path, or undefined. */
function lastDocument(path) {
  return documents.filter((d) => d.path === path).at(-1);
}

const isCspMessage = (text) => /Content[- ]Security[- ]Policy/i.test(text);

async function logout(page) {
  // The CSRF field is filled from /api/v1/me; wait for it before posting.
  await waitValue(page, '#logout-csrf');
  await Promise.all([page.waitForURL(isPath('/login')), page.locator('#logout').click()]);
}

/* Waits until an input has a non-empty value (without page-side eval). */
async function waitValue(page, selector) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const v = await page.locator(selector).inputValue();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${selector} stayed empty`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/* JSON API from Node, outside the browser. */
async function apiLogin(username, password) {
  const res = await fetch(`${BASE}/api/v1/login`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  const body = await res.json().catch(() => null);
  assert.equal(res.status, 200, `API login as ${username}: ${JSON.stringify(body)}`);
  const cookie = res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .find((c) => c.startsWith('labd_session='));
  assert.ok(cookie, 'API login sets labd_session');
  return { cookie, csrf: body.csrf_token };
}

async function api(session, method, path, body) {
  const headers = { Cookie: session.cookie };
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
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function bearerMe(token) {
  const res = await fetch(`${BASE}/api/v1/me`, { headers: { Authorization: `Bearer ${token}` } });
  return { status: res.status, body: await res.json().catch(() => null) };
}

function cspMessages() {
  return consoleLog.filter((m) => isCspMessage(m.text));
}

/* The row of a table whose first cell is exactly `name`. */
function row(page, table, name) {
  return page.locator(`${table} tbody tr[data-name="${name}"]`);
}

// ---------------------------------------------------------------------------------------

test('admin logs in through the form and lands on the dashboard', T, async () => {
  const { context, page } = await newPage();
  const first = consoleLog.length;

  const res = await page.goto('/login');
  assert.equal(res.status(), 200);
  await loginRendered(page);
  // The CSP is really in force, so the console check below means something.
  assert.match(res.headers()['content-security-policy'] || '', /script-src 'self'/);

  // Every input is labelled.
  for (const id of ['username', 'password']) {
    assert.equal(await page.locator(`label[for="${id}"]`).count(), 1, `label for #${id}`);
  }
  assert.equal(await page.locator('#login-error').isVisible(), false, 'no error shown at first');

  await formLogin(page, 'admin', ADMIN_PW);
  assert.equal(new URL(page.url()).pathname, '/dashboard');
  await waitSignedIn(page, 'admin');
  assert.equal(lastDocument('/dashboard')?.status, 200, 'the dashboard loaded with 200');

  // The runtime card has loaded: no runtime yet, so one can be started and none stopped.
  await page.locator('#runtime', { hasText: 'No runtime yet' }).waitFor();
  assert.equal(await page.locator('#start-cpu').isDisabled(), false);
  assert.equal(await page.locator('#start-gpu').isDisabled(), false);
  assert.equal(await page.locator('#stop-runtime').isDisabled(), true);
  // Admins see the link to the admin console.
  await page.locator('#admin-link').waitFor({ state: 'visible' });

  const cookies = await context.cookies(BASE);
  const session = cookies.find((c) => c.name === 'labd_session');
  assert.ok(session, 'labd_session cookie set');
  assert.equal(session.httpOnly, true, 'session cookie is HttpOnly');
  assert.equal(session.sameSite, 'Lax', 'session cookie is SameSite=Lax');
  assert.equal(session.path, '/');

  const errors = consoleLog.slice(first).filter((m) => m.type === 'error');
  assert.deepEqual(errors, [], 'no console errors on login and dashboard');
  assert.deepEqual(pageErrors, [], 'no uncaught script errors');
  await context.close();
});

test('a wrong password shows the error and stays on /login', T, async () => {
  const { context, page } = await newPage();
  await page.goto('/login');
  await formLogin(page, 'admin', 'not-the-admin-password', { expectPath: '/login' });
  const url = new URL(page.url());
  assert.equal(url.pathname, '/login');
  assert.equal(url.searchParams.get('error'), 'invalid');
  const box = page.locator('#login-error');
  await box.waitFor({ state: 'visible' });
  assert.equal((await box.textContent()).trim(), 'Wrong user name or password.');
  assert.equal(await box.getAttribute('role'), 'alert');
  const cookies = await context.cookies(BASE);
  assert.equal(cookies.find((c) => c.name === 'labd_session'), undefined, 'no session cookie');
  await context.close();
});

test('admin creates a user, who logs in, has no admin link and gets 403 on /admin', T, async () => {
  const { context, page } = await newPage();
  await formLogin(page, 'admin', ADMIN_PW);
  await waitSignedIn(page, 'admin');

  await Promise.all([page.waitForURL(isPath('/admin')), page.locator('#admin-link').click()]);
  await row(page, '#users', 'admin').waitFor();

  await page.locator('#new-name').fill('e2euser');
  await page.locator('#new-role').selectOption('user');
  await page.locator('#new-password').fill('e2e-user-password-1');
  await page.locator('#create-user').click();

  const r = row(page, '#users', 'e2euser');
  await r.waitFor();
  assert.match(await r.textContent(), /user/);
  assert.match(await r.textContent(), /active/);
  // A password was typed in, so none is generated or shown.
  assert.equal(await page.locator('#created-password').isVisible(), false);
  assert.equal(await page.locator('#admin-error').isVisible(), false);

  await logout(page);
  assert.equal(new URL(page.url()).pathname, '/login');

  await formLogin(page, 'e2euser', 'e2e-user-password-1');
  await waitSignedIn(page, 'e2euser');
  // The tokens list loaded too, so /me has answered and the admin link stays hidden.
  await page.locator('#tokens tbody td', { hasText: 'No tokens yet.' }).waitFor();
  assert.equal(await page.locator('#admin-link').isVisible(), false, 'no admin link for a user');

  const res = await page.goto('/admin');
  assert.equal(res.status(), 403);
  await page.locator('h1', { hasText: 'Forbidden' }).waitFor();
  assert.equal(await page.locator('a[href="/dashboard"]').count() > 0, true, '403 page links to the dashboard');
  await context.close();
});

test('an API token is shown once, works as a bearer token and stops working when revoked', T, async () => {
  const { context, page } = await newPage();
  await formLogin(page, 'admin', ADMIN_PW);
  await waitSignedIn(page, 'admin');
  await page.locator('#tokens tbody td', { hasText: 'No tokens yet.' }).waitFor();

  await page.locator('#token-name').fill('e2e-token');
  await page.locator('#token-create').click();
  await page.locator('#new-token').waitFor({ state: 'visible' });
  const token = (await page.locator('#new-token').textContent()).trim();
  assert.match(token, /^labd_\S{16,}$/);
  assert.match(await page.locator('#new-token-box').textContent(), /not be shown again/);
  const r = row(page, '#tokens', 'e2e-token');
  await r.waitFor();
  // The list only shows the prefix, never the token itself.
  assert.equal((await page.locator('#tokens').textContent()).includes(token), false);

  const me = await bearerMe(token);
  assert.equal(me.status, 200);
  assert.equal(me.body.name, 'admin');
  assert.equal(me.body.auth, 'token');

  // Shown once: after a reload only the list entry is left.
  await page.reload();
  await r.waitFor();
  assert.equal(await page.locator('#new-token-box').isVisible(), false);
  assert.equal((await page.content()).includes(token), false, 'token not on the page after reload');

  await r.getByRole('button', { name: /Revoke/ }).click();
  await r.waitFor({ state: 'detached' });
  await page.locator('#tokens tbody td', { hasText: 'No tokens yet.' }).waitFor();
  assert.equal(await page.locator('#token-error').isVisible(), false);

  const gone = await bearerMe(token);
  assert.equal(gone.status, 401);
  await context.close();
});

test('changing the password on the dashboard: old one fails, new one works', T, async () => {
  const admin = await apiLogin('admin', ADMIN_PW);
  const created = await api(admin, 'POST', '/users', { name: 'e2epw', role: 'user', password: 'old-password-123' });
  assert.equal(created.status, 201, JSON.stringify(created.body));

  const { context, page } = await newPage();
  await formLogin(page, 'e2epw', 'old-password-123');
  await waitSignedIn(page, 'e2epw');

  // A mismatched repeat is caught before anything is sent.
  await page.locator('#current-password').fill('old-password-123');
  await page.locator('#new-password').fill('new-password-456');
  await page.locator('#repeat-password').fill('new-password-457');
  await page.locator('#password-submit').click();
  await page.locator('#password-error', { hasText: 'do not match' }).waitFor();

  await page.locator('#repeat-password').fill('new-password-456');
  await page.locator('#password-submit').click();
  await page.locator('#password-message', { hasText: 'Password changed' }).waitFor();
  assert.equal(await page.locator('#password-error').isVisible(), false);
  assert.equal(await page.locator('#current-password').inputValue(), '', 'form cleared');

  await logout(page);
  await formLogin(page, 'e2epw', 'old-password-123', { expectPath: '/login' });
  await page.locator('#login-error', { hasText: 'Wrong user name or password.' }).waitFor();

  await formLogin(page, 'e2epw', 'new-password-456');
  await waitSignedIn(page, 'e2epw');
  await context.close();
});

test('an unauthenticated visit to /dashboard goes to the login page and back', T, async () => {
  const { context, page } = await newPage();
  await page.goto('/dashboard');
  const url = new URL(page.url());
  assert.equal(url.pathname, '/login');
  assert.equal(url.searchParams.get('next'), '/dashboard');
  assert.match(url.search, /next=(%2F|\/)dashboard/);
  assert.equal(await page.locator('#next').inputValue(), '/dashboard', 'next carried into the form');
  assert.equal(await page.locator('#login-error').isVisible(), false);

  await formLogin(page, 'admin', ADMIN_PW);
  assert.equal(new URL(page.url()).pathname, '/dashboard');
  await waitSignedIn(page, 'admin');
  await context.close();
});

test('admin console: generated password, roles, disable, reset, duplicate, delete', T, async () => {
  const { context, page } = await newPage();
  // Not logged in: /admin sends us to the login page, which sends us back.
  await page.goto('/admin');
  assert.equal(new URL(page.url()).searchParams.get('next'), '/admin');
  await formLogin(page, 'admin', ADMIN_PW, { expectPath: '/admin' });
  await waitSignedIn(page, 'admin');
  await row(page, '#users', 'admin').waitFor();

  // No password typed: labd generates one and the page shows it.
  await page.locator('#new-name').fill('e2egen');
  await page.locator('#create-user').click();
  await page.locator('#created-password').waitFor({ state: 'visible' });
  const generated = (await page.locator('#created-password').textContent()).trim();
  assert.ok(generated.length >= 10, `generated password shown (${generated.length} chars)`);
  const r = row(page, '#users', 'e2egen');
  await r.waitFor();
  const session = await apiLogin('e2egen', generated);
  assert.equal((await api(session, 'GET', '/me')).body.name, 'e2egen');

  // Make admin, then back to user.
  await r.getByRole('button', { name: /Make admin/ }).click();
  await r.locator('.role', { hasText: 'admin' }).waitFor();
  await r.getByRole('button', { name: /Make user/ }).click();
  await r.locator('.role', { hasText: 'user' }).waitFor();

  // Disable: the user's session ends. Enable again.
  await r.getByRole('button', { name: /Disable/ }).click();
  await r.locator('.status', { hasText: 'disabled' }).waitFor();
  assert.equal((await api(session, 'GET', '/me')).status, 401, 'disabled user is logged out');
  await r.getByRole('button', { name: /Enable/ }).click();
  await r.locator('.status', { hasText: 'active' }).waitFor();

  // Reset password: a new one is shown and works.
  await r.getByRole('button', { name: /Reset password/ }).click();
  await page.locator('#reset-password').waitFor({ state: 'visible' });
  const reset = (await page.locator('#reset-password').textContent()).trim();
  assert.ok(reset.length >= 10 && reset !== generated, 'a new password is shown');
  const again = await apiLogin('e2egen', reset);
  assert.equal((await api(again, 'GET', '/me')).body.name, 'e2egen');

  // A duplicate name shows the API's error message.
  await page.locator('#new-name').fill('e2egen');
  await page.locator('#new-password').fill('whatever-password-1');
  await page.locator('#create-user').click();
  const err = page.locator('#admin-error');
  await err.waitFor({ state: 'visible' });
  assert.ok((await err.textContent()).trim().length > 0, 'error message shown');

  // Delete (after confirm()).
  await r.getByRole('button', { name: /Delete/ }).click();
  await r.waitFor({ state: 'detached' });
  const admin = await apiLogin('admin', ADMIN_PW);
  assert.equal((await api(admin, 'GET', '/users/e2egen')).status, 404);
  await context.close();
});

test('no Content-Security-Policy violation or script error was logged', T, async () => {
  // There was something to check: the pages loaded (200) and rendered.
  for (const path of ['/login', '/dashboard', '/admin']) {
    assert.ok(documents.some((d) => d.path === path && d.status === 200),
      `${path} never loaded with 200: ${JSON.stringify(documents)}`);
  }
  assert.deepEqual([...rendered].sort(), ['/admin', '/dashboard', '/login'],
    'pages the tests saw rendered');
  // And a violation would have been seen: an inline script on the login page (refused
  // by script-src 'self') shows up as a CSP message in the console (its own context,
  // so the shared log stays clean).
  const context = await browser.newContext({ baseURL: BASE });
  try {
    const page = await context.newPage();
    const seen = [];
    page.on('console', (msg) => seen.push(msg.text()));
    assert.equal((await page.goto('/login')).status(), 200);
    await page.locator('#login-title', { hasText: 'Log in' }).waitFor();
    const refused = page.waitForEvent('console', { predicate: (m) => isCspMessage(m.text()), timeout: 5_000 });
    await page.evaluate(() => {
      const s = document.createElement('script');
      s.textContent = 'document.title = "inline ran";';
      document.head.appendChild(s);
    });
    await refused;
    assert.equal(await page.title(), 'Log in · labd', 'the inline script did not run');
    assert.ok(seen.some(isCspMessage), 'the refused inline script was reported as a CSP violation');
  } finally {
    await context.close();
  }
  assert.deepEqual(cspMessages(), [], 'CSP violations in the console');
  assert.deepEqual(pageErrors, [], 'uncaught errors in pages');
});
