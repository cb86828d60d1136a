// The admin console's GPU panel with a pool of devices (gpu_devices.ini: the stand-in NVML
// says card 0 has seven 1g.18gb MIG instances; [gpu] shares hands card 1 out four ways):
// each device is a row with its id, kind and holder, and "Read the devices again" asks
// POST /api/v1/gpus/rescan and says so.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_PW, Browser, formLogin } from './console-lib.mjs';

const b = new Browser();

before(async () => {
  await b.start();
});

after(async () => {
  await b.stop();
});

test('the GPU panel lists each MIG instance and share with its kind', async () => {
  const page = await b.page();
  await formLogin(page, 'admin', ADMIN_PW, '/admin');
  const rows = page.locator('#gpus tbody tr[data-device]');
  await page.locator('#gpus tbody tr[data-device="1/share3"]').waitFor();
  assert.equal(await rows.count(), 11);
  const mig = page.locator('#gpus tbody tr[data-device="0/gi1/ci0"]');
  assert.equal(await mig.getAttribute('data-kind'), 'mig');
  assert.match(await mig.locator('.kind').textContent(), /^MIG 1g\.18gb \(card 0\)MIG-5d8e6f2a/);
  assert.match(await mig.textContent(), /0 B of 18(\.0)? GiB/);
  const share = page.locator('#gpus tbody tr[data-device="1/share2"]');
  assert.equal(await share.getAttribute('data-kind'), 'share');
  assert.equal((await share.locator('.kind').textContent()).trim(), 'share of card 1');
  assert.match(await share.textContent(), /of 20(\.0)? GiB budget/);
  assert.equal((await share.locator('.holder').textContent()).trim(), '—');

  await page.locator('#gpus-rescan').click();
  await page.locator('#gpus-message', { hasText: 'Devices read again.' }).waitFor();
  assert.equal(await rows.count(), 11);
  assert.deepEqual(b.pageErrors, []);
});
