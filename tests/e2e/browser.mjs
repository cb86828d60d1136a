// browser.mjs - how every browser test starts Debian's Chromium (not a test file).
// The flags keep Chromium off the network this machine does not have.
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

/* Chromium fails a navigation with ERR_NETWORK_CHANGED when an interface of this machine
 * comes or goes (a runtime's veth, the other e2e lane's namespaces): the machine's doing,
 * not labd's, and no user's browser on another machine sees it. Every page's goto and
 * reload that failed so is made once more; any other failure, or a second one, stands.
 * (Requests a page makes itself are stepOnce's, in lab-lib.mjs.) */
const NETWORK_CHANGED = /net::ERR_NETWORK_CHANGED/;
const retrying = new WeakSet();

function retryNavigations(page) {
  if (retrying.has(page)) return page;
  retrying.add(page);
  for (const name of ['goto', 'reload']) {
    const once = page[name].bind(page);
    page[name] = async (...args) => {
      try {
        return await once(...args);
      } catch (err) {
        if (!NETWORK_CHANGED.test(String(err?.message))) throw err;
        console.error(`# ${name} ${typeof args[0] === 'string' ? args[0] : ''}: the machine's ` +
                      'network changed under the browser; once more');
        // after Chromium's own error page, whose load would interrupt the second try
        await page.waitForURL(/^chrome-error:/, { timeout: 2000 }).catch(() => {});
        return once(...args);
      }
    };
  }
  return page;
}

/* args: more command-line flags; env: Chromium's environment (default: node's). */
export async function launchChromium({ args = [], env } = {}) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    env,
    args: [
      ...args,
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  // browser.newPage makes its context through this.newContext too
  const newContext = browser.newContext.bind(browser);
  browser.newContext = async (...a) => {
    const context = await newContext(...a);
    context.on('page', retryNavigations);
    const newPage = context.newPage.bind(context);
    context.newPage = async () => retryNavigations(await newPage());
    return context;
  };
  return browser;
}
