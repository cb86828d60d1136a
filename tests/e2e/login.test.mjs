// labd browser test of the login page's throttling messages. run.sh gives this file a
// daemon of its own (login.ini: backoff from the 2nd failure, lockout at the 4th), so
// the backoff of 127.0.0.1 that these failures build up throttles no other test.
//
// A fresh user's wrong passwords are submitted through the form until the page says
// the attempts are throttled, then until it says the account is locked; each message
// is asserted as the page shows it (web/static/login.js, from the server's
// /login?error= redirect), then the right password is refused while locked.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launchChromium } from './browser.mjs';

const BASE = (process.env.LABD_URL || '').replace(/\/+$/, '');
const ADMIN_PW = process.env.LABD_ADMIN_PASSWORD || '';
const T = { timeout: 90_000 };

const USER = 'e2elock';
const PASSWORD = 'lock-test-password-1';
const MESSAGES = {
  invalid: 'Wrong user name or password.',
  throttled: 'Too many attempts; wait a moment and try again.',
  locked: 'Too many failed attempts: this account is locked for 15 minutes.',
};

if (!BASE || !ADMIN_PW) {
  throw new Error('LABD_URL and LABD_ADMIN_PASSWORD must be set (use tests/e2e/run.sh)');
}

let browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => {
  if (browser) await browser.close();
});

async function apiLogin(username, password) {
  return fetch(`${BASE}/api/v1/login`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
}

/* One form submission; returns the ?error= code the page was sent back with and the
 * message it shows. */
async function submit(page, password) {
  const res = await page.goto('/login');
  assert.equal(res.status(), 200, 'GET /login');
  await page.locator('#login-title', { hasText: 'Log in' }).waitFor();
  await page.locator('#username').fill(USER);
  await page.locator('#password').fill(password);
  await Promise.all([
    page.waitForURL((url) => url.pathname === '/login' && url.searchParams.has('error')),
    page.locator('#password').press('Enter'),
  ]);
  const code = new URL(page.url()).searchParams.get('error');
  const box = page.locator('#login-error');
  await box.waitFor({ state: 'visible' });
  assert.equal(await box.getAttribute('role'), 'alert');
  return { code, text: (await box.textContent()).trim() };
}

test('wrong passwords: the page says throttled, then locked, and the right one is refused', T, async (t) => {
  // a fresh user, made through the API before any failure from this address
  const admin = await apiLogin('admin', ADMIN_PW);
  assert.equal(admin.status, 200, 'admin API login');
  const body = await admin.json();
  const cookie = admin.headers.getSetCookie().map((c) => c.split(';')[0]).find((c) => c.startsWith('labd_session='));
  const made = await fetch(`${BASE}/api/v1/users`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Cookie: cookie, 'X-CSRF-Token': body.csrf_token },
    body: JSON.stringify({ name: USER, role: 'user', password: PASSWORD }),
  });
  assert.equal(made.status, 201, `creating ${USER}`);

  const context = await browser.newContext({ baseURL: BASE });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const consoleErrors = [];
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
  try {
    const codes = [];
    const shown = {};
    const deadline = Date.now() + 60_000;
    while (!codes.includes('locked')) {
      assert.ok(Date.now() < deadline, `no lockout within 60 s; the page said: ${codes.join(', ')}`);
      const { code, text } = await submit(page, 'wrong-password-123');
      codes.push(code);
      assert.ok(code in MESSAGES, `unexpected error code ${code}`);
      assert.equal(text, MESSAGES[code], `the message for ?error=${code}`);
      shown[code] = text;
    }
    t.diagnostic(`the page said, one submission after the other: ${codes.join(', ')}`);
    // the order the policy gives: plain failures, then a backoff, then the lockout
    assert.equal(codes[0], 'invalid', codes.join(', '));
    const throttledAt = codes.indexOf('throttled');
    assert.ok(throttledAt > 0 && throttledAt < codes.indexOf('locked'), `throttled before locked: ${codes.join(', ')}`);
    assert.equal(shown.throttled, 'Too many attempts; wait a moment and try again.');
    assert.equal(shown.locked, 'Too many failed attempts: this account is locked for 15 minutes.');

    // locked: even the right password is refused, with the same message and no session
    const right = await submit(page, PASSWORD);
    assert.deepEqual(right, { code: 'locked', text: MESSAGES.locked });
    const cookies = await context.cookies(BASE);
    assert.equal(cookies.find((c) => c.name === 'labd_session'), undefined, 'no session cookie');
    const api = await apiLogin(USER, PASSWORD);
    assert.equal(api.status, 429);
    assert.equal((await api.json()).error.code, 'account_locked');
    assert.deepEqual(consoleErrors, [], 'console errors on the login page');
  } finally {
    await context.close();
  }
});
