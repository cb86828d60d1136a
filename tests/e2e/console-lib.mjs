// console-lib.mjs - what console.test.mjs and console-live.test.mjs share (not a test file):
// pages that log their console, form login, the JSON API from Node, and layout checks.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { launchChromium } from './browser.mjs';

export const BASE = (process.env.LABD_URL || '').replace(/\/+$/, '');
export const ADMIN_PW = process.env.LABD_ADMIN_PASSWORD || '';
export const STATE_DIR = process.env.LABD_STATE_DIR || '';
if (!BASE || !ADMIN_PW) {
  throw new Error('LABD_URL and LABD_ADMIN_PASSWORD must be set (use tests/e2e/run.sh)');
}

export const WIDE = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };
export const isCspMessage = (text) => /Content[- ]Security[- ]Policy/i.test(text);

/* A browser, plus every console message and page error of the pages it opened. */
export class Browser {
  constructor() {
    this.consoleLog = [];
    this.pageErrors = [];
    this.contexts = [];
  }

  async start() {
    this.browser = await launchChromium();
  }

  async stop() {
    for (const c of this.contexts) await c.close().catch(() => {});
    if (this.browser) await this.browser.close();
  }

  /* A fresh profile (no cookies) with one page at the given viewport; confirm() accepted. */
  async page(viewport = WIDE) {
    const context = await this.browser.newContext({ baseURL: BASE, viewport });
    this.contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    page.setDefaultNavigationTimeout(20_000);
    page.on('console', (m) => this.consoleLog.push({ type: m.type(), text: m.text(), url: page.url() }));
    page.on('pageerror', (e) => this.pageErrors.push(`${page.url()}: ${e.message}`));
    page.on('dialog', (d) => d.accept());
    return page;
  }

  cspMessages() {
    return this.consoleLog.filter((m) => isCspMessage(m.text));
  }
}

export function uniqueName(prefix) {
  return `${prefix}${randomBytes(3).toString('hex')}`;
}

/* Logs in through the form and waits for the page the login goes to. */
export async function formLogin(page, username, password, next = '/dashboard') {
  await page.goto(`/login?next=${encodeURIComponent(next)}`);
  await page.locator('#username').fill(username);
  await page.locator('#password').fill(password);
  await Promise.all([
    page.waitForURL((u) => u.pathname === next),
    page.locator('#password').press('Enter'),
  ]);
  await page.locator('#whoami', { hasText: `Signed in as ${username}` }).waitFor();
}

/* JSON API from Node, outside the browser: {cookie, csrf}. */
export async function apiLogin(username, password) {
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
  return { cookie, csrf: body.csrf_token };
}

export async function api(session, method, path, body) {
  const headers = { Cookie: session.cookie, Accept: 'application/json' };
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
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = { raw: text };
  }
  return { status: res.status, body: json };
}

/* Creates a user through the API; returns their password. */
export async function createUser(admin, name) {
  const password = `pw-${name}-${randomBytes(6).toString('hex')}`;
  const r = await api(admin, 'POST', '/users', { name, password });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return password;
}

/* Polls fn until it returns a truthy value; fails with what() after timeoutMs. */
export async function waitFor(fn, what, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/* The page scrolls no wider than the viewport, and each selector is visible inside it. */
export async function assertFits(page, selectors) {
  const { scroll, client } = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    client: document.documentElement.clientWidth,
  }));
  assert.ok(scroll <= client, `${page.url()}: page is ${scroll} px wide in a ${client} px viewport`);
  for (const sel of selectors) {
    const box = await page.locator(sel).first().boundingBox();
    assert.ok(box, `${sel} is not visible on ${page.url()}`);
    assert.ok(box.x >= 0 && box.x + box.width <= client + 1,
      `${sel} (${box.x}..${box.x + box.width}) sticks out of the ${client} px viewport`);
  }
}

/* Every input and select of main has an accessible name (label or aria-label). */
export async function assertLabelled(page) {
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll('main input:not([type=hidden]), main select')]
      .filter((el) => !el.hidden && el.offsetParent !== null)
      .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
      .map((el) => el.id || el.name || el.outerHTML.slice(0, 60)));
  assert.deepEqual(unlabelled, [], `unlabelled controls on ${page.url()}`);
}
