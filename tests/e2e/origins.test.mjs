// labd browser test of issue 8, class 3: users' content lives on its own origin.
//
// A user ("eve") writes a hostile page into her home and opens it through labd: Jupyter serves
// it under /user/eve/files/ on eve's own origin (eve.localhost). The page tries to read
// /api/v1/me, create a user and an API token with whoever's login opened it, plant labd's
// cookie and register a service worker that would control labd's pages. Each attempt must fail,
// first for eve herself and then for an admin who opens the page with admin_access (which is
// audited). labd's UI runs on http://localhost:<port> here (the user_domain host); Chromium
// resolves localhost and *.localhost to loopback.
//
// Started by tests/e2e/run.sh with origins.ini ([runtime] admin_access = true).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launchChromium } from './browser.mjs';

const API_BASE = (process.env.LABD_URL || '').replace(/\/+$/, ''); // 127.0.0.1, for Node
const ADMIN_PW = process.env.LABD_ADMIN_PASSWORD || '';
if (!API_BASE || !ADMIN_PW) {
  throw new Error('LABD_URL and LABD_ADMIN_PASSWORD must be set (use tests/e2e/run.sh)');
}
const PORT = new URL(API_BASE).port;
const UI = `http://localhost:${PORT}`; // what a browser opens (README)
const EVE = `eve${process.pid % 10000}`;
const EVE_PW = `${EVE}-Correct-Horse-9`;
const EVE_ORIGIN = `http://${EVE}.localhost:${PORT}`;
const START_TIMEOUT = 120_000;

let browser;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* ---- labd's API from Node (its own logins, on 127.0.0.1) ----------------------------- */

async function apiLogin(username, password) {
  const res = await fetch(`${API_BASE}/api/v1/login`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  const body = await res.json();
  assert.equal(res.status, 200, `API login ${username}: ${JSON.stringify(body)}`);
  const cookie = res.headers.getSetCookie().map((c) => c.split(';')[0]).find((c) => c.startsWith('labd_session='));
  return { cookie, csrf: body.csrf_token };
}

async function api(s, method, path, body) {
  const headers = { Cookie: s.cookie, Accept: 'application/json' };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    headers['X-CSRF-Token'] = s.csrf;
  }
  const res = await fetch(`${API_BASE}/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function waitRuntime(s, want) {
  const deadline = Date.now() + START_TIMEOUT;
  for (;;) {
    const cur = (await api(s, 'GET', '/me/runtime')).body?.runtime;
    if (cur && cur.state === want) return cur;
    if (cur && cur.state === 'failed') throw new Error(`runtime failed: ${JSON.stringify(cur)}`);
    if (Date.now() > deadline) throw new Error(`runtime not ${want}: ${JSON.stringify(cur)}`);
    await sleep(500);
  }
}

/* ---- the hostile page --------------------------------------------------------------- */

// Runs on eve's origin with whatever the browser holds: a script file in eve's home that a
// Jupyter page of hers loads (as a notebook's JavaScript output would run; Jupyter serves HTML
// files under /files/ in a CSP sandbox, so an HTML file alone would run with an opaque origin).
// Every attempt is recorded; the test then checks with labd's API that nothing changed.
const HOSTILE = `(async () => {
  const ui = location.protocol + '//' + location.host.split('.').slice(1).join('.');
  const out = {};
  // each attempt settles within 5 s (a hung promise counts as refused)
  const attempt = async (key, fn) => {
    const late = new Promise((_, no) => setTimeout(() => no({ name: 'Timeout' }), 5000));
    try { out[key] = await Promise.race([fn(), late]); } catch (e) { out[key] = 'refused: ' + e.name; }
  };
  // read labd's API with labd's cookie (cross-origin) and on this origin
  await attempt('readMe', async () => {
    const r = await fetch(ui + '/api/v1/me', { credentials: 'include' });
    return 'read ' + r.status + ' ' + (await r.text()).slice(0, 200);
  });
  await attempt('readMeHere', async () => (await fetch('/api/v1/me')).status);
  // create an admin and a token: requests a page may send without a preflight
  const simple = (path, body) => fetch(ui + path, {
    method: 'POST', mode: 'no-cors', credentials: 'include',
    headers: { 'Content-Type': 'text/plain' }, body: JSON.stringify(body) }).then(() => 'sent');
  await attempt('createUser', () => simple('/api/v1/users',
    { name: 'pwned', role: 'admin', password: 'pwned-password-123' }));
  await attempt('createToken', () => simple('/api/v1/me/tokens', { name: 'pwned' }));
  await attempt('createTokenHere', async () => (await fetch('/api/v1/me/tokens', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'pwned' }) })).status);
  // labd's cookie: on this origin, and for the parent domain labd's UI is on
  document.cookie = 'labd_session=planted; path=/';
  document.cookie = 'labd_session=planted-parent; path=/; domain=localhost';
  // a service worker for everything this origin may reach, and one of labd's origin
  const sw = location.pathname.replace(/\\/lab.*$/, '/files/sw.js');
  await attempt('swRoot', async () => (await navigator.serviceWorker.register(sw, { scope: '/' })).scope);
  await attempt('swHere', async () => (await navigator.serviceWorker.register(sw)).scope);
  await attempt('swUi', async () => (await navigator.serviceWorker.register(ui + '/sw.js')).scope);
  const pre = document.createElement('pre');
  pre.id = 'hostile-result';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
`;
const SW = `self.addEventListener('fetch', (e) => e.respondWith(new Response('hijacked by a runtime')));`;

/* Writes a file into eve's home through Jupyter's contents API, from a page on her origin. */
async function putFile(page, name, content) {
  const r = await page.evaluate(
    async ({ url, content }) => {
      const m = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
      const headers = { 'Content-Type': 'application/json' };
      if (m) headers['X-XSRFToken'] = decodeURIComponent(m[1]);
      const res = await fetch(url, {
        method: 'PUT', headers, credentials: 'same-origin',
        body: JSON.stringify({ type: 'file', format: 'text', content }),
      });
      return res.status;
    },
    { url: `/user/${EVE}/api/contents/${name}`, content },
  );
  assert.ok(r === 200 || r === 201, `PUT ${name}: HTTP ${r}`);
}

async function formLogin(page, username, password) {
  await page.goto(`${UI}/login`);
  await page.locator('#username').fill(username);
  await page.locator('#password').fill(password);
  await Promise.all([page.waitForURL((u) => u.pathname === '/dashboard'), page.locator('#password').press('Enter')]);
}

/* Opens eve's Jupyter from labd's origin (the handoff takes the browser to eve's origin),
 * runs the hostile script from her home there and returns what its attempts reported. */
async function runHostile(page) {
  await page.goto(`${UI}/user/${EVE}/lab`);
  assert.equal(new URL(page.url()).origin, EVE_ORIGIN, `served on eve's own origin, not ${page.url()}`);
  await page.addScriptTag({ url: `/user/${EVE}/files/hostile.js` });
  const result = page.locator('#hostile-result');
  await result.waitFor({ state: 'attached', timeout: 60_000 });
  const out = JSON.parse(await result.textContent());
  console.log(`hostile page reported: ${JSON.stringify(out)}`);
  return out;
}

/* What the hostile page must not have achieved, whoever opened it. */
async function assertNothingGained(context, page, out, who, s) {
  assert.match(out.readMe, /^refused: TypeError/, `${who}: a runtime page read /api/v1/me: ${out.readMe}`);
  assert.equal(out.readMeHere, 404, `${who}: labd's API answered on the user origin`);
  assert.equal(out.createTokenHere, 404, `${who}: labd's API answered a POST on the user origin`);
  const users = await api(s.admin, 'GET', '/users/pwned');
  assert.equal(users.status, 404, `${who}: the page created a user: ${JSON.stringify(users.body)}`);
  for (const [name, session] of Object.entries(s.tokensOf)) {
    const list = (await api(session, 'GET', '/me/tokens')).body.tokens.map((t) => t.name);
    assert.ok(!list.includes('pwned'), `${who}: the page created a token for ${name}: ${list}`);
  }
  // labd's cookie in the browser is still the one labd set, and none was planted for labd
  const uiCookies = (await context.cookies(UI)).filter((c) => c.name.startsWith('labd_'));
  assert.deepEqual(uiCookies.map((c) => [c.name, c.value === s.session]), [['labd_session', true]],
    `${who}: labd's cookies on its origin: ${JSON.stringify(uiCookies)}`);
  // no service worker controls labd's pages, and none is registered on labd's origin
  assert.notEqual(out.swUi, `${UI}/`, `${who}: registered a worker on labd's origin`);
  assert.match(String(out.swRoot), /^refused/, `${who}: a worker got scope "/" without Service-Worker-Allowed`);
  await page.goto(`${UI}/dashboard`);
  await page.locator('#whoami').waitFor();
  const sw = await page.evaluate(async () => ({
    controlled: navigator.serviceWorker.controller !== null,
    registrations: (await navigator.serviceWorker.getRegistrations()).length,
    body: document.body.innerText.includes('hijacked'),
  }));
  assert.deepEqual(sw, { controlled: false, registrations: 0, body: false }, `${who}: labd's page ${JSON.stringify(sw)}`);
  // labd still knows who is logged in: the session works as before
  const me = await page.evaluate(async () => (await fetch('/api/v1/me')).json());
  assert.equal(me.name, who, `${who}: /api/v1/me after the attack: ${JSON.stringify(me)}`);
}

const state = { admin: null, eve: null, tokensOf: {} };

before(async () => {
  browser = await launchChromium();
  state.admin = await apiLogin('admin', ADMIN_PW);
  const r = await api(state.admin, 'POST', '/users', { name: EVE, password: EVE_PW });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  state.eve = await apiLogin(EVE, EVE_PW);
  state.tokensOf = { admin: state.admin, [EVE]: state.eve };
  const started = await api(state.eve, 'POST', '/me/runtime', { type: 'cpu' });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  await waitRuntime(state.eve, 'running');
});

/* Stops eve's runtime (if live) and waits until it is down. */
async function stopEve() {
  if (!state.eve || state.eveStopped) return;
  const cur = (await api(state.eve, 'GET', '/me/runtime')).body?.runtime;
  if (cur && ['starting', 'running'].includes(cur.state)) await api(state.eve, 'DELETE', '/me/runtime');
  if (cur && cur.state !== 'failed') await waitRuntime(state.eve, 'stopped');
  state.eveStopped = true;
}

after(async () => {
  try {
    await stopEve();
  } finally {
    if (browser) await browser.close().catch(() => {});
  }
});

test('a page served by a runtime gets nothing of labd as its owner', async () => {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await formLogin(page, EVE, EVE_PW);
    const session = (await context.cookies(UI)).find((c) => c.name === 'labd_session').value;
    await page.goto(`${UI}/user/${EVE}/lab`);
    assert.equal(new URL(page.url()).origin, EVE_ORIGIN, `Jupyter opened on ${page.url()}`);
    // labd's cookie never reaches the user origin; its own cookie is host-only there
    const eveCookies = (await context.cookies(EVE_ORIGIN)).map((c) => c.name);
    assert.ok(!eveCookies.includes('labd_session'), `labd's cookie on eve's origin: ${eveCookies}`);
    assert.ok(eveCookies.includes('labd_rt'), `no runtime cookie on eve's origin: ${eveCookies}`);
    await putFile(page, 'hostile.js', HOSTILE);
    await putFile(page, 'sw.js', SW);
    const out = await runHostile(page);
    await assertNothingGained(context, page, out, EVE, { ...state, session });
  } finally {
    await context.close();
  }
});

test('a page served by a runtime gets nothing of labd as an admin with admin_access', async () => {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await formLogin(page, 'admin', ADMIN_PW);
    const session = (await context.cookies(UI)).find((c) => c.name === 'labd_session').value;
    const out = await runHostile(page);
    await assertNothingGained(context, page, out, 'admin', { ...state, session });
    // the admin's way in was eve's origin, and it is in the audit log
    const audit = await api(state.admin, 'GET', `/audit?limit=500`);
    assert.equal(audit.status, 200, JSON.stringify(audit.body));
    const mine = (audit.body.entries || []).filter((e) => e.action === "runtime.admin_access" && e.target === EVE && e.actor === "admin");
    assert.ok(mine.length >= 1, `no runtime.admin_access entry for ${EVE}: ${JSON.stringify(audit.body)}`);
  } finally {
    await context.close();
  }
});

test("the dashboard's token form asks for the password; a password change revokes tokens", async () => {
  const context = await browser.newContext();
  try {
    // The password change below ends eve's other sessions (the API one of before()), so her
    // runtime is stopped first, while that session can still do it.
    await stopEve();
    const page = await context.newPage();
    await formLogin(page, EVE, EVE_PW);
    await page.locator('#tokens tbody td', { hasText: 'No tokens yet.' }).waitFor();
    // without the password: refused, and the form says what is missing
    await page.locator('#token-name').fill('ci');
    await page.locator('#token-create').click();
    await page.locator('#token-error', { hasText: 'Enter your password to create a token.' }).waitFor();
    assert.equal(await page.locator('#new-token-box').isVisible(), false);
    // with it: the token is shown once
    await page.locator('#token-password').fill(EVE_PW);
    await page.locator('#token-create').click();
    await page.locator('#new-token').waitFor({ state: 'visible' });
    const token = (await page.locator('#new-token').textContent()).trim();
    assert.match(token, /^labd_\S{16,}$/);
    assert.equal(await page.locator('#token-password').inputValue(), '', 'password field cleared');
    const me = await fetch(`${API_BASE}/api/v1/me`, { headers: { Authorization: `Bearer ${token}` } });
    assert.equal(me.status, 200);
    // changing the password revokes the token unless unticked (ticked by default)
    assert.equal(await page.locator('#revoke-tokens').isChecked(), true);
    const next = `${EVE_PW}-new`;
    await page.locator('#current-password').fill(EVE_PW);
    await page.locator('#new-password').fill(next);
    await page.locator('#repeat-password').fill(next);
    await page.locator('#password-submit').click();
    await page.locator('#password-message', { hasText: 'API tokens revoked' }).waitFor();
    await page.locator('#tokens tbody td', { hasText: 'No tokens yet.' }).waitFor();
    const after = await fetch(`${API_BASE}/api/v1/me`, { headers: { Authorization: `Bearer ${token}` } });
    assert.equal(after.status, 401, 'the token stopped working with the password change');
  } finally {
    await context.close();
  }
});
