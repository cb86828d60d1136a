// labd browser test of single sign-on: Chromium clicks "Sign in with Test IdP" on
// labd's login page, signs in at a real OpenID Provider (npm oidc-provider,
// tests/oidc/provider.mjs) on loopback, allows labd, and lands on labd's
// dashboard as the provider's user; logging out ends the session at both.
//
// It needs a labd whose [oidc] names the provider and a provider that knows
// labd's redirect URI, so it starts both itself (labd from $BUILD, default
// build/) rather than using run.sh's daemon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { launchChromium } from './browser.mjs';

const T = { timeout: 90_000 };
const REPO = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const BUILD = process.env.BUILD || 'build';
const LABD = path.isAbsolute(BUILD) ? path.join(BUILD, 'labd') : path.join(REPO, BUILD, 'labd');
const SECRET = 'e2e-client-secret-0123456789';

const freePort = () => new Promise((resolve) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

async function waitFor(what, fn, ms = 20_000) {
  const end = Date.now() + ms;
  for (;;) {
    try { if (await fn()) return; } catch { /* not yet */ }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

let browser, provider, labd, dir, labdUrl, issuer;

before(async () => {
  // what deploy/install-deps.sh does, for a checkout that skipped it
  if (!fs.existsSync(path.join(REPO, 'tests/oidc/node_modules/oidc-provider'))) {
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--silent'], { cwd: path.join(REPO, 'tests/oidc'), stdio: 'inherit' });
  }
  const [idpPort, labdPort] = [await freePort(), await freePort()];
  issuer = `http://127.0.0.1:${idpPort}`;
  labdUrl = `http://localhost:${labdPort}`; // labd's origin: [server] user_domain
  provider = spawn('node', [path.join(REPO, 'tests/oidc/provider.mjs')], {
    env: { ...process.env, OIDC_PORT: String(idpPort), OIDC_CLIENT_SECRET: SECRET,
      OIDC_REDIRECT_URIS: `${labdUrl}/oidc/callback`, OIDC_LOGOUT_URIS: `${labdUrl}/login` },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let said = '';
  provider.stdout.on('data', (d) => { said += d; });
  await waitFor('the OpenID Provider', () => said.includes('ready '));

  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'labd-e2e-oidc-'));
  fs.chmodSync(dir, 0o755);
  fs.writeFileSync(path.join(dir, 'labd.ini'), [
    '[server]', `listen = 127.0.0.1:${labdPort}`, `state_dir = ${dir}/state`, `web_root = ${REPO}/web`,
    '[auth]', 'scrypt_n = 1024',
    '[oidc]', `issuer = ${issuer}`, 'name = Test IdP', 'client_id = labd', `client_secret = ${SECRET}`,
    'scopes = openid profile email groups', '',
  ].join('\n'));
  labd = spawn(LABD, ['--config', path.join(dir, 'labd.ini')], {
    stdio: ['ignore', fs.openSync(path.join(dir, 'labd.log'), 'w'), 'inherit'], detached: true,
  });
  await waitFor('labd', async () => (await fetch(`${labdUrl.replace('localhost', '127.0.0.1')}/api/v1/health`)).ok);
  browser = await launchChromium();
});

after(async () => {
  if (browser) await browser.close();
  for (const p of [labd, provider]) {
    if (p && p.exitCode === null) {
      const done = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      await done;
    }
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('Sign in with the provider lands on the dashboard; logout ends both sessions', T, async () => {
  const context = await browser.newContext({ baseURL: labdUrl });
  const page = await context.newPage();
  // nothing but labd and the provider on loopback: any other request fails the test
  const elsewhere = [];
  await page.route('**/*', (route) => {
    const u = new URL(route.request().url());
    if (u.hostname === 'localhost' || u.hostname === '127.0.0.1') return route.continue();
    elsewhere.push(u.href);
    return route.abort();
  });

  await page.goto('/login');
  const sso = page.locator('#sso-link');
  await sso.waitFor({ state: 'visible' });
  assert.equal((await sso.textContent()).trim(), 'Sign in with Test IdP');
  await sso.click();

  await page.waitForURL((url) => url.origin === issuer && url.pathname.startsWith('/interaction/'));
  await page.locator('#login').fill('alice');
  await page.locator('#password').fill('alice-password');
  await page.locator('#sign-in').click();
  await page.locator('#allow').click();

  await page.waitForURL(`${labdUrl}/dashboard`);
  await page.locator('#whoami', { hasText: 'alice' }).waitFor();

  await page.locator('#logout').click();
  // the provider asks whether to sign out there too, then sends the browser back
  await page.waitForURL((url) => url.origin === issuer);
  await page.locator('button[name="logout"]').click();
  await page.waitForURL(`${labdUrl}/login`);
  const me = await page.request.get('/api/v1/me');
  assert.equal(me.status(), 401, 'labd session ended');
  assert.deepEqual(elsewhere, []);
  await context.close();
});
