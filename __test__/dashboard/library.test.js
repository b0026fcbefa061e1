'use strict';
// The library dashboard in a real browser, mounted in a real Express app (a child process) under a
// bounded overload: sign-in is refused without the token, the tier table and chart show background
// shed while critical is served, a probe flood's ban shows in the bans chart, every page renders without console errors, at 1280 and 360 px, in
// light and dark themes; screenshots are saved and non-empty.
const test = require('node:test');
const assert = require('node:assert/strict');
const { request } = require('../helpers/http');
const { startDashboardApp, overload } = require('../helpers/dashboard-app');
const { launch, screenshot, skip } = require('./browser');

const TOKEN = 'library-dashboard-test-token-0123456789';
const LOAD_MS = 3000;

async function startApp(t) {
  return (await startDashboardApp(t, { DASHBOARD_TOKEN: TOKEN })).port;
}

test('the data endpoints refuse a request without the token', { skip }, async (t) => {
  const port = await startApp(t);
  for (const p of ['info', 'history', 'stream', 'stats']) {
    const r = await request(port, { path: `/tiergate/api/dashboard/${p}` });
    assert.equal(r.status, 401, p);
    assert.equal(r.json.error, 'UNAUTHORIZED');
    const wrong = await request(port, { path: `/tiergate/api/dashboard/${p}`, headers: { authorization: 'Bearer not-the-token-but-long-enough' } });
    assert.equal(wrong.status, 401, p);
  }
  const app = await request(port, { path: '/tiergate/' });
  assert.equal(app.status, 200);
  assert.match(app.headers['content-security-policy'], /script-src 'self'/);
  assert.doesNotMatch(app.body, /<script>(?!<\/script>)/, 'no inline script');
  assert.equal((await request(port, { path: '/tiergate' })).headers.location, '/tiergate/');
});

test('library dashboard under overload: background shed while critical is served, in the table and the chart', { skip, timeout: 90_000 }, async (t) => {
  const port = await startApp(t);
  const { page, errors } = await launch(t);
  const base = `http://127.0.0.1:${port}/tiergate`;

  await page.goto(base);
  assert.equal(page.url(), `${base}/`);
  await page.waitForSelector('#signin');
  assert.ok(await screenshot(page, 'signin') > 0);

  // Refused: a wrong token gets the message and no data.
  await page.fill('#token', 'wrong-token-wrong-token-wrong');
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('#signin-msg.error');
  assert.equal(await page.textContent('#signin-msg'), 'The token was refused.');
  assert.equal(await page.$('#tiers'), null);
  // The 401 of the refused sign-in is the browser's own console line; it is the only one allowed.
  const refused = errors.splice(0).filter((e) => !/status of 401/.test(e));
  assert.deepEqual(refused, []);

  await page.fill('#token', TOKEN);
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('#tiers tbody tr[data-tier="background"]');
  assert.equal(await page.getAttribute('nav a[href="#/live"]', 'aria-current'), 'page');

  const seen = await overload(port, LOAD_MS);
  assert.ok((seen.background[503] || 0) > 0, `the app did not shed background: ${JSON.stringify(seen)}`);
  assert.ok((seen.critical[200] || 0) > 0, `critical was not served: ${JSON.stringify(seen)}`);

  // The page's own figures (from the stream), not ours: background shed, critical admitted and never shed.
  const cell = (tier, field) => `#tiers td[data-tier="${tier}"][data-field="${field}"]`;
  await page.waitForFunction(([bg, cr]) => {
    const n = (sel) => Number((document.querySelector(sel) || {}).textContent.replace(/,/g, ''));
    return n(bg) > 0 && n(cr) > 0;
  }, [cell('background', 'shedTotal'), cell('critical', 'admittedTotal')], { timeout: 10_000 });
  assert.equal(await page.textContent(cell('critical', 'shedTotal')), '0');
  const chart = await page.$eval('#chart-tier-background', (el) => el.tgChart());
  assert.ok(chart[2].some((v) => v > 0), 'the background chart has no shed point');
  const critical = await page.$eval('#chart-tier-critical', (el) => el.tgChart());
  assert.ok(critical[1].some((v) => v > 0), 'the critical chart has no admitted point');
  assert.ok(critical[2].every((v) => v === 0 || v === null), 'the critical chart shows sheds');
  for (const id of ['chart-controller', 'chart-learned', 'chart-lag', 'chart-elu', 'chart-queue', 'chart-wait', 'chart-inflight']) assert.ok(await page.$(`#${id} canvas`), id);
  assert.equal(await page.$('#tiers td[data-field="shadowShed"]'), null, 'no shadow column outside shadow mode');

  // A probe flood from one client gets it banned: the bans series shows a ban in force.
  // (Background, the probes' tier, may still be shed as the loop recovers: a 503 is no probe; bounded.)
  const probes = [];
  for (let i = 0; i < 400 && probes.length < 4; i++) {
    const st = (await request(port, { path: `/missing/${i}`, headers: { 'x-forwarded-for': '198.51.100.9' } })).status;
    if (st === 503) await new Promise((r) => setTimeout(r, 25));
    else probes.push(st);
  }
  assert.deepEqual(probes, [404, 404, 404, 403]);
  await page.waitForFunction(() => {
    const el = document.querySelector('#chart-bans');
    // Series: active, added /s, refused /s (the fourth probe was refused by the ban).
    return el !== null && typeof el.tgChart === 'function' && el.tgChart()[1].some((v) => v >= 1) && el.tgChart()[3].some((v) => v > 0);
  }, null, { timeout: 10_000 });
  assert.ok(await page.$('#chart-bans canvas'), 'the bans chart is drawn');
  assert.equal(await page.textContent('#limit-overrides'), 'Limit overrides in force: 1', 'the operator\'s override of one key');
  assert.ok(await screenshot(page, 'live-bans') > 0);
  assert.ok(await screenshot(page, 'live-light') > 0);

  // Dark theme, chosen from the keyboard.
  await page.focus('#theme');
  await page.selectOption('#theme', 'dark');
  assert.equal(await page.getAttribute('html', 'data-theme'), 'dark');
  await page.waitForSelector('#chart-lag canvas');
  assert.ok(await screenshot(page, 'live-dark') > 0);

  // 360 px wide: nothing wider than the screen.
  await page.setViewportSize({ width: 360, height: 780 });
  await page.waitForTimeout(300);
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 360, `the page is ${width} px wide at 360 px`);
  assert.ok(await screenshot(page, 'live-360') > 0);

  // Keyboard: the first Tab reaches the skip link, which moves focus to the content.
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.reload();
  await page.waitForSelector('#tiers');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.className), 'skip');
  // Pause stops the live redraws (moving content can be stopped), Resume starts them again.
  await page.click('#pause');
  assert.equal(await page.getAttribute('#pause', 'aria-pressed'), 'true');
  await page.click('#pause');

  await page.emulateMedia({ reducedMotion: 'reduce' });
  assert.equal(await page.evaluate(() => matchMedia('(prefers-reduced-motion: reduce)').matches), true);

  // Sign out: the token is forgotten.
  await page.click('#signout');
  await page.waitForSelector('#signin');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('tiergate.token')), null);
  assert.deepEqual(errors, []);
});

test('shadow mode on the page: what the gatekeeper would have shed, per tier, while it sheds nothing', { skip, timeout: 90_000 }, async (t) => {
  const { port } = await startDashboardApp(t, { DASHBOARD_TOKEN: TOKEN, TG_SHADOW: '1' });
  const { page, errors } = await launch(t);
  await page.goto(`http://127.0.0.1:${port}/tiergate/`);
  await page.fill('#token', TOKEN);
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('#tiers tbody tr[data-tier="background"]');
  assert.match(await page.textContent('#tiers-h'), /shadow mode/);
  await overload(port, LOAD_MS);
  const cell = (tier, field) => `#tiers td[data-tier="${tier}"][data-field="${field}"]`;
  await page.waitForFunction((sel) => Number(document.querySelector(sel).textContent.replace(/,/g, '')) > 0, cell('background', 'shadowShedTotal'), { timeout: 10_000 });
  assert.equal(await page.textContent(cell('critical', 'shadowShedTotal')), '0');
  const chart = await page.$eval('#chart-tier-background', (el) => el.tgChart());
  assert.ok(chart[4].some((v) => v > 0), 'the background chart has no would-shed point');
  // The gatekeeper itself shed nothing (the concurrency gate behind it may have refused).
  const { json: stats } = await request(port, { path: '/status/stats' });
  assert.equal(stats.gatekeeper.tiers.background.shed, 0);
  assert.ok(stats.gatekeeper.tiers.background.shadowShed > 0);
  assert.ok(await screenshot(page, 'live-shadow') > 0);
  assert.deepEqual(errors, []);
});
