// labd browser test of the login page's throttling messages. run.sh gives this file a
// daemon of its own (login.ini: a 4 s delay from the 2nd failure, at most 8 s), so the
// backoff of 127.0.0.1 that these failures build up throttles no other test.
//
// A fresh user's wrong passwords are submitted through the form until the page says
// the attempts are throttled; each message is asserted as the page shows it
// (web/static/login.js, from the server's /login?error= redirect). Inside the delay
// even the right password is refused with the same message and no session; once the
// delay has run it logs in: failures slow attempts down, they never lock the account.
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
  throttled: 'Too many failed attempts: wait a little and try again (each failure makes the wait longer).',
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

test('wrong passwords: the page says throttled, refuses the right one inside the delay, then lets it in', T, async (t) => {
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
    const deadline = Date.now() + 30_000;
    while (!codes.includes('throttled')) {
      assert.ok(Date.now() < deadline, `no throttling within 30 s; the page said: ${codes.join(', ')}`);
      const { code, text } = await submit(page, 'wrong-password-123');
      codes.push(code);
      assert.ok(code in MESSAGES, `unexpected error code ${code}`);
      assert.equal(text, MESSAGES[code], `the message for ?error=${code}`);
    }
    t.diagnostic(`the page said, one submission after the other: ${codes.join(', ')}`);
    // the order the policy gives: plain failures, then the delay
    assert.deepEqual(codes, ['invalid', 'invalid', 'throttled']);

    // inside the delay even the right password is refused, with the same message, no session
    const right = await submit(page, PASSWORD);
    assert.deepEqual(right, { code: 'throttled', text: MESSAGES.throttled });
    assert.equal((await context.cookies(BASE)).find((c) => c.name === 'labd_session'), undefined, 'no session cookie');
    const api = await apiLogin(USER, PASSWORD);
    assert.equal(api.status, 429);
    assert.equal((await api.json()).error.code, 'throttled');
    assert.ok(Number(api.headers.get('retry-after')) >= 1, 'Retry-After on the 429');

    assert.deepEqual(consoleErrors, [], 'console errors on the login page');

    // no lockout: once the delay has run, the right password logs in (attempts inside
    // the delay are not counted, so retrying does not extend it)
    const loginDeadline = Date.now() + 20_000;
    for (;;) {
      assert.ok(Date.now() < loginDeadline, 'the right password never got in after the delay');
      await page.goto('/login');
      await page.locator('#username').fill(USER);
      await page.locator('#password').fill(PASSWORD);
      await Promise.all([
        page.waitForURL((url) => url.pathname === '/dashboard' || url.searchParams.has('error')),
        page.locator('#password').press('Enter'),
      ]);
      const url = new URL(page.url());
      if (url.pathname === '/dashboard') break;
      assert.equal(url.searchParams.get('error'), 'throttled', `while waiting: ${page.url()}`);
    }
    assert.ok((await context.cookies(BASE)).find((c) => c.name === 'labd_session'), 'a session cookie after login');
  } finally {
    await context.close();
  }
});
