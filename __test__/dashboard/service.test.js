'use strict';
// The service's pages in a real browser against a real `tiergate serve` process (embedded store in a
// temp folder): sign-in refused without the token; a client created through the form (after the
// API's validation message is shown beside the field); the request lab's 100 checks against a limit
// of 10 allow exactly 10, in the page and in the API; the analytics chart gains points; a ban lifted
// from the page. Every page renders without console errors and is saved as a non-empty screenshot.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { startService, tmpdir, admin, check, TOKEN } = require('../service/helpers');
const { launch, screenshot, skip } = require('./browser');

// The browser logs every non-2xx fetch as a console error ("Failed to load resource: ... status of
// 429"). Those the steps provoke on purpose (a refused token, a rejected form, denials) are taken
// out per step; any other console error, and every page error, fails the test.
function expected(errors, statuses) {
  const re = new RegExp(`Failed to load resource: the server responded with a status of (${statuses.join('|')})`);
  const unexpected = errors.splice(0).filter((e) => !re.test(e));
  assert.deepEqual(unexpected, []);
}

test('the service dashboard: sign-in, a client from the form, the request lab exact at 10 of 100, analytics, bans', { skip, timeout: 120_000 }, async (t) => {
  const data = tmpdir('tiergate-dash-svc-');
  const svc = startService({ flags: { data } });
  t.after(async () => {
    await svc.stop();
    fs.rmSync(data, { recursive: true, force: true });
  });
  await svc.ready;
  const { page, errors } = await launch(t);

  await page.goto(`${svc.url}/`);
  await page.waitForSelector('#signin');
  await page.fill('#token', 'not-the-admin-token-at-all');
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('#signin-msg.error');
  assert.equal(await page.textContent('#signin-msg'), 'The token was refused.');
  expected(errors, [401]);

  await page.fill('#token', TOKEN);
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('#overview-cards [data-card="Configured clients"]');
  assert.equal(await page.textContent('[data-card="Configured clients"]'), '0');
  assert.ok(await screenshot(page, 'service-overview') > 0);

  // Create a client through the form: first a value the API refuses, whose message appears by the field.
  await page.click('nav a[href="#/clients"]');
  await page.waitForSelector('#new-client');
  await page.focus('#new-client');
  await page.keyboard.press('Enter'); // from the keyboard
  await page.waitForSelector('#client-form');
  await page.fill('#f-clientKey', 'lab-demo');
  await page.selectOption('#f-algorithm', 'sliding_window');
  await page.fill('#f-maxRequests', '2.5');
  await page.fill('#f-windowSeconds', '60');
  await page.click('#client-form button[type=submit]');
  await page.waitForSelector('#e-maxRequests:not(:empty)');
  assert.match(await page.textContent('#e-maxRequests'), /maxRequests must be an integer/);
  assert.equal(await page.getAttribute('#f-maxRequests', 'aria-invalid'), 'true');
  assert.ok(await screenshot(page, 'service-client-form-error') > 0);
  expected(errors, [400]);
  await page.fill('#f-maxRequests', '10');
  await page.click('#client-form button[type=submit]');
  await page.waitForSelector('#client-state dl');
  assert.equal(page.url(), `${svc.url}/#/clients/lab-demo`);
  const created = await admin(svc.url, 'GET', '/api/v1/admin/clients/lab-demo');
  assert.deepEqual({ ...created.body.client, createdAt: undefined, updatedAt: undefined }, { clientKey: 'lab-demo', algorithm: 'sliding_window', maxRequests: 10, windowSeconds: 60, createdAt: undefined, updatedAt: undefined });
  assert.ok(await screenshot(page, 'service-client') > 0);

  // The list finds it by search and by algorithm.
  await page.goto(`${svc.url}/#/clients`);
  await page.waitForSelector('#clients tr[data-client="lab-demo"]');
  await page.fill('#client-search', 'nothing-like-it');
  assert.equal(await page.$('#clients tr[data-client="lab-demo"]'), null);
  await page.fill('#client-search', 'lab');
  await page.selectOption('#client-filter', 'sliding_window');
  assert.ok(await page.$('#clients tr[data-client="lab-demo"]'));
  assert.ok(await screenshot(page, 'service-clients') > 0);

  // Analytics before: no bucket with checks yet.
  await page.goto(`${svc.url}/#/analytics/1m`);
  await page.waitForSelector('#chart-analytics[data-points]');
  assert.equal(await page.getAttribute('#chart-analytics', 'data-points'), '0');

  // The request lab: 100 real checks, 10 at a time, against a window of 10.
  await page.goto(`${svc.url}/#/lab/lab-demo`);
  await page.waitForSelector('#lab-client option[value="lab-demo"]', { state: 'attached' });
  assert.equal(await page.inputValue('#lab-client'), 'lab-demo');
  await page.fill('#lab-count', '100');
  await page.fill('#lab-concurrency', '10');
  await page.click('#lab-run');
  await page.waitForFunction(() => (document.querySelector('[data-lab="State"]') || {}).textContent === 'done', null, { timeout: 60_000 });
  assert.equal(await page.textContent('[data-lab="Allowed"]'), '10');
  assert.equal(await page.textContent('[data-lab="Denied"]'), '90');
  assert.equal(await page.textContent('[data-lab="Errors"]'), '0');
  assert.equal(await page.$$eval('#lab-results tr[data-result="allowed"]', (r) => r.length), 10);
  assert.equal(await page.$$eval('#lab-results tr[data-result="denied"]', (r) => r.length), 90);
  assert.ok(await screenshot(page, 'service-lab') > 0);
  expected(errors, [429]);
  const activity = await admin(svc.url, 'GET', '/api/v1/admin/clients/lab-demo/activity');
  assert.equal(activity.body.summary.allowedRequests, 10);
  assert.equal(activity.body.summary.deniedRequests, 90);

  // A cancelled run stops early and says so.
  await page.fill('#lab-count', '1000');
  await page.fill('#lab-concurrency', '1');
  await page.click('#lab-run');
  await page.waitForSelector('#lab-cancel:not([disabled])');
  await page.click('#lab-cancel');
  await page.waitForFunction(() => (document.querySelector('[data-lab="State"]') || {}).textContent === 'cancelled', null, { timeout: 30_000 });
  assert.ok(Number(await page.textContent('[data-lab="Sent"]')) < 1000);
  expected(errors, [429]);

  // Analytics after: the lab's buckets are there, and a later check adds a point while the page is open.
  await page.goto(`${svc.url}/#/analytics/1m`);
  await page.waitForFunction(() => Number((document.querySelector('#chart-analytics') || { dataset: {} }).dataset.points) > 0, null, { timeout: 15_000 });
  const before = Number(await page.getAttribute('#chart-analytics', 'data-points'));
  await new Promise((r) => setTimeout(r, 1100)); // into the next one-second bucket
  for (let i = 0; i < 3; i++) await check(svc.url, 'lab-demo');
  await page.waitForFunction((n) => Number(document.querySelector('#chart-analytics').dataset.points) > n, before, { timeout: 15_000 });
  const drawn = await page.$eval('#chart-analytics', (el) => el.tgChart());
  assert.ok(drawn[1].reduce((a, v) => a + v, 0) >= 103, 'the chart holds every check');
  assert.ok(await screenshot(page, 'service-analytics') > 0);
  for (const r of ['5m', '15m', '1h', '24h']) {
    await page.click(`.pills button:text-is("${r}")`);
    await page.waitForFunction((x) => document.querySelector('#analytics-totals').textContent.startsWith(`${x}:`), r);
  }

  // Edit the policy through the form: the API replaces it and resets the client's state.
  await page.goto(`${svc.url}/#/clients/lab-demo/edit`);
  await page.waitForSelector('#client-form #f-maxRequests');
  assert.equal(await page.inputValue('#f-maxRequests'), '10');
  assert.equal(await page.getAttribute('#f-clientKey', 'readonly'), '');
  await page.fill('#f-maxRequests', '20');
  await page.click('#client-form button[type=submit]');
  await page.waitForSelector('#client-state [data-state="remaining"]');
  assert.equal((await admin(svc.url, 'GET', '/api/v1/admin/clients/lab-demo')).body.client.maxRequests, 20);
  assert.equal(await page.textContent('#client-state [data-state="remaining"]'), '20');

  // Bans: one added through the API is listed, lifted from the page, and the client is served again.
  await admin(svc.url, 'POST', '/api/v1/admin/bans', { clientKey: 'lab-demo', reason: 'probe' });
  assert.equal((await check(svc.url, 'lab-demo')).status, 403);
  await page.goto(`${svc.url}/#/bans`);
  await page.waitForSelector('#bans tr[data-ban="lab-demo"]');
  assert.ok(await screenshot(page, 'service-bans') > 0);
  await page.click('#bans tr[data-ban="lab-demo"] button');
  await page.waitForSelector('#bans tr[data-ban="lab-demo"]', { state: 'detached' });
  assert.deepEqual((await admin(svc.url, 'GET', '/api/v1/admin/bans')).body.bans, []);
  assert.notEqual((await check(svc.url, 'lab-demo')).status, 403);
  // And one added from the page's form.
  await page.fill('#ban-key', 'lab-demo');
  await page.fill('#ban-ttl', '600');
  await page.click('#ban-form button[type=submit]');
  await page.waitForSelector('#bans tr[data-ban="lab-demo"]');
  assert.equal((await admin(svc.url, 'GET', '/api/v1/admin/bans')).body.bans[0].clientKey, 'lab-demo');

  for (const [hash, name, sel] of [['#/how', 'service-how', '#token-bucket'], ['#/live', 'service-process', '#chart-lag canvas'], ['#/overview', 'service-overview-after', '#recent tbody tr']]) {
    await page.goto(`${svc.url}/${hash}`);
    await page.waitForSelector(sel);
    assert.ok(await screenshot(page, name) > 0);
  }
  assert.equal(await page.textContent('[data-card="Configured clients"]'), '1');

  // 360 px wide: no page is wider than the screen (tables scroll inside their panels).
  await page.setViewportSize({ width: 360, height: 780 });
  for (const hash of ['#/overview', '#/clients', '#/clients/lab-demo', '#/analytics', '#/bans', '#/lab', '#/how', '#/live']) {
    await page.goto(`${svc.url}/${hash}`);
    await page.waitForSelector('main h1');
    await page.waitForTimeout(200);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 360, `${hash} is ${width} px wide at 360 px`);
  }
  assert.ok(await screenshot(page, 'service-process-360') > 0);
  await page.setViewportSize({ width: 1280, height: 900 });

  // Delete with confirmation: Cancel keeps it, Delete removes it.
  await page.goto(`${svc.url}/#/clients/lab-demo`);
  await page.click('#delete-client');
  await page.waitForSelector('#confirm-delete[open]');
  await page.keyboard.press('Escape');
  assert.equal((await admin(svc.url, 'GET', '/api/v1/admin/clients/lab-demo')).status, 200);
  await page.click('#delete-client');
  await page.click('#confirm-delete-yes');
  await page.waitForFunction(() => location.hash === '#/clients');
  assert.equal((await admin(svc.url, 'GET', '/api/v1/admin/clients/lab-demo')).status, 404);
  expected(errors, []);
});
