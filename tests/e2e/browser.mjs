// browser.mjs - how every browser test starts Debian's Chromium (not a test file).
// The flags keep Chromium off the network this machine does not have.
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

/* args: more command-line flags; env: Chromium's environment (default: node's). */
export function launchChromium({ args = [], env } = {}) {
  return chromium.launch({
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
}
